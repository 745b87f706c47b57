//! The git inspection tools through `loom prompt` with the scripted harness: each tool's happy path, a grant that
//! covers only part of the repository (refused: the history would show the rest), and a hostile repository whose
//! configuration would run programs on every inspection (an fsmonitor hook, an external diff, a clean filter, a text
//! conversion, a pager, hooks) — shown to run them with plain git, and to run none of them through the tools.

use std::process::Command;

use loom_tests::Scratch;

use super::{results, sandbox_available, updates};

const ALL: [&str; 6] = [
    "git_status",
    "git_diff",
    "git_log",
    "git_show",
    "git_blame",
    "git_branches",
];

fn git(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    let out = Command::new("git")
        .args(["-c", "user.email=t@example.com", "-c", "user.name=Tester"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(
        out.status.success() || args[0] == "diff" || args[0] == "status",
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A scratch repository: one commit of `a.txt`, then `a.txt` changed, `b.txt` staged, `new.txt` untracked.
fn repo(calls: &[&str], grant: &str) -> Scratch {
    let s = Scratch::new();
    let steps: String = calls
        .iter()
        .map(|c| format!("  {{ call = {c} }},\n"))
        .collect();
    let tools: String = ALL.iter().map(|t| format!("{t} = \"builtin\"\n")).collect();
    let caps: String = ALL.iter().map(|t| format!("{t} = {grant}\n")).collect();
    s.write(
        "agent.toml",
        &format!(
            "[agent]\nname = \"git-e2e\"\n\n[harness]\nprovider = \"test\"\nscript = [[\n{steps}  {{ say = \"done\" }},\n]]\n\n\
             [session]\nprovider = \"in-memory\"\n\n[tools]\n{tools}\n[capabilities]\n{caps}"
        ),
    );
    s.write("a.txt", "first line\n");
    s.write("sub/c.txt", "in a subdirectory\n");
    git(s.path(), &["init", "-q", "-b", "main"]);
    git(s.path(), &["add", "a.txt", "sub/c.txt"]);
    git(s.path(), &["commit", "-qm", "the first commit"]);
    s.write("a.txt", "first line\nsecond line\n");
    s.write("b.txt", "staged\n");
    git(s.path(), &["add", "b.txt"]);
    s.write("new.txt", "untracked\n");
    s
}

fn run(s: &Scratch) -> Vec<(String, String)> {
    let r = s.loom(&["prompt", "agent.toml", "go", "--format", "jsonl"]);
    r.expect_code(0);
    results(&updates(&r))
}

#[test]
fn each_git_tool_reports_the_repository() {
    if !sandbox_available() {
        return;
    }
    let s = repo(
        &[
            r#"{ tool = "git_status", input = {} }"#,
            r#"{ tool = "git_diff", input = {} }"#,
            r#"{ tool = "git_diff", input = { staged = true } }"#,
            r#"{ tool = "git_log", input = { max_count = 5 } }"#,
            r#"{ tool = "git_show", input = { rev = "HEAD" } }"#,
            r#"{ tool = "git_blame", input = { path = "a.txt" } }"#,
            r#"{ tool = "git_branches", input = {} }"#,
            r#"{ tool = "git_status", input = { path = "sub" } }"#,
            r#"{ tool = "git_show", input = { rev = "--output=/tmp/x" } }"#,
            r#"{ tool = "git_show", input = { rev = "no-such-rev" } }"#,
        ],
        r#"{ read_paths = ["./"] }"#,
    );
    let r = run(&s);
    assert_eq!(r.len(), 10, "{r:#?}");
    for (i, want) in [
        (0, "## main"),
        (0, " M a.txt"),
        (0, "A  b.txt"),
        (0, "?? new.txt"),
        (1, "+second line"),
        (2, "+staged"),
        (3, "Tester: the first commit"),
        (4, "the first commit"),
        (4, "+first line"),
        (5, "Tester"),
        (5, "first line"),
        (6, "* main"),
    ] {
        assert_eq!(r[i].0, "completed", "{i}: {r:#?}");
        assert!(r[i].1.contains(want), "{i} lacks {want:?}: {r:#?}");
    }
    // the unstaged diff does not show the staged file, and a path below the top limits the status to it
    assert!(!r[1].1.contains("b.txt"), "{r:#?}");
    assert_eq!(r[7].0, "completed", "{r:#?}");
    assert!(!r[7].1.contains("a.txt"), "{r:#?}");
    // a revision is never an option; git's own refusal comes back with its exit status
    assert_eq!(r[8].0, "failed", "{r:#?}");
    assert!(r[8].1.contains("starts with '-'"), "{r:#?}");
    assert!(!std::path::Path::new("/tmp/x").exists() || r[8].1.contains("starts with"));
    assert_eq!(r[9].0, "failed", "{r:#?}");
    assert!(r[9].1.contains("failed (exit 128)"), "{r:#?}");
}

#[test]
fn a_grant_over_part_of_the_repository_cannot_inspect_it() {
    if !sandbox_available() {
        return;
    }
    let s = repo(
        &[
            r#"{ tool = "git_log", input = { path = "sub" } }"#,
            r#"{ tool = "git_show", input = { rev = "HEAD:a.txt" } }"#,
        ],
        r#"{ read_paths = ["./sub"] }"#,
    );
    let r = run(&s);
    assert_eq!(r.len(), 2, "{r:#?}");
    for (status, text) in &r {
        assert_eq!(status, "failed", "{r:#?}");
        assert!(text.contains("outside this tool's grant"), "{r:#?}");
        assert!(!text.contains("first line"), "{r:#?}");
    }
}

#[test]
fn a_hostile_repository_s_configuration_runs_nothing() {
    if !sandbox_available() {
        return;
    }
    let calls: Vec<String> = [
        r#"{ tool = "git_status", input = {} }"#,
        r#"{ tool = "git_diff", input = {} }"#,
        r#"{ tool = "git_diff", input = { staged = true } }"#,
        r#"{ tool = "git_log", input = {} }"#,
        r#"{ tool = "git_show", input = { rev = "HEAD" } }"#,
        r#"{ tool = "git_blame", input = { path = "a.txt" } }"#,
        r#"{ tool = "git_branches", input = {} }"#,
    ]
    .iter()
    .map(|c| c.to_string())
    .collect();
    let refs: Vec<&str> = calls.iter().map(String::as_str).collect();
    let s = repo(&refs, r#"{ read_paths = ["./"] }"#);
    // each configured program announces itself on stdout and stderr; git would show either in its output
    let say = |what: &str| format!("sh -c 'echo PWNED-{what}; echo PWNED-{what} >&2; cat'");
    s.write(
        ".gitattributes",
        "* filter=evil diff=evil\nsub/* filter=a=b\n",
    );
    // a driver whose name holds `=` (git splits `-c key=value` at the first `=`, so it is blanked another way)
    s.write("sub/c.txt", "in a subdirectory, changed\n");
    for (key, value) in [
        ("filter.a=b.clean", say("eqclean")),
        ("core.fsmonitor", say("fsmonitor")),
        ("diff.external", say("external")),
        ("filter.evil.clean", say("clean")),
        ("filter.evil.smudge", say("smudge")),
        ("diff.evil.textconv", say("textconv")),
        ("diff.evil.command", say("command")),
        ("core.pager", say("pager")),
        ("pager.status", say("pagerstatus")),
    ] {
        git(s.path(), &["config", key, &value]);
    }
    s.write(
        ".git/hooks/post-index-change",
        "#!/bin/sh\necho PWNED-hook\necho PWNED-hook >&2\n",
    );
    std::fs::set_permissions(
        s.path().join(".git/hooks/post-index-change"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    // the control: plain git runs the repository's programs
    let plain = git(s.path(), &["-c", "core.pager=", "diff"]);
    let shown = format!(
        "{}{}",
        String::from_utf8_lossy(&plain.stdout),
        String::from_utf8_lossy(&plain.stderr)
    );
    assert!(
        shown.contains("PWNED-eqclean") && shown.contains("PWNED-clean"),
        "the fixture is not hostile: {shown}"
    );
    let r = run(&s);
    assert_eq!(r.len(), 7, "{r:#?}");
    for (i, (status, text)) in r.iter().enumerate() {
        assert_eq!(status, "completed", "{i}: {r:#?}");
        assert!(!text.contains("PWNED"), "{i}: {r:#?}");
    }
    assert!(r[1].1.contains("+second line"), "{r:#?}");
    // a configuration that includes another file is refused: that file could change between loom's listing and
    // git's run
    git(s.path(), &["config", "include.path", "../extra.cfg"]);
    let r = run(&s);
    assert_eq!(r.len(), 7, "{r:#?}");
    for (i, (status, text)) in r.iter().enumerate() {
        assert_eq!(status, "failed", "{i}: {r:#?}");
        assert!(text.contains("includes another file"), "{i}: {r:#?}");
    }
}

/// The environment block opens the system prompt: in a repository it names the branch and whether the work tree has
/// changes (asked of git through the sandbox, so the hostile configuration of the test above would run nothing here
/// either); `[agent] environment = false` leaves it out.
#[test]
fn the_environment_block_names_the_branch_and_the_work_tree_state() {
    if !sandbox_available() {
        return;
    }
    let s = repo(&[], r#"{ read_paths = ["./"] }"#);
    let preamble = |s: &Scratch| {
        let r = s.loom(&[
            "prompt",
            "agent.toml",
            "go",
            "--format",
            "jsonl",
            "--emit-preamble",
        ]);
        r.expect_code(0);
        updates(&r)[0]["preamble"]["systemPrompt"].clone()
    };
    let first = preamble(&s)[0].as_str().unwrap().to_string();
    assert!(
        first.starts_with("# Environment\n\nWorking directory: "),
        "{first}"
    );
    assert!(
        first.ends_with("\nGit: branch main, uncommitted changes"),
        "{first}"
    );
    // commit everything tracked: clean (untracked files do not count)
    git(s.path(), &["commit", "-qam", "second"]);
    let clean = preamble(&s)[0].as_str().unwrap().to_string();
    assert!(clean.ends_with("\nGit: branch main, clean"), "{clean}");
    let m = std::fs::read_to_string(s.path().join("agent.toml")).unwrap();
    s.write(
        "agent.toml",
        &m.replace(
            "name = \"git-e2e\"",
            "name = \"git-e2e\"\nenvironment = false",
        ),
    );
    let off = preamble(&s);
    assert!(!off.to_string().contains("# Environment"), "{off}");
}
