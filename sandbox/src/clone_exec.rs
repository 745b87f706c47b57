//! Tier B's spawn without a fork: `clone(CLONE_VM | CLONE_VFORK)` on a dedicated stack, as `posix_spawn` does, so
//! the kernel copies no page tables and the parent takes no copy-on-write faults afterwards — but with loom's own
//! confinement between clone and exec, which `posix_spawn` cannot run.
//!
//! Everything the child needs is prepared before the clone ([`ChildPlan`]: the three stream descriptors, the
//! working directory, the [`Confinement`], the candidate paths of the PATH search, argv and envp as C arrays). The
//! child then runs only raw, async-signal-safe system calls on that data: it writes its pid to the session guard's
//! pipe (`session_guard`), resets signal handlers and the signal mask, moves the streams onto 0–2, enters the working
//! directory, sets `PR_SET_PDEATHSIG` and checks that its parent is still this process, enforces the
//! confinement (session, limits, capabilities, `no_new_privs`, Landlock, seccomp), marks every descriptor above 2
//! close-on-exec and execs. A failed step is written to the failure pipe (5 bytes: the step and the errno) and the
//! child `_exit`s with 127; nothing ran.
//!
//! Why this is sound with a shared address space:
//! - `CLONE_VFORK` suspends the calling thread until the child execs or exits, so nothing the caller owns (the plan,
//!   the stack, its thread-local `errno`, which the child shares) changes or is freed under the child.
//! - Other threads of this process keep running, so the child never takes a lock, never allocates, never unwinds
//!   (every step is a system call wrapper; no panicking operation runs) and only reads the plan, except for the one
//!   slot of its own script argv that the ENOEXEC fallback fills in.
//! - All signals are blocked in the caller around the clone, so none is delivered to the child before it has reset
//!   every handled signal to its default (a handler of this process must never run in the child on the shared
//!   memory); then the child clears its mask, as std's spawn does. SIGPIPE, which Rust ignores, is set to its
//!   default too. The signal dispositions are the child's own copy (no `CLONE_SIGHAND`), so this process's stay.
//! - The stack is a mapping of its own with a guard page below it, used by one child at a time: taken before the
//!   clone and given back (kept for the next spawn, or unmapped) only once the child has exec'd or exited.

use std::collections::BTreeMap;
use std::ffi::{CStr, CString, OsStr, OsString};
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::confine::{cloexec_above_stderr, Confinement, EnforceError, Step};

/// Where one standard stream of the child comes from.
#[derive(Debug)]
pub enum Stream {
    /// The caller's own descriptor of the same number.
    Inherit,
    /// `/dev/null`, opened read-write.
    Null,
    /// This descriptor (moved onto the stream's number in the child).
    Fd(OwnedFd),
}

impl Stream {
    /// As a `std` [`std::process::Stdio`] (for the bwrap-based tiers).
    pub(crate) fn into_stdio(self) -> std::process::Stdio {
        match self {
            Stream::Inherit => std::process::Stdio::inherit(),
            Stream::Null => std::process::Stdio::null(),
            Stream::Fd(fd) => std::process::Stdio::from(fd),
        }
    }
}

impl From<OwnedFd> for Stream {
    fn from(fd: OwnedFd) -> Stream {
        Stream::Fd(fd)
    }
}

impl From<std::fs::File> for Stream {
    fn from(f: std::fs::File) -> Stream {
        Stream::Fd(f.into())
    }
}

impl From<std::io::PipeReader> for Stream {
    fn from(p: std::io::PipeReader) -> Stream {
        Stream::Fd(p.into())
    }
}

impl From<std::io::PipeWriter> for Stream {
    fn from(p: std::io::PipeWriter) -> Stream {
        Stream::Fd(p.into())
    }
}

/// The stack the child runs on, and a guard page below it.
const STACK_SIZE: usize = 256 * 1024;
const GUARD_SIZE: usize = 4096;
/// glibc's default search path when PATH is unset (`confstr(_CS_PATH)`), as `execvp` uses it.
const DEFAULT_PATH: &[u8] = b"/bin:/usr/bin";
const SHELL: &CStr = c"/bin/sh";

/// Everything the child reads, prepared before the clone.
struct ChildPlan<'a> {
    /// Source descriptor for stdin, stdout, stderr (`None`: inherited).
    streams: [Option<RawFd>; 3],
    cwd: &'a CStr,
    confinement: &'a Confinement,
    failed_fd: RawFd,
    /// The write end of the session guard's pipe (tier B's `session_guard`), told the child's pid first of all.
    guard_fd: RawFd,
    /// This process's pid: the child checks, once its parent-death signal is armed, that it is still its parent.
    parent: libc::pid_t,
    /// The paths `execvp` would try, in order.
    candidates: Vec<CString>,
    /// NULL-terminated pointers into `args`.
    argv: Vec<*const libc::c_char>,
    /// `/bin/sh`, a slot for the script's path, the remaining arguments, NULL (for ENOEXEC, as `execvp`).
    sh_argv: Vec<*const libc::c_char>,
    /// NULL-terminated pointers into `envs`.
    envp: Vec<*const libc::c_char>,
}

/// Why [`spawn`] started nothing.
#[derive(Debug)]
pub(crate) enum CloneError {
    /// The child reported a failed step (a confinement, stream, directory or exec step) and exited; it was reaped.
    Child(EnforceError),
    /// Preparing or cloning failed; no child exists.
    Io(std::io::Error),
}

impl From<std::io::Error> for CloneError {
    fn from(e: std::io::Error) -> CloneError {
        CloneError::Io(e)
    }
}

/// A child spawned by [`spawn`]: a process-group leader (its own session) that this process must reap.
#[derive(Debug)]
pub(crate) struct RawChild {
    pid: libc::pid_t,
}

impl RawChild {
    pub(crate) fn id(&self) -> u32 {
        self.pid.unsigned_abs()
    }

    /// Blocks until the child exits, reaping it.
    pub(crate) fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        use std::os::unix::process::ExitStatusExt;
        let mut status = 0;
        loop {
            // SAFETY: waiting for our own child into a local.
            let rc = unsafe { libc::waitpid(self.pid, &mut status, 0) };
            if rc == self.pid {
                return Ok(std::process::ExitStatus::from_raw(status));
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}

fn cstring(bytes: &[u8]) -> std::io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "nul byte found in provided data",
        )
    })
}

/// The paths glibc's `execvp` tries for `prog` under the child's `PATH`: `prog` itself when it holds a slash, else
/// each PATH entry joined with it (an empty entry is the working directory).
fn candidates(prog: &OsStr, path: Option<&OsStr>) -> std::io::Result<Vec<CString>> {
    let prog = prog.as_bytes();
    if prog.is_empty() {
        return Ok(Vec::new());
    }
    if prog.contains(&b'/') {
        return Ok(vec![cstring(prog)?]);
    }
    let path = path.map_or(DEFAULT_PATH, |p| p.as_bytes());
    path.split(|b| *b == b':')
        .map(|dir| {
            let mut full = Vec::with_capacity(dir.len() + 1 + prog.len());
            if !dir.is_empty() {
                full.extend_from_slice(dir);
                full.push(b'/');
            }
            full.extend_from_slice(prog);
            cstring(&full)
        })
        .collect()
}

/// Spawns `argv` with the environment `env` (later duplicates win, as with `Command::envs`), in `cwd`, confined by
/// `confinement`, with `streams` on 0–2. Returns the child once it has exec'd.
pub(crate) fn spawn(
    argv: &[OsString],
    env: &[(OsString, OsString)],
    cwd: &Path,
    streams: [Stream; 3],
    confinement: &Confinement,
    guard: BorrowedFd<'_>,
) -> Result<RawChild, CloneError> {
    let Some(prog) = argv.first() else {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "no command").into());
    };
    let args: Vec<CString> = argv
        .iter()
        .map(|a| cstring(a.as_bytes()))
        .collect::<Result<_, _>>()?;
    let vars: BTreeMap<&OsStr, &OsStr> = env
        .iter()
        .map(|(k, v)| (k.as_os_str(), v.as_os_str()))
        .collect();
    let envs: Vec<CString> = vars
        .iter()
        .map(|(k, v)| {
            let mut kv = Vec::with_capacity(k.len() + 1 + v.len());
            kv.extend_from_slice(k.as_bytes());
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            cstring(&kv)
        })
        .collect::<Result<_, _>>()?;
    let candidates = candidates(prog, vars.get(OsStr::new("PATH")).copied())?;
    let cwd = cstring(cwd.as_os_str().as_bytes())?;
    // Opened here, kept open until the child has exec'd (or exited).
    let mut null: Option<OwnedFd> = None;
    let mut owned: Vec<OwnedFd> = Vec::new();
    let mut sources = [None; 3];
    for (slot, stream) in sources.iter_mut().zip(streams) {
        *slot = match stream {
            Stream::Inherit => None,
            Stream::Null => {
                if null.is_none() {
                    let f = std::fs::OpenOptions::new()
                        .read(true)
                        .write(true)
                        .open("/dev/null")?;
                    null = Some(f.into());
                }
                null.as_ref().map(|f| f.as_raw_fd())
            }
            Stream::Fd(fd) => {
                let raw = fd.as_raw_fd();
                owned.push(fd);
                Some(raw)
            }
        };
    }
    let (failed_r, failed_w) = crate::error::pipe()?;
    let null_terminated = |v: &[CString]| -> Vec<*const libc::c_char> {
        v.iter()
            .map(|c| c.as_ptr())
            .chain(std::iter::once(std::ptr::null()))
            .collect()
    };
    let mut sh_argv = vec![SHELL.as_ptr(), std::ptr::null()];
    sh_argv.extend(args.iter().skip(1).map(|c| c.as_ptr()));
    sh_argv.push(std::ptr::null());
    let mut plan = ChildPlan {
        streams: sources,
        cwd: &cwd,
        confinement,
        failed_fd: failed_w.as_raw_fd(),
        guard_fd: guard.as_raw_fd(),
        parent: std::process::id() as libc::pid_t,
        candidates,
        argv: null_terminated(&args),
        sh_argv,
        envp: null_terminated(&envs),
    };
    let stack = Stack::take()?;
    let pid = clone_vfork(&stack, &mut plan);
    // The child has exec'd or exited by now (CLONE_VFORK); the stack and the plan are ours again.
    stack.put_back();
    drop(failed_w);
    let pid = pid?;
    let mut child = RawChild { pid };
    // Non-blocking: whatever the child reported is already in the pipe, while a thread of ours forking at the same
    // time could still hold a copy of the write end.
    let mut record = [0u8; 5];
    // SAFETY: reading into a local buffer from a descriptor we own.
    let n = unsafe {
        libc::fcntl(failed_r.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK);
        libc::read(
            failed_r.as_raw_fd(),
            record.as_mut_ptr().cast(),
            record.len(),
        )
    };
    if n > 0 {
        let _ = child.wait();
        let step = usize::try_from(n)
            .ok()
            .and_then(|n| record.get(..n))
            .and_then(EnforceError::from_bytes)
            .unwrap_or(EnforceError {
                step: Step::Exec,
                error: std::io::Error::from_raw_os_error(libc::EIO),
            });
        return Err(CloneError::Child(step));
    }
    Ok(child)
}

/// An anonymous mapping for the child's stack, with a guard page at its low end.
struct Stack {
    base: *mut libc::c_void,
}

// SAFETY: the mapping belongs to the process, not to a thread; only the thread holding the `Stack` (and the child it
// clones, while that thread is suspended) touches it.
unsafe impl Send for Stack {}

/// One stack kept between spawns, so a spawn usually maps, protects and unmaps nothing. A stack is only put back
/// once its child has exec'd or exited (`CLONE_VFORK`), so a stack in the slot is unused; what an earlier child left
/// on it is this process's own memory, which the next child (running this process's code) overwrites as it goes.
static SPARE_STACK: std::sync::Mutex<Option<Stack>> = std::sync::Mutex::new(None);

impl Stack {
    /// The spare stack, or a new one when another spawn holds it.
    fn take() -> std::io::Result<Stack> {
        let spare = SPARE_STACK.lock().unwrap_or_else(|e| e.into_inner()).take();
        match spare {
            Some(s) => Ok(s),
            None => Stack::new(),
        }
    }

    /// Keeps this stack for the next spawn (unmapping it if the slot is taken). Only once its child is done with it.
    fn put_back(self) {
        let mut slot = SPARE_STACK.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_none() {
            *slot = Some(self);
        }
    }

    fn new() -> std::io::Result<Stack> {
        // SAFETY: a fresh anonymous private mapping; no existing memory is touched.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                STACK_SIZE + GUARD_SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let stack = Stack { base };
        // SAFETY: the first page of the mapping just made.
        if unsafe { libc::mprotect(base, GUARD_SIZE, libc::PROT_NONE) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(stack)
    }

    /// The initial stack pointer (the high end; the stack grows down on every architecture Linux loom runs on).
    fn top(&self) -> *mut libc::c_void {
        self.base
            .cast::<u8>()
            .wrapping_add(STACK_SIZE + GUARD_SIZE)
            .cast()
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping `new` made; nothing runs on it any more.
        unsafe { libc::munmap(self.base, STACK_SIZE + GUARD_SIZE) };
    }
}

/// Blocks every signal, clones the child onto `stack` sharing our memory, waits (CLONE_VFORK) until it has exec'd or
/// exited, and restores the signal mask.
fn clone_vfork(stack: &Stack, plan: &mut ChildPlan<'_>) -> std::io::Result<libc::pid_t> {
    // SAFETY: sigset_t values filled by sigfillset / pthread_sigmask before use.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        // SAFETY: `child_main` never returns into our frames: it execs or `_exit`s, running on `stack`, which stays
        // mapped until then; `plan` outlives the call because this thread is suspended until the child is done with it.
        let pid = libc::clone(
            child_main,
            stack.top(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (plan as *mut ChildPlan<'_>).cast(),
        );
        let e = std::io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if pid < 0 {
            return Err(e);
        }
        Ok(pid)
    }
}

/// The child: only raw system calls on the prepared plan (see the module comment). Never returns.
extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `ChildPlan` `clone_vfork` passed, alive and not touched by its owner until we exec or exit.
    let plan = unsafe { &mut *arg.cast::<ChildPlan<'_>>() };
    let failed = match child_steps(plan) {
        Ok(never) => match never {},
        Err(e) => e,
    };
    let record = failed.to_bytes();
    // SAFETY: writing a local buffer to the failure pipe, then leaving without running anything of the parent's.
    unsafe {
        libc::write(plan.failed_fd, record.as_ptr().cast(), record.len());
        libc::_exit(127)
    }
}

enum Never {}

fn child_steps(plan: &mut ChildPlan<'_>) -> Result<Never, EnforceError> {
    // SAFETY (whole function): system calls with integer arguments or pointers into the prepared plan and locals.
    unsafe {
        // The guard learns the pid (the session's id, once `enforce` has run setsid) before anything can run: with
        // every signal blocked, a guard that is gone fails the write (EPIPE) rather than killing the child.
        let pid = libc::syscall(libc::SYS_getpid) as libc::pid_t;
        if libc::write(plan.guard_fd, pid.to_ne_bytes().as_ptr().cast(), 4) != 4 {
            return Err(EnforceError::last(Step::Guard));
        }
        // Handlers next, while every signal is still blocked.
        for sig in 1..=64 {
            if sig == libc::SIGKILL || sig == libc::SIGSTOP {
                continue;
            }
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 {
                continue; // a signal libc reserves for itself; none of our handlers
            }
            if sig == libc::SIGPIPE
                || (old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN)
            {
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(sig, &dfl, std::ptr::null_mut());
            }
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
        for (target, source) in (0..).zip(plan.streams) {
            let Some(source) = source else { continue };
            let rc = if source == target {
                libc::fcntl(source, libc::F_SETFD, 0)
            } else {
                libc::dup2(source, target)
            };
            if rc < 0 {
                return Err(EnforceError::last(Step::Stdio));
            }
        }
        if libc::chdir(plan.cwd.as_ptr()) != 0 {
            return Err(EnforceError::last(Step::Chdir));
        }
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
        // loom killed before the signal was armed: nothing runs (and its guard, finding this pid, kills nothing).
        if libc::getppid() != plan.parent {
            return Err(EnforceError {
                step: Step::Parent,
                error: std::io::Error::from_raw_os_error(libc::ESRCH),
            });
        }
        // setsid (in `enforce`) also makes the child the leader of a new process group, as `kill(-pid)` needs.
        plan.confinement.enforce()?;
        cloexec_above_stderr()?;
        // `execvp`'s search: EACCES is remembered and reported if nothing else runs; a missing entry moves on; any
        // other error stops the search.
        let mut error = libc::ENOENT;
        let mut denied = false;
        for path in &plan.candidates {
            libc::execve(path.as_ptr(), plan.argv.as_ptr(), plan.envp.as_ptr());
            let e = *libc::__errno_location();
            match e {
                libc::ENOEXEC => {
                    if let Some(slot) = plan.sh_argv.get_mut(1) {
                        *slot = path.as_ptr();
                    }
                    libc::execve(SHELL.as_ptr(), plan.sh_argv.as_ptr(), plan.envp.as_ptr());
                    error = *libc::__errno_location();
                    break;
                }
                libc::EACCES => denied = true,
                libc::ENOENT | libc::ESTALE | libc::ENOTDIR | libc::ENODEV | libc::ETIMEDOUT => {}
                _ => {
                    error = e;
                    break;
                }
            }
            error = e;
        }
        if denied
            && matches!(
                error,
                libc::ENOENT | libc::ESTALE | libc::ENOTDIR | libc::ENODEV | libc::ETIMEDOUT
            )
        {
            error = libc::EACCES;
        }
        Err(EnforceError {
            step: Step::Exec,
            error: std::io::Error::from_raw_os_error(error),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::SpawnError;
    use crate::spawn::{tier_b_failure, PrivateTmp};
    use std::io::Read;
    use std::os::fd::AsFd;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    fn env(v: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        v.iter().map(|(k, v)| (k.into(), v.into())).collect()
    }

    /// seccomp and the rest, no Landlock (so the tests run on any kernel).
    fn confinement() -> Confinement {
        let policy = crate::seccomp::SeccompPolicy {
            network: false,
            host_namespaces: true,
            deny_truncate: false,
        };
        Confinement::prepare(None, policy, true, None, None).unwrap()
    }

    /// Runs `argv` and returns its exit code and standard output. A script a test just wrote can be "busy"
    /// (ETXTBSY) for a moment: another test of this binary forked while the file was open for writing, and its
    /// child holds the descriptor until it execs; that is retried, anything else is a failure.
    fn run(argv: &[&str], vars: &[(&str, &str)], cwd: &Path) -> (i32, String) {
        let mut tries = 0;
        let (r, mut child) = loop {
            let (r, w) = std::io::pipe().unwrap();
            let (_guard_r, guard_w) = std::io::pipe().unwrap();
            let streams = [Stream::Null, Stream::from(w), Stream::Inherit];
            let c = confinement();
            match spawn(&os(argv), &env(vars), cwd, streams, &c, guard_w.as_fd()) {
                Ok(child) => break (r, child),
                Err(CloneError::Child(e))
                    if e.error.raw_os_error() == Some(libc::ETXTBSY) && tries < 100 =>
                {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Err(e) => panic!("{argv:?}: {e:?}"),
            }
        };
        let mut out = String::new();
        std::fs::File::from(OwnedFd::from(r))
            .read_to_string(&mut out)
            .unwrap();
        let status = child.wait().unwrap();
        (status.code().unwrap_or(-1), out)
    }

    fn failure(argv: &[&str], cwd: &Path, c: &Confinement) -> SpawnError {
        let streams = [Stream::Null, Stream::Null, Stream::Null];
        let (_guard_r, guard_w) = std::io::pipe().unwrap();
        match spawn(
            &os(argv),
            &env(&[("PATH", "/usr/bin:/bin")]),
            cwd,
            streams,
            c,
            guard_w.as_fd(),
        ) {
            Ok(mut child) => panic!("{argv:?} ran: {:?}", child.wait()),
            Err(CloneError::Io(e)) => panic!("{argv:?}: clone failed: {e}"),
            Err(CloneError::Child(e)) => tier_b_failure(e, &OsString::from(argv[0]), cwd),
        }
    }

    #[test]
    fn the_command_gets_its_streams_environment_directory_and_a_path_search() {
        let tmp = PrivateTmp::create().unwrap();
        let dir = &tmp.0;
        // Only the given environment, a later duplicate winning (as with Command::envs); stdin is /dev/null; `sh` is
        // found on PATH; the command leads a new session.
        let (code, out) = run(
            &[
                "sh",
                "-c",
                r#"echo "$A $B ${HOME-nohome}"; pwd; read x || echo eof; read -r _ _ _ _ _ sid _ < /proc/$$/stat; [ "$sid" = "$$" ] && echo leader; exit 3"#,
            ],
            &[
                ("PATH", "/usr/bin:/bin"),
                ("A", "1"),
                ("B", "x"),
                ("A", "2"),
            ],
            dir,
        );
        assert_eq!(code, 3, "{out}");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines,
            ["2 x nohome", dir.to_str().unwrap(), "eof", "leader"],
            "{out}"
        );
    }

    #[test]
    fn a_script_without_a_shebang_runs_through_sh_as_execvp_does() {
        use std::os::unix::fs::PermissionsExt;
        let dir = PrivateTmp::create().unwrap();
        let script = dir.0.join("plain");
        std::fs::write(&script, "echo \"from script $1\"\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = format!("{}:/usr/bin:/bin", dir.0.display());
        let (code, out) = run(&["plain", "arg"], &[("PATH", &path)], &dir.0);
        assert_eq!((code, out.as_str()), (0, "from script arg\n"));
    }

    #[test]
    fn a_missing_command_is_reported_by_name() {
        let e = failure(&["no-such-command-xyz"], Path::new("/"), &confinement());
        assert!(
            matches!(&e, SpawnError::NotFound(c) if c == "no-such-command-xyz"),
            "{e}"
        );
        assert_eq!(e.exit_code(), 127);
        // A directory that is not executable as a program: EACCES, reported the same way.
        let e = failure(&["/"], Path::new("/"), &confinement());
        assert!(matches!(&e, SpawnError::NotFound(_)), "{e}");
    }

    #[test]
    fn a_failed_landlock_step_is_reported_by_name_and_nothing_runs() {
        let dir = PrivateTmp::create().unwrap();
        let marker = dir.0.join("ran");
        // Not a ruleset: landlock_restrict_self fails (EBADFD, or ENOSYS without Landlock).
        let not_a_ruleset: OwnedFd = std::fs::File::open("/dev/null").unwrap().into();
        let c = confinement().with_landlock(crate::landlock::PreparedLandlock::from_fd_for_test(
            not_a_ruleset,
        ));
        let touch = format!("touch {}", marker.display());
        let e = failure(&["sh", "-c", &touch], &dir.0, &c);
        assert!(matches!(e, SpawnError::Setup(_)), "{e}");
        assert!(e.to_string().contains("landlock_restrict_self: "), "{e}");
        assert!(!marker.exists());
    }

    #[test]
    fn a_missing_working_directory_is_reported_as_such() {
        let e = failure(&["true"], Path::new("/no/such/dir"), &confinement());
        assert!(e.to_string().contains("chdir /no/such/dir: "), "{e}");
    }
}

/// Tier B end to end through [`crate::spawn_sandboxed_io`]: a real profile, Landlock and seccomp enforced by the cloned
/// child. (The adversarial suite in tests/sandbox covers the attacks; this checks the clone path in the crate.)
#[cfg(test)]
mod tier_b {
    use crate::spawn::PrivateTmp;
    use crate::{
        build_profile, spawn_sandboxed_io, HostFs, Launch, Limits, Place, Stream, Streams, Tier,
    };
    use loom_kernel::{decide, AlgebraKind, Grant, PathCtx, Request};
    use std::io::Read;

    #[test]
    fn the_cloned_child_is_confined_and_reports_what_it_enforced() {
        if crate::landlock::host_landlock_abi().is_err() {
            eprintln!("skipped: no Landlock on this kernel (tier B needs it)");
            return;
        }
        let work = PrivateTmp::create().unwrap();
        let outside = PrivateTmp::create().unwrap();
        let row = format!(
            "g = {{ commands = \"*\", paths = [{:?}] }}",
            work.0.display().to_string()
        );
        let t: toml::Table = toml::from_str(&row).unwrap();
        let grant = Grant::from_toml(&t["g"]).unwrap();
        let ctx = PathCtx::new(work.0.to_str().unwrap(), None);
        let argv = vec!["sh".to_string(), "-c".to_string(), "x".to_string()];
        let request = Request::BashArgv {
            argv: argv.clone(),
            cwd: work.0.to_str().unwrap().into(),
        };
        let Some((_, row)) = decide("bash", AlgebraKind::Bash, &ctx, &grant, &request).into_row()
        else {
            panic!("not allowed")
        };
        let place = Place {
            cwd: work.0.clone(),
            home: None,
            ..Place::default()
        };
        let profile = build_profile(&row, &ctx, &place, Limits::default(), &HostFs).unwrap();
        let script = format!(
            "echo in > inside && echo ok-inside; echo t > \"$TMPDIR/t\" && echo ok-tmpdir; \
             (echo out > {0}/x) 2>/dev/null || echo denied-outside; \
             grep -E '^(NoNewPrivs|Seccomp|SigIgn):' /proc/self/status | tr -d ' \\t'; ls /proc/self/fd | tr '\\n' ' '",
            outside.0.display()
        );
        let argv: Vec<std::ffi::OsString> = vec!["sh".into(), "-c".into(), script.into()];
        let (r, w) = std::io::pipe().unwrap();
        let launch = Launch {
            profile: &profile,
            tier: Tier::B,
            bwrap: None,
            bwrap_features: Default::default(),
            inner_exe: std::path::Path::new("/nonexistent"),
            argv: &argv,
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            sweep_records: None,
        };
        let streams = Streams {
            stdin: Stream::Null,
            stdout: Stream::from(w),
            stderr: Stream::Inherit,
        };
        let outcome = spawn_sandboxed_io(&launch, streams, &mut |_| {}).unwrap();
        let mut out = String::new();
        std::fs::File::from(std::os::fd::OwnedFd::from(r))
            .read_to_string(&mut out)
            .unwrap();
        assert_eq!(outcome.code, 0, "{out}");
        assert!(
            outcome.enforced.starts_with("landlock="),
            "{}",
            outcome.enforced
        );
        for want in [
            "ok-inside",
            "ok-tmpdir",
            "denied-outside",
            "NoNewPrivs:1",
            "Seccomp:2",
        ] {
            assert!(out.lines().any(|l| l == want), "{want} not in:\n{out}");
        }
        // SIGPIPE, which this (Rust) process ignores, is back at its default.
        let ignored = out
            .lines()
            .find_map(|l| l.strip_prefix("SigIgn:"))
            .and_then(|m| u64::from_str_radix(m, 16).ok())
            .unwrap();
        assert_eq!(ignored & (1 << (libc::SIGPIPE - 1)), 0, "{out}");
        // Only the standard streams (and the directory ls itself opens).
        let fds = out.lines().last().unwrap_or_default();
        assert_eq!(fds.split_whitespace().count(), 4, "{out}");
        assert!(!outside.0.join("x").exists());
    }
}
