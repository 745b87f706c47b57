//! Agent Skills: the rules for a `SKILL.md` (frontmatter, name, description), the skill -> tools compiler, what an
//! accepted skill adds to the agent's grants, and the subtractive-only rule for a rescan. All pure: the runtime reads
//! the folders and passes the text and the facts (the skill's canonical directory, the sidecar's text).
//!
//! Specification (the Agent Skills spec as loom reads it):
//! - A skill is a folder holding `SKILL.md`, which starts with YAML frontmatter between `---` lines.
//! - `name`: 1-64 characters, lowercase ASCII letters, digits and hyphens, not starting or ending with a hyphen, no
//!   `--`, and equal to the folder's name.
//! - `description`: required, non-empty, at most 1024 characters. `compatibility`, when present, at most 500.
//! - Other keys (`license`, `allowed-tools`, `metadata`, unknown ones) are accepted and ignored, except the
//!   `metadata` keys `loom.tools` / `loom.providers`, which must be strings (TOML in YAML block scalars).
//! - Compiler precedence: a `loom.toml` sidecar wins entirely; else `loom.tools` / `loom.providers`; else the
//!   authority-free default `read_skill = {}`. `${SKILL_DIR}` is substituted (in string values, after TOML parsing)
//!   with the skill's absolute directory. It is the only variable: a skill never reads the environment, so any other
//!   `${NAME}` (even `${NAME:-default}`) is an error naming the variable — an environment value can never reach a
//!   grant, a tool description, an audit line or an error through a skill. The group is labeled `skill <name>` and
//!   judged like every contributed group.

pub(crate) mod frontmatter;

use std::collections::{BTreeMap, BTreeSet};

use frontmatter::FmValue;

use crate::contrib::ceiling::ToolGrant;
use crate::contrib::judge::algebra_for;
use crate::lattice::grant::Grant;
use crate::lattice::path::PathCtx;
use crate::manifest::{
    parse_sidecar_group, parse_tool_group, Manifest, ManifestError, ProviderRef, ToolGroup,
};

/// Longest `name`.
pub const MAX_NAME: usize = 64;
/// Longest `description`.
pub const MAX_DESCRIPTION: usize = 1024;
/// Longest `compatibility`.
pub const MAX_COMPATIBILITY: usize = 500;
/// The authority-free group of a skill without loom metadata.
pub const DEFAULT_SKILL_TOOLS: &str = "read_skill = {}";
/// The tool the skills session provides.
pub const READ_SKILL: &str = "read_skill";

/// A parsed `SKILL.md`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillDoc {
    /// The skill's name (equal to its folder's).
    pub name: String,
    /// What it does and when to use it.
    pub description: String,
    /// `metadata.loom.tools`: a `[tools]` table body.
    pub loom_tools: Option<String>,
    /// `metadata.loom.providers`: a `[providers]` table body.
    pub loom_providers: Option<String>,
    /// The instructions after the frontmatter.
    pub body: String,
}

/// Checks a skill name against the spec's rules and its folder's name. `Err` is (message, fix).
pub fn check_skill_name(name: &str, folder: &str) -> Result<(), (String, String)> {
    let bad = |m: String| {
        Err((m, format!("rename it to {:?}: lowercase letters, digits and single hyphens, matching the folder", suggest_name(name))))
    };
    if name.is_empty() {
        return Err(("the name is empty".into(), format!("set `name: {folder}`")));
    }
    if name.chars().count() > MAX_NAME {
        return bad(format!(
            "the name is {} characters long; the limit is {MAX_NAME}",
            name.chars().count()
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return bad(format!("{name:?} contains {c:?}; a skill name holds only lowercase letters, digits and hyphens"));
    }
    if name.starts_with('-') || name.ends_with('-') {
        return bad(format!("{name:?} starts or ends with a hyphen"));
    }
    if name.contains("--") {
        return bad(format!("{name:?} contains two hyphens in a row"));
    }
    if name != folder {
        return Err((
            format!("the name {name:?} does not match the skill's folder {folder:?}"),
            format!("set `name: {folder}`, or rename the folder to {name:?}"),
        ));
    }
    Ok(())
}

fn suggest_name(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    let out: String = out.trim_end_matches('-').chars().take(MAX_NAME).collect();
    out.trim_end_matches('-').to_string()
}

/// Parses a `SKILL.md` found in folder `folder`; errors name `origin` (its path) and the key.
pub fn parse_skill_md(text: &str, folder: &str, origin: &str) -> Result<SkillDoc, ManifestError> {
    let (fm, body) = frontmatter::split_frontmatter(text).map_err(|e| {
        ManifestError::new(
            origin,
            "frontmatter",
            format!("line {}: {}", e.line, e.message),
        )
        .with_hint("the frontmatter is YAML between two `---` lines at the top of SKILL.md")
    })?;
    let string = |key: &str| -> Result<Option<String>, ManifestError> {
        match fm.get(key) {
            None => Ok(None),
            Some(FmValue::Str(s)) => Ok(Some(s.trim_end_matches('\n').to_string())),
            Some(_) => Err(ManifestError::new(
                origin,
                key,
                format!("{key} must be a string"),
            )),
        }
    };
    let name = string("name")?.unwrap_or_default();
    check_skill_name(&name, folder)
        .map_err(|(m, hint)| ManifestError::new(origin, "name", m).with_hint(hint))?;
    let description = string("description")?.unwrap_or_default();
    if description.trim().is_empty() {
        return Err(ManifestError::new(
            origin,
            "description",
            "the description is missing or empty",
        )
        .with_hint("add `description:` saying what the skill does and when to use it"));
    }
    let len = description.chars().count();
    if len > MAX_DESCRIPTION {
        return Err(ManifestError::new(
            origin,
            "description",
            format!("the description is {len} characters long; the limit is {MAX_DESCRIPTION}"),
        )
        .with_hint("shorten it; put details in the body of SKILL.md"));
    }
    if let Some(c) = string("compatibility")? {
        let len = c.chars().count();
        if len > MAX_COMPATIBILITY {
            return Err(ManifestError::new(
                origin,
                "compatibility",
                format!("compatibility is {len} characters long; the limit is {MAX_COMPATIBILITY}"),
            ));
        }
    }
    let (mut loom_tools, mut loom_providers) = (None, None);
    if let Some(meta) = fm.get("metadata") {
        let FmValue::Map(meta) = meta else {
            return Err(ManifestError::new(
                origin,
                "metadata",
                "metadata must be a mapping of keys to strings",
            ));
        };
        for (key, slot) in [
            ("loom.tools", &mut loom_tools),
            ("loom.providers", &mut loom_providers),
        ] {
            match meta.get(key) {
                None => {}
                Some(FmValue::Str(s)) => *slot = Some(s.clone()),
                Some(_) => {
                    return Err(ManifestError::new(
                        origin,
                        format!("metadata.{key}"),
                        format!("{key} must be a string of TOML"),
                    )
                    .with_hint(format!(
                        "write it as a YAML block scalar: `{key}: |` and the TOML indented below"
                    )))
                }
            }
        }
    }
    Ok(SkillDoc {
        name,
        description,
        loom_tools,
        loom_providers,
        body,
    })
}

/// What the compiler needs to know about one skill folder.
#[derive(Debug, Clone, Copy)]
pub struct SkillFacts<'a> {
    /// The parsed SKILL.md.
    pub doc: &'a SkillDoc,
    /// The SKILL.md path, for errors.
    pub origin: &'a str,
    /// The skill's absolute (canonical) directory: `${SKILL_DIR}`.
    pub dir: &'a str,
    /// A `loom.toml` sidecar next to SKILL.md: (text, path).
    pub sidecar: Option<(&'a str, &'a str)>,
}

/// The only variable a skill's declarations may use: its own directory.
pub const SKILL_DIR_VAR: &str = "SKILL_DIR";

/// Compiles a skill into its labeled tool group (see the module docs for the precedence and for `${SKILL_DIR}`, the
/// only variable substituted: nothing is read from the environment).
pub fn compile_skill(
    facts: SkillFacts<'_>,
    root_provider_handles: &BTreeSet<String>,
) -> Result<ToolGroup, ManifestError> {
    let env: BTreeMap<String, String> = [(SKILL_DIR_VAR.to_string(), facts.dir.to_string())].into();
    let label = format!("skill {}", facts.doc.name);
    if let Some((text, origin)) = facts.sidecar {
        return parse_sidecar_group(&label, text, origin, &env, root_provider_handles);
    }
    let doc = facts.doc;
    if doc.loom_tools.is_none() && doc.loom_providers.is_some() {
        return Err(ManifestError::new(
            facts.origin,
            "metadata.loom.providers",
            "loom.providers is set but loom.tools is not, so no tool uses those providers",
        )
        .with_hint("add `loom.tools` naming the tools the providers implement"));
    }
    let tools = doc.loom_tools.as_deref().unwrap_or(DEFAULT_SKILL_TOOLS);
    parse_tool_group(
        &label,
        tools,
        doc.loom_providers.as_deref(),
        facts.origin,
        &env,
        root_provider_handles,
    )
}

/// Why an accepted group still cannot be bound to this agent at boot, or `None` when it can. Provider-less entries
/// that request authority add rows to one of the manifest's own tools, so that tool must exist; new instances must not
/// take a name the manifest already uses; `provider = "session"` is only `read_skill`.
pub fn binding_problem(manifest: &Manifest, group: &ToolGroup) -> Option<String> {
    for (name, entry) in &group.tools {
        match &entry.provider {
            ProviderRef::Host if entry.capabilities.is_some() && !manifest.tools.contains_key(name) => {
                return Some(format!(
                    "it adds grant rows to `{name}`, which this agent has no [tools] entry for; add `{name} = \
                     \"builtin\"` (or the tool it means) to [tools]"
                ))
            }
            ProviderRef::Host => {}
            ProviderRef::Session if name != READ_SKILL || entry.tool.is_some() => {
                return Some(format!(
                    "`{name}` asks the session for a tool, and the skills session provides only `{READ_SKILL}`"
                ))
            }
            ProviderRef::Session => {}
            _ if manifest.tools.contains_key(name) => {
                return Some(format!(
                    "it declares a new tool instance `{name}`, a name this agent's [tools] already uses; rename it \
                     in the skill (a loom.toml sidecar can)"
                ))
            }
            _ => {}
        }
    }
    None
}

/// The grants the manifest's own tools run under once the accepted groups are bound: each provider-less entry's rows
/// joined to the tool's grant (they were judged to fit the ceiling). Only changed tools are returned.
pub fn bound_grants(
    manifest: &Manifest,
    ctx: &PathCtx,
    tools: &[ToolGrant],
    groups: &[&ToolGroup],
) -> BTreeMap<String, Grant> {
    let mut out: BTreeMap<String, Grant> = BTreeMap::new();
    for group in groups {
        for (name, entry) in &group.tools {
            let (ProviderRef::Host, Some(request)) = (&entry.provider, &entry.capabilities) else {
                continue;
            };
            let Some(base) = out.get(name).cloned().or_else(|| {
                tools
                    .iter()
                    .find(|t| &t.instance == name)
                    .map(|t| t.grant.clone())
            }) else {
                continue;
            };
            let alg = manifest.algebra_kind(name).build(ctx);
            if !alg.contains(&base, request) {
                out.insert(name.clone(), alg.merge(&base, request));
            }
        }
    }
    out
}

/// Which groups claim a tool name another group claims too: each such group (by label) with the first clashing name
/// and the other groups that claim it. A name is never first-come: every group that claims a contested name is
/// refused, so the result is the same whatever order the groups are loaded in.
pub fn group_clashes(claims: &[(String, Vec<String>)]) -> BTreeMap<String, (String, Vec<String>)> {
    let mut by_name: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (label, names) in claims {
        for n in names {
            by_name
                .entry(n.as_str())
                .or_default()
                .insert(label.as_str());
        }
    }
    let mut out = BTreeMap::new();
    for (name, labels) in &by_name {
        if labels.len() < 2 {
            continue;
        }
        for label in labels {
            out.entry(label.to_string()).or_insert_with(|| {
                (
                    name.to_string(),
                    labels
                        .iter()
                        .filter(|l| *l != label)
                        .map(|l| l.to_string())
                        .collect(),
                )
            });
        }
    }
    out
}

/// Why a skill rescanned mid-session is dropped: it would need more than what was bound at boot.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RescanDrop {
    /// It declares an instance boot did not bind.
    #[error("it now declares `{0}`, which was not bound at boot; restart to bind it")]
    NewInstance(String),
    /// An instance names another implementation.
    #[error("`{0}` now names another implementation; restart to judge it")]
    OtherImplementation(String),
    /// An instance requests more than boot judged.
    #[error(
        "`{name}` now requests {now}, more than the {was} judged at boot; restart to judge it"
    )]
    Wider {
        /// The instance.
        name: String,
        /// What it requests now.
        now: Grant,
        /// What boot judged.
        was: Grant,
    },
    /// Its providers changed.
    #[error("its providers changed; restart to judge them")]
    Providers,
}

/// The subtractive-only rule for a skill rescanned mid-session: the skill stays only when what it declares now
/// needs no more than what was bound at boot — the same instances with the same providers, each request contained
/// in the one judged at boot. `Err` says why it is dropped.
pub fn rescan_keeps(
    manifest: &Manifest,
    ctx: &PathCtx,
    boot: &ToolGroup,
    now: &ToolGroup,
) -> Result<(), RescanDrop> {
    for (name, entry) in &now.tools {
        let Some(was) = boot.tools.get(name) else {
            return Err(RescanDrop::NewInstance(name.clone()));
        };
        if was.provider != entry.provider || was.tool != entry.tool {
            return Err(RescanDrop::OtherImplementation(name.clone()));
        }
        let now_req = entry.capabilities.clone().unwrap_or_else(Grant::none);
        let was_req = was.capabilities.clone().unwrap_or_else(Grant::none);
        let alg = algebra_for(manifest, name, entry).build(ctx);
        if !alg.contains(&was_req, &now_req) {
            return Err(RescanDrop::Wider {
                name: name.clone(),
                now: now_req,
                was: was_req,
            });
        }
    }
    if now.providers != boot.providers {
        return Err(RescanDrop::Providers);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
