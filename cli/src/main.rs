//! The `loom` binary: argument parsing and rendering only. Every decision comes from loom-kernel.
#![forbid(unsafe_code)]

mod cmd;
mod exit;
mod markdown;
mod output;
mod yaml;

use clap::{Parser, Subcommand};

/// What `loom --help` says loom is.
const ABOUT: &str = "loom: a capability-secure, manifest-driven agent runtime. An agent.toml declares a model, \
                     tools and what each tool may do; loom audits that authority without calling a model and runs \
                     the agent with every tool call decided by one policy kernel and every shell command confined by \
                     an OS sandbox.";

/// The terms `loom --help` explains once, where a newcomer first meets them.
const TERMS: &str = "Terms:
  grant      what one tool may do, written in [capabilities] (paths, commands, network, ...)
  ceiling    the most authority the manifest allows: [capabilities] as a whole; `loom audit --baseline`
             fails when a change grows it
  tier       how shell commands are confined on this host: A = bubblewrap + Landlock + seccomp, B = Landlock +
             seccomp (no namespaces), C = bubblewrap + seccomp; `loom doctor` shows which this host has
  manifest   the agent.toml file; commands read ./agent.toml when none is named (a directory means its agent.toml)

Exit codes: 0 ok, 1 failed (the message says why), 2 usage error, 3 the audit gate found growth, 69 a required
sandbox tier is not usable here, 75 a transient provider error outlasted the retries (loom prompt, loom job run),
130 cancelled.
`loom help <command>` (or `loom <command> --help`) explains one command.";

#[derive(Debug, Parser)]
#[command(name = "loom", version, about = ABOUT, after_help = TERMS)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the whole authority surface of an agent, without calling a model.
    Audit(cmd::audit::Args),
    /// Run a command confined by the OS sandbox under a bash grant.
    Sandbox(Box<cmd::sandbox::Args>),
    /// Report which sandbox tier this host supports and how each grant kind is enforced.
    Doctor(cmd::doctor::Args),
    /// Send one prompt to an agent and run the turn (text from the argument or stdin).
    #[command(
        after_help = "Exit codes: 0 the turn ended normally; 1 it failed (boot, the provider for good, \
                            maxTurnRequests); 2 usage error; 75 a transient provider error (rate limit, overload, \
                            network, 5xx) outlasted the retries: try again later; 130 cancelled (Ctrl-C, SIGTERM, \
                            SIGHUP), the session flushed first."
    )]
    Prompt(cmd::prompt::Args),
    /// Talk to an agent interactively (streaming answers, slash commands, Ctrl-C cancels a turn).
    #[command(
        after_help = "Exit codes: 0 the session ended (/quit, Ctrl-D); 1 the agent did not boot; 2 usage error; \
                            69 --require-tier found its tier unusable here."
    )]
    Run(cmd::run::Args),
    /// Serve an agent to editors and other clients over the Agent Client Protocol (`loom acp serve agent.toml`).
    Acp(cmd::acp::Args),
    /// Show which grant row, rule and remembered answer decide a call, and why (no model, nothing run).
    Explain(cmd::explain::Args),
    /// List or revoke the "always" answers remembered for an agent.
    Permissions(cmd::permissions::Args),
    /// Inspect MCP servers: `loom mcp inspect <npm-name | path | handle>` prints paste-and-prune TOML.
    Mcp(cmd::mcp::Args),
    /// Materialise the manifest's provider sources into .loom/providers and pin them in .loom/lock.toml.
    Install(cmd::install::Args),
    /// List provider sources with their lock state and contributions, or show one (`loom providers info <handle>`).
    Providers(cmd::providers::Args),
    /// Install or list the local models loom knows by name (`provider = "local"`).
    Model(cmd::model::Args),
    /// Fleets on existing engines: plan a GitHub Actions matrix or a Kubernetes Indexed Job from an items file, run
    /// one cell, collect the results.
    Job(cmd::job::Args),
    /// List the skills an agent finds (workspace, user, bundled with loom) with their verdicts.
    Skills(cmd::skills::Args),
    /// List or remove the git worktrees isolated subagents ran in (`isolation: worktree`).
    Worktrees(cmd::worktrees::Args),
    /// Print the installed version.
    Version,
}

/// `loom audit ...` alone: parsed without building every other subcommand's definition, which is most of what clap
/// does at start-up (`benches/audit.sh`). Only a successful parse is used; anything else (`--help`, a usage error)
/// goes through [`Cli`], so every message is the full parser's.
#[derive(Debug, Parser)]
#[command(name = "loom", disable_help_subcommand = true)]
struct AuditOnly {
    #[command(subcommand)]
    command: AuditCommand,
}

#[derive(Debug, Subcommand)]
enum AuditCommand {
    Audit(cmd::audit::Args),
}

/// The arguments, parsed by the smaller parser when it applies and succeeds, else by [`Cli`].
fn parse(args: &[std::ffi::OsString]) -> Result<Cli, clap::Error> {
    if args.get(1).is_some_and(|a| a == "audit") {
        if let Ok(AuditOnly {
            command: AuditCommand::Audit(a),
        }) = AuditOnly::try_parse_from(args)
        {
            return Ok(Cli {
                command: Command::Audit(a),
            });
        }
    }
    Cli::try_parse_from(args)
}

fn main() {
    // The sandbox's inner stage re-executes this binary; it must run before anything else touches the process.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == loom_sandbox::INNER_ARG)
    {
        let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
        std::process::exit(loom_sandbox::inner_main(&args));
    }
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cli = match parse(&args) {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() {
                exit::USAGE
            } else {
                exit::OK
            };
            let _ = e.print();
            std::process::exit(code);
        }
    };
    let code = match cli.command {
        Command::Audit(args) => cmd::audit::run(args),
        Command::Sandbox(args) => cmd::sandbox::run(*args),
        Command::Doctor(args) => cmd::doctor::run(args),
        Command::Prompt(args) => cmd::prompt::run(args),
        Command::Run(args) => cmd::run::run(args),
        Command::Acp(args) => cmd::acp::run(args),
        Command::Explain(args) => cmd::explain::run(args),
        Command::Permissions(args) => cmd::permissions::run(args),
        Command::Mcp(args) => cmd::mcp::run(args),
        Command::Install(args) => cmd::install::run(args),
        Command::Providers(args) => cmd::providers::run(args),
        Command::Model(args) => cmd::model::run(args),
        Command::Job(args) => cmd::job::run(args),
        Command::Skills(args) => cmd::skills::run(args),
        Command::Worktrees(args) => cmd::worktrees::run(args),
        Command::Version => {
            println!("loom {}", env!("CARGO_PKG_VERSION"));
            exit::OK
        }
    };
    std::process::exit(code);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_audit_parser_agrees_with_the_full_one() {
        for line in [
            "loom audit a.toml",
            "loom audit --json a.toml",
            "loom audit a.toml --format sarif --baseline git:HEAD",
            "loom audit --baseline old.toml a.toml",
            "loom audit",
            "loom audit --help",
            "loom audit --version",
            "loom audit a.toml b.toml",
            "loom audit --format nope a.toml",
            "loom audit -- --json",
            "loom version",
            "loom",
        ] {
            let args: Vec<std::ffi::OsString> = line.split(' ').map(Into::into).collect();
            let fast = parse(&args).map(|c| format!("{c:?}"));
            let full = Cli::try_parse_from(&args).map(|c| format!("{c:?}"));
            match (fast, full) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "{line}"),
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{line}"),
                (a, b) => panic!("{line}: {a:?} against {b:?}"),
            }
        }
    }
}
