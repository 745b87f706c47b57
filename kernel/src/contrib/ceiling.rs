//! Effective ceilings and the grant each tool instance actually gets.

use std::collections::BTreeMap;

use crate::contrib::contracts::{builtin_contract, check_contract};
use crate::lattice::algebra::{Algebra, AlgebraKind};
use crate::lattice::grant::{Grant, Row};
use crate::lattice::path::PathCtx;
use crate::lattice::value::Value;
use crate::manifest::{Manifest, ProviderRef, ProviderSpec, ToolEntry};
use crate::policy::sandbox_row::sandbox_grant_problems;

/// The agent's total authority surface: `[capabilities]` (or the default ceiling when the section is absent) joined
/// with the inline capabilities of the manifest's own `[tools]` entries, key by key, under each key's algebra.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ceiling {
    /// Key (tool instance name) -> grant.
    pub grants: BTreeMap<String, Grant>,
    /// True when `[capabilities]` was absent and the default ceiling applied.
    pub defaulted: bool,
}

/// The default ceiling: exactly the four FS/shell tools over the working directory, no network, nothing else.
pub fn default_ceiling() -> BTreeMap<String, Grant> {
    let cwd = || Value::strs(["./"]);
    let mut m = BTreeMap::new();
    for tool in ["read_file", "write_file", "edit_file"] {
        m.insert(
            tool.to_string(),
            Grant::row(Row::from_pairs([("paths", cwd())])),
        );
    }
    m.insert(
        "bash".into(),
        Grant::row(Row::from_pairs([
            ("commands", Value::Star),
            ("paths", cwd()),
        ])),
    );
    m
}

/// True when a provider spec is the built-in `mcp-server` meta-factory, or an external provider package (a `path`,
/// `npm` or `git` source, with or without config): both offer tools with JSON input schemas, granted per argument.
fn is_mcp(spec: &ProviderSpec) -> bool {
    matches!(spec, ProviderSpec::Configured { factory, .. } if factory == "mcp-server")
        || spec.source().is_some()
}

impl Manifest {
    /// The underlying tool name of instance `key` (`tool = "…"` for a rename, else the key itself).
    pub fn underlying<'a>(&'a self, key: &'a str) -> &'a str {
        self.tools
            .get(key)
            .and_then(|e| e.tool.as_deref())
            .unwrap_or(key)
    }

    /// The algebra that compares grants of instance `key`. A renamed instance uses its underlying tool's algebra; an
    /// MCP tool or an external provider's tool uses per-argument grants; a key with no `[tools]` entry is read as a built-in of that name.
    pub fn algebra_kind(&self, key: &str) -> AlgebraKind {
        let underlying = self.underlying(key);
        match self.tools.get(key).map(|e| &e.provider) {
            None | Some(ProviderRef::Builtin) => AlgebraKind::for_builtin(underlying),
            // the grant of a provider-run server tool is its limits
            Some(ProviderRef::Harness(_)) if matches!(underlying, "web_search" | "web_fetch") => {
                AlgebraKind::ServerTool
            }
            Some(ProviderRef::Handle(h)) => match self.providers.get(h) {
                Some(spec) if is_mcp(spec) => AlgebraKind::Mcp,
                _ => AlgebraKind::Default,
            },
            Some(ProviderRef::Shipped(s)) if is_mcp(&s.spec) => AlgebraKind::Mcp,
            Some(_) => AlgebraKind::Default,
        }
    }

    /// The algebra of key `key` built for comparing grants where secrets matter (the CI gate, sub-agent
    /// containment): [`AlgebraKind::build_with_secrets`] with this manifest's `[agent] secrets`.
    pub fn secret_aware_algebra(&self, key: &str, ctx: &PathCtx) -> Box<dyn Algebra> {
        self.algebra_kind(key)
            .build_with_secrets(ctx, &self.agent.secrets)
    }

    /// The effective ceiling (see [`Ceiling`]). Relative paths in grants resolve against `ctx`.
    pub fn effective_ceiling(&self, ctx: &PathCtx) -> Ceiling {
        let (mut grants, defaulted) = match &self.capabilities {
            Some(c) => (c.clone(), false),
            None => (default_ceiling(), true),
        };
        for (name, entry) in &self.tools {
            if let Some(inline) = &entry.capabilities {
                let alg = self.algebra_kind(name).build(ctx);
                let merged = match grants.get(name) {
                    Some(existing) => alg.merge(existing, inline),
                    None => inline.clone(),
                };
                grants.insert(name.clone(), merged);
            }
        }
        Ceiling { grants, defaulted }
    }
}

/// Where a tool instance's grant came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrantSource {
    /// The entry's own inline `capabilities` (self-authorising).
    Inline,
    /// The ceiling entry for the instance name.
    CeilingInstance,
    /// The ceiling entry for the underlying tool name.
    CeilingUnderlying,
    /// Nothing grants it: `{}`.
    Nothing,
}

impl GrantSource {
    /// Where the grant of tool `instance` (underlying tool `underlying`) is written, as the user finds it in the
    /// manifest: `[tools].sh.capabilities`, `[capabilities].sh`, `[capabilities].bash`; for [`GrantSource::Nothing`],
    /// where a grant would go.
    pub fn key(self, instance: &str, underlying: &str) -> String {
        let k = crate::lattice::value::toml_key;
        match self {
            GrantSource::Inline => format!("[tools].{}.capabilities", k(instance)),
            GrantSource::CeilingUnderlying => format!("[capabilities].{}", k(underlying)),
            GrantSource::CeilingInstance | GrantSource::Nothing => {
                format!("[capabilities].{}", k(instance))
            }
        }
    }
}

/// One tool instance with the grant it runs under.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolGrant {
    /// The model-facing instance name.
    pub instance: String,
    /// The underlying tool.
    pub underlying: String,
    /// Its implementation.
    pub provider: ProviderRef,
    /// The algebra its grant uses.
    pub algebra: AlgebraKind,
    /// The grant.
    pub grant: Grant,
    /// Where the grant came from.
    pub source: GrantSource,
    /// Contract problems (unknown kinds, missing required kinds) for built-in tools.
    pub problems: Vec<String>,
}

/// The grant an entry requests: its inline capabilities, else `ceiling[instance] ?? ceiling[underlying]`, else `{}`.
pub fn requested_grant(
    ceiling: &Ceiling,
    instance: &str,
    entry: &ToolEntry,
) -> (Grant, GrantSource) {
    let underlying = entry.tool.as_deref().unwrap_or(instance);
    if let Some(inline) = &entry.capabilities {
        return (inline.clone(), GrantSource::Inline);
    }
    if let Some(g) = ceiling.grants.get(instance) {
        return (g.clone(), GrantSource::CeilingInstance);
    }
    if let Some(g) = ceiling.grants.get(underlying) {
        return (g.clone(), GrantSource::CeilingUnderlying);
    }
    (Grant::none(), GrantSource::Nothing)
}

/// Every root `[tools]` entry with the grant it gets, checked against its built-in contract where it has one.
pub fn tool_grants(manifest: &Manifest, ceiling: &Ceiling) -> Vec<ToolGrant> {
    manifest
        .tools
        .iter()
        .map(|(instance, entry)| {
            let underlying = manifest.underlying(instance).to_string();
            let (grant, source) = requested_grant(ceiling, instance, entry);
            let contract = match &entry.provider {
                ProviderRef::Builtin => builtin_contract(&underlying, None),
                ProviderRef::Harness(h) => builtin_contract(&underlying, Some(h)),
                _ => None,
            };
            let key = source.key(instance, &underlying);
            let mut problems = contract
                .map(|c| check_contract(&key, &c, &grant))
                .unwrap_or_default();
            // a built-in bash row the OS sandbox would refuse is an error here, not a refusal of every call later
            if crate::lattice::algebra::COMMAND_TOOLS.contains(&underlying.as_str())
                && entry.provider == ProviderRef::Builtin
            {
                problems.extend(sandbox_grant_problems(&key, &grant));
            }
            ToolGrant {
                instance: instance.clone(),
                underlying,
                provider: entry.provider.clone(),
                algebra: manifest.algebra_kind(instance),
                grant,
                source,
                problems,
            }
        })
        .collect()
}

/// One key where a child's ceiling is not contained in its parent's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyExcess {
    /// The ceiling key (or `agent.secrets`).
    pub key: String,
    /// The parent's grant for it (`None`: the parent has none).
    pub parent: Option<Grant>,
    /// The child's grant.
    pub child: Grant,
    /// Why it is not contained, when the grants alone do not say (the key names another tool; a secret).
    pub why: Option<String>,
}

/// The keys where `child` (the ceiling of `child_manifest`) is not contained in `parent` (of `parent_manifest`), in
/// the tool-aware order the CI gate uses too:
/// - a key the child grants must name the same tool in both manifests ([`crate::contrib::key_target`]): the same grant under
///   another tool is authority of another kind;
/// - each grant is compared under the parent's algebra for the key, made secret-aware with the child's
///   `[agent] secrets` (a row naming a secret exactly is covered only by a row naming it exactly);
/// - the child may declare only secrets the parent declares.
pub fn ceiling_excess(
    parent_manifest: &Manifest,
    parent: &Ceiling,
    child_manifest: &Manifest,
    child: &Ceiling,
    ctx: &PathCtx,
) -> Vec<KeyExcess> {
    let mut out = Vec::new();
    for (key, g) in &child.grants {
        if g.is_none() {
            continue;
        }
        let (pt, ct) = (
            crate::key_target(parent_manifest, key),
            crate::key_target(child_manifest, key),
        );
        if let Some(change) = crate::target_change(&pt, &ct) {
            out.push(KeyExcess {
                key: key.clone(),
                parent: parent.grants.get(key).cloned(),
                child: g.clone(),
                why: Some(format!(
                    "in the sub-agent `{key}` names {change}: a grant is authority only over the tool it names"
                )),
            });
            continue;
        }
        let alg: Box<dyn Algebra> = parent_manifest
            .algebra_kind(key)
            .build_with_secrets(ctx, &child_manifest.agent.secrets);
        match parent.grants.get(key) {
            Some(p) if alg.contains(p, g) => {}
            p => out.push(KeyExcess {
                key: key.clone(),
                parent: p.cloned(),
                child: g.clone(),
                why: None,
            }),
        }
    }
    let extra: Vec<&String> = child_manifest
        .agent
        .secrets
        .iter()
        .filter(|s| !parent_manifest.agent.secrets.contains(s))
        .collect();
    if !extra.is_empty() {
        let names: Vec<String> = extra.iter().map(|s| format!("`{s}`")).collect();
        out.push(KeyExcess {
            key: "agent.secrets".into(),
            parent: None,
            child: Grant::none(),
            why: Some(format!(
                "the sub-agent declares secret(s) {} in [agent] secrets that its parent does not",
                names.join(", ")
            )),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::manifest::parse_manifest;

    fn m(text: &str) -> Manifest {
        parse_manifest(
            &format!("[agent]\nname = \"a\"\n{text}"),
            "agent.toml",
            &BTreeMap::new(),
        )
        .unwrap()
    }

    fn ctx() -> PathCtx {
        PathCtx::new("/w", Some("/home/u".into()))
    }

    #[test]
    fn no_capabilities_section_is_the_default_ceiling_not_fail_open() {
        let c = m("").effective_ceiling(&ctx());
        assert!(c.defaulted);
        assert_eq!(c.grants, default_ceiling());
        assert_eq!(
            c.grants["bash"].to_toml(),
            "{ commands = \"*\", paths = [\"./\"] }"
        );
        assert!(!c.grants.contains_key("web_search"));
    }

    #[test]
    fn an_empty_capabilities_table_grants_nothing() {
        let c = m("[capabilities]\n").effective_ceiling(&ctx());
        assert!(!c.defaulted);
        assert!(c.grants.is_empty());
    }

    #[test]
    fn inline_tool_capabilities_widen_the_ceiling() {
        let man = m("[tools]\nbash = { provider = \"builtin\", capabilities = { commands = [\"gcalcli\"], network = \"*\" } }\n[capabilities]\nbash = { commands = \"*\", paths = [\"./\"] }\n");
        let c = man.effective_ceiling(&ctx());
        assert_eq!(
            c.grants["bash"].rows().unwrap().len(),
            2,
            "the inline row joins the ceiling as its own row"
        );
        let grants = tool_grants(&man, &c);
        assert_eq!(grants[0].source, GrantSource::Inline);
    }

    #[test]
    fn a_renamed_instance_uses_its_underlying_algebra_and_falls_back_to_its_ceiling() {
        let man = m("[tools]\ngcal = { provider = \"builtin\", tool = \"bash\" }\n[capabilities]\nbash = { commands = [\"gcalcli\"], network = \"*\" }\n");
        assert_eq!(man.algebra_kind("gcal"), AlgebraKind::Bash);
        let c = man.effective_ceiling(&ctx());
        let g = &tool_grants(&man, &c)[0];
        assert_eq!(
            (g.underlying.as_str(), g.source),
            ("bash", GrantSource::CeilingUnderlying)
        );
        assert!(g.problems.is_empty(), "{:?}", g.problems);
    }

    #[test]
    fn an_mcp_handle_uses_per_argument_grants() {
        let man = m("[providers]\nfs = { provider = \"mcp-server\", npm = \"@x/fs\" }\n[tools]\nread_text_file = { provider = \"fs\" }\n");
        assert_eq!(man.algebra_kind("read_text_file"), AlgebraKind::Mcp);
        assert_eq!(
            tool_grants(&man, &man.effective_ceiling(&ctx()))[0].source,
            GrantSource::Nothing
        );
    }
}
