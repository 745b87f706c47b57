//! The one path from a decided bash call to a running, confined process: the bash tool and `loom sandbox run` both
//! come here, so a command runs the same way from the model and from the command line.
//!
//! The kernel has already picked the row (`loom_kernel::decide`); this builds the row's profile, picks the backend,
//! and — when the row is a general (`commands = "*"`) row of a capability set that also has per-command rows —
//! starts the broker beside the shell so those commands keep their own grants inside pipelines.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use loom_kernel::{brokered_commands, is_general_row, Grant, PathCtx, Row};
use loom_sandbox::{
    build_env, build_profile, chosen_tier, host_support, inner_exe_next_to_current_exe,
    spawn_sandboxed_io, AuthorityPaths, BackendError, HostFs, InnerExeError, Launch, Limits,
    Outcome, Place, ProfileError, SecretFacts, SpawnError, Streams, Tier,
};

use crate::dir::shim_next_to_current_exe;
use crate::error::BrokerError;
use crate::server::Broker;
use crate::shared::{Backend, BrokerConfig, BrokerLimits};

/// Why [`run_row`] ran nothing (or could not finish starting the command).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The row cannot be expressed as a sandbox profile on this host.
    #[error(transparent)]
    Profile(#[from] ProfileError),
    /// No sandbox backend (or not the requested tier).
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The broker could not start; the shell did not run.
    #[error("the command broker could not start: {0}")]
    Broker(#[from] BrokerError),
    /// The sandbox refused or failed.
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    /// The sandbox's inner stage (`loom-sandbox-exec`) is not installed next to the running executable.
    #[error(transparent)]
    NoInnerExe(#[from] InnerExeError),
}

impl RunError {
    /// The exit status a CLI reports for this refusal (127 for a command that does not exist, else 1).
    pub fn exit_code(&self) -> i32 {
        match self {
            RunError::Spawn(e) => e.exit_code(),
            _ => 1,
        }
    }
}

/// One bash call the kernel authorised under `row`.
pub struct RowRun<'a> {
    /// The tool instance (`bash`), for messages.
    pub tool: &'a str,
    /// The whole grant: its per-command rows are brokered when `row` is a general row.
    pub grant: &'a Grant,
    /// The row the kernel chose.
    pub row: &'a Row,
    /// How the grant's relative and `~` paths resolve.
    pub ctx: &'a PathCtx,
    /// The working directory (canonical).
    pub cwd: &'a Path,
    /// The home directory, if absolute.
    pub home: Option<PathBuf>,
    /// What to run.
    pub argv: &'a [OsString],
    /// Resource limits and timeout.
    pub limits: Limits,
    /// A specific tier, or `None` for the strongest the host has.
    pub tier: Option<Tier>,
    /// The inner-stage executable (`None`: `loom-sandbox-exec` next to the current executable).
    pub inner_exe: Option<PathBuf>,
    /// The `loom-shim` binary (`None`: next to the current executable).
    pub shim: Option<PathBuf>,
    /// Bounds of the broker, when one starts. A brokered call's time limit defaults to `limits.timeout`.
    pub broker: BrokerLimits,
    /// The secrets loom knows and which the agent shares: the command (and each brokered one) sees only the
    /// secrets its row is granted (`SecretFacts::default()`: none known, nothing screened).
    pub secrets: &'a SecretFacts,
    /// The agent's authority files: read-only in the view, secret stores masked (`AuthorityPaths::default()`:
    /// only the built-in protected names).
    pub authority: &'a AuthorityPaths,
}

/// Runs `run` confined under its row, with the broker when the row is a general row of a set that also names
/// commands. `on_spawn` receives the pid of the sandbox's root process (a process-group leader) as soon as it
/// exists. Returns what ran, or why nothing did; it never runs a command unconfined.
pub fn run_row(
    run: RowRun<'_>,
    streams: Streams,
    on_spawn: &mut dyn FnMut(u32),
) -> Result<Outcome, RunError> {
    let place = Place {
        cwd: run.cwd.to_path_buf(),
        home: run.home.clone(),
        authority: run.authority.clone(),
    };
    let mut profile = build_profile(run.row, run.ctx, &place, run.limits.clone(), &HostFs)?;
    let support = host_support();
    // the tier whose trial run passed on this host (once per process): what doctor reports is what runs
    let (tier, _) = chosen_tier(run.tier, run.inner_exe.as_deref())?;
    // Looked up even for tier B (which needs no inner stage), so an incomplete install fails on every host alike.
    let inner_exe = match run.inner_exe {
        Some(p) => p,
        None => inner_exe_next_to_current_exe()?,
    };
    let mut env = build_env(&profile.env, std::env::vars_os(), run.secrets);
    for (k, v) in env.iter_mut() {
        if k == "PWD" {
            *v = profile.cwd.clone().into_os_string();
        }
    }
    let brokered = is_general_row(run.row) && !brokered_commands(run.grant).is_empty();
    if brokered && tier == Tier::B {
        // Tier B denies every unix socket (Landlock below ABI 9 cannot tell the broker's from D-Bus's), so the shims
        // could not reach the broker: refuse rather than run a shell whose brokered commands all fail.
        return Err(RunError::Spawn(SpawnError::Inexpressible {
            tier: Tier::B.name(),
            grant: profile.grant.clone(),
            why: "its capability set names commands that run through loom's broker, which a tier-B command cannot \
                  reach: tier B denies unix sockets altogether, since Landlock below ABI 9 cannot tell the broker's \
                  socket from the host's (D-Bus, ssh-agent, X11); make user namespaces available for tier A \
                  (`loom doctor`), or run the named commands without a general `commands = \"*\"` row"
                .into(),
        }));
    }
    if !brokered {
        let launch = Launch {
            profile: &profile,
            tier,
            bwrap: support.bwrap.as_deref(),
            bwrap_features: support.bwrap_features,
            inner_exe: &inner_exe,
            argv: run.argv,
            env,
        };
        return Ok(spawn_sandboxed_io(&launch, streams, on_spawn)?);
    }
    let shim = match run.shim {
        Some(s) => s,
        None => shim_next_to_current_exe()?,
    };
    let handle = Broker::start(BrokerConfig {
        tool: run.tool.to_string(),
        grant: run.grant.clone(),
        ctx: run.ctx.clone(),
        home: run.home,
        host_path: std::env::var_os("PATH").unwrap_or_default(),
        host_env: std::env::vars_os().collect(),
        secrets: run.secrets.clone(),
        authority: run.authority.clone(),
        backend: Some(Backend {
            tier,
            bwrap: support.bwrap.clone(),
            bwrap_features: support.bwrap_features,
            inner_exe: inner_exe.clone(),
            // each brokered call is timed by the broker (call_timeout), not by its sandbox
            limits: Limits {
                timeout: None,
                ..run.limits.clone()
            },
        }),
        limits: BrokerLimits {
            call_timeout: run.broker.call_timeout.or(run.limits.timeout),
            ..run.broker
        },
        shim,
        tmp: std::env::temp_dir(),
    })?;
    handle.add_to_profile(&mut profile);
    handle.add_to_env(&mut env);
    let launch = Launch {
        profile: &profile,
        tier,
        bwrap: support.bwrap.as_deref(),
        bwrap_features: support.bwrap_features,
        inner_exe: &inner_exe,
        argv: run.argv,
        env,
    };
    let outcome = spawn_sandboxed_io(&launch, streams, &mut |pid| {
        handle.set_sandbox_root(pid);
        on_spawn(pid);
    });
    handle.shutdown();
    Ok(outcome?)
}
