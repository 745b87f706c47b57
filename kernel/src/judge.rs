//! Judging contributed tool groups (skills, session layers) against the effective ceiling.
//!
//! Atomic per group, fail-soft: a group is accepted only when every declaration in it is, and a rejected group is
//! trimmed without stopping the agent. Each rejected declaration gets a paste-ready `[capabilities]` line naming the
//! key it was judged against. Consent rule: a declaration that ships its own implementation — an inline provider
//! table, a string source such as `"./bin"` or `"@scope/pkg"`, or a group-local handle resolving to one — is
//! accepted only when `[capabilities]` names the instance, and is judged against that entry alone.

use crate::algebra::AlgebraKind;
use crate::ceiling::Ceiling;
use crate::grant::Grant;
use crate::manifest::{Manifest, ProviderRef, ToolEntry, ToolGroup};
use crate::path::PathCtx;
use crate::value::toml_key;

/// The verdict on one declaration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeclVerdict {
    /// It fits.
    Accepted {
        /// The ceiling key it was judged against (`None` when it requested nothing).
        judged_against: Option<String>,
    },
    /// It does not fit.
    Rejected {
        /// The ceiling key it was judged against.
        judged_against: String,
        /// Why, in one sentence.
        reason: String,
        /// A paste-ready `[capabilities]` line that would accept it.
        remediation: String,
    },
}

/// One judged declaration.
#[derive(Debug, Clone, PartialEq)]
pub struct DeclJudgement {
    /// Tool instance name.
    pub instance: String,
    /// What it references.
    pub provider: ProviderRef,
    /// What it requests (`None`: nothing, or the ceiling entry for a shipped implementation).
    pub requested: Option<Grant>,
    /// The verdict.
    pub verdict: DeclVerdict,
}

/// One judged group.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupJudgement {
    /// The group's label (`skill calendar`, `skills session`).
    pub label: String,
    /// Where it came from (a SKILL.md path, a session layer).
    pub origin: String,
    /// True when every declaration was accepted.
    pub accepted: bool,
    /// Per-declaration verdicts.
    pub decls: Vec<DeclJudgement>,
}

/// Judges `group` against `manifest`'s effective `ceiling`.
pub fn judge_group(
    manifest: &Manifest,
    ceiling: &Ceiling,
    ctx: &PathCtx,
    group: &ToolGroup,
) -> GroupJudgement {
    let decls: Vec<DeclJudgement> = group
        .tools
        .iter()
        .map(|(name, entry)| judge_decl(manifest, ceiling, ctx, name, entry))
        .collect();
    let accepted = decls
        .iter()
        .all(|d| matches!(d.verdict, DeclVerdict::Accepted { .. }));
    GroupJudgement {
        label: group.label.clone(),
        origin: group.origin.clone(),
        accepted,
        decls,
    }
}

fn algebra_for(manifest: &Manifest, instance: &str, entry: &ToolEntry) -> AlgebraKind {
    match &entry.provider {
        ProviderRef::Builtin => AlgebraKind::for_builtin(entry.tool.as_deref().unwrap_or(instance)),
        ProviderRef::Shipped(s) if matches!(&s.spec, crate::manifest::ProviderSpec::Configured { factory, .. } if factory == "mcp-server") => {
            AlgebraKind::Mcp
        }
        _ => manifest.algebra_kind(instance),
    }
}

fn line(key: &str, grant: &Grant) -> String {
    format!("{} = {}", toml_key(key), grant.to_toml())
}

fn judge_decl(
    manifest: &Manifest,
    ceiling: &Ceiling,
    ctx: &PathCtx,
    instance: &str,
    entry: &ToolEntry,
) -> DeclJudgement {
    let alg = algebra_for(manifest, instance, entry).build(ctx);
    let mk = |requested: Option<Grant>, verdict| DeclJudgement {
        instance: instance.to_string(),
        provider: entry.provider.clone(),
        requested,
        verdict,
    };
    if let ProviderRef::Shipped(shipped) = &entry.provider {
        let named = manifest.capabilities.as_ref().and_then(|c| c.get(instance));
        let Some(consent) = named else {
            let ask = entry.capabilities.clone().unwrap_or_else(Grant::none);
            return mk(entry.capabilities.clone(), DeclVerdict::Rejected {
                judged_against: instance.to_string(),
                reason: format!(
                    "it ships its own implementation ({}), and loom runs contributed code only when [capabilities] \
                     names the instance `{instance}`",
                    shipped.label
                ),
                remediation: line(instance, &ask),
            });
        };
        let request = entry
            .capabilities
            .clone()
            .unwrap_or_else(|| consent.clone());
        return if alg.contains(consent, &request) {
            mk(
                Some(request),
                DeclVerdict::Accepted {
                    judged_against: Some(instance.to_string()),
                },
            )
        } else {
            mk(Some(request.clone()), DeclVerdict::Rejected {
                judged_against: instance.to_string(),
                reason: format!("it requests {request}, which [capabilities].{instance} ({consent}) does not cover"),
                remediation: line(instance, &alg.merge(consent, &request)),
            })
        };
    }
    let Some(request) = &entry.capabilities else {
        return mk(
            None,
            DeclVerdict::Accepted {
                judged_against: None,
            },
        );
    };
    let underlying = entry.tool.as_deref().unwrap_or(instance);
    let key = if ceiling.grants.contains_key(instance) || !ceiling.grants.contains_key(underlying) {
        instance
    } else {
        underlying
    };
    let sup = ceiling.grants.get(key).cloned().unwrap_or_else(Grant::none);
    if alg.contains(&sup, request) {
        mk(
            Some(request.clone()),
            DeclVerdict::Accepted {
                judged_against: Some(key.to_string()),
            },
        )
    } else {
        let had = if ceiling.grants.contains_key(key) {
            sup.to_string()
        } else {
            "absent".to_string()
        };
        mk(
            Some(request.clone()),
            DeclVerdict::Rejected {
                judged_against: key.to_string(),
                reason: format!(
                    "it requests {request}, which the ceiling for `{key}` ({had}) does not cover"
                ),
                remediation: line(key, &alg.merge(&sup, request)),
            },
        )
    }
}
