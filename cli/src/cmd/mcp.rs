//! `loom mcp inspect <npm-name | path | handle> [--manifest agent.toml] [--json]`: start an MCP server, list its
//! tools, stop it, and print paste-and-prune TOML (one `[tools.X]` per tool, a commented `[capabilities]` line per
//! tool naming every argument) or the listing as JSON. Exit codes: 0 listed, 1 the server or manifest failed, 2 usage.

use std::path::PathBuf;

use loom_kernel::{toml_key, toml_string};
use loom_mcp::UpstreamTool;
use loom_runtime::frontend::{inspect_server, Inspected};
use loom_runtime::load_manifest;
use serde_json::{json, Value as Json};

use crate::exit;
use crate::output::{current_dir, emit, fail};

/// Arguments of `loom mcp`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: McpCommand,
}

#[derive(Debug, clap::Subcommand)]
enum McpCommand {
    /// Start an MCP server, list its tools and print them as paste-and-prune TOML (or JSON).
    Inspect {
        /// An npm package (`@scope/pkg`, `npm:pkg`), a path (`./server.mjs`), or a [providers] handle of --manifest.
        spec: String,
        /// The manifest whose [providers] handle `spec` names (its secrets chain is used too).
        #[arg(long)]
        manifest: Option<PathBuf>,
        /// Print the server's tools as JSON instead of TOML.
        #[arg(long)]
        json: bool,
    },
}

/// Runs `loom mcp`.
pub fn run(args: Args) -> i32 {
    let McpCommand::Inspect {
        spec,
        manifest,
        json,
    } = args.command;
    let cwd = match current_dir() {
        Ok(d) => d,
        Err(code) => return code,
    };
    let loaded = match manifest.as_deref().map(load_manifest).transpose() {
        Ok(l) => l,
        Err(e) => return fail(exit::FAILED, &e.to_string()),
    };
    let inspected = match inspect_server(&spec, loaded.as_ref(), &cwd) {
        Ok(i) => i,
        Err(e) => return fail(exit::FAILED, &e.to_string()),
    };
    let text = if json {
        let mut out = serde_json::to_string_pretty(&inspect_json(&inspected)).unwrap_or_default();
        out.push('\n');
        out
    } else {
        inspect_toml(&inspected)
    };
    // the server stops here, before the output is written
    drop(inspected);
    emit(&text);
    exit::OK
}

fn inspect_json(i: &Inspected) -> Json {
    json!({
        "provider": i.handle,
        "launch": i.server.launch(),
        "tools": i.server.tools().iter().map(|t| json!({
            "name": t.name, "description": t.description, "inputSchema": t.input_schema,
        })).collect::<Vec<_>>(),
    })
}

fn inspect_toml(i: &Inspected) -> String {
    let tools = i.server.tools();
    let mut o = format!(
        "# MCP server {} ({}): {} tool{}.\n# Paste, then prune: delete the tools the agent does not need. Every model-visible tool must be named\n\
         # in [tools]; uncomment its [capabilities] line and narrow it: a literal binds an argument (hidden from\n\
         # the model), a list narrows it to those values, \"*\" keeps it open, and an argument left out disappears.\n",
        i.handle,
        i.server.launch(),
        tools.len(),
        if tools.len() == 1 { "" } else { "s" }
    );
    if let Some(line) = &i.provider_line {
        o.push_str(&format!("\n[providers]\n{line}\n"));
    }
    for t in &tools {
        o.push_str(&format!(
            "\n[tools.{}]\nprovider = {}\n",
            toml_key(&t.name),
            toml_string(&i.handle)
        ));
        if let Some(first) = t.description.lines().find(|l| !l.trim().is_empty()) {
            o.push_str(&format!("# {}\n", first.trim()));
        }
    }
    o.push_str("\n[capabilities]\n");
    for t in &tools {
        o.push_str(&format!("# {}\n", capability_line(t)));
    }
    o
}

/// `name = { arg = "*", ... }  # required: a, b`, or `name = {}` for a tool without arguments.
fn capability_line(t: &UpstreamTool) -> String {
    let props: Vec<String> = t
        .input_schema
        .get("properties")
        .and_then(Json::as_object)
        .map(|p| {
            p.keys()
                .map(|k| format!("{} = \"*\"", toml_key(k)))
                .collect()
        })
        .unwrap_or_default();
    let required: Vec<&str> = t
        .input_schema
        .get("required")
        .and_then(Json::as_array)
        .map(|r| r.iter().filter_map(Json::as_str).collect())
        .unwrap_or_default();
    let body = if props.is_empty() {
        "{}".to_string()
    } else {
        format!("{{ {} }}", props.join(", "))
    };
    let note = if required.is_empty() {
        String::new()
    } else {
        format!("  # required: {}", required.join(", "))
    };
    format!("{} = {body}{note}", toml_key(&t.name))
}
