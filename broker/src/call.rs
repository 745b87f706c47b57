//! One brokered call: authenticate the peer, read the request, ask the kernel which row names the command, resolve
//! it on the host PATH, build that row's sandbox, run it with the streams relayed, send the exit status.

use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use loom_kernel::{decide_brokered, is_injection_var};
use loom_sandbox::{
    build_env, build_profile, spawn_sandboxed_io, HostFs, Launch, Place, Profile, SpawnError,
    Stream, Streams,
};

use crate::frame::{self, read_frame, write_frame, Request};
use crate::peer::{descends_from, peer_cred, NoFdReader};
use crate::server::{kill_group, set_var, Shared};

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
    let _ = stream.set_read_timeout(Some(cfg.limits.request_timeout));
    let mut reader = NoFdReader::new(stream);
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
    let Some(found) = resolve_on_host_path(&name, &cfg.host_path, &shared.dir.bin()) else {
        return Err((
            NOT_FOUND,
            format!(
                "{tool}: `{name}` has its own grant but is not installed on the host PATH ({}); install it, or \
                 start loom with a PATH that has it",
                cfg.host_path.to_string_lossy()
            ),
        ));
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

    // Environment: the host's, through the row's policy, overlaid with the caller's values the row lets through —
    // except PATH (always the host's) and anything that would load the caller's code into the command.
    let mut env = build_env(
        &profile.env,
        cfg.host_env.iter().filter(|(k, _)| k != "PATH").cloned(),
        &cfg.secrets,
    );
    for entry in &req.env {
        let bytes = entry.as_bytes();
        let Some(eq) = bytes.iter().position(|b| *b == b'=') else {
            continue;
        };
        let (k, v) = (&bytes[..eq], &bytes[eq + 1..]);
        let Ok(k) = std::str::from_utf8(k) else {
            continue;
        };
        if k.is_empty()
            || k == "PATH"
            || k == "LOOM_BROKER_SOCKET"
            || is_injection_var(k)
            || !profile.env.allows(k)
        {
            continue;
        }
        set_var(&mut env, k, OsStr::from_bytes(v).to_os_string());
    }
    if profile.env.allows("PATH") {
        set_var(&mut env, "PATH", cfg.host_path.clone());
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

/// Finds `name` on the host PATH: the first absolute directory holding an executable regular file of that name.
/// Relative PATH entries and the shim directory are skipped, so only installed binaries are ever found.
fn resolve_on_host_path(name: &str, host_path: &OsStr, shim_dir: &Path) -> Option<PathBuf> {
    std::env::split_paths(host_path)
        .filter(|d| d.is_absolute() && d != shim_dir)
        .map(|d| d.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
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
    /// The process-group leader, once spawned.
    pgid: AtomicI32,
    /// The call ended (or was cancelled): further kills are moot.
    done: AtomicBool,
    /// The shim went away or misbehaved: kill as soon as the pgid is known.
    cancelled: AtomicBool,
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
        self.cancelled.store(true, Ordering::SeqCst);
        if !self.done.load(Ordering::SeqCst) {
            kill_group(self.pgid.load(Ordering::SeqCst));
        }
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
        pgid: AtomicI32::new(0),
        done: AtomicBool::new(false),
        cancelled: AtomicBool::new(false),
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
            let pid = i32::try_from(pid).unwrap_or(0);
            state.pgid.store(pid, Ordering::SeqCst);
            if let Ok(mut c) = shared.calls.lock() {
                c.insert(call_id, pid);
            }
            if state.cancelled.load(Ordering::SeqCst) || shared.shutdown.load(Ordering::SeqCst) {
                kill_group(pid);
            }
        })
    };
    // Whatever the command left behind in its group dies with the call.
    kill_group(state.pgid.load(Ordering::SeqCst));
    state.done.store(true, Ordering::SeqCst);
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
