//! The guard between loom and bubblewrap (tiers A and C, and `loom doctor`'s probe): a process that leads the
//! command's process group, starts bubblewrap in it, waits for it and exits as it did — and, when loom dies, kills the
//! whole group.
//!
//! Why it exists: bubblewrap clones its sandbox's first process and releases it by writing an eventfd once the uid
//! and gid maps are written; that process arms its own parent-death signal only after the release. When bubblewrap
//! itself died in between (killed by its parent-death signal because loom was killed), the process stayed blocked on
//! the eventfd for good, holding the command's streams and the grant roots' descriptors. It is still in the group
//! bubblewrap was started in — the guard's — so the guard's kill of the group on loom's death takes it too. It
//! leaves the group with `--new-session` before it arms its signal, so the guard also kills bubblewrap's children by
//! pid (`/proc/<pid>/task/<pid>/children`): that process is the init of the sandbox's pid namespace, whose death
//! kills everything in it.
//!
//! Everything here runs in the child between fork and exec, so it makes raw system calls only: no allocation, no
//! lock, no `fork()` of the C library (whose fork handlers may take locks another thread of loom held).

use std::io;
use std::sync::atomic::{AtomicI32, Ordering};

/// The guard's bubblewrap, once started (0 before): read by the handler of loom's death.
static BWRAP: AtomicI32 = AtomicI32::new(0);

/// Splits the spawned child (already leading its own process group) in two: the guard, which never returns, and a
/// new child that returns `Ok` and goes on to exec bubblewrap. `loom` is loom's pid, for the guard to notice that
/// loom died before it could arm its parent-death signal.
///
/// # Safety
/// Only between fork and exec (a `pre_exec` closure), in a child of a possibly multi-threaded process.
pub(crate) unsafe fn split_off_guard(loom: libc::pid_t) -> io::Result<()> {
    // SAFETY (all calls below): raw system calls and async-signal-safe libc wrappers on integers and stack memory.
    unsafe {
        // On loom's death (its parent-death signal, SIGTERM, armed next): the whole group is killed.
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = kill_the_group as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut action.sa_mask);
        if libc::sigaction(libc::SIGTERM, &action, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::getppid() != loom {
            // loom died before the signal was armed
            kill_the_group(libc::SIGTERM);
        }
        let guard = libc::getpid();
        // fork without the C library's fork handlers
        let pid = libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_ulong, 0, 0, 0, 0);
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0 {
            // bubblewrap-to-be: SIGTERM back to its default, and it dies with the guard
            let mut default: libc::sigaction = std::mem::zeroed();
            default.sa_sigaction = libc::SIG_DFL;
            libc::sigemptyset(&mut default.sa_mask);
            libc::sigaction(libc::SIGTERM, &default, std::ptr::null_mut());
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::getppid() != guard {
                libc::_exit(1);
            }
            return Ok(());
        }
        BWRAP.store(pid as libc::pid_t, Ordering::SeqCst);
        guard_until_it_ends(pid as libc::pid_t)
    }
}

/// The guard's life: it holds no descriptor (not the exec-error pipe of the spawn, which would otherwise wait for
/// the guard; not the command's streams or the status pipe, whose ends are the sandbox's), waits for bubblewrap and
/// ends the way it did.
fn guard_until_it_ends(child: libc::pid_t) -> ! {
    // SAFETY: raw system calls on integers and a stack slot; `_exit` and `kill` end or signal this process only.
    unsafe {
        if libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32) != 0 {
            for fd in 0..4096 {
                libc::close(fd);
            }
        }
        let mut status: libc::c_int = 0;
        loop {
            let r = libc::waitpid(child, &mut status, 0);
            if r == child {
                break;
            }
            if r < 0 && *libc::__errno_location() != libc::EINTR {
                libc::_exit(1);
            }
        }
        if libc::WIFEXITED(status) {
            libc::_exit(libc::WEXITSTATUS(status));
        }
        if libc::WIFSIGNALED(status) {
            // the same death, so the waiter sees what bubblewrap's own death would have shown
            let signal = libc::WTERMSIG(status);
            let mut default: libc::sigaction = std::mem::zeroed();
            default.sa_sigaction = libc::SIG_DFL;
            libc::sigemptyset(&mut default.sa_mask);
            libc::sigaction(signal, &default, std::ptr::null_mut());
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, signal);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::kill(libc::getpid(), signal);
            libc::_exit(128 + signal);
        }
        libc::_exit(1)
    }
}

/// The guard's handler of loom's death: SIGKILL to bubblewrap's children (the sandbox's first process, in or out of
/// the group), then to the whole group, itself included.
extern "C" fn kill_the_group(_: libc::c_int) {
    let bwrap = BWRAP.load(Ordering::SeqCst);
    if bwrap > 0 {
        kill_children_of(bwrap);
    }
    // SAFETY: `kill` is async-signal-safe; group 0 is the caller's own.
    unsafe {
        libc::kill(0, libc::SIGKILL);
    }
}

/// SIGKILL to every child of `pid`, as `/proc/<pid>/task/<pid>/children` lists them (nothing when the kernel lacks
/// that file). Async-signal-safe: a path and a buffer on the stack, raw calls.
fn kill_children_of(pid: libc::pid_t) {
    let mut digits = [0u8; 12];
    let number = decimal(pid, &mut digits);
    let mut list = [0u8; 1024];
    let Some(list) = read_raw(
        &[b"/proc/", number, b"/task/", number, b"/children"],
        &mut list,
    ) else {
        return;
    };
    let mut child: libc::pid_t = 0;
    for b in list.iter().chain(std::iter::once(&b' ')) {
        if b.is_ascii_digit() {
            child = child
                .saturating_mul(10)
                .saturating_add(libc::pid_t::from(b - b'0'));
        } else {
            if child > 1 {
                // SAFETY: a signal to a child of this guard's own bubblewrap.
                unsafe { libc::kill(child, libc::SIGKILL) };
            }
            child = 0;
        }
    }
}

/// The start (up to `buf`'s length) of the file whose path is `parts` joined — built on the stack, at most 63 bytes
/// — read with raw calls, so also in a signal handler or a fork's child; `None` when it cannot be opened or read.
pub(crate) fn read_raw<'b>(parts: &[&[u8]], buf: &'b mut [u8]) -> Option<&'b [u8]> {
    let mut path = [0u8; 64];
    if parts.iter().map(|p| p.len()).sum::<usize>() >= path.len() {
        return None;
    }
    // the rest of `path` stays zero: the terminator
    for (slot, b) in path.iter_mut().zip(parts.iter().flat_map(|p| p.iter())) {
        *slot = *b;
    }
    // SAFETY: a NUL-terminated path; reading into `buf` by its length; our own descriptor, closed.
    let n = unsafe {
        let fd = libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return None;
        }
        let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
        libc::close(fd);
        n
    };
    buf.get(..usize::try_from(n).ok()?)
}

/// `n` (positive) in decimal, written at the end of `buf`.
pub(crate) fn decimal(mut n: libc::pid_t, buf: &mut [u8; 12]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 || at == 0 {
            break;
        }
    }
    &buf[at..]
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::process::Command;

    use crate::probe::{host_support, tier_status, Tier};
    use crate::test_procs::{kill_marked, processes_with, wait_for};

    /// Set in the copy of this test binary that plays loom: the stand-in for bubblewrap to spawn.
    const SPAWNER: &str = "LOOM_GUARD_TEST_BWRAP";

    /// loom killed while bubblewrap sets up: a stand-in for bubblewrap starts a child that, like bubblewrap's own
    /// before it is released, does not die with its parent, and waits. A copy of this test binary plays loom and
    /// spawns it through the production path (a tier's trial); it is killed with SIGKILL. Without the guard,
    /// the stand-in died of its parent-death signal and its child stayed; with it, the guard kills the group.
    #[test]
    fn a_killed_loom_takes_the_sandbox_s_setup_with_it() {
        if let Some(fake) = std::env::var_os(SPAWNER) {
            let mut h = host_support().clone();
            h.bwrap = Some(fake.into());
            let _ = crate::trial::try_tier(&h, Tier::A, Some(Path::new("/bin/true")));
            return;
        }
        if let Err(e) = tier_status(host_support(), Tier::A) {
            eprintln!("SKIPPED: tier A is not available on this host ({e})");
            return;
        }
        let mark = format!("loom-guard-test-{}", std::process::id());
        // the stand-in's own path does not carry the mark
        let dir = std::env::temp_dir().join(format!("loom-guard-test-dir-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fake = dir.join("bwrap");
        std::fs::write(
            &fake,
            // one child in bubblewrap's group, one that left it (as bubblewrap's does with --new-session before it
            // arms its parent-death signal); `exec -a` puts the mark on the process that sleeps
            format!(
                "#!/bin/sh\nbash -c 'exec -a {mark}-in sleep 120' &\nsetsid bash -c 'exec -a {mark}-out sleep 120' &\nwait\n"
            ),
        )
        .unwrap();
        std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let mut loom = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "guard::tests::a_killed_loom_takes_the_sandbox_s_setup_with_it",
            ])
            .env(SPAWNER, &fake)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        assert!(
            wait_for(|| processes_with(&mark).len() == 2),
            "the stand-in's children never started"
        );
        loom.kill().unwrap();
        let _ = loom.wait();
        let left = wait_for(|| processes_with(&mark).is_empty());
        let survivors = kill_marked(&mark);
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            left,
            "loom's death left the setup's child running: {survivors:?}"
        );
    }
}
