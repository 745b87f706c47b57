//! Judging contributed tool groups (skills, session layers) against the effective ceiling.
//!
//! Atomic per group, fail-soft: a group is accepted only when every declaration in it is, and a rejected group is
//! trimmed without stopping the agent. Each rejected declaration gets a paste-ready remedy: a `[capabilities]` line
//! naming the key it was judged against, a `[tools]` line, or the change the declaration itself needs.
//!
//! Specification (which key a declaration is judged against; a contribution never picks it):
//! - Consent rule: a declaration that ships its own implementation — an inline provider table, a string source such
//!   as `"./bin"` or `"@scope/pkg"`, or a group-local handle resolving to one — is accepted only when
//!   `[capabilities]` names the instance and `[consent]` records this skill and the digest of what it ships
//!   ([`crate::key_for`]), and is judged against that entry alone.
//! - Typed keys: a key covers only what it is written for ([`crate::key_fits`]); a contributed instance named like a
//!   key written for something else (a consent key, another built-in, a provider's tool) is refused.
//! - A renamed built-in (`jq = { provider = "builtin", tool = "bash", capabilities = {…} }`) must request its
//!   capabilities: a request is all it ever gets, never "the ceiling". It is judged against the agent's own grant of
//!   the underlying built-in — the ceiling key of that name, which the manifest's `[tools]` must list as that
//!   built-in — never against a key named like the instance (a consent key, another tool's key).
//! - A provider-less entry adds rows to the manifest tool of its name and is judged against the key that tool's own
//!   grant comes from ([`requested_grant`]'s source). `tool = "…"` on it is refused unless it equals that tool's
//!   underlying name.

use crate::contrib::ceiling::{requested_grant, Ceiling, GrantSource};
use crate::contrib::keys::{contribution_for, group_skill, key_fits, key_for, KeyFor};
use crate::lattice::algebra::AlgebraKind;
use crate::lattice::grant::Grant;
use crate::lattice::path::PathCtx;
use crate::lattice::value::toml_key;
use crate::manifest::{Manifest, ProviderRef, ToolEntry, ToolGroup};

/// What would accept a rejected declaration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Remedy {
    /// A paste-ready line for the manifest's `[capabilities]`.
    Capabilities(String),
    /// A paste-ready line for the manifest's `[tools]`.
    Tools(String),
    /// A change to the declaration itself (in the skill or layer that contributes it).
    Declaration(String),
    /// A paste-ready line for the manifest's `[consent]`, and the `[capabilities]` line it needs when that key is
    /// missing too.
    Consent {
        /// The `[capabilities]` line, when the key is missing.
        capabilities: Option<String>,
        /// The `[consent]` line.
        consent: String,
    },
}

impl Remedy {
    /// The line or the change.
    pub fn text(&self) -> &str {
        match self {
            Remedy::Capabilities(t) | Remedy::Tools(t) | Remedy::Declaration(t) => t,
            Remedy::Consent { consent, .. } => consent,
        }
    }

    /// Where the remedy goes: `capabilities`, `tools` or `declaration`.
    pub fn place(&self) -> &'static str {
        match self {
            Remedy::Capabilities(_) => "capabilities",
            Remedy::Tools(_) => "tools",
            Remedy::Declaration(_) => "declaration",
            Remedy::Consent { .. } => "consent",
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
            Remedy::Consent {
                capabilities: Some(c),
                consent,
            } => write!(
                f,
                "put in [capabilities]:  {c}  and in [consent]:  {consent}"
            ),
            Remedy::Consent {
                capabilities: None,
                consent,
            } => write!(f, "put in [consent]:  {consent}"),
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
        .map(|(name, entry)| judge_decl(manifest, ceiling, ctx, &group.label, name, entry))
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
    group_label: &str,
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
        let skill = group_skill(group_label);
        let consent_line = format!(
            "{} = {{ skill = {}, sha256 = {} }}",
            toml_key(instance),
            crate::lattice::value::toml_string(skill),
            crate::lattice::value::toml_string(&shipped.digest)
        );
        let Some(consent) = named else {
            let ask = entry.capabilities.clone().unwrap_or_else(Grant::none);
            return mk(entry.capabilities.clone(), DeclVerdict::Rejected {
                judged_against: instance.to_string(),
                reason: format!(
                    "it ships its own implementation ({}), and loom runs contributed code only when [capabilities] \
                     names the instance `{instance}` and [consent] names the skill and what it ships",
                    shipped.label
                ),
                remediation: Remedy::Consent {
                    capabilities: Some(line(instance, &ask)),
                    consent: consent_line,
                },
            });
        };
        let want = contribution_for(group_label, instance, entry);
        let written = key_for(manifest, instance);
        if !want.as_ref().is_some_and(|w| key_fits(&written, w)) {
            let reason = match &written {
                KeyFor::Consent(_) => format!(
                    "the key `{instance}` is written for {written}, and this is the implementation skill {skill} \
                     ships ({}, sha256 {}); consent covers one skill's implementation, never another's or a changed one",
                    shipped.label,
                    &shipped.digest[..shipped.digest.len().min(12)]
                ),
                _ => format!(
                    "it ships its own implementation ({}), and the key `{instance}` is written for {written}, not \
                     for consent to it: [consent] must name the skill and what it ships",
                    shipped.label
                ),
            };
            return mk(
                entry.capabilities.clone(),
                DeclVerdict::Rejected {
                    judged_against: instance.to_string(),
                    reason,
                    remediation: Remedy::Consent {
                        capabilities: None,
                        consent: consent_line,
                    },
                },
            );
        }
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
        ProviderRef::Builtin => {
            match builtin_key(manifest, ceiling, instance, entry).and_then(|key| {
                instance_key_problem(manifest, ceiling, group_label, instance, entry).map(|()| key)
            }) {
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
            }
        }
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
            let key = if ceiling.grants.contains_key(instance)
                || !ceiling.grants.contains_key(underlying)
            {
                instance
            } else {
                underlying
            };
            if let Err((judged_against, reason, remediation)) =
                match ceiling.grants.contains_key(key) {
                    true => key_kind_problem(manifest, group_label, key, instance, entry),
                    false => Ok(()),
                }
            {
                return mk(
                    entry.capabilities.clone(),
                    DeclVerdict::Rejected {
                        judged_against,
                        reason,
                        remediation,
                    },
                );
            }
            key.to_string()
        }
    };
    let Some(request) = &entry.capabilities else {
        // a root handle's tool that requests nothing runs under the whole key it was judged against (root-trusted)
        let whole = matches!(
            entry.provider,
            ProviderRef::Handle(_) | ProviderRef::Harness(_)
        );
        return mk(
            None,
            DeclVerdict::Accepted {
                judged_against: whole.then_some(key),
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
    if !crate::contrib::contracts::BUILTIN_TOOLS.contains(&underlying) {
        return Err((
            underlying.to_string(),
            format!(
                "there is no built-in tool `{underlying}` (built-ins: {})",
                crate::contrib::contracts::BUILTIN_TOOLS.join(", ")
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

/// Why the ceiling key `key`, written for one kind of thing, cannot cover the declaration `instance = entry`.
fn key_kind_problem(
    manifest: &Manifest,
    group_label: &str,
    key: &str,
    instance: &str,
    entry: &ToolEntry,
) -> Result<(), Refusal> {
    let Some(want) = contribution_for(group_label, instance, entry) else {
        return Ok(());
    };
    let written = key_for(manifest, key);
    if key_fits(&written, &want) {
        return Ok(());
    }
    Err((
        key.to_string(),
        format!(
            "the ceiling key `{key}` is written for {written}, and `{instance}` is {want}; a key covers only what it \
             is written for"
        ),
        Remedy::Declaration(format!(
            "rename `{}` in the skill (a loom.toml sidecar can), so it takes no key written for something else",
            toml_key(instance)
        )),
    ))
}

/// A new built-in instance may not take a name whose ceiling key is written for something else (a consent key,
/// another built-in, a provider's tool): the name is that key's.
fn instance_key_problem(
    manifest: &Manifest,
    ceiling: &Ceiling,
    group_label: &str,
    instance: &str,
    entry: &ToolEntry,
) -> Result<(), Refusal> {
    if !ceiling.grants.contains_key(instance) || manifest.tools.contains_key(instance) {
        // no key of that name, or a [tools] name (binding refuses a taken name)
        return Ok(());
    }
    key_kind_problem(manifest, group_label, instance, instance, entry)
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

    /// The digest of the one shipped declaration `tools` holds (as the group `skill t`).
    fn digest(tools: &str, providers: Option<&str>) -> String {
        let g = parse_tool_group(
            "skill t",
            tools,
            providers,
            "skills/t/SKILL.md",
            &BTreeMap::new(),
            &BTreeSet::new(),
        )
        .unwrap();
        match &g.tools.values().next().unwrap().provider {
            ProviderRef::Shipped(s) => s.digest.clone(),
            other => panic!("{other:?}"),
        }
    }

    fn consent(skill: &str, digest: &str) -> String {
        format!("echo_note = {{ skill = \"{skill}\", sha256 = \"{digest}\" }}")
    }

    #[test]
    fn the_consent_rule_covers_every_way_of_shipping_an_implementation() {
        // each declaration fits the ceiling by grant, but ships code: it needs its instance named in [capabilities]
        // and [consent] naming the skill and what it ships
        let cases = [
            ("echo_note = { provider = { provider = \"mcp-server\", command = \"node\", args = [\"server.mjs\"] } }", None),
            ("echo_note = { provider = \"./bin\" }", None),
            ("echo_note = { provider = \"@scope/pkg\" }", None),
            ("echo_note = { provider = \"notes\" }", Some("notes = { provider = \"mcp-server\", command = \"node\" }")),
        ];
        let wide = "[capabilities]\nbash = \"*\"\nread_file = \"*\"\necho = \"*\"\n";
        for (tools, providers) in cases {
            let d = digest(tools, providers);
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
            assert_eq!(
                remediation,
                &Remedy::Consent {
                    capabilities: Some("echo_note = {}".into()),
                    consent: consent("t", &d)
                }
            );
            // K3b: a grant alone is no consent
            let granted = host("[capabilities]\necho_note = \"*\"\n");
            let j = judge(&granted, tools, providers);
            let DeclVerdict::Rejected {
                remediation,
                reason,
                ..
            } = &j.decls[0].verdict
            else {
                panic!("{tools}: a grant without [consent] accepted it")
            };
            assert!(reason.contains("the key `echo_note` is written for a root provider's tool named `echo_note`, not for consent to it"), "{reason}");
            assert_eq!(
                remediation,
                &Remedy::Consent {
                    capabilities: None,
                    consent: consent("t", &d)
                }
            );
            let consented = host(&format!(
                "[capabilities]\necho_note = \"*\"\n[consent]\n{}\n",
                consent("t", &d)
            ));
            assert!(
                judge(&consented, tools, providers).accepted,
                "{tools}: named in [capabilities] and [consent] = consent"
            );
            // another skill's consent, or a consent to another implementation, is no consent
            for (skill, digest) in [("echo-notes", d.as_str()), ("t", &"0".repeat(64))] {
                let other = host(&format!(
                    "[capabilities]\necho_note = \"*\"\n[consent]\n{}\n",
                    consent(skill, digest)
                ));
                let j = judge(&other, tools, providers);
                let DeclVerdict::Rejected { reason, .. } = &j.decls[0].verdict else {
                    panic!(
                        "{tools}: consent for {skill} {digest} accepted skill t's implementation"
                    )
                };
                assert!(reason.starts_with(&format!("the key `echo_note` is written for consent to the implementation skill {skill} ships (sha256 {})", &digest[..12])), "{reason}");
            }
        }
    }

    #[test]
    fn consent_is_judged_against_the_instance_entry_alone() {
        // the underlying-name fallback never widens acceptance
        let tools = "echo_note = { provider = \"./bin\", tool = \"bash\", capabilities = { commands = [\"ls\"] } }";
        let d = digest(tools, None);
        assert!(!judge(&host("[capabilities]\nbash = \"*\"\n"), tools, None).accepted);
        let j = judge(
            &host(&format!(
                "[capabilities]\necho_note = {{ commands = [\"cat\"] }}\n[consent]\n{}\n",
                consent("t", &d)
            )),
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

    #[test]
    fn a_root_handle_tool_takes_only_a_key_written_for_it() {
        let m = man(&format!("[providers]\nfs_mcp = {{ provider = \"mcp-server\", command = \"node\" }}\n[tools]\nread_file = \"builtin\"\nreader = {{ provider = \"fs_mcp\", tool = \"read_text_file\" }}\n[capabilities]\nread_file = {{ paths = [\"./\"] }}\nreader = {{ path = \"/docs/a.md\" }}\nlist_allowed_directories = {{ path = \"*\" }}\necho_note = \"*\"\n[consent]\necho_note = {{ skill = \"echo-notes\", sha256 = \"{}\" }}\n", "d".repeat(64)));
        let cases: Vec<(&str, Result<Option<&str>, &str>)> = vec![
            // an unrecorded key covers a root provider's tool of its own name
            ("list_allowed_directories = { provider = \"fs_mcp\" }", Ok(Some("list_allowed_directories"))),
            ("list_allowed_directories = { provider = \"fs_mcp\", tool = \"write_file\" }", Err("the ceiling key `list_allowed_directories` is written for a root provider's tool named `list_allowed_directories`, and `list_allowed_directories` is the tool `write_file` of [providers].fs_mcp")),
            // a consent key never covers a root handle's tool (K3)
            ("echo_note = { provider = \"fs_mcp\", tool = \"write_file\" }", Err("the ceiling key `echo_note` is written for consent to the implementation skill echo-notes ships (sha256 dddddddddddd), and `echo_note` is the tool `write_file` of [providers].fs_mcp")),
            // a built-in's key never covers a server tool
            ("x = { provider = \"fs_mcp\", tool = \"read_file\" }", Err("the ceiling key `read_file` is written for the built-in `read_file`, and `x` is the tool `read_file` of [providers].fs_mcp")),
            // no key at all: nothing is granted, whatever it names
            ("r2 = { provider = \"fs_mcp\", tool = \"read_text_file\", capabilities = { path = \"/docs/a.md\" } }", Err("it requests { path = \"/docs/a.md\" }, which the ceiling for `r2` (absent) does not cover")),
        ];
        for (tools, want) in cases {
            let got = one(&m, tools);
            match (want, got) {
                (Ok(w), Ok(g)) => assert_eq!(g.as_deref(), w, "{tools}"),
                (Err(w), Err((_, reason, _))) => {
                    assert!(reason.starts_with(w), "{tools}: {reason}")
                }
                (w, g) => panic!("{tools}: want {w:?}, got {g:?}"),
            }
        }
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
        let consent = man(&format!("[tools]\nread_file = \"builtin\"\nbash = \"builtin\"\n[capabilities]\nread_file = {{ paths = [\"./\"] }}\nbash = {{ commands = [\"ls\"], paths = [\"./\"] }}\necho_note = \"*\"\n[consent]\necho_note = {{ skill = \"echo-notes\", sha256 = \"{}\" }}\n", "d".repeat(64)));
        let written_for = |key: &str, written: &str, want: &str, instance: &str| {
            refused(
                key,
                &format!("the ceiling key `{key}` is written for {written}, and `{instance}` is {want}; a key covers only what it is written for"),
                Remedy::Declaration(format!("rename `{instance}` in the skill (a loom.toml sidecar can), so it takes no key written for something else")),
            )
        };
        let consent_key =
            "consent to the implementation skill echo-notes ships (sha256 dddddddddddd)";
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
            (&consent, "jq = { provider = \"builtin\", tool = \"bash\", capabilities = { commands = [\"curl\"] } }", refused("bash", "it requests { commands = [\"curl\"] }, which the ceiling for `bash` ({ commands = [\"ls\"], paths = [\"./\"] }) does not cover", Remedy::Capabilities("bash = [{ commands = [\"curl\"] }, { commands = [\"ls\"], paths = [\"./\"] }]".into()))),
            (&consent, "jq = { provider = \"builtin\", tool = \"bash\", capabilities = { commands = [\"ls\"] } }", Ok(Some("bash".into()))),
            // K3: the instance name's key is written for another kind of thing, so the name is not the skill's
            (&consent, "echo_note = { provider = \"builtin\", tool = \"bash\", capabilities = { commands = [\"ls\"] } }", written_for("echo_note", consent_key, "the built-in `bash`", "echo_note")),
            (&reader, "bash = { provider = \"builtin\", tool = \"read_file\", capabilities = { paths = [\"./\"] } }", written_for("bash", "the built-in `bash`", "the built-in `read_file`", "bash")),
            (&consent, "wr = { provider = \"builtin\", tool = \"read_file\", capabilities = \"*\" }", refused("read_file", "it requests \"*\", which the ceiling for `read_file` ({ paths = [\"./\"] }) does not cover", Remedy::Capabilities("read_file = \"*\"".into()))),
            (&misnamed, "run = { provider = \"builtin\", tool = \"bash\", capabilities = { commands = [\"ls\"] } }", unlisted("bash")),
            (&consent, "jq = { provider = \"builtin\", capabilities = { commands = [\"jq\"] } }", refused("jq", &format!("there is no built-in tool `jq` (built-ins: {})", crate::BUILTIN_TOOLS.join(", ")), Remedy::Declaration("name a built-in in `tool = \"…\"` of `jq`, or another provider".into()))),
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
