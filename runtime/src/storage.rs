//! Per-agent storage: the one directory loom guarantees each agent.

use std::collections::BTreeMap;
use std::path::PathBuf;

use loom_kernel::Manifest;

/// The storage directory of `manifest`: `$LOOM_DATA_HOME/agents/<id>`, else `$XDG_DATA_HOME/loom/agents/<id>`, else
/// `~/.local/share/loom/agents/<id>`, where `<id>` is `[agent].storage_id` or the agent's name. Computed, not
/// created.
pub fn storage_dir(manifest: &Manifest, env: &BTreeMap<String, String>) -> PathBuf {
    let id = manifest
        .agent
        .storage_id
        .as_deref()
        .unwrap_or(&manifest.agent.name);
    let id: String = id
        .chars()
        .map(|c| if c == '/' || c == '\0' { '_' } else { c })
        .collect();
    let root = if let Some(d) = env.get("LOOM_DATA_HOME").filter(|d| !d.is_empty()) {
        PathBuf::from(d)
    } else if let Some(d) = env.get("XDG_DATA_HOME").filter(|d| d.starts_with('/')) {
        PathBuf::from(d).join("loom")
    } else {
        PathBuf::from(env.get("HOME").map(String::as_str).unwrap_or("/")).join(".local/share/loom")
    };
    root.join("agents").join(id)
}
