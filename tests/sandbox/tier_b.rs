//! Tier B (Landlock + seccomp, no namespaces), forced with `--tier b`: what Landlock does not mediate on the host —
//! pathname and abstract unix sockets, metadata calls, signals, truncate, background processes — is withheld, each
//! attack next to its allowed control (in tier B where the tier allows it, else in tier A, where the same script
//! succeeds). Also run as `loomtest` by the unprivileged re-run of the suite.

use std::os::unix::net::UnixListener;
use std::process::Command;

use crate::{verdicts, Sbx};

fn tier_available(s: &Sbx, tier: &str) -> bool {
    let r = s.run(&s.grant(), &["--tier", tier], &["true"]);
    if r.code() == 0 {
        return true;
    }
    eprintln!("SKIPPED: tier {tier} is not available here: {}", r.stderr());
    false
}

/// H4: a tier-B command cannot connect to a host unix socket outside its roots (the D-Bus session bus, ssh-agent,
/// X11, docker), by path or by abstract name; a connected pair still works, and tier A connects to the same socket
/// when a root holds it (the documented limit: sockets inside granted roots are reachable there).
#[test]
fn tier_b_cannot_connect_to_host_unix_sockets() {
    let s = Sbx::new();
    if !tier_available(&s, "b") {
        return;
    }
    // Listening on the host (the backlog accepts the connection; nobody needs to accept it).
    let outside_sock = s.outside.join("bus.sock");
    let _outside = UnixListener::bind(&outside_sock).unwrap();
    let home_sock = s.home.join("agent.sock");
    let _home = UnixListener::bind(&home_sock).unwrap();
    let abstract_name = format!("loom-test-{}", std::process::id());
    let _abstract = {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(&abstract_name).unwrap();
        UnixListener::bind_addr(&addr).unwrap()
    };
    let code = format!(
        r#"
def connect(addr):
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(addr)
attempt("connect_read_root", lambda: connect("{o}"))
attempt("connect_no_root", lambda: connect("{h}"))
attempt("connect_abstract", lambda: connect("\0{a}"))
attempt("dgram_sendto", lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b"x", "{h}"))
def pair():
    a, b = socket.socketpair()
    a.send(b"x")
    return b.recv(1) == b"x"
attempt("control_socketpair", pair)
"#,
        o = outside_sock.display(),
        h = home_sock.display(),
        a = abstract_name,
    );
    let r = s.py(&s.grant(), &["--tier", "b", "-v"], &code);
    r.expect_code(0)
        .stderr_has("pathname-sockets=seccomp")
        .stderr_has("abstract-sockets=seccomp");
    verdicts(
        &r,
        &[
            "connect_read_root",
            "connect_no_root",
            "connect_abstract",
            "dgram_sendto",
        ],
        &["control_socketpair"],
    );
    r.stdout_has("connect_no_root: BLOCKED EPERM");
    // Control: the same script in tier A reaches the socket a root holds (and not the others: not in the view).
    if tier_available(&s, "a") {
        let a = s.py(&s.grant(), &["--tier", "a"], &code);
        a.expect_code(0);
        verdicts(
            &a,
            &["connect_no_root", "connect_abstract"],
            &["connect_read_root", "control_socketpair"],
        );
    }
}

/// A row whose capability set brokers commands needs the broker's socket, which tier B cannot let through without
/// the host's: refused, naming why; tier A runs it.
#[test]
fn tier_b_refuses_rows_that_need_the_broker() {
    let s = Sbx::new();
    if !tier_available(&s, "b") {
        return;
    }
    let grant = format!(
        r#"[{{ commands = "*", paths = ["{}"] }}, {{ commands = ["date"] }}]"#,
        s.work.display()
    );
    let r = s.run(&grant, &["--tier", "b"], &["echo", "ran"]);
    r.expect_code(1)
        .stderr_has("loom's broker")
        .stderr_has("Landlock below ABI 9")
        .stdout_lacks("ran");
    if tier_available(&s, "a") {
        s.run(&grant, &["--tier", "a"], &["echo", "ran"])
            .expect_code(0)
            .stdout_has("ran");
    }
}

/// Landlock does not mediate chmod, chown, utime(n)sat or xattrs: tier B denies them by seccomp, outside the
/// roots (by path and through a descriptor) and, as `loom doctor` says, inside them too; tier A allows them
/// inside a writable root (the control) and refuses them outside (read-only binds).
#[test]
fn tier_b_denies_metadata_changes_everywhere() {
    let s = Sbx::new();
    if !tier_available(&s, "b") {
        return;
    }
    let v = s.outside.join("victim.txt");
    let key = s.home.join(".ssh/id_rsa");
    let before = std::fs::metadata(&v).unwrap();
    let code = format!(
        r#"
v, k = "{v}", "{k}"
uid, gid = os.getuid(), os.getgid()
attempt("chmod_read_root", lambda: os.chmod(v, 0o777))
attempt("chmod_no_root", lambda: os.chmod(k, 0o644))
attempt("chown_no_root", lambda: os.chown(k, uid, gid))
attempt("lchown_read_root", lambda: os.lchown(v, uid, gid))
attempt("utime_read_root", lambda: os.utime(v, (1, 1)))
attempt("utime_no_root", lambda: os.utime(k, None))
attempt("setxattr_read_root", lambda: os.setxattr(v, "user.loom", b"x"))
attempt("removexattr_no_root", lambda: os.removexattr(k, "user.loom"))
fd = os.open(v, os.O_RDONLY)
attempt("fchmod_fd", lambda: os.chmod(fd, 0o777))
attempt("fchown_fd", lambda: os.chown(fd, uid, gid))
attempt("futimens_fd", lambda: os.utime(fd, None))
attempt("fsetxattr_fd", lambda: os.setxattr(fd, "user.loom", b"x"))
attempt("chmod_inside_root", lambda: os.chmod("notes.txt", 0o755))
attempt("utime_inside_root", lambda: os.utime("notes.txt", None))
attempt("control_write_inside_root", lambda: write("notes.txt", "changed"))
"#,
        v = v.display(),
        k = key.display(),
    );
    let r = s.py(&s.grant(), &["--tier", "b", "-v"], &code);
    r.expect_code(0).stderr_has("metadata=seccomp");
    verdicts(
        &r,
        &[
            "chmod_read_root",
            "chmod_no_root",
            "chown_no_root",
            "lchown_read_root",
            "utime_read_root",
            "utime_no_root",
            "setxattr_read_root",
            "removexattr_no_root",
            "fchmod_fd",
            "fchown_fd",
            "futimens_fd",
            "fsetxattr_fd",
            // the cost inside the roots
            "chmod_inside_root",
            "utime_inside_root",
        ],
        &["control_write_inside_root"],
    );
    r.stdout_has("chmod_no_root: BLOCKED EPERM");
    let after = std::fs::metadata(&v).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(after.mode(), before.mode());
    assert_eq!(after.mtime(), before.mtime());
    if tier_available(&s, "a") {
        let a = s.py(&s.grant(), &["--tier", "a"], &code);
        a.expect_code(0);
        verdicts(
            &a,
            &["chmod_read_root", "utime_read_root"],
            &["chmod_inside_root", "utime_inside_root"],
        );
    }
}

/// Signals to processes outside the sandbox are scoped by Landlock (ABI 6+; tier B refuses below it unless the
/// manifest accepts `signals`); the command still signals its own children. The session's guard — loom's other
/// child, a fork holding a copy of loom's memory — can be neither read (its `mem`, its `environ`: Landlock scopes
/// ptrace) nor killed. truncate(2) outside the roots fails (Landlock ABI 3+), inside them it works.
#[test]
fn tier_b_scopes_signals_and_truncate() {
    let s = Sbx::new();
    if !tier_available(&s, "b") {
        return;
    }
    let mut host = Command::new("sleep").arg("1000").spawn().unwrap();
    let v = s.outside.join("victim.txt");
    let code = format!(
        r#"
import signal, subprocess
attempt("kill_host_process", lambda: os.kill({pid}, signal.SIGTERM))
attempt("kill_loom", lambda: os.kill(os.getppid(), 0))
# the session's guard: loom's other child (SECURITY.md, tier B), a fork holding a copy of loom's memory
def parent_of(p):
    try:
        return open(f"/proc/{{p}}/stat").read().rsplit(")", 1)[1].split()[1]
    except OSError:
        return None
guards = [int(p) for p in os.listdir("/proc")
          if p.isdigit() and int(p) != os.getpid() and parent_of(p) == str(os.getppid())]
print("guards", len(guards))
attempt("read_guard_memory", lambda: open(f"/proc/{{guards[0]}}/mem", "rb").read(1))
attempt("read_guard_environ", lambda: open(f"/proc/{{guards[0]}}/environ", "rb").read())
attempt("kill_guard", lambda: os.kill(guards[0], signal.SIGKILL))
child = subprocess.Popen(["sleep", "1000"])
attempt("control_kill_own_child", lambda: os.kill(child.pid, signal.SIGKILL))
child.wait()
attempt("truncate_read_root", lambda: os.truncate("{v}", 0))
attempt("control_truncate_inside_root", lambda: os.truncate("notes.txt", 1))
"#,
        pid = host.id(),
        v = v.display(),
    );
    let r = s.py(&s.grant(), &["--tier", "b", "-v"], &code);
    let alive = std::fs::read_to_string(format!("/proc/{}/stat", host.id()))
        .is_ok_and(|st| !st.contains(") Z"));
    let _ = host.kill();
    let _ = host.wait();
    r.expect_code(0)
        .stderr_has("signals=landlock")
        .stdout_has("guards 1");
    verdicts(
        &r,
        &[
            "kill_host_process",
            "kill_loom",
            "read_guard_memory",
            "read_guard_environ",
            "kill_guard",
            "truncate_read_root",
        ],
        &["control_kill_own_child", "control_truncate_inside_root"],
    );
    assert!(alive, "the host process was killed from tier B");
    assert_eq!(s.host_read(&v), "original");
    assert_eq!(s.host_read(&s.work.join("notes.txt")), "h");
}

/// M7: a background process (double-forked, so no longer the command's child) does not outlive the call in tier B:
/// the whole session is killed, and seccomp keeps every descendant in it (setsid fails). The control: the sleeper
/// did start (it wrote its pid).
#[test]
fn tier_b_kills_the_whole_session_when_the_call_ends() {
    let s = Sbx::new();
    if !tier_available(&s, "b") {
        return;
    }
    let script = r#"(sh -c 'sleep 1000 & echo $! > sleeper.pid'); python3 -c 'import os
try:
    os.setsid(); print("setsid: ALLOWED")
except OSError as e:
    print("setsid: BLOCKED", e.errno)'"#;
    let r = s.run(&s.grant(), &["--tier", "b"], &["sh", "-c", script]);
    r.expect_code(0).stdout_has("setsid: BLOCKED 1");
    let pid: u32 = s
        .host_read(&s.work.join("sleeper.pid"))
        .trim()
        .parse()
        .unwrap();
    // Killed before `loom sandbox run` returned: gone, or a zombie its new parent has not reaped yet.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let alive = stat.contains("(sleep)") && !stat.contains(") Z");
    if alive {
        // SAFETY: killing the leftover sleeper so the test leaves nothing behind.
        unsafe { libc_kill(pid as i32, 9) };
    }
    assert!(
        !alive,
        "the double-forked sleeper {pid} outlived the tier-B call: {stat}"
    );
}

/// `--accept` takes only the names a manifest's `[sandbox] accept` takes.
#[test]
fn unknown_accepted_gaps_are_refused() {
    let s = Sbx::new();
    s.run(&s.grant(), &["--accept", "sockets"], &["true"])
        .expect_code(2)
        .stderr_has("unknown sandbox gap")
        .stderr_has("signals");
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}
