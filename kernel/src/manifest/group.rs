//! Contributed tool groups: a skill's `loom.tools` / `loom.providers`, a `loom.toml` sidecar, a session's tools().

use std::collections::{BTreeMap, BTreeSet};

use super::error::{Ctx, ManifestError};
use super::parse::RESERVED_HANDLES;
use super::providers::{parse_providers, ProviderSpec};
use super::subst::substitute_table_closed;
use super::suggest::check_keys;
use super::text::parse_toml;
use super::tools::{parse_tools, ProviderRef, Resolver, ToolEntry};
use super::typed::want_table;

/// A labeled group of contributed tool declarations, parsed by the same grammar as a manifest's `[tools]`.
///
/// Specification: group-local provider handles are lexically scoped to the group and substituted into its entries
/// (they become [`ProviderRef::Shipped`](super::ProviderRef::Shipped) labeled with the handle); names of the root
/// manifest's `[providers]` become [`ProviderRef::Handle`](super::ProviderRef::Handle); a provider-less entry is
/// [`ProviderRef::Host`](super::ProviderRef::Host). `"builtin"` and `"session"` cannot be defined as handles.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolGroup {
    /// Who contributes it (`skill calendar`, `skills session`).
    pub label: String,
    /// Where it was read from, for errors and audit (a SKILL.md or loom.toml path).
    pub origin: String,
    /// The declared tool instances.
    pub tools: BTreeMap<String, ToolEntry>,
    /// The group-local providers, by handle.
    pub providers: BTreeMap<String, ProviderSpec>,
}

/// Parses a contributed group from a `[tools]` table body and an optional `[providers]` table body. Errors name
/// `origin` as the file and `tools.<name>` / `providers.<handle>` as key paths.
///
/// `vars` are the only `${NAME}`s the group may use (a skill's `SKILL_DIR`): a contributed group never reads the
/// environment, so any other reference is an error naming the variable, even one with a default.
pub fn parse_tool_group(
    label: &str,
    tools_toml: &str,
    providers_toml: Option<&str>,
    origin: &str,
    env: &BTreeMap<String, String>,
    root_provider_handles: &BTreeSet<String>,
) -> Result<ToolGroup, ManifestError> {
    let ctx = Ctx::new(origin);
    let tools = parse_toml(ctx, tools_toml)?;
    let providers = providers_toml.map(|p| parse_toml(ctx, p)).transpose()?;
    group_from_tables(ctx, label, tools, providers, env, root_provider_handles)
}

/// Parses a `loom.toml` sidecar: a document with a `[tools]` table and an optional `[providers]` table, nothing else.
/// `vars` as for [`parse_tool_group`].
pub fn parse_sidecar_group(
    label: &str,
    text: &str,
    origin: &str,
    env: &BTreeMap<String, String>,
    root_provider_handles: &BTreeSet<String>,
) -> Result<ToolGroup, ManifestError> {
    let ctx = Ctx::new(origin);
    let doc = parse_toml(ctx, text)?;
    check_keys(ctx, "", &doc, &["tools", "providers"])?;
    let tools = match doc.get("tools") {
        Some(v) => want_table(ctx, "tools", v)?.clone(),
        None => toml::Table::new(),
    };
    let providers = doc
        .get("providers")
        .map(|v| want_table(ctx, "providers", v).cloned())
        .transpose()?;
    group_from_tables(ctx, label, tools, providers, env, root_provider_handles)
}

fn group_from_tables(
    ctx: Ctx<'_>,
    label: &str,
    mut tools: toml::Table,
    providers: Option<toml::Table>,
    env: &BTreeMap<String, String>,
    root_provider_handles: &BTreeSet<String>,
) -> Result<ToolGroup, ManifestError> {
    for section in ["tools", "providers"] {
        if let Some(toml::Value::Table(inner)) = tools.get(section) {
            if inner
                .keys()
                .any(|k| !["provider", "tool", "capabilities"].contains(&k.as_str()))
            {
                return Err(ctx
                    .err(
                        &format!("tools.{section}"),
                        format!("looks like a whole [{section}] table; a tool group's tools text is the body of [tools]"),
                    )
                    .with_hint(format!("drop the [{section}] header (put providers in loom.providers)")));
            }
        }
    }
    // the same tables with every variable left as written: what a shipped implementation's digest is taken over, so
    // a consent pins the spec and not where the skill happens to live
    let portable_env: BTreeMap<String, String> = env
        .keys()
        .map(|k| (k.clone(), format!("${{{k}}}")))
        .collect();
    let (mut portable_tools, mut portable_providers) = (tools.clone(), providers.clone());
    let _ = substitute_table_closed(ctx, &mut portable_tools, "tools", &portable_env);
    if let Some(p) = &mut portable_providers {
        let _ = substitute_table_closed(ctx, p, "providers", &portable_env);
    }
    let mut baked = substitute_table_closed(ctx, &mut tools, "tools", env)?;
    let mut providers = providers;
    if let Some(p) = &mut providers {
        baked.extend(substitute_table_closed(ctx, p, "providers", env)?);
    }
    let parsed = || -> Result<_, ManifestError> {
        let providers = match providers {
            Some(p) => parse_providers(ctx, "providers", &toml::Value::Table(p), RESERVED_HANDLES)?,
            None => BTreeMap::new(),
        };
        let resolver = Resolver {
            root_handles: root_provider_handles,
            local: Some(&providers),
        };
        let tools = parse_tools(ctx, "tools", &toml::Value::Table(tools), &resolver)?;
        Ok((tools, providers))
    };
    let (mut tools, providers) = parsed().map_err(|e| baked.redact(e))?;
    let portable = || -> Result<_, ManifestError> {
        let providers = match portable_providers {
            Some(p) => parse_providers(ctx, "providers", &toml::Value::Table(p), RESERVED_HANDLES)?,
            None => BTreeMap::new(),
        };
        let resolver = Resolver {
            root_handles: root_provider_handles,
            local: Some(&providers),
        };
        parse_tools(ctx, "tools", &toml::Value::Table(portable_tools), &resolver)
    };
    // the tables parsed once with the values: a failure here (never expected) keeps the expanded digest
    let portable = portable().unwrap_or_default();
    for (name, entry) in tools.iter_mut() {
        if let (ProviderRef::Shipped(s), Some(ProviderRef::Shipped(p))) =
            (&mut entry.provider, portable.get(name).map(|e| &e.provider))
        {
            s.digest = p.digest.clone();
        }
    }
    Ok(ToolGroup {
        label: label.to_string(),
        origin: ctx.file.to_string(),
        tools,
        providers,
    })
}
