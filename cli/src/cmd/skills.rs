//! `loom skills list [MANIFEST] [--json]`: every skill the manifest's skills layer finds — workspace, user, other
//! roots and the ones built into loom — with where it comes from and the kernel's verdict (active, or inactive and
//! why); bundled skills a higher root overrides, and skipped folders with the reason. Nothing runs, no model is
//! called. Exit codes: 0 listed, 1 the manifest did not load, 2 usage.

use std::path::PathBuf;

use loom_kernel::{binding_problem, judge_group, DeclVerdict};
use loom_runtime::frontend::{manifest_skills, SkillsEnv};
use loom_runtime::{env_map, path_ctx};
use serde_json::json;

use crate::exit;
use crate::output::{current_dir, emit, fail};

/// Arguments of `loom skills`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// List the skills an agent finds: name, source (workspace, user, root, bundled), verdict, folder.
    List {
        /// The agent manifest (default ./agent.toml; a directory means its agent.toml).
        #[arg(default_value = super::manifest_arg::DEFAULT)]
        manifest: PathBuf,
        /// Print JSON: `skills` (name, source, verdict, reason, dir, description), `overridden`, `skipped`.
        #[arg(long)]
        json: bool,
    },
}

/// Runs `loom skills`.
pub fn run(args: Args) -> i32 {
    let Command::List { manifest, json } = args.command;
    let cwd = match current_dir() {
        Ok(d) => d,
        Err(code) => return code,
    };
    let loaded = match super::manifest_arg::load(&manifest) {
        Ok(l) => l,
        Err(e) => return fail(exit::FAILED, &e),
    };
    let ctx = path_ctx(&cwd);
    let m = &loaded.manifest;
    let env = SkillsEnv::for_manifest(m, ctx.home.as_ref().map(PathBuf::from), &env_map());
    let Some(found) = manifest_skills(m, &loaded.dir, &env) else {
        let why = format!(
            "{}: its [session] chain has no skills layer, so it has no skills (add \"skills\" to the layers)",
            loaded.path.display()
        );
        if json {
            emit(&format!(
                "{}\n",
                json!({"skills": [], "overridden": [], "skipped": [], "note": why})
            ));
        } else {
            emit(&format!("{why}\n"));
        }
        return exit::OK;
    };
    let ceiling = m.effective_ceiling(&ctx);
    let rows: Vec<serde_json::Value> = found
        .skills
        .values()
        .map(|k| {
            let verdict = judge_group(m, &ceiling, &ctx, &k.group);
            let reason = verdict
                .decls
                .iter()
                .find_map(|d| match &d.verdict {
                    DeclVerdict::Rejected { reason, .. } => {
                        Some(format!("{}: {reason}", d.instance))
                    }
                    DeclVerdict::Accepted { .. } => None,
                })
                // fits the ceiling but cannot be bound: inactive at run, as audit says
                .or_else(|| {
                    binding_problem(m, &k.group).map(|why| format!("cannot be bound: {why}"))
                });
            json!({
                "name": k.name,
                "source": k.source.name(),
                "verdict": if reason.is_none() { "active" } else { "inactive" },
                "reason": reason,
                "dir": k.dir.display().to_string(),
                "description": k.description,
            })
        })
        .collect();
    let overridden: Vec<serde_json::Value> = found
        .overrides
        .iter()
        .map(|o| json!({"name": o.name, "by": o.by.display().to_string(), "bySource": o.by_source.name()}))
        .collect();
    if json {
        let doc = json!({"skills": rows, "overridden": overridden, "skipped": found.warnings});
        emit(&format!(
            "{}\n",
            serde_json::to_string_pretty(&doc).unwrap_or_default()
        ));
        return exit::OK;
    }
    let mut out = String::new();
    let width = rows
        .iter()
        .filter_map(|r| r["name"].as_str().map(str::len))
        .max()
        .unwrap_or(4);
    for r in &rows {
        let name = r["name"].as_str().unwrap_or_default();
        let source = r["source"].as_str().unwrap_or_default();
        let verdict = r["verdict"].as_str().unwrap_or_default();
        out.push_str(&format!(
            "{name:<width$}  {source:<9}  {verdict:<8}  {}\n",
            r["dir"].as_str().unwrap_or_default()
        ));
        if let Some(why) = r["reason"].as_str() {
            out.push_str(&format!("{:<width$}  {why}\n", ""));
        }
    }
    let count = |s: &str| rows.iter().filter(|r| r["source"] == s).count();
    out.push_str(&format!(
        "{} skill{}: {} workspace, {} user, {} other roots, {} bundled\n",
        rows.len(),
        if rows.len() == 1 { "" } else { "s" },
        count("workspace"),
        count("user"),
        count("root"),
        count("bundled"),
    ));
    for o in &found.overrides {
        out.push_str(&format!(
            "overridden: the bundled {} by the {} skill at {}\n",
            o.name,
            o.by_source.name(),
            o.by.display()
        ));
    }
    for w in &found.warnings {
        out.push_str(&format!("skipped: {w}\n"));
    }
    emit(&loom_runtime::terminal_safe(&out));
    exit::OK
}
