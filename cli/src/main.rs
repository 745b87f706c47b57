//! The `loom` binary: argument parsing and rendering only. Every decision comes from loom-kernel.

mod cmd;
mod exit;
mod output;

use clap::{Parser, Subcommand};

/// loom: a capability-secure, manifest-driven agent runtime.
#[derive(Debug, Parser)]
#[command(name = "loom", version, about, disable_help_subcommand = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the whole authority surface of an agent, without calling a model.
    Audit(cmd::audit::Args),
    /// Print the installed version.
    Version,
}

fn main() {
    let cli = match Cli::try_parse() {
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
        Command::Version => {
            println!("loom {}", env!("CARGO_PKG_VERSION"));
            exit::OK
        }
    };
    std::process::exit(code);
}
