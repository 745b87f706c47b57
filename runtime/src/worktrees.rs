//! The worktrees of isolated children (`isolation: worktree`): where they live, how one is made for a child, and what
//! `loom worktrees list|remove` shows and removes.
//!
//! Each is a detached git worktree of the parent repository's committed `HEAD`, made by loom (git sandboxed and
//! given nothing to run: `loom_tools::add_worktree`) in a directory of its own under the worktrees home — outside
//! the parent's working tree; one that would land inside the repository is refused. Next to it, `<id>.json` says for
//! whom it was made (for `list` only). Worktrees are kept after the child ends, for review; `remove` deletes the
//! directory (never anything outside the worktrees home) and prunes the repository its own `.git` file names.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use loom_tools::SandboxEnv;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

/// Where worktrees go: `$LOOM_WORKTREES_HOME`, else `$XDG_STATE_HOME/loom/worktrees`, else
/// `~/.local/state/loom/worktrees`.
pub fn worktrees_home(env: &BTreeMap<String, String>) -> PathBuf {
    if let Some(d) = env
        .get("LOOM_WORKTREES_HOME")
        .filter(|d| d.starts_with('/'))
    {
        PathBuf::from(d)
    } else if let Some(d) = env.get("XDG_STATE_HOME").filter(|d| d.starts_with('/')) {
        PathBuf::from(d).join("loom/worktrees")
    } else {
        PathBuf::from(env.get("HOME").map(String::as_str).unwrap_or("/"))
            .join(".local/state/loom/worktrees")
    }
}

/// What `<id>.json` records about a worktree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorktreeRecord {
    /// Its id (the directory's name).
    pub id: String,
    /// The checkout.
    pub path: PathBuf,
    /// The repository it was made from.
    pub repo: PathBuf,
    /// The agent that made it, and the profile its child runs.
    pub agent: String,
    /// The profile.
    pub profile: String,
    /// The child's task (its first line, at most 200 characters).
    pub task: String,
    /// When (seconds since the epoch).
    pub created: u64,
}

/// Whom a worktree is made for: the agent, the profile its child runs, and the child's task.
#[derive(Debug, Clone, Copy)]
pub struct Purpose<'a> {
    /// The agent.
    pub agent: &'a str,
    /// The profile.
    pub profile: &'a str,
    /// The task.
    pub task: &'a str,
}

/// A worktree made for a child.
#[derive(Debug, Clone)]
pub struct Made<T> {
    /// Its record.
    pub record: WorktreeRecord,
    /// The child's working directory: the parent's, at the same place below the repository's top.
    pub cwd: PathBuf,
    /// What `check` gave.
    pub checked: T,
}

/// Makes a worktree for `purpose`, from the repository holding `cwd` (the parent's working directory, canonical).
/// `check` sees the worktree's directory and the child's working directory in it once they are chosen, before git
/// checks anything out: its `Err` stops there. `Err`: why not (not in a repository, a repository without commits, a
/// worktrees home inside the repository, `check`, git's refusal), with nothing left behind.
pub async fn make_worktree<T>(
    cwd: &Path,
    env: &BTreeMap<String, String>,
    purpose: Purpose<'_>,
    check: impl FnOnce(&Path, &Path) -> Result<T, String>,
    sandbox: &SandboxEnv,
    cancel: &CancellationToken,
) -> Result<Made<T>, String> {
    let Purpose {
        agent,
        profile,
        task,
    } = purpose;
    let repo = loom_tools::find_repo(cwd).map_err(|e| format!("cannot make a worktree: {e}"))?;
    let home = worktrees_home(env);
    std::fs::create_dir_all(&home)
        .map_err(|e| format!("cannot create the worktrees home {}: {e}", home.display()))?;
    let home = std::fs::canonicalize(&home)
        .map_err(|e| format!("cannot resolve the worktrees home {}: {e}", home.display()))?;
    if home.starts_with(&repo.top) {
        return Err(format!(
            "the worktrees home {} lies inside the repository {}, so a child's checkout would be part of the parent's \
             tree; set LOOM_WORKTREES_HOME to a directory outside it",
            home.display(),
            repo.top.display()
        ));
    }
    let created = crate::approvals::now_secs();
    // a fresh directory: create_dir fails on a name taken, and the next name is tried
    let mut made = None;
    for attempt in 0..8u32 {
        let id = new_id(profile, created, attempt);
        let dest = home.join(&id);
        match std::fs::create_dir(&dest) {
            Ok(()) => {
                made = Some((id, dest));
                break;
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(format!(
                    "cannot create the worktree {}: {e}",
                    dest.display()
                ))
            }
        }
    }
    let Some((id, dest)) = made else {
        return Err(format!(
            "cannot find a free worktree name in {}",
            home.display()
        ));
    };
    let child_cwd = match &repo.below {
        Some(below) => dest.join(below),
        None => dest.clone(),
    };
    let checked = match check(&dest, &child_cwd) {
        Ok(t) => t,
        Err(e) => {
            let _ = std::fs::remove_dir(&dest);
            return Err(e);
        }
    };
    // the record is written before git checks anything out, so a failure leaves at most an empty directory to remove
    let record = WorktreeRecord {
        id: id.clone(),
        path: dest.clone(),
        repo: repo.top.clone(),
        agent: agent.to_string(),
        profile: profile.to_string(),
        task: first_line(task),
        created,
    };
    let side = home.join(format!("{id}.json"));
    if let Err(e) = write_record(&home, &record) {
        let _ = std::fs::remove_dir(&dest);
        return Err(format!(
            "cannot record the worktree in {}: {e}",
            side.display()
        ));
    }
    // undoes a checkout: the directory, the record, and git's own record of it in the repository
    let undo = || async {
        let _ = std::fs::remove_dir_all(&dest);
        let _ = std::fs::remove_file(&side);
        let _ = loom_tools::prune_worktrees(&repo.top, sandbox, &CancellationToken::new()).await;
    };
    if let Err(e) = loom_tools::add_worktree(&repo.top, &dest, sandbox, cancel).await {
        undo().await;
        return Err(format!(
            "git could not check out HEAD of {} into a worktree: {}",
            repo.top.display(),
            e.trim()
        ));
    }
    // the child works at its place in the checkout, which must be a real directory there: a directory that is not
    // committed is missing, and a link in HEAD could lead out of the checkout
    let real = std::fs::canonicalize(&child_cwd)
        .ok()
        .filter(|c| c.is_dir() && c.starts_with(&dest));
    if real.is_none() {
        undo().await;
        return Err(format!(
            "{} is not a directory of HEAD's checkout (is it committed, and not a link?)",
            repo.below
                .as_ref()
                .map_or_else(|| ".".to_string(), |b| b.display().to_string())
        ));
    }
    Ok(Made {
        record,
        cwd: child_cwd,
        checked,
    })
}

/// Writes `<id>.json` in `home` through a temporary file and a rename, so a reader never sees half a record.
fn write_record(home: &Path, record: &WorktreeRecord) -> std::io::Result<()> {
    let text = serde_json::to_string_pretty(record).map_err(std::io::Error::other)?;
    let side = home.join(format!("{}.json", record.id));
    let tmp = home.join(format!(".{}.json.tmp", record.id));
    let written = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, &side));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// A worktree id: the profile, the time and four hex digits from the clock's nanoseconds, the process and `attempt`.
fn new_id(profile: &str, created: u64, attempt: u32) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let salt = (nanos ^ std::process::id().rotate_left(16) ^ attempt.wrapping_mul(0x9e37)) & 0xffff;
    format!("{profile}-{created}-{salt:04x}")
}

fn first_line(task: &str) -> String {
    let line = task.lines().next().unwrap_or_default();
    line.chars().filter(|c| !c.is_control()).take(200).collect()
}

/// One worktree `loom worktrees list` shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Its id.
    pub id: String,
    /// Its directory.
    pub path: PathBuf,
    /// What `<id>.json` says, when it can be read.
    pub record: Option<WorktreeRecord>,
}

/// Every worktree in the worktrees home (directories, oldest id first), with its record.
pub fn list_worktrees(env: &BTreeMap<String, String>) -> Result<Vec<Listed>, String> {
    let home = worktrees_home(env);
    let entries = match std::fs::read_dir(&home) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("cannot read {}: {e}", home.display())),
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let is_dir = e.file_type().map(|t| t.is_dir()).unwrap_or(false);
        let id = e.file_name().to_string_lossy().into_owned();
        if !is_dir || id.starts_with('.') {
            continue;
        }
        let record = std::fs::read_to_string(home.join(format!("{id}.json")))
            .ok()
            .and_then(|t| serde_json::from_str::<WorktreeRecord>(&t).ok());
        out.push(Listed {
            id,
            path: e.path(),
            record,
        });
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}

/// Why a worktree was not removed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemoveError {
    /// No worktree has that id (or it is no id at all).
    #[error("{0}")]
    NoSuch(String),
    /// It is there but could not be removed (or its repository not pruned).
    #[error("{0}")]
    Failed(String),
}

/// Removes worktree `id`: its directory (only ever one directly in the worktrees home, never through a link, and only
/// with its `<id>.json` record) and the record, then prunes the recorded repository when the checkout's `.git` file
/// names it too. Returns that repository, when there was one.
pub async fn remove_worktree(
    env: &BTreeMap<String, String>,
    id: &str,
    sandbox: &SandboxEnv,
) -> Result<Option<PathBuf>, RemoveError> {
    if id.is_empty() || id.starts_with('.') || id.contains('/') || id.contains('\0') {
        return Err(RemoveError::NoSuch(format!(
            "{id:?} is not a worktree id (see `loom worktrees list`)"
        )));
    }
    let home = worktrees_home(env);
    let dest = home.join(id);
    match std::fs::symlink_metadata(&dest) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(RemoveError::Failed(format!(
                "{} is not a directory; nothing was removed",
                dest.display()
            )))
        }
        Err(_) => {
            return Err(RemoveError::NoSuch(format!(
                "there is no worktree {id:?} in {} (see `loom worktrees list`)",
                home.display()
            )))
        }
    }
    // only a directory loom made and recorded: the worktrees home may be set to a directory that holds other things
    let record = std::fs::read_to_string(home.join(format!("{id}.json")))
        .ok()
        .and_then(|t| serde_json::from_str::<WorktreeRecord>(&t).ok())
        .filter(|r| r.id == id)
        .ok_or_else(|| {
            RemoveError::NoSuch(format!(
                "{} has no record ({id}.json) of a worktree loom made, so loom leaves it alone; remove it yourself \
                 if it is one",
                dest.display()
            ))
        })?;
    // the repository to prune: the recorded one, when the checkout's own `.git` file (which its agent could write)
    // agrees
    let repo = std::fs::read_to_string(dest.join(".git"))
        .ok()
        .and_then(|t| repo_of_gitdir(&t))
        .filter(|r| *r == record.repo);
    std::fs::remove_dir_all(&dest)
        .map_err(|e| RemoveError::Failed(format!("cannot remove {}: {e}", dest.display())))?;
    let _ = std::fs::remove_file(home.join(format!("{id}.json")));
    if let Some(top) = &repo {
        if top.join(".git").is_dir() {
            loom_tools::prune_worktrees(top, sandbox, &CancellationToken::new())
                .await
                .map_err(|e| {
                    RemoveError::Failed(format!(
                        "removed {}, but git could not prune {}'s record of it: {}",
                        dest.display(),
                        top.display(),
                        e.trim()
                    ))
                })?;
        }
    }
    Ok(repo)
}

/// [`remove_worktree`] for a command line: on a runtime of its own, with the sandbox machinery next to the running
/// executable.
pub fn remove_worktree_blocking(
    env: &BTreeMap<String, String>,
    id: &str,
) -> Result<Option<PathBuf>, RemoveError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| RemoveError::Failed(format!("cannot start a runtime: {e}")))?;
    rt.block_on(remove_worktree(env, id, &SandboxEnv::default()))
}

/// The repository a linked worktree's `.git` file names (`gitdir: <top>/.git/worktrees/<name>`).
fn repo_of_gitdir(text: &str) -> Option<PathBuf> {
    let dir = Path::new(text.strip_prefix("gitdir: ")?.trim_end());
    let worktrees = dir.parent()?;
    let git = worktrees.parent()?;
    (worktrees.file_name()? == "worktrees" && git.file_name()? == ".git" && dir.is_absolute())
        .then(|| git.parent().map(Path::to_path_buf))
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_home_follows_the_environment() {
        let env = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>()
        };
        assert_eq!(
            worktrees_home(&env(&[("HOME", "/home/u")])),
            Path::new("/home/u/.local/state/loom/worktrees")
        );
        assert_eq!(
            worktrees_home(&env(&[("HOME", "/home/u"), ("XDG_STATE_HOME", "/st")])),
            Path::new("/st/loom/worktrees")
        );
        assert_eq!(
            worktrees_home(&env(&[
                ("LOOM_WORKTREES_HOME", "/w"),
                ("XDG_STATE_HOME", "/st")
            ])),
            Path::new("/w")
        );
    }

    #[test]
    fn only_a_linked_worktree_s_gitdir_names_a_repository() {
        assert_eq!(
            repo_of_gitdir("gitdir: /src/proj/.git/worktrees/rev-1\n"),
            Some(PathBuf::from("/src/proj"))
        );
        assert_eq!(repo_of_gitdir("gitdir: /src/proj/.git/modules/x\n"), None);
        assert_eq!(repo_of_gitdir("gitdir: rel/.git/worktrees/x\n"), None);
        assert_eq!(repo_of_gitdir("nonsense"), None);
    }

    #[test]
    fn a_directory_without_loom_s_record_is_left_alone() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir(home.path().join("Documents")).unwrap();
        std::fs::write(home.path().join("Documents/keep.txt"), "mine").unwrap();
        let env = BTreeMap::from([(
            "LOOM_WORKTREES_HOME".to_string(),
            home.path().to_string_lossy().into_owned(),
        )]);
        let e = rt
            .block_on(remove_worktree(&env, "Documents", &SandboxEnv::default()))
            .unwrap_err();
        assert!(
            matches!(&e, RemoveError::NoSuch(m) if m.contains("has no record")),
            "{e}"
        );
        assert!(home.path().join("Documents/keep.txt").is_file());
    }

    #[test]
    fn ids_that_could_leave_the_home_are_refused() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let env = BTreeMap::from([(
            "LOOM_WORKTREES_HOME".to_string(),
            "/nonexistent-wt".to_string(),
        )]);
        for bad in ["", "../x", ".hidden", "a/b"] {
            let e = rt
                .block_on(remove_worktree(&env, bad, &SandboxEnv::default()))
                .unwrap_err();
            assert!(
                matches!(&e, RemoveError::NoSuch(m) if m.contains("is not a worktree id")),
                "{bad}: {e}"
            );
        }
    }
}
