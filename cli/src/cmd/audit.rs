//! `loom audit`: the whole authority surface of an agent, and the CI ceiling gate.

use std::path::{Path, PathBuf};

use loom_audit::{
    add_authority, build_report, render_gate_json, render_gate_sarif, render_gate_text,
    render_json, render_load_error_json, render_text, run_gate, shipped_json, BootChecks, Facts,
    Finding, GateEnv, Level, Report,
};
use loom_kernel::{
    binding_problem, check_subagents, env_references, install_writable, parse_manifest,
    ManifestLoader, INSTALL_DIR, LOCK_FILE,
};
use loom_runtime::frontend::{
    git_baseline, load_manifest_with_env, manifest_skills, provider_infos, provider_sources,
    read_text, resolve_authority, resolve_mcp_tools, secret_stores, session_group, shipped_states,
    AuthorityPlace, BaselineSpec, Discovery, FsLoader, SkillsEnv,
};
use loom_runtime::{data_home, env_map, load_manifest, path_ctx, storage_dir, Loaded};

use crate::exit;
use crate::output::{current_dir, emit, fail};

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// The capability tree (default).
    Text,
    /// Stable, versioned JSON.
    Json,
    /// SARIF 2.1.0 (with --baseline), for code-scanning upload.
    Sarif,
}

/// Arguments of `loom audit`. Flags may come before or after the path.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The agent manifest (a directory means its agent.toml).
    #[arg(default_value = super::manifest_arg::DEFAULT)]
    pub manifest: PathBuf,
    /// Print JSON instead of the tree (same as --format json).
    #[arg(long)]
    pub json: bool,
    /// Output format.
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// CI gate: fail (exit 3) when the manifest's effective ceiling, sub-agents included, is not contained in this
    /// baseline's. A manifest path, or git:REV for this manifest at a git revision.
    #[arg(long, value_name = "OLD.toml | git:REV")]
    pub baseline: Option<String>,
    /// With --baseline: evaluate `${VAR}` in both manifests (and their sub-manifests) with an empty environment, so
    /// `${VAR:-default}` takes its default and a `${VAR}` without one is an error. The gate then compares what the
    /// manifests grant wherever the variables are unset, not what they grant on this machine.
    #[arg(long)]
    pub env_free: bool,
}

/// Runs `loom audit`.
pub fn run(mut args: Args) -> i32 {
    if args.json && args.format.is_some_and(|f| f != Format::Json) {
        return fail(
            exit::USAGE,
            "--json is --format json; pass one of them (--format text, json or sarif)",
        );
    }
    let format = match (args.format, args.json) {
        (Some(f), _) => f,
        (None, true) => Format::Json,
        (None, false) => Format::Text,
    };
    if format == Format::Sarif && args.baseline.is_none() {
        return fail(exit::USAGE, "--format sarif reports the ceiling gate; pass --baseline OLD.toml or --baseline git:REV");
    }
    if args.env_free && args.baseline.is_none() {
        return fail(
            exit::USAGE,
            "--env-free applies to the ceiling gate; pass --baseline OLD.toml or --baseline git:REV",
        );
    }
    let cwd = match current_dir() {
        Ok(d) => d,
        Err(code) => return code,
    };
    let ctx = path_ctx(&cwd);
    match super::manifest_arg::resolve(&args.manifest) {
        Ok(m) => args.manifest = m,
        Err(e) => {
            if format == Format::Json {
                let doc = render_load_error_json(&args.manifest.display().to_string(), &e);
                emit(&json_text(&doc));
            }
            return fail(exit::FAILED, &e);
        }
    }
    let loaded = match load_manifest_with_env(&args.manifest, &gate_env(args.env_free)) {
        Ok(l) => l,
        Err(e) => {
            if format == Format::Json {
                let doc =
                    render_load_error_json(&args.manifest.display().to_string(), &e.to_string());
                emit(&json_text(&doc));
            }
            return fail(exit::FAILED, &e.to_string());
        }
    };
    match &args.baseline {
        Some(b) => gate(&args, &loaded, b, format, ctx),
        None => {
            // the boot property check runs while the rest of the report is gathered
            let checks = BootChecks::start(&loaded.manifest, &ctx);
            audit(&args, loaded, format, ctx, checks)
        }
    }
}

fn report_of(
    manifest: &Path,
    loaded: Loaded,
    ctx: loom_kernel::PathCtx,
    checks: Option<BootChecks>,
) -> Report {
    let mut loader = FsLoader::new(ctx.clone());
    let env = env_map();
    let storage = storage_dir(&loaded.manifest, &env);
    let skills = manifest_skills(
        &loaded.manifest,
        &loaded.dir,
        &SkillsEnv::for_manifest(&loaded.manifest, ctx.home.as_ref().map(PathBuf::from), &env),
    );
    let groups = match &skills {
        Some(d) if !d.skills.is_empty() => std::iter::once(session_group())
            .chain(d.skills.values().map(|k| k.group.clone()))
            .collect(),
        _ => Vec::new(),
    };
    // MCP tools are resolved by starting their servers (no model calls); the servers stop before the report
    let mcp = resolve_mcp_tools(&loaded, Path::new(&ctx.base));
    // so are the providers accepted skills ship, from their pinned installs
    let shipped = shipped_states(&loaded, Path::new(&ctx.base));
    let protected = if provider_sources(&loaded.manifest).is_empty() && shipped.is_empty() {
        vec![]
    } else {
        vec![
            loaded.dir.join(INSTALL_DIR).display().to_string(),
            loaded.dir.join(LOCK_FILE).display().to_string(),
        ]
    };
    // the authority files boot computes, from the same facts
    let authority = {
        let env = env_map();
        let stores = secret_stores(&loaded.dir, Path::new(&ctx.base), &env);
        resolve_authority(
            &loaded.manifest,
            &AuthorityPlace {
                manifest_path: &loaded.path,
                manifest_dir: &loaded.dir,
                cwd: Path::new(&ctx.base),
                env: &env,
                secret_stores: &stores,
                data_home: &data_home(&env),
            },
        )
    };
    let accepted = loaded.manifest.sandbox.accept.clone();
    let mut report = build_report(
        loaded.manifest,
        Facts {
            file: manifest.display().to_string(),
            id: loaded.path.display().to_string(),
            storage,
            ctx,
            groups,
            loader: &mut loader,
            mcp,
            shipped,
            checks,
        },
    );
    let profiles = loom_runtime::frontend::discover_profiles(
        &report.manifest,
        Path::new(&report.ctx.base),
        &data_home(&env_map()),
    );
    profile_findings(&mut report, &profiles);
    if let Some(d) = skills {
        skill_findings(&mut report, &d);
        let mut summary = loom_audit::SkillsSummary::default();
        for k in d.skills.values() {
            *summary
                .by_source
                .entry(k.source.name().to_string())
                .or_default() += 1;
            if k.source == loom_runtime::frontend::SkillSource::Bundled {
                summary.bundled.insert(k.group.label.clone());
            }
        }
        summary.overrides = d
            .overrides
            .iter()
            .map(|o| {
                (
                    o.name.clone(),
                    o.by_source.name().to_string(),
                    o.by.display().to_string(),
                )
            })
            .collect();
        report.skills = Some(summary);
    }
    add_authority(&mut report, &authority);
    // what the manifest lets the sandbox lack, by name: never silent
    for gap in accepted {
        report.findings.push(Finding {
            level: Level::Warning,
            subject: "[sandbox]".into(),
            message: format!(
                "accept = [\"{}\"]: {}",
                gap.name(),
                loom_sandbox::Right::ALL
                    .into_iter()
                    .find(|r| r.acceptable_as() == Some(gap))
                    .map_or("a sandbox gap", |r| r.accepted_means())
            ),
        });
    }
    // the kernel says which grants reach the installed provider code or its lock
    for w in install_writable(&report.tools, &report.ctx, &protected) {
        report.findings.push(Finding {
            level: Level::Warning,
            subject: w.instance,
            message: w.message,
        });
    }
    report.findings.sort_by_key(|f| std::cmp::Reverse(f.level));
    report
}

/// The manifest's provider sources with their lock state and config key names (never values), for `--json`
/// (`providers`; the providers skills ship follow, with their `group`).
fn providers_json(loaded: &Loaded, cwd: &Path) -> serde_json::Value {
    provider_infos(loaded, cwd, false)
        .iter()
        .map(provider_json)
        .collect()
}

/// One provider source as JSON: handle, source, lock state and its problem, pinned resolution and hash, config key
/// names (never values). Shared with `loom providers --json`.
pub(crate) fn provider_json(i: &loom_runtime::frontend::ProviderInfo) -> serde_json::Value {
    serde_json::json!({
        "handle": i.handle,
        "source": i.source,
        "state": i.state.label(),
        "problem": i.state.problem(),
        "resolved": i.resolved,
        "sha256": i.sha256,
        "configKeys": i.config_keys,
    })
}

/// Skills findings: each skipped (malformed) skill, and each accepted skill the agent could not bind at boot.
/// The subagent profiles as findings: each one the kernel's verdict on it (one wider than this agent, or one that
/// does not parse, is an error: audit does not vouch for it).
fn profile_findings(report: &mut Report, found: &[loom_runtime::frontend::FoundProfile]) {
    for f in found {
        let subject = format!("profile {}", f.path.display());
        let (level, message) = match &f.result {
            _ if f.shadowed => (
                Level::Note,
                "hidden by the project profile of the same name".to_string(),
            ),
            Err(e) => (Level::Error, format!("not a subagent profile: {e}")),
            Ok((p, v)) if !v.problems.is_empty() => (
                Level::Error,
                format!(
                    "subagent profile {} is refused: {}",
                    p.name,
                    v.problems.join("; ")
                ),
            ),
            Ok((p, v)) => {
                let model = match &v.model {
                    loom_kernel::ModelChoice::Parent => "this agent's model".to_string(),
                    loom_kernel::ModelChoice::Model(m) => {
                        format!("model {m} of this agent's provider")
                    }
                    loom_kernel::ModelChoice::Harness(h) => format!("the named harness {h}"),
                };
                let mut m = format!(
                    "subagent profile {} ({}): contained — tools {} with this agent's grants, on {model}{}{}",
                    p.name,
                    f.scope,
                    if v.tools.is_empty() {
                        "none".to_string()
                    } else {
                        v.tools.join(", ")
                    },
                    p.max_turns
                        .map(|n| format!(", at most {n} requests"))
                        .unwrap_or_default(),
                    if p.worktree { ", in a git worktree" } else { "" }
                );
                for n in &v.notes {
                    m.push_str(&format!("; {n}"));
                }
                (Level::Note, m)
            }
        };
        report.findings.push(Finding {
            level,
            subject,
            message,
        });
    }
    report.findings.sort_by_key(|f| std::cmp::Reverse(f.level));
}

fn skill_findings(report: &mut Report, found: &Discovery) {
    for w in &found.warnings {
        report.findings.push(Finding {
            level: Level::Warning,
            subject: "skills".into(),
            message: w.clone(),
        });
    }
    for k in found.skills.values() {
        let accepted = report
            .groups
            .iter()
            .any(|g| g.label == k.group.label && g.accepted);
        if let Some(why) = binding_problem(&report.manifest, &k.group).filter(|_| accepted) {
            report.findings.push(Finding {
                level: Level::Warning,
                subject: k.group.label.clone(),
                message: format!(
                    "fits the ceiling but cannot be bound, so it is inactive at run: {why}"
                ),
            });
        }
    }
    report.findings.sort_by_key(|f| std::cmp::Reverse(f.level));
}

/// What `loom audit MANIFEST` prints, for `/audit` in `loom run`. The error is a message for the user.
pub fn audit_text(manifest: &Path) -> Result<String, String> {
    let cwd =
        std::env::current_dir().map_err(|e| format!("cannot read the working directory: {e}"))?;
    let loaded = load_manifest(manifest).map_err(|e| e.to_string())?;
    Ok(render_text(&report_of(
        manifest,
        loaded,
        path_ctx(&cwd),
        None,
    )))
}

fn audit(
    args: &Args,
    loaded: Loaded,
    format: Format,
    ctx: loom_kernel::PathCtx,
    checks: BootChecks,
) -> i32 {
    let mut providers = providers_json(&loaded, Path::new(&ctx.base));
    let report = report_of(&args.manifest, loaded, ctx, Some(checks));
    if let Some(list) = providers.as_array_mut() {
        list.extend(report.shipped.iter().map(shipped_json));
    }
    let out = match format {
        Format::Json => {
            let mut j = render_json(&report);
            if let Some(o) = j.as_object_mut() {
                o.insert("providers".into(), providers);
            }
            json_text(&j)
        }
        _ => render_text(&report),
    };
    if !emit(&out) {
        return exit::OK;
    }
    if report.healthy() {
        exit::OK
    } else {
        eprintln!(
            "loom: {} is not fully resolvable (see health above)",
            args.manifest.display()
        );
        exit::FAILED
    }
}

/// The `${VAR}` references of every file sub-manifest in `subs` (read by `read` from the identity its loader gave), with
/// paths prefixed `<key> (<reference)> > ` per level, as the gate compares them between baseline and change.
fn sub_env_references(
    subs: &[loom_kernel::SubagentVerdict],
    prefix: &str,
    read: &dyn Fn(&str) -> Option<String>,
    out: &mut Vec<loom_kernel::EnvRef>,
) {
    for s in subs {
        let here = format!("{prefix}{} ({}) > ", s.key, s.reference);
        if s.source != "inline" {
            if let Some(text) = read(&s.source) {
                out.extend(env_references(&text).into_iter().map(|mut r| {
                    r.path = format!("{here}{}", r.path);
                    r
                }));
            }
        }
        sub_env_references(&s.children, &here, read, out);
    }
}

/// The environment `${VAR}` is read from: the process's, or none with `--env-free`.
fn gate_env(env_free: bool) -> std::collections::BTreeMap<String, String> {
    if env_free {
        Default::default()
    } else {
        env_map()
    }
}

fn gate(
    args: &Args,
    new: &Loaded,
    baseline: &str,
    format: Format,
    ctx: loom_kernel::PathCtx,
) -> i32 {
    let env = gate_env(args.env_free);
    let mut old_git = None;
    // the baseline's text, its name in reports, its identity, and the loader of the sub-manifests it names: at a git
    // revision they are read at that revision too, never from the work tree
    let (old_text, old_name, old_id, mut old_loader): (_, _, _, Box<dyn ManifestLoader>) =
        match BaselineSpec::parse(baseline) {
            BaselineSpec::GitRev(rev) => {
                let b = match git_baseline(&args.manifest, &rev) {
                    Ok(b) => b,
                    Err(e) => return fail(exit::FAILED, &e.to_string()),
                };
                let loaded = match b.text() {
                    Ok(t) => (
                        t,
                        format!("{} at {rev}", args.manifest.display()),
                        b.id(),
                        Box::new(b.loader(ctx.clone(), env.clone())) as Box<dyn ManifestLoader>,
                    ),
                    Err(e) => return fail(exit::FAILED, &format!("baseline: {e}")),
                };
                old_git = Some(b);
                loaded
            }
            BaselineSpec::File(p) => match read_text(&p) {
                Ok(t) => {
                    let id = std::fs::canonicalize(&p)
                        .unwrap_or_else(|_| p.clone())
                        .display()
                        .to_string();
                    (
                        t,
                        p.display().to_string(),
                        id,
                        Box::new(FsLoader::with_env(ctx.clone(), env.clone())),
                    )
                }
                Err(e) => return fail(exit::FAILED, &format!("the baseline {e}")),
            },
        };
    let old = match parse_manifest(&old_text, &old_name, &env) {
        Ok(m) => m,
        Err(e) => return fail(exit::FAILED, &format!("baseline: {e}")),
    };
    let new_subs = check_subagents(
        &new.manifest,
        &new.path.display().to_string(),
        &ctx,
        &mut FsLoader::with_env(ctx.clone(), env.clone()),
    );
    let old_subs = check_subagents(&old, &old_id, &ctx, old_loader.as_mut());
    let new_text = read_text(Path::new(&args.manifest)).unwrap_or_default();
    // `${VAR}` in sub-manifests too, each path prefixed with the sub-agent it is in (inline ones are in the text)
    let mut new_refs = env_references(&new_text);
    sub_env_references(
        &new_subs,
        "",
        &|id| std::fs::read_to_string(id).ok(),
        &mut new_refs,
    );
    let mut old_refs = env_references(&old_text);
    let read_old = |id: &str| match &old_git {
        Some(b) => b.text_of(id),
        None => std::fs::read_to_string(id).ok(),
    };
    sub_env_references(&old_subs, "", &read_old, &mut old_refs);
    let result = run_gate(
        &args.manifest.display().to_string(),
        &old_name,
        &new.manifest,
        &new_subs,
        &old,
        &old_subs,
        &ctx,
        &GateEnv {
            new_refs,
            old_refs,
            env_free: args.env_free,
        },
    );
    let out = match format {
        Format::Text => render_gate_text(&result),
        Format::Json => json_text(&render_gate_json(&result)),
        Format::Sarif => json_text(&render_gate_sarif(&result, &new_text)),
    };
    if !emit(&out) {
        return exit::OK;
    }
    if result.passed() {
        exit::OK
    } else {
        exit::CEILING_GREW
    }
}

fn json_text(v: &serde_json::Value) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_else(|_| "{}".into());
    s.push('\n');
    s
}
