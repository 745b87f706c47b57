//! The broker kills what it started: when the shell ends with a brokered call still running, and when loom itself
//! is cancelled mid-call.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use loom_tests::loom_bin;

use crate::{need_sandbox, Bk};

/// Pids of live processes whose command line contains `marker`.
fn with_marker(marker: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(marker) && !cmd.contains("loom") && !cmd.contains("bash -c") {
                out.push(pid);
            }
        }
    }
    out
}

#[track_caller]
fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("timed out waiting for: {what}");
}

#[test]
fn a_call_still_running_when_the_shell_ends_is_killed() {
    need_sandbox!();
    let b = Bk::new();
    let marker = "31.4159";
    let loom = spawn_loom(
        &b,
        &format!("gcalcli sleep {marker} >/dev/null 2>&1 & sleep 3; echo shell-done"),
    );
    wait_until("the brokered sleep to start", || {
        !with_marker(marker).is_empty()
    });
    let out = loom.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "shell-done\n");
    wait_until("the brokered sleep to die", || {
        with_marker(marker).is_empty()
    });
}

/// Starts `loom sandbox run` with the usual grant on `script`, without waiting.
fn spawn_loom(b: &Bk, script: &str) -> std::process::Child {
    let grant = b.grant("");
    let work = b.work.display().to_string();
    Command::new(loom_bin())
        .args([
            "sandbox", "run", "--grant", &grant, "--cwd", &work, "--", "bash", "-c", script,
        ])
        .env("PATH", b.host_path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn cancelling_loom_kills_the_shell_and_its_brokered_calls() {
    need_sandbox!();
    let b = Bk::new();
    let marker = "27.1828";
    let grant = b.grant("");
    let work = b.work.display().to_string();
    let mut loom = Command::new(loom_bin())
        .args([
            "sandbox", "run", "--grant", &grant, "--cwd", &work, "--", "bash", "-c",
        ])
        .arg(format!("gcalcli sleep {marker}; echo not-reached"))
        .env("PATH", b.host_path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the brokered sleep to start", || {
        !with_marker(marker).is_empty()
    });
    let killed = Command::new("kill")
        .args(["-TERM", &loom.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = loom.wait().unwrap();
    assert!(!status.success(), "{status:?}");
    wait_until("the brokered sleep to die", || {
        with_marker(marker).is_empty()
    });
    // Control: the same run, uncancelled, completes the call.
    let r = b.bash(&b.grant(""), &[], "gcalcli sleep 0.1");
    r.expect_code(0).stdout_has("slept\n");
}
