//! The CI gate: compares a new manifest's ceilings, sub-agents included, with a baseline's.

use std::fmt::Write as _;

use serde_json::{json, Value as Json};

use loom_kernel::{ceiling_growth, Ceiling, Growth, Manifest, PathCtx, SubagentVerdict};

/// The gate's findings.
#[derive(Debug, Clone)]
pub struct GateResult {
    /// The new manifest, as given.
    pub new_file: String,
    /// The baseline, as given (`git:REV` or a path).
    pub baseline: String,
    /// Every key that grew.
    pub growth: Vec<Growth>,
}

impl GateResult {
    /// True when nothing grew.
    pub fn passed(&self) -> bool {
        self.growth.is_empty()
    }
}

/// Flattens a sub-agent tree into `(scope, ceiling)` pairs (`spawn_subagent > researcher`).
fn scopes(subs: &[SubagentVerdict], prefix: &str, out: &mut Vec<(String, Ceiling)>) {
    for s in subs {
        let scope = format!("{prefix}{} > {}", s.key, s.name.as_deref().unwrap_or("?"));
        if let Some(c) = &s.ceiling {
            out.push((scope.clone(), c.clone()));
        }
        scopes(&s.children, &format!("{scope} > "), out);
    }
}

/// Compares: the root ceilings, then each sub-agent of the new manifest against the baseline's sub-agent at the same
/// place (or against the baseline's root ceiling when the baseline has no sub-agent there).
#[allow(clippy::too_many_arguments)]
pub fn run_gate(
    new_file: &str,
    baseline: &str,
    new: &Manifest,
    new_subs: &[SubagentVerdict],
    old: &Manifest,
    old_subs: &[SubagentVerdict],
    ctx: &PathCtx,
) -> GateResult {
    let new_root = new.effective_ceiling(ctx);
    let old_root = old.effective_ceiling(ctx);
    let mut growth = ceiling_growth("", new, &new_root, &old_root, ctx);
    let (mut new_scopes, mut old_scopes) = (Vec::new(), Vec::new());
    scopes(new_subs, "", &mut new_scopes);
    scopes(old_subs, "", &mut old_scopes);
    for (scope, ceiling) in &new_scopes {
        let base = old_scopes
            .iter()
            .find(|(s, _)| s == scope)
            .map(|(_, c)| c)
            .unwrap_or(&old_root);
        growth.extend(ceiling_growth(scope, new, ceiling, base, ctx));
    }
    GateResult {
        new_file: new_file.into(),
        baseline: baseline.into(),
        growth,
    }
}

fn where_(g: &Growth) -> String {
    if g.scope.is_empty() {
        format!("`{}`", g.key)
    } else {
        format!("`{}` in sub-agent {}", g.key, g.scope)
    }
}

/// The gate as text.
pub fn render_gate_text(r: &GateResult) -> String {
    let mut o = String::new();
    if r.passed() {
        let _ = writeln!(
            o,
            "ceiling gate: passed — {} grants nothing {} does not",
            r.new_file, r.baseline
        );
        return o;
    }
    let _ = writeln!(
        o,
        "ceiling gate: FAILED — {} grows the ceiling of {} at {} key(s)",
        r.new_file,
        r.baseline,
        r.growth.len()
    );
    for g in &r.growth {
        let _ = writeln!(o, "\n  grew: {}", where_(g));
        let _ = writeln!(
            o,
            "    old:    {}",
            g.old
                .as_ref()
                .map(|g| g.to_string())
                .unwrap_or_else(|| "absent".into())
        );
        let _ = writeln!(o, "    new:    {}", g.new);
        let _ = writeln!(o, "    grown:  {}", g.grown);
        match &g.narrowest {
            Some(n) => {
                let _ = writeln!(
                    o,
                    "    narrowest change that passes:  {} = {n}",
                    loom_kernel::toml_key(&g.key)
                );
            }
            None => {
                let _ = writeln!(o, "    narrowest change that passes:  remove `{}`", g.key);
            }
        }
    }
    let _ = writeln!(
        o,
        "\nIf the growth is intended, update the baseline in the same change so reviewers see it."
    );
    o
}

/// The gate as JSON.
pub fn render_gate_json(r: &GateResult) -> Json {
    json!({
        "version": crate::json::JSON_VERSION,
        "manifest": r.new_file,
        "baseline": r.baseline,
        "passed": r.passed(),
        "grown": r.growth.iter().map(|g| json!({
            "scope": g.scope, "key": g.key,
            "old": g.old.as_ref().map(|x| x.to_json()), "new": g.new.to_json(), "grown": g.grown.to_json(),
            "narrowest": g.narrowest.as_ref().map(|x| x.to_json()),
        })).collect::<Vec<_>>(),
    })
}

/// The gate as SARIF 2.1.0, for code-scanning upload. `text` is the new manifest's text (to find line numbers).
pub fn render_gate_sarif(r: &GateResult, text: &str) -> Json {
    let results: Vec<Json> = r
        .growth
        .iter()
        .map(|g| {
            let fix = match &g.narrowest {
                Some(n) => format!("{} = {n}", loom_kernel::toml_key(&g.key)),
                None => format!("remove `{}`", g.key),
            };
            json!({
                "ruleId": "loom/ceiling-grew",
                "level": "error",
                "message": { "text": format!(
                    "{} grew past the baseline {}: old {}, new {}, grown {}. Narrowest change that passes: {fix}",
                    where_(g), r.baseline,
                    g.old.as_ref().map(|x| x.to_string()).unwrap_or_else(|| "absent".into()), g.new, g.grown) },
                "locations": [{ "physicalLocation": {
                    "artifactLocation": { "uri": r.new_file },
                    "region": { "startLine": key_line(text, &g.key) },
                }}],
            })
        })
        .collect();
    json!({
        "version": "2.1.0",
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "runs": [{
            "tool": { "driver": {
                "name": "loom",
                "version": env!("CARGO_PKG_VERSION"),
                "rules": [{
                    "id": "loom/ceiling-grew",
                    "name": "CeilingGrew",
                    "shortDescription": { "text": "An agent's effective capability ceiling grew past the baseline" },
                    "help": { "text": "Narrow the grant, or update the baseline manifest in the same change so the growth is reviewed." },
                }],
            }},
            "results": results,
        }],
    })
}

/// The 1-based line where `key` is assigned or opened as a table (1 when not found).
fn key_line(text: &str, key: &str) -> usize {
    text.lines()
        .position(|l| {
            let t = l.trim_start();
            let rest = t
                .strip_prefix(key)
                .or_else(|| t.strip_prefix(&format!("\"{key}\"")));
            rest.is_some_and(|r| r.trim_start().starts_with('='))
                || t.starts_with(&format!("[tools.{key}]"))
                || t.starts_with(&format!("[capabilities.{key}"))
        })
        .map(|i| i + 1)
        .unwrap_or(1)
}
