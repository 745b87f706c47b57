//! What the broker's threads share: its configuration (limits, sandbox backend, grant), the call slots, the process
//! groups of running calls, and the two helpers every call uses (killing a call's group, setting a variable).

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use loom_kernel::{Grant, PathCtx};
use loom_sandbox::{AuthorityPaths, BwrapFeatures, Limits, SecretFacts, Tier};

use crate::dir::BrokerDir;

/// Bounds on what the broker will do at once and per call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerLimits {
    /// Calls running at the same time.
    pub max_concurrent: usize,
    /// Calls waiting for a free slot; any more are refused at once.
    pub max_waiting: usize,
    /// How long a call waits for a free slot before it is refused.
    pub queue_timeout: Duration,
    /// How long a shim may take to send its request.
    pub request_timeout: Duration,
    /// Bytes of standard output plus standard error one call may produce; past it the call is killed.
    pub max_output: u64,
    /// Wall-clock limit of one call; past it the call's tree is killed (exit 137).
    pub call_timeout: Option<Duration>,
}

impl Default for BrokerLimits {
    fn default() -> Self {
        BrokerLimits {
            max_concurrent: 8,
            max_waiting: 64,
            queue_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(10),
            max_output: 256 << 20,
            call_timeout: None,
        }
    }
}

/// The sandbox backend brokered commands run under. Without one, every call is refused.
#[derive(Debug, Clone)]
pub struct Backend {
    /// The tier.
    pub tier: Tier,
    /// The bubblewrap executable (tiers A and C).
    pub bwrap: Option<PathBuf>,
    /// Optional bubblewrap features.
    pub bwrap_features: BwrapFeatures,
    /// The executable that runs the sandbox's inner stage (the `loom` binary).
    pub inner_exe: PathBuf,
    /// Process and file-size limits for each command (the timeout comes from [`BrokerLimits::call_timeout`]).
    pub limits: Limits,
    /// Where each command's owed sweep is written down ([`loom_sandbox::Launch::sweep_records`]); the directory is
    /// among the authority files' protected paths.
    pub sweep_records: Option<PathBuf>,
}

/// Everything a broker needs. All of it comes from the loom process (outside the sandbox); nothing here is
/// supplied by a caller of the socket.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// The tool instance (`bash`), for messages.
    pub tool: String,
    /// The capability set; its per-command rows are brokered.
    pub grant: Grant,
    /// How the grant's relative and `~` paths resolve.
    pub ctx: PathCtx,
    /// The home directory.
    pub home: Option<PathBuf>,
    /// The host's PATH: brokered names are resolved here, never on the caller's PATH.
    pub host_path: OsString,
    /// The host environment brokered commands start from (filtered by each row's `env`).
    pub host_env: Vec<(OsString, OsString)>,
    /// The secrets loom knows and which the agent shares: a brokered command sees only those its row is granted.
    pub secrets: SecretFacts,
    /// The agent's authority files: read-only (secret stores masked) in every brokered command's view too.
    pub authority: AuthorityPaths,
    /// The sandbox backend; `None` refuses every call.
    pub backend: Option<Backend>,
    /// Bounds.
    pub limits: BrokerLimits,
    /// The `loom-shim` binary to install (see [`crate::shim_next_to_current_exe`]).
    pub shim: PathBuf,
    /// Where the broker directory is created (canonicalised).
    pub tmp: PathBuf,
}

#[derive(Default)]
pub(crate) struct Slots {
    pub running: usize,
    pub waiting: usize,
}

/// State shared by the accept thread, the connection threads and the handle.
pub(crate) struct Shared {
    pub config: BrokerConfig,
    pub dir: BrokerDir,
    pub shutdown: AtomicBool,
    /// The pid whose descendants may call (0: not yet known, any same-uid peer may call).
    pub root_pid: AtomicI32,
    pub slots: Mutex<Slots>,
    pub slot_freed: Condvar,
    /// Process-group leaders of running calls, by call id.
    pub calls: Mutex<HashMap<u64, i32>>,
    pub next_call: AtomicU64,
    pub connections: AtomicUsize,
    /// Every writable root of every row of the grant (canonical): the general row's shell, and each brokered
    /// command, can write there, so no brokered command is ever looked up or run from inside one.
    pub writable: Vec<PathBuf>,
}

impl Shared {
    pub fn kill_all(&self) {
        let calls = self
            .calls
            .lock()
            .map(|c| c.values().copied().collect::<Vec<_>>());
        for pid in calls.unwrap_or_default() {
            kill_group(pid);
        }
    }
}

pub(crate) use loom_sandbox::kill_group;

/// Sets `name` in an environment list, replacing an existing entry.
pub(crate) fn set_var(env: &mut Vec<(OsString, OsString)>, name: &str, value: OsString) {
    match env.iter_mut().find(|(k, _)| k == name) {
        Some((_, v)) => *v = value,
        None => env.push((name.into(), value)),
    }
}
