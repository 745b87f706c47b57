//! The CI ceiling gate: does a new manifest's authority grow past a baseline's?
//!
//! Two pure comparisons. [`ceiling_growth`] compares effective ceilings key by key, tool-aware: a key compares its
//! grants only when it names the same tool on both sides ([`crate::contrib::key_target`]), under the new manifest's algebra
//! for it made secret-aware with the new `[agent] secrets`. [`manifest_changes`] reports the authority that lives
//! outside ceilings: `[agent] secrets`, the harness endpoint, providers, tool instances, skills roots, session layers,
//! hooks and rules. Each finding names what changed and why it is growth.

use std::collections::{BTreeMap, BTreeSet};

use crate::contrib::ceiling::Ceiling;
use crate::contrib::key_target::{key_target, target_change};
use crate::lattice::grant::{Grant, Row};
use crate::lattice::path::PathCtx;
use crate::manifest::Manifest;
use crate::policy::hooks::HookAction;
use crate::policy::rules::Rule;

/// One key whose grant grew.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Growth {
    /// Where: empty for the root agent, else the sub-agent path (`spawn_subagent > researcher`).
    pub scope: String,
    /// The ceiling key.
    pub key: String,
    /// The baseline's grant (`None`: absent from the baseline).
    pub old: Option<Grant>,
    /// The new grant.
    pub new: Grant,
    /// What the new grant has that the baseline does not cover (`"*"` or the uncovered rows).
    pub grown: Grant,
    /// The narrowest change that passes: the new grant without what grew (`None`: remove the key).
    pub narrowest: Option<Grant>,
    /// Why it is growth, when the grants alone do not say: the key names another tool than in the baseline.
    pub why: Option<String>,
}

/// Compares `new` (the ceiling of `new_manifest`) against `old` (of `old_manifest`) key by key. Empty when `new` is
/// contained. A key that names another tool than in the baseline is growth whatever its grant (unless it grants
/// nothing); otherwise grants compare under `new_manifest`'s algebra for the key, secret-aware (see
/// [`Manifest::secret_aware_algebra`]).
pub fn ceiling_growth(
    scope: &str,
    new_manifest: &Manifest,
    new: &Ceiling,
    old_manifest: &Manifest,
    old: &Ceiling,
    ctx: &PathCtx,
) -> Vec<Growth> {
    let mut out = Vec::new();
    for (key, grant) in &new.grants {
        let base = old.grants.get(key);
        if base.is_some() && !grant.is_none() {
            let (ot, nt) = (key_target(old_manifest, key), key_target(new_manifest, key));
            if let Some(change) = target_change(&ot, &nt) {
                out.push(Growth {
                    scope: scope.to_string(),
                    key: key.clone(),
                    old: base.cloned(),
                    new: grant.clone(),
                    grown: grant.clone(),
                    narrowest: None,
                    why: Some(format!(
                        "`{key}` now names {change}: the same grant over another tool is another authority \
                         (read becomes write, a search becomes a shell); keep the key on its tool and add a new key"
                    )),
                });
                continue;
            }
        }
        let alg = new_manifest.secret_aware_algebra(key, ctx);
        let sup = base.cloned().unwrap_or_else(Grant::none);
        if alg.contains(&sup, grant) {
            continue;
        }
        let (grown, kept) = match grant {
            Grant::Unrestricted => (Grant::Unrestricted, sup.clone()),
            Grant::Set(rows) => {
                // a narrowed row keeps the kinds the tool requires (a bash row without `commands` runs nothing)
                let required =
                    crate::contrib::contracts::builtin_contract(new_manifest.underlying(key), None)
                        .map(|c| c.requires)
                        .unwrap_or_default();
                let fits = |r: &Row| {
                    required.iter().all(|k| r.get(k).is_some())
                        && alg.contains(&sup, &Grant::row(r.clone()))
                };
                let (mut kept, mut grown) = (Vec::new(), Vec::new());
                for r in rows {
                    if fits(r) {
                        kept.push(r.clone());
                    } else {
                        grown.push(r.clone());
                        // the smallest edit first: the row without the one kind that grew, when that fits
                        kept.extend(narrowed(r, &fits));
                    }
                }
                (Grant::set(grown), Grant::set(kept))
            }
        };
        out.push(Growth {
            scope: scope.to_string(),
            key: key.clone(),
            old: base.cloned(),
            new: grant.clone(),
            grown,
            narrowest: if kept.is_none() { None } else { Some(kept) },
            why: None,
        });
    }
    out
}

/// Row `r` without one of its kinds, when that row `fits` (the first such kind in key order): the smallest edit that
/// keeps the row — `{ commands = "*", network = "*" }` over a baseline without the network keeps `commands = "*"`
/// rather than losing the whole row. `None` when no single kind's removal makes it fit.
fn narrowed(r: &Row, fits: &impl Fn(&Row) -> bool) -> Option<Row> {
    r.0.keys().find_map(|kind| {
        let mut map = (*r.0).clone();
        map.remove(kind);
        let candidate = Row(std::sync::Arc::new(map));
        (!candidate.0.is_empty() && fits(&candidate)).then_some(candidate)
    })
}

/// One change outside the ceilings that grows authority.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// Where: empty for the root agent, else the sub-agent path.
    pub scope: String,
    /// What changed, as a manifest key path (`agent.secrets`, `harness.apiBase`, `providers.docs`, `hooks`, ...).
    pub subject: String,
    /// The change (`adds GH_TOKEN`).
    pub change: String,
    /// Why it is growth.
    pub why: String,
}

fn change(scope: &str, subject: impl Into<String>, what: String, why: &str) -> Change {
    Change {
        scope: scope.to_string(),
        subject: subject.into(),
        change: what,
        why: why.to_string(),
    }
}

/// A rule as one line (`tool = "bash", command_prefix = "rm -rf"`).
pub fn describe_rule(r: &Rule) -> String {
    let mut parts = Vec::new();
    for (k, v) in [
        ("tool", &r.tool),
        ("path_prefix", &r.path_prefix),
        ("command_prefix", &r.command_prefix),
        ("host", &r.host),
    ] {
        if let Some(v) = v {
            parts.push(format!("{k} = {}", crate::lattice::value::toml_string(v)));
        }
    }
    format!("{{ {} }}", parts.join(", "))
}

/// The skills roots a manifest's session chain reads: each skills layer's `root` / `roots`, or `(default roots)`
/// for a skills layer that names none.
fn skills_roots(m: &Manifest) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for l in m.session.layers.iter().filter(|l| l.provider == "skills") {
        let mut named = false;
        if let Some(r) = l.config.get("root").and_then(|v| v.as_str()) {
            out.insert(r.to_string());
            named = true;
        }
        if let Some(rs) = l.config.get("roots").and_then(|v| v.as_array()) {
            for r in rs.iter().filter_map(|v| v.as_str()) {
                out.insert(r.to_string());
            }
            named = true;
        }
        if !named {
            out.insert("(default roots)".into());
        }
        if l.config.get("bundled").and_then(|v| v.as_bool()) != Some(false) {
            out.insert("(bundled skills)".into());
        }
    }
    out
}

/// The keys whose values differ between two config tables (added, removed or changed), never the values.
fn changed_keys(old: &toml::Table, new: &toml::Table) -> Vec<String> {
    let keys: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    keys.into_iter()
        .filter(|k| old.get(*k) != new.get(*k))
        .cloned()
        .collect()
}

/// The authority `new` has outside its ceilings that `old` does not: each finding is growth. `new_ceiling_keys` are
/// the keys of `new`'s effective ceiling (a retargeted instance that is also a ceiling key is reported by
/// [`ceiling_growth`], not again here). Values that may come from the environment (harness and provider config) are
/// never printed, only their key names.
pub fn manifest_changes(
    scope: &str,
    new: &Manifest,
    old: &Manifest,
    new_ceiling_keys: &BTreeSet<String>,
) -> Vec<Change> {
    let mut out = Vec::new();
    // [agent] secrets: a declared secret can be handed to every row that names it exactly
    for s in new
        .agent
        .secrets
        .iter()
        .filter(|s| !old.agent.secrets.contains(s))
    {
        out.push(change(
            scope,
            "agent.secrets",
            format!("adds `{s}`"),
            "a secret in [agent] secrets reaches every command whose env grant names it",
        ));
    }
    // the harness: where model requests, and the API key, go
    match (&old.harness, &new.harness) {
        (Some(o), Some(n)) if o.provider != n.provider => out.push(change(
            scope,
            "harness.provider",
            format!("`{}` becomes `{}`", o.provider, n.provider),
            "another harness runs the model turn with the agent's API key",
        )),
        (Some(o), Some(n)) => {
            let builtin = crate::manifest::is_builtin_harness(&n.provider);
            for k in changed_keys(&o.config, &n.config) {
                if k == "apiBase" || !builtin {
                    out.push(change(
                        scope,
                        format!("harness.{k}"),
                        "changed".into(),
                        if k == "apiBase" {
                            "model requests, the conversation and the API key go to another endpoint"
                        } else {
                            "an external harness's config decides what its code does"
                        },
                    ));
                }
            }
        }
        (None, Some(n)) if n.config.contains_key("apiBase") => out.push(change(
            scope,
            "harness.apiBase",
            "set".into(),
            "model requests, the conversation and the API key go to another endpoint",
        )),
        _ => {}
    }
    // providers: code loom starts, with the config and secrets its spec gives it
    for (h, spec) in &new.providers {
        match old.providers.get(h) {
            None => out.push(change(
                scope,
                format!("providers.{}", crate::lattice::value::toml_key(h)),
                "added".into(),
                "a new provider is code that runs with the config and secrets its spec gives it",
            )),
            Some(o) if o != spec => {
                let what = match (o, spec) {
                    (
                        crate::manifest::ProviderSpec::Configured { config: a, .. },
                        crate::manifest::ProviderSpec::Configured { config: b, .. },
                    ) => format!("changes {}", changed_keys(a, b).join(", ")),
                    _ => "changes its source or config".into(),
                };
                out.push(change(
                    scope,
                    format!("providers.{}", crate::lattice::value::toml_key(h)),
                    what,
                    "another command, package or config is another implementation behind every key that names it",
                ))
            }
            Some(_) => {}
        }
    }
    // tool instances: each is a tool the model can call, with the rules and hooks that name it
    for name in new.tools.keys() {
        let nt = key_target(new, name);
        match old.tools.get(name) {
            None => out.push(change(
                scope,
                format!("tools.{}", crate::lattice::value::toml_key(name)),
                format!("adds instance `{name}` ({nt})"),
                "a new instance is a tool the model can call under a name rules and hooks may not cover",
            )),
            Some(_) if new_ceiling_keys.contains(name) => {}
            Some(_) => {
                if let Some(c) = target_change(&key_target(old, name), &nt) {
                    out.push(change(
                        scope,
                        format!("tools.{}", crate::lattice::value::toml_key(name)),
                        format!("now names {c}"),
                        "the instance runs another tool under the grant it falls back to",
                    ));
                }
            }
        }
    }
    // skills roots and session layers: where contributed tools and code come from
    let old_roots = skills_roots(old);
    for r in skills_roots(new).difference(&old_roots) {
        out.push(change(
            scope,
            "session.layers",
            format!("adds skills root `{r}`"),
            "skills found there contribute tools and grants the ceiling pre-authorises",
        ));
    }
    let old_layers: BTreeMap<&str, &toml::Table> = old
        .session
        .layers
        .iter()
        .map(|l| (l.provider.as_str(), &l.config))
        .collect();
    for l in new.session.layers.iter().filter(|l| l.provider != "skills") {
        if !old_layers.contains_key(l.provider.as_str()) {
            out.push(change(
                scope,
                "session.layers",
                format!("adds layer `{}`", l.provider),
                "a session layer sees every prompt and may contribute tools",
            ));
        }
    }
    // hooks: each runs a program or calls a URL; a PreToolUse hook removed no longer refuses anything
    let key = |e: &crate::policy::hooks::HookEvent, h: &crate::policy::hooks::HookSpec| {
        (e.name(), h.matcher.clone(), h.action.clone())
    };
    let old_hooks: Vec<_> = old.hooks.0.iter().map(|(e, h)| key(e, h)).collect();
    let new_hooks: Vec<_> = new.hooks.0.iter().map(|(e, h)| key(e, h)).collect();
    let show = |(e, m, a): &(&str, Option<String>, HookAction)| match m {
        Some(m) => format!("{e} [{m}] {a}"),
        None => format!("{e} {a}"),
    };
    for h in new_hooks.iter().filter(|h| !old_hooks.contains(h)) {
        out.push(change(
            scope,
            "hooks",
            format!("adds {}", show(h)),
            "a hook runs its program with the agent's authority, outside the tools' grants",
        ));
    }
    for h in old_hooks.iter().filter(|h| !new_hooks.contains(h)) {
        out.push(change(
            scope,
            "hooks",
            format!("removes {}", show(h)),
            "a hook can refuse or rewrite calls; without it they run",
        ));
    }
    // rules: a removed deny or ask rule, or an added allow rule, lets calls through that were stopped
    for (list, old_rules, new_rules, removed) in [
        (
            "deny_rules",
            &old.permissions.deny,
            &new.permissions.deny,
            true,
        ),
        (
            "ask_rules",
            &old.permissions.ask,
            &new.permissions.ask,
            true,
        ),
        (
            "allow_rules",
            &old.permissions.allow,
            &new.permissions.allow,
            false,
        ),
    ] {
        let (from, to) = if removed {
            (old_rules, new_rules)
        } else {
            (new_rules, old_rules)
        };
        for r in from.iter().filter(|r| !to.contains(r)) {
            out.push(change(
                scope,
                format!("permissions.{list}"),
                format!(
                    "{} {}",
                    if removed { "removes" } else { "adds" },
                    describe_rule(r)
                ),
                if removed {
                    "calls the rule refused or asked about now run without it"
                } else {
                    "calls the rule matches now run without asking"
                },
            ));
        }
    }
    out
}

/// A `${VAR}` reference in a manifest's text: the grant or setting it makes depend on the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvRef {
    /// The key path of the string (`capabilities.bash.paths[1]`).
    pub path: String,
    /// The string as written (`${GITHUB_WORKSPACE:-~}`): variable names and defaults, never a value.
    pub raw: String,
    /// True inside a grant (`[capabilities]`, a `[tools]` entry's `capabilities`).
    pub grant: bool,
}

/// Every string value of manifest `text` that holds a `${` reference, in document order. Text that does not parse
/// gives none (the manifest parser reports it).
pub fn env_references(text: &str) -> Vec<EnvRef> {
    fn walk(v: &toml::Value, path: &mut Vec<String>, out: &mut Vec<EnvRef>) {
        match v {
            toml::Value::String(s) if s.contains("${") => {
                let grant = path.first().map(String::as_str) == Some("capabilities")
                    || (path.first().map(String::as_str) == Some("tools")
                        && path.get(2).map(String::as_str) == Some("capabilities"));
                let mut p = String::new();
                for c in path.iter() {
                    if c.starts_with('[') || p.is_empty() {
                        p.push_str(c);
                    } else {
                        p.push('.');
                        p.push_str(c);
                    }
                }
                out.push(EnvRef {
                    path: p,
                    raw: s.clone(),
                    grant,
                });
            }
            toml::Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    path.push(format!("[{}]", i + 1)); // positions count from 1 (crate::position)
                    walk(item, path, out);
                    path.pop();
                }
            }
            toml::Value::Table(t) => {
                for (k, item) in t {
                    path.push(crate::lattice::value::toml_key(k));
                    walk(item, path, out);
                    path.pop();
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let Ok(t) = text.parse::<toml::Table>() {
        walk(&toml::Value::Table(t), &mut Vec::new(), &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::manifest::parse_manifest;

    fn growth(old: &str, new: &str) -> Vec<Growth> {
        let p = |caps: &str| {
            parse_manifest(
                &format!("[agent]\nname = \"a\"\n[capabilities]\n{caps}"),
                "a.toml",
                &BTreeMap::new(),
            )
            .unwrap()
        };
        let (o, n) = (p(old), p(new));
        let ctx = PathCtx::new("/w", None);
        ceiling_growth(
            "",
            &n,
            &n.effective_ceiling(&ctx),
            &o,
            &o.effective_ceiling(&ctx),
            &ctx,
        )
    }

    fn manifest(text: &str) -> Manifest {
        parse_manifest(
            &format!("[agent]\nname = \"a\"\n{text}"),
            "a.toml",
            &BTreeMap::new(),
        )
        .unwrap()
    }

    /// The gate's findings, ceiling growth then other changes, as `key: why-or-grown` lines.
    fn gate(old: &str, new: &str) -> Vec<String> {
        let (o, n) = (manifest(old), manifest(new));
        let ctx = PathCtx::new("/w", Some("/home/u".into()));
        let nc = n.effective_ceiling(&ctx);
        let mut out: Vec<String> =
            ceiling_growth("", &n, &nc, &o, &o.effective_ceiling(&ctx), &ctx)
                .into_iter()
                .map(|g| format!("{}: {}", g.key, g.why.unwrap_or_else(|| g.grown.to_toml())))
                .collect();
        let keys = nc.grants.keys().cloned().collect();
        out.extend(
            manifest_changes("", &n, &o, &keys)
                .into_iter()
                .map(|c| format!("{}: {}", c.subject, c.change)),
        );
        out
    }

    #[test]
    fn the_tool_aware_gate_table() {
        // (what, baseline, new, growth expected: a substring of the findings, or "" for none)
        let read = "[tools]\nviewer = { provider = \"builtin\", tool = \"read_file\" }\n[capabilities]\nviewer = { paths = [\"/\"] }\n";
        let write = "[tools]\nviewer = { provider = \"builtin\", tool = \"write_file\" }\n[capabilities]\nviewer = { paths = [\"/\"] }\n";
        let mcp = "[providers]\ndocs = { provider = \"mcp-server\", command = \"docs\" }\n[tools]\nsearch_docs = { provider = \"docs\", tool = \"search\" }\n[capabilities]\nsearch_docs = \"*\"\n";
        let shell = "[providers]\ndocs = { provider = \"mcp-server\", command = \"docs\" }\n[tools]\nsearch_docs = { provider = \"builtin\", tool = \"bash\" }\n[capabilities]\nsearch_docs = \"*\"\n";
        let secret = |env: &str| {
            format!(
                "[capabilities]\nbash = {{ commands = \"*\", paths = [\"./\"], env = {env} }}\n"
            )
        };
        let with_secret = |body: String| format!("secrets = [\"GH_TOKEN\"]\n{body}");
        let k5_old = with_secret(secret("\"*\""));
        let k5_new = with_secret(secret("[\"GH_TOKEN\", \"PATH\"]"));
        let fs = "[providers]\nfs = { provider = \"mcp-server\", command = \"fs\" }\n[tools]\nedit = { provider = \"fs\" }\n[capabilities]\n";
        let web = "[harness]\nprovider = \"anthropic\"\n[tools]\nweb_fetch = \"anthropic\"\nweb_search = \"anthropic\"\n[capabilities]\n";
        let cases: Vec<(&str, String, String, &str)> = vec![
            ("K4 read becomes write", read.into(), write.into(), "viewer: `viewer` now names built-in write_file (was built-in read_file)"),
            ("K4 same tool", read.into(), read.into(), ""),
            ("K4 MCP becomes bash", mcp.into(), shell.into(), "now names built-in bash (was tool search of provider docs)"),
            ("K5 pattern to exact secret", k5_old.clone(), k5_new.clone(), "bash: { commands = \"*\", env = [\"GH_TOKEN\", \"PATH\"]"),
            ("K6 bound arg dropped", format!("{fs}edit = {{ path = \"*\", dryRun = true }}\n"), format!("{fs}edit = {{ path = \"*\" }}\n"), "edit: { path = \"*\" }"),
            ("K6 bound arg to enum", format!("{fs}edit = {{ path = \"*\", dryRun = true }}\n"), format!("{fs}edit = {{ path = \"*\", dryRun = [true] }}\n"), "edit:"),
            ("K6 narrowed open arg", format!("{fs}edit = {{ path = \"*\", dryRun = true }}\n"), format!("{fs}edit = {{ path = [\"/a\"], dryRun = true }}\n"), ""),
            ("K7 allowed_domains dropped", format!("{web}web_fetch = {{ allowed_domains = [\"docs.python.org\"], max_uses = 3 }}\n"), format!("{web}web_fetch = {{ max_uses = 3 }}\n"), "web_fetch: { max_uses = 3 }"),
            ("K7 blocked shortened", format!("{web}web_search = {{ blocked_domains = [\"a.org\", \"b.org\"] }}\n"), format!("{web}web_search = {{ blocked_domains = [\"a.org\"] }}\n"), "web_search:"),
            ("K7 max_uses dropped", format!("{web}web_fetch = {{ max_uses = 5, citations = true }}\n"), format!("{web}web_fetch = {{ citations = true }}\n"), "web_fetch: { citations = true }"),
            ("K5 without the secret declared", secret("\"*\""), secret("[\"GH_TOKEN\", \"PATH\"]"), ""),
            ("K7 max_uses lowered", format!("{web}web_search = {{ max_uses = 5 }}\n"), format!("{web}web_search = {{ max_uses = 2 }}\n"), ""),
            ("K13 secrets", "[agent.metadata]\n".into(), "secrets = [\"GH_TOKEN\"]\n".into(), "agent.secrets: adds `GH_TOKEN`"),
            ("K13 apiBase", "[harness]\nprovider = \"anthropic\"\n".into(), "[harness]\nprovider = \"anthropic\"\napiBase = \"https://proxy.example\"\n".into(), "harness.apiBase: changed"),
            ("K13 provider command", mcp.into(), mcp.replace("command = \"docs\"", "command = \"sh\""), "providers.docs: changes command"),
            ("K13 skills root", "".into(), "[[session.layers]]\nprovider = \"skills\"\nroots = [\"/tmp/anyone\"]\n[[session.layers]]\nprovider = \"in-memory\"\n".into(), "adds skills root `/tmp/anyone`"),
            ("K13 bundled skills back on", "[[session.layers]]\nprovider = \"skills\"\nbundled = false\n[[session.layers]]\nprovider = \"in-memory\"\n".into(), "[[session.layers]]\nprovider = \"skills\"\n[[session.layers]]\nprovider = \"in-memory\"\n".into(), "adds skills root `(bundled skills)`"),
            ("K13 bundled skills off", "".into(), "[[session.layers]]\nprovider = \"skills\"\nbundled = false\n[[session.layers]]\nprovider = \"compacting\"\n[[session.layers]]\nprovider = \"in-memory\"\n".into(), ""),
            ("K13 new instance", "".into(), "[tools]\nbash = \"builtin\"\nsh = { provider = \"builtin\", tool = \"bash\" }\n".into(), "tools.sh: adds instance `sh` (built-in bash)"),
            ("K13 hook", "".into(), "[[hooks.SessionStart]]\ncommand = \"./x.sh\"\n".into(), "hooks: adds SessionStart command \"./x.sh\""),
            ("K13 removed deny", "[[permissions.deny_rules]]\ntool = \"bash\"\ncommand_prefix = \"rm -rf\"\n".into(), "".into(), "permissions.deny_rules: removes { tool = \"bash\", command_prefix = \"rm -rf\" }"),
        ];
        for (what, old, new, want) in cases {
            let got = gate(&old, &new);
            if want.is_empty() {
                assert!(got.is_empty(), "{what}: expected no growth, got {got:?}");
            } else {
                assert!(
                    got.iter().any(|l| l.contains(want)),
                    "{what}: expected {want:?} in {got:?}"
                );
            }
        }
    }

    #[test]
    fn env_references_are_found_and_grants_marked() {
        let refs = env_references(
            "[agent]\nname = \"${NAME}\"\n[capabilities]\nbash = { commands = \"*\", paths = [\"${GITHUB_WORKSPACE:-~}\"] }\n[tools]\nx = { provider = \"builtin\", tool = \"bash\", capabilities = { paths = [\"${P}\"] } }\n",
        );
        let got: Vec<(&str, bool)> = refs.iter().map(|r| (r.path.as_str(), r.grant)).collect();
        assert_eq!(
            got,
            [
                ("agent.name", false),
                ("capabilities.bash.paths[1]", true),
                ("tools.x.capabilities.paths[1]", true)
            ]
        );
        assert_eq!(refs[1].raw, "${GITHUB_WORKSPACE:-~}");
    }

    #[test]
    fn key_order_and_row_order_never_count_as_growth() {
        let old = "bash = [{ commands = \"*\", paths = [\"./\"] }, { network = \"*\", commands = [\"gcalcli\"] }]";
        let new = "bash = [{ commands = [\"gcalcli\"], network = \"*\" }, { paths = [\"./\"], commands = \"*\" }]";
        assert!(growth(old, new).is_empty());
    }

    #[test]
    fn narrowing_is_not_growth_and_widening_is() {
        assert!(growth(
            "read_file = { paths = [\"./\"] }",
            "read_file = { paths = [\"./src\"] }"
        )
        .is_empty());
        let g = growth(
            "read_file = { paths = [\"./src\"] }",
            "read_file = { paths = [\"./\"] }",
        );
        assert_eq!(g.len(), 1);
        assert_eq!(
            g[0].narrowest, None,
            "nothing of the new grant fits: remove it"
        );
    }

    #[test]
    fn the_narrowest_change_keeps_what_fits() {
        let g = growth(
            "bash = { commands = [\"ls\"] }",
            "bash = [{ commands = [\"ls\"] }, { commands = [\"curl\"], network = \"*\" }]",
        );
        assert_eq!(
            g[0].grown.to_toml(),
            "{ commands = [\"curl\"], network = \"*\" }"
        );
        assert_eq!(
            g[0].narrowest.as_ref().unwrap().to_toml(),
            "{ commands = [\"ls\"] }"
        );
    }

    #[test]
    fn the_narrowest_change_drops_the_kind_that_grew_not_the_row() {
        // the walkthrough's case: the general shell row picked up the network
        let g = growth(
            "bash = [{ commands = \"*\", paths = [\"./\"] }, { commands = [\"gcalcli\"], network = \"*\" }]",
            "bash = [{ commands = \"*\", paths = [\"./\"], network = \"*\" }, { commands = [\"gcalcli\"], network = \"*\" }]",
        );
        assert_eq!(
            g[0].narrowest.as_ref().unwrap().to_toml(),
            "[{ commands = \"*\", paths = [\"./\"] }, { commands = [\"gcalcli\"], network = \"*\" }]"
        );
        // when no one kind's removal fits, the row goes
        let g = growth(
            "bash = { commands = [\"ls\"] }",
            "bash = [{ commands = [\"ls\"] }, { commands = [\"curl\"], network = \"*\" }]",
        );
        assert_eq!(
            g[0].narrowest.as_ref().unwrap().to_toml(),
            "{ commands = [\"ls\"] }"
        );
    }

    #[test]
    fn star_and_new_keys_are_growth() {
        let g = growth("bash = { commands = [\"ls\"] }", "bash = \"*\"");
        assert_eq!(g[0].grown, Grant::Unrestricted);
        let g = growth("", "web_fetch = \"*\"");
        assert_eq!((g[0].key.as_str(), g[0].old.is_none()), ("web_fetch", true));
    }
}
