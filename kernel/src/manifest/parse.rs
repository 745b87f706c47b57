//! The whole manifest: closed top-level sections, defaults, and the entry points from text and from a table.

use std::collections::{BTreeMap, BTreeSet};

use super::agent::{parse_agent, AgentSpec, AGENT_KEYS};
use super::consent::parse_consent;
use super::error::{index, join, Ctx, ManifestError};
use super::harness::{check_example_tools, parse_harness, HarnessSpec};
use super::hooks::parse_hooks;
use super::permissions::parse_permissions;
use super::providers::{parse_providers, ProviderSpec};
use super::sandbox::{parse_sandbox, SandboxSection};
use super::session::{parse_session, SessionSpec};
use super::subst::substitute_table;
use super::suggest::unknown_key_message;
use super::supervise::{named_harness, parse_harnesses, parse_supervisor, SupervisorSpec};
use super::text::parse_toml;
use super::tools::{default_tools, parse_grant, parse_tools, ProviderRef, Resolver, ToolEntry};
use super::typed::{want_table, wrong_type};
use crate::contrib::keys::Consent;
use crate::policy::hooks::Hooks;
use crate::policy::rules::Permissions;
use crate::Grant;

/// The top-level sections of a manifest.
const SECTIONS: &[&str] = &[
    "agent",
    "harness",
    "session",
    "providers",
    "tools",
    "capabilities",
    "permissions",
    "hooks",
    "sandbox",
    "consent",
    "harnesses",
    "supervisor",
];

/// Provider handle names nobody may define: they already mean something.
pub(crate) const RESERVED_HANDLES: &[&str] = &["builtin", "session"];

/// A parsed, closed `agent.toml`.
///
/// Specification: every key is known (unknown keys are errors naming the key path and the nearest valid key); string
/// values have had `${VAR}` / `${VAR:-default}` substituted from the caller's env map; defaults are explicit
/// (`tools_defaulted`, `session.defaulted`, `capabilities: None`) so audit can say what was implied.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    /// `[agent]`.
    pub agent: AgentSpec,
    /// `[harness]`, when present (a sub-agent may inherit its parent's).
    pub harness: Option<HarnessSpec>,
    /// `[harnesses.NAME]`: named harnesses the supervisor's review and compaction can use.
    pub harnesses: BTreeMap<String, HarnessSpec>,
    /// `[supervisor]`.
    pub supervisor: SupervisorSpec,
    /// `[session]`, or the default chain.
    pub session: SessionSpec,
    /// `[providers]`: handle -> spec.
    pub providers: BTreeMap<String, ProviderSpec>,
    /// `[tools]`: instance name -> entry, or the four defaults.
    pub tools: BTreeMap<String, ToolEntry>,
    /// True when `[tools]` was absent and the defaults (read_file, write_file, edit_file, bash) applied.
    pub tools_defaulted: bool,
    /// `[capabilities]`: `None` when the section is absent (the caller applies the default ceiling); `Some(empty)`
    /// for an explicit empty table (nothing pre-authorized).
    pub capabilities: Option<BTreeMap<String, Grant>>,
    /// `[permissions]`.
    pub permissions: Permissions,
    /// `[hooks]`: lifecycle hooks by event.
    pub hooks: Hooks,
    /// `[sandbox]`: the sandbox gaps accepted by name.
    pub sandbox: SandboxSection,
    /// Sub-manifests carried by `manifest` kinds in `[capabilities]` or in root `[tools]` inline capabilities.
    pub subagents: Vec<SubagentRef>,
    /// `[consent]`: the shipped implementation each consent key is written for (see [`crate::key_for`]).
    pub consent: BTreeMap<String, Consent>,
}

/// Parses `agent.toml` text. `file` names it in errors; `env` is the only source of `${VAR}` values.
///
/// ```
/// use std::collections::BTreeMap;
/// use loom_kernel::{parse_manifest, ProviderRef};
///
/// let env = BTreeMap::from([("MODEL".to_string(), "claude-haiku-4-5".to_string())]);
/// let m = parse_manifest(r#"
///     [agent]
///     name = "demo"
///     [harness]
///     provider = "anthropic"
///     model = "${MODEL}"
///     [tools]
///     bash = { capabilities = { commands = ["gcalcli"], network = "*" } }
/// "#, "agent.toml", &env).unwrap();
/// assert_eq!(m.harness.unwrap().config["model"].as_str(), Some("claude-haiku-4-5"));
/// assert_eq!(m.tools["bash"].provider, ProviderRef::Builtin);
/// assert!(m.session.defaulted && m.capabilities.is_none());
///
/// let err = parse_manifest("[agent]\nname = \"a\"\nsytem_prompt = \"x\"\n", "agent.toml", &env).unwrap_err();
/// assert_eq!(err.to_string(), "agent.toml: agent.sytem_prompt: unknown key; did you mean system_prompt?");
/// ```
pub fn parse_manifest(
    text: &str,
    file: &str,
    env: &BTreeMap<String, String>,
) -> Result<Manifest, ManifestError> {
    let ctx = Ctx::new(file);
    let mut table = parse_toml(ctx, text)?;
    let baked = substitute_table(ctx, &mut table, "", env)?;
    build_manifest(ctx, &table, "", false).map_err(|e| baked.redact(e))
}

/// Builds a manifest from an already-parsed table: an inline sub-manifest or an SDK manifest. Errors name keys under
/// `key_prefix` (e.g. `capabilities.spawn_subagent.manifest`). Agent fields may be written at the top level of the
/// table (`name = "researcher"`) or in an `[agent]` table, not both.
pub fn manifest_from_table(
    table: &toml::Table,
    file: &str,
    key_prefix: &str,
    env: &BTreeMap<String, String>,
) -> Result<Manifest, ManifestError> {
    let ctx = Ctx::new(file);
    let mut table = table.clone();
    let baked = substitute_table(ctx, &mut table, key_prefix, env)?;
    build_manifest(ctx, &table, key_prefix, true).map_err(|e| baked.redact(e))
}

/// Builds a manifest from a substituted table at `prefix`. `flattened` admits agent fields at the top level.
pub(crate) fn build_manifest(
    ctx: Ctx<'_>,
    table: &toml::Table,
    prefix: &str,
    flattened: bool,
) -> Result<Manifest, ManifestError> {
    check_sections(ctx, table, prefix, flattened)?;

    let agent = agent_section(ctx, table, prefix, flattened)?;
    let harness = table
        .get("harness")
        .map(|v| {
            let p = join(prefix, "harness");
            parse_harness(ctx, &p, want_table(ctx, &p, v)?)
        })
        .transpose()?;
    let harnesses = match table.get("harnesses") {
        Some(v) => parse_harnesses(ctx, &join(prefix, "harnesses"), v)?,
        None => BTreeMap::new(),
    };
    let supervisor = match table.get("supervisor") {
        Some(v) => parse_supervisor(ctx, &join(prefix, "supervisor"), v, &harnesses)?,
        None => SupervisorSpec::default(),
    };
    let session = match table.get("session") {
        Some(v) => {
            let p = join(prefix, "session");
            parse_session(ctx, &p, want_table(ctx, &p, v)?)?
        }
        None => SessionSpec::default_chain(),
    };
    // a compacting layer's summarizer: the heuristic, the agent's own model, or a named harness
    for l in &session.layers {
        if let Some(v) = l.config.get("summarizer") {
            let p = join(&join(&join(prefix, "session"), &l.provider), "summarizer");
            let name = v.as_str().unwrap_or_default();
            if !matches!(name, "heuristic" | "model") {
                named_harness(ctx, &p, name, &harnesses).map_err(|e| {
                    e.with_hint("summarizer = \"heuristic\" (the default), \"model\" (the agent's own), or a [harnesses] name")
                })?;
            }
        }
    }
    let providers = match table.get("providers") {
        Some(v) => parse_providers(ctx, &join(prefix, "providers"), v, RESERVED_HANDLES)?,
        None => BTreeMap::new(),
    };
    let handles: BTreeSet<String> = providers.keys().cloned().collect();
    let resolver = Resolver {
        root_handles: &handles,
        local: None,
    };

    let mut subagents = Vec::new();
    let capabilities = match table.get("capabilities") {
        Some(v) => {
            let p = join(prefix, "capabilities");
            let mut out = BTreeMap::new();
            for (key, grant) in want_table(ctx, &p, v)? {
                let gp = join(&p, key);
                collect(ctx, key, &gp, grant, &mut subagents)?;
                out.insert(key.clone(), parse_grant(ctx, &gp, grant)?);
            }
            Some(out)
        }
        None => None,
    };
    let (tools, tools_defaulted) = match table.get("tools") {
        Some(v) => {
            let p = join(prefix, "tools");
            let tools = parse_tools(ctx, &p, v, &resolver)?;
            if let Some(t) = v.as_table() {
                for (name, entry) in t {
                    if let Some(grant) = entry.as_table().and_then(|e| e.get("capabilities")) {
                        let gp = join(&join(&p, name), "capabilities");
                        collect(ctx, name, &gp, grant, &mut subagents)?;
                    }
                }
            }
            (tools, false)
        }
        None => (default_tools(), true),
    };
    let permissions = match table.get("permissions") {
        Some(v) => parse_permissions(ctx, &join(prefix, "permissions"), v)?,
        None => Permissions::default(),
    };
    check_host_rules(ctx, &join(prefix, "permissions"), &permissions, &tools)?;
    if let Some(h) = &harness {
        check_example_tools(ctx, &join(prefix, "harness"), h, &tools)?;
    }
    let hooks = match table.get("hooks") {
        Some(v) => parse_hooks(ctx, &join(prefix, "hooks"), v)?,
        None => Hooks::default(),
    };
    let sandbox = match table.get("sandbox") {
        Some(v) => parse_sandbox(ctx, &join(prefix, "sandbox"), v)?,
        None => SandboxSection::default(),
    };
    let consent = match table.get("consent") {
        Some(v) => parse_consent(
            ctx,
            &join(prefix, "consent"),
            v,
            capabilities.as_ref(),
            &tools,
        )?,
        None => BTreeMap::new(),
    };
    Ok(Manifest {
        harnesses,
        supervisor,
        sandbox,
        agent,
        harness,
        session,
        providers,
        tools,
        tools_defaulted,
        capabilities,
        permissions,
        hooks,
        subagents,
        consent,
    })
}

fn check_sections(
    ctx: Ctx<'_>,
    table: &toml::Table,
    prefix: &str,
    flattened: bool,
) -> Result<(), ManifestError> {
    let mut valid: Vec<&str> = SECTIONS.to_vec();
    if flattened {
        valid.extend(AGENT_KEYS);
    }
    for key in table.keys() {
        let p = join(prefix, key);
        if !valid.contains(&key.as_str()) {
            let mut err = ctx.err(&p, unknown_key_message(key, &valid));
            if !flattened && AGENT_KEYS.contains(&key.as_str()) {
                err = err.with_hint(format!("{key} belongs in [agent]"));
            }
            return Err(err);
        }
    }
    Ok(())
}

fn agent_section(
    ctx: Ctx<'_>,
    table: &toml::Table,
    prefix: &str,
    flattened: bool,
) -> Result<AgentSpec, ManifestError> {
    let flat: toml::Table = if flattened {
        table
            .iter()
            .filter(|(k, _)| AGENT_KEYS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    } else {
        toml::Table::new()
    };
    match (table.get("agent"), flat.is_empty()) {
        (Some(_), false) => Err(ctx
            .err(
                &join(prefix, "agent"),
                "agent fields are written both at the top level and in [agent]",
            )
            .with_hint("write them in one place")),
        (Some(v), true) => {
            let p = join(prefix, "agent");
            parse_agent(ctx, &p, want_table(ctx, &p, v)?)
        }
        (None, false) => parse_agent(ctx, prefix, &flat),
        (None, true) if flattened => Err(ctx
            .err(&join(prefix, "name"), "missing; every agent needs a name")
            .with_hint("name = \"researcher\"")),
        (None, true) => Err(ctx
            .err(
                &join(prefix, "agent"),
                "missing; every manifest declares [agent]",
            )
            .with_hint("add an [agent] table with name = \"my-agent\"")),
    }
}

/// A `host` rule matches only calls that report the host they reach, and only the built-in `web_search` does (bash,
/// MCP and `web_fetch` calls carry no host), so a host rule on any other tool, or on every tool, would never match:
/// refused, naming the rule, rather than parsed and silently inert.
fn check_host_rules(
    ctx: Ctx<'_>,
    path: &str,
    perms: &Permissions,
    tools: &BTreeMap<String, ToolEntry>,
) -> Result<(), ManifestError> {
    for (kind, list) in [
        ("allow_rules", &perms.allow),
        ("ask_rules", &perms.ask),
        ("deny_rules", &perms.deny),
    ] {
        for (i, rule) in list.iter().enumerate() {
            if rule.host.is_none() {
                continue;
            }
            let reports_host = rule.tool.as_deref().is_some_and(|t| {
                let underlying = tools
                    .get(t)
                    .filter(|e| e.provider == ProviderRef::Builtin)
                    .map(|e| e.tool.as_deref().unwrap_or(t));
                underlying == Some("web_search") || (t == "web_search" && !tools.contains_key(t))
            });
            if !reports_host {
                return Err(ctx
                    .err(
                        &join(&index(&join(path, kind), i), "host"),
                        "only the built-in web_search reports the host a call reaches, so this host rule would \
                         never match",
                    )
                    .with_hint(
                        "set tool = \"web_search\" (or its renamed instance); bash, MCP and web_fetch calls are \
                         limited by their grants' network rows, not by host rules",
                    ));
            }
        }
    }
    Ok(())
}

// ---- sub-agent manifests found in grants: the `manifest` kind of `spawn_subagent`-like tools (parsed here, with
// the manifest itself, because an inline sub-manifest is a manifest)

/// A sub-agent the manifest delegates to.
#[derive(Debug, Clone, PartialEq)]
pub struct SubagentRef {
    /// The `[capabilities]` key, or the `[tools]` instance, whose grant carries the sub-manifest.
    pub key: String,
    /// The sub-manifest.
    pub source: SubagentSource,
}

/// Where a sub-manifest is.
#[derive(Debug, Clone, PartialEq)]
pub enum SubagentSource {
    /// Written inline as a table, parsed here.
    Inline(Box<Manifest>),
    /// A path, relative to the manifest's directory, that the caller loads.
    Path(String),
}

/// Collects the sub-manifests of one grant written at `path` for `key`. The grant has already been substituted.
pub(crate) fn collect(
    ctx: Ctx<'_>,
    key: &str,
    path: &str,
    grant: &toml::Value,
    out: &mut Vec<SubagentRef>,
) -> Result<(), ManifestError> {
    match grant {
        toml::Value::Table(row) => row_manifest(ctx, key, path, row, out),
        toml::Value::Array(rows) => {
            for (i, row) in rows.iter().enumerate() {
                if let toml::Value::Table(row) = row {
                    row_manifest(ctx, key, &index(path, i), row, out)?;
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn row_manifest(
    ctx: Ctx<'_>,
    key: &str,
    path: &str,
    row: &toml::Table,
    out: &mut Vec<SubagentRef>,
) -> Result<(), ManifestError> {
    let Some(v) = row.get("manifest") else {
        return Ok(());
    };
    let p = join(path, "manifest");
    let source = match v {
        toml::Value::Table(t) => SubagentSource::Inline(Box::new(build_manifest(ctx, t, &p, true)?)),
        toml::Value::String(s) if !s.trim().is_empty() => SubagentSource::Path(s.clone()),
        other => {
            return Err(wrong_type(ctx, &p, "an inline sub-manifest table or a path", other)
                .with_hint("manifest = { name = \"researcher\", tools = { read_file = \"builtin\" } }, or manifest = \"./researcher.toml\""))
        }
    };
    out.push(SubagentRef {
        key: key.to_string(),
        source,
    });
    Ok(())
}
