//! Judging contributed tool groups (skills, session layers) against the effective ceiling.
//!
//! Atomic per group, fail-soft: a group is accepted only when every declaration in it is, and a rejected group is
//! trimmed without stopping the agent. Each rejected declaration gets a paste-ready remedy: a `[capabilities]` line
//! naming the key it was judged against, a `[tools]` line, or the change the declaration itself needs.
//!
//! Specification (which key a declaration is judged against; a contribution never picks it):
//! - Consent rule: a declaration that ships its own implementation — an inline provider table, a string source such
//!   as `"./bin"` or `"@scope/pkg"`, or a group-local handle resolving to one — is accepted only when
//!   `[capabilities]` names the instance, and is judged against that entry alone.
//! - A renamed built-in (`jq = { provider = "builtin", tool = "bash", capabilities = {…} }`) must request its
//!   capabilities: a request is all it ever gets, never "the ceiling". It is judged against the agent's own grant of
//!   the underlying built-in — the ceiling key of that name, which the manifest's `[tools]` must list as that
//!   built-in — never against a key named like the instance (a consent key, another tool's key).
//! - A provider-less entry adds rows to the manifest tool of its name and is judged against the key that tool's own
//!   grant comes from ([`requested_grant`]'s source). `tool = "…"` on it is refused unless it equals that tool's
//!   underlying name.

use crate::algebra::AlgebraKind;
use crate::ceiling::{requested_grant, Ceiling, GrantSource};
use crate::grant::Grant;
use crate::manifest::{Manifest, ProviderRef, ToolEntry, ToolGroup};
use crate::path::PathCtx;
use crate::value::toml_key;

/// What would accept a rejected declaration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Remedy {
    /// A paste-ready line for the manifest's `[capabilities]`.
    Capabilities(String),
    /// A paste-ready line for the manifest's `[tools]`.
    Tools(String),
    /// A change to the declaration itself (in the skill or layer that contributes it).
    Declaration(String),
}

impl Remedy {
    /// The line or the change.
    pub fn text(&self) -> &str {
        match self {
            Remedy::Capabilities(t) | Remedy::Tools(t) | Remedy::Declaration(t) => t,
        }
    }

    /// Where the remedy goes: `capabilities`, `tools` or `declaration`.
    pub fn place(&self) -> &'static str {
        match self {
            Remedy::Capabilities(_) => "capabilities",
            Remedy::Tools(_) => "tools",
            Remedy::Declaration(_) => "declaration",
        }
    }
}

impl std::fmt::Display for Remedy {
    /// `put in [capabilities]:  …`, `add to [tools]:  …`, `change the declaration:  …`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Remedy::Capabilities(t) => write!(f, "put in [capabilities]:  {t}"),
            Remedy::Tools(t) => write!(f, "add to [tools]:  {t}"),
            Remedy::Declaration(t) => write!(f, "change the declaration:  {t}"),
        }
    }
}

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
        /// What would accept it.
        remediation: Remedy,
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
                remediation: Remedy::Capabilities(line(instance, &ask)),
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
                remediation: Remedy::Capabilities(line(instance, &alg.merge(consent, &request))),
            })
        };
    }
    let key = match &entry.provider {
        ProviderRef::Builtin => match builtin_key(manifest, ceiling, instance, entry) {
            Ok(key) => key,
            Err((judged_against, reason, remediation)) => {
                return mk(
                    entry.capabilities.clone(),
                    DeclVerdict::Rejected {
                        judged_against,
                        reason,
                        remediation,
                    },
                )
            }
        },
        ProviderRef::Host => match host_key(manifest, ceiling, instance, entry) {
            Ok(key) => key,
            Err((judged_against, reason, remediation)) => {
                return mk(
                    entry.capabilities.clone(),
                    DeclVerdict::Rejected {
                        judged_against,
                        reason,
                        remediation,
                    },
                )
            }
        },
        _ => {
            let underlying = entry.tool.as_deref().unwrap_or(instance);
            if ceiling.grants.contains_key(instance) || !ceiling.grants.contains_key(underlying) {
                instance.to_string()
            } else {
                underlying.to_string()
            }
        }
    };
    let Some(request) = &entry.capabilities else {
        return mk(
            None,
            DeclVerdict::Accepted {
                judged_against: None,
            },
        );
    };
    let sup = ceiling
        .grants
        .get(&key)
        .cloned()
        .unwrap_or_else(Grant::none);
    if alg.contains(&sup, request) {
        mk(
            Some(request.clone()),
            DeclVerdict::Accepted {
                judged_against: Some(key),
            },
        )
    } else {
        let had = if ceiling.grants.contains_key(&key) {
            sup.to_string()
        } else {
            "absent".to_string()
        };
        mk(
            Some(request.clone()),
            DeclVerdict::Rejected {
                reason: format!(
                    "it requests {request}, which the ceiling for `{key}` ({had}) does not cover"
                ),
                remediation: Remedy::Capabilities(line(&key, &alg.merge(&sup, request))),
                judged_against: key,
            },
        )
    }
}

/// Why a declaration is refused before its request is compared: (judged against, reason, remedy).
type Refusal = (String, String, Remedy);

/// The key a contributed renamed built-in is judged against: its underlying built-in's, which the manifest's
/// `[tools]` must list as that built-in; and it must request capabilities.
fn builtin_key(
    manifest: &Manifest,
    ceiling: &Ceiling,
    instance: &str,
    entry: &ToolEntry,
) -> Result<String, Refusal> {
    let underlying = entry.tool.as_deref().unwrap_or(instance);
    if !crate::contracts::BUILTIN_TOOLS.contains(&underlying) {
        return Err((
            underlying.to_string(),
            format!(
                "there is no built-in tool `{underlying}` (built-ins: {})",
                crate::contracts::BUILTIN_TOOLS.join(", ")
            ),
            Remedy::Declaration(format!(
                "name a built-in in `tool = \"…\"` of `{}`, or another provider",
                toml_key(instance)
            )),
        ));
    }
    let listed = manifest.tools.get(underlying).is_some_and(|t| {
        t.provider == ProviderRef::Builtin && manifest.underlying(underlying) == underlying
    });
    if !listed {
        return Err((
            underlying.to_string(),
            format!(
                "it adds an instance of the built-in `{underlying}`, which this agent's [tools] does not list; a \
                 contribution gets a built-in only within the agent's own `{underlying}`"
            ),
            Remedy::Tools(format!(
                "{} = \"builtin\"  (this gives the agent `{underlying}` itself too; otherwise remove the contribution)",
                toml_key(underlying)
            )),
        ));
    }
    if entry.capabilities.is_none() {
        let within = ceiling
            .grants
            .get(underlying)
            .map(|g| g.to_string())
            .unwrap_or_else(|| "{}".into());
        return Err((
            underlying.to_string(),
            format!(
                "it renames the built-in `{underlying}` and requests nothing; a contributed built-in gets only the \
                 capabilities it requests, never the agent's whole `{underlying}` grant"
            ),
            Remedy::Declaration(format!(
                "add `capabilities = {{ … }}` to `{}`, requesting what it needs within `{underlying}` ({within})",
                toml_key(instance)
            )),
        ));
    }
    Ok(underlying.to_string())
}

/// The key a provider-less entry is judged against: the one the manifest tool of its name takes its grant from.
/// `tool = "…"` may only repeat that tool's underlying name.
fn host_key(
    manifest: &Manifest,
    ceiling: &Ceiling,
    instance: &str,
    entry: &ToolEntry,
) -> Result<String, Refusal> {
    let Some(own) = manifest.tools.get(instance) else {
        // binding_problem says the manifest has no such tool (when it requests anything)
        return match &entry.tool {
            Some(t) => Err((
                instance.to_string(),
                format!(
                    "it names `tool = {t:?}` on rows for `{instance}`, a tool this agent's [tools] does not list"
                ),
                Remedy::Declaration(format!("remove `tool = {t:?}` from `{}`", toml_key(instance))),
            )),
            None => Ok(instance.to_string()),
        };
    };
    let underlying = manifest.underlying(instance);
    if let Some(t) = entry.tool.as_deref().filter(|t| *t != underlying) {
        return Err((
            instance.to_string(),
            format!(
                "`tool = {t:?}` on a provider-less entry must name the tool this agent's `{instance}` runs \
                 (`{underlying}`): its rows join `{instance}` and are judged against that tool's own grant, never a \
                 key the contribution picks"
            ),
            Remedy::Declaration(format!("remove `tool = {t:?}` from `{}`", toml_key(instance))),
        ));
    }
    Ok(match requested_grant(ceiling, instance, own).1 {
        GrantSource::CeilingUnderlying => underlying.to_string(),
        GrantSource::Inline | GrantSource::CeilingInstance | GrantSource::Nothing => {
            instance.to_string()
        }
    })
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
            &Remedy::Capabilities("bash = [{ commands = \"*\", paths = [\"./\"] }, { commands = [\"gcalcli\"], network = \"*\", paths = [\"~/.gcalcli\"] }]".into())
        );
        // pasting the remediation accepts it
        let fixed = host(&format!("[capabilities]\n{}\n", remediation.text()));
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
            assert_eq!(remediation, &Remedy::Capabilities("echo_note = {}".into()));
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
            remediation.text(),
            "echo_note = [{ commands = [\"cat\"] }, { commands = [\"ls\"] }]",
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

    fn man(text: &str) -> Manifest {
        parse_manifest(
            &format!("[agent]\nname = \"host\"\n{text}"),
            "agent.toml",
            &BTreeMap::new(),
        )
        .unwrap()
    }

    /// `Ok(judged against)` or `Err((judged against, reason, remedy))`.
    type Outcome = Result<Option<String>, (String, String, Remedy)>;

    /// The verdict on the one declaration `tools` holds: `Ok(judged against)` or `Err((judged against, reason,
    /// remedy))`.
    fn one(host: &Manifest, tools: &str) -> Outcome {
        let j = judge(host, tools, None);
        assert_eq!(j.decls.len(), 1, "{tools}");
        match j.decls[0].verdict.clone() {
            DeclVerdict::Accepted { judged_against } => Ok(judged_against),
            DeclVerdict::Rejected {
                judged_against,
                reason,
                remediation,
            } => Err((judged_against, reason, remediation)),
        }
    }

    fn refused(judged: &str, reason: &str, remedy: Remedy) -> Outcome {
        Err((judged.into(), reason.into(), remedy))
    }

    #[test]
    fn renamed_builtins_request_explicitly_and_are_judged_against_the_agents_own_tool() {
        // M1: [tools] lists only read_file, and the default ceiling still has a bash key
        let reader = man("[tools]\nread_file = \"builtin\"\n");
        // K3a: a consent key named like the instance, and a shell that may only run ls
        let consent = man("[tools]\nread_file = \"builtin\"\nbash = \"builtin\"\n[capabilities]\nread_file = { paths = [\"./\"] }\nbash = { commands = [\"ls\"], paths = [\"./\"] }\necho_note = \"*\"\n");
        // the manifest's `bash` is a read_file: nothing lists the built-in bash
        let misnamed = man("[tools]\nbash = { provider = \"builtin\", tool = \"read_file\" }\n[capabilities]\nbash = { paths = [\"./\"] }\n");
        let unlisted = |u: &str| {
            refused(
                u,
                &format!("it adds an instance of the built-in `{u}`, which this agent's [tools] does not list; a contribution gets a built-in only within the agent's own `{u}`"),
                Remedy::Tools(format!("{u} = \"builtin\"  (this gives the agent `{u}` itself too; otherwise remove the contribution)")),
            )
        };
        let nothing = refused(
            "bash",
            "it renames the built-in `bash` and requests nothing; a contributed built-in gets only the capabilities it requests, never the agent's whole `bash` grant",
            Remedy::Declaration("add `capabilities = { … }` to `echo_note`, requesting what it needs within `bash` ({ commands = [\"ls\"], paths = [\"./\"] })".into()),
        );
        let cases: Vec<(&Manifest, &str, Outcome)> = vec![
            (&reader, "run = { provider = \"builtin\", tool = \"bash\" }", unlisted("bash")),
            (&reader, "run = { provider = \"builtin\", tool = \"bash\", capabilities = { commands = [\"ls\"], paths = [\"./\"] } }", unlisted("bash")),
            (&reader, "w = { provider = \"builtin\", tool = \"write_file\", capabilities = { paths = [\"./out\"] } }", unlisted("write_file")),
            (&reader, "peek = { provider = \"builtin\", tool = \"read_file\", capabilities = { paths = [\"./docs\"] } }", Ok(Some("read_file".into()))),
            (&reader, "peek = { provider = \"builtin\", tool = \"read_file\", capabilities = { paths = [\"/etc\"] } }", refused("read_file", "it requests { paths = [\"/etc\"] }, which the ceiling for `read_file` ({ paths = [\"./\"] }) does not cover", Remedy::Capabilities("read_file = [{ paths = [\"./\"] }, { paths = [\"/etc\"] }]".into()))),
            (&consent, "echo_note = { provider = \"builtin\", tool = \"bash\" }", nothing),
            (&consent, "echo_note = { provider = \"builtin\", tool = \"bash\", capabilities = { commands = [\"curl\"] } }", refused("bash", "it requests { commands = [\"curl\"] }, which the ceiling for `bash` ({ commands = [\"ls\"], paths = [\"./\"] }) does not cover", Remedy::Capabilities("bash = [{ commands = [\"curl\"] }, { commands = [\"ls\"], paths = [\"./\"] }]".into()))),
            (&consent, "echo_note = { provider = \"builtin\", tool = \"bash\", capabilities = { commands = [\"ls\"] } }", Ok(Some("bash".into()))),
            (&consent, "wr = { provider = \"builtin\", tool = \"read_file\", capabilities = \"*\" }", refused("read_file", "it requests \"*\", which the ceiling for `read_file` ({ paths = [\"./\"] }) does not cover", Remedy::Capabilities("read_file = \"*\"".into()))),
            (&misnamed, "run = { provider = \"builtin\", tool = \"bash\", capabilities = { commands = [\"ls\"] } }", unlisted("bash")),
            (&consent, "jq = { provider = \"builtin\", capabilities = { commands = [\"jq\"] } }", refused("jq", "there is no built-in tool `jq` (built-ins: bash, read_file, write_file, edit_file, find, spawn_subagent, web_search)", Remedy::Declaration("name a built-in in `tool = \"…\"` of `jq`, or another provider".into()))),
        ];
        for (host, tools, want) in cases {
            assert_eq!(one(host, tools), want, "{tools}");
        }
    }

    #[test]
    fn provider_less_rows_are_judged_against_the_key_their_tool_takes_its_grant_from() {
        // K2: `sh` falls back to [capabilities].bash; a wider key the skill names must not apply
        let fallback = man("[tools]\nread_file = \"builtin\"\nsh = { provider = \"builtin\", tool = \"bash\" }\n[capabilities]\nread_file = { paths = [\"./\"] }\nbash = { commands = [\"ls\"], paths = [\"./\"] }\necho_note = \"*\"\n");
        // an inline grant is the tool's own key, even when [capabilities].bash is wider
        let inline = man("[tools]\nsh = { provider = \"builtin\", tool = \"bash\", capabilities = { commands = [\"ls\"] } }\n[capabilities]\nbash = \"*\"\n");
        let picked = |t: &str| {
            refused(
                "sh",
                &format!("`tool = \"{t}\"` on a provider-less entry must name the tool this agent's `sh` runs (`bash`): its rows join `sh` and are judged against that tool's own grant, never a key the contribution picks"),
                Remedy::Declaration(format!("remove `tool = \"{t}\"` from `sh`")),
            )
        };
        let cases: Vec<(&Manifest, &str, Outcome)> = vec![
            (&fallback, "sh = { tool = \"echo_note\", capabilities = \"*\" }", picked("echo_note")),
            (&fallback, "sh = { tool = \"read_file\", capabilities = { commands = [\"ls\"] } }", picked("read_file")),
            (&fallback, "sh = { tool = \"bash\", capabilities = { commands = [\"ls\"] } }", Ok(Some("bash".into()))),
            (&fallback, "sh = { capabilities = { commands = [\"ls\"] } }", Ok(Some("bash".into()))),
            (&fallback, "sh = { capabilities = \"*\" }", refused("bash", "it requests \"*\", which the ceiling for `bash` ({ commands = [\"ls\"], paths = [\"./\"] }) does not cover", Remedy::Capabilities("bash = \"*\"".into()))),
            (&inline, "sh = { capabilities = { commands = [\"curl\"] } }", refused("sh", "it requests { commands = [\"curl\"] }, which the ceiling for `sh` ({ commands = [\"ls\"] }) does not cover", Remedy::Capabilities("sh = [{ commands = [\"curl\"] }, { commands = [\"ls\"] }]".into()))),
            (&inline, "sh = { capabilities = { commands = [\"ls\"] } }", Ok(Some("sh".into()))),
            (&inline, "other = { tool = \"bash\", capabilities = { commands = [\"ls\"] } }", refused("other", "it names `tool = \"bash\"` on rows for `other`, a tool this agent's [tools] does not list", Remedy::Declaration("remove `tool = \"bash\"` from `other`".into()))),
        ];
        for (host, tools, want) in cases {
            assert_eq!(one(host, tools), want, "{tools}");
        }
    }
}
