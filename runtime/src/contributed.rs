//! Contributed tool groups at boot (skills, session layers): each is judged by the kernel against the effective
//! ceiling — atomic per group, fail-soft — and an accepted group is bound: its provider-less rows join the manifest
//! tool they name, its new built-in instances get built, its `provider = "session"` tools come from the chain. A
//! group that is rejected, or that this build cannot bind, is trimmed with a note; the model never sees it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use loom_kernel::{
    binding_problem, bound_grants, builtin_contract, check_contract, group_clashes, judge_group,
    rescan_keeps, Ceiling, DeclVerdict, Grant, GroupJudgement, Manifest, PathCtx, ProviderRef,
    ProviderSpec, Remedy, ToolGrant, ToolGroup,
};

use crate::providers::mcp_provider;
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
    let (mut caps, mut tools, mut decls, mut consents) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
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
                Remedy::Consent {
                    capabilities,
                    consent,
                } => {
                    caps.extend(capabilities.clone());
                    consents.push(consent.clone());
                }
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
    if !consents.is_empty() {
        fixes.push(format!(
            "add to [consent] in {manifest_file}: {}",
            consents.join(" ; ")
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

/// One group that passed judging and binding on its own, before clashes between groups are settled.
struct Candidate {
    group: ToolGroup,
    news: Vec<NewTool>,
    names: Vec<String>,
    shipped: BTreeMap<String, ProviderSpec>,
}

/// Judges and binds every group the chain contributes, then tells the chain which were accepted. Order-independent:
/// each group is judged and checked on its own against the manifest's own grants, a tool name two groups add is
/// refused for both (kernel `group_clashes`), and the accepted rows join in label order.
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
    let mut candidates: Vec<Candidate> = Vec::new();
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
        // new instances
        let mut news = Vec::new();
        let shipped = crate::providers::group_sources(&group);
        let mut problem = None;
        for (name, entry) in &group.tools {
            let decl = j.decls.iter().find(|d| &d.instance == name);
            match &entry.provider {
                ProviderRef::Builtin => {
                    let underlying = entry.tool.clone().unwrap_or_else(|| name.clone());
                    // exactly what the kernel judged: a contributed built-in requests its grant explicitly, and
                    // never falls back to a ceiling entry
                    let Some(grant) = decl.and_then(|d| d.requested.clone()) else {
                        problem = Some(format!("`{name}` requests nothing"));
                        continue;
                    };
                    let problems = builtin_contract(&underlying, None)
                        .map(|c| check_contract(&format!("`{name}`'s requested grant"), &c, &grant))
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
                        // exactly what the kernel judged: the request, or the whole key it was judged against
                        // (which is written for this tool); never a key named like the instance by chance
                        let grant = decl
                            .and_then(|d| {
                                d.requested.clone().or_else(|| match &d.verdict {
                                    DeclVerdict::Accepted {
                                        judged_against: Some(k),
                                    } => ceiling.grants.get(k).cloned(),
                                    _ => None,
                                })
                            })
                            .unwrap_or_else(Grant::none);
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
        let names: Vec<String> = news
            .iter()
            .map(|n| match n {
                NewTool::Builtin { instance, .. }
                | NewTool::Mcp { instance, .. }
                | NewTool::Session { instance, .. } => instance.clone(),
            })
            .collect();
        if let Some(dup) = names.iter().find(|n| m.tools.contains_key(*n)) {
            problem.get_or_insert(format!(
                "the tool name `{dup}` is already taken by the manifest's own [tools]"
            ));
        }
        // rows joined to the manifest's tools, checked against each built-in's contract (on the manifest's own
        // grants: what another group joins never decides this one)
        let widened = bound_grants(m, ctx, grants, &[&group]);
        for (name, grant) in &widened {
            let t = grants.iter().find(|t| &t.instance == name);
            if let Some(c) = t.and_then(|t| match &t.provider {
                ProviderRef::Builtin => builtin_contract(&t.underlying, None),
                _ => None,
            }) {
                let problems =
                    check_contract(&format!("`{name}` widened by this group"), &c, grant);
                if !problems.is_empty() {
                    problem.get_or_insert(problems.join("; "));
                }
            }
        }
        if let Some(why) = problem {
            out.notes.push(trim(why));
            continue;
        }
        candidates.push(Candidate {
            group,
            news,
            names,
            shipped: shipped
                .into_iter()
                .map(|(key, (_, spec))| (key, spec))
                .collect(),
        });
    }
    // a name two groups add is refused for both: never first-come
    let claims: Vec<(String, Vec<String>)> = candidates
        .iter()
        .map(|c| (c.group.label.clone(), c.names.clone()))
        .collect();
    let clashes = group_clashes(&claims);
    candidates.sort_by(|a, b| a.group.label.cmp(&b.group.label));
    let mut kept: Vec<&ToolGroup> = Vec::new();
    let mut news_all = Vec::new();
    for c in &mut candidates {
        if let Some((name, others)) = clashes.get(&c.group.label) {
            out.notes.push(format!(
                "{} ({}) is inactive: the tool name `{name}` is also added by {}; a name two groups add goes to \
                 neither (rename the instance in one of them)",
                c.group.label,
                c.group.origin,
                others.join(", ")
            ));
            continue;
        }
        news_all.append(&mut c.news);
        out.shipped.append(&mut c.shipped);
        accepted.insert(c.group.label.clone());
    }
    for c in &candidates {
        if accepted.contains(&c.group.label) {
            kept.push(&c.group);
        }
    }
    out.widened = bound_grants(m, ctx, grants, &kept);
    out.new_tools = news_all;
    let loaded = manifest.clone();
    let rescan_ctx = ctx.clone();
    let keeps: Keeper = Arc::new(move |boot: &ToolGroup, now: &ToolGroup| {
        rescan_keeps(&loaded.manifest, &rescan_ctx, boot, now)
    });
    chain.bind(&accepted, keeps);
    out
}
