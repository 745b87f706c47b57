//! `loom install [agent.toml] [--frozen]`: materialise every `[providers]` source (path, npm, git) into
//! `.loom/providers/<handle>/` next to the manifest, and every source an accepted skill ships into
//! `.loom/providers/<key>/`, and pin them in `.loom/lock.toml`. `--frozen` (CI) writes nothing
//! and fails when anything drifted from the lock. Exit codes: 0 installed, 1 failed or drifted, 2 usage.

use std::path::PathBuf;

use loom_runtime::frontend::{install, shipped_sources, InstallOptions};
use loom_runtime::{env_map, load_manifest, path_ctx};

use crate::exit;
use crate::output::{current_dir, emit, fail};

/// Arguments of `loom install`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The agent manifest (a directory means its agent.toml).
    #[arg(default_value = super::manifest_arg::DEFAULT)]
    pub manifest: PathBuf,
    /// Fail (writing nothing) when the manifest's sources or the installed files drifted from .loom/lock.toml.
    #[arg(long)]
    pub frozen: bool,
}

/// Runs `loom install`.
pub fn run(mut args: Args) -> i32 {
    match super::manifest_arg::resolve(&args.manifest) {
        Ok(m) => args.manifest = m,
        Err(e) => return fail(exit::FAILED, &e),
    }
    let loaded = match load_manifest(&args.manifest) {
        Ok(l) => l,
        Err(e) => return fail(exit::FAILED, &e.to_string()),
    };
    let cwd = match current_dir() {
        Ok(d) => d,
        Err(code) => return code,
    };
    // the skills boot would accept, judged as boot judges them (relative grant paths resolve in the cwd)
    let opts = InstallOptions {
        frozen: args.frozen,
        env: env_map(),
        shipped: shipped_sources(&loaded, &path_ctx(&cwd)),
    };
    match install(&loaded.dir, &loaded.manifest, &opts) {
        Ok(done) => {
            let mut out = String::new();
            if done.is_empty() {
                out.push_str(
                    "no [providers] entry has a path, npm or git source, and no accepted skill ships one: nothing \
                     to install\n",
                );
            }
            for i in &done {
                out.push_str(&format!(
                    "{}{}  {}  {}  sha256 {}{}\n",
                    i.handle,
                    i.shipped_by
                        .as_ref()
                        .map(|b| format!("  ({b})"))
                        .unwrap_or_default(),
                    i.entry.source,
                    i.entry.resolved,
                    i.entry.sha256,
                    if args.frozen {
                        "  (matches the lock)"
                    } else if i.changed {
                        "  (pinned)"
                    } else {
                        "  (unchanged)"
                    }
                ));
            }
            emit(&out);
            exit::OK
        }
        Err(e) => fail(exit::FAILED, &format!("{}: {e}", args.manifest.display())),
    }
}
