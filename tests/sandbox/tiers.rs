//! The weaker tiers, forced with `--tier`: each still blocks what it claims to, and refuses what it cannot express.

use crate::{verdicts, Sbx};

fn tier_available(s: &Sbx, tier: &str) -> bool {
    let r = s.run(&s.grant(), &["--tier", tier], &["true"]);
    if r.code() == 0 {
        return true;
    }
    eprintln!("SKIPPED: tier {tier} is not available here: {}", r.stderr());
    false
}

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

#[test]
fn tier_b_refuses_protected_paths_it_cannot_express() {
    let s = Sbx::new();
    if !tier_available(&s, "b") {
        return;
    }
    std::fs::create_dir_all(s.work.join(".git/hooks")).unwrap();
    s.run(&s.grant(), &["--tier", "b"], &["true"])
        .expect_code(1)
        .stderr_has("tier B cannot enforce")
        .stderr_has(".git/hooks");
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

#[test]
fn an_unknown_tier_is_a_usage_error() {
    let s = Sbx::new();
    s.run(&s.grant(), &["--tier", "z"], &["true"])
        .expect_code(2);
}
