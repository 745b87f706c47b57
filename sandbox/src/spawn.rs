//! Effectful: opening grant roots by descriptor, spawning the confined process tree, waiting with a timeout and
//! killing the whole tree.

use std::ffi::OsString;
use std::io::Read;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::bwrap::{build_bwrap_args, BwrapFeatures, PathFds, StageFds};
use crate::cancel::CancelTarget;
pub use crate::clone_exec::Stream;
use crate::clone_exec::{CloneError, RawChild};
use crate::confine::{Confinement, EnforceError, Step};
use crate::coverage::{tier_b_refusal, tier_b_status, view_status, SandboxStatus};
use crate::error::pipe;
use crate::error::SpawnError;
use crate::group::{exit_code, kill_group};
use crate::inner::InnerSpec;
use crate::landlock::{build_landlock_rules, AccessClass, Enforcement, LandlockRule, View};
use crate::probe::Tier;
use crate::profile::Profile;
use crate::roots::open_roots;
use crate::seccomp::SeccompPolicy;
use crate::session_guard::{kill_session, SessionGuard};
use crate::sweep::{sweep_created, Swept};
use crate::sweep_record::record_sweep;

/// How to launch one confined command.
#[derive(Debug, Clone)]
pub struct Launch<'a> {
    /// The profile to enforce.
    pub profile: &'a Profile,
    /// The backend.
    pub tier: Tier,
    /// The bubblewrap executable (Tier A and C).
    pub bwrap: Option<&'a Path>,
    /// Optional bubblewrap features.
    pub bwrap_features: BwrapFeatures,
    /// The inner-stage executable (`loom-sandbox-exec`, or any binary running [`crate::inner_main`] when its first
    /// argument is [`crate::INNER_ARG`]); tiers A and C run it inside the view, tier B needs none.
    pub inner_exe: &'a Path,
    /// The command and its arguments.
    pub argv: &'a [OsString],
    /// The environment the command gets (already filtered through the profile's policy).
    pub env: Vec<(OsString, OsString)>,
    /// Where the sweep still owed is written down before the command starts ([`crate::record_sweep`]), so a later
    /// loom sweeps for it when this one dies first. The directory must be out of every command's reach (the caller
    /// keeps it read-only in the view). `None`: only this process sweeps.
    pub sweep_records: Option<&'a Path>,
}

/// How a confined command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The exit code (signal death: 128 + signal number).
    pub code: i32,
    /// What the inner stage reported as enforced (`landlock=full seccomp=on ...`); empty when unconfined.
    pub enforced: String,
    /// True when the timeout killed the tree.
    pub timed_out: bool,
    /// What the sandbox enforced, typed (`None` when unconfined).
    pub status: Option<SandboxStatus>,
    /// What the command created at protected paths that did not exist when it started, moved aside once it ended
    /// (see [`crate::sweep_created`]); empty when unconfined.
    pub swept: Vec<Swept>,
}

/// The standard streams of a confined command.
#[derive(Debug)]
pub struct Streams {
    /// Standard input.
    pub stdin: Stream,
    /// Standard output.
    pub stdout: Stream,
    /// Standard error.
    pub stderr: Stream,
}

impl Streams {
    /// All three inherited from this process (what [`spawn_sandboxed`] does).
    pub fn inherit() -> Streams {
        Streams {
            stdin: Stream::Inherit,
            stdout: Stream::Inherit,
            stderr: Stream::Inherit,
        }
    }
}

/// Spawns the command confined by `launch.tier` with inherited standard streams, waits (killing the whole tree after
/// the profile's timeout), and returns its exit status. Refuses — running nothing — when the inner stage cannot
/// enforce the profile.
pub fn spawn_sandboxed(launch: &Launch<'_>) -> Result<Outcome, SpawnError> {
    spawn_sandboxed_io(launch, Streams::inherit(), &mut |_| {})
}

/// Like [`spawn_sandboxed`], with the command's standard streams given by `streams`, and `started` called with the
/// pid of the spawned process as soon as it exists. That pid leads its own process group (for tiers A and C, it is
/// the guard of the bwrap process whose death kills the sandbox's pid namespace: `guard`), so `kill(-pid, SIGKILL)`
/// ends the whole tree. Blocks until the command ends. (Used by loom-broker to relay streams and cancel calls.)
pub fn spawn_sandboxed_io(
    launch: &Launch<'_>,
    streams: Streams,
    started: &mut dyn FnMut(u32),
) -> Result<Outcome, SpawnError> {
    // the sweep owed is written down first, where no command reaches: a loom that dies before the command ends
    // leaves it for the next one; without the record, nothing runs
    let record = match launch.sweep_records {
        Some(dir) => record_sweep(dir, &launch.profile.absent).map_err(|e| {
            SpawnError::Setup(format!(
                "cannot record which protected names to look at once the command ends, in {} ({e}); nothing was \
                 run: make that directory (in loom's data directory) writable for loom",
                dir.display()
            ))
        })?,
        None => None,
    };
    let ran = match launch.tier {
        Tier::B => spawn_tier_b(launch, streams, started),
        Tier::A | Tier::C => spawn_in_view(launch, streams, started),
    };
    // every process of the command has ended (the pid namespace, or the session killed): what it created at a
    // protected path that did not exist when it started is moved aside now, whatever became of the call
    let mut swept = sweep_created(&launch.profile.absent);
    if let Some(record) = record {
        let path = record.path().to_path_buf();
        if let Err(e) = record.done() {
            swept.push(Swept::Unread {
                record: path,
                why: format!("swept, but not removed: {e}; a later loom sweeps by it again"),
            });
        }
    }
    match ran {
        Ok(mut outcome) => {
            outcome.swept = swept;
            Ok(outcome)
        }
        Err(e) if swept.is_empty() => Err(e),
        Err(e) => Err(SpawnError::Setup(format!(
            "{e}; and {}",
            swept
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        ))),
    }
}

/// Tiers A and C: bwrap builds the view, then the inner stage applies Landlock (tier A) and seccomp and execs the
/// command, reporting what it enforced on the status pipe.
fn spawn_in_view(
    launch: &Launch<'_>,
    streams: Streams,
    started: &mut dyn FnMut(u32),
) -> Result<Outcome, SpawnError> {
    let profile = launch.profile;
    let Some(bwrap) = launch.bwrap else {
        return Err(SpawnError::Setup("bubblewrap is not installed".into()));
    };
    let (status_r, status_w) = pipe()?;
    // Tier C: no Landlock.
    let landlock = (launch.tier == Tier::A).then(|| build_landlock_rules(profile, View::Bwrap));
    let spec = InnerSpec {
        status_fd: status_w.as_raw_fd(),
        landlock,
        network: profile.network,
        // bwrap --new-session
        new_session: false,
        max_procs: profile.limits.max_procs,
        max_file_size: profile.limits.max_file_size,
        argv: launch.argv.to_vec(),
    };
    let roots = open_roots(profile)?;
    let fds: PathFds = roots
        .iter()
        .map(|(p, fd)| (p.clone(), fd.as_raw_fd()))
        .collect();
    // The inner stage from loom's sealed copy (never the installed file), and the seccomp program for bwrap to
    // install on its own pid 1 as well as on the inner stage.
    let inner_exe = crate::stage::sealed_copy(launch.inner_exe)?;
    let policy = SeccompPolicy {
        network: profile.network,
        host_namespaces: false,
        deny_truncate: false,
    };
    let programs =
        crate::seccomp::seccomp_programs(policy).map_err(|e| SpawnError::Setup(e.to_string()))?;
    let [program] = programs else {
        return Err(SpawnError::Setup("bwrap takes one seccomp program".into()));
    };
    let seccomp = crate::stage::pipe_with(&crate::stage::program_bytes(program))?;
    let stage = StageFds {
        inner_exe: inner_exe.as_raw_fd(),
        seccomp: seccomp.as_raw_fd(),
    };
    let mut keep: Vec<i32> = vec![status_w.as_raw_fd(), stage.inner_exe, stage.seccomp];
    keep.extend(fds.values().copied());
    let args = build_bwrap_args(profile, &fds, launch.bwrap_features, stage, &spec.encode())?;
    let mut cmd = Command::new(bwrap);
    cmd.args(args).current_dir("/");
    cmd.env_clear().envs(launch.env.iter().map(|(k, v)| (k, v)));
    cmd.stdin(streams.stdin.into_stdio())
        .stdout(streams.stdout.into_stdio())
        .stderr(streams.stderr.into_stdio());
    let loom = std::process::id() as libc::pid_t;
    // SAFETY: the closure only calls async-signal-safe functions (setpgid, fcntl) on integers, and the guard's split,
    // which makes raw system calls only (see `guard`).
    unsafe {
        cmd.pre_exec(move || {
            libc::setpgid(0, 0);
            for fd in &keep {
                if libc::fcntl(*fd, libc::F_SETFD, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            // the spawned process becomes the group's guard; bubblewrap runs in a child of it
            crate::guard::split_off_guard(loom)
        });
    }
    let child = cmd.spawn()?;
    drop(status_w);
    drop(roots);
    drop(inner_exe);
    drop(seccomp);
    let _cancel_target = CancelTarget::claim(child.id());
    started(child.id());
    // The caller's ends of the streams stay with the caller; ours were moved into `cmd` and close with it.
    drop(cmd);
    let mut outcome = wait_confined(child, status_r, profile.limits.timeout)?;
    // What the inner stage reported (`landlock=full|partial|off ...`), typed.
    let landlock = match outcome.enforced.split_whitespace().next() {
        Some("landlock=full") => Enforcement::Full,
        Some("landlock=partial") => Enforcement::Partial,
        _ => Enforcement::NotEnforced,
    };
    let abi = (launch.tier == Tier::A)
        .then(|| crate::landlock::host_landlock_abi().ok())
        .flatten();
    outcome.status = Some(view_status(launch.tier, abi, landlock));
    Ok(outcome)
}

/// Tier B: no second executable. Everything that allocates or opens files (the Landlock ruleset and its paths, the
/// seccomp program, argv, envp, the PATH candidates) is prepared here; the child, cloned with `CLONE_VM |
/// CLONE_VFORK` (see `clone_exec`), then enforces it with raw system calls — new session, limits, capabilities,
/// `no_new_privs`, Landlock, seccomp, every descriptor above 2 close-on-exec — and execs the command. A failed step
/// is reported on a pipe and fails the spawn, naming the step: nothing runs.
fn spawn_tier_b(
    launch: &Launch<'_>,
    streams: Streams,
    started: &mut dyn FnMut(u32),
) -> Result<Outcome, SpawnError> {
    let profile = launch.profile;
    let Some(prog) = launch.argv.first() else {
        return Err(SpawnError::Setup("no command".into()));
    };
    // Tier B has no private /tmp of its own: give the command a fresh private directory as TMPDIR.
    let private_tmp = PrivateTmp::create()?;
    // a root holding .git, .loom, an authority file or a secret store is granted entry by entry (crate::split)
    let mut rules = crate::split::build_host_rules(profile, &mut crate::split::host_lister)
        .map_err(|why| SpawnError::Inexpressible {
            tier: Tier::B.name(),
            grant: profile.grant.clone(),
            why,
        })?;
    rules.push(LandlockRule {
        path: private_tmp.0.clone(),
        access: AccessClass::Write,
        required: true,
    });
    // What Landlock withholds on this host and what seccomp makes up for (see `coverage`); a right nobody
    // withholds and the manifest does not accept refuses the row before anything runs.
    let abi = crate::landlock::host_landlock_abi()
        .map_err(|_| SpawnError::Setup(crate::landlock::LandlockError::NotEnforced.to_string()))?;
    let status = tier_b_status(abi, &profile.limits.accept);
    if let Some(why) = tier_b_refusal(&status) {
        return Err(SpawnError::Inexpressible {
            tier: Tier::B.name(),
            grant: profile.grant.clone(),
            why,
        });
    }
    // No namespaces of its own: SysV IPC and inotify would reach the host's, and seccomp closes what Landlock does
    // not mediate (see SeccompPolicy).
    let policy = SeccompPolicy {
        network: profile.network,
        host_namespaces: true,
        deny_truncate: abi < 3,
    };
    let confinement = Confinement::prepare(
        Some(&rules),
        policy,
        true,
        profile.limits.max_procs,
        profile.limits.max_file_size,
    )
    .map_err(SpawnError::Setup)?;
    let enforced = confinement.describe();
    let mut env = launch.env.clone();
    env.push(("TMPDIR".into(), private_tmp.0.clone().into_os_string()));
    // The guard that kills the command's session if loom dies (`session_guard`); the child tells it its pid.
    let (guard, guard_w) = SessionGuard::start()?;
    let spawned = crate::clone_exec::spawn(
        launch.argv,
        &env,
        &profile.cwd,
        [streams.stdin, streams.stdout, streams.stderr],
        &confinement,
        guard_w.as_fd(),
    );
    drop(guard_w);
    drop(confinement);
    let child = match spawned {
        Ok(c) => c,
        Err(CloneError::Io(e)) => return Err(SpawnError::Io(e)),
        Err(CloneError::Child(e)) => return Err(tier_b_failure(e, prog, &profile.cwd)),
    };
    let pid = child.id();
    let _cancel_target = CancelTarget::claim(pid);
    // What the child enforced, read back from the kernel now that it has exec'd (not yet reaped, so the pid is
    // still the command's, also when it has already exited): the report never rests on what loom asked for alone.
    let checked = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|e| e.to_string())
        .and_then(|text| crate::inner::check_confined(&text));
    if let Err(why) = checked {
        kill_group(pid);
        let mut child = child;
        let _ = child.wait();
        return Err(SpawnError::Setup(format!(
            "the command's confinement could not be confirmed: {why}"
        )));
    }
    started(pid);
    // The command is its session's leader (setsid before exec) and seccomp denies setsid to everything it starts,
    // so every descendant stays in that session: all of them are killed when the call ends, before the leader is
    // reaped (its pid, hence the session id, cannot be reused meanwhile).
    // The guard ends with the session, before the leader is reaped (so it never watches a session id reused).
    let mut guard = Some(guard);
    let (exit, timed_out) = wait_tree(child, profile.limits.timeout, &mut |sid| {
        if let Ok(sid) = libc::pid_t::try_from(sid) {
            kill_session(sid);
        }
        guard.take();
    })?;
    drop(private_tmp);
    Ok(Outcome {
        code: exit_code(exit),
        enforced,
        timed_out,
        status: Some(status),
        swept: Vec::new(),
    })
}

/// What a tier B child's failed step means for the caller.
pub(crate) fn tier_b_failure(e: EnforceError, prog: &OsString, cwd: &Path) -> SpawnError {
    match e.step {
        // As the inner stage: a command that is missing, or that the profile does not let it execute.
        Step::Exec => match e.error.raw_os_error() {
            Some(libc::ENOENT | libc::EACCES | libc::ENOTDIR) => {
                SpawnError::NotFound(prog.to_string_lossy().into_owned())
            }
            _ => SpawnError::Io(e.error),
        },
        Step::Chdir => SpawnError::Setup(format!("chdir {}: {}", cwd.display(), e.error)),
        _ => SpawnError::Setup(e.to_string()),
    }
}

/// A fresh `0700` directory under the host's temp dir, removed (with its contents) on drop.
pub(crate) struct PrivateTmp(pub(crate) PathBuf);

/// The host's temp dir and its canonical path, resolved once per process (and again if `TMPDIR` changes).
static TEMP_PARENT: std::sync::Mutex<Option<(PathBuf, PathBuf)>> = std::sync::Mutex::new(None);
/// Tells apart the directories one process creates within the same nanosecond.
static TEMP_SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl PrivateTmp {
    pub(crate) fn create() -> Result<PrivateTmp, SpawnError> {
        use std::os::unix::fs::DirBuilderExt;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default();
        let seq = TEMP_SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let parent = canonical_temp_dir()?;
        // Canonical already: the parent is, and the last component is ours and no symlink (mkdir does not follow one).
        let dir = parent.join(format!("loom-sandbox-{}-{nanos}-{seq}", std::process::id()));
        // `create` (not `create_dir_all`) fails if anything already sits at the name, symlinks included.
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        Ok(PrivateTmp(dir))
    }
}

fn canonical_temp_dir() -> std::io::Result<PathBuf> {
    let host = std::env::temp_dir();
    let mut cached = TEMP_PARENT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((h, canonical)) = cached.as_ref() {
        if *h == host {
            return Ok(canonical.clone());
        }
    }
    let canonical = std::fs::canonicalize(&host)?;
    *cached = Some((host, canonical.clone()));
    Ok(canonical)
}

impl Drop for PrivateTmp {
    fn drop(&mut self) {
        // Usually empty: one rmdir, and the walk only when the command left something behind.
        if std::fs::remove_dir(&self.0).is_err() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

enum Event {
    Status(String),
    Exited(std::io::Result<std::process::ExitStatus>, String),
}

/// What the wait for a confined command saw: its exit status, the inner stage's status line and what followed it.
struct Waited {
    status: std::process::ExitStatus,
    line: String,
    rest: String,
    timed_out: bool,
}

/// Waits for the sandbox's root process (killing its tree after `timeout`), reading the inner stage's status pipe,
/// and turns what the inner stage reported into the outcome. One thread: polls a pidfd and the pipe together when
/// the kernel has pidfds (Linux 5.3+), else reads the pipe on a helper thread.
pub(crate) fn wait_confined(
    child: Child,
    status_r: OwnedFd,
    timeout: Option<Duration>,
) -> Result<Outcome, SpawnError> {
    let waited = match pidfd_open(child.id()) {
        Some(pidfd) => wait_confined_poll(child, &pidfd, status_r, timeout)?,
        None => wait_confined_thread(child, status_r, timeout)?,
    };
    let Waited {
        status,
        line,
        rest,
        timed_out,
    } = waited;
    if let Some(msg) = rest.lines().find_map(|l| l.strip_prefix("execfailed ")) {
        return Err(SpawnError::Setup(format!("exec {msg}")));
    }
    match line.split_once(' ').unwrap_or((line.as_str(), "")) {
        ("ok", enforced) => Ok(Outcome {
            code: exit_code(status),
            enforced: enforced.to_string(),
            timed_out,
            status: None,
            swept: Vec::new(),
        }),
        ("err", msg) => Err(SpawnError::Setup(msg.to_string())),
        ("notfound", cmd) => Err(SpawnError::NotFound(cmd.to_string())),
        _ if timed_out => Err(SpawnError::Setup(
            "timed out while the sandbox was starting".into(),
        )),
        _ => Err(SpawnError::Setup(format!(
            "the sandbox exited with status {} before the command started (see the message above)",
            exit_code(status)
        ))),
    }
}

fn wait_confined_poll(
    mut child: Child,
    pidfd: &OwnedFd,
    status_r: OwnedFd,
    timeout: Option<Duration>,
) -> Result<Waited, SpawnError> {
    let pid = child.id();
    let mut file = std::fs::File::from(status_r);
    // SAFETY: setting O_NONBLOCK on a descriptor we own.
    unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
    let mut buf = Vec::new();
    let mut chunk = [0u8; 512];
    let mut pipe_open = true;
    let deadline = timeout.map(|t| Instant::now() + t);
    let mut timed_out = false;
    loop {
        let wait_ms = match deadline {
            Some(d) if !timed_out => {
                let left = d.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    timed_out = true;
                    kill_group(pid);
                    continue;
                }
                // Round up, so the deadline has passed when poll times out.
                i32::try_from(left.as_micros().div_ceil(1000)).unwrap_or(i32::MAX)
            }
            _ => -1,
        };
        let mut fds = [
            libc::pollfd {
                fd: pidfd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: if pipe_open { file.as_raw_fd() } else { -1 },
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: two valid pollfds (a negative fd is ignored by poll).
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), 2, wait_ms) };
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            kill_group(pid);
            let _ = child.wait();
            return Err(SpawnError::Io(e));
        }
        if fds[1].revents != 0 {
            match file.read(&mut chunk) {
                Ok(0) => pipe_open = false,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(_) => pipe_open = false,
            }
        }
        if fds[0].revents != 0 {
            break;
        }
    }
    let status = child.wait()?;
    // Everything that held the pipe is gone now (or about to be); read what is left without blocking.
    let _ = file.read_to_end(&mut buf);
    let newline = buf.iter().position(|b| *b == b'\n').unwrap_or(buf.len());
    let rest = buf.split_off(newline);
    Ok(Waited {
        status,
        line: String::from_utf8_lossy(&buf).into_owned(),
        rest: String::from_utf8_lossy(&rest).into_owned(),
        timed_out,
    })
}

fn wait_confined_thread(
    mut child: Child,
    status_r: OwnedFd,
    timeout: Option<Duration>,
) -> Result<Waited, SpawnError> {
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut file = std::fs::File::from(status_r);
        let mut buf = Vec::new();
        let mut chunk = [0u8; 512];
        let newline = loop {
            if let Some(i) = buf.iter().position(|b| *b == b'\n') {
                break i;
            }
            match file.read(&mut chunk) {
                Ok(0) | Err(_) => break buf.len(),
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let mut rest = buf.split_off(newline.min(buf.len()));
        let _ = tx.send(Event::Status(String::from_utf8_lossy(&buf).into_owned()));
        let status = child.wait();
        // Everything that held the pipe is gone now; read what the inner stage wrote after its first line.
        // SAFETY: setting O_NONBLOCK on a descriptor we own.
        unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
        let _ = file.read_to_end(&mut rest);
        let _ = tx.send(Event::Exited(
            status,
            String::from_utf8_lossy(&rest).into_owned(),
        ));
    });
    let deadline = timeout.map(|t| Instant::now() + t);
    let mut timed_out = false;
    let mut next = || -> Option<Event> {
        match deadline {
            None => rx.recv().ok(),
            Some(d) => match rx.recv_timeout(d.saturating_duration_since(Instant::now())) {
                Ok(e) => Some(e),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    timed_out = true;
                    kill_group(pid);
                    rx.recv().ok()
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => None,
            },
        }
    };
    let first = next();
    let second = next();
    let Some(Event::Status(line)) = first else {
        return Err(SpawnError::Setup(
            "the sandbox supervisor thread failed".into(),
        ));
    };
    let Some(Event::Exited(status, rest)) = second else {
        return Err(SpawnError::Setup(
            "the sandbox supervisor thread failed".into(),
        ));
    };
    let status = status?;
    Ok(Waited {
        status,
        line,
        rest,
        timed_out,
    })
}

/// Runs the command with no sandbox: only for the grant `"*"`. It gets exactly `env`, leads its own process group
/// (its pid goes to `started` as soon as it exists), is killed when the spawning thread ends, and the whole tree is
/// killed once `timeout` passes. Blocks until the command ends.
pub fn spawn_unconfined(
    argv: &[OsString],
    cwd: &Path,
    env: Vec<(OsString, OsString)>,
    timeout: Option<Duration>,
    streams: Streams,
    started: &mut dyn FnMut(u32),
) -> Result<Outcome, SpawnError> {
    let Some((prog, args)) = argv.split_first() else {
        return Err(SpawnError::Setup("no command".into()));
    };
    let mut cmd = Command::new(prog);
    cmd.args(args)
        .current_dir(cwd)
        .env_clear()
        .envs(env)
        .stdin(streams.stdin.into_stdio())
        .stdout(streams.stdout.into_stdio())
        .stderr(streams.stderr.into_stdio());
    // SAFETY: only async-signal-safe calls.
    unsafe {
        cmd.pre_exec(|| {
            libc::setpgid(0, 0);
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            Ok(())
        });
    }
    let child = cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => SpawnError::NotFound(prog.to_string_lossy().into_owned()),
        _ => SpawnError::Io(e),
    })?;
    // the parent's copies of the stream ends close now, so a reader sees the end when the tree exits
    drop(cmd);
    let pid = child.id();
    started(pid);
    let _cancel_target = CancelTarget::claim(pid);
    let (status, timed_out) = wait_tree(child, timeout, &mut |_| {})?;
    Ok(Outcome {
        code: exit_code(status),
        enforced: String::new(),
        timed_out,
        status: None,
        swept: Vec::new(),
    })
}

/// Waits for `child`, killing its whole tree (its process group) once `timeout` passes, and calls `before_reap`
/// with its pid once it has exited but before it is reaped (so the pid is not reused meanwhile). Polls a pidfd in the
/// calling thread when the kernel has them (Linux 5.3+; every host with Landlock), else waits on a helper thread
/// (and calls `before_reap` after the reap: without pidfds there is no waiting without reaping here).
fn wait_tree<C: Reap + Send + 'static>(
    mut child: C,
    timeout: Option<Duration>,
    before_reap: &mut dyn FnMut(u32),
) -> Result<(std::process::ExitStatus, bool), SpawnError> {
    let pid = child.id();
    if let Some(pidfd) = pidfd_open(pid) {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut timed_out = false;
        loop {
            let ms = match deadline {
                Some(d) if !timed_out => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        kill_group(pid);
                        timed_out = true;
                        continue;
                    }
                    // Round up, so the deadline has passed when poll times out.
                    i32::try_from(left.as_micros().div_ceil(1000)).unwrap_or(i32::MAX)
                }
                _ => -1,
            };
            let mut fd = libc::pollfd {
                fd: pidfd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let rc = unsafe { libc::poll(&mut fd, 1, ms) };
            if rc > 0 {
                before_reap(pid);
                return Ok((child.wait()?, timed_out));
            }
            if rc < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    kill_group(pid);
                    before_reap(pid);
                    let _ = child.wait();
                    return Err(SpawnError::Io(e));
                }
            }
        }
    }
    let Some(t) = timeout else {
        let status = child.wait()?;
        before_reap(pid);
        return Ok((status, false));
    };
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let (status, timed_out) = match rx.recv_timeout(t) {
        Ok(s) => (s, false),
        Err(_) => {
            kill_group(pid);
            (
                rx.recv()
                    .map_err(|_| std::io::Error::other("waiter thread failed"))?,
                true,
            )
        }
    };
    before_reap(pid);
    Ok((status?, timed_out))
}

/// A child this process must reap: std's, or tier B's cloned one.
trait Reap {
    fn id(&self) -> u32;
    fn wait(&mut self) -> std::io::Result<std::process::ExitStatus>;
}

impl Reap for Child {
    fn id(&self) -> u32 {
        Child::id(self)
    }
    fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        Child::wait(self)
    }
}

impl Reap for RawChild {
    fn id(&self) -> u32 {
        RawChild::id(self)
    }
    fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        RawChild::wait(self)
    }
}

/// A pidfd for our own, not yet reaped child (so `pid` cannot have been reused); `None` when the kernel has none.
fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0u32) };
    let fd = i32::try_from(fd).ok().filter(|fd| *fd >= 0)?;
    // SAFETY: the descriptor was just created and is owned by nobody else.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}
