//! `loom providers list [agent.toml]` and `loom providers info <handle> [agent.toml]`: the manifest's provider
//! sources, their lock state (installed / missing / drifted) and what each installed one contributes (asked by
//! starting it: `initialize` only, no model calls). Exit codes: 0 listed, 1 a provider is not usable, 2 usage.

use std::path::PathBuf;

use loom_runtime::frontend::{provider_infos, ProviderInfo};
use loom_runtime::load_manifest;
use serde_json::Value as Json;

use crate::exit;
use crate::output::{current_dir, emit, fail};

/// Arguments of `loom providers`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: ProvidersCommand,
    /// Print the providers as JSON (a `version` and a `providers` list; each with what it contributes, or why it
    /// cannot start).
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Debug, clap::Subcommand)]
enum ProvidersCommand {
    /// List the manifest's provider handles: source, lock state, and what each contributes.
    List {
        /// The agent manifest (a directory means its agent.toml).
        #[arg(default_value = super::manifest_arg::DEFAULT)]
        manifest: PathBuf,
    },
    /// Show one provider: source, pinned resolution and hash, lock state, contributed tools with their schemas.
    Info {
        /// The [providers] handle.
        handle: String,
        /// The agent manifest (a directory means its agent.toml).
        #[arg(default_value = super::manifest_arg::DEFAULT)]
        manifest: PathBuf,
    },
}

/// Runs `loom providers`.
pub fn run(args: Args) -> i32 {
    let cwd = match current_dir() {
        Ok(d) => d,
        Err(code) => return code,
    };
    let (manifest, only) = match &args.command {
        ProvidersCommand::List { manifest } => (manifest, None),
        ProvidersCommand::Info { handle, manifest } => (manifest, Some(handle.as_str())),
    };
    let manifest = match super::manifest_arg::resolve(manifest) {
        Ok(m) => m,
        Err(e) => return fail(exit::FAILED, &e),
    };
    let loaded = match load_manifest(&manifest) {
        Ok(l) => l,
        Err(e) => return fail(exit::FAILED, &e.to_string()),
    };
    let mut infos = provider_infos(&loaded, &cwd, true);
    if let Some(h) = only {
        infos.retain(|i| i.handle == h);
        if infos.is_empty() {
            let what = if loaded.manifest.providers.contains_key(h) {
                "is not a path, npm or git source (MCP servers: `loom mcp inspect --manifest`)"
            } else {
                "is not defined"
            };
            return fail(
                exit::FAILED,
                &format!("{}: [providers].{h} {what}", manifest.display()),
            );
        }
    }
    if args.json {
        let mut healthy = true;
        let list: Vec<Json> = infos
            .iter()
            .map(|i| {
                let mut j = super::audit::provider_json(i);
                // usable exactly when it started and said what it contributes, as the text form judges
                healthy &= matches!(i.contributes, Some(Ok(_)));
                match &i.contributes {
                    Some(Ok(c)) => j["contributes"] = c.clone(),
                    Some(Err(e)) => j["cannotStart"] = Json::String(e.clone()),
                    None => {}
                }
                j
            })
            .collect();
        let doc = serde_json::json!({ "version": 1, "providers": list });
        emit(&format!(
            "{}\n",
            serde_json::to_string_pretty(&doc).unwrap_or_default()
        ));
        return if healthy { exit::OK } else { exit::FAILED };
    }
    let mut out = String::new();
    if infos.is_empty() {
        out.push_str("no [providers] entry has a path, npm or git source\n");
    }
    let mut healthy = true;
    for i in &infos {
        healthy &= render(&mut out, i, only.is_some());
    }
    emit(&out);
    if healthy {
        exit::OK
    } else {
        exit::FAILED
    }
}

/// Renders one provider; false when it is not usable.
fn render(out: &mut String, i: &ProviderInfo, detail: bool) -> bool {
    out.push_str(&format!(
        "{}  {}  [{}]\n",
        i.handle,
        i.source,
        i.state.label()
    ));
    if let Some(why) = i.state.problem() {
        out.push_str(&format!("  {why}; run `loom install`\n"));
    }
    if !i.config_keys.is_empty() {
        out.push_str(&format!("  config  {}\n", i.config_keys.join(", ")));
    }
    if detail {
        if let (Some(r), Some(h)) = (&i.resolved, &i.sha256) {
            out.push_str(&format!("  resolved  {r}\n  sha256    {h}\n"));
        }
    }
    let names = |c: &Json, key: &str| -> Vec<String> {
        c.get(key)
            .and_then(Json::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|t| t.as_str().or_else(|| t.get("name")?.as_str()))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    match &i.contributes {
        Some(Ok(c)) => {
            for (label, key) in [
                ("tools", "tools"),
                ("sessions", "sessions"),
                ("harnesses", "harnesses"),
            ] {
                let list = names(c, key);
                if !list.is_empty() {
                    out.push_str(&format!("  {label}  {}\n", list.join(", ")));
                }
            }
            if detail {
                for t in c
                    .get("tools")
                    .and_then(Json::as_array)
                    .into_iter()
                    .flatten()
                {
                    out.push_str(&format!(
                        "  tool {}: {}\n    inputSchema {}\n",
                        t.get("name").and_then(Json::as_str).unwrap_or("?"),
                        t.get("description").and_then(Json::as_str).unwrap_or(""),
                        t.get("inputSchema").cloned().unwrap_or(Json::Null)
                    ));
                }
            }
            true
        }
        Some(Err(e)) if i.state.problem().is_none() => {
            out.push_str(&format!("  cannot start: {e}\n"));
            false
        }
        _ => false,
    }
}
