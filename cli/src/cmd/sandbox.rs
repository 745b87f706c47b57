//! `loom sandbox run`: runs one command under a bash grant, confined by the strongest backend the host has.
//!
//! Exit codes: the command's own status (signal death: 128 + signal number; a timeout kills the tree with SIGKILL,
//! so 137); 1 when the grant is refused or the sandbox cannot be built (nothing ran); 2 for usage errors (including
//! a grant that is not TOML); 127 when the command does not exist inside the sandbox.
//!
//! When the command runs under a general row (`commands = "*"`) of a capability set that also names commands, the
//! command broker starts beside it exactly as the bash tool starts it: each named command, invoked by name anywhere
//! inside (a pipeline, `bash -c`, an interpreter), runs under its own row (see loom-broker and broker/PROTOCOL.md).

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use loom_broker::{run_bash, BashPlan, BashRun, BrokerLimits};
use loom_kernel::{decide, AlgebraKind, Decision, PathCtx, Request};
use loom_sandbox::{kill_tree_on_signals, parse_grant, Limits, Streams, Tier};

use crate::exit;

/// Arguments of `loom sandbox`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: SandboxCommand,
}

#[derive(Debug, clap::Subcommand)]
enum SandboxCommand {
    /// Run one command under a bash grant (as written in [capabilities]), confined by the OS sandbox.
    Run(RunArgs),
}

/// Arguments of `loom sandbox run`.
#[derive(Debug, clap::Args)]
struct RunArgs {
    /// The bash grant, as it would appear after `bash = ` in [capabilities], e.g.
    /// '{ commands = "*", paths = ["./"] }' or '[{ commands = "*" }, { commands = ["curl"], network = "*" }]'.
    #[arg(long, value_name = "TOML")]
    grant: String,
    /// Working directory of the command; relative grant paths resolve against it (default: the current directory).
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// Kill the whole process tree after this many milliseconds.
    #[arg(long, value_name = "MS")]
    timeout_ms: Option<u64>,
    /// Use this sandbox tier (a, b or c) instead of the strongest available; refused when the host lacks it.
    #[arg(long, value_name = "TIER")]
    tier: Option<String>,
    /// RLIMIT_NPROC for the command (default 4096; the kernel does not apply it to uid 0).
    #[arg(long, value_name = "N")]
    max_procs: Option<u64>,
    /// RLIMIT_FSIZE for the command, in bytes (default 16 GiB).
    #[arg(long, value_name = "BYTES")]
    max_file_size: Option<u64>,
    /// Keep this path read-only even inside a writable root (repeatable). loom passes the agent's authority files
    /// (manifest, hooks, server programs, skills, `.loom/`) when a client terminal runs a command for it.
    #[arg(long, value_name = "PATH")]
    protect: Vec<PathBuf>,
    /// Hide this file from the command: it reads as empty and cannot be changed (repeatable; secret stores).
    #[arg(long, value_name = "PATH")]
    mask: Vec<PathBuf>,
    /// Accept that the sandbox lacks this right on this host, as `[sandbox] accept` in a manifest (repeatable;
    /// `signals`: tier B below Landlock ABI 6). Any other missing right refuses tier B.
    #[arg(long, value_name = "GAP")]
    accept: Vec<String>,
    /// Print the tier and what was enforced to stderr.
    #[arg(long, short)]
    verbose: bool,
    /// Broker: calls running at once (default 8).
    #[arg(long, value_name = "N", hide = true)]
    broker_max_calls: Option<usize>,
    /// Broker: calls waiting for a slot (default 64).
    #[arg(long, value_name = "N", hide = true)]
    broker_max_waiting: Option<usize>,
    /// Broker: bytes of stdout + stderr per call (default 256 MiB).
    #[arg(long, value_name = "BYTES", hide = true)]
    broker_max_output: Option<u64>,
    /// Broker: wall-clock limit per call, in milliseconds.
    #[arg(long, value_name = "MS", hide = true)]
    broker_timeout_ms: Option<u64>,
    /// The command and its arguments (after --).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    command: Vec<OsString>,
}

fn fail(code: i32, message: &str) -> i32 {
    eprintln!("loom: {message}");
    code
}

/// Runs `loom sandbox ...`.
pub fn run(args: Args) -> i32 {
    match args.command {
        SandboxCommand::Run(a) => run_one(a),
    }
}

fn run_one(a: RunArgs) -> i32 {
    let grant = match parse_grant(&a.grant) {
        Ok(g) => g,
        Err(e) => return fail(exit::USAGE, &e.to_string()),
    };
    let requested = match a.tier.as_deref().map(|t| (t, Tier::parse(t))) {
        None => None,
        Some((_, Some(t))) => Some(t),
        Some((t, None)) => return fail(exit::USAGE, &format!("--tier {t}: expected a, b or c")),
    };
    let mut accept = Vec::new();
    for name in &a.accept {
        match loom_kernel::AcceptedGap::parse(name) {
            Some(g) => accept.push(g),
            None => {
                let known: Vec<&str> = loom_kernel::AcceptedGap::ALL
                    .iter()
                    .map(|g| g.name())
                    .collect();
                return fail(
                    exit::USAGE,
                    &format!(
                        "--accept {name}: unknown sandbox gap; known: {}",
                        known.join(", ")
                    ),
                );
            }
        }
    }
    let cwd = match a.cwd.clone().map(Ok).unwrap_or_else(std::env::current_dir) {
        Ok(d) => d,
        Err(e) => {
            return fail(
                exit::FAILED,
                &format!("cannot read the working directory: {e}"),
            )
        }
    };
    let cwd = match std::fs::canonicalize(&cwd) {
        Ok(d) if d.is_dir() => d,
        Ok(d) => {
            return fail(
                exit::FAILED,
                &format!("--cwd {}: not a directory", d.display()),
            )
        }
        Err(e) => return fail(exit::FAILED, &format!("--cwd {}: {e}", cwd.display())),
    };
    let timeout = a.timeout_ms.map(Duration::from_millis);
    kill_tree_on_signals();
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute());
    let ctx = PathCtx::new(
        cwd.to_string_lossy().into_owned(),
        home.as_ref().map(|h| h.to_string_lossy().into_owned()),
    );
    // the kernel picks the row, exactly as it does for the bash tool
    let argv: Vec<String> = a
        .command
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    let request = Request::BashArgv {
        argv,
        cwd: ctx.base.clone(),
    };
    let plan = match decide("bash", AlgebraKind::Bash, &ctx, &grant, &request) {
        Decision::Deny(d) => return fail(exit::FAILED, &d.to_string()),
        Decision::Allow(auth) => {
            match BashPlan::from_authorization("bash", auth, &grant, a.command.clone()) {
                Ok(plan) => plan,
                Err(e) => return fail(e.exit_code(), &e.to_string()),
            }
        }
    };
    if a.verbose && matches!(plan, BashPlan::Unconfined(_)) {
        eprintln!("loom: sandbox: grant \"*\" is unrestricted: running without a sandbox");
    }
    let defaults = Limits::default();
    let limits = Limits {
        max_procs: a.max_procs.or(defaults.max_procs),
        max_file_size: a.max_file_size.or(defaults.max_file_size),
        timeout,
        accept,
    };
    let absolute = |paths: &[PathBuf]| -> Result<Vec<PathBuf>, String> {
        paths
            .iter()
            .map(|p| match std::fs::canonicalize(cwd.join(p)) {
                Ok(c) => Ok(c),
                // a path that does not exist has nothing to protect yet; keep it as written (absolute)
                Err(_) if p.is_absolute() => Ok(p.clone()),
                Err(e) => Err(format!("{}: {e}", p.display())),
            })
            .collect()
    };
    let authority = match (absolute(&a.protect), absolute(&a.mask)) {
        (Ok(protect), Ok(mask)) => loom_sandbox::AuthorityPaths { protect, mask },
        (Err(e), _) => return fail(exit::FAILED, &format!("--protect {e}")),
        (_, Err(e)) => return fail(exit::FAILED, &format!("--mask {e}")),
    };
    // the ACP terminal form and the command line record owed sweeps as the bash tool does: a `loom sandbox run`
    // killed before its command ends leaves them for the next loom
    let sweep_records = loom_runtime::sweep_records_dir(&loom_runtime::env_map());
    let run = BashRun {
        tool: "bash",
        grant: &grant,
        ctx: &ctx,
        cwd: &cwd,
        home,
        limits,
        tier: requested,
        inner_exe: None,
        shim: None,
        broker: broker_limits(&a),
        secrets: &loom_sandbox::SecretFacts::default(),
        authority: &authority,
        fills: None,
        sweep_records: Some(&sweep_records),
    };
    match run_bash(plan, run, Streams::inherit(), &mut |_| {}) {
        Ok(o) => {
            if a.verbose && !o.enforced.is_empty() {
                eprintln!("loom: sandbox: {}; exit {}", o.enforced, o.code);
                if let Some(status) = &o.status {
                    eprintln!("loom: sandbox status: {}", status.describe());
                }
            }
            if o.timed_out {
                eprintln!(
                    "loom: timed out after {} ms; the process tree was killed",
                    a.timeout_ms.unwrap_or_default()
                );
            }
            for swept in &o.swept {
                eprintln!("loom: {swept}");
            }
            o.code
        }
        Err(e) => fail(e.exit_code(), &e.to_string()),
    }
}

/// The broker's bounds from the hidden `--broker-*` flags (tests use them to make floods and limits cheap).
fn broker_limits(a: &RunArgs) -> BrokerLimits {
    let defaults = BrokerLimits::default();
    BrokerLimits {
        max_concurrent: a.broker_max_calls.unwrap_or(defaults.max_concurrent).max(1),
        max_waiting: a.broker_max_waiting.unwrap_or(defaults.max_waiting),
        max_output: a.broker_max_output.unwrap_or(defaults.max_output),
        call_timeout: a.broker_timeout_ms.map(Duration::from_millis),
        ..defaults
    }
}
