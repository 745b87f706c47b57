//! External providers (runtime/PROVIDERS.md): a `[providers]` handle whose source is `path`, `npm` or `git` runs as
//! one process per handle, speaking loom's provider protocol over the MCP client's JSON-RPC stdio transport. It is
//! resolved only from `.loom/providers/<handle>` next to the manifest, and only when `.loom/lock.toml` pins the handle
//! and the tree hash matches (the kernel's [`lock_state`]). `loom install` ([`install`]) puts it there.

mod install;
mod tree;

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use loom_kernel::{lock_state, Lock, LockState, Manifest, ProviderRef, ProviderSpec, Source};
use serde_json::{json, Value as Json};

pub use install::{install, InstallOptions, Installed};
pub use tree::tree_hash;

use crate::mcp::{
    Dialect, Launch, McpServer, ServerConfig, StdioSpawn, DEFAULT_CALL_TIMEOUT_MS,
    DEFAULT_STARTUP_TIMEOUT_MS,
};

/// The `[providers]` handle and source behind a tool's provider, when it is an external provider (a source form).
pub fn provider_source<'a>(
    m: &'a Manifest,
    provider: &ProviderRef,
) -> Option<(String, &'a Source)> {
    match provider {
        ProviderRef::Handle(h) => match m.providers.get(h)? {
            ProviderSpec::Source(s) => Some((h.clone(), s)),
            ProviderSpec::Configured { .. } => None,
        },
        _ => None,
    }
}

/// Every `[providers]` handle with a source (what `loom install` materialises).
pub fn sources(m: &Manifest) -> BTreeMap<String, Source> {
    m.providers
        .iter()
        .filter_map(|(h, spec)| match spec {
            ProviderSpec::Source(s) => Some((h.clone(), s.clone())),
            ProviderSpec::Configured { .. } => None,
        })
        .collect()
}

/// The install directory of `handle` for the manifest in `manifest_dir`.
pub fn install_dir(manifest_dir: &Path, handle: &str) -> PathBuf {
    manifest_dir.join(loom_kernel::INSTALL_DIR).join(handle)
}

/// The lock next to the manifest: `Ok(None)` when there is none; an error when it cannot be read or parsed.
pub fn read_lock(manifest_dir: &Path) -> Result<Option<Lock>, String> {
    let path = manifest_dir.join(loom_kernel::LOCK_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => Lock::parse(&text, &path.display().to_string()).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// The kernel's verdict for `handle`, from the lock and a fresh hash of its install directory.
pub fn state_of(manifest_dir: &Path, handle: &str, source: &Source) -> LockState {
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
    lock_state(handle, source, lock.as_ref(), hash.as_deref())
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
}

/// Resolves `[providers].<handle>` to its lock-pinned install, or says why it cannot run and how to fix it.
pub fn resolve(manifest_dir: &Path, handle: &str, source: &Source) -> Result<Resolved, String> {
    let dir = install_dir(manifest_dir, handle);
    let origin = format!("{}, installed in {}", source.describe(), dir.display());
    let fail = |why: &str| {
        format!(
            "provider [providers].{handle} ({}): {why}; run `loom install` on the manifest in {} to install and \
             pin it (loom runs a provider only from its pinned install directory)",
            source.describe(),
            manifest_dir.display()
        )
    };
    if let Some(why) = state_of(manifest_dir, handle, source).problem() {
        return Err(fail(why));
    }
    let (program, args) = entry_of(&dir).map_err(|e| {
        format!(
            "provider [providers].{handle} ({origin}): {e}; fix the provider's package.json, then run `loom install`"
        )
    })?;
    Ok(Resolved {
        handle: handle.to_string(),
        origin,
        dir,
        program,
        args,
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
    /// The agent's working directory (where the provider runs).
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
            cwd: place.cwd.to_path_buf(),
        }),
        startup_timeout: Duration::from_millis(DEFAULT_STARTUP_TIMEOUT_MS),
        call_timeout: Duration::from_millis(DEFAULT_CALL_TIMEOUT_MS),
    };
    let mut init = serde_json::Map::new();
    init.insert("handle".into(), json!(r.handle));
    init.insert("dataDir".into(), json!(data.display().to_string()));
    init.insert("cwd".into(), json!(place.cwd.display().to_string()));
    McpServer::start_as(
        &r.handle,
        cfg,
        Dialect::Provider {
            init,
            origin: r.origin.clone(),
        },
    )
}

/// Resolves and starts `[providers].<handle>`.
pub fn resolve_and_start(
    manifest_dir: &Path,
    handle: &str,
    source: &Source,
    place: &ProviderPlace<'_>,
) -> Result<Arc<McpServer>, String> {
    start(&resolve(manifest_dir, handle, source)?, place)
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
    /// The `initialize` answer (`contributes`…), or why the provider could not be started; `None` when not asked.
    pub contributes: Option<Result<Json, String>>,
}

/// Every source provider of the manifest with its lock state; with `spawn`, each installed one is started to ask
/// what it contributes (no model calls), then stopped.
pub fn provider_infos(loaded: &crate::load::Loaded, cwd: &Path, spawn: bool) -> Vec<ProviderInfo> {
    let env = crate::load::env_map();
    let storage = crate::storage::storage_dir(&loaded.manifest, &env);
    let lock = read_lock(&loaded.dir).ok().flatten();
    sources(&loaded.manifest)
        .into_iter()
        .map(|(handle, source)| {
            let state = state_of(&loaded.dir, &handle, &source);
            let pinned = lock.as_ref().and_then(|l| l.providers.get(&handle));
            let contributes = spawn.then(|| {
                let place = ProviderPlace {
                    cwd,
                    env: &env,
                    storage: &storage,
                };
                resolve_and_start(&loaded.dir, &handle, &source, &place).map(|server| {
                    server
                        .info()
                        .get("contributes")
                        .cloned()
                        .unwrap_or(Json::Null)
                })
            });
            ProviderInfo {
                source: source.describe(),
                state,
                resolved: pinned.map(|e| e.resolved.clone()),
                sha256: pinned.map(|e| e.sha256.clone()),
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
