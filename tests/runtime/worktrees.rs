//! `isolation: worktree` through the real binary: a profile's child runs in a detached git worktree of the committed
//! `HEAD` (not the parent's uncommitted files), outside the parent's tree, its relative grants resolving there (its
//! writes land in the worktree, the parent's tree stays untouched and out of its reach); the result names the
//! worktree, which is kept until `loom worktrees remove`. Refused, nothing started and nothing left (no directory or
//! record in the worktrees home, nothing in git's list): outside a git repository, in one without a commit, with a
//! grant that would climb out of the worktree, and where the lead's directory is not a real directory of HEAD's
//! checkout (not committed, or committed as a link out of it); and a child that does not boot after its checkout was
//! made, whose worktree is then removed.

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

/// The lead's manifest and the `isolated` profile in the scratch directory, where the lead works; the profile's
/// model is the `iso` harness: a child that reads, writes in its place, and tries to write into the parent's tree.
fn lead(s: &Scratch) {
    let iso = format!(
        "[harnesses.iso]\nprovider = \"test\"\nscript = [[\n\
         {{ call = {{ tool = \"bash\", input = {{ command = \"cat notes.txt > seen.txt; pwd > where.txt\" }} }} }},\n\
         {{ call = {{ tool = \"bash\", input = {{ command = \"echo x > {}/escape.txt\" }} }} }},\n\
         {{ say = \"looked\" }},\n]]\n",
        s.path().display()
    );
    lead_in(s, "", &iso);
}

/// [`lead`] in the directory `dir` (ending in `/`, or `""`) with `iso` as the child's `[harnesses.iso]` table.
fn lead_in(s: &Scratch, dir: &str, iso: &str) {
    s.write(
        &format!("{dir}agent.toml"),
        &format!(
            "[agent]\nname = \"lead\"\n\n[harness]\nprovider = \"test\"\nscript = [[\n\
             {{ call = {{ tool = \"delegate\", input = {{ agent = \"isolated\", task = \"look\" }} }} }},\n\
             {{ say = \"done\" }},\n]]\n\n{iso}\n\
             [session]\nprovider = \"in-memory\"\n\n[tools]\nbash = \"builtin\"\ndelegate = \"builtin\"\n\n\
             [capabilities]\nbash = {{ commands = \"*\", paths = [\"./\"] }}\ndelegate = {{ agents = [\"isolated\"] }}\n"
        ),
    );
    s.write(
        &format!("{dir}.loom/agents/isolated.md"),
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
    commit_all(&s);
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

/// A repository in the scratch directory: `notes.txt` and all else there committed (loom's data ignored).
fn commit_all(s: &Scratch) {
    s.write("notes.txt", "committed\n");
    s.write(".gitignore", ".loom-data/\n");
    git(s.path(), &["init", "-q"]);
    git(s.path(), &["add", "-A"]);
    git(s.path(), &["commit", "-q", "-m", "start"]);
}

/// The lead's turn run from `cwd` with its worktrees in `home`, its delegate call (the last of `calls`) refused: the
/// refusal's text, after checking that nothing was left (no directory or record in `home`, only the main tree in
/// git's list when there is a repository).
fn refusal(s: &Scratch, cwd: &Path, home: &Path) -> String {
    refusal_after(s, cwd, home, 1)
}

fn refusal_after(s: &Scratch, cwd: &Path, home: &Path, calls: usize) -> String {
    let home_s = home.to_string_lossy().into_owned();
    let run = s.loom_in(
        cwd,
        &["prompt", "agent.toml", "go", "--format", "jsonl"],
        &[("LOOM_WORKTREES_HOME", home_s.as_str())],
    );
    run.expect_code(0);
    let r = results(&updates(&run));
    assert_eq!(r.len(), calls, "{r:#?}");
    assert_eq!(r[calls - 1].0, "failed", "{r:#?}");
    let left: Vec<_> = std::fs::read_dir(home)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "left in the worktrees home: {left:?}");
    if s.path().join(".git").exists() {
        let list = git(s.path(), &["worktree", "list"]);
        assert_eq!(list.lines().count(), 1, "{list}");
    }
    assert!(!s.path().join("seen.txt").exists());
    r[calls - 1].1.clone()
}

#[test]
fn outside_a_git_repository_a_worktree_child_is_not_started() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    let home = tempfile::tempdir().unwrap();
    lead(&s);
    let text = refusal(&s, s.path(), home.path());
    assert!(
        text.starts_with(
            "delegate: profile \"isolated\" runs in a git worktree, but cannot make a worktree: "
        ),
        "{text}"
    );
    assert!(text.contains("is not inside a git repository"), "{text}");
    assert!(text.ends_with("; nothing was started"), "{text}");
}

/// The lead working in `sub/`, which HEAD's checkout does not hold as a real directory: `committed_link` false —
/// `sub` is not committed; true — HEAD holds `sub` as a link to a directory outside the repository (the working tree
/// has a real directory there, uncommitted). Either way the child would not work at its place in the checkout, so
/// it is not started, and the checkout is undone.
fn lead_in_sub(committed_link: bool) {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    let home = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    if committed_link {
        std::os::unix::fs::symlink(outside.path(), s.path().join("sub")).unwrap();
    }
    commit_all(&s);
    if committed_link {
        std::fs::remove_file(s.path().join("sub")).unwrap();
    }
    let iso = format!(
        "[harnesses.iso]\nprovider = \"test\"\nscript = [[\n\
         {{ call = {{ tool = \"bash\", input = {{ command = \"echo x > {}/escape.txt\" }} }} }},\n\
         {{ say = \"ran\" }},\n]]\n",
        outside.path().display()
    );
    lead_in(&s, "sub/", &iso);
    assert_eq!(
        refusal(&s, &s.path().join("sub"), home.path()),
        "delegate: profile \"isolated\" runs in a git worktree, but sub is not a directory of HEAD's checkout \
         (is it committed, and not a link?); nothing was started"
    );
    assert_eq!(
        std::fs::read_dir(outside.path()).unwrap().count(),
        0,
        "the child ran"
    );
}

#[test]
fn a_worktree_child_is_not_started_where_head_has_no_such_directory() {
    lead_in_sub(false);
}

#[test]
fn a_worktree_child_is_not_started_where_head_has_a_link_out_of_the_checkout() {
    lead_in_sub(true);
}

/// A repository with no commit has no `HEAD` to check out: git refuses, and the directory and record made for the
/// worktree are removed.
#[test]
fn a_worktree_child_is_not_started_in_a_repository_without_a_commit() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    let home = tempfile::tempdir().unwrap();
    lead(&s);
    git(s.path(), &["init", "-q"]);
    let text = refusal(&s, s.path(), home.path());
    let want = format!(
        "delegate: profile \"isolated\" runs in a git worktree, but git could not check out HEAD of {} into a \
         worktree: ",
        std::fs::canonicalize(s.path()).unwrap().display()
    );
    assert!(text.starts_with(&want), "{text}");
    assert!(text.ends_with("; nothing was started"), "{text}");
}

/// A relative grant that would reach out of the worktree once it resolves there (`../` from the repository's top)
/// is refused by the kernel before anything is checked out.
#[test]
fn a_worktree_child_whose_grants_would_climb_out_is_not_started() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    let home = tempfile::tempdir().unwrap();
    lead(&s);
    let manifest = std::fs::read_to_string(s.path().join("agent.toml"))
        .unwrap()
        .replace("paths = [\"./\"]", "paths = [\"./\", \"../\"]");
    s.write("agent.toml", &manifest);
    commit_all(&s);
    let text = refusal(&s, s.path(), home.path());
    assert!(
        text.starts_with(
            "delegate: profile \"isolated\" runs in a git worktree, but its grants cannot move there: bash: \
             paths \"../\" would resolve to "
        ),
        "{text}"
    );
    assert!(text.contains(", outside the worktree "), "{text}");
}

/// A child refused after its worktree was made never ran, so the worktree holds nothing worth keeping: it is
/// removed, and the refusal says so. Here the child's harness cannot boot: its model file (a path, loaded by the
/// lead's boot for the named harness) is gone by the time the lead delegates.
#[test]
fn a_worktree_child_that_does_not_boot_leaves_no_worktree() {
    if !sandbox_available() {
        return;
    }
    let s = Scratch::new();
    let home = tempfile::tempdir().unwrap();
    std::fs::hard_link(super::local::small_model(), s.path().join("m.gguf")).unwrap();
    s.write(".gitignore", ".loom-data/\nm.gguf\n");
    lead_in(
        &s,
        "",
        "[harnesses.iso]\nprovider = \"local\"\nmodel = \"m.gguf\"\ncontext = 2048\nthreads = 1\n",
    );
    let manifest = std::fs::read_to_string(s.path().join("agent.toml"))
        .unwrap()
        .replacen(
            "{ call = { tool = \"delegate\"",
            "{ call = { tool = \"bash\", input = { command = \"rm m.gguf\" } } },\n{ call = { tool = \"delegate\"",
            1,
        );
    s.write("agent.toml", &manifest);
    commit_all(&s);
    // the lead's bash call, then its delegate call
    let text = refusal_after(&s, s.path(), home.path(), 2);
    assert!(
        text.starts_with("delegate: the sub-agent \"isolated\" did not boot: "),
        "{text}"
    );
    assert!(
        text.contains(" (its worktree isolated-") && text.ends_with(" was removed)"),
        "{text}"
    );
}
