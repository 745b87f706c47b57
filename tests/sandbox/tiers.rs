//! The weaker tiers, forced with `--tier`: each still blocks what it claims to, and refuses what it cannot express.

use std::process::Command;

use crate::{tier_available, verdicts, Sbx, PRELUDE};

#[test]
fn tier_b_landlock_alone_confines_files_and_network() {
    let s = Sbx::new();
    if !tier_available(&s, "b") {
        return;
    }
    let v = s.outside.join("victim.txt");
    let code = format!(
        r#"
attempt("write_outside", lambda: write("{v}"))
attempt("read_ssh", lambda: open("{k}").read())
attempt("write_etc", lambda: write("/etc/loom-pwned"))
attempt("tcp", lambda: socket.create_connection(("127.0.0.1", 9), timeout=2))
attempt("host_tmp", lambda: os.listdir("/tmp"))
attempt("control_write", lambda: write("mine.txt"))
attempt("control_read_outside", lambda: open("{v}").read())
attempt("control_private_tmpdir", lambda: write(os.environ["TMPDIR"] + "/scratch"))
print("tmpdir", os.environ["TMPDIR"])
"#,
        v = v.display(),
        k = s.home.join(".ssh/id_rsa").display()
    );
    let r = s.py(&s.grant(), &["--tier", "b", "-v"], &code);
    r.expect_code(0).stderr_has("landlock=full");
    verdicts(
        &r,
        &["write_outside", "read_ssh", "write_etc", "tcp", "host_tmp"],
        &[
            "control_write",
            "control_read_outside",
            "control_private_tmpdir",
        ],
    );
    assert_eq!(s.host_read(&v), "original");
    let tmpdir = r
        .stdout()
        .lines()
        .find_map(|l| l.strip_prefix("tmpdir ").map(str::to_string))
        .unwrap();
    assert!(
        !std::path::Path::new(&tmpdir).exists(),
        "the private TMPDIR {tmpdir} outlived the run"
    );
}

/// Tier B confines the command between fork and exec (no inner stage): it must still lead a session of its own
/// (until this was fixed, an earlier `setpgid` made its `setsid` fail silently), see no descriptor the caller left
/// open, and run without privileges under seccomp.
#[test]
fn tier_b_runs_in_a_new_session_without_inherited_descriptors_or_privileges() {
    let s = Sbx::new();
    if !tier_available(&s, "b") {
        return;
    }
    let target = s.outside.join("fd-victim.txt");
    std::fs::write(&target, "").unwrap();
    let code = format!(
        r#"{PRELUDE}
status = open("/proc/self/status").read()
for line in status.splitlines():
    if line.split(":")[0] in ("NoNewPrivs", "CapEff", "CapBnd", "Seccomp"):
        print(line.replace("\t", " "))
print("session leader:", os.getsid(0) == os.getpid())
attempt("write_inherited_fd", lambda: os.write(5, b"pwned"))
attempt("control_write_stdout", lambda: os.write(1, b"stdout works\n"))
"#
    );
    let script = r#"exec 5>>"$1"; shift; exec "$@""#;
    let out = Command::new("/bin/sh")
        .args(["-c", script, "sh", target.to_str().unwrap()])
        .arg(crate::loom())
        .args([
            "sandbox",
            "run",
            "--tier",
            "b",
            "--grant",
            &s.grant(),
            "--cwd",
        ])
        .arg(&s.work)
        .args(["--", "python3", "-c", &code])
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", &s.home)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    if crate::is_root() {
        // Dropping the bounding set takes CAP_SETPCAP; an unprivileged caller has nothing to drop (and
        // no_new_privs keeps setuid and file capabilities from adding any).
        assert!(stdout.contains("CapBnd: 0000000000000000"), "{stdout}");
    }
    for want in [
        "NoNewPrivs: 1",
        "CapEff: 0000000000000000",
        "Seccomp: 2",
        "session leader: True",
        "write_inherited_fd: BLOCKED EBADF",
        "control_write_stdout: ALLOWED",
        "stdout works",
    ] {
        assert!(stdout.contains(want), "{want} not in:\n{stdout}\n{stderr}");
    }
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "");
}

#[test]
fn tier_b_reports_a_missing_or_unreachable_command_as_not_found() {
    let s = Sbx::new();
    if !tier_available(&s, "b") {
        return;
    }
    s.run(&s.grant(), &["--tier", "b"], &["no-such-command-xyz"])
        .expect_code(127)
        .stderr_has("command not found inside the sandbox: no-such-command-xyz");
    // A program outside every readable root exists on the host, but Landlock does not let it be executed.
    let exe = s.home.join("tool");
    std::fs::copy("/bin/true", &exe).unwrap();
    s.run(&s.grant(), &["--tier", "b"], &[exe.to_str().unwrap()])
        .expect_code(127)
        .stderr_has("command not found inside the sandbox");
    // Control: the same program inside the writable root runs.
    let inside = s.work.join("tool");
    std::fs::copy("/bin/true", &inside).unwrap();
    s.run(&s.grant(), &["--tier", "b"], &[inside.to_str().unwrap()])
        .expect_code(0);
}

/// Issue 24 item 2: tier B runs in a checkout. A writable root holding `.git` is granted entry by entry
/// (sandbox/src/split.rs): `.git` stays read-only (a hook cannot be planted, `.git` cannot be renamed away), while
/// the checkout's other files and directories are writable; what this costs — nothing new directly in the root — is
/// shown too, as SECURITY.md says.
#[test]
fn tier_b_runs_in_a_checkout_with_git_read_only() {
    let s = Sbx::new();
    if !tier_available(&s, "b") {
        return;
    }
    std::fs::create_dir_all(s.work.join(".git/hooks")).unwrap();
    std::fs::write(s.work.join(".git/config"), "[core]\n").unwrap();
    std::fs::create_dir_all(s.work.join("src")).unwrap();
    std::fs::write(s.work.join("README.md"), "old\n").unwrap();
    let attempt = |script: &str| s.run(&s.grant(), &["--tier", "b"], &["sh", "-c", script]);
    // the attacks: each fails, and leaves nothing behind
    for (what, script) in [
        ("plant a hook", "echo evil > .git/hooks/pre-commit"),
        ("edit the git config", "echo evil >> .git/config"),
        ("rename .git away", "mv .git moved"),
        ("replace .git", "rm -rf .git"),
    ] {
        let r = attempt(script);
        assert_ne!(r.code(), 0, "{what} succeeded in tier B: {}", r.stderr());
    }
    assert!(!s.work.join(".git/hooks/pre-commit").exists());
    assert_eq!(
        std::fs::read_to_string(s.work.join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert!(s.work.join(".git/hooks").is_dir() && !s.work.join("moved").exists());
    // the controls: the checkout's files and directories are writable, in place and below
    attempt("echo new > README.md && mkdir -p src/deep && echo fn > src/deep/lib.rs && git --version >/dev/null 2>&1; cat .git/config")
        .expect_code(0)
        .stdout_has("[core]");
    assert_eq!(
        std::fs::read_to_string(s.work.join("README.md")).unwrap(),
        "new\n"
    );
    assert_eq!(
        std::fs::read_to_string(s.work.join("src/deep/lib.rs")).unwrap(),
        "fn\n"
    );
    // the documented cost: nothing new directly in a split root
    let r = attempt("echo x > fresh.txt");
    assert_ne!(r.code(), 0, "a new entry in a split root was created");
    assert!(!s.work.join("fresh.txt").exists());
}

/// SECURITY.md "Authority files": tier B keeps an authority file read-only below a writable root and denies reading a
/// secret store below any root (split per entry); tier A (the control) runs the same with the file read-only and
/// the store reading empty.
#[test]
fn tier_b_keeps_authority_files_read_only_and_denies_secret_stores() {
    let s = Sbx::new();
    if !tier_available(&s, "b") {
        return;
    }
    let hook = s.work.join("check.sh");
    let store = s.outside.join(".loom-secrets");
    let sibling = s.outside.join("notes.txt");
    std::fs::write(&hook, "#!/bin/sh\n").unwrap();
    std::fs::write(&store, "GH_TOKEN=kept-from-the-agent\n").unwrap();
    std::fs::write(&sibling, "readable\n").unwrap();
    let (hook_s, store_s, sibling_s) = (
        hook.to_str().unwrap(),
        store.to_str().unwrap(),
        sibling.to_str().unwrap(),
    );
    for tier in ["b", "a"] {
        if !tier_available(&s, tier) {
            continue;
        }
        let script = format!("cat {store_s}; cat {sibling_s}; echo end; echo evil > {hook_s}");
        let r = s.run(
            &s.grant(),
            &["--tier", tier, "--protect", hook_s, "--mask", store_s],
            &["sh", "-c", &script],
        );
        assert!(r.stdout().contains("end"), "tier {tier}: {}", r.stderr());
        assert!(
            r.stdout().contains("readable"),
            "tier {tier}: the store's sibling is readable"
        );
        assert!(
            !r.stdout().contains("kept-from-the-agent"),
            "tier {tier} showed the secret store"
        );
        assert_eq!(
            std::fs::read_to_string(&hook).unwrap(),
            "#!/bin/sh\n",
            "tier {tier} wrote the hook"
        );
    }
}

#[test]
fn tier_c_bwrap_and_seccomp_confine_without_landlock() {
    let s = Sbx::new();
    if !tier_available(&s, "c") {
        return;
    }
    let v = s.outside.join("victim.txt");
    let code = format!(
        r#"
attempt("write_outside", lambda: write("{v}"))
attempt("packet", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0))
attempt("control_write", lambda: write("mine.txt"))
"#,
        v = v.display()
    );
    let r = s.py(&s.grant(), &["--tier", "c", "-v"], &code);
    r.expect_code(0).stderr_has("landlock=off");
    verdicts(&r, &["write_outside", "packet"], &["control_write"]);
    assert_eq!(s.host_read(&v), "original");
}

/// The command starts with SIGPIPE at its default disposition in every tier, as under a shell: `yes | head -1`
/// ends quietly. (The inner stage used to be a Rust program with the runtime's start-up, which ignores SIGPIPE, and
/// an ignored signal stays ignored across exec.)
#[test]
fn every_tier_starts_the_command_with_sigpipe_at_its_default() {
    let s = Sbx::new();
    for tier in ["a", "b", "c"] {
        if !tier_available(&s, tier) {
            continue;
        }
        let r = s.run(
            &s.grant(),
            &["--tier", tier],
            &["sh", "-c", "grep SigIgn /proc/self/status; yes | head -n 1"],
        );
        r.expect_code(0).stdout_has("y\n");
        assert!(
            !r.stderr().contains("Broken pipe"),
            "tier {tier}: {}",
            r.stderr()
        );
        let ignored = r
            .stdout()
            .lines()
            .find_map(|l| l.strip_prefix("SigIgn:"))
            .map(|mask| u64::from_str_radix(mask.trim(), 16).unwrap())
            .unwrap();
        assert_eq!(ignored & (1 << (13 - 1)), 0, "tier {tier}: SIGPIPE ignored");
    }
}

#[test]
fn an_unknown_tier_is_a_usage_error() {
    let s = Sbx::new();
    s.run(&s.grant(), &["--tier", "z"], &["true"])
        .expect_code(2);
}
