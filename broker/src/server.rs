//! The broker: a listening socket in the broker directory, one thread per connection, bounded, and torn down with
//! everything it started when its handle is dropped.

use std::collections::HashMap;
use std::ffi::OsString;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use loom_kernel::brokered_commands;
use loom_sandbox::{build_profile, HostFs, Limits, Place, Profile};

use crate::call::{refuse, serve};
use crate::dir::BrokerDir;
use crate::error::BrokerError;
use crate::peer::{my_uid, peer_cred};
use crate::shared::{set_var, BrokerConfig, Shared, Slots};

/// The command broker.
pub struct Broker;

/// A running broker. Dropping it stops accepting, kills every brokered command still running and removes the
/// broker directory.
pub struct BrokerHandle {
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
    commands: Vec<String>,
}

impl Broker {
    /// Creates the broker directory (socket, shims, neutral cwd) and starts accepting calls.
    ///
    /// # Ambient authority
    /// Creates files under `config.tmp` and listens on a unix socket there.
    pub fn start(config: BrokerConfig) -> Result<BrokerHandle, BrokerError> {
        let commands: Vec<String> = brokered_commands(&config.grant)
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        if commands.is_empty() {
            return Err(BrokerError::NothingToBroker);
        }
        let writable = writable_roots(&config);
        let dir = BrokerDir::create(&config.tmp, &config.shim, &commands)?;
        let sock = dir.socket();
        let listener = UnixListener::bind(&sock).map_err(|e| BrokerError::Io {
            what: format!("cannot listen on {}", sock.display()),
            source: e,
        })?;
        let shared = Arc::new(Shared {
            config,
            dir,
            shutdown: AtomicBool::new(false),
            root_pid: AtomicI32::new(0),
            slots: Mutex::new(Slots::default()),
            slot_freed: Condvar::new(),
            calls: Mutex::new(HashMap::new()),
            next_call: AtomicU64::new(1),
            connections: AtomicUsize::new(0),
            writable,
        });
        let s = Arc::clone(&shared);
        let accept = std::thread::Builder::new()
            .name("loom-broker-accept".into())
            .spawn(move || accept_loop(&s, &listener))
            .map_err(|e| BrokerError::Io {
                what: "cannot start the accept thread".into(),
                source: e,
            })?;
        Ok(BrokerHandle {
            shared,
            accept: Some(accept),
            commands,
        })
    }
}

/// The writable roots of every row of the grant, as each row's sandbox would bind them (canonical). A row whose
/// sandbox cannot be built never runs, so it writes nowhere.
fn writable_roots(config: &BrokerConfig) -> Vec<PathBuf> {
    let place = Place {
        cwd: PathBuf::from(&config.ctx.base),
        home: config.home.clone(),
        authority: config.authority.clone(),
    };
    let mut out: Vec<PathBuf> = config
        .grant
        .rows()
        .unwrap_or_default()
        .iter()
        .filter_map(|row| build_profile(row, &config.ctx, &place, Limits::default(), &HostFs).ok())
        .flat_map(|p| p.writable)
        .collect();
    out.sort();
    out.dedup();
    out
}

fn accept_loop(shared: &Arc<Shared>, listener: &UnixListener) {
    let limits = &shared.config.limits;
    let max_connections = limits.max_concurrent + limits.max_waiting;
    for conn in listener.incoming() {
        if shared.shutdown.load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = conn else { continue };
        // The socket lives in a 0700 directory, but check the peer anyway: only loom's own user may call.
        match peer_cred(&stream) {
            Ok(c) if c.uid == my_uid() => {}
            Ok(c) => {
                refuse(
                    &stream,
                    126,
                    &format!("peer uid {} is not loom's user; refused", c.uid),
                );
                continue;
            }
            Err(e) => {
                refuse(
                    &stream,
                    126,
                    &format!("cannot read the peer's credentials: {e}"),
                );
                continue;
            }
        }
        if shared.connections.load(Ordering::SeqCst) >= max_connections {
            let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
            refuse(
                &stream,
                126,
                &format!(
                    "too many brokered calls at once ({} running, {} waiting); try again",
                    limits.max_concurrent, limits.max_waiting
                ),
            );
            continue;
        }
        shared.connections.fetch_add(1, Ordering::SeqCst);
        let s = Arc::clone(shared);
        let spawned = std::thread::Builder::new()
            .name("loom-broker-call".into())
            .spawn(move || {
                serve(&s, stream);
                s.connections.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            shared.connections.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl BrokerHandle {
    /// The broker directory (bound read-only into the shell's sandbox).
    pub fn dir(&self) -> &Path {
        &self.shared.dir.root
    }
    /// The shim directory (first on the shell's PATH).
    pub fn shim_dir(&self) -> PathBuf {
        self.shared.dir.bin()
    }
    /// The socket.
    pub fn socket(&self) -> PathBuf {
        self.shared.dir.socket()
    }
    /// The brokered command names, sorted.
    pub fn commands(&self) -> &[String] {
        &self.commands
    }

    /// Makes the broker directory readable (not writable) inside the shell's sandbox: shims can execute and
    /// connect to the socket. A directory already inside a root of the profile is left as it is.
    pub fn add_to_profile(&self, profile: &mut Profile) {
        let root = self.dir().to_path_buf();
        if !profile.in_root(&root) {
            profile.readable.push(root);
            profile.readable.sort();
        }
    }

    /// Puts the shim directory first on the shell's PATH (adding PATH when the row's env dropped it: the shims
    /// must resolve, and the rest of PATH is the host's) and sets `LOOM_BROKER_SOCKET`.
    pub fn add_to_env(&self, env: &mut Vec<(OsString, OsString)>) {
        let mut path = self.shim_dir().into_os_string();
        let rest = env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| self.shared.config.host_path.clone());
        if !rest.is_empty() {
            path.push(":");
            path.push(rest);
        }
        set_var(env, "PATH", path);
        set_var(env, "LOOM_BROKER_SOCKET", self.socket().into_os_string());
    }

    /// Registers the process that roots the sandbox the broker serves: from now on a caller must be that process
    /// or one of its descendants.
    pub fn set_sandbox_root(&self, pid: u32) {
        let pid = i32::try_from(pid).unwrap_or(0);
        self.shared.root_pid.store(pid, Ordering::SeqCst);
    }

    /// Stops the broker: no new calls, every running call killed, the directory removed.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if self.shared.shutdown.swap(true, Ordering::SeqCst) {
            return;
        }
        self.shared.kill_all();
        // Wake the accept loop so it sees the flag.
        let _ = UnixStream::connect(self.shared.dir.socket());
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
        // A call that registered just before the flag was set.
        self.shared.kill_all();
        // Remove the directory now: connection threads still finishing hold the shared state, and the process may
        // exit before they drop it.
        self.shared.dir.remove();
    }
}

impl Drop for BrokerHandle {
    fn drop(&mut self) {
        self.stop();
    }
}
