//! The row a git inspection tool (`git_status`, `git_diff`, `git_log`, `git_show`, `git_blame`, `git_branches`) runs
//! under, once the kernel has allowed the tool to read the repository.
//!
//! The tool's own grant is a file grant (`read_paths` / `paths`); the call asks to read the repository's top
//! directory (its work tree, `.git` included), and only when that is allowed does git run — in the OS sandbox, under
//! the row built here from the decided path alone: read-only over the repository and nothing else of the project,
//! no network, no inherited environment. A hostile repository's configuration that still manages to start a program
//! starts it in that view: it can neither change a file nor reach the network.

use crate::lattice::grant::Row;
use crate::lattice::value::Value;

/// The sandbox row of a git inspection of the repository whose top directory (canonical, absolute) is `repo`:
/// `{ commands = ["git"], env = [], read_paths = [repo] }` — no `paths` (nothing writable), no `network`.
pub fn git_inspection_row(repo: &str) -> Row {
    Row::from_pairs([
        ("commands", Value::strs(["git"])),
        ("read_paths", Value::strs([repo])),
        ("env", Value::List(Vec::new())),
    ])
}

/// The sandbox row of a git command that changes which worktrees the repository at `repo` has: `git worktree add` of
/// a new checkout at `dest` (an empty directory loom made) or `git worktree prune` (no `dest`). It writes the
/// repository's `.git` as an explicit `.git` root (so its hooks and configuration stay read-only) and `dest`, reads
/// the repository, and has no network and no inherited environment.
pub fn git_worktree_row(repo: &str, dest: Option<&str>) -> Row {
    let git = format!("{}/.git", repo.trim_end_matches('/'));
    let mut paths = vec![git.as_str()];
    paths.extend(dest);
    Row::from_pairs([
        ("commands", Value::strs(["git"])),
        ("paths", Value::strs(paths)),
        ("read_paths", Value::strs([repo])),
        ("env", Value::List(Vec::new())),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::sandbox_row::sandbox_row_refusal;

    #[test]
    fn the_row_reads_the_repository_only_and_the_sandbox_can_express_it() {
        let row = git_inspection_row("/w/repo");
        assert_eq!(
            row.to_toml(),
            r#"{ commands = ["git"], env = [], read_paths = ["/w/repo"] }"#
        );
        assert!(row.get("paths").is_none());
        assert!(row.get("network").is_none());
        assert_eq!(sandbox_row_refusal(&row), None);
    }

    #[test]
    fn the_worktree_row_writes_the_git_directory_and_the_new_checkout_only() {
        let row = git_worktree_row("/w/repo", Some("/s/wt/bg-1"));
        assert_eq!(
            row.to_toml(),
            r#"{ commands = ["git"], env = [], paths = ["/s/wt/bg-1", "/w/repo/.git"], read_paths = ["/w/repo"] }"#
        );
        assert!(row.get("network").is_none());
        assert_eq!(sandbox_row_refusal(&row), None);
        assert_eq!(
            git_worktree_row("/w/repo", None).get("paths"),
            Some(&Value::strs(["/w/repo/.git"]))
        );
    }
}
