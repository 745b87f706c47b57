//! Tier B's guard: a process beside the command that, when loom dies, kills the command's session.
//!
//! Why it exists: tier B has no pid namespace whose end takes everything with it. The command leads a session of its
//! own and seccomp denies `setsid` to everything it starts, so all its descendants stay in that session, and loom
//! kills the session when the call ends ([`kill_session`], also what the guard runs). But loom killed with SIGKILL kills nothing:
//! the command died by its parent-death signal, and what it had started in the background kept running, confined,
//! until it ended. The guard is loom's child with its own parent-death signal (SIGTERM); on loom's death it scans
//! `/proc` for the session and kills every member, as loom would have.
//!
//! It learns the session from the command's process itself, which writes its pid (its session's id once it has run
//! `setsid`) into the guard's pipe before it does anything else, and which checks after arming its own parent-death
//! signal that loom is still its parent: either the guard finds the pid in the pipe when loom dies, or the command's
//! process finds loom gone and never execs. The command cannot signal the guard: Landlock's signal scope (ABI 6 and
//! later) keeps a confined process from signalling one outside its domain; with an older ABI it can, and then only
//! gives up its own clean-up.
//!
//! The guard is a fork of loom that never execs, like the guard of tiers A and C (`guard`): between the clone and its
//! end it makes raw system calls only — no allocation, no lock, no panic — and holds no descriptor but its pipe.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicI32, Ordering};

use crate::error::SpawnError;

/// The read end of the guard's pipe, in the guard (-1 before).
static PIPE: AtomicI32 = AtomicI32::new(-1);
/// loom's pid, in the guard.
static LOOM: AtomicI32 = AtomicI32::new(0);

/// The guard of one tier B command; dropping it ends the guard (SIGKILL, reaped).
#[derive(Debug)]
pub(crate) struct SessionGuard {
    pid: libc::pid_t,
}

impl SessionGuard {
    /// Forks the guard. Returns it and the write end of its pipe, for the command's process to write its pid into
    /// (`clone_exec`); the write end is close-on-exec.
    pub(crate) fn start() -> Result<(SessionGuard, OwnedFd), SpawnError> {
        let (r, w) = crate::error::pipe()?;
        let loom = std::process::id() as libc::pid_t;
        let read_fd = std::os::fd::AsRawFd::as_raw_fd(&r);
        // SAFETY: sigset_t values filled before use; a fork without the C library's fork handlers, with every signal
        // blocked so that none reaches the child before its handlers are its own (they stay blocked there but
        // SIGTERM, which is unblocked once its handler is in place); the child runs `guard_until_loom_dies`, which
        // makes raw system calls only and never returns.
        let (pid, error) = unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
            let pid = libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_ulong, 0, 0, 0, 0);
            if pid == 0 {
                guard_until_loom_dies(loom, read_fd)
            }
            let error = io::Error::last_os_error();
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            (pid, error)
        };
        if pid < 0 {
            return Err(SpawnError::Setup(format!(
                "cannot start the session's guard: {error}"
            )));
        }
        drop(r);
        Ok((
            SessionGuard {
                pid: pid as libc::pid_t,
            },
            w,
        ))
    }

    /// The guard's pid (for tests).
    #[cfg(test)]
    pub(crate) fn id(&self) -> libc::pid_t {
        self.pid
    }
}

impl Drop for SessionGuard {
    fn drop(&mut self) {
        // SAFETY: our own child, killed and reaped; its pid cannot be reused before the reap.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            let mut status = 0;
            while libc::waitpid(self.pid, &mut status, 0) < 0
                && *libc::__errno_location() == libc::EINTR
            {}
        }
    }
}

/// The guard's life: its own process group (so a terminal's signals to loom's group do not end it), its pipe and
/// nothing else open, SIGTERM on loom's death, then nothing until that or loom's SIGKILL.
///
/// # Safety
/// Only in the child of a fork of a possibly multi-threaded process.
unsafe fn guard_until_loom_dies(loom: libc::pid_t, read_fd: libc::c_int) -> ! {
    // SAFETY (all calls below): raw system calls and async-signal-safe libc wrappers on integers and stack memory.
    unsafe {
        PIPE.store(read_fd, Ordering::SeqCst);
        LOOM.store(loom, Ordering::SeqCst);
        libc::setpgid(0, 0);
        // Nothing open but the pipe's read end, which the handler reads without blocking — first of all, so that
        // no copy of the write end (this fork has one) can keep a read waiting once loom is gone.
        let fd = read_fd as libc::c_uint;
        let below = fd == 0 || libc::syscall(libc::SYS_close_range, 0u32, fd - 1, 0u32) == 0;
        if !below || libc::syscall(libc::SYS_close_range, fd + 1, u32::MAX, 0u32) != 0 {
            // a kernel without close_range (before 5.9)
            for other in 0..4096 {
                if other != read_fd {
                    libc::close(other);
                }
            }
        }
        libc::fcntl(read_fd, libc::F_SETFL, libc::O_NONBLOCK);
        // none of loom's handlers runs here (a cancel handler would kill what loom last ran)
        let mut default: libc::sigaction = std::mem::zeroed();
        default.sa_sigaction = libc::SIG_DFL;
        libc::sigemptyset(&mut default.sa_mask);
        for sig in 1..=64 {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                libc::sigaction(sig, &default, std::ptr::null_mut());
            }
        }
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = kill_the_session as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGTERM, &action, std::ptr::null_mut());
        // everything else stays blocked: only SIGKILL (loom's, at the call's end) and SIGTERM reach the guard
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0);
        if libc::getppid() != loom {
            // loom died before the signal was armed
            kill_the_session(libc::SIGTERM);
        }
        loop {
            libc::pause();
        }
    }
}

/// The guard's handler of SIGTERM: when loom is gone, the session named in the pipe (if any) is killed and the
/// guard ends; a SIGTERM from anyone else while loom lives is ignored.
extern "C" fn kill_the_session(_: libc::c_int) {
    // SAFETY: raw system calls on integers and stack memory.
    unsafe {
        if libc::getppid() == LOOM.load(Ordering::SeqCst) {
            return;
        }
        let mut pid = [0u8; 4];
        let n = libc::read(PIPE.load(Ordering::SeqCst), pid.as_mut_ptr().cast(), 4);
        if n == 4 {
            kill_session(libc::pid_t::from_ne_bytes(pid));
        }
        libc::_exit(0)
    }
}

/// SIGKILL to every process of session `sid` (tier B: the command's session), found by scanning `/proc` until a scan
/// finds none, so a process forked during a scan is found by the next one; bounded (a fork bomb is bounded by
/// RLIMIT_NPROC), so a failure to converge cannot hang the caller. A process is signalled through a pidfd opened
/// before its session is read again, so a reused pid is never hit. Stack buffers and raw calls only: loom runs it when
/// a call ends (before the leader is reaped, so the session's id cannot be reused meanwhile), the guard in its
/// signal handler.
pub(crate) fn kill_session(sid: libc::pid_t) {
    if sid <= 1 {
        return;
    }
    for _ in 0..64 {
        // SAFETY: opening a constant NUL-terminated path.
        let dir = unsafe {
            libc::open(
                c"/proc".as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if dir < 0 {
            return;
        }
        let mut found = false;
        let mut buf = [0u8; 4096];
        loop {
            // SAFETY: reading directory entries into our buffer, by its length.
            let n =
                unsafe { libc::syscall(libc::SYS_getdents64, dir, buf.as_mut_ptr(), buf.len()) };
            let Ok(n) = usize::try_from(n) else { break };
            if n == 0 {
                break;
            }
            let mut at = 0;
            // struct linux_dirent64: d_ino (8), d_off (8), d_reclen (2), d_type (1), d_name (NUL-terminated)
            while let Some(len) = buf.get(at + 16..at + 18) {
                let reclen = usize::from(u16::from_ne_bytes([len[0], len[1]]));
                if reclen == 0 || at + reclen > n {
                    break;
                }
                let name = buf.get(at + 19..at + reclen).unwrap_or(&[]);
                if let Some(pid) = number(name) {
                    found |= kill_if_in_session(pid, sid);
                }
                at += reclen;
            }
        }
        // SAFETY: our own descriptor.
        unsafe { libc::close(dir) };
        if !found {
            return;
        }
        // let the killed ones die before the next scan
        let pause = libc::timespec {
            tv_sec: 0,
            tv_nsec: 1_000_000,
        };
        // SAFETY: a timespec on the stack.
        unsafe { libc::nanosleep(&pause, std::ptr::null_mut()) };
    }
}

/// The decimal number a `/proc` entry's NUL-terminated name spells, if it is one.
fn number(name: &[u8]) -> Option<libc::pid_t> {
    let digits = name.split(|b| *b == 0).next()?;
    if digits.is_empty() || digits.len() > 9 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(
        digits
            .iter()
            .fold(0, |n: libc::pid_t, d| n * 10 + libc::pid_t::from(d - b'0')),
    )
}

/// SIGKILL to `pid` when it is a live member of session `sid` (checked through a pidfd that pins it). True when it
/// was signalled.
fn kill_if_in_session(pid: libc::pid_t, sid: libc::pid_t) -> bool {
    if session_of_raw(pid) != Some(sid) {
        return false;
    }
    // SAFETY: raw system calls on integers; the pidfd is ours and closed.
    unsafe {
        let pidfd = libc::syscall(libc::SYS_pidfd_open, pid, 0u32);
        let Ok(pidfd) = libc::c_int::try_from(pidfd) else {
            return false;
        };
        if pidfd < 0 {
            return false;
        }
        let same = session_of_raw(pid) == Some(sid);
        if same {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                pidfd,
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0u32,
            );
        }
        libc::close(pidfd);
        same
    }
}

/// The session of a live (not zombie) process, from `/proc/<pid>/stat` read into a stack buffer.
fn session_of_raw(pid: libc::pid_t) -> Option<libc::pid_t> {
    let mut digits = [0u8; 12];
    let mut stat = [0u8; 256];
    let stat = crate::guard::read_raw(
        &[b"/proc/", crate::guard::decimal(pid, &mut digits), b"/stat"],
        &mut stat,
    )?;
    // after the command name's closing parenthesis: state, ppid, pgrp, session
    let close = stat.iter().rposition(|b| *b == b')')?;
    let mut fields = stat
        .get(close + 1..)?
        .split(|b| *b == b' ')
        .filter(|f| !f.is_empty());
    if matches!(fields.next()?, b"Z" | b"X" | b"x") {
        return None;
    }
    number(fields.nth(2)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_procs::{kill_marked, processes_with, wait_for};
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    use std::time::Duration;

    /// Set in the copy of this test binary that plays loom: the mark to put on the session it starts.
    const PLAYS_LOOM: &str = "LOOM_SESSION_GUARD_TEST_MARK";

    /// A session like a tier B command's: its leader (told to the guard, as the command's process tells it) and a
    /// child it started in the background, both marked. The leader has no parent-death signal here, so the guard
    /// alone must end both.
    fn play_loom(mark: &str) -> ! {
        let (guard, guard_w) = SessionGuard::start().unwrap();
        let (m1, m2) = mark.split_at(mark.len() / 2);
        let script = format!(
            "M={m1}; bash -c \"exec -a ${{M}}{m2}-child sleep 120\" & exec bash -c \"exec -a ${{M}}{m2}-leader sleep 120\""
        );
        let mut cmd = Command::new("sh");
        cmd.args(["-c", &script]).stdout(Stdio::null());
        let fd = std::os::fd::AsRawFd::as_raw_fd(&guard_w);
        // SAFETY: setsid, getpid and write are async-signal-safe; four bytes from the stack to our pipe.
        unsafe {
            // as the command's process does (`clone_exec`): the pid to the guard before the command runs
            cmd.pre_exec(move || {
                libc::setsid();
                let pid = libc::getpid();
                if libc::write(fd, pid.to_ne_bytes().as_ptr().cast(), 4) != 4 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let _leader = cmd.spawn().unwrap();
        println!("guard {}", guard.id());
        std::thread::sleep(Duration::from_secs(120));
        std::process::exit(0)
    }

    /// Set in the copy of this test binary that plays a loom ending as soon as its guard exists.
    const ENDS_AT_ONCE: &str = "LOOM_SESSION_GUARD_TEST_ENDS_AT_ONCE";

    /// A loom that ends right after forking its guard — before the guard has set itself up, or the command has
    /// told it anything — leaves no guard behind (none waiting on a pipe that nothing will write to).
    #[test]
    fn a_guard_whose_loom_ends_at_once_ends_too() {
        if std::env::var_os(ENDS_AT_ONCE).is_some() {
            let (guard, _w) = SessionGuard::start().unwrap();
            println!("{}", guard.id());
            // SAFETY: leaving without running destructors, as a killed loom would (the guard is not reaped).
            unsafe { libc::_exit(0) };
        }
        for _ in 0..20 {
            let out = Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "session_guard::tests::a_guard_whose_loom_ends_at_once_ends_too",
                    "--nocapture",
                ])
                .env(ENDS_AT_ONCE, "1")
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            let guard: i32 = text
                .lines()
                .find_map(|l| l.trim().parse().ok())
                .unwrap_or_else(|| panic!("no guard pid in {text:?}"));
            assert!(
                wait_for(|| session_of_raw(guard).is_none()),
                "the guard {guard} outlived its loom"
            );
        }
    }

    /// loom killed with SIGKILL: its guard kills the command's session, the leader and what it started.
    #[test]
    fn a_killed_loom_s_guard_kills_the_command_s_session() {
        if let Some(mark) = std::env::var_os(PLAYS_LOOM) {
            play_loom(&mark.to_string_lossy());
        }
        let mark = format!("loom-session-guard-test-{}", std::process::id());
        let mut loom = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "session_guard::tests::a_killed_loom_s_guard_kills_the_command_s_session",
            ])
            .env(PLAYS_LOOM, &mark)
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        assert!(
            wait_for(|| processes_with(&mark).len() == 2),
            "the session never started"
        );
        loom.kill().unwrap();
        let _ = loom.wait();
        let gone = wait_for(|| processes_with(&mark).is_empty());
        let survivors = kill_marked(&mark);
        assert!(gone, "loom's death left the session running: {survivors:?}");
    }

    /// While loom lives, the guard ignores a SIGTERM from anyone else, and ending it (the call's normal end) kills
    /// nothing of the session, which loom kills itself.
    #[test]
    fn a_live_loom_s_guard_ignores_sigterm_and_ends_quietly() {
        let (guard, guard_w) = SessionGuard::start().unwrap();
        let mut sleeper = Command::new("sleep");
        sleeper.arg("120");
        // SAFETY: setsid is async-signal-safe.
        unsafe {
            sleeper.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
        let mut sleeper = sleeper.spawn().unwrap();
        let pid = sleeper.id() as libc::pid_t;
        // SAFETY: four bytes from the stack to our pipe; a signal to our own child.
        unsafe {
            libc::write(
                std::os::fd::AsRawFd::as_raw_fd(&guard_w),
                pid.to_ne_bytes().as_ptr().cast(),
                4,
            );
            libc::kill(guard.id(), libc::SIGTERM);
        }
        std::thread::sleep(Duration::from_millis(100));
        assert!(
            std::fs::read_to_string(format!("/proc/{}/stat", guard.id()))
                .is_ok_and(|s| !s.contains(") Z")),
            "the guard ended on a SIGTERM while loom lives"
        );
        drop(guard);
        assert!(
            sleeper.try_wait().unwrap().is_none(),
            "ending the guard killed the command"
        );
        sleeper.kill().unwrap();
        let _ = sleeper.wait();
    }

    #[test]
    fn a_proc_entry_name_is_read_as_a_pid_or_skipped() {
        assert_eq!(number(b"1234\0\0"), Some(1234));
        assert_eq!(number(b"self\0"), None);
        assert_eq!(number(b"\0"), None);
        assert_eq!(number(b"12a\0"), None);
        assert_eq!(number(b"9999999999\0"), None);
    }

    #[test]
    fn the_raw_session_read_agrees_with_the_kernel() {
        // SAFETY: getsid on our own process.
        let mine = unsafe { libc::getsid(0) };
        assert_eq!(
            session_of_raw(std::process::id() as libc::pid_t),
            Some(mine)
        );
        assert_eq!(session_of_raw(i32::MAX), None);
    }
}
