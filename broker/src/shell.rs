//! The one path from a decided bash call to a running process: the bash tool and `loom sandbox run` both come here
//! ([`run_bash`]), so a command runs the same way from the model and from the command line.
//!
//! The kernel has already decided the call (`loom_kernel::decide`); [`BashPlan::from_authorization`] reads its
//! answer: the grant `"*"` runs unconfined (still in its own process group, killed on timeout), any other grant
//! under the row the kernel picked. For a row this builds the profile, picks the backend, and — when the row is a
//! general (`commands = "*"`) row of a capability set that also has per-command rows — starts the broker beside the
//! shell so those commands keep their own grants inside pipelines.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use loom_kernel::{brokered_commands, is_general_row, Authorization, Exec, Grant, PathCtx, Row};
use loom_sandbox::{
    build_env, build_profile, chosen_tier, host_support, inner_exe_next_to_current_exe,
    spawn_sandboxed_io, spawn_unconfined, unconfined_env, AuthorityPaths, BackendError, HostFs,
    InnerExeError, Launch, Limits, Outcome, Place, ProfileError, SecretFacts, SpawnError, Streams,
    Swept, Tier,
};

use crate::dir::shim_next_to_current_exe;
use crate::error::BrokerError;
use crate::server::Broker;
use crate::shared::{Backend, BrokerConfig, BrokerLimits};

/// Why [`run_bash`] ran nothing, could not finish starting the command, or discarded what it did.
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
    /// The kernel's authorisation names no row for a grant other than `"*"` (nothing ran).
    #[error("{tool}: the kernel's authorisation ({exec}) names no sandbox row")]
    NoRow {
        /// The tool instance.
        tool: String,
        /// How the kernel said to run it.
        exec: String,
    },
    /// The sandbox reported that it withheld less than the row requires: the command ran, and its result must be
    /// discarded.
    #[error("the sandbox did not withhold {}; the result is discarded (`loom doctor`)", .missing.join(", "))]
    Weaker {
        /// What was not withheld.
        missing: Vec<&'static str>,
    },
    /// One of the errors above, after the sweep for earlier commands whose loom had died found something
    /// ([`loom_sandbox::sweep_earlier`]).
    #[error("{error}; and {}", .earlier.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    AfterEarlier {
        /// Why nothing ran (or its result was discarded).
        error: Box<RunError>,
        /// What the sweep for earlier commands found.
        earlier: Vec<Swept>,
    },
}

impl RunError {
    /// The exit status a CLI reports for this refusal (127 for a command that does not exist, else 1).
    pub fn exit_code(&self) -> i32 {
        match self {
            RunError::Spawn(e) => e.exit_code(),
            RunError::AfterEarlier { error, .. } => error.exit_code(),
            _ => 1,
        }
    }
}

/// How the kernel's authorisation of a bash call runs.
#[derive(Debug, Clone, PartialEq)]
pub enum BashPlan {
    /// The grant `"*"`: no sandbox.
    Unconfined(Vec<OsString>),
    /// Confined under the row the kernel picked.
    Confined {
        /// The row.
        row: Row,
        /// What runs (`/bin/bash -c LINE`, or the argv the kernel checked).
        argv: Vec<OsString>,
    },
}

impl BashPlan {
    /// Reads the kernel's answer for `tool` holding `grant`; `given` is what the call asked to run (`/bin/bash -c
    /// LINE` for a command line, else its argv). Only the grant `"*"` ever runs without a sandbox (checked here
    /// again, as defence in depth).
    pub fn from_authorization(
        tool: &str,
        auth: Authorization,
        grant: &Grant,
        given: Vec<OsString>,
    ) -> Result<BashPlan, RunError> {
        let (row, exec) = auth.into_parts();
        match (exec, row) {
            (Exec::Unconfined, _) if *grant == Grant::Unrestricted => {
                Ok(BashPlan::Unconfined(given))
            }
            (Exec::Shell, Some((_, row))) => Ok(BashPlan::Confined { row, argv: given }),
            (Exec::Argv(v), Some((_, row))) => Ok(BashPlan::Confined {
                row,
                argv: v.into_iter().map(OsString::from).collect(),
            }),
            (exec, _) => Err(RunError::NoRow {
                tool: tool.to_string(),
                exec: format!("{exec:?}"),
            }),
        }
    }
}

/// Where and how a bash call runs; what runs is its [`BashPlan`].
pub struct BashRun<'a> {
    /// The tool instance (`bash`), for messages.
    pub tool: &'a str,
    /// The whole grant: its per-command rows are brokered when the row is a general row.
    pub grant: &'a Grant,
    /// How the grant's relative and `~` paths resolve.
    pub ctx: &'a PathCtx,
    /// The working directory (canonical).
    pub cwd: &'a Path,
    /// The home directory, if absolute.
    pub home: Option<PathBuf>,
    /// Resource limits and timeout (an unconfined command honours the timeout only).
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
    /// A directory loom made for this command to fill (a new worktree's checkout, where git writes `.git` and the
    /// committed tree): what the command creates below it is kept rather than moved aside
    /// ([`loom_sandbox::sweep_created`]). `None` for every command the model asked for.
    pub fills: Option<&'a Path>,
    /// Where each confined command's owed sweep is written down, in loom's data directory
    /// ([`loom_sandbox::Launch::sweep_records`]): before a command is confined the records of looms that died are
    /// swept, and the directory is kept read-only in the view. `None`: no records (tests, probes).
    pub sweep_records: Option<&'a Path>,
}

/// Runs a decided bash call: unconfined for the grant `"*"` (the parent's environment minus every secret, plus the
/// shared ones), else confined under its row, with the broker when the row is a general row of a set that also
/// names commands. `on_spawn` receives the pid of the root process (a process-group leader: `kill(-pid)` ends the
/// tree) as soon as it exists. Returns what ran, or why nothing did; a confined command whose sandbox reports that
/// it withheld less than the row requires is an error ([`RunError::Weaker`]), its result discarded.
pub fn run_bash(
    plan: BashPlan,
    run: BashRun<'_>,
    streams: Streams,
    on_spawn: &mut dyn FnMut(u32),
) -> Result<Outcome, RunError> {
    let (row, argv) = match plan {
        BashPlan::Unconfined(argv) => {
            let env = unconfined_env(std::env::vars_os(), run.secrets);
            return Ok(spawn_unconfined(
                &argv,
                run.cwd,
                env,
                run.limits.timeout,
                streams,
                on_spawn,
            )?);
        }
        BashPlan::Confined { row, argv } => (row, argv),
    };
    let outcome = run_row(run, &row, &argv, streams, on_spawn)?;
    // The sandbox refuses before running when it would withhold less than the row requires; a status that says
    // otherwise (a command confined less than the manifest accepts) fails the call all the same.
    if let Some(missing) = outcome
        .status
        .as_ref()
        .map(|s| s.missing())
        .filter(|m| !m.is_empty())
    {
        return Err(RunError::Weaker {
            missing: missing.iter().map(|r| r.name()).collect(),
        });
    }
    Ok(outcome)
}

/// [`run_bash`] of a confined plan; it never runs a command unconfined.
fn run_row(
    run: BashRun<'_>,
    row: &Row,
    argv: &[OsString],
    streams: Streams,
    on_spawn: &mut dyn FnMut(u32),
) -> Result<Outcome, RunError> {
    let mut authority = run.authority.clone();
    let mut earlier = Vec::new();
    if let Some(dir) = run.sweep_records {
        // what a command of a loom that died created at a protected name is moved aside before this command's
        // profile is built, which would otherwise take it for the user's and keep it
        earlier = loom_sandbox::sweep_earlier(dir);
        // the records are authority: one a command could write would have a later loom move any path aside
        if let Err(e) = loom_sandbox::make_record_dir(dir) {
            let e = RunError::Spawn(SpawnError::Setup(format!(
                "cannot make {}, where loom records the protected names to look at after a command ({e}); nothing \
                 was run: make loom's data directory writable for loom",
                dir.display()
            )));
            return Err(after_earlier(e, earlier));
        }
        if !authority.protect.iter().any(|p| dir.starts_with(p)) {
            authority.protect.push(dir.to_path_buf());
        }
    }
    match run_row_swept(run, &authority, row, argv, streams, on_spawn) {
        Ok(mut outcome) => {
            earlier.append(&mut outcome.swept);
            outcome.swept = earlier;
            Ok(outcome)
        }
        Err(e) => Err(after_earlier(e, earlier)),
    }
}

fn after_earlier(error: RunError, earlier: Vec<Swept>) -> RunError {
    if earlier.is_empty() {
        error
    } else {
        RunError::AfterEarlier {
            error: Box::new(error),
            earlier,
        }
    }
}

/// [`run_row`] once the earlier sweeps are done, with `authority` holding the records' directory.
fn run_row_swept(
    run: BashRun<'_>,
    authority: &AuthorityPaths,
    row: &Row,
    argv: &[OsString],
    streams: Streams,
    on_spawn: &mut dyn FnMut(u32),
) -> Result<Outcome, RunError> {
    let place = Place {
        cwd: run.cwd.to_path_buf(),
        home: run.home.clone(),
        authority: authority.clone(),
    };
    let mut profile = build_profile(row, run.ctx, &place, run.limits.clone(), &HostFs)?;
    if let Some(dir) = run.fills {
        profile.absent.retain(|w| !w.root.starts_with(dir));
    }
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
    let brokered = is_general_row(row) && !brokered_commands(run.grant).is_empty();
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
            argv,
            env,
            sweep_records: run.sweep_records,
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
        authority: authority.clone(),
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
            sweep_records: run.sweep_records.map(Path::to_path_buf),
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
        argv,
        env,
        sweep_records: run.sweep_records,
    };
    let outcome = spawn_sandboxed_io(&launch, streams, &mut |pid| {
        handle.set_sandbox_root(pid);
        on_spawn(pid);
    });
    handle.shutdown();
    Ok(outcome?)
}
