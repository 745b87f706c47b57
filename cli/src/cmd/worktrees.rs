//! `loom worktrees list [--json]` / `loom worktrees remove ID`: the git worktrees isolated children ran in
//! (`isolation: worktree` in a subagent profile), kept for review after the child ends.
//!
//! They live in the worktrees home (`$LOOM_WORKTREES_HOME`, else `$XDG_STATE_HOME/loom/worktrees`, else
//! `~/.local/state/loom/worktrees`). `remove` deletes one directory there (never anything outside it) and prunes
//! the repository's record of it. Exit codes: 0 listed / removed, 1 it could not be removed, 2 no such worktree.

use loom_runtime::env_map;
use loom_runtime::frontend::{
    list_worktrees, remove_worktree_blocking, worktrees_home, WorktreeRemoveError,
};

use crate::exit;
use crate::output::{emit, fail};

/// Arguments of `loom worktrees`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// List the worktrees, with the repository, agent, profile and task each was made for.
    List {
        /// Print the list as JSON (a `version`, the worktrees home and one object per worktree).
        #[arg(long)]
        json: bool,
    },
    /// Remove one worktree (its directory and the repository's record of it).
    Remove {
        /// The worktree's id (see `loom worktrees list`).
        id: String,
    },
}

/// Runs `loom worktrees`.
pub fn run(args: Args) -> i32 {
    let env = env_map();
    let home = worktrees_home(&env);
    match args.action {
        Action::List { json } => {
            let list = match list_worktrees(&env) {
                Ok(l) => l,
                Err(e) => return fail(exit::FAILED, &e),
            };
            if json {
                let items: Vec<serde_json::Value> = list
                    .iter()
                    .map(|w| {
                        serde_json::json!({
                            "id": w.id,
                            "path": w.path,
                            "repo": w.record.as_ref().map(|r| &r.repo),
                            "agent": w.record.as_ref().map(|r| &r.agent),
                            "profile": w.record.as_ref().map(|r| &r.profile),
                            "task": w.record.as_ref().map(|r| &r.task),
                            "created": w.record.as_ref().map(|r| r.created),
                        })
                    })
                    .collect();
                let doc = serde_json::json!({
                    "version": 1,
                    "home": home,
                    "worktrees": items,
                });
                emit(&format!(
                    "{}\n",
                    serde_json::to_string_pretty(&doc).unwrap_or_default()
                ));
                return exit::OK;
            }
            if list.is_empty() {
                emit(&format!("no worktrees in {}\n", home.display()));
                return exit::OK;
            }
            let mut text = String::new();
            for w in &list {
                text.push_str(&format!("{}  {}\n", w.id, w.path.display()));
                match &w.record {
                    Some(r) => text.push_str(&format!(
                        "    from {} for {} (profile {}): {}\n",
                        r.repo.display(),
                        r.agent,
                        r.profile,
                        // the model wrote the task: no escape sequence of it reaches the terminal
                        r.task
                            .chars()
                            .filter(|c| !c.is_control())
                            .collect::<String>()
                    )),
                    None => text.push_str("    (no record of what it was made for)\n"),
                }
            }
            emit(&text);
            exit::OK
        }
        Action::Remove { id } => match remove_worktree_blocking(&env, &id) {
            Ok(repo) => {
                emit(&format!(
                    "removed {}{}\n",
                    home.join(&id).display(),
                    repo.map(|r| format!(" (and its record in {})", r.display()))
                        .unwrap_or_default()
                ));
                exit::OK
            }
            Err(e @ WorktreeRemoveError::NoSuch(_)) => fail(exit::USAGE, &e.to_string()),
            Err(e) => fail(exit::FAILED, &e.to_string()),
        },
    }
}
