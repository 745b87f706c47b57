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

pub(crate) fn algebra_for(manifest: &Manifest, instance: &str, entry: &ToolEntry) -> AlgebraKind {
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

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;
    use crate::manifest::{parse_manifest, parse_tool_group};

    fn host(caps: &str) -> Manifest {
        let text = format!("[agent]\nname = \"host\"\n[providers]\nfs_mcp = {{ provider = \"mcp-server\", npm = \"@x/fs\" }}\n[tools]\nbash = \"builtin\"\nread_file = \"builtin\"\n{caps}");
        parse_manifest(&text, "agent.toml", &BTreeMap::new()).unwrap()
    }

    fn judge(host: &Manifest, tools: &str, providers: Option<&str>) -> GroupJudgement {
        let handles: BTreeSet<String> = host.providers.keys().cloned().collect();
        let group = parse_tool_group(
            "skill t",
            tools,
            providers,
            "skills/t/SKILL.md",
            &BTreeMap::new(),
            &handles,
        )
        .unwrap();
        let ctx = PathCtx::new("/w", Some("/home/u".into()));
        judge_group(host, &host.effective_ceiling(&ctx), &ctx, &group)
    }

    const GCAL_CEILING: &str = "[capabilities]\nbash = [\n  { commands = \"*\", paths = [\"./\"] },\n  { commands = [\"gcalcli\"], network = \"*\", paths = [\"~/.gcalcli\"] },\n]\n";
    const CALENDAR: &str = "bash = { capabilities = { commands = [\"gcalcli\"], network = \"*\", paths = [\"~/.gcalcli\"] } }";

    #[test]
    fn the_seed_calendar_skill_fits_the_gcalcli_row() {
        let j = judge(&host(GCAL_CEILING), CALENDAR, None);
        assert!(j.accepted, "{j:?}");
    }

    #[test]
    fn drop_the_gcalcli_row_and_the_skill_is_trimmed_with_a_paste_ready_line() {
        let j = judge(
            &host("[capabilities]\nbash = { commands = \"*\", paths = [\"./\"] }\n"),
            CALENDAR,
            None,
        );
        assert!(!j.accepted);
        let DeclVerdict::Rejected {
            judged_against,
            remediation,
            ..
        } = &j.decls[0].verdict
        else {
            panic!()
        };
        assert_eq!(judged_against, "bash");
        assert_eq!(
            remediation,
            "bash = [{ commands = \"*\", paths = [\"./\"] }, { commands = [\"gcalcli\"], network = \"*\", paths = [\"~/.gcalcli\"] }]"
        );
        // pasting the remediation accepts it
        let fixed = host(&format!("[capabilities]\n{remediation}\n"));
        assert!(judge(&fixed, CALENDAR, None).accepted);
    }

    #[test]
    fn a_group_is_atomic() {
        let tools =
            format!("{CALENDAR}\nread_file = {{ capabilities = {{ paths = [\"/etc\"] }} }}");
        let j = judge(&host(GCAL_CEILING), &tools, None);
        assert!(!j.accepted, "one over-broad entry rejects the whole group");
        assert_eq!(
            j.decls
                .iter()
                .filter(|d| matches!(d.verdict, DeclVerdict::Accepted { .. }))
                .count(),
            1
        );
    }

    #[test]
    fn an_entry_requesting_nothing_is_accepted() {
        let j = judge(
            &host(GCAL_CEILING),
            "read_skill = { provider = \"session\" }",
            None,
        );
        assert!(j.accepted);
    }

    #[test]
    fn a_renamed_builtin_is_judged_against_its_underlying_tool() {
        let jq = "jq = { provider = \"builtin\", tool = \"bash\", capabilities = { commands = [\"jq\"] } }";
        assert!(
            judge(
                &host("[capabilities]\nbash = { commands = \"*\" }\n"),
                jq,
                None
            )
            .accepted
        );
        let j = judge(
            &host("[capabilities]\nbash = { commands = [\"ls\"] }\n"),
            jq,
            None,
        );
        let DeclVerdict::Rejected { judged_against, .. } = &j.decls[0].verdict else {
            panic!()
        };
        assert_eq!(judged_against, "bash");
    }

    #[test]
    fn the_consent_rule_covers_every_way_of_shipping_an_implementation() {
        // each declaration fits the ceiling by grant, but ships code: it needs its instance named in [capabilities]
        let cases = [
            ("echo_note = { provider = { provider = \"mcp-server\", command = \"node\", args = [\"server.mjs\"] } }", None),
            ("echo_note = { provider = \"./bin\" }", None),
            ("echo_note = { provider = \"@scope/pkg\" }", None),
            ("echo_note = { provider = \"notes\" }", Some("notes = { provider = \"mcp-server\", command = \"node\" }")),
        ];
        let wide = "[capabilities]\nbash = \"*\"\nread_file = \"*\"\necho = \"*\"\n";
        for (tools, providers) in cases {
            let j = judge(&host(wide), tools, providers);
            assert!(
                !j.accepted,
                "{tools}: shipped code must not be accepted without consent"
            );
            let DeclVerdict::Rejected {
                remediation,
                reason,
                ..
            } = &j.decls[0].verdict
            else {
                panic!()
            };
            assert!(reason.contains("ships its own implementation"), "{reason}");
            assert_eq!(remediation, "echo_note = {}");
            let consented = host("[capabilities]\necho_note = \"*\"\n");
            assert!(
                judge(&consented, tools, providers).accepted,
                "{tools}: named in [capabilities] = consent"
            );
        }
    }

    #[test]
    fn consent_is_judged_against_the_instance_entry_alone() {
        // the underlying-name fallback never widens acceptance
        let tools = "echo_note = { provider = \"./bin\", tool = \"bash\", capabilities = { commands = [\"ls\"] } }";
        assert!(!judge(&host("[capabilities]\nbash = \"*\"\n"), tools, None).accepted);
        let j = judge(
            &host("[capabilities]\necho_note = { commands = [\"cat\"] }\n"),
            tools,
            None,
        );
        let DeclVerdict::Rejected {
            judged_against,
            remediation,
            ..
        } = &j.decls[0].verdict
        else {
            panic!()
        };
        assert_eq!(judged_against, "echo_note");
        assert_eq!(
            remediation, "echo_note = [{ commands = [\"cat\"] }, { commands = [\"ls\"] }]",
            "rows are joined, never boxed"
        );
    }

    #[test]
    fn a_root_handle_is_root_trusted() {
        let j = judge(
            &host("[capabilities]\nread_text_file = { path = \"*\" }\n"),
            "read_text_file = { provider = \"fs_mcp\", capabilities = { path = \"/docs/a.md\" } }",
            None,
        );
        assert!(j.accepted, "{j:?}");
    }
}
