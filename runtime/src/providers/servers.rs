//! The MCP servers and external provider processes of one agent: which `[providers]` table a tool entry's provider
//! names, where each server runs (a private directory under the agent's storage, never the agent's working
//! directory), one started server per handle, and the audit's resolution of every MCP tool instance without a model
//! call.

use std::sync::Arc;

use loom_kernel::McpResolution;
use loom_mcp::{server_config, Dialect, Launch, McpServer};

use super::McpTool;

/// The `mcp-server` table behind a tool entry's provider, with the handle it is known by: a `[providers]` handle,
/// or an inline table's label (inline tables dedup by value: equal tables share one server). `None` when the
/// provider is not the `mcp-server` factory.
pub fn mcp_provider<'a>(
    m: &'a loom_kernel::Manifest,
    provider: &'a loom_kernel::ProviderRef,
) -> Option<(String, &'a toml::Table)> {
    use loom_kernel::{ProviderRef, ProviderSpec};
    let spec = match provider {
        ProviderRef::Handle(h) => m.providers.get(h)?,
        ProviderRef::Shipped(s) => &s.spec,
        _ => return None,
    };
    match spec {
        ProviderSpec::Configured { factory, config } if factory == "mcp-server" => {
            let key = match provider {
                ProviderRef::Handle(h) => h.clone(),
                _ => spec.describe(),
            };
            Some((key, config))
        }
        _ => None,
    }
}

/// What starting a server needs from boot.
pub struct McpPlace<'a> {
    /// The manifest's directory (relative commands, `./` arguments and `cwd` resolve against it).
    pub manifest_dir: &'a std::path::Path,
    /// loom's directory for server working directories (`server_run_base`): a server without `cwd` starts in a
    /// private subdirectory of it, never in the agent's working directory.
    pub run_base: &'a std::path::Path,
    /// The secrets chain.
    pub chain: &'a crate::secrets::SecretChain,
    /// loom's environment.
    pub env: &'a std::collections::BTreeMap<String, String>,
}

/// The servers started so far, one per handle.
#[derive(Default)]
pub struct McpServers {
    started: std::collections::BTreeMap<String, Arc<McpServer>>,
}

impl McpServers {
    /// The server or provider known as `key`, started by `start` on first use.
    pub fn get_or_start_with(
        &mut self,
        key: &str,
        start: impl FnOnce() -> Result<Arc<McpServer>, String>,
    ) -> Result<Arc<McpServer>, String> {
        if let Some(s) = self.started.get(key) {
            return Ok(s.clone());
        }
        let server = start()?;
        self.started.insert(key.to_string(), server.clone());
        Ok(server)
    }

    /// The server known as `key`, started on first use.
    pub fn get_or_start(
        &mut self,
        key: &str,
        table: &toml::Table,
        place: &McpPlace<'_>,
    ) -> Result<Arc<McpServer>, String> {
        self.get_or_start_named(key, None, table, place)
    }

    /// [`McpServers::get_or_start`] for a server `named` on the command line rather than in a manifest.
    pub(crate) fn get_or_start_named(
        &mut self,
        key: &str,
        named: Option<&str>,
        table: &toml::Table,
        place: &McpPlace<'_>,
    ) -> Result<Arc<McpServer>, String> {
        if let Some(s) = self.started.get(key) {
            return Ok(s.clone());
        }
        // absolute: a relative data home must not make the directory (or npx's --prefix) depend on a cwd
        let run_dir =
            std::path::absolute(place.run_base.join(server_dir_name(key))).map_err(|e| {
                format!(
                    "[providers].{key}: cannot place the server's working directory under {}: {e}",
                    place.run_base.display()
                )
            })?;
        let cfg = server_config(
            key,
            table,
            place.manifest_dir,
            &run_dir,
            place.chain,
            place.env,
        )
        .map_err(|e| e.to_string())?;
        if let Launch::Stdio(spawn) = &cfg.launch {
            if spawn.cwd == run_dir {
                private_dir(&run_dir).map_err(|e| {
                    format!(
                        "[providers].{key}: cannot prepare the server's working directory {}: {e}",
                        run_dir.display()
                    )
                })?;
            } else if !spawn.cwd.is_dir() {
                return Err(format!(
                    "[providers].{key}.cwd: {} is not a directory; cwd is resolved against the manifest's directory",
                    spawn.cwd.display()
                ));
            }
        }
        let server =
            McpServer::start_named(key, named, cfg, Dialect::Mcp).map_err(|e| e.to_string())?;
        self.started.insert(key.to_string(), server.clone());
        Ok(server)
    }
}

/// Where the MCP servers of an agent with storage directory `storage` start: `<storage>/mcp`, one private
/// subdirectory per server.
pub fn server_run_base(storage: &std::path::Path) -> std::path::PathBuf {
    storage.join("mcp")
}

/// A server's directory name under [`server_run_base`]: its handle when that is a plain name, else a digest of its
/// key (an inline table's key is its description).
fn server_dir_name(key: &str) -> String {
    use sha2::Digest;
    let plain = !key.is_empty()
        && key.len() <= 64
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if plain {
        return key.to_string();
    }
    let digest = sha2::Sha256::digest(key.as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("inline-{hex}")
}

/// Creates `dir` (mode 0700, parents as needed) and checks that it is a directory of loom's own, not a symbolic link
/// planted there.
fn private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.is_dir() {
        return Err(std::io::Error::other(
            "it is not a directory (a symbolic link?); remove it and loom makes a new one",
        ));
    }
    Ok(())
}

/// Starts every MCP server and external provider the manifest's tools use (no model calls), lists their tools and
/// binds each instance's grant: per instance, its resolution or why it cannot be resolved (the message boot would refuse with). Servers
/// are stopped before this returns.
pub fn resolve_mcp_tools(
    loaded: &crate::load::Loaded,
    cwd: &std::path::Path,
) -> std::collections::BTreeMap<String, Result<McpResolution, String>> {
    let m = &loaded.manifest;
    let ctx = crate::load::path_ctx(cwd);
    let grants = loom_kernel::tool_grants(m, &m.effective_ceiling(&ctx));
    let env = crate::load::env_map();
    let mut out = std::collections::BTreeMap::new();
    // built at the first MCP tool: an audit of a manifest without one reads no secret store
    let mut chain = None;
    let mut servers = McpServers::default();
    let storage = crate::storage::storage_dir(m, &env);
    let run_base = server_run_base(&storage);
    for g in &grants {
        // an external provider: resolved from its pinned install, never from its source
        if let Some(ext) = super::provider_source(m, &g.provider) {
            let place = super::ProviderPlace {
                cwd,
                env: &env,
                storage: &storage,
            };
            let resolved = servers
                .get_or_start_with(ext.handle, || {
                    super::resolve_and_start(&loaded.dir, &ext, &place)
                })
                .and_then(|server| McpTool::new(&g.instance, &g.underlying, &g.grant, server))
                .map(|tool| McpResolution {
                    server: ext.handle.to_string(),
                    description: tool.description().to_string(),
                    schema: tool.visible_schema().clone(),
                });
            out.insert(g.instance.clone(), resolved);
            continue;
        }
        let Some((key, table)) = mcp_provider(m, &g.provider) else {
            continue;
        };
        let chain = chain.get_or_insert_with(|| {
            crate::secrets::SecretChain::standard(Default::default(), &loaded.dir, cwd, &env)
        });
        let resolved = chain.as_ref().map_err(|e| e.to_string()).and_then(|chain| {
            let place = McpPlace {
                manifest_dir: &loaded.dir,
                run_base: &run_base,
                chain,
                env: &env,
            };
            let server = servers.get_or_start(&key, table, &place)?;
            let tool = McpTool::new(&g.instance, &g.underlying, &g.grant, server)?;
            Ok(McpResolution {
                server: key.clone(),
                description: tool.description().to_string(),
                schema: tool.visible_schema().clone(),
            })
        });
        out.insert(g.instance.clone(), resolved);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_s_directory_is_private_named_safely_and_never_a_planted_link() {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(server_dir_name("fs_mcp-2"), "fs_mcp-2");
        let inline = server_dir_name("{ provider = \"mcp-server\", command = \"../../x\" }");
        assert!(
            inline.starts_with("inline-") && !inline.contains('/'),
            "{inline}"
        );
        assert_eq!(server_dir_name("../.."), server_dir_name("../.."));
        assert_ne!(server_dir_name("../.."), server_dir_name("../../"));

        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("mcp/fs");
        private_dir(&dir).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        // a link planted in its place (towards the project) is refused, not followed
        let project = tempfile::tempdir().unwrap();
        let planted = base.path().join("mcp/planted");
        std::os::unix::fs::symlink(project.path(), &planted).unwrap();
        let err = private_dir(&planted).unwrap_err().to_string();
        assert!(err.contains("symbolic link"), "{err}");
    }
}
