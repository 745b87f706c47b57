//! The CI gate: compares a new manifest's ceilings, sub-agents included, with a baseline's.

use std::fmt::Write as _;

use serde_json::{json, Value as Json};

use loom_kernel::{
    ceiling_growth, manifest_changes, Ceiling, Change, EnvRef, Growth, Manifest, PathCtx,
    SubagentVerdict,
};

/// The gate's findings.
#[derive(Debug, Clone)]
pub struct GateResult {
    /// The new manifest, as given.
    pub new_file: String,
    /// The baseline, as given (`git:REV` or a path).
    pub baseline: String,
    /// Every key that grew.
    pub growth: Vec<Growth>,
    /// Every other change that grows authority: outside ceilings (secrets, endpoint, providers, instances, skills
    /// roots, hooks, rules), a sub-agent that is new, renamed, unreadable or not contained, a grant that newly
    /// depends on the environment.
    pub changes: Vec<Change>,
    /// Settings and grants that depend on the environment (`${VAR}`), reported whether or not they changed.
    pub env_dependent: Vec<EnvRef>,
    /// True when `${VAR}` was evaluated with an empty environment (`--env-free`): defaults only.
    pub env_free: bool,
}

impl GateResult {
    /// True when nothing grew.
    pub fn passed(&self) -> bool {
        self.growth.is_empty() && self.changes.is_empty()
    }
}

/// What the gate compares besides the manifests: the `${VAR}` references of each manifest's text, and whether they
/// were evaluated with defaults only.
#[derive(Debug, Clone, Default)]
pub struct GateEnv {
    /// `${VAR}` references in the new manifest's text.
    pub new_refs: Vec<EnvRef>,
    /// `${VAR}` references in the baseline's text.
    pub old_refs: Vec<EnvRef>,
    /// `--env-free`: both were parsed with an empty environment.
    pub env_free: bool,
}

/// One sub-agent of a tree, flattened.
struct Scope<'a> {
    /// What sub-agents are matched by: the chain of `key > reference` (the path as written, or `inline`).
    id: String,
    /// What reports show: the chain of `key > agent name`.
    shown: String,
    verdict: &'a SubagentVerdict,
}

fn scopes<'a>(subs: &'a [SubagentVerdict], id: &str, shown: &str, out: &mut Vec<Scope<'a>>) {
    for s in subs {
        let sid = format!("{id}{} > {}", s.key, s.reference);
        let shown = format!("{shown}{} > {}", s.key, s.name.as_deref().unwrap_or("?"));
        out.push(Scope {
            id: sid.clone(),
            shown: shown.clone(),
            verdict: s,
        });
        scopes(
            &s.children,
            &format!("{sid} > "),
            &format!("{shown} > "),
            out,
        );
    }
}

fn sub_change(scope: &str, change: String, why: &str) -> Change {
    Change {
        scope: scope.to_string(),
        subject: "sub-agent".into(),
        change,
        why: why.to_string(),
    }
}

/// Compares: the root ceilings and the root manifests' other authority, then each sub-agent of the new manifest with
/// the baseline's sub-agent carried by the same key and reference (its agent name may change freely). A sub-agent
/// that does not load, exceeds its parent, or has no counterpart in the baseline (new, moved or renamed) fails the
/// gate: nothing about it was compared.
#[expect(
    clippy::too_many_arguments,
    reason = "the gate is one comparison of two manifests, each with its file, sub-agents and context"
)]
pub fn run_gate(
    new_file: &str,
    baseline: &str,
    new: &Manifest,
    new_subs: &[SubagentVerdict],
    old: &Manifest,
    old_subs: &[SubagentVerdict],
    ctx: &PathCtx,
    env: &GateEnv,
) -> GateResult {
    let new_root = new.effective_ceiling(ctx);
    let old_root = old.effective_ceiling(ctx);
    let mut growth = ceiling_growth("", new, &new_root, old, &old_root, ctx);
    let mut changes = manifest_changes("", new, old, &keys(&new_root));
    let (mut new_scopes, mut old_scopes) = (Vec::new(), Vec::new());
    scopes(new_subs, "", "", &mut new_scopes);
    scopes(old_subs, "", "", &mut old_scopes);
    for n in &new_scopes {
        let v = n.verdict;
        if let Some(e) = &v.error {
            changes.push(sub_change(
                &n.shown,
                format!("does not load: {e}"),
                "a sub-agent the gate cannot read is not compared; fix it so it loads",
            ));
            continue;
        }
        if !v.excess.is_empty() {
            let keys: Vec<&str> = v.excess.iter().map(|x| x.key.as_str()).collect();
            changes.push(sub_change(
                &n.shown,
                format!("exceeds its parent at {}", keys.join(", ")),
                "a sub-agent must be contained in its parent (see `loom audit`)",
            ));
        }
        let (Some(nc), Some(nm)) = (&v.ceiling, &v.manifest) else {
            continue;
        };
        match old_scopes.iter().find(|o| o.id == n.id) {
            Some(o) => match (&o.verdict.ceiling, &o.verdict.manifest, &o.verdict.error) {
                (Some(oc), Some(om), _) => {
                    growth.extend(ceiling_growth(&n.shown, nm, nc, om, oc, ctx));
                    changes.extend(manifest_changes(&n.shown, nm, om, &keys(nc)));
                }
                (_, _, e) => changes.push(sub_change(
                    &n.shown,
                    format!(
                        "the baseline's sub-agent could not be read ({}), so nothing compares it",
                        e.as_deref().unwrap_or("no ceiling")
                    ),
                    "an unchecked sub-agent may hold up to its parent's authority",
                )),
            },
            None => changes.push(sub_change(
                &n.shown,
                format!(
                    "`{}` (carried by `{}`) has no counterpart in the baseline: it is new, moved or renamed",
                    v.reference, v.key
                ),
                "a sub-agent nobody reviewed may hold up to its parent's authority; add it to the baseline in the \
                 same change",
            )),
        }
    }
    // grants that newly depend on the environment: the gate saw one value, other machines see others
    for r in env.new_refs.iter().filter(|r| r.grant) {
        if !env
            .old_refs
            .iter()
            .any(|o| o.path == r.path && o.raw == r.raw)
        {
            changes.push(Change {
                scope: String::new(),
                subject: r.path.clone(),
                change: format!("depends on the environment: `{}`", r.raw),
                why: "the gate evaluated it with this machine's environment; where the variables differ it grants \
                      something else — write the value literally"
                    .into(),
            });
        }
    }
    GateResult {
        new_file: new_file.into(),
        baseline: baseline.into(),
        growth,
        changes,
        env_dependent: env.new_refs.clone(),
        env_free: env.env_free,
    }
}

fn keys(c: &Ceiling) -> std::collections::BTreeSet<String> {
    c.grants.keys().cloned().collect()
}

fn change_where(c: &Change) -> String {
    if c.scope.is_empty() {
        format!("`{}`", c.subject)
    } else {
        format!("`{}` in sub-agent {}", c.subject, c.scope)
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
        render_env(&mut o, r);
        return o;
    }
    let _ = writeln!(
        o,
        "ceiling gate: FAILED — {} grows the authority of {} at {} place(s)",
        r.new_file,
        r.baseline,
        r.growth.len() + r.changes.len()
    );
    for g in &r.growth {
        let _ = writeln!(o, "\n  grew: {}", where_(g));
        if let Some(why) = &g.why {
            let _ = writeln!(o, "    why:    {why}");
        }
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
    for c in &r.changes {
        let _ = writeln!(o, "\n  grew: {}: {}", change_where(c), c.change);
        let _ = writeln!(o, "    why:    {}", c.why);
    }
    render_env(&mut o, r);
    let _ = writeln!(
        o,
        "\nIf the growth is intended, update the baseline in the same change so reviewers see it."
    );
    o
}

/// The `${VAR}` references the new manifest's grants and settings depend on.
fn render_env(o: &mut String, r: &GateResult) {
    if r.env_dependent.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "\n  depends on the environment ({}):",
        if r.env_free {
            "evaluated with defaults only: --env-free"
        } else {
            "evaluated with this machine's environment; --env-free uses defaults only"
        }
    );
    for e in &r.env_dependent {
        let _ = writeln!(
            o,
            "    {} = {:?}{}",
            e.path,
            e.raw,
            if e.grant { "  (a grant)" } else { "" }
        );
    }
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
            "why": g.why,
        })).collect::<Vec<_>>(),
        "changes": r.changes.iter().map(|c| json!({
            "scope": c.scope, "subject": c.subject, "change": c.change, "why": c.why,
        })).collect::<Vec<_>>(),
        "envFree": r.env_free,
        "envDependent": r.env_dependent.iter().map(|e| json!({
            "path": e.path, "raw": e.raw, "grant": e.grant,
        })).collect::<Vec<_>>(),
    })
}

/// The gate as SARIF 2.1.0, for code-scanning upload. `text` is the new manifest's text (to find line numbers).
pub fn render_gate_sarif(r: &GateResult, text: &str) -> Json {
    let mut results: Vec<Json> = r
        .growth
        .iter()
        .map(|g| {
            let fix = match (&g.why, &g.narrowest) {
                (Some(why), _) => why.clone(),
                (None, Some(n)) => format!("{} = {n}", loom_kernel::toml_key(&g.key)),
                (None, None) => format!("remove `{}`", g.key),
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
    results.extend(r.changes.iter().map(|c| {
        let key = c.subject.rsplit('.').next().unwrap_or(&c.subject);
        json!({
            "ruleId": "loom/authority-changed",
            "level": "error",
            "message": { "text": format!("{}: {} — {}", change_where(c), c.change, c.why) },
            "locations": [{ "physicalLocation": {
                "artifactLocation": { "uri": r.new_file },
                "region": { "startLine": key_line(text, key) },
            }}],
        })
    }));
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
                }, {
                    "id": "loom/authority-changed",
                    "name": "AuthorityChanged",
                    "shortDescription": { "text": "An agent's authority outside its ceiling grew past the baseline (secrets, endpoint, providers, tools, skills roots, hooks, rules, sub-agents, environment)" },
                    "help": { "text": "Undo the change, or update the baseline manifest in the same change so the growth is reviewed." },
                }],
            }},
            "results": results,
        }],
    })
}

/// The 1-based line where `key` is written, for a SARIF location: its `[capabilities]` entry (`key = …` in that
/// table, or a `[capabilities.key]` table) — where a ceiling grows — else its `[tools]` entry (an inline grant), else
/// the first `key = …` anywhere (`agent.secrets`), else line 1.
fn key_line(text: &str, key: &str) -> usize {
    let quoted = format!("\"{key}\"");
    let names = |t: &str| t == key || t == quoted;
    let mut section = String::new();
    let (mut in_tools, mut anywhere) = (None, None);
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if let Some(header) = t.strip_prefix('[') {
            let header = header.trim_start_matches('[');
            section = header.split(']').next().unwrap_or("").trim().to_string();
            match section.split_once('.') {
                Some(("capabilities", k)) if names(k.trim()) => return i + 1,
                Some(("tools", k)) if names(k.trim()) => {
                    in_tools.get_or_insert(i + 1);
                }
                // `[[hooks.PreToolUse]]` for the subject `hooks.PreToolUse`
                _ if section.rsplit('.').next().is_some_and(|k| names(k.trim())) => {
                    anywhere.get_or_insert(i + 1);
                }
                _ => {}
            }
            continue;
        }
        let assigns = t.split_once('=').is_some_and(|(lhs, _)| names(lhs.trim()));
        if !assigns {
            continue;
        }
        match section.as_str() {
            "capabilities" => return i + 1,
            "tools" => {
                in_tools.get_or_insert(i + 1);
            }
            _ => {
                anywhere.get_or_insert(i + 1);
            }
        }
    }
    in_tools.or(anywhere).unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::key_line;

    #[test]
    fn a_location_points_at_the_grant_not_at_the_tool_entry() {
        let text = "[agent]\nname = \"a\"\nsecrets = [\"K\"]\n[tools]\nbash = \"builtin\"\nsh = { tool = \"bash\", \
                    capabilities = \"*\" }\n[capabilities]\nread_file = {}\nbash = [\n  { commands = \"*\" },\n]\n\
                    [capabilities.\"web.x\"]\nnetwork = \"*\"\n[[hooks.PreToolUse]]\ncommand = \"x\"\n";
        assert_eq!(
            key_line(text, "bash"),
            9,
            "the [capabilities] entry, not `bash = \"builtin\"`"
        );
        assert_eq!(key_line(text, "sh"), 6, "an inline grant lives in [tools]");
        assert_eq!(key_line(text, "web.x"), 12, "a [capabilities.KEY] table");
        assert_eq!(key_line(text, "secrets"), 3);
        assert_eq!(key_line(text, "PreToolUse"), 14);
        assert_eq!(key_line(text, "nowhere"), 1);
    }
}
