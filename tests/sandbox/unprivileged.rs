//! A subset of the suite re-run as an unprivileged user (`loomtest`, created by `.ci/run`) through `runuser`.

use std::process::{Command, Output};

use crate::{is_root, need_sandbox, Sbx, PRELUDE};

const USER: &str = "loomtest";

/// Runs `loom sandbox run` as [`USER`].
fn run_as_user(s: &Sbx, extra: &[&str], argv: &[&str]) -> Output {
    Command::new("runuser")
        .args([
            "-u",
            USER,
            "--",
            "env",
            "-i",
            "PATH=/usr/local/bin:/usr/bin:/bin",
            "SECRET_TOKEN=hunter2-secret",
        ])
        .arg(format!("HOME={}", s.home.display()))
        .arg(crate::loom())
        .args(["sandbox", "run", "--grant", &s.grant(), "--cwd"])
        .arg(&s.work)
        .args(extra)
        .arg("--")
        .args(argv)
        .output()
        .unwrap()
}

fn ready() -> Option<Sbx> {
    if !is_root() {
        eprintln!("SKIPPED: not root, so the suite already ran unprivileged");
        return None;
    }
    let has_user = Command::new("id")
        .arg(USER)
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_user {
        eprintln!("SKIPPED: no user {USER} (`.ci/run` creates it: useradd -m {USER})");
        return None;
    }
    let s = Sbx::new();
    let root = s.work.parent().unwrap().to_path_buf();
    let chown = Command::new("chown")
        .arg("-R")
        .arg(format!("{USER}:"))
        .arg(&root)
        .status()
        .unwrap();
    assert!(chown.success());
    let check = Command::new("runuser")
        .args(["-u", USER, "--"])
        .arg(crate::loom())
        .arg("version")
        .output()
        .unwrap();
    if !check.status.success() {
        eprintln!(
            "SKIPPED: {USER} cannot run {} (a parent directory is not world-executable): {}",
            crate::loom().display(),
            String::from_utf8_lossy(&check.stderr)
        );
        return None;
    }
    Some(s)
}

#[test]
fn unprivileged_user_is_confined_too() {
    need_sandbox!();
    let Some(s) = ready() else { return };
    let v = s.outside.join("victim.txt");
    let code = format!(
        r#"{PRELUDE}
attempt("write_outside", lambda: write("{v}"))
attempt("read_ssh", lambda: open(os.path.expanduser("~/.ssh/id_rsa")).read())
attempt("tcp", lambda: socket.create_connection(("127.0.0.1", 9), timeout=2))
attempt("packet", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0))
attempt("unshare_user", lambda: libc.unshare(0x10000000))
attempt("control_write", lambda: write("mine.txt"))
print("env", sorted(os.environ))
"#,
        v = v.display()
    );
    let out = run_as_user(&s, &[], &["python3", "-c", &code]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    for b in ["write_outside", "read_ssh", "tcp", "packet", "unshare_user"] {
        assert!(
            stdout.contains(&format!("{b}: BLOCKED")),
            "{b}\n{stdout}\n{stderr}"
        );
    }
    assert!(stdout.contains("control_write: ALLOWED"), "{stdout}");
    assert!(!stdout.contains("SECRET_TOKEN"), "{stdout}");
    assert_eq!(std::fs::read_to_string(&v).unwrap(), "original");
}

#[test]
fn unprivileged_fork_bomb_hits_rlimit_nproc() {
    need_sandbox!();
    let Some(s) = ready() else { return };
    let code = r#"
import os, errno, time
n = 0
try:
    for i in range(10000):
        if os.fork() == 0:
            time.sleep(3); os._exit(0)
        n += 1
    print("UNBOUNDED", n)
except OSError as e:
    print("LIMITED", errno.errorcode[e.errno], n)
"#;
    let out = run_as_user(
        &s,
        &["--max-procs", "48", "--timeout-ms", "20000"],
        &["python3", "-c", code],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("LIMITED EAGAIN"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn setuid_binaries_do_not_escalate() {
    need_sandbox!();
    let Some(s) = ready() else { return };
    // A setuid-root copy of python in the project: outside the sandbox it runs with euid 0 (the control proves the
    // bit works on this filesystem); inside, no_new_privs keeps the caller's euid.
    let suid = s.work.join("suid-python");
    std::fs::copy("/usr/bin/python3", &suid).unwrap();
    let chown = Command::new("chown")
        .args(["root:root"])
        .arg(&suid)
        .status()
        .unwrap();
    assert!(chown.success());
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&suid, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let probe = "import os; print('euid', os.geteuid())";
    let outside = Command::new("runuser")
        .args(["-u", USER, "--"])
        .arg(&suid)
        .args(["-c", probe])
        .output()
        .unwrap();
    let outside = String::from_utf8_lossy(&outside.stdout).into_owned();
    if !outside.contains("euid 0") {
        eprintln!("SKIPPED: setuid bits are not honoured on this filesystem (nosuid?): {outside}");
        return;
    }
    let out = run_as_user(&s, &[], &[suid.to_str().unwrap(), "-c", probe]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("euid "),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !stdout.contains("euid 0"),
        "setuid escalated inside the sandbox: {stdout}"
    );
}

#[test]
fn whole_suite_runs_as_an_unprivileged_user() {
    need_sandbox!();
    if std::env::var_os("LOOM_BIN").is_some() {
        return; // already the unprivileged re-run
    }
    let Some(_s) = ready() else { return };
    let exe = std::env::current_exe().unwrap();
    let can_run = Command::new("runuser")
        .args(["-u", USER, "--"])
        .arg(&exe)
        .arg("--list")
        .output()
        .is_ok_and(|o| o.status.success());
    if !can_run {
        eprintln!("SKIPPED: {USER} cannot run the test binary {} (a parent directory is not world-executable)", exe.display());
        return;
    }
    let out = Command::new("runuser")
        .args([
            "-u",
            USER,
            "--",
            "env",
            "-i",
            "PATH=/usr/local/bin:/usr/bin:/bin",
            "TMPDIR=/tmp",
            "HOME=/tmp",
        ])
        .arg(format!("LOOM_BIN={}", crate::loom().display()))
        .arg(&exe)
        .args(["--skip", "unprivileged::", "--test-threads", "2"])
        .current_dir("/tmp")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the sandbox suite failed as {USER}:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("test result: ok"), "{stdout}");
    let summary: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("test result"))
        .collect();
    eprintln!("unprivileged re-run as {USER}: {summary:?}");
}
