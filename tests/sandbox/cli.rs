//! `loom sandbox run` and `loom doctor` as a user meets them: exit codes, row selection, bad input.

use crate::{need_sandbox, Sbx};

#[test]
fn exit_status_and_signals_pass_through() {
    need_sandbox!();
    let s = Sbx::new();
    s.run(&s.grant(), &[], &["sh", "-c", "exit 7"])
        .expect_code(7);
    s.run(&s.grant(), &[], &["sh", "-c", "kill -TERM $$"])
        .expect_code(128 + 15);
    s.run(&s.grant(), &[], &["sh", "-c", "echo out; echo err >&2"])
        .expect_code(0)
        .stdout_has("out")
        .stderr_has("err");
}

#[test]
fn the_row_naming_the_command_wins() {
    need_sandbox!();
    let s = Sbx::new();
    let grant = format!(
        r#"[{{ commands = "*", paths = ["{w}"] }}, {{ commands = ["env"], paths = ["{w}"], env = ["SECRET_*"] }}]"#,
        w = s.work.display()
    );
    s.run(&grant, &[], &["env"])
        .expect_code(0)
        .stdout_has("SECRET_TOKEN=hunter2-secret");
    // The shell runs under the general row. (A bare `env` inside it would be brokered under its own row and see the
    // secret: per-command grants follow their command into the shell; tests/broker covers that.)
    s.run(
        &grant,
        &[],
        &["sh", "-c", "echo \"shell sees ${SECRET_TOKEN:-nothing}\""],
    )
    .expect_code(0)
    .stdout_has("shell sees nothing");
    let named_only = format!(
        r#"{{ commands = ["ls"], paths = ["{}"] }}"#,
        s.work.display()
    );
    s.run(&named_only, &[], &["cat", "notes.txt"])
        .expect_code(1)
        .stderr_has("`cat` is not a command this tool may run");
    s.run(&named_only, &[], &["ls"])
        .expect_code(0)
        .stdout_has("notes.txt");
}

#[test]
fn bad_input_is_refused_and_nothing_runs() {
    need_sandbox!();
    let s = Sbx::new();
    let marker = s.work.join("ran");
    let touch = format!("touch {}", marker.display());
    let w = s.work.display();
    for (grant, code, needle) in [
        ("{ commands = ".to_string(), 2, "not a TOML value"),
        ("{}".to_string(), 1, "grants nothing"),
        (
            // the cwd fits the first root, so the kernel allows the row and the profile refuses the missing one
            format!(r#"{{ commands = "*", paths = ["{w}", "{w}/missing"] }}"#),
            1,
            "does not exist",
        ),
        (
            format!(r#"{{ commands = "*", paths = ["{w}"], network = ["example.com"] }}"#),
            1,
            "cannot filter per host",
        ),
        (
            format!(r#"{{ commands = "*", paths = ["{w}"], hosts = 1 }}"#),
            1,
            "cannot be enforced",
        ),
    ] {
        let r = s.run(&grant, &[], &["sh", "-c", &touch]);
        r.expect_code(code).stderr_has(needle).stderr_has("loom: ");
        assert!(!marker.exists(), "{grant} ran the command");
    }
    // A grant root that is a symlink is refused with an explanation.
    std::os::unix::fs::symlink(&s.outside, s.work.join("link")).unwrap();
    s.run(
        &format!(r#"{{ commands = "*", paths = ["{w}", "{w}/link"] }}"#),
        &[],
        &["sh", "-c", &touch],
    )
    .expect_code(1)
    .stderr_has("symlink")
    .stderr_has(&format!("write the real path {}", s.outside.display()));
    assert!(!marker.exists());
    // A missing command: 127 with a message.
    s.run(&s.grant(), &[], &["no-such-command-loom"])
        .expect_code(127)
        .stderr_has("command not found inside the sandbox");
    // Control: the same touch runs under a good grant.
    s.run(&s.grant(), &[], &["sh", "-c", &touch]).expect_code(0);
    assert!(marker.exists());
}

#[test]
fn relative_roots_resolve_against_cwd() {
    need_sandbox!();
    let s = Sbx::new();
    let r = s.run(
        r#"{ commands = "*", paths = ["./"] }"#,
        &[],
        &["sh", "-c", "echo hi > rel.txt && pwd"],
    );
    r.expect_code(0).stdout_has(s.work.to_str().unwrap());
    assert_eq!(s.host_read(&s.work.join("rel.txt")), "hi\n");
}

#[test]
fn unrestricted_grant_runs_unconfined() {
    let s = Sbx::new();
    s.run(r#""*""#, &[], &["sh", "-c", "echo $SECRET_TOKEN"])
        .expect_code(0)
        .stdout_has("hunter2-secret");
}

#[test]
fn doctor_reports_the_tier_and_each_kind() {
    let s = Sbx::new();
    let r = s.loom(&["doctor"]);
    if r.code() != 0 {
        r.stdout_has("NONE");
        eprintln!("SKIPPED: no sandbox backend on this host");
        return;
    }
    r.stdout_has("sandbox tier: ")
        .stdout_has("landlock")
        .stdout_has("bubblewrap")
        .stdout_has("user namespaces")
        .stdout_has("seccomp")
        .stdout_has("read_paths")
        .stdout_has("network")
        .stdout_has(".envrc .vscode")
        .stdout_has("is moved aside to NAME.loom-moved when it ends");
    let j = s.loom(&["doctor", "--json"]);
    j.expect_code(0);
    let v: serde_json::Value = serde_json::from_str(&j.stdout()).unwrap();
    assert_eq!(v["version"], 1);
    assert!(v["tier"].is_string());
    assert!(v["kinds"]["paths"].is_string());
}

/// loom records the protected names a command's sweep will look at before the command starts; when it cannot (its
/// data directory is not a directory), nothing runs and the error names the directory and the fix.
#[test]
fn a_command_whose_sweep_cannot_be_recorded_does_not_run() {
    need_sandbox!();
    let s = Sbx::new();
    let data = s.work.parent().unwrap().join("data-is-a-file");
    std::fs::write(&data, "").unwrap();
    let out = std::process::Command::new(crate::loom())
        .args(["sandbox", "run", "--grant", &s.grant(), "--cwd"])
        .arg(&s.work)
        .args(["--", "sh", "-c", "echo ran > ran.txt"])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &s.home)
        .env("LOOM_DATA_HOME", &data)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("cannot make {}", data.join("sweeps").display()))
            && err.contains("nothing was run"),
        "{err}"
    );
    assert!(!s.work.join("ran.txt").exists());
}
