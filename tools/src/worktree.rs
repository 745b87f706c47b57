//! Git worktrees for children that run in isolation (`isolation: worktree`): a detached checkout of the committed
//! `HEAD` in a directory loom made outside the parent's tree, and the pruning of the repository's record of one that
//! was removed.
//!
//! git runs exactly as for the git tools (`git.rs`): sandboxed, with no system or user configuration, hooks,
//! fsmonitor and every filter, diff and merge driver off — a checkout would otherwise run the repository's smudge
//! filters and its `post-checkout` hook — under the kernel's [`loom_kernel::git_worktree_row`]: it writes only the
//! repository's `.git` (its hooks and configuration stay read-only) and the new checkout.

use std::ffi::OsString;
use std::path::Path;

use loom_kernel::git_worktree_row;
use tokio_util::sync::CancellationToken;

use super::git::{loom_env, run_git};
use super::SandboxEnv;

/// Checks out the committed `HEAD` of the repository at `top` (canonical, holding a `.git` directory) into `dest` (an
/// empty directory) as a detached worktree. `Err`: why not, with git's words.
pub async fn add_worktree(
    top: &Path,
    dest: &Path,
    sandbox: &SandboxEnv,
    cancel: &CancellationToken,
) -> Result<(), String> {
    let args = [
        "worktree".into(),
        "add".into(),
        "--detach".into(),
        "--quiet".into(),
        dest.into(),
        "HEAD".into(),
    ];
    worktree_git(top, Some(dest), args.into(), sandbox, cancel).await
}

/// Drops the repository's record of worktrees whose directory is gone (`git worktree prune`).
pub async fn prune_worktrees(
    top: &Path,
    sandbox: &SandboxEnv,
    cancel: &CancellationToken,
) -> Result<(), String> {
    worktree_git(
        top,
        None,
        vec!["worktree".into(), "prune".into()],
        sandbox,
        cancel,
    )
    .await
}

/// Runs `git ARGS` on the repository at `top` under the kernel's worktree row (writing `dest` too, when given).
async fn worktree_git(
    top: &Path,
    dest: Option<&Path>,
    args: Vec<OsString>,
    sandbox: &SandboxEnv,
    cancel: &CancellationToken,
) -> Result<(), String> {
    let row = git_worktree_row(
        &top.display().to_string(),
        dest.map(|d| d.display().to_string()).as_deref(),
    );
    // the checkout's own `.git` file and the committed tree (`.envrc`, `AGENTS.md` …) are what `dest` is made for
    let env = loom_env(top, "worktree");
    let out = run_git(&env, sandbox, top, row, args, dest, cancel).await?;
    if out.is_error || out.interrupted {
        return Err(out.text);
    }
    Ok(())
}
