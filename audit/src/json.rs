//! The audit as JSON (`loom audit --json`). Stable and versioned: fields are only ever added within a version.

use serde_json::{json, Value as Json};

use loom_kernel::{DeclVerdict, GrantSource, ProviderRef, SubagentVerdict};

use crate::report::{Level, Report};
use crate::text::provider_label;

/// The JSON format version.
pub const JSON_VERSION: u32 = 1;

/// Renders the report as JSON.
pub fn render_json(r: &Report) -> Json {
    let m = &r.manifest;
    let grants: serde_json::Map<String, Json> = r
        .ceiling
        .grants
        .iter()
        .map(|(k, g)| (k.clone(), g.to_json()))
        .collect();
    let tools: Vec<Json> = r
        .tools
        .iter()
        .map(|t| {
            json!({
                "name": t.instance,
                "tool": t.underlying,
                "provider": provider_label(&t.provider),
                "grant": t.grant.to_json(),
                "grantSource": match t.source {
                    GrantSource::Inline => "inline",
                    GrantSource::CeilingInstance => "ceiling-instance",
                    GrantSource::CeilingUnderlying => "ceiling-underlying",
                    GrantSource::Nothing => "nothing",
                },
                "problems": t.problems,
                "mcp": r.mcp.get(&t.instance).map(|m| match m {
                    Ok(m) => json!({ "server": m.server, "description": m.description, "schema": m.schema }),
                    Err(e) => json!({ "error": e }),
                }),
                "secrets": tool_secrets(t, &m.agent.secrets),
            })
        })
        .collect();
    let groups: Vec<Json> = r
        .groups
        .iter()
        .map(|g| {
            json!({
                "label": g.label,
                "origin": g.origin,
                "status": if g.accepted { "active" } else { "inactive" },
                "declarations": g.decls.iter().map(|d| match &d.verdict {
                    DeclVerdict::Accepted { judged_against } => json!({
                        "name": d.instance, "verdict": "accepted",
                        "requested": d.requested.as_ref().map(|g| g.to_json()),
                        "judgedAgainst": judged_against,
                    }),
                    DeclVerdict::Rejected { judged_against, reason, remediation } => json!({
                        "name": d.instance, "verdict": "rejected",
                        "requested": d.requested.as_ref().map(|g| g.to_json()),
                        "judgedAgainst": judged_against, "reason": reason,
                        "remediation": remediation.text(), "remedyIn": remediation.place(),
                    }),
                }).collect::<Vec<_>>(),
                "shipped": r.shipped.iter().filter(|s| s.shipped.group == g.label).map(shipped_json).collect::<Vec<_>>(),
            })
        })
        .collect();
    let laws: Vec<Json> = r
        .laws
        .iter()
        .map(|l| match &l.result {
            Ok(rep) => json!({ "tools": l.tools, "algebra": rep.algebra, "ok": true, "seed": rep.seed, "trials": rep.trials }),
            Err(v) => json!({ "tools": l.tools, "algebra": v.algebra, "ok": false, "law": v.law.to_string(), "message": v.to_string() }),
        })
        .collect();
    json!({
        "version": JSON_VERSION,
        "manifest": r.file,
        "agent": { "name": m.agent.name, "description": m.agent.description, "secrets": m.agent.secrets },
        "storage": r.storage.display().to_string(),
        "cwd": r.ctx.base,
        "harness": m.harness.as_ref().map(|h| json!({ "provider": h.provider, "model": h.config.get("model").and_then(|v| v.as_str()) })),
        "harnesses": m.harnesses.iter().map(|(n, h)| (n.clone(), json!({ "provider": h.provider, "model": h.config.get("model").and_then(|v| v.as_str()) }))).collect::<serde_json::Map<String, serde_json::Value>>(),
        "supervisor": { "enabled": m.supervisor.enabled, "maxRounds": m.supervisor.max_rounds, "review": m.supervisor.review, "reviewBudget": m.supervisor.review_budget },
        "session": { "layers": m.session.layers.iter().map(|l| l.provider.clone()).collect::<Vec<_>>(), "defaulted": m.session.defaulted },
        "ceilingDefaulted": r.ceiling.defaulted,
        "grants": grants,
        "tools": tools,
        "toolGroups": groups,
        "skills": r.skills.as_ref().map(|s| json!({
            "bySource": s.by_source,
            "overridden": s.overrides.iter().map(|(name, source, dir)| json!({"name": name, "bySource": source, "by": dir})).collect::<Vec<_>>(),
        })),
        "subagents": r.subagents.iter().map(subagent_json).collect::<Vec<_>>(),
        "hooks": m.hooks.0.iter().map(|(event, h)| {
            let (kind, target) = match &h.action {
                loom_kernel::HookAction::Command(c) => ("command", c.as_str()),
                loom_kernel::HookAction::Url(u) => ("url", u.as_str()),
            };
            json!({ "event": event.name(), "matcher": h.matcher, kind: target, "timeoutSecs": h.timeout_secs })
        }).collect::<Vec<_>>(),
        "authorityFiles": r.authority.iter().map(|(f, e)| {
            let (state, tools) = match e {
                loom_kernel::Exposure::Unreached => ("unreached", Vec::new()),
                loom_kernel::Exposure::Protected(t) => ("protected", t.clone()),
                loom_kernel::Exposure::Exposed(t) => ("exposed", t.clone()),
            };
            json!({ "path": f.path, "kind": f.kind.name(), "origin": f.origin, "state": state, "tools": tools })
        }).collect::<Vec<_>>(),
        "laws": laws,
        "health": {
            "ok": r.healthy(),
            "errors": r.count(Level::Error),
            "warnings": r.count(Level::Warning),
            "rejectedToolGroups": r.rejected_groups(),
            "findings": r.findings.iter().map(|f| json!({ "level": f.level.name(), "subject": f.subject, "message": f.message })).collect::<Vec<_>>(),
        },
    })
}

/// The document `loom audit --json` prints for a manifest that cannot be loaded (not found, not TOML, a key it does
/// not know): the same `version`, `manifest` and `health` keys as a report, `health.ok` false and the reason as its one
/// error finding, so a consumer reading stdout never mistakes silence for a pass.
pub fn render_load_error_json(manifest: &str, message: &str) -> Json {
    json!({
        "version": JSON_VERSION,
        "manifest": manifest,
        "loadError": message,
        "health": {
            "ok": false,
            "errors": 1,
            "warnings": 0,
            "rejectedToolGroups": 0,
            "findings": [{ "level": "error", "subject": "manifest", "message": message }],
        },
    })
}

/// A provider a contributed group ships: its key and lock state as `loom audit --json` lists `providers`, the group
/// that ships it, and each of its tools as `tools[].mcp` shows one.
pub fn shipped_json(s: &loom_kernel::ShippedState) -> Json {
    json!({
        "handle": s.shipped.key,
        "group": s.shipped.group,
        "label": s.shipped.label,
        "source": s.shipped.source.describe(),
        "state": s.state.label(),
        "problem": s.state.problem(),
        "resolved": s.resolved,
        "sha256": s.sha256,
        "tools": s.tools.iter().map(|(name, m)| (name.clone(), match m {
            Ok(m) => json!({ "server": m.server, "description": m.description, "schema": m.schema }),
            Err(e) => json!({ "error": e }),
        })).collect::<serde_json::Map<String, Json>>(),
    })
}

fn subagent_json(s: &SubagentVerdict) -> Json {
    json!({
        "key": s.key,
        "name": s.name,
        "source": s.source,
        "contained": s.excess.is_empty() && s.error.is_none(),
        "error": s.error,
        "excess": s.excess.iter().map(|x| json!({ "key": x.key, "parent": x.parent.as_ref().map(|g| g.to_json()), "child": x.child.to_json(), "why": x.why })).collect::<Vec<_>>(),
        "subagents": s.children.iter().map(subagent_json).collect::<Vec<_>>(),
    })
}

/// The secrets a tool is handed: a bash tool's environment gets those its grant names (see
/// `loom_kernel::grant_secrets`); the builtin `web_search` sends its key in a request header.
fn tool_secrets(t: &loom_kernel::ToolGrant, shared: &[String]) -> Vec<String> {
    match (t.algebra, t.underlying.as_str(), &t.provider) {
        (loom_kernel::AlgebraKind::Bash, _, _) => loom_kernel::grant_secrets(&t.grant, shared),
        (_, "web_search", ProviderRef::Builtin) => vec!["BRAVE_SEARCH_API_KEY".to_string()],
        _ => Vec::new(),
    }
}
