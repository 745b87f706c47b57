//! The local model engine confines itself. `loom-engine` parses a GGUF file and tokenises text the agent can steer
//! (tool results, file contents) with llama.cpp's C++ code, so a memory bug there must not hand the user's files,
//! network or processes to whoever wrote that text. Before it loads the model, while it has one thread, the engine
//! calls [`confine_engine`]: no new privileges; a Landlock domain in which the model file is the one thing it can
//! open (to read), scoped (ABI 6) so it reaches no abstract socket and signals no process outside it; and a seccomp
//! filter ([`crate::build_engine_rules`]): no socket of any family, no exec, no signal to another process. What it
//! keeps: its standard streams (the protocol with loom, its diagnostics), memory, CPU, and the threads it starts
//! (they inherit the domain and the filter).
//!
//! [`check_engine_confinement`] confines the calling process the same way, then tries what the engine must not do;
//! `loom-engine --check-confinement` runs it, for `loom doctor` and the tests.

use std::fmt;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use crate::landlock::{prepare_landlock, AccessClass, Enforcement, LandlockError, LandlockRule};
use crate::seccomp::{apply_seccomp, build_engine_rules, compile_rules, SeccompError};

/// What [`confine_engine`] put in place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineConfinement {
    /// The one file the engine can open.
    pub file: PathBuf,
    /// How strongly the host enforces the Landlock domain: [`Enforcement::Full`] from ABI 6 (with scoping),
    /// [`Enforcement::Partial`] below it (the files are confined; signals and abstract sockets rest on seccomp).
    pub landlock: Enforcement,
}

impl fmt::Display for EngineConfinement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "landlock={} seccomp=on no_new_privs=on, reading only {}",
            self.landlock.as_str(),
            self.file.display()
        )
    }
}

/// Why the engine could not confine itself (it then loads nothing).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineConfineError {
    /// More than one thread: Landlock restricts the calling thread and what it starts, so the others would stay free.
    #[error(
        "it has {0} threads, and can confine itself only while it has one (Landlock restricts one thread and the \
         threads it starts)"
    )]
    Threads(usize),
    /// `/proc/self/task` could not be read to count the threads.
    #[error("cannot count its threads in /proc/self/task: {0}")]
    ThreadCount(std::io::Error),
    /// The Landlock domain could not be prepared (no Landlock, or the model file could not be opened).
    #[error(
        "{0}; the local model engine runs only inside a Landlock domain (Linux 5.13 or later, with `landlock` in the \
         kernel's `lsm=` list) — `loom doctor` shows what this host has"
    )]
    Landlock(LandlockError),
    /// `prctl(PR_SET_NO_NEW_PRIVS)` failed.
    #[error("cannot set no_new_privs: {0}")]
    NoNewPrivs(std::io::Error),
    /// `landlock_restrict_self` failed.
    #[error("landlock: cannot restrict itself: {0}")]
    Restrict(std::io::Error),
    /// The seccomp filter could not be built or installed.
    #[error("{0}")]
    Seccomp(SeccompError),
}

/// Confines the calling process to reading `model` (an absolute path, no link at its end; the caller resolves it):
/// see the module documentation. Must run while the process has one thread; on an error nothing may be loaded.
pub fn confine_engine(model: &Path) -> Result<EngineConfinement, EngineConfineError> {
    let threads = std::fs::read_dir("/proc/self/task")
        .map_err(EngineConfineError::ThreadCount)?
        .count();
    if threads != 1 {
        return Err(EngineConfineError::Threads(threads));
    }
    let rules = [LandlockRule {
        path: model.to_path_buf(),
        access: AccessClass::ReadFile,
        required: true,
    }];
    let landlock = prepare_landlock(&rules, false).map_err(EngineConfineError::Landlock)?;
    let programs = compile_rules(build_engine_rules(std::process::id()))
        .map_err(EngineConfineError::Seccomp)?;
    // SAFETY: prctl with PR_SET_NO_NEW_PRIVS and constant arguments.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(EngineConfineError::NoNewPrivs(
            std::io::Error::last_os_error(),
        ));
    }
    landlock
        .restrict_self()
        .map_err(EngineConfineError::Restrict)?;
    apply_seccomp(&programs).map_err(EngineConfineError::Seccomp)?;
    Ok(EngineConfinement {
        file: model.to_path_buf(),
        landlock: landlock.enforcement(),
    })
}

/// One thing [`check_engine_confinement`] tried after confining.
#[derive(Debug)]
pub struct EngineProbe {
    /// What was tried.
    pub what: String,
    /// Whether the engine must be able to do it.
    pub should_work: bool,
    /// What happened: `Ok` when it worked, the OS error when it did not.
    pub outcome: std::io::Result<()>,
}

impl EngineProbe {
    /// The probe came out as it must: it worked when it should, and was refused by the confinement (EACCES or
    /// EPERM, not some other failure) when it should not.
    pub fn as_required(&self) -> bool {
        match (&self.outcome, self.should_work) {
            (Ok(()), should) => should,
            (Err(e), false) => matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)),
            (Err(_), true) => false,
        }
    }
}

impl fmt::Display for EngineProbe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mark = if self.as_required() { "ok  " } else { "FAIL" };
        let got = match &self.outcome {
            Ok(()) => "allowed".to_string(),
            Err(e) => format!("refused ({e})"),
        };
        let want = if self.should_work {
            "allowed"
        } else {
            "refused"
        };
        write!(f, "{mark} {}: {got}; must be {want}", self.what)
    }
}

/// Confines the calling process to reading `model` as [`confine_engine`] does, then tries what the engine needs
/// (reading the model, starting a thread) and what it must never do (read another file, create one, open an inet
/// or unix socket, run a program, signal its parent). Each probe is harmless if it works. The process stays
/// confined: run it in a process of its own.
pub fn check_engine_confinement(
    model: &Path,
) -> Result<(EngineConfinement, Vec<EngineProbe>), EngineConfineError> {
    let confined = confine_engine(model)?;
    let probe = |what: String, should_work: bool, outcome: std::io::Result<()>| EngineProbe {
        what,
        should_work,
        outcome,
    };
    let beside = model.with_file_name(".loom-engine-probe");
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&beside)
        .map(|_| {
            let _ = std::fs::remove_file(&beside);
        });
    let parent = rustix::process::getppid();
    let probes = vec![
        probe(
            format!("read {}", model.display()),
            true,
            std::fs::File::open(model).map(drop),
        ),
        probe(
            "start a thread".into(),
            true,
            std::thread::Builder::new()
                .spawn(|| ())
                .and_then(|t| t.join().map_err(|_| ErrorKind::Other.into())),
        ),
        probe(
            "read /etc/passwd".into(),
            false,
            std::fs::File::open("/etc/passwd").map(drop),
        ),
        probe("list /".into(), false, std::fs::read_dir("/").map(drop)),
        probe(format!("create {}", beside.display()), false, created),
        probe(
            "open an inet socket (connect to 127.0.0.1:9)".into(),
            false,
            std::net::TcpStream::connect(("127.0.0.1", 9)).map(drop),
        ),
        probe(
            "open a unix socket (bind an abstract name)".into(),
            false,
            abstract_socket(),
        ),
        probe(
            "run /bin/true".into(),
            false,
            std::process::Command::new("/bin/true").status().map(drop),
        ),
        probe(
            "start a process (clone without CLONE_THREAD)".into(),
            false,
            start_a_process(),
        ),
        probe(
            "clear its parent-death signal".into(),
            false,
            // SAFETY: prctl with constant arguments.
            match unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, 0, 0, 0, 0) } {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            },
        ),
        probe(
            "signal its parent (signal 0)".into(),
            false,
            match parent {
                Some(p) => rustix::process::test_kill_process(p).map_err(std::io::Error::from),
                None => Err(ErrorKind::NotFound.into()),
            },
        ),
    ];
    Ok((confined, probes))
}

/// Starts a process the way `fork` does (a raw clone without `CLONE_VM` or `CLONE_THREAD`); the child exits at once.
fn start_a_process() -> std::io::Result<()> {
    // SAFETY: a raw clone without CLONE_VM: the child runs on its own copy of the memory and only calls _exit.
    let pid = unsafe { libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_ulong, 0, 0, 0, 0) };
    match pid {
        -1 => Err(std::io::Error::last_os_error()),
        // SAFETY: _exit in the child, nothing else.
        0 => unsafe { libc::_exit(0) },
        child => {
            let mut status = 0;
            // SAFETY: waitpid on the child just started.
            unsafe { libc::waitpid(child as libc::pid_t, &mut status, 0) };
            Ok(())
        }
    }
}

/// Binds a unix socket to an abstract name (the socket is closed at once).
fn abstract_socket() -> std::io::Result<()> {
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(b"loom-engine-probe")?;
    std::os::unix::net::UnixListener::bind_addr(&addr).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_passes_only_on_the_outcome_it_requires() {
        let p = |should_work, outcome| EngineProbe {
            what: "x".into(),
            should_work,
            outcome,
        };
        let e = |n| Err(std::io::Error::from_raw_os_error(n));
        assert!(p(true, Ok(())).as_required());
        assert!(!p(false, Ok(())).as_required());
        assert!(p(false, e(libc::EACCES)).as_required());
        assert!(p(false, e(libc::EPERM)).as_required());
        // refused for another reason: not the confinement's doing
        assert!(!p(false, e(libc::ENOENT)).as_required());
        assert!(!p(true, e(libc::EPERM)).as_required());
        assert_eq!(
            p(false, Ok(())).to_string(),
            "FAIL x: allowed; must be refused"
        );
    }

    #[test]
    fn a_process_with_threads_does_not_confine_itself() {
        // a second thread alive during the call, whatever thread the harness runs this test on
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || rx.recv());
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
        let got = confine_engine(&file);
        drop(tx);
        let _ = other.join();
        match got {
            Err(EngineConfineError::Threads(n)) => assert!(n > 1),
            other => panic!("{other:?}"),
        }
    }
}
