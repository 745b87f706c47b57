//! `[providers]`: where implementations come from (sources) and configured factory instances.

use std::collections::BTreeMap;

use super::error::{join, Ctx, ManifestError};
use super::suggest::{check_keys, nearest};
use super::typed::{check_schema, want_name, want_str, want_table, wrong_type, Ty};

/// Where a provider's code comes from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    /// A local directory or file, relative to the manifest's directory unless absolute.
    Path(String),
    /// An npm package.
    Npm {
        /// Package name (`@scope/pkg`).
        name: String,
        /// Version or range, when pinned.
        version: Option<String>,
    },
    /// A git repository.
    Git {
        /// Clone URL.
        url: String,
        /// Commit, tag or branch, when pinned.
        rev: Option<String>,
    },
}

impl Source {
    /// Classifies a string written where a provider belongs: `./x`, `../x`, `/abs`, `~/x` and `.` are paths;
    /// `@scope/pkg[@version]` and `npm:pkg[@version]` are npm packages; `git+<url>[#rev]` is a git source. Anything else
    /// (a bare word) is not a source.
    pub fn from_spec_str(s: &str) -> Option<Source> {
        if s == "." || s == ".." || ["./", "../", "/", "~/"].iter().any(|p| s.starts_with(p)) {
            return Some(Source::Path(s.to_string()));
        }
        if let Some(url) = s.strip_prefix("git+") {
            if url.is_empty() {
                return None;
            }
            let (url, rev) = match url.split_once('#') {
                Some((u, r)) if !r.is_empty() => (u, Some(r.to_string())),
                Some((u, _)) => (u, None),
                None => (url, None),
            };
            return Some(Source::Git {
                url: url.to_string(),
                rev,
            });
        }
        let npm = s
            .strip_prefix("npm:")
            .or_else(|| s.starts_with('@').then_some(s))?;
        let (name, version) = split_npm_version(npm);
        let scoped_ok = match name.strip_prefix('@') {
            Some(rest) => rest
                .split_once('/')
                .is_some_and(|(a, b)| !a.is_empty() && !b.is_empty()),
            None => true,
        };
        (!name.is_empty() && scoped_ok).then(|| Source::Npm {
            name: name.to_string(),
            version,
        })
    }

    /// A short human description (`path ./x`, `npm @a/b@1`, `git https://...#rev`).
    pub fn describe(&self) -> String {
        match self {
            Source::Path(p) => format!("path {p}"),
            Source::Npm {
                name,
                version: None,
            } => format!("npm {name}"),
            Source::Npm {
                name,
                version: Some(v),
            } => format!("npm {name}@{v}"),
            Source::Git { url, rev: None } => format!("git {url}"),
            Source::Git { url, rev: Some(r) } => format!("git {url}#{r}"),
        }
    }
}

fn split_npm_version(s: &str) -> (&str, Option<String>) {
    // The version separator is an '@' that is not the scope's leading one.
    let start = s.chars().next().map_or(0, char::len_utf8);
    match s[start..].rfind('@').map(|p| p + start) {
        Some(at) if at + 1 < s.len() => (&s[..at], Some(s[at + 1..].to_string())),
        _ => (s, None),
    }
}

/// The built-in meta-factories: names a `{ provider = "<name>", … }` entry may give instead of a source.
pub const META_FACTORIES: &[&str] = &["mcp-server"];

/// Keys a provider package's entry may not carry as config, with the fix: the source keys (the version or rev goes in
/// the source string) and `secrets` (a provider receives none). `capabilities` is refused on every configured entry.
const PACKAGE_RESERVED: &[(&str, &str)] = &[
    ("path", "the source is the `provider` string; write provider = \"./dir\""),
    ("npm", "the source is the `provider` string; write provider = \"@scope/pkg\""),
    ("git", "the source is the `provider` string; write provider = \"git+https://…#rev\""),
    ("version", "pin an npm version in the source: provider = \"@scope/pkg@1.2.0\""),
    ("rev", "pin a git rev in the source: provider = \"git+https://…#v1\""),
    (
        "secrets",
        "loom passes no secrets to a provider package (not in its environment, not in its config); remove it, or \
         run the tool as an mcp-server, whose `secrets` reach its environment",
    ),
];

/// One `[providers]` entry (or an inline provider table on a tool entry).
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderSpec {
    /// `{ path = ... }`, `{ npm = ... }`, `{ git = ..., rev = ... }` or a source string.
    Source(Source),
    /// `{ provider = "<source>", ...config }` (e.g. `provider = "@my-org/loom-fetch"`): an external provider package
    /// with construction config, installed and run exactly like [`ProviderSpec::Source`]; the config (never empty:
    /// an entry without config is a plain source) reaches the provider in `initialize`.
    Package {
        /// Where its code comes from.
        source: Source,
        /// Every key but `provider`: open, but never a source key, `secrets` or `capabilities`.
        config: toml::Table,
    },
    /// `{ provider = "<factory>", ...config }`: an instance of a built-in meta-factory ([`META_FACTORIES`]).
    Configured {
        /// The factory name, one of [`META_FACTORIES`].
        factory: String,
        /// Every key but `provider`, checked against the factory's closed schema.
        config: toml::Table,
    },
}

impl ProviderSpec {
    /// A short human description. A package's config shows its key names only (values may come from `${VAR}`).
    pub fn describe(&self) -> String {
        match self {
            ProviderSpec::Source(s) => s.describe(),
            ProviderSpec::Package { source, config } => {
                let keys: Vec<&str> = config.keys().map(String::as_str).collect();
                format!("{} (config: {})", source.describe(), keys.join(", "))
            }
            ProviderSpec::Configured { factory, config } => {
                let mut out = format!(
                    "{{ provider = {}",
                    crate::lattice::value::toml_string(factory)
                );
                for (k, v) in config {
                    out.push_str(&format!(", {} = {v}", crate::lattice::value::toml_key(k)));
                }
                out.push_str(" }");
                out
            }
        }
    }

    /// Where an external provider's code comes from: the source of a plain source or a package; `None` for a
    /// built-in meta-factory.
    pub fn source(&self) -> Option<&Source> {
        match self {
            ProviderSpec::Source(s) | ProviderSpec::Package { source: s, .. } => Some(s),
            ProviderSpec::Configured { .. } => None,
        }
    }

    /// A provider package's construction config; `None` for a plain source or a meta-factory.
    pub fn package_config(&self) -> Option<&toml::Table> {
        match self {
            ProviderSpec::Package { config, .. } => Some(config),
            _ => None,
        }
    }
}

/// The builtin MCP factory's closed config.
const MCP_SERVER: &[(&str, Ty)] = &[
    ("command", Ty::Str),
    ("args", Ty::StrList),
    ("npm", Ty::Str),
    ("env", Ty::StrMap),
    ("secrets", Ty::StrMap),
    ("url", Ty::Str),
    ("headers", Ty::StrMap),
    ("startup_timeout_ms", Ty::Count),
    ("call_timeout_ms", Ty::Count),
    ("cwd", Ty::Str),
];

/// Why `cwd` (an mcp-server's working directory, relative to the manifest's directory) is not acceptable, if it is
/// not: it must be `.`, `./…`, `../…` or an absolute path, without a NUL.
pub(crate) fn mcp_cwd_problem(cwd: &str) -> Option<String> {
    if cwd.contains('\0') {
        return Some("contains a NUL character".into());
    }
    let shaped = cwd == "." || cwd == ".." || ["./", "../", "/"].iter().any(|p| cwd.starts_with(p));
    (!shaped).then(|| {
        format!(
            "{cwd:?} is not a directory path: write \"./\" (the manifest's directory), \"./sub\" or an absolute path"
        )
    })
}

const SHAPES: &str =
    "{ path = \"./dir\" }, { npm = \"@scope/pkg\" }, { git = \"https://…\", rev = \"…\" }, \
                      { provider = \"@scope/pkg\", …config }, or { provider = \"mcp-server\", npm = \"…\" }";

/// Parses a provider spec written at `path`: a source string or a table.
pub(crate) fn parse_provider_spec(
    ctx: Ctx<'_>,
    path: &str,
    v: &toml::Value,
) -> Result<ProviderSpec, ManifestError> {
    match v {
        toml::Value::String(s) => Source::from_spec_str(s).map(ProviderSpec::Source).ok_or_else(|| {
            ctx.err(path, format!("{s:?} is not a provider source"))
                .with_hint(format!("write a path like \"./{s}\", an npm name like \"@scope/{s}\", or a table: {SHAPES}"))
        }),
        toml::Value::Table(t) => parse_provider_table(ctx, path, t),
        other => Err(wrong_type(ctx, path, "a provider table", other).with_hint(SHAPES)),
    }
}

fn parse_provider_table(
    ctx: Ctx<'_>,
    path: &str,
    t: &toml::Table,
) -> Result<ProviderSpec, ManifestError> {
    let forms: Vec<&str> = ["provider", "path", "npm", "git"]
        .into_iter()
        .filter(|k| t.contains_key(*k))
        .collect();
    match forms.as_slice() {
        ["provider", ..] => {
            let factory = want_name(ctx, &join(path, "provider"), &t["provider"])?.to_string();
            let mut config = t.clone();
            config.remove("provider");
            if config.contains_key("capabilities") {
                return Err(ctx
                    .err(
                        &join(path, "capabilities"),
                        "a provider entry carries no authority: grants belong on [tools] entries or in [capabilities]",
                    )
                    .with_hint("move the grant to [capabilities].<tool instance>"));
            }
            if factory != "mcp-server" {
                return parse_package(ctx, path, &factory, config);
            }
            check_schema(ctx, path, &config, MCP_SERVER)?;
            let launchers: Vec<&str> = ["command", "npm", "url"]
                .into_iter()
                .filter(|k| config.contains_key(*k))
                .collect();
            if launchers.len() != 1 {
                let found = if launchers.is_empty() {
                    "none".to_string()
                } else {
                    launchers.join(" and ")
                };
                return Err(ctx
                    .err(
                        path,
                        format!("an mcp-server needs exactly one of command, npm or url (found {found})"),
                    )
                    .with_hint("npm = \"@modelcontextprotocol/server-filesystem\", or command = \"node\" with args = [...], or url = \"https://…\""));
            }
            if let Some(cwd) = config.get("cwd").and_then(toml::Value::as_str) {
                if config.contains_key("url") {
                    return Err(ctx
                        .err(
                            &join(path, "cwd"),
                            "cwd only goes with a spawned server (command or npm)",
                        )
                        .with_hint("remove cwd from a url server"));
                }
                if let Some(problem) = mcp_cwd_problem(cwd) {
                    return Err(ctx.err(&join(path, "cwd"), problem).with_hint(
                        "cwd is resolved against the manifest's directory; leave it out to start the server in a \
                         directory of its own in the agent's storage",
                    ));
                }
            }
            if config.contains_key("args") && !config.contains_key("command") {
                return Err(ctx
                    .err(&join(path, "args"), "args only go with command")
                    .with_hint("command = \"npx\", args = [\"-y\", \"pkg\"]"));
            }
            Ok(ProviderSpec::Configured { factory, config })
        }
        ["path"] => {
            check_keys(ctx, path, t, &["path"])?;
            Ok(ProviderSpec::Source(Source::Path(
                want_name(ctx, &join(path, "path"), &t["path"])?.to_string(),
            )))
        }
        ["npm"] => {
            check_keys(ctx, path, t, &["npm", "version"])?;
            let name = want_name(ctx, &join(path, "npm"), &t["npm"])?.to_string();
            let version = t
                .get("version")
                .map(|v| want_str(ctx, &join(path, "version"), v).map(str::to_string))
                .transpose()?;
            Ok(ProviderSpec::Source(Source::Npm { name, version }))
        }
        ["git"] => {
            check_keys(ctx, path, t, &["git", "rev"])?;
            let url = want_name(ctx, &join(path, "git"), &t["git"])?.to_string();
            let rev = t
                .get("rev")
                .map(|v| want_str(ctx, &join(path, "rev"), v).map(str::to_string))
                .transpose()?;
            Ok(ProviderSpec::Source(Source::Git { url, rev }))
        }
        [] => Err(ctx
            .err(path, "names no source or factory")
            .with_hint(format!("a provider is {SHAPES}"))),
        several => Err(ctx
            .err(
                path,
                format!("names several sources ({})", several.join(", ")),
            )
            .with_hint("give exactly one of path, npm or git")),
    }
}

/// `{ provider = "<factory>", ...config }` where the factory is not a built-in: a provider package named by source
/// (`./dir`, `@scope/pkg`, `npm:pkg`, `git+url`), or an error listing the built-in factories. A bare word is never a
/// source, so it cannot be mistaken for a package.
fn parse_package(
    ctx: Ctx<'_>,
    path: &str,
    factory: &str,
    config: toml::Table,
) -> Result<ProviderSpec, ManifestError> {
    let Some(source) = Source::from_spec_str(factory) else {
        let builtins = META_FACTORIES.join(", ");
        let hint = match nearest(factory, META_FACTORIES) {
            Some(near) => format!("did you mean {near:?}?"),
            None => format!(
                "name a provider package by its source: \"./{factory}\" (a directory), \"@scope/{factory}\" or \
                 \"npm:{factory}\" (npm), \"git+https://…\" (git)"
            ),
        };
        return Err(ctx
            .err(
                &join(path, "provider"),
                format!(
                    "{factory:?} is neither a built-in factory ({builtins}) nor a provider package's source"
                ),
            )
            .with_hint(hint));
    };
    if let Some((key, fix)) = PACKAGE_RESERVED
        .iter()
        .find(|(k, _)| config.contains_key(*k))
    {
        return Err(ctx
            .err(
                &join(path, key),
                format!("`{key}` is not construction config for the provider package {factory:?}"),
            )
            .with_hint(*fix));
    }
    Ok(if config.is_empty() {
        ProviderSpec::Source(source)
    } else {
        ProviderSpec::Package { source, config }
    })
}

/// Parses a `[providers]` table at `path`, refusing `reserved` handle names.
pub(crate) fn parse_providers(
    ctx: Ctx<'_>,
    path: &str,
    v: &toml::Value,
    reserved: &[&str],
) -> Result<BTreeMap<String, ProviderSpec>, ManifestError> {
    let table = want_table(ctx, path, v)?;
    let mut out = BTreeMap::new();
    for (handle, spec) in table {
        let p = join(path, handle);
        if reserved.contains(&handle.as_str()) {
            return Err(ctx
                .err(
                    &p,
                    format!("{handle:?} is a reserved provider name and cannot be defined"),
                )
                .with_hint("pick another handle name"));
        }
        out.insert(handle.clone(), parse_provider_spec(ctx, &p, spec)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn src(s: &str, want: Option<Source>) {
        assert_eq!(Source::from_spec_str(s), want, "{s:?}");
    }

    fn npm(name: &str, version: Option<&str>) -> Option<Source> {
        Some(Source::Npm {
            name: name.into(),
            version: version.map(Into::into),
        })
    }

    #[test]
    fn source_strings() {
        src("./bin", Some(Source::Path("./bin".into())));
        src("../x", Some(Source::Path("../x".into())));
        src("/abs/x", Some(Source::Path("/abs/x".into())));
        src("~/x", Some(Source::Path("~/x".into())));
        src(".", Some(Source::Path(".".into())));
        src("@scope/pkg", npm("@scope/pkg", None));
        src("@scope/pkg@1.2.3", npm("@scope/pkg", Some("1.2.3")));
        src("npm:lodash", npm("lodash", None));
        src("npm:lodash@4", npm("lodash", Some("4")));
        src(
            "git+https://example.com/x.git#v1",
            Some(Source::Git {
                url: "https://example.com/x.git".into(),
                rev: Some("v1".into()),
            }),
        );
        src(
            "git+https://example.com/x.git",
            Some(Source::Git {
                url: "https://example.com/x.git".into(),
                rev: None,
            }),
        );
        src("notes", None);
        src("@scope", None);
        src("@/x", None);
        src("@", None);
        src("git+", None);
        src("", None);
        src("npm:", None);
        src("npm:é@1", npm("é", Some("1")));
        src("@é/ü", npm("@é/ü", None));
    }
}
