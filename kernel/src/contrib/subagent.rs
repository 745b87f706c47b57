//! Sub-agent containment over the whole sub-agent tree.
//!
//! Every sub-agent's effective ceiling must be contained, key by key, in its parent's, each key naming the same tool
//! in both (see [`ceiling_excess`]). Inline sub-manifests are parsed
//! with their parent; sub-manifests named by path are loaded by the caller (the kernel does no I/O) through
//! [`ManifestLoader`], which also gives each a stable identity so cycles are detected.

use crate::contrib::ceiling::ceiling_excess;
use crate::lattice::grant::Grant;
use crate::lattice::path::PathCtx;
use crate::lattice::value::Value;
use crate::manifest::{Manifest, SubagentSource};

/// How deep the walk goes before it refuses (a guard against pathological trees, not a cycle check).
pub const MAX_DEPTH: usize = 16;

/// Loads sub-manifests named by path. Implemented by the runtime (file reads) and by tests (a map).
pub trait ManifestLoader {
    /// Loads the manifest at `path`, written inside the manifest identified by `from`. Returns a stable identity
    /// (e.g. the canonical file path), the PathCtx its grants resolve against, and the parsed manifest.
    fn load(&mut self, from: &str, path: &str) -> Result<(String, PathCtx, Manifest), String>;
}

/// One key where a sub-agent exceeds its parent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Excess {
    /// The ceiling key.
    pub key: String,
    /// The parent's grant for it (`None`: the parent has none).
    pub parent: Option<Grant>,
    /// The sub-agent's grant.
    pub child: Grant,
    /// Why, when the grants alone do not say: the key names another tool in the sub-agent, or a secret the parent
    /// does not declare (see [`ceiling_excess`]).
    pub why: Option<String>,
}

/// The verdict for one sub-agent, with its own sub-agents.
#[derive(Debug, Clone, PartialEq)]
pub struct SubagentVerdict {
    /// The key in the parent that carries it (`spawn_subagent`, a renamed instance).
    pub key: String,
    /// Where it lives: `inline` or the identity the loader returned.
    pub source: String,
    /// How the parent refers to it: the path as written, or `inline` (with `key`, what the CI gate matches a
    /// sub-agent by: its agent name can change freely).
    pub reference: String,
    /// Its agent name, when it parsed.
    pub name: Option<String>,
    /// Keys where it exceeds its parent (empty: contained).
    pub excess: Vec<Excess>,
    /// Why it could not be checked (load or parse failure, cycle, depth).
    pub error: Option<String>,
    /// Its own sub-agents.
    pub children: Vec<SubagentVerdict>,
    /// Its effective ceiling, when it parsed (for the CI gate).
    pub ceiling: Option<crate::contrib::ceiling::Ceiling>,
    /// The sub-manifest, when it parsed (for the CI gate's tool-aware comparison).
    pub manifest: Option<Box<Manifest>>,
}

impl SubagentVerdict {
    /// True when it and its whole subtree are contained and checked.
    pub fn ok(&self) -> bool {
        self.excess.is_empty()
            && self.error.is_none()
            && self.children.iter().all(SubagentVerdict::ok)
    }
}

/// Walks the sub-agent tree of `root` (identified by `root_id`) and checks containment at every edge.
pub fn check_subagents(
    root: &Manifest,
    root_id: &str,
    ctx: &PathCtx,
    loader: &mut dyn ManifestLoader,
) -> Vec<SubagentVerdict> {
    let mut stack = vec![root_id.to_string()];
    walk(root, root_id, ctx, loader, &mut stack)
}

fn walk(
    parent: &Manifest,
    parent_id: &str,
    ctx: &PathCtx,
    loader: &mut dyn ManifestLoader,
    stack: &mut Vec<String>,
) -> Vec<SubagentVerdict> {
    let parent_ceiling = parent.effective_ceiling(ctx);
    let mut out = Vec::new();
    for sub in &parent.subagents {
        let mut v = SubagentVerdict {
            key: sub.key.clone(),
            source: "inline".into(),
            reference: match &sub.source {
                SubagentSource::Inline(_) => "inline".into(),
                SubagentSource::Path(p) => p.clone(),
            },
            name: None,
            excess: Vec::new(),
            error: None,
            children: Vec::new(),
            ceiling: None,
            manifest: None,
        };
        let loaded = match &sub.source {
            SubagentSource::Inline(m) => Ok((
                format!("{parent_id}#{}", sub.key),
                ctx.clone(),
                (**m).clone(),
                true,
            )),
            SubagentSource::Path(p) => loader
                .load(parent_id, p)
                .map(|(id, c, m)| (id, c, m, false)),
        };
        match loaded {
            Err(e) => v.error = Some(e),
            Ok((id, child_ctx, child, inline)) => {
                if !inline {
                    v.source = id.clone();
                }
                v.name = Some(child.agent.name.clone());
                if stack.contains(&id) {
                    let mut chain = stack.clone();
                    chain.push(id);
                    v.error = Some(format!("sub-agent cycle: {}", chain.join(" -> ")));
                } else if stack.len() > MAX_DEPTH {
                    v.error = Some(format!("sub-agent tree deeper than {MAX_DEPTH} levels"));
                } else {
                    let child_ceiling = child.effective_ceiling(&child_ctx);
                    v.excess = ceiling_excess(parent, &parent_ceiling, &child, &child_ceiling, ctx)
                        .into_iter()
                        .map(|x| Excess {
                            key: x.key,
                            parent: x.parent,
                            child: x.child,
                            why: x.why,
                        })
                        .collect();
                    v.ceiling = Some(child_ceiling);
                    stack.push(id.clone());
                    v.children = walk(&child, &id, &child_ctx, loader, stack);
                    stack.pop();
                    v.manifest = Some(Box::new(child));
                }
            }
        }
        out.push(v);
    }
    out
}
/// One sub-agent a `spawn_subagent` grant allows.
#[derive(Debug, Clone, PartialEq)]
pub enum SubagentChoice {
    /// The parent itself, stripped of its `spawn_subagent` instances (a row without `manifest`, or `"*"`).
    SelfCopy,
    /// A row's `manifest` value: an inline table or a path.
    Explicit(Value),
}

/// The sub-agents `grant` (a `spawn_subagent` instance's) lets the model spawn, in row order, each with the name the
/// model picks it by: the parent's name (`parent`) for a self-copy, else the sub-manifest's name (an inline table's
/// `name` or `agent.name`, a path as written). A name offered twice keeps its first row.
pub fn subagent_choices(grant: &Grant, parent: &str) -> Vec<(String, SubagentChoice)> {
    let mut choices: Vec<(String, SubagentChoice)> = Vec::new();
    match grant {
        Grant::Unrestricted => choices.push((parent.to_string(), SubagentChoice::SelfCopy)),
        Grant::Set(rows) => {
            for row in rows.iter() {
                let choice = match row.get("manifest") {
                    Some(v) => SubagentChoice::Explicit(v.clone()),
                    None => SubagentChoice::SelfCopy,
                };
                let name = match &choice {
                    SubagentChoice::SelfCopy => parent.to_string(),
                    SubagentChoice::Explicit(v) => explicit_name(v),
                };
                if !choices.iter().any(|(n, _)| *n == name) {
                    choices.push((name, choice));
                }
            }
        }
    }
    choices
}

/// The name the model picks an explicit sub-manifest by.
fn explicit_name(v: &Value) -> String {
    if let Some(path) = v.as_str() {
        return path.to_string();
    }
    let json = v.to_json();
    json.get("name")
        .or_else(|| json.get("agent").and_then(|a| a.get("name")))
        .and_then(serde_json::Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| "sub-agent".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_offers_self_copies_and_named_sub_manifests_once_each() {
        let t: toml::Table = toml::from_str(
            r#"g = [
                { manifest = { name = "r" } },
                { manifest = { agent = { name = "s" } } },
                { manifest = "./x.toml" },
                { manifest = { name = "r", description = "the same name again" } },
            ]"#,
        )
        .unwrap();
        let grant = Grant::from_toml(&t["g"]).unwrap();
        // in the grant's (canonical) row order; the second "r" row is not offered again
        let mut names: Vec<String> = subagent_choices(&grant, "lead")
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        names.sort();
        assert_eq!(names, ["./x.toml", "r", "s"]);
        let star = subagent_choices(&Grant::Unrestricted, "lead");
        assert_eq!(star, vec![("lead".to_string(), SubagentChoice::SelfCopy)]);
    }
}
