//! `loom audit`.

use crate::exit;

/// Arguments of `loom audit`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The agent manifest.
    pub manifest: std::path::PathBuf,
    /// Print JSON instead of the tree.
    #[arg(long)]
    pub json: bool,
}

/// Runs the audit.
pub fn run(args: Args) -> i32 {
    eprintln!(
        "loom: audit of {} is not wired yet",
        args.manifest.display()
    );
    exit::FAILED
}
