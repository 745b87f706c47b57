//! Contributed tool groups at boot (skills, session layers): each is judged by the kernel against the effective
//! ceiling — atomic per group, fail-soft — and an accepted group is bound: its provider-less rows join the manifest
//! tool they name, its new built-in instances get built, its `provider = "session"` tools come from the chain. A
//! group that is rejected, or that this build cannot bind, is trimmed with a note; the model never sees it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use loom_kernel::{
    binding_problem, bound_grants, builtin_contract, check_contract, judge_group, requested_grant,
    rescan_keeps, Ceiling, DeclVerdict, Grant, GroupJudgement, Manifest, PathCtx, ProviderRef,
    ProviderSpec, Remedy, ToolGrant, ToolGroup,
};

use crate::mcp::mcp_provider;
use crate::session::{Chain, Keeper};
use crate::tools::IMPLEMENTED;

/// A tool instance a group adds.
pub(crate) enum NewTool {
    /// A built-in under a new name (`jq = { provider = "builtin", tool = "bash", … }`).
    Builtin {
        /// The instance.
        instance: String,
        /// The built-in.
        underlying: String,
        /// Its grant.
        grant: Grant,
    },
    /// A tool of an MCP server (a root `[providers]` handle, or a server the group ships, consented to by name), or
    /// of an external provider: a root `[providers]` handle with a source, or a source the group ships (its key is
    /// the kernel's `shipped_key`, resolved only from its pinned install).
    Mcp {
        /// The instance.
        instance: String,
        /// The server's tool name.
        underlying: String,
        /// Its grant.
        grant: Grant,
        /// The server's key (the handle, or the shipped spec by value: servers dedup globally).
        key: String,
        /// The server's `mcp-server` config; `None` for an external provider (resolved from its pinned install).
        table: Option<toml::Table>,
    },
    /// A tool the session implements (`read_skill`): taken from the chain once it is bound.
    Session {
        /// The instance.
        instance: String,
    },
}

/// What binding the chain's groups produced.
#[derive(Default)]
pub(crate) struct Bound {
    /// Manifest tools whose grant grew by accepted rows.
    pub widened: BTreeMap<String, Grant>,
    /// New instances.
    pub new_tools: Vec<NewTool>,
    /// Trimmed groups and why, for the user.
    pub notes: Vec<String>,
    /// The sources (or provider packages) accepted groups ship, by install key (what `NewTool::Mcp { table: None,
    /// key }` resolves).
    pub shipped: BTreeMap<String, ProviderSpec>,
}

/// Why a rejected judgement was rejected, with the paste-ready lines (for the manifest's `[capabilities]` or
/// `[tools]`) or the change the skill itself needs.
pub fn rejection_note(j: &GroupJudgement, manifest_file: &str) -> String {
    let mut reasons = Vec::new();
    let (mut caps, mut tools, mut decls) = (Vec::new(), Vec::new(), Vec::new());
    for d in &j.decls {
        if let DeclVerdict::Rejected {
            reason,
            remediation,
            ..
        } = &d.verdict
        {
            reasons.push(format!("{}: {reason}", d.instance));
            match remediation {
                Remedy::Capabilities(line) => caps.push(line.clone()),
                Remedy::Tools(line) => tools.push(line.clone()),
                Remedy::Declaration(change) => decls.push(change.clone()),
            }
        }
    }
    let mut fixes = Vec::new();
    if !decls.is_empty() {
        fixes.push(format!("in {}: {}", j.origin, decls.join("; ")));
    }
    if !tools.is_empty() {
        fixes.push(format!(
            "add to [tools] in {manifest_file}: {}",
            tools.join(" ; ")
        ));
    }
    if !caps.is_empty() {
        fixes.push(format!(
            "add to [capabilities] in {manifest_file}: {}",
            caps.join(" ; ")
        ));
    }
    format!(
        "{} ({}) is inactive: {}; to accept it, {}",
        j.label,
        j.origin,
        reasons.join("; "),
        fixes.join("; and ")
    )
}

/// A problem this build has binding `group` (providers it cannot run yet), on top of the kernel's
/// [`binding_problem`].
fn unsupported(m: &Manifest, group: &ToolGroup) -> Option<String> {
    for (name, entry) in &group.tools {
        if mcp_provider(m, &entry.provider).is_some()
            || crate::providers::provider_source(m, &entry.provider).is_some()
        {
            continue;
        }
        let what = match &entry.provider {
            ProviderRef::Host | ProviderRef::Session => continue,
            ProviderRef::Builtin => {
                let underlying = entry.tool.as_deref().unwrap_or(name);
                if IMPLEMENTED.contains(&underlying)
                    && !matches!(underlying, "spawn_subagent" | "web_search")
                {
                    continue;
                }
                format!("the built-in {underlying:?} as a contributed instance")
            }
            ProviderRef::Handle(h) => format!("tools from [providers].{h}"),
            // a shipped source: installed by `loom install`, resolved from its pinned install at boot
            ProviderRef::Shipped(s) if s.spec.source().is_some() => continue,
            ProviderRef::Shipped(s) => format!("tools from shipped providers ({})", s.label),
            ProviderRef::Harness(h) => format!("harness server tools ({h})"),
        };
        return Some(format!(
            "`{name}` needs {what}, which this build of loom cannot bind in a contributed group"
        ));
    }
    None
}

/// Judges and binds every group the chain contributes, then tells the chain which were accepted.
pub(crate) fn bind_groups(
    manifest: &Arc<crate::load::Loaded>,
    ceiling: &Ceiling,
    ctx: &PathCtx,
    grants: &[ToolGrant],
    chain: &mut Chain,
) -> Bound {
    let m: &Manifest = &manifest.manifest;
    let file = manifest.path.display().to_string();
    let mut out = Bound::default();
    let mut accepted = BTreeSet::new();
    let mut taken: BTreeSet<String> = m.tools.keys().cloned().collect();
    let mut current: Vec<ToolGrant> = grants.to_vec();
    for (_layer, group) in chain.tool_groups() {
        let j = judge_group(m, ceiling, ctx, &group);
        if !j.accepted {
            out.notes.push(rejection_note(&j, &file));
            continue;
        }
        let trim = |why: String| format!("{} ({}) is inactive: {why}", group.label, group.origin);
        if let Some(why) = binding_problem(m, &group).or_else(|| unsupported(m, &group)) {
            out.notes.push(trim(why));
            continue;
        }
        // new instances: a name no other tool or group has taken
        let mut news = Vec::new();
        let shipped = crate::providers::group_sources(&group);
        let mut problem = None;
        for (name, entry) in &group.tools {
            match &entry.provider {
                ProviderRef::Builtin => {
                    let underlying = entry.tool.clone().unwrap_or_else(|| name.clone());
                    // exactly what the kernel judged: a contributed built-in requests its grant explicitly, and
                    // never falls back to a ceiling entry
                    let Some(grant) = j
                        .decls
                        .iter()
                        .find(|d| &d.instance == name)
                        .and_then(|d| d.requested.clone())
                    else {
                        problem = Some(format!("`{name}` requests nothing"));
                        continue;
                    };
                    let problems = builtin_contract(&underlying, None)
                        .map(|c| check_contract(name, &c, &grant))
                        .unwrap_or_default();
                    if !problems.is_empty() {
                        problem = Some(problems.join("; "));
                    }
                    news.push(NewTool::Builtin {
                        instance: name.clone(),
                        underlying,
                        grant,
                    });
                }
                ProviderRef::Session => match chain.session_tool(name) {
                    Some(_) => news.push(NewTool::Session {
                        instance: name.clone(),
                    }),
                    None => problem = Some(format!("no session layer provides `{name}`")),
                },
                provider => {
                    // the process behind it: an MCP server (root handle or shipped table), a source the group
                    // ships (pinned under the kernel's key), or a root handle's provider source
                    let server = if let Some((key, table)) = mcp_provider(m, provider) {
                        Some((key, Some(table.clone())))
                    } else if let ProviderRef::Shipped(s) = provider {
                        Some((loom_kernel::shipped_key(&group.label, &s.label), None))
                    } else {
                        crate::providers::provider_source(m, provider)
                            .map(|ext| (ext.handle.to_string(), None))
                    };
                    if let Some((key, table)) = server {
                        let (grant, _) = requested_grant(ceiling, name, entry);
                        news.push(NewTool::Mcp {
                            instance: name.clone(),
                            underlying: entry.tool.clone().unwrap_or_else(|| name.clone()),
                            grant,
                            key,
                            table,
                        });
                    }
                }
            }
        }
        let names: Vec<&String> = news
            .iter()
            .map(|n| match n {
                NewTool::Builtin { instance, .. }
                | NewTool::Mcp { instance, .. }
                | NewTool::Session { instance, .. } => instance,
            })
            .collect();
        if let Some(dup) = names.iter().find(|n| taken.contains(**n)) {
            problem.get_or_insert(format!(
                "the tool name `{dup}` is already taken by another tool or group"
            ));
        }
        // rows joined to the manifest's tools, checked against each built-in's contract
        let widened = bound_grants(m, ctx, &current, &[&group]);
        for (name, grant) in &widened {
            let t = current.iter().find(|t| &t.instance == name);
            if let Some(c) = t.and_then(|t| match &t.provider {
                ProviderRef::Builtin => builtin_contract(&t.underlying, None),
                _ => None,
            }) {
                let problems = check_contract(name, &c, grant);
                if !problems.is_empty() {
                    problem.get_or_insert(problems.join("; "));
                }
            }
        }
        if let Some(why) = problem {
            out.notes.push(trim(why));
            continue;
        }
        for n in &names {
            taken.insert((*n).clone());
        }
        for t in current.iter_mut() {
            if let Some(g) = widened.get(&t.instance) {
                t.grant = g.clone();
            }
        }
        out.widened.extend(widened);
        out.new_tools.extend(news);
        out.shipped
            .extend(shipped.into_iter().map(|(key, (_, spec))| (key, spec)));
        accepted.insert(group.label.clone());
    }
    let loaded = manifest.clone();
    let rescan_ctx = ctx.clone();
    let keeps: Keeper = Arc::new(move |boot: &ToolGroup, now: &ToolGroup| {
        rescan_keeps(&loaded.manifest, &rescan_ctx, boot, now)
    });
    chain.bind(&accepted, keeps);
    out
}
