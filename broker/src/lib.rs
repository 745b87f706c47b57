//! # loom-broker
//!
//! The command broker: per-command grants that follow their command into pipelines and interpreters.
//!
//! When a bash capability set has a general row (`commands = "*"`) and rows naming commands (`gcalcli` with the
//! network), the shell runs under the general row, and a broker runs beside it in the loom process. A read-only
//! directory of shims (copies of `loom-shim`, one per brokered command) goes first on the shell's PATH; a shim
//! streams its argv, cwd, environment and stdin over a unix socket to the broker, which asks the kernel for the row
//! that names the command ([`loom_kernel::decide_brokered`]), resolves the name on the HOST PATH, runs it in a fresh
//! sandbox built from that row, and streams stdout, stderr and the exit status back. The wire format is in
//! `broker/PROTOCOL.md`.
//!
//! ## What this crate must never do
//! Run a command no row names (`commands = "*"` never brokers); run a binary found on the caller's PATH, or in any
//! directory a row of the grant can write; run a brokered command unsandboxed (no backend means refusal); pass a
//! caller's environment variable the row does not name exactly ([`loom_kernel::caller_var_crosses`]); accept a
//! descriptor over the socket.
//!
//! ## Example
//! ```no_run
//! use loom_broker::{Broker, BrokerConfig, BrokerLimits, shim_next_to_current_exe};
//! use loom_kernel::PathCtx;
//!
//! let grant = loom_sandbox::parse_grant(
//!     r#"[{ commands = "*", paths = ["./"] }, { commands = ["gcalcli"], network = "*" }]"#,
//! ).unwrap();
//! let handle = Broker::start(BrokerConfig {
//!     tool: "bash".into(),
//!     grant,
//!     ctx: PathCtx::new("/work", None),
//!     home: None,
//!     host_path: std::env::var_os("PATH").unwrap_or_default(),
//!     host_env: std::env::vars_os().collect(),
//!     secrets: loom_sandbox::SecretFacts::default(),
//!     authority: loom_sandbox::AuthorityPaths::default(),
//!     backend: None, // no backend: every call is refused
//!     limits: BrokerLimits::default(),
//!     shim: shim_next_to_current_exe().unwrap(),
//!     tmp: std::env::temp_dir(),
//! }).unwrap();
//! assert_eq!(handle.commands(), ["gcalcli"]);
//! ```
#![warn(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod call;
mod dir;
mod error;
mod frame;
mod peer;
mod server;
mod shared;
mod shell;
#[cfg(test)]
mod tests;

pub use dir::{shim_next_to_current_exe, BrokerDir, SHIM_NAME};
pub use error::BrokerError;
pub use frame::{
    error_parts, exit_status, read_frame, Frame, Request as WireRequest, MAX_PAYLOAD, VERSION,
};
pub use peer::{descends_from, peer_cred, PeerCred};
pub use server::{Broker, BrokerHandle};
pub use shared::{Backend, BrokerConfig, BrokerLimits};
pub use shell::{run_bash, BashPlan, BashRun, RunError};
