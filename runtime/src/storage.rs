//! Per-agent storage: the one directory loom guarantees each agent.

use std::collections::BTreeMap;
use std::path::PathBuf;

use loom_kernel::{is_safe_id, Manifest};

/// The storage directory of `manifest`: `$LOOM_DATA_HOME/agents/<id>`, else `$XDG_DATA_HOME/loom/agents/<id>`, else
/// `~/.local/share/loom/agents/<id>`, where `<id>` is `[agent].storage_id` or the agent's name. Computed, not
/// created.
pub fn storage_dir(manifest: &Manifest, env: &BTreeMap<String, String>) -> PathBuf {
    let id = manifest
        .agent
        .storage_id
        .as_deref()
        .unwrap_or(&manifest.agent.name);
    // the manifest parser refuses anything but a safe identifier; a manifest built in code that holds one anyway
    // still gets a single component that cannot climb (no `/`, no `.`)
    let id: String = if is_safe_id(id) {
        id.to_string()
    } else {
        let s: String = id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        if s.is_empty() {
            "_".into()
        } else {
            s
        }
    };
    data_home(env).join("agents").join(id)
}

/// loom's data directory: `$LOOM_DATA_HOME`, else `$XDG_DATA_HOME/loom`, else `~/.local/share/loom`.
pub fn data_home(env: &BTreeMap<String, String>) -> PathBuf {
    if let Some(d) = env.get("LOOM_DATA_HOME").filter(|d| !d.is_empty()) {
        PathBuf::from(d)
    } else if let Some(d) = env.get("XDG_DATA_HOME").filter(|d| d.starts_with('/')) {
        PathBuf::from(d).join("loom")
    } else {
        PathBuf::from(env.get("HOME").map(String::as_str).unwrap_or("/")).join(".local/share/loom")
    }
}

/// The file in a storage directory naming the manifest that owns it.
pub const OWNER_FILE: &str = ".loom-manifest";

/// Creates the storage directory `dir` for the manifest at `manifest` (canonical path) and records its owner. Returns
/// a collision warning when another manifest file already owns the directory (two manifests sharing a `storage_id`
/// from different places: legitimate, but worth flagging).
pub fn ensure_storage(
    dir: &std::path::Path,
    manifest: &std::path::Path,
) -> std::io::Result<Option<String>> {
    std::fs::create_dir_all(dir)?;
    let owner = dir.join(OWNER_FILE);
    let me = manifest.display().to_string();
    match std::fs::read_to_string(&owner) {
        Ok(prev) if prev.trim() == me => Ok(None),
        Ok(prev) => Ok(Some(format!(
            "storage {} is shared with another manifest ({}); set [agent].storage_id to keep their state apart",
            dir.display(),
            prev.trim()
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::write(&owner, format!("{me}\n"))?;
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_is_created_and_a_second_owner_is_flagged() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("agents/a");
        assert_eq!(
            ensure_storage(&dir, std::path::Path::new("/x/agent.toml")).unwrap(),
            None
        );
        assert!(dir.is_dir());
        assert_eq!(
            ensure_storage(&dir, std::path::Path::new("/x/agent.toml")).unwrap(),
            None
        );
        let w = ensure_storage(&dir, std::path::Path::new("/y/agent.toml"))
            .unwrap()
            .unwrap();
        assert!(
            w.contains("/x/agent.toml") && w.contains("storage_id"),
            "{w}"
        );
    }
}
