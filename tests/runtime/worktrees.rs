//! `isolation: worktree` through the real binary: a profile's child runs in a detached git worktree of the committed
//! `HEAD` (not the parent's uncommitted files), outside the parent's tree, its relative grants resolving there (its
//! writes land in the worktree, the parent's tree stays untouched and out of its reach); the result names the
//! worktree, which is kept until `loom worktrees remove`; outside a git repository the call fails, nothing started.

use std::path::{Path, PathBuf};
use std::process::Command;

use loom_tests::Scratch;

use super::{results, sandbox_available, updates};

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn lead(s: &Scratch) {
    s.write(
        "agent.toml",
        &format!(
            "[agent]\nname = \"lead\"\n\n[harness]\nprovider = \"test\"\nscript = [[\n\
             {{ call = {{ tool = \"delegate\", input = {{ agent = \"isolated\", task = \"look\" }} }} }},\n\
             {{ say = \"done\" }},\n]]\n\n\
             [harnesses.iso]\nprovider = \"test\"\nscript = [[\n\
             {{ call = {{ tool = \"bash\", input = {{ command = \"cat notes.txt > seen.txt; pwd > where.txt\" }} }} }},\n\
             {{ call = {{ tool = \"bash\", input = {{ command = \"echo x > {}/escape.txt\" }} }} }},\n\
             {{ say = \"looked\" }},\n]]\n\n\
             [session]\nprovider = \"in-memory\"\n\n[tools]\nbash = \"builtin\"\ndelegate = \"builtin\"\n\n\
             [capabilities]\nbash = {{ commands = \"*\", paths = [\"./\"] }}\ndelegate = {{ agents = [\"isolated\"] }}\n",
            s.path().display()
        ),
    );
    s.write(
        ".loom/agents/isolated.md",
        "---\nname: isolated\ndescription: Works on a checkout of its own\nmodel: iso\ntools: [bash]\n\
         isolation: worktree\n---\nLook around.\n",
    );
}

#[test]
fn a_worktree_child_works_on_committed_head_outside_the_parent_s_tree() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    let home = tempfile::tempdir().unwrap();
    let home_s = home.path().to_string_lossy().into_owned();
    let env = [("LOOM_WORKTREES_HOME", home_s.as_str())];
    lead(&s);
    s.write("notes.txt", "committed\n");
    s.write(".gitignore", ".loom-data/\n");
    git(s.path(), &["init", "-q"]);
    git(s.path(), &["add", "-A"]);
    git(s.path(), &["commit", "-q", "-m", "start"]);
    // the parent's uncommitted change is not what the child sees
    s.write("notes.txt", "uncommitted\n");

    let run = s.loom_env(&["prompt", "agent.toml", "go", "--format", "jsonl"], &env);
    run.expect_code(0);
    let r = results(&updates(&run));
    assert_eq!(r.len(), 1, "{r:#?}");
    assert_eq!(r[0].0, "completed", "{r:#?}");
    let text = &r[0].1;
    assert!(
        text.starts_with("looked\n[worked in the git worktree "),
        "{text}"
    );
    let path = PathBuf::from(
        text.split("[worked in the git worktree ")
            .nth(1)
            .and_then(|t| t.split(" (id ").next())
            .unwrap(),
    );
    let id = path.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        text.contains(&format!("`loom worktrees remove {id}` deletes it]")),
        "{text}"
    );
    // committed HEAD, worked on in the worktree, outside the parent's tree
    assert!(
        path.starts_with(std::fs::canonicalize(home.path()).unwrap()),
        "{}",
        path.display()
    );
    assert_eq!(
        std::fs::read_to_string(path.join("seen.txt")).unwrap(),
        "committed\n"
    );
    assert_eq!(
        std::fs::read_to_string(path.join("where.txt"))
            .unwrap()
            .trim(),
        path.to_string_lossy()
    );
    assert!(!s.path().join("seen.txt").exists());
    assert!(
        !s.path().join("escape.txt").exists(),
        "the child wrote into the parent's tree"
    );
    assert_eq!(
        std::fs::read_to_string(s.path().join("notes.txt")).unwrap(),
        "uncommitted\n"
    );
    assert!(git(s.path(), &["worktree", "list"]).contains(&path.to_string_lossy().into_owned()));

    // kept for review, listed, then removed with the repository's record of it
    let list = s.loom_env(&["worktrees", "list"], &env);
    list.expect_code(0)
        .stdout_has(&id)
        .stdout_has("for lead (profile isolated): look");
    let gone = s.loom_env(&["worktrees", "remove", &id], &env);
    gone.expect_code(0).stdout_has("removed ");
    assert!(!path.exists());
    assert!(!git(s.path(), &["worktree", "list"]).contains(&path.to_string_lossy().into_owned()));
    let again = s.loom_env(&["worktrees", "remove", &id], &env);
    assert_eq!(again.code(), 2, "{}", again.stderr());
    again.stderr_has("there is no worktree");
    s.loom_env(&["worktrees", "remove", "../x"], &env)
        .stderr_has("is not a worktree id");
}

#[test]
fn outside_a_git_repository_a_worktree_child_is_not_started() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    let home = tempfile::tempdir().unwrap();
    let home_s = home.path().to_string_lossy().into_owned();
    lead(&s);
    let run = s.loom_env(
        &["prompt", "agent.toml", "go", "--format", "jsonl"],
        &[("LOOM_WORKTREES_HOME", home_s.as_str())],
    );
    run.expect_code(0);
    let r = results(&updates(&run));
    assert_eq!(r[0].0, "failed", "{r:#?}");
    assert!(
        r[0].1.starts_with(
            "delegate: profile \"isolated\" runs in a git worktree, but cannot make a worktree: "
        ),
        "{r:#?}"
    );
    assert!(r[0].1.contains("is not inside a git repository"), "{r:#?}");
    assert!(r[0].1.ends_with("; nothing was started"), "{r:#?}");
    assert_eq!(std::fs::read_dir(home.path()).unwrap().count(), 0);
}
