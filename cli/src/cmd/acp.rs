//! `loom acp serve <agent.toml>`: serve the agent over the Agent Client Protocol on stdin/stdout (for editors and
//! other ACP clients). stdout carries only protocol messages; notes and errors go to stderr prefixed `loom: `.
//! Exit codes: 0 when the client closed the connection, 1 when the manifest cannot be loaded, 2 for usage errors, 69
//! when `--require-tier` finds its tier unusable.

use std::path::PathBuf;
use std::sync::Arc;

use loom_acp::serve_stdio;
use loom_runtime::BootOptions;

use crate::exit;
use crate::output::fail;

/// Arguments of `loom acp`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: AcpCommand,
}

#[derive(Debug, clap::Subcommand)]
enum AcpCommand {
    /// Serve the agent over stdio (JSON-RPC 2.0, one message per line) until the client closes stdin.
    #[command(
        after_help = "Exit codes: 0 the client closed the connection; 1 the manifest cannot be loaded; 2 usage \
                            error; 69 --require-tier found its tier unusable here."
    )]
    Serve {
        /// The agent manifest (a directory means its agent.toml).
        #[arg(default_value = super::manifest_arg::DEFAULT)]
        manifest: PathBuf,
        #[command(flatten)]
        scope: super::scope::RunScope,
    },
}

/// Runs `loom acp`.
pub fn run(args: Args) -> i32 {
    match args.command {
        AcpCommand::Serve { manifest, scope } => {
            scope.apply();
            if let Err(code) = scope.preflight() {
                return code;
            }
            let manifest = match super::manifest_arg::resolve(&manifest) {
                Ok(m) => m,
                Err(e) => return fail(exit::FAILED, &e),
            };
            let notes = Arc::new(|n: &str| eprintln!("loom: note: {n}"));
            match serve_stdio(&manifest, BootOptions::default(), notes) {
                Ok(()) => exit::OK,
                Err(e) => fail(exit::FAILED, &e.to_string()),
            }
        }
    }
}
