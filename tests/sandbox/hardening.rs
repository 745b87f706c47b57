//! The second security pass (issue 23): `/proc` read-only in the bwrap tiers (no `core_pattern` escape as root),
//! bwrap's pid 1 under seccomp, the inner stage run from loom's sealed copy, tier B's SysV IPC / inotify denial, every
//! capability set cleared, the socket-family allowlist and the rarely legitimate syscalls, and the `close_range`
//! fallback. Each attack runs through `loom sandbox run` next to an allowed control; the whole module re-runs as the
//! unprivileged user with the rest of the suite (`unprivileged::whole_suite_runs_as_an_unprivileged_user`).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{is_root, verdicts, Sbx, PRELUDE};

/// Is `tier` usable here? Prints the reason when not.
fn tier_ok(s: &Sbx, tier: &str) -> bool {
    let r = s.run(&s.grant(), &["--tier", tier], &["true"]);
    if r.code() == 0 {
        return true;
    }
    eprintln!("SKIPPED tier {tier}: not available here: {}", r.stderr());
    false
}

/// `/proc` knobs that would let a uid-0 command act on the host (core_pattern runs a program as full root in the
/// init namespaces) or on bwrap's pid 1. Every attempt only opens for writing and closes again: nothing is written,
/// even if a regression let the open through.
const PROC_WRITES: &str = r#"
def open_for_write(path, flags=os.O_WRONLY):
    os.close(os.open(path, flags))
attempt("core_pattern", lambda: open_for_write("/proc/sys/kernel/core_pattern"))
attempt("modprobe", lambda: open_for_write("/proc/sys/kernel/modprobe"))
attempt("sysctl_net", lambda: open_for_write("/proc/sys/net/ipv4/ip_forward"))
attempt("pid1_mem", lambda: open_for_write("/proc/1/mem", os.O_RDWR))
if os.path.exists("/proc/sysrq-trigger"):
    attempt("sysrq", lambda: open_for_write("/proc/sysrq-trigger"))
else:
    print("sysrq: BLOCKED (absent)")
attempt("control_read_sysctl", lambda: open("/proc/sys/kernel/core_pattern").read())
attempt("control_write", lambda: write("mine.txt"))
"#;

/// N1: in the bwrap tiers `/proc` is mounted read-only, so no kernel knob can be opened for writing — the write that
/// turned tier C as root into host root (`kernel.core_pattern = |/path/in/grant`). Tier B has Landlock's read-only
/// `/proc` rule.
#[test]
fn proc_knobs_cannot_be_opened_for_writing_in_any_tier() {
    let s = Sbx::new();
    for tier in ["c", "a", "b"] {
        if !tier_ok(&s, tier) {
            continue;
        }
        let r = s.py(&s.grant(), &["--tier", tier], PROC_WRITES);
        r.expect_code(0);
        verdicts(
            &r,
            &[
                "core_pattern",
                "modprobe",
                "sysctl_net",
                "pid1_mem",
                "sysrq",
            ],
            &["control_read_sysctl", "control_write"],
        );
        if is_root() && tier != "b" {
            // Refused by the read-only mount, not only by file permissions (which do not stop uid 0).
            r.stdout_has("core_pattern: BLOCKED EROFS");
        }
    }
}

/// N2: bwrap's pid 1 (the reaper of the view's pid namespace, same uid as the command) runs under the same seccomp
/// filter, so taking it over through `/proc/1/mem` would gain nothing — and `/proc/1/mem` cannot be opened for
/// writing anyway.
#[test]
fn bwrap_pid_1_runs_under_seccomp_in_tiers_a_and_c() {
    let s = Sbx::new();
    for tier in ["c", "a"] {
        if !tier_ok(&s, tier) {
            continue;
        }
        let code = r#"
def fields(pid):
    out = {}
    for line in open(f"/proc/{pid}/status"):
        k, _, v = line.partition(":")
        out[k] = v.strip()
    return out
one, me = fields(1), fields("self")
print("pid1", one["Name"], "Seccomp", one["Seccomp"], "NoNewPrivs", one["NoNewPrivs"])
print("self Seccomp", me["Seccomp"], "pid", os.getpid())
attempt("pid1_mem_write", lambda: os.close(os.open("/proc/1/mem", os.O_RDWR)))
attempt("ptrace_pid1", lambda: libc.ptrace(16, 1, 0, 0))
attempt("control_pid1_status", lambda: open("/proc/1/status").read())
"#;
        let r = s.py(&s.grant(), &["--tier", tier], code);
        r.expect_code(0)
            .stdout_has("Seccomp 2 NoNewPrivs 1")
            .stdout_has("self Seccomp 2");
        verdicts(
            &r,
            &["pid1_mem_write", "ptrace_pid1"],
            &["control_pid1_status"],
        );
        assert!(
            !r.stdout().contains("pid 1\n"),
            "tier {tier}: the command is not pid 1"
        );
    }
}

/// An install directory holding `loom` (a hard link when the filesystem and permissions allow, else a copy: the
/// test never writes it) and a copy of `loom-sandbox-exec` (always a copy: the test replaces it, and a hard link
/// would replace the build's own).
fn install_copy(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let real = crate::loom();
    let from = real.parent().unwrap();
    let loom = dir.join("loom");
    if std::fs::hard_link(&real, &loom).is_err() {
        std::fs::copy(&real, &loom).unwrap();
    }
    std::fs::copy(
        from.join("loom-sandbox-exec"),
        dir.join("loom-sandbox-exec"),
    )
    .unwrap();
    loom
}

/// N3: the inner stage is never run from where it is installed. loom installed inside a writable root: the command
/// replaces `loom-sandbox-exec` with a script that forges the status line and skips Landlock and seccomp. A later
/// loom refuses the replaced stage (not an ELF executable) and runs nothing; the command never sees the installed
/// file as its inner stage, only the read-only copy on the view's `/dev`.
#[test]
fn a_replaced_inner_stage_is_refused_and_never_runs() {
    let s = Sbx::new();
    let inst = s.work.join("bin");
    let loom = install_copy(&inst);
    for tier in ["a", "c"] {
        if !tier_ok(&s, tier) {
            continue;
        }
        // The stage in the view is the read-only copy, not the installed file (which the command can write).
        let check = r#"grep -c ' /dev/.loom-sandbox-exec ro,' /proc/self/mountinfo; \
            (echo x >> /dev/.loom-sandbox-exec) 2>/dev/null || echo copy-read-only; \
            test -w "$1" && echo installed-writable"#;
        let stage = inst.join("loom-sandbox-exec");
        let out = Command::new(&loom)
            .args([
                "sandbox",
                "run",
                "--tier",
                tier,
                "-v",
                "--grant",
                &s.grant(),
            ])
            .arg("--cwd")
            .arg(&s.work)
            .args(["--", "sh", "-c", check, "sh", stage.to_str().unwrap()])
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", &s.home)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for want in ["1\n", "copy-read-only", "installed-writable"] {
            assert!(stdout.contains(want), "tier {tier}: {want} not in {stdout}");
        }
    }
    // The attack: the command (allowed to write its project) replaces the installed stage with a forger.
    let evil = "#!/bin/sh\nfd=$3\necho 'ok landlock=full seccomp=on no_new_privs=on' >&$fd\nwhile [ \"$1\" != -- ]; do shift; done; shift\nexec \"$@\"\n";
    std::fs::write(s.work.join("evil"), evil).unwrap();
    let replace = format!(
        "cp evil {0} && chmod 755 {0} && echo replaced",
        inst.join("loom-sandbox-exec").display()
    );
    let tier = ["a", "c"].into_iter().find(|t| tier_ok(&s, t));
    let Some(tier) = tier else { return };
    let r = s.run(&s.grant(), &["--tier", tier], &["sh", "-c", &replace]);
    r.expect_code(0).stdout_has("replaced");
    // The next loom started from that install refuses the stage; the command never runs.
    let marker = s.work.join("ran");
    let out = Command::new(&loom)
        .args(["sandbox", "run", "--tier", tier, "--grant", &s.grant()])
        .arg("--cwd")
        .arg(&s.work)
        .args(["--", "touch"])
        .arg(&marker)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", &s.home)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("not an ELF executable"), "{stderr}");
    assert!(!marker.exists(), "the command ran under a replaced stage");
}

/// N5 and N8: tier B shares the host's IPC namespace and mount view, so SysV IPC and inotify are denied there; tier
/// A has namespaces of its own, where both stay usable (the controls).
#[test]
fn tier_b_denies_sysv_ipc_and_inotify_of_the_host() {
    let s = Sbx::new();
    // A host segment and queue of the same user, as another program of the user would hold them.
    let key = 0x10c0_0000 + (std::process::id() & 0xffff);
    let setup = format!(
        r#"import ctypes
libc = ctypes.CDLL(None, use_errno=True)
shm = libc.shmget({key}, 4096, 0o1600)
msg = libc.msgget({key}, 0o1600)
print(shm, msg)"#
    );
    let out = Command::new("python3")
        .args(["-c", &setup])
        .output()
        .unwrap();
    let ids = String::from_utf8_lossy(&out.stdout).into_owned();
    let ids: Vec<i64> = ids
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    struct Cleanup(Vec<i64>);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            if let [shm, msg] = self.0[..] {
                let _ = Command::new("ipcrm")
                    .args(["-m", &shm.to_string(), "-q", &msg.to_string()])
                    .output();
            }
        }
    }
    let _cleanup = Cleanup(ids.clone());
    assert!(
        ids.len() == 2 && ids.iter().all(|i| *i >= 0),
        "cannot create the host's SysV objects: {ids:?}"
    );
    let code = format!(
        r#"
attempt("host_shm", lambda: libc.shmget({key}, 0, 0))
attempt("host_msg", lambda: libc.msgget({key}, 0))
attempt("private_shm", lambda: libc.shmget(0, 4096, 0o600))
attempt("semget", lambda: libc.semget(0, 1, 0o600))
attempt("inotify", lambda: libc.inotify_init1(0))
attempt("fanotify", lambda: libc.fanotify_init(0, 0))
attempt("control_write", lambda: write("mine.txt"))
"#
    );
    if tier_ok(&s, "b") {
        let r = s.py(&s.grant(), &["--tier", "b"], &code);
        r.expect_code(0);
        verdicts(
            &r,
            &[
                "host_shm",
                "host_msg",
                "private_shm",
                "semget",
                "inotify",
                "fanotify",
            ],
            &["control_write"],
        );
        r.stdout_has("host_shm: BLOCKED EPERM")
            .stdout_has("inotify: BLOCKED EPERM");
    }
    if tier_ok(&s, "a") {
        // Its own IPC namespace: the host's key is not there, private objects work; inotify watches the view.
        let r = s.py(&s.grant(), &["--tier", "a"], &code);
        r.expect_code(0)
            .stdout_has("host_shm: BLOCKED ENOENT")
            .stdout_has("fanotify: BLOCKED EPERM");
        verdicts(
            &r,
            &[],
            &["private_shm", "semget", "inotify", "control_write"],
        );
    }
}

/// N6: loom started with inheritable capabilities (old container runtimes, `capsh --inh`, pam_cap): as root the
/// command would get them back as permitted and effective at exec. Every set is empty in every tier.
#[test]
fn every_capability_set_is_empty_even_when_loom_inherits_some() {
    if !is_root() {
        eprintln!("SKIPPED: inheritable capabilities need root to set up");
        return;
    }
    let s = Sbx::new();
    let caps = "+mknod,+sys_admin,+net_raw,+dac_override";
    // Control: setpriv really hands loom an inheritable set.
    let control = Command::new("setpriv")
        .args([
            "--inh-caps",
            caps,
            "--",
            "grep",
            "CapInh",
            "/proc/self/status",
        ])
        .output();
    let Ok(control) = control else {
        eprintln!("SKIPPED: no setpriv");
        return;
    };
    let control = String::from_utf8_lossy(&control.stdout).into_owned();
    assert!(
        control.contains("CapInh:") && !control.contains("0000000000000000"),
        "{control}"
    );
    for tier in ["b", "a", "c"] {
        if !tier_ok(&s, tier) {
            continue;
        }
        let out = Command::new("setpriv")
            .args(["--inh-caps", caps, "--"])
            .arg(crate::loom())
            .args(["sandbox", "run", "--tier", tier, "--grant", &s.grant()])
            .arg("--cwd")
            .arg(&s.work)
            .args(["--", "grep", "^Cap", "/proc/self/status"])
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", &s.home)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "tier {tier}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
            assert!(
                stdout.contains(&format!("{set}:\t0000000000000000")),
                "tier {tier}: {set} not empty:\n{stdout}"
            );
        }
    }
}

/// N7: with the network on, socket families are an allowlist (unix, inet, inet6, route netlink); the rarely
/// legitimate syscalls fail with EPERM and syscalls newer than loom knows with ENOSYS, in every tier.
#[test]
fn socket_families_are_an_allowlist_and_rare_syscalls_are_denied() {
    let s = Sbx::new();
    let grant = format!(
        r#"{{ commands = "*", paths = ["{}"], network = "*" }}"#,
        s.work.display()
    );
    let code = r#"
for name, fam, typ, proto in [("alg", 38, 5, 0), ("tipc", 30, 2, 0), ("vsock", 40, 1, 0), ("packet", 17, 3, 0),
                              ("can", 29, 3, 1), ("bluetooth", 31, 3, 1), ("netlink_audit", 16, 3, 9),
                              ("control_inet", 2, 1, 0), ("control_inet6", 10, 2, 0), ("control_unix", 1, 1, 0),
                              ("control_netlink_route", 16, 3, 0)]:
    attempt(name, lambda: socket.socket(fam, typ, proto).close())
attempt("modify_ldt", lambda: libc.syscall(154, 0, ctypes.create_string_buffer(16), 16))
attempt("uselib", lambda: libc.syscall(134, b"/nonexistent"))
attempt("syslog", lambda: libc.syscall(103, 10, 0, 0))
attempt("open_tree", lambda: libc.syscall(428, -100, b".", 0))
attempt("fsopen", lambda: libc.syscall(430, b"tmpfs", 0))
libc.syscall(467, -1, 0, 0, 0, 0)
print("open_tree_attr errno", errno.errorcode.get(ctypes.get_errno()))
attempt("control_getpid", lambda: libc.syscall(39))
"#;
    for tier in ["a", "b", "c"] {
        if !tier_ok(&s, tier) {
            continue;
        }
        let r = s.py(&grant, &["--tier", tier], code);
        r.expect_code(0);
        verdicts(
            &r,
            &[
                "alg",
                "tipc",
                "vsock",
                "packet",
                "can",
                "bluetooth",
                "netlink_audit",
            ],
            &[
                "control_inet",
                "control_inet6",
                "control_netlink_route",
                "control_getpid",
            ],
        );
        // tier B denies unix sockets too (tier_b.rs: they would reach the host's)
        if tier == "b" {
            r.stdout_has("control_unix: BLOCKED EPERM");
        } else {
            r.stdout_has("control_unix: ALLOWED");
        }
        for denied in [
            "alg",
            "tipc",
            "can",
            "modify_ldt",
            "uselib",
            "syslog",
            "open_tree",
            "fsopen",
        ] {
            r.stdout_has(&format!("{denied}: BLOCKED EPERM"));
        }
        r.stdout_has("open_tree_attr errno ENOSYS");
    }
}

/// A Python wrapper that installs a seccomp filter making `close_range` fail with ENOSYS (as on kernels before 5.9,
/// where tier C is most common), opens `argv[1]` for appending on descriptor 7 (inheritable), and execs the rest.
const NO_CLOSE_RANGE: &str = r#"
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
insns = [(0x20, 0, 0, 0), (0x15, 0, 1, 436), (0x06, 0, 0, 0x50000 | 38), (0x06, 0, 0, 0x7fff0000)]
buf = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *i) for i in insns))
class Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
prog = Prog(len(insns), ctypes.addressof(buf))
assert libc.prctl(38, 1, 0, 0, 0) == 0
assert libc.prctl(22, 2, ctypes.byref(prog), 0, 0) == 0
assert libc.syscall(436, 3, 3, 0) == -1 and ctypes.get_errno() == 38
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
os.dup2(fd, 7)
os.set_inheritable(7, True)
os.execv(sys.argv[2], sys.argv[2:])
"#;

/// N11: where `close_range` is missing, the inner stage closes inherited descriptors one by one instead of leaving
/// them open: a descriptor loom inherited from its own parent does not reach the command.
#[test]
fn inherited_descriptors_are_closed_without_close_range() {
    let s = Sbx::new();
    let target = s.outside.join("fd-victim.txt");
    std::fs::write(&target, "").unwrap();
    let code = r#"
attempt("write_inherited_fd", lambda: os.write(7, b"pwned"))
print("fds", sorted(int(f) for f in os.listdir("/proc/self/fd")))
attempt("control_write", lambda: write("mine.txt"))
"#;
    let script = format!("{PRELUDE}\n{code}");
    for tier in ["a", "c"] {
        if !tier_ok(&s, tier) {
            continue;
        }
        let out = Command::new("python3")
            .args(["-c", NO_CLOSE_RANGE])
            .arg(&target)
            .arg(crate::loom())
            .args(["sandbox", "run", "--tier", tier, "--grant", &s.grant()])
            .arg("--cwd")
            .arg(&s.work)
            .args(["--", "python3", "-c", &script])
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", &s.home)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "tier {tier}: {stdout}\n{stderr}");
        for want in [
            "write_inherited_fd: BLOCKED EBADF",
            "fds [0, 1, 2, 3]",
            "control_write: ALLOWED",
        ] {
            assert!(
                stdout.contains(want),
                "tier {tier}: {want} not in:\n{stdout}\n{stderr}"
            );
        }
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "");
    }
}

/// N3: `loom doctor` warns when a typical grant (`~`, `./`) would cover loom's own executables.
#[test]
fn doctor_warns_when_a_typical_grant_covers_loom_s_executables() {
    let s = Sbx::new();
    let doctor = |loom: &Path| {
        let out = Command::new(loom)
            .arg("doctor")
            .current_dir(&s.outside)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", &s.home)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // Control: the build directory is in neither the home directory nor the working directory.
    let out = doctor(&crate::loom());
    assert!(out.contains("loom's binaries  ok"), "{out}");
    // loom installed under the home directory, as `cargo install` does.
    let installed = install_copy(&s.home.join(".cargo/bin"));
    let out = doctor(&installed);
    assert!(out.contains("loom's binaries  WARNING"), "{out}");
    assert!(out.contains(r#"paths = ["~"]"#), "{out}");
    assert!(out.contains("kernel "), "{out}");
}
