//! `[tools]` entries: select an implementation, name the instance, authorize it.

use std::collections::{BTreeMap, BTreeSet};

use super::error::{join, Ctx, ManifestError};
use super::providers::{parse_provider_spec, ProviderSpec, Source};
use super::suggest::nearest;
use super::typed::{want_name, want_table, wrong_type};
use crate::Grant;

/// The keys a tool entry takes: nothing else, ever.
const ENTRY_KEYS: &[&str] = &["provider", "tool", "capabilities"];

/// Harnesses that expose server tools (`web_search = "anthropic"`).
const TOOL_HARNESSES: &[&str] = &["anthropic", "openai"];

/// The tools an agent gets when `[tools]` is absent.
pub const DEFAULT_TOOLS: &[&str] = &["read_file", "write_file", "edit_file", "bash"];

/// One tool instance: which implementation, under which underlying name, with which requested grant.
///
/// Specification: an entry has exactly the keys `provider`, `tool`, `capabilities`; it never configures (construction
/// config lives on `[providers]`, `[session.X]` or `[harness]`). `capabilities: None` requests the ceiling entry for
/// the instance; `Some` is the request itself (self-authorizing in the root manifest, judged in contributed groups).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolEntry {
    /// The implementation.
    pub provider: ProviderRef,
    /// The underlying tool name when the instance key is a rename.
    pub tool: Option<String>,
    /// The requested grant, when written.
    pub capabilities: Option<Grant>,
}

/// Where a tool instance's implementation comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderRef {
    /// `"builtin"`: a native tool. Also what a provider-less entry means in the root manifest.
    Builtin,
    /// `"session"`: implemented by the session chain.
    Session,
    /// A harness-exposed server tool (`web_search = "anthropic"`).
    Harness(String),
    /// A handle into the root manifest's `[providers]`: root-trusted.
    Handle(String),
    /// An implementation the entry ships itself: an inline provider table, a source string (`"./bin"`,
    /// `"@scope/pkg"`, `"git+https://…"`), or a group-local handle substituted with its spec.
    Shipped(Shipped),
    /// A provider-less entry in a contributed group: it contributes grant rows to the tool instance the host already
    /// has under this name, and ships nothing.
    Host,
}

/// An implementation shipped by the entry that names it.
#[derive(Debug, Clone, PartialEq)]
pub struct Shipped {
    /// How the entry named it: the group-local handle, the source string, or a description of the inline table.
    pub label: String,
    /// The spec to materialise.
    pub spec: ProviderSpec,
    /// [`shipped_digest`](crate::shipped_digest) of the spec as written (in a contributed group, `${SKILL_DIR}`
    /// unexpanded) and the tool the entry names on it: what a `[consent]` entry pins.
    pub digest: String,
}

impl ProviderRef {
    /// True when materialising the provider loads code or spawns a process that the root manifest did not itself
    /// declare: the consent rule requires the instance to be named in `[capabilities]`.
    pub fn ships_implementation(&self) -> bool {
        matches!(self, ProviderRef::Shipped(_))
    }
}

/// How provider names resolve for one `[tools]` table.
pub(crate) struct Resolver<'a> {
    /// Handles defined in the root manifest's `[providers]`.
    pub(crate) root_handles: &'a BTreeSet<String>,
    /// Group-local handles; `Some` for a contributed group, `None` for the root manifest.
    pub(crate) local: Option<&'a BTreeMap<String, ProviderSpec>>,
}

impl Resolver<'_> {
    fn resolve_str(&self, ctx: Ctx<'_>, path: &str, s: &str) -> Result<ProviderRef, ManifestError> {
        match s {
            "builtin" => return Ok(ProviderRef::Builtin),
            "session" => return Ok(ProviderRef::Session),
            "*" => {
                return Err(ctx.err(path, "\"*\" is a grant, not a provider").with_hint(
                    "grants go in capabilities: { capabilities = \"*\" }, or in [capabilities]",
                ))
            }
            _ => {}
        }
        if let Some(spec) = self.local.and_then(|l| l.get(s)) {
            return Ok(ProviderRef::Shipped(Shipped {
                label: s.to_string(),
                spec: spec.clone(),
                digest: String::new(),
            }));
        }
        if self.root_handles.contains(s) {
            return Ok(ProviderRef::Handle(s.to_string()));
        }
        if TOOL_HARNESSES.contains(&s) {
            return Ok(ProviderRef::Harness(s.to_string()));
        }
        if let Some(source) = Source::from_spec_str(s) {
            return Ok(ProviderRef::Shipped(Shipped {
                label: s.to_string(),
                spec: ProviderSpec::Source(source),
                digest: String::new(),
            }));
        }
        let mut known: Vec<&str> = vec!["builtin", "session"];
        known.extend(self.root_handles.iter().map(String::as_str));
        if let Some(local) = self.local {
            known.extend(local.keys().map(String::as_str));
        }
        known.extend(TOOL_HARNESSES);
        let mut err = ctx.err(
            path,
            format!(
                "provider {s:?} is a bare handle: no [providers].{} is defined",
                crate::lattice::value::toml_key(s)
            ),
        );
        err = match nearest(s, &known) {
            Some(near) => err.with_hint(format!(
                "did you mean {near:?}? otherwise define [providers].{} or write a path like \"./{s}\"",
                crate::lattice::value::toml_key(s)
            )),
            None => err.with_hint(format!(
                "define [providers].{} = {{ path = \"…\" }} (or npm / git), or write a path like \"./{s}\"",
                crate::lattice::value::toml_key(s)
            )),
        };
        Err(err)
    }

    fn resolve(
        &self,
        ctx: Ctx<'_>,
        path: &str,
        v: &toml::Value,
    ) -> Result<ProviderRef, ManifestError> {
        match v {
            toml::Value::String(s) => self.resolve_str(ctx, path, s),
            toml::Value::Table(_) => {
                let spec = parse_provider_spec(ctx, path, v)?;
                Ok(ProviderRef::Shipped(Shipped {
                    label: spec.describe(),
                    spec,
                    digest: String::new(),
                }))
            }
            other => Err(wrong_type(
                ctx,
                path,
                "a provider name, a source string, or an inline provider table",
                other,
            )),
        }
    }
}

/// Parses one `[tools.<name>]` entry found at `path`.
pub(crate) fn parse_entry(
    ctx: Ctx<'_>,
    path: &str,
    name: &str,
    v: &toml::Value,
    resolver: &Resolver<'_>,
) -> Result<ToolEntry, ManifestError> {
    let table = match v {
        toml::Value::String(_) => {
            return Ok(ToolEntry {
                provider: resolver.resolve(ctx, path, v)?,
                tool: None,
                capabilities: None,
            })
        }
        toml::Value::Table(t) => t,
        other => {
            return Err(wrong_type(
                ctx,
                path,
                "a provider name or a { provider, tool, capabilities } table",
                other,
            ))
        }
    };
    let never = format!(
        "a [tools.{}] entry never configures: put construction config on its [providers] entry",
        crate::lattice::value::toml_key(name)
    );
    for key in table.keys() {
        if !ENTRY_KEYS.contains(&key.as_str()) {
            let p = join(path, key);
            if crate::contrib::contracts::is_builtin_grant_kind(key) {
                // a grant written inline, as in `read_file = { paths = ["./"] }`: the fix is `capabilities`, not
                // [providers]
                let name = crate::lattice::value::toml_key(name);
                let key = crate::lattice::value::toml_key(key);
                return Err(ctx
                    .err(
                        &p,
                        format!(
                            "unknown key; `{key}` is a grant kind, and a [tools] entry grants through its \
                             `capabilities` key"
                        ),
                    )
                    .with_hint(format!(
                        "{name} = {{ provider = \"builtin\", capabilities = {{ {key} = … }} }}, or \
                         {name} = {{ {key} = … }} in [capabilities]"
                    )));
            }
            return Err(match nearest(key, ENTRY_KEYS) {
                Some(near) => ctx
                    .err(&p, format!("unknown key; did you mean {near}?"))
                    .with_hint(format!(
                        "an entry has exactly provider, tool and capabilities; {never}"
                    )),
                None => ctx
                    .err(&p, format!("unknown key; {never}"))
                    .with_hint("an entry has exactly the keys provider, tool and capabilities"),
            });
        }
    }
    let mut provider = match table.get("provider") {
        Some(p) => resolver.resolve(ctx, &join(path, "provider"), p)?,
        None if resolver.local.is_some() => ProviderRef::Host,
        None => ProviderRef::Builtin,
    };
    let tool = table
        .get("tool")
        .map(|t| want_name(ctx, &join(path, "tool"), t).map(str::to_string))
        .transpose()?;
    if let ProviderRef::Shipped(s) = &mut provider {
        s.digest = crate::contrib::keys::shipped_digest(&s.spec, tool.as_deref().unwrap_or(name));
    }
    let capabilities = table
        .get("capabilities")
        .map(|g| parse_grant(ctx, &join(path, "capabilities"), g))
        .transpose()?;
    Ok(ToolEntry {
        provider,
        tool,
        capabilities,
    })
}

/// Parses a grant, reporting grant errors at `path`.
pub(crate) fn parse_grant(
    ctx: Ctx<'_>,
    path: &str,
    v: &toml::Value,
) -> Result<Grant, ManifestError> {
    Grant::from_toml(v).map_err(|e| ctx.err(path, e.to_string()))
}

/// Parses a whole `[tools]` table found at `path`.
pub(crate) fn parse_tools(
    ctx: Ctx<'_>,
    path: &str,
    v: &toml::Value,
    resolver: &Resolver<'_>,
) -> Result<BTreeMap<String, ToolEntry>, ManifestError> {
    let table = want_table(ctx, path, v)?;
    let mut out = BTreeMap::new();
    for (name, entry) in table {
        out.insert(
            name.clone(),
            parse_entry(ctx, &join(path, name), name, entry, resolver)?,
        );
    }
    Ok(out)
}

/// The default `[tools]`: the four file-system and shell builtins, requesting their ceiling entries.
pub(crate) fn default_tools() -> BTreeMap<String, ToolEntry> {
    DEFAULT_TOOLS
        .iter()
        .map(|name| {
            (
                (*name).to_string(),
                ToolEntry {
                    provider: ProviderRef::Builtin,
                    tool: None,
                    capabilities: None,
                },
            )
        })
        .collect()
}
