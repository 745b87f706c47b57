//! `loom mcp inspect`: starts one server (a `[providers]` handle, a path, or an npm package), lists its tools and
//! says how to name it in a manifest.

use std::sync::Arc;

use loom_mcp::McpServer;

use crate::providers::{server_run_base, McpPlace, McpServers};

/// A server started for `loom mcp inspect`: the handle to paste, the `[providers]` line that launches it (`None`
/// when it came from a manifest, which already has it), and the running server with its tool listing.
pub struct Inspected {
    /// The handle (the manifest's, or one made from the package or file name).
    pub handle: String,
    /// `<handle> = { provider = "mcp-server", ... }`, for a server named by npm package or path.
    pub provider_line: Option<String>,
    /// The server (stopped when dropped).
    pub server: Arc<McpServer>,
}

/// Why `loom mcp inspect` could not start a server. Each message names what was asked and the fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InspectError {
    /// The secrets chain could not be built (a damaged secrets file).
    #[error("{0}")]
    Secrets(String),
    /// `spec` names nothing loom can start as an MCP server (a git source, a provider of another kind, a handle the
    /// manifest does not have).
    #[error("{0}")]
    NotAServer(String),
    /// The server could not be configured or started.
    #[error("{0}")]
    Start(String),
}

/// Starts the server `spec` names for `loom mcp inspect`: a `[providers]` handle of `manifest`, a path (`./x.mjs`,
/// `/abs/server` — `.js`/`.mjs`/`.cjs` run with node, `.py` with python3, anything else as the program), or an npm
/// package (`@scope/pkg`, `npm:pkg`, or a bare name not a handle), run with `npx -y`.
pub fn inspect_server(
    spec: &str,
    manifest: Option<&crate::load::Loaded>,
    cwd: &std::path::Path,
) -> Result<Inspected, InspectError> {
    use loom_kernel::{toml_key, toml_string, Source};
    let env = crate::load::env_map();
    let dir = manifest.map_or(cwd, |l| l.dir.as_path());
    let chain = crate::secrets::SecretChain::standard(Default::default(), dir, cwd, &env)
        .map_err(|e| InspectError::Secrets(e.to_string()))?;
    // servers start in loom's directory: the agent's storage, or a data-home directory of its own without a manifest
    let run_base = match manifest {
        Some(l) => server_run_base(&crate::storage::storage_dir(&l.manifest, &env)),
        None => crate::storage::data_home(&env).join("mcp-inspect"),
    };
    let place = McpPlace {
        manifest_dir: dir,
        run_base: &run_base,
        chain: &chain,
        env: &env,
    };
    if let Some(l) = manifest {
        if let Some(p) = l.manifest.providers.get(spec) {
            let loom_kernel::ProviderSpec::Configured { factory, config } = p else {
                return Err(InspectError::NotAServer(format!(
                    "[providers].{spec} in {} is not an mcp-server",
                    l.path.display()
                )));
            };
            if factory != "mcp-server" {
                return Err(InspectError::NotAServer(format!(
                    "[providers].{spec} in {} is a `{factory}` provider, not an mcp-server",
                    l.path.display()
                )));
            }
            let server = McpServers::default()
                .get_or_start(spec, config, &place)
                .map_err(InspectError::Start)?;
            return Ok(Inspected {
                handle: spec.to_string(),
                provider_line: None,
                server,
            });
        }
    }
    let mut table = toml::Table::new();
    // an existing file is a path however it is written (`server.mjs`, `dir/server.mjs`), never an npm name
    let as_path;
    let spec = if !spec.starts_with("./") && !spec.starts_with('/') && cwd.join(spec).is_file() {
        as_path = format!("./{spec}");
        as_path.as_str()
    } else {
        spec
    };
    let (handle, line) = match Source::from_spec_str(spec) {
        Some(Source::Path(p)) => {
            let stem = std::path::Path::new(&p)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "server".into());
            let ext = std::path::Path::new(&p).extension().and_then(|e| e.to_str()).unwrap_or("");
            let runner = match ext {
                "js" | "mjs" | "cjs" => Some("node"),
                "py" => Some("python3"),
                _ => None,
            };
            let abs = cwd.join(p.trim_start_matches("./")).display().to_string();
            let (command, args) = match runner {
                Some(r) => (r.to_string(), vec![abs.clone()]),
                None => (abs.clone(), vec![]),
            };
            table.insert("command".into(), toml::Value::String(command.clone()));
            table.insert("args".into(), toml::Value::Array(args.iter().cloned().map(toml::Value::String).collect()));
            let args_toml: Vec<String> = args.iter().map(|a| toml_string(a)).collect();
            let line = format!(
                "provider = \"mcp-server\", command = {}, args = [{}]",
                toml_string(&command),
                args_toml.join(", ")
            );
            (handle_of(&stem), line)
        }
        Some(Source::Git { .. }) => {
            return Err(InspectError::NotAServer(format!("{spec:?} is a git source; loom mcp inspect takes an npm package, a path or a [providers] handle")))
        }
        other => {
            let name = match other {
                Some(Source::Npm { name, version: Some(v) }) => format!("{name}@{v}"),
                Some(Source::Npm { name, version: None }) => name,
                _ => spec.to_string(),
            };
            if manifest.is_some() && !spec.starts_with('@') && !spec.starts_with("npm:") {
                let handles: Vec<&String> = manifest.map(|l| l.manifest.providers.keys().collect()).unwrap_or_default();
                return Err(InspectError::NotAServer(format!(
                    "{spec:?} is not a [providers] handle of the manifest (it has: {}); for an npm package write \
                     npm:{spec}",
                    if handles.is_empty() { "none".to_string() } else { handles.iter().map(|h| h.as_str()).collect::<Vec<_>>().join(", ") }
                )));
            }
            table.insert("npm".into(), toml::Value::String(name.clone()));
            let base = name.trim_start_matches('@').rsplit('/').next().unwrap_or(&name).split('@').next().unwrap_or("server");
            (handle_of(base), format!("provider = \"mcp-server\", npm = {}", toml_string(&name)))
        }
    };
    // named on the command line, not in a manifest: its messages name what was typed
    let server = McpServers::default()
        .get_or_start_named(&handle, Some(spec), &table, &place)
        .map_err(InspectError::Start)?;
    let provider_line = Some(format!("{} = {{ {line} }}", toml_key(&handle)));
    Ok(Inspected {
        handle,
        provider_line,
        server,
    })
}

/// A handle made from a package or file name: letters, digits and `_`.
fn handle_of(name: &str) -> String {
    let h: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    if h.is_empty() {
        "server".into()
    } else {
        h
    }
}
