//! External providers (runtime/PROVIDERS.md): a `[providers]` handle whose source is `path`, `npm` or `git` runs as
//! one process per handle, speaking loom's provider protocol over the MCP client's JSON-RPC stdio transport. It is
//! resolved only from `.loom/providers/<handle>` next to the manifest, and only when `.loom/lock.toml` pins the handle
//! and the tree hash matches (the kernel's [`lock_state`]). `loom install` ([`install`]) puts it there.

mod adapter;
mod harness;
mod install;
mod layer;
mod servers;
mod shipped;
mod tool;
mod tree;

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use loom_kernel::{lock_state, path_source_drift, Lock, LockState, Manifest, ProviderRef, Source};
use serde_json::{json, Value as Json};

pub use harness::ProviderHarness;
pub use install::{install, InstallError, InstallOptions};
pub use layer::ProviderLayers;
pub use servers::{mcp_provider, resolve_mcp_tools, server_run_base, McpPlace, McpServers};
pub use shipped::{group_sources, resolve_shipped, shipped_sources, shipped_states};
pub use tool::McpTool;
pub use tree::tree_hash;

use crate::mcp::{
    Dialect, Launch, McpServer, ServerConfig, StdioSpawn, DEFAULT_CALL_TIMEOUT_MS,
    DEFAULT_STARTUP_TIMEOUT_MS,
};

/// An external provider behind a `[providers]` handle: a plain source, or a provider package with construction config.
#[derive(Debug, Clone, Copy)]
pub struct External<'a> {
    /// The handle.
    pub handle: &'a str,
    /// Where its code comes from (what `loom install` materialises and the lock pins).
    pub source: &'a Source,
    /// The package's construction config (`None` for a plain source), passed in `initialize`.
    pub config: Option<&'a toml::Table>,
}

/// The `[providers]` handle behind a tool's provider, when it is an external provider (a source form, with or
/// without config).
pub fn provider_source<'a>(m: &'a Manifest, provider: &ProviderRef) -> Option<External<'a>> {
    match provider {
        ProviderRef::Handle(h) => {
            let (handle, spec) = m.providers.get_key_value(h)?;
            Some(External {
                handle,
                source: spec.source()?,
                config: spec.package_config(),
            })
        }
        _ => None,
    }
}

/// Every `[providers]` handle with a source (what `loom install` materialises): plain sources and provider packages.
pub fn sources(m: &Manifest) -> BTreeMap<String, Source> {
    m.providers
        .iter()
        .filter_map(|(h, spec)| Some((h.clone(), spec.source()?.clone())))
        .collect()
}

/// A provider package's config as the JSON object `initialize` carries (`{}` for none). TOML dates become their
/// RFC 3339 text.
pub fn config_json(config: Option<&toml::Table>) -> Json {
    fn value(v: &toml::Value) -> Json {
        match v {
            toml::Value::String(s) => json!(s),
            toml::Value::Integer(i) => json!(i),
            toml::Value::Float(f) => json!(f),
            toml::Value::Boolean(b) => json!(b),
            toml::Value::Datetime(d) => json!(d.to_string()),
            toml::Value::Array(a) => Json::Array(a.iter().map(value).collect()),
            toml::Value::Table(t) => table(t),
        }
    }
    fn table(t: &toml::Table) -> Json {
        Json::Object(t.iter().map(|(k, v)| (k.clone(), value(v))).collect())
    }
    config.map_or_else(|| json!({}), table)
}

/// The install directory of `handle` for the manifest in `manifest_dir`.
pub fn install_dir(manifest_dir: &Path, handle: &str) -> PathBuf {
    manifest_dir.join(loom_kernel::INSTALL_DIR).join(handle)
}

/// The lock next to the manifest: `Ok(None)` when there is none; an error when it cannot be read or parsed.
pub fn read_lock(manifest_dir: &Path) -> Result<Option<Lock>, String> {
    let path = manifest_dir.join(loom_kernel::LOCK_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => Lock::parse(&text, &path.display().to_string())
            .map(Some)
            .map_err(|e| e.to_string()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// The kernel's verdict for `handle`, from the lock, a fresh hash of its install directory and, for a path source with
/// a `base` (a root `[providers]` handle: the manifest's folder), a fresh hash of the source directory, so an edited
/// source is drift until `loom install` runs again. A path source a skill ships is passed without a base: its source
/// is not compared (SECURITY.md, "External providers").
pub fn state_of(
    manifest_dir: &Path,
    base: Option<&Path>,
    handle: &str,
    source: &Source,
) -> LockState {
    let lock = match read_lock(manifest_dir) {
        Ok(l) => l,
        Err(e) => return LockState::Drifted(e),
    };
    let dir = install_dir(manifest_dir, handle);
    let hash = if dir.is_dir() {
        match tree_hash(&dir) {
            Ok(h) => Some(h),
            Err(e) => return LockState::Drifted(e),
        }
    } else {
        None
    };
    let state = lock_state(handle, source, lock.as_ref(), hash.as_deref());
    if state != LockState::Installed {
        return state;
    }
    let (Source::Path(p), Some(base)) = (source, base) else {
        return state;
    };
    let env = crate::load::env_map();
    let now = tree::source_hash(&install::local(base, p, &env));
    match path_source_drift(
        handle,
        source,
        lock.as_ref(),
        now.as_deref().map_err(String::as_str),
    ) {
        Some(why) => LockState::Drifted(why),
        None => state,
    }
}

/// A provider resolved to its pinned install: what to run.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The handle.
    pub handle: String,
    /// `path ./x, installed in /m/.loom/providers/x` — for messages.
    pub origin: String,
    /// The install directory.
    pub dir: PathBuf,
    /// The program and its arguments.
    pub program: String,
    /// Its arguments (the entry file for node / python3).
    pub args: Vec<String>,
    /// The construction config `initialize` passes (`{}` for a plain source).
    pub config: Json,
}

/// Resolves `[providers].<handle>` to its lock-pinned install, or says why it cannot run and how to fix it.
pub fn resolve(manifest_dir: &Path, ext: &External<'_>) -> Result<Resolved, String> {
    resolve_as(
        manifest_dir,
        Some(manifest_dir),
        ext,
        &format!("provider [providers].{}", ext.handle),
    )
}

/// Resolves the install `ext.handle` (a root handle or a shipped key), named `who` in errors.
fn resolve_as(
    manifest_dir: &Path,
    base: Option<&Path>,
    ext: &External<'_>,
    who: &str,
) -> Result<Resolved, String> {
    let External { handle, source, .. } = *ext;
    let dir = install_dir(manifest_dir, handle);
    let origin = format!("{}, installed in {}", source.describe(), dir.display());
    let fail = |why: &str| {
        format!(
            "{who} ({}): {why}; run `loom install` on the manifest in {} to install and pin it (loom runs a \
             provider only from its pinned install directory)",
            source.describe(),
            manifest_dir.display()
        )
    };
    if let Some(why) = state_of(manifest_dir, base, handle, source).problem() {
        return Err(fail(why));
    }
    let (program, args) = entry_of(&dir).map_err(|e| {
        format!("{who} ({origin}): {e}; fix the provider's package.json, then run `loom install`")
    })?;
    Ok(Resolved {
        handle: handle.to_string(),
        origin,
        dir,
        program,
        args,
        config: config_json(ext.config),
    })
}

/// The program that runs the provider in `dir`: `package.json`'s `loom.provider` entry, run by node (`.js`, `.mjs`,
/// `.cjs`), python3 (`.py`) or as it is.
pub fn entry_of(dir: &Path) -> Result<(String, Vec<String>), String> {
    let pj = dir.join("package.json");
    let text = std::fs::read_to_string(&pj).map_err(|e| {
        format!(
            "cannot read {}: {e} (a provider names its entry there)",
            pj.display()
        )
    })?;
    let v: Json = serde_json::from_str(&text)
        .map_err(|e| format!("{} is not valid JSON: {e}", pj.display()))?;
    let Some(entry) = v.pointer("/loom/provider").and_then(Json::as_str) else {
        return Err(format!(
            "{}: loom.provider: missing; add \"loom\": {{ \"provider\": \"./provider.mjs\" }}",
            pj.display()
        ));
    };
    let rel = Path::new(entry);
    if rel.is_absolute()
        || rel
            .components()
            .any(|c| matches!(c, Component::ParentDir | Component::RootDir))
    {
        return Err(format!(
            "{}: loom.provider: {entry:?} must be a path inside the provider's directory",
            pj.display()
        ));
    }
    let file = dir.join(rel);
    if !file.is_file() {
        return Err(format!(
            "{}: loom.provider: {entry:?} is not a file in {}",
            pj.display(),
            dir.display()
        ));
    }
    let path = file.display().to_string();
    Ok(match rel.extension().and_then(|e| e.to_str()) {
        Some("js" | "mjs" | "cjs") => ("node".into(), vec![path]),
        Some("py") => ("python3".into(), vec![path]),
        _ => (path, vec![]),
    })
}

/// What starting a provider needs besides its resolution.
pub struct ProviderPlace<'a> {
    /// The agent's working directory (told to the provider in `initialize`; it runs in its data directory).
    pub cwd: &'a Path,
    /// loom's environment (only the inherited variables pass).
    pub env: &'a BTreeMap<String, String>,
    /// The agent's storage directory: a provider's data directory is `providers/<handle>` in it.
    pub storage: &'a Path,
}

/// Starts a resolved provider: spawn, `initialize` (the contributions), ready for `tools/call`.
pub fn start(r: &Resolved, place: &ProviderPlace<'_>) -> Result<Arc<McpServer>, String> {
    let data = place.storage.join("providers").join(&r.handle);
    std::fs::create_dir_all(&data).map_err(|e| {
        format!(
            "provider [providers].{} ({}): cannot create its data directory {}: {e}",
            r.handle,
            r.origin,
            data.display()
        )
    })?;
    let cfg = ServerConfig {
        launch: Launch::Stdio(StdioSpawn {
            program: r.program.clone(),
            args: r.args.clone(),
            env: crate::mcp::inherited_env(place.env),
            // its own data directory, never the agent's working directory: nothing there is resolved as code
            cwd: data.clone(),
        }),
        startup_timeout: Duration::from_millis(DEFAULT_STARTUP_TIMEOUT_MS),
        call_timeout: Duration::from_millis(DEFAULT_CALL_TIMEOUT_MS),
    };
    let mut init = serde_json::Map::new();
    init.insert("handle".into(), json!(r.handle));
    init.insert("dataDir".into(), json!(data.display().to_string()));
    init.insert("cwd".into(), json!(place.cwd.display().to_string()));
    init.insert("config".into(), r.config.clone());
    McpServer::start_as(
        &r.handle,
        cfg,
        Dialect::Provider {
            init,
            origin: r.origin.clone(),
        },
    )
    .map_err(|e| e.to_string())
}

/// Resolves and starts `[providers].<handle>`.
pub fn resolve_and_start(
    manifest_dir: &Path,
    ext: &External<'_>,
    place: &ProviderPlace<'_>,
) -> Result<Arc<McpServer>, String> {
    start(&resolve(manifest_dir, ext)?, place)
}

/// One provider as `loom providers list` / `info` show it.
#[derive(Debug, Clone)]
pub struct ProviderInfo {
    /// The handle.
    pub handle: String,
    /// The source, described.
    pub source: String,
    /// `installed`, `missing` or `drifted`, and why.
    pub state: LockState,
    /// The pinned resolution (npm version, git commit, source directory), when pinned.
    pub resolved: Option<String>,
    /// The pinned tree hash, when pinned.
    pub sha256: Option<String>,
    /// The names of the package's construction config keys (never their values; empty for a plain source).
    pub config_keys: Vec<String>,
    /// The `initialize` answer (`contributes`…), or why the provider could not be started; `None` when not asked.
    pub contributes: Option<Result<Json, String>>,
}

/// Every source provider of the manifest with its lock state; with `spawn`, each installed one is started to ask
/// what it contributes (no model calls), then stopped.
pub fn provider_infos(loaded: &crate::load::Loaded, cwd: &Path, spawn: bool) -> Vec<ProviderInfo> {
    let env = crate::load::env_map();
    let storage = crate::storage::storage_dir(&loaded.manifest, &env);
    let lock = read_lock(&loaded.dir).ok().flatten();
    let m = &loaded.manifest;
    m.providers
        .keys()
        .filter_map(|h| provider_source(m, &ProviderRef::Handle(h.clone())))
        .map(|ext| {
            let handle = ext.handle.to_string();
            let state = state_of(&loaded.dir, Some(&loaded.dir), &handle, ext.source);
            let pinned = lock.as_ref().and_then(|l| l.providers.get(&handle));
            let contributes = spawn.then(|| {
                let place = ProviderPlace {
                    cwd,
                    env: &env,
                    storage: &storage,
                };
                resolve_and_start(&loaded.dir, &ext, &place).map(|server| {
                    server
                        .info()
                        .get("contributes")
                        .cloned()
                        .unwrap_or(Json::Null)
                })
            });
            ProviderInfo {
                source: ext.source.describe(),
                state,
                resolved: pinned.map(|e| e.resolved.clone()),
                sha256: pinned.map(|e| e.sha256.clone()),
                config_keys: ext
                    .config
                    .map(|c| c.keys().cloned().collect())
                    .unwrap_or_default(),
                contributes,
                handle,
            }
        })
        .collect()
}

/// Which of the `kind` (`sessions`, `harnesses`) the started provider `server` offers in `initialize` to use: `wanted`
/// when it offers that name, else (none wanted) the first it offers. The error names what it offers and the key to set.
pub fn pick_contribution(
    server: &crate::mcp::McpServer,
    kind: &str,
    wanted: Option<&str>,
    key: &str,
) -> Result<String, String> {
    let info = server.info();
    let offered: Vec<&str> = info
        .get("contributes")
        .and_then(|c| c.get(kind))
        .and_then(Json::as_array)
        .map(|a| a.iter().filter_map(Json::as_str).collect())
        .unwrap_or_default();
    match wanted {
        Some(w) if offered.contains(&w) => Ok(w.to_string()),
        None if !offered.is_empty() => Ok(offered[0].to_string()),
        _ => Err(format!(
            "the provider [providers].{} offers the {kind} [{}]{}; name one with {key} = \"<name>\"",
            server.handle,
            offered.join(", "),
            wanted.map_or(String::new(), |w| format!(", not {w:?}"))
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_reaches_initialize_as_json_and_none_is_an_empty_object() {
        let t: toml::Table = toml::from_str(
            "url = \"https://x/\"\nn = 3\nf = 1.5\non = true\nwhen = 2026-12-01T08:00:00Z\nlist = [1, \"a\"]\n\
             deep = { k = [ { x = 1 } ] }\n",
        )
        .unwrap();
        assert_eq!(
            config_json(Some(&t)),
            json!({ "deep": { "k": [ { "x": 1 } ] }, "f": 1.5, "list": [1, "a"], "n": 3, "on": true,
                    "url": "https://x/", "when": "2026-12-01T08:00:00Z" })
        );
        assert_eq!(config_json(None), json!({}));
    }
}
