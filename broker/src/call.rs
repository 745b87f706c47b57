//! One brokered call: authenticate the peer, read the request, ask the kernel which row names the command, resolve
//! it on the host PATH, build that row's sandbox, run it with the streams relayed, send the exit status.

use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use loom_kernel::{caller_var_crosses, decide_brokered};
use loom_sandbox::{
    build_env, build_profile, spawn_sandboxed_io, GroupSlot, HostFs, Launch, Place, Profile,
    SpawnError, Stream, Streams,
};

use crate::frame::{self, read_frame, write_frame, Request};
use crate::peer::{descends_from, peer_cred, NoFdReader};
use crate::shared::{set_var, Shared};

/// Exit code for a refused or failed call.
const REFUSED: u8 = 126;
/// Exit code for a name that is not a brokered command (or not installed).
const NOT_FOUND: u8 = 127;

/// Sends an error frame and closes the connection. What the peer already sent is read and discarded first (without
/// waiting, and never accepting a descriptor), so the close reads as an end of stream rather than a reset.
pub(crate) fn refuse(stream: &UnixStream, code: u8, message: &str) {
    let mut w = stream;
    let _ = write_frame(&mut w, frame::T_ERROR, &frame::error_payload(code, message));
    let _ = stream.shutdown(std::net::Shutdown::Write);
    if stream.set_nonblocking(true).is_ok() {
        let mut reader = NoFdReader::new(stream);
        let mut sink = [0u8; 16 << 10];
        let mut budget = 1usize << 20;
        while budget > 0 {
            match reader.read(&mut sink) {
                Ok(n) if n > 0 => budget = budget.saturating_sub(n),
                // A descriptor arrived (and was closed): keep draining, but it counts against the budget too.
                Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                    budget = budget.saturating_sub(sink.len())
                }
                _ => break,
            }
        }
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

/// Serves one connection to its end.
pub(crate) fn serve(shared: &Arc<Shared>, stream: UnixStream) {
    match prepare(shared, &stream) {
        Ok(call) => run(shared, stream, call),
        Err((code, message)) => refuse(&stream, code, &message),
    }
}

/// A call that passed every check: what to run, under which profile, with which environment.
struct Prepared {
    name: String,
    profile: Profile,
    argv: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
}

type Refusal = (u8, String);

fn prepare(shared: &Arc<Shared>, stream: &UnixStream) -> Result<Prepared, Refusal> {
    let cfg = &shared.config;
    let tool = &cfg.tool;
    let root = shared.root_pid.load(Ordering::SeqCst);
    if root > 0 {
        let cred = peer_cred(stream)
            .map_err(|e| (REFUSED, format!("cannot read the peer's credentials: {e}")))?;
        if !descends_from(cred.pid, root) {
            return Err((
                REFUSED,
                format!(
                    "the caller (pid {}) is not inside the sandbox this broker serves; refused",
                    cred.pid
                ),
            ));
        }
    }
    let mut reader = Deadline {
        inner: NoFdReader::new(stream),
        stream,
        until: Instant::now() + cfg.limits.request_timeout,
    };
    let first = read_frame(&mut reader).map_err(|e| (REFUSED, format!("bad request: {e}")))?;
    let Some(first) = first.filter(|f| f.kind == frame::T_REQUEST) else {
        return Err((
            REFUSED,
            "bad request: the first frame must be a request".into(),
        ));
    };
    let _ = stream.set_read_timeout(None);
    let req =
        Request::decode(&first.payload).map_err(|e| (REFUSED, format!("bad request: {e}")))?;
    let Some(name) = req.argv[0].to_str().map(str::to_string) else {
        return Err((
            NOT_FOUND,
            format!("{tool}: the command name is not UTF-8; refused"),
        ));
    };

    // The caller's cwd, as the host sees it. Anything that does not resolve to a directory is no cwd at all.
    let cwd = std::fs::canonicalize(&req.cwd)
        .ok()
        .filter(|p| p.is_dir())
        .and_then(|p| p.to_str().map(str::to_string));
    let decided = decide_brokered(
        tool,
        &cfg.ctx,
        &cfg.grant,
        &name,
        cwd.as_deref().unwrap_or("/"),
    )
    .map_err(|d| (if d.not_found { NOT_FOUND } else { REFUSED }, d.reason))?;
    let cwd = if cwd.is_some() { decided.cwd } else { None };

    let Some(backend) = &cfg.backend else {
        return Err((
            REFUSED,
            format!(
                "{tool}: `{name}` has its own grant, but this host has no sandbox backend, and the broker never runs \
                 a command unconfined (see `loom doctor`)"
            ),
        ));
    };
    let found = match resolve_on_host_path(
        &name,
        &cfg.host_path,
        &shared.dir.bin(),
        &shared.writable,
    ) {
        Resolved::Found(p) => p,
        Resolved::Missing => {
            return Err((
                NOT_FOUND,
                format!(
                    "{tool}: `{name}` has its own grant but is not installed on the host PATH ({}); install it, or \
                     start loom with a PATH that has it",
                    cfg.host_path.to_string_lossy()
                ),
            ))
        }
        Resolved::Writable { path, root } => {
            return Err((
                REFUSED,
                format!(
                    "{tool}: `{name}` has its own grant, but the only `{name}` on loom's PATH is {}, inside {}, which \
                     this grant can write: the shell could have put it there, so it never runs with `{name}`'s grant. \
                     Install `{name}` in a directory no row of the grant can write (such as /usr/local/bin), or narrow \
                     the writable `paths`",
                    path.display(),
                    root.display()
                ),
            ))
        }
    };

    let neutral = shared.dir.neutral_cwd();
    let place = Place {
        cwd: cwd
            .as_ref()
            .map(PathBuf::from)
            .unwrap_or_else(|| neutral.clone()),
        home: cfg.home.clone(),
        authority: cfg.authority.clone(),
    };
    let mut limits = backend.limits.clone();
    limits.timeout = cfg.limits.call_timeout;
    let mut profile = build_profile(&decided.row, &cfg.ctx, &place, limits, &HostFs)
        .map_err(|e| (REFUSED, format!("{tool}: `{name}`: {e}")))?;
    if cwd.is_none() {
        profile.readable.push(neutral.clone());
        profile.readable.sort();
        profile.cwd = neutral;
    }
    let exe = visible_exe(&mut profile, &found);

    // Environment: loom's own, through the row's policy, overlaid with the caller's values of the variables the row
    // names exactly (the kernel's allowlist: a pattern, "*" or the default never passes a caller's value), both
    // screened for secrets. PATH is loom's, minus every directory the grant can write.
    let mut env = build_env(
        &profile.env,
        cfg.host_env.iter().filter(|(k, _)| k != "PATH").cloned(),
        &cfg.secrets,
    );
    let from_caller = req.env.iter().filter_map(|entry| {
        let bytes = entry.as_bytes();
        let eq = bytes.iter().position(|b| *b == b'=')?;
        let k = std::str::from_utf8(&bytes[..eq]).ok()?;
        (k != "LOOM_BROKER_SOCKET" && caller_var_crosses(&decided.row, k)).then(|| {
            (
                OsString::from(k),
                OsStr::from_bytes(&bytes[eq + 1..]).to_os_string(),
            )
        })
    });
    for (k, v) in build_env(&profile.env, from_caller, &cfg.secrets) {
        if let Some(k) = k.to_str() {
            set_var(&mut env, k, v);
        }
    }
    if profile.env.allows("PATH") {
        set_var(
            &mut env,
            "PATH",
            trusted_path(&cfg.host_path, &shared.dir.bin(), &shared.writable),
        );
    }
    if profile.env.allows("PWD") {
        set_var(&mut env, "PWD", profile.cwd.clone().into_os_string());
    }
    let mut argv = req.argv;
    argv[0] = exe.into_os_string();
    Ok(Prepared {
        name,
        profile,
        argv,
        env,
    })
}

/// Reads the request under one deadline for all of it: a per-read timeout would let a caller that sends a byte at a
/// time hold a connection slot for as long as it likes.
struct Deadline<'a> {
    inner: NoFdReader,
    stream: &'a UnixStream,
    until: Instant,
}

impl Read for Deadline<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let late = || {
            std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the request was not sent in time",
            )
        };
        let left = self.until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(late());
        }
        self.stream.set_read_timeout(Some(left))?;
        self.inner.read(buf).map_err(|e| match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => late(),
            _ => e,
        })
    }
}

/// Where a brokered name resolves on loom's PATH.
#[derive(Debug, PartialEq, Eq)]
enum Resolved {
    /// An installed binary no row of the grant can write.
    Found(PathBuf),
    /// No executable of that name.
    Missing,
    /// Only executables that a row of the grant can write (the first one, and the writable root holding it).
    Writable { path: PathBuf, root: PathBuf },
}

/// The PATH entries brokered commands are looked up in: absolute, not the shim directory, existing, and outside every
/// writable root of the grant (checked on the canonical directory, so a symlink into a root does not pass).
fn trusted_dirs<'a>(
    host_path: &'a OsStr,
    shim_dir: &'a Path,
    writable: &'a [PathBuf],
) -> impl Iterator<Item = (PathBuf, Option<&'a PathBuf>)> + 'a {
    std::env::split_paths(host_path)
        .filter(move |d| d.is_absolute() && d != shim_dir)
        .filter_map(move |d| {
            let canonical = std::fs::canonicalize(&d).ok()?;
            if canonical.starts_with(shim_dir) {
                return None;
            }
            let root = writable.iter().find(|r| canonical.starts_with(r));
            Some((d, root))
        })
}

/// Finds `name` on loom's PATH: the first executable regular file of that name in a directory, and at a canonical
/// path, outside every writable root of the grant. Relative entries and the shim directory are skipped, so only
/// installed binaries the sandboxed side cannot have planted or changed are ever found.
fn resolve_on_host_path(
    name: &str,
    host_path: &OsStr,
    shim_dir: &Path,
    writable: &[PathBuf],
) -> Resolved {
    let mut planted = None;
    for (dir, root) in trusted_dirs(host_path, shim_dir, writable) {
        let p = dir.join(name);
        if !std::fs::metadata(&p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        {
            continue;
        }
        let canonical = std::fs::canonicalize(&p).unwrap_or_else(|_| p.clone());
        match root.or_else(|| writable.iter().find(|r| canonical.starts_with(r))) {
            Some(root) => {
                planted.get_or_insert_with(|| Resolved::Writable {
                    path: p,
                    root: root.clone(),
                });
            }
            None => return Resolved::Found(p),
        }
    }
    planted.unwrap_or(Resolved::Missing)
}

/// The PATH a brokered command runs with: loom's, without relative entries, the shim directory, or any directory
/// inside a writable root of the grant.
fn trusted_path(host_path: &OsStr, shim_dir: &Path, writable: &[PathBuf]) -> OsString {
    let dirs: Vec<PathBuf> = trusted_dirs(host_path, shim_dir, writable)
        .filter(|(_, root)| root.is_none())
        .map(|(d, _)| d)
        .collect();
    std::env::join_paths(dirs).unwrap_or_default()
}

/// The path to exec `found` by inside the command's view, binding the binary read-only when the view lacks it.
fn visible_exe(profile: &mut Profile, found: &Path) -> PathBuf {
    let visible = |p: &Path, profile: &Profile| {
        profile.in_root(p)
            || profile
                .system
                .iter()
                .any(|s| s.symlink.is_none() && p.starts_with(&s.path))
    };
    if visible(found, profile) {
        return found.to_path_buf();
    }
    let canonical = std::fs::canonicalize(found).unwrap_or_else(|_| found.to_path_buf());
    if !visible(&canonical, profile) {
        profile.readable.push(canonical.clone());
        profile.readable.sort();
    }
    canonical
}

/// Per-call state shared by the relay threads.
struct CallState {
    /// The command's process group: a kill (the shim went away or misbehaved) before it exists is done when it
    /// starts; once the call ended, kills are moot.
    group: GroupSlot,
    /// Bytes of output relayed.
    output: AtomicU64,
    /// Why the broker killed the call, for the caller's stderr.
    killed: Mutex<Option<String>>,
}

impl CallState {
    fn kill(&self, why: Option<String>) {
        if let Some(why) = why {
            if let Ok(mut k) = self.killed.lock() {
                k.get_or_insert(why);
            }
        }
        self.group.kill();
    }
}

struct SlotGuard<'a>(&'a Shared);

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        if let Ok(mut s) = self.0.slots.lock() {
            s.running = s.running.saturating_sub(1);
        }
        self.0.slot_freed.notify_one();
    }
}

fn acquire_slot(shared: &Shared) -> Result<SlotGuard<'_>, String> {
    let limits = &shared.config.limits;
    let busy = || {
        format!(
            "too many brokered calls at once ({} running, {} waiting); try again",
            limits.max_concurrent, limits.max_waiting
        )
    };
    let mut s = shared.slots.lock().map_err(|_| busy())?;
    if s.running < limits.max_concurrent {
        s.running += 1;
        return Ok(SlotGuard(shared));
    }
    if s.waiting >= limits.max_waiting {
        return Err(busy());
    }
    s.waiting += 1;
    let deadline = Instant::now() + limits.queue_timeout;
    while s.running >= limits.max_concurrent && !shared.shutdown.load(Ordering::SeqCst) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        s = match shared.slot_freed.wait_timeout(s, left) {
            Ok((s, _)) => s,
            Err(_) => return Err(busy()),
        };
    }
    s.waiting -= 1;
    if s.running >= limits.max_concurrent || shared.shutdown.load(Ordering::SeqCst) {
        return Err(busy());
    }
    s.running += 1;
    Ok(SlotGuard(shared))
}

fn run(shared: &Arc<Shared>, stream: UnixStream, call: Prepared) {
    let slot = match acquire_slot(shared) {
        Ok(s) => s,
        Err(msg) => return refuse(&stream, REFUSED, &msg),
    };
    let Some(backend) = shared.config.backend.clone() else {
        return refuse(&stream, REFUSED, "no sandbox backend");
    };
    let pipes =
        (|| Ok::<_, std::io::Error>((std::io::pipe()?, std::io::pipe()?, std::io::pipe()?)))();
    let Ok(((in_r, in_w), (out_r, out_w), (err_r, err_w))) = pipes else {
        return refuse(&stream, REFUSED, "cannot create pipes for the call");
    };
    let (Ok(up), Ok(down)) = (stream.try_clone(), stream.try_clone()) else {
        return refuse(&stream, REFUSED, "cannot clone the connection");
    };
    let down = Arc::new(Mutex::new(down));
    let state = Arc::new(CallState {
        group: GroupSlot::new(),
        output: AtomicU64::new(0),
        killed: Mutex::new(None),
    });
    let max_output = shared.config.limits.max_output;

    // stdin: frames from the shim into the command; a hangup or a misbehaving shim cancels the call.
    let st = Arc::clone(&state);
    let stdin_thread = std::thread::spawn(move || {
        let mut reader = NoFdReader::new(&up);
        let mut sink = Some(in_w);
        loop {
            match read_frame(&mut reader) {
                Ok(Some(f)) if f.kind == frame::T_STDIN => {
                    if let Some(w) = sink.as_mut() {
                        if w.write_all(&f.payload).is_err() {
                            // The command closed its stdin: discard the rest, as a pipe reader that exited would.
                            sink = None;
                        }
                    }
                }
                Ok(Some(f)) if f.kind == frame::T_STDIN_EOF => sink = None,
                Ok(Some(f)) => {
                    st.kill(Some(format!(
                        "protocol violation: unexpected frame type {:#04x}",
                        f.kind
                    )));
                    return;
                }
                Ok(None) => {
                    // The shim went away (killed, or it saw the exit frame): nothing more to deliver.
                    st.kill(None);
                    return;
                }
                Err(e) => {
                    st.kill(Some(e.to_string()));
                    return;
                }
            }
        }
    });

    let relay = |mut pipe: std::io::PipeReader, kind: u8| {
        let st = Arc::clone(&state);
        let down = Arc::clone(&down);
        std::thread::spawn(move || {
            let mut buf = vec![0u8; frame::CHUNK];
            loop {
                let n = match pipe.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                let total = st.output.fetch_add(n as u64, Ordering::SeqCst) + n as u64;
                if total > max_output {
                    st.kill(Some(format!(
                        "output exceeded the broker's limit of {max_output} bytes"
                    )));
                    return;
                }
                let sent = down
                    .lock()
                    .map_err(|_| ())
                    .and_then(|mut d| write_frame(&mut *d, kind, &buf[..n]).map_err(|_| ()));
                if sent.is_err() {
                    st.kill(None);
                    return;
                }
            }
        })
    };
    let out_thread = relay(out_r, frame::T_STDOUT);
    let err_thread = relay(err_r, frame::T_STDERR);

    let call_id = shared.next_call.fetch_add(1, Ordering::SeqCst);
    let launch = Launch {
        profile: &call.profile,
        tier: backend.tier,
        bwrap: backend.bwrap.as_deref(),
        bwrap_features: backend.bwrap_features,
        inner_exe: &backend.inner_exe,
        argv: &call.argv,
        env: call.env,
        sweep_records: backend.sweep_records.as_deref(),
    };
    let streams = Streams {
        stdin: Stream::from(in_r),
        stdout: Stream::from(out_w),
        stderr: Stream::from(err_w),
    };
    let result = if shared.shutdown.load(Ordering::SeqCst) {
        Err(SpawnError::Setup("the broker is shutting down".into()))
    } else {
        spawn_sandboxed_io(&launch, streams, &mut |pid| {
            if let Ok(mut c) = shared.calls.lock() {
                c.insert(call_id, i32::try_from(pid).unwrap_or(0));
            }
            state.group.started(pid);
            if shared.shutdown.load(Ordering::SeqCst) {
                state.group.kill();
            }
        })
    };
    // Whatever the command left behind in its group dies with the call.
    state.group.kill();
    state.group.finish();
    if let Ok(mut c) = shared.calls.lock() {
        c.remove(&call_id);
    }
    drop(slot);
    let _ = out_thread.join();
    let _ = err_thread.join();

    let killed = state.killed.lock().ok().and_then(|k| k.clone());
    let mut d = match down.lock() {
        Ok(d) => d,
        Err(_) => return,
    };
    match result {
        Err(e) => {
            let code = if matches!(e, SpawnError::NotFound(_)) {
                NOT_FOUND
            } else {
                REFUSED
            };
            let _ = write_frame(
                &mut *d,
                frame::T_ERROR,
                &frame::error_payload(
                    code,
                    &format!("{}: `{}`: {e}", shared.config.tool, call.name),
                ),
            );
        }
        Ok(outcome) => {
            if let Some(note) = loom_sandbox::swept_note(&outcome.swept) {
                let note = format!("loom-broker: {}: {note}\n", call.name);
                let _ = write_frame(&mut *d, frame::T_STDERR, note.as_bytes());
            }
            let why = killed.or_else(|| {
                outcome
                    .timed_out
                    .then(|| "timed out; the broker killed its process tree".to_string())
            });
            if let Some(why) = &why {
                let note = format!("loom-broker: {}: {why}\n", call.name);
                let _ = write_frame(&mut *d, frame::T_STDERR, note.as_bytes());
                let _ = write_frame(
                    &mut *d,
                    frame::T_EXIT,
                    &frame::exit_payload(frame::EXIT_SIGNAL, libc::SIGKILL),
                );
            } else {
                let _ = write_frame(
                    &mut *d,
                    frame::T_EXIT,
                    &frame::exit_payload(frame::EXIT_CODE, outcome.code),
                );
            }
        }
    }
    let _ = d.shutdown(std::net::Shutdown::Both);
    drop(d);
    let _ = stdin_thread.join();
}

#[cfg(test)]
mod resolve_tests {
    use super::*;

    fn exe(p: &Path) {
        std::fs::write(p, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn scratch(tag: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("loom-broker-resolve-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::canonicalize(&d).unwrap()
    }

    #[test]
    fn path_entries_inside_a_writable_root_are_never_searched() {
        let d = scratch("planted");
        let (home, sys, shim) = (d.join("home"), d.join("sys"), d.join("shim"));
        let local = home.join(".local/bin");
        for x in [&local, &sys, &shim] {
            std::fs::create_dir_all(x).unwrap();
        }
        exe(&local.join("gcalcli"));
        exe(&shim.join("gcalcli"));
        let path = std::env::join_paths([&shim, &local, &sys]).unwrap();
        let writable = vec![home.clone()];
        // only the planted copy (and the shim): refused, naming the file and the root
        assert_eq!(
            resolve_on_host_path("gcalcli", &path, &shim, &writable),
            Resolved::Writable {
                path: local.join("gcalcli"),
                root: home.clone()
            }
        );
        // installed outside every writable root: that one, although the planted one comes first
        exe(&sys.join("gcalcli"));
        assert_eq!(
            resolve_on_host_path("gcalcli", &path, &shim, &writable),
            Resolved::Found(sys.join("gcalcli"))
        );
        // control: with nothing writable, PATH order decides
        assert_eq!(
            resolve_on_host_path("gcalcli", &path, &shim, &[]),
            Resolved::Found(local.join("gcalcli"))
        );
        assert_eq!(
            resolve_on_host_path("jq", &path, &shim, &writable),
            Resolved::Missing
        );
        // the command's own PATH drops the writable directory too, and relative entries
        let with_rel =
            std::env::join_paths([PathBuf::from("bin"), local.clone(), sys.clone()]).unwrap();
        assert_eq!(
            trusted_path(&with_rel, &shim, &writable),
            sys.clone().into_os_string()
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_symlink_into_a_writable_root_does_not_pass() {
        let d = scratch("symlink");
        let (proj, sys, shim) = (d.join("proj"), d.join("sys"), d.join("shim"));
        for x in [&proj, &sys, &shim] {
            std::fs::create_dir_all(x).unwrap();
        }
        // a binary in a safe directory that links into the project (pipx-style), and a PATH entry that is a link
        exe(&proj.join("real"));
        std::os::unix::fs::symlink(proj.join("real"), sys.join("gcalcli")).unwrap();
        std::os::unix::fs::symlink(&proj, d.join("linkdir")).unwrap();
        let writable = vec![proj.clone()];
        let path = std::env::join_paths([&sys]).unwrap();
        assert!(matches!(
            resolve_on_host_path("gcalcli", &path, &shim, &writable),
            Resolved::Writable { .. }
        ));
        let path = std::env::join_paths([d.join("linkdir")]).unwrap();
        assert!(matches!(
            resolve_on_host_path("real", &path, &shim, &writable),
            Resolved::Writable { .. }
        ));
        assert_eq!(trusted_path(&path, &shim, &writable), OsString::new());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
