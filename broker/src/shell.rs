//! The hook for the bash path: run the general row's shell with a broker beside it.

use loom_sandbox::{spawn_sandboxed_io, Launch, Outcome, SpawnError, Streams};

use crate::error::BrokerError;
use crate::server::{Broker, BrokerConfig};

/// Why [`run_with_broker`] ran nothing (or could not finish starting the shell).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The broker could not start; the shell did not run.
    #[error(transparent)]
    Broker(#[from] BrokerError),
    /// The shell's sandbox refused or failed.
    #[error(transparent)]
    Spawn(#[from] SpawnError),
}

/// Runs the shell described by `launch` (built from the general row) with a broker for `config.grant`'s
/// per-command rows: the broker directory is bound read-only into the shell's view, the shims go first on its
/// PATH, only processes inside the shell's sandbox may call, and every brokered command still running when the
/// shell ends is killed. Standard streams are inherited.
pub fn run_with_broker(config: BrokerConfig, launch: &Launch<'_>) -> Result<Outcome, RunError> {
    let handle = Broker::start(config)?;
    let mut profile = launch.profile.clone();
    handle.add_to_profile(&mut profile);
    let mut env = launch.env.clone();
    handle.add_to_env(&mut env);
    let shell = Launch {
        profile: &profile,
        env,
        ..launch.clone()
    };
    let outcome = spawn_sandboxed_io(&shell, Streams::inherit(), &mut |pid| {
        handle.set_sandbox_root(pid)
    });
    handle.shutdown();
    Ok(outcome?)
}
