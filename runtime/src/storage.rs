//! Per-agent storage: the one directory loom guarantees each agent.

use std::collections::BTreeMap;
use std::path::PathBuf;

use loom_kernel::{is_safe_id, Manifest};

/// The storage directory of `manifest`: `$LOOM_DATA_HOME/agents/<id>`, else `$XDG_DATA_HOME/loom/agents/<id>`, else
/// `~/.local/share/loom/agents/<id>`, where `<id>` is `[agent].storage_id` or the agent's name; inside a run
/// ([`run_id`]) its own `runs/<run>` below that. Computed, not created.
pub fn storage_dir(manifest: &Manifest, env: &BTreeMap<String, String>) -> PathBuf {
    let agent = agent_dir(manifest, env);
    match run_id(env) {
        Ok(None) => agent,
        Ok(Some(run)) => agent.join("runs").join(run),
        // boot refuses an unusable run id ([`run_id`]'s error); anything else that only shows the directory gets
        // one that cannot climb and that no valid run id names
        Err(e) => agent.join("runs").join(format!("_invalid_{}", e.var)),
    }
}

/// Why the run id the environment names cannot scope storage.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{var} = {value:?} cannot name a run: a run id is 1 to {max} characters from A-Z a-z 0-9 . _ -, starting with a \
     letter or a digit (it becomes a directory of the agent's storage)",
    max = loom_kernel::MAX_ID_LEN
)]
pub struct RunIdError {
    /// The variable it came from (`--run-id` sets `LOOM_RUN_ID`).
    pub var: &'static str,
    /// What it held (an id, never a secret).
    pub value: String,
}

/// The run whose state this process keeps apart from other runs of the same agent (its session log, remembered
/// answers, server state): `LOOM_RUN_ID` (what `--run-id` sets), else one made from the ids the engine running loom
/// gives each job — GitHub Actions' `GITHUB_RUN_ID` (`gh-<id>`, with `-<GITHUB_RUN_ATTEMPT>`) and Kubernetes
/// Indexed Jobs' `JOB_COMPLETION_INDEX` (`-<index>`, or `k8s-<index>` alone) — else none (one state per agent).
pub fn run_id(env: &BTreeMap<String, String>) -> Result<Option<String>, RunIdError> {
    let get = |k: &str| env.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
    let checked = |var: &'static str, v: &str| {
        if is_safe_id(v) {
            Ok(v.to_string())
        } else {
            Err(RunIdError {
                var,
                value: v.to_string(),
            })
        }
    };
    if let Some(v) = get("LOOM_RUN_ID") {
        return checked("LOOM_RUN_ID", v).map(Some);
    }
    let mut run = match get("GITHUB_RUN_ID") {
        Some(v) => {
            let mut r = format!("gh-{}", checked("GITHUB_RUN_ID", v)?);
            if let Some(a) = get("GITHUB_RUN_ATTEMPT") {
                r = format!("{r}-{}", checked("GITHUB_RUN_ATTEMPT", a)?);
            }
            Some(r)
        }
        None => None,
    };
    if let Some(i) = get("JOB_COMPLETION_INDEX") {
        let i = checked("JOB_COMPLETION_INDEX", i)?;
        run = Some(match run {
            Some(r) => format!("{r}-{i}"),
            None => format!("k8s-{i}"),
        });
    }
    match run {
        Some(r) if !is_safe_id(&r) => Err(RunIdError {
            var: "GITHUB_RUN_ID",
            value: r,
        }),
        r => Ok(r),
    }
}

/// The agent's own directory under the data home, shared by all its runs.
fn agent_dir(manifest: &Manifest, env: &BTreeMap<String, String>) -> PathBuf {
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

/// loom's data directory: `$LOOM_DATA_HOME`, else `$XDG_DATA_HOME/loom`, else `~/.local/share/loom` — the home
/// being `$HOME` when it is absolute, else the user's home in the password database (a process started with an
/// empty environment still finds its own), else `/`.
pub fn data_home(env: &BTreeMap<String, String>) -> PathBuf {
    if let Some(d) = env.get("LOOM_DATA_HOME").filter(|d| !d.is_empty()) {
        PathBuf::from(d)
    } else if let Some(d) = env.get("XDG_DATA_HOME").filter(|d| d.starts_with('/')) {
        PathBuf::from(d).join("loom")
    } else {
        let home = env
            .get("HOME")
            .filter(|h| h.starts_with('/'))
            .map(PathBuf::from)
            // HOME unset, empty or relative: std looks the user up in the password database
            .or_else(|| std::env::home_dir().filter(|h| h.is_absolute()))
            .unwrap_or_else(|| PathBuf::from("/"));
        home.join(".local/share/loom")
    }
}

/// Where each confined command's owed sweep is recorded (`sweeps` in loom's data directory, made absolute), so what
/// a command created at a protected name is moved aside even when its loom dies first
/// ([`loom_sandbox::sweep_earlier`]). It is an authority file: read-only in every command's view.
pub fn sweep_records_dir(env: &BTreeMap<String, String>) -> PathBuf {
    let dir = data_home(env).join("sweeps");
    std::path::absolute(&dir).unwrap_or(dir)
}

/// loom's models directory: `$LOOM_DATA_HOME/models`, else `$XDG_DATA_HOME/loom/models`, else
/// `~/.local/share/loom/models`.
pub fn models_dir(env: &BTreeMap<String, String>) -> PathBuf {
    data_home(env).join("models")
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

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_run_id_comes_from_loom_then_from_the_engine() {
        let none: Result<Option<String>, RunIdError> = Ok(None);
        assert_eq!(run_id(&env(&[])), none);
        assert_eq!(run_id(&env(&[("LOOM_RUN_ID", "  ")])), none);
        let some = |s: &str| Ok(Some(s.to_string()));
        assert_eq!(
            run_id(&env(&[("LOOM_RUN_ID", "nightly-7")])),
            some("nightly-7")
        );
        // loom's own wins over the engine's
        assert_eq!(
            run_id(&env(&[("LOOM_RUN_ID", "mine"), ("GITHUB_RUN_ID", "42")])),
            some("mine")
        );
        assert_eq!(run_id(&env(&[("GITHUB_RUN_ID", "42")])), some("gh-42"));
        assert_eq!(
            run_id(&env(&[
                ("GITHUB_RUN_ID", "42"),
                ("GITHUB_RUN_ATTEMPT", "2")
            ])),
            some("gh-42-2")
        );
        assert_eq!(
            run_id(&env(&[("JOB_COMPLETION_INDEX", "3")])),
            some("k8s-3")
        );
        assert_eq!(
            run_id(&env(&[
                ("GITHUB_RUN_ID", "42"),
                ("JOB_COMPLETION_INDEX", "3")
            ])),
            some("gh-42-3")
        );
        // nothing that could climb, hide or read as an option names a run
        for (var, bad) in [
            ("LOOM_RUN_ID", "../x"),
            ("LOOM_RUN_ID", ".hidden"),
            ("LOOM_RUN_ID", "-rf"),
            ("LOOM_RUN_ID", "a/b"),
            ("GITHUB_RUN_ID", "1/../../x"),
            ("JOB_COMPLETION_INDEX", ".."),
        ] {
            let e = run_id(&env(&[(var, bad)])).unwrap_err();
            assert_eq!((e.var, e.value.as_str()), (var, bad));
            assert!(
                e.to_string()
                    .starts_with(&format!("{var} = {bad:?} cannot name a run")),
                "{e}"
            );
        }
    }

    #[test]
    fn the_data_directory_is_absolute_even_without_a_usable_home() {
        assert_eq!(
            data_home(&env(&[("HOME", "/h")])),
            PathBuf::from("/h/.local/share/loom")
        );
        for e in [env(&[]), env(&[("HOME", "")]), env(&[("HOME", "rel")])] {
            let d = data_home(&e);
            assert!(d.is_absolute() && d.ends_with(".local/share/loom"), "{d:?}");
            assert!(sweep_records_dir(&e).starts_with(&d));
        }
    }

    #[test]
    fn a_run_has_storage_of_its_own_below_the_agent() {
        let m =
            loom_kernel::parse_manifest("[agent]\nname = \"a\"\n", "agent.toml", &BTreeMap::new())
                .unwrap();
        let base = env(&[("LOOM_DATA_HOME", "/d")]);
        assert_eq!(storage_dir(&m, &base), PathBuf::from("/d/agents/a"));
        let mut run = base.clone();
        run.insert("LOOM_RUN_ID".into(), "r1".into());
        assert_eq!(storage_dir(&m, &run), PathBuf::from("/d/agents/a/runs/r1"));
        run.insert("LOOM_RUN_ID".into(), "../../etc".into());
        assert_eq!(
            storage_dir(&m, &run),
            PathBuf::from("/d/agents/a/runs/_invalid_LOOM_RUN_ID")
        );
    }

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
