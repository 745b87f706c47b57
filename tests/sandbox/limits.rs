//! The documented limits of the sandbox (SECURITY.md, "What is not enforced"), each shown through the real `loom
//! sandbox run`: the gap behaves as documented, next to a control showing the neighbouring behaviour that is enforced.
//! If one of these tests fails because the gap closed, the test and SECURITY.md must change together.
//!
//! Map: each bullet of "What is not enforced" (its bold title) → the tests that show it.
//!
//! - **Protected paths that do not exist when the command starts** →
//!   `limits::protected_names_absent_at_start_exist_until_the_command_ends_and_deeper_ones_stay` (a new `.envrc`
//!   exists while the command runs and is moved aside when it ends; an `.mcp.json` one level down, a `.git` two
//!   levels down or in a directory the command made stay; an existing `.mcp.json` and a `.git` one level down are
//!   read-only); `attacks::protected_names_a_command_creates_are_moved_aside_when_it_ends` (tiers A, B and C) and
//!   `attacks::protected_subpaths_stay_read_only` for what is enforced.
//! - **Other renames around protected paths** → `limits::renames_beside_protected_paths_are_allowed` (a sibling
//!   directory renames; `.git` and the directory holding a nested `.git` do not: EBUSY). Not shown: tools following
//!   a `gitdir:` file or `core.hooksPath` (that is git's behaviour, not the sandbox's).
//! - **Per-host network filtering** → `net::network_on_reaches_host_loopback` (with `network = "*"` a listener on the
//!   host's loopback is reached) next to `net::network_off_blocks_tcp_and_udp_to_host_loopback`.
//! - **Pathname unix sockets inside granted roots** (tiers A and C) →
//!   `limits::pathname_sockets_inside_granted_roots_are_connectable_in_tiers_a_and_c` (a host socket in a read-only
//!   root is connected to; one outside the roots is not in the view); tier B's refusal of all of them:
//!   `tier_b::tier_b_cannot_connect_to_host_unix_sockets`; `net::unix_sockets_of_the_host_are_unreachable`.
//! - **uid 0** → `limits::uid_0_is_exempt_from_rlimit_nproc` (as root, more processes than `--max-procs`; as
//!   `loomtest`, EAGAIN), `limits::uid_0_reads_root_only_system_files_but_cannot_write_them` (`/etc/shadow` readable,
//!   not writable; sysctls not writable); `procs::a_fork_bomb_is_bounded` (as root: the timeout and the pid namespace
//!   reap the bomb) and `unprivileged::unprivileged_fork_bomb_hits_rlimit_nproc`.
//! - **Tier B** → `limits::tier_b_reads_proc_of_same_uid_processes_and_not_host_tmp` (`/proc/<pid>/cmdline` and
//!   `status` of a host process readable in tier B, `environ` and `maps` not (EACCES: Landlock scopes ptrace); all
//!   invisible in tier A; host `/tmp` not readable; a private `TMPDIR`, removed afterwards); roots granted entry by
//!   entry (nothing new directly in a split root, `.git` read-only, a secret store unreadable):
//!   `tiers::tier_b_runs_in_a_checkout_with_git_read_only`,
//!   `tiers::tier_b_keeps_authority_files_read_only_and_denies_secret_stores`; SysV IPC and inotify:
//!   `hardening::tier_b_denies_sysv_ipc_and_inotify_of_the_host`; unix sockets:
//!   `tier_b::tier_b_cannot_connect_to_host_unix_sockets`; brokered rows:
//!   `tier_b::tier_b_refuses_rows_that_need_the_broker`; `setsid` and the session kill:
//!   `tier_b::tier_b_kills_the_whole_session_when_the_call_ends`; metadata calls:
//!   `tier_b::tier_b_denies_metadata_changes_everywhere`; signals and truncate by ABI:
//!   `tier_b::tier_b_scopes_signals_and_truncate`, `tier_b::unknown_accepted_gaps_are_refused`. Not tested here: the
//!   refusal below ABI 6, a command signalling its session's guard there (with `accept = ["signals"]`; at ABI 6+
//!   it cannot: `tier_b::tier_b_scopes_signals_and_truncate`) and the seccomp `truncate` denial below ABI 3 (this host has ABI 7; the same decision is
//!   run at ABI 2/5/6/7/9 by the unit tests of `sandbox/src/coverage.rs`). A signal cancel of `loom sandbox run`
//!   and loom killed with SIGKILL: the session's guard kills what left the command's group →
//!   `limits::a_signal_cancel_of_tier_b_kills_the_whole_session`,
//!   `procs::killing_loom_in_tier_b_takes_what_the_command_started_in_the_background`.
//! - **Tier C** has no Landlock layer → `limits::tier_c_has_no_landlock_layer` (with the network on, tier C reaches
//!   a host abstract unix socket that tier A's Landlock scoping blocks; the status lines say `landlock=off`,
//!   `landlock=not-enforced`); `tiers::tier_c_bwrap_and_seccomp_confine_without_landlock` for what the mount view
//!   still blocks.
//! - **Resources** → `limits::only_process_count_and_file_size_are_limited` (CPU, address space, data and stack
//!   limits are the caller's, while `RLIMIT_NPROC` and `RLIMIT_FSIZE` are set);
//!   `procs::file_size_is_bounded`.
//! - **Hard links made before** → `limits::hard_links_made_before_reach_the_outside_file` (in every tier: writing
//!   through a link made before the run changes the outside file, while writing it directly and making a new link
//!   are blocked); `attacks::a_hard_link_made_inside_cannot_reach_outside`.
//! - **The standard streams are the caller's** → `limits::the_callers_stdin_is_readable` (what the caller pipes in
//!   is read; `TIOCSTI` on it is denied); `procs::io_uring_and_terminal_injection_are_denied`.
//! - **macOS** → not testable here: this suite runs on Linux, and the SBPL profile is not applied anywhere yet (it is
//!   tested as text by `loom-sandbox`'s unit tests in `sandbox/src/sbpl.rs`).

use std::io::Write;
use std::os::unix::net::UnixListener;
use std::process::{Command, Stdio};

use loom_tests::Run;

use crate::{is_root, marker, need_sandbox, tier_available, verdicts, Sbx};

#[test]
fn protected_names_absent_at_start_exist_until_the_command_ends_and_deeper_ones_stay() {
    need_sandbox!();
    let s = Sbx::new();
    std::fs::write(s.work.join(".mcp.json"), "{}").unwrap();
    for d in ["a/.git", "a/b/.git"] {
        std::fs::create_dir_all(s.work.join(d)).unwrap();
        std::fs::write(s.work.join(d).join("config"), "[core]\n").unwrap();
    }
    let code = r#"
attempt("existing_mcp_json", lambda: write(".mcp.json"))
attempt("nested_git_one_level", lambda: write("a/.git/config"))
attempt("new_envrc", lambda: write(".envrc"))
print("during:", open(".envrc").read(), flush=True)
attempt("new_mcp_in_subdir", lambda: write("a/.mcp.json"))
attempt("nested_git_two_levels", lambda: write("a/b/.git/config"))
os.makedirs("fresh")
attempt("git_in_a_new_directory", lambda: os.makedirs("fresh/.git/hooks"))
"#;
    let r = s.py(&s.grant(), &[], code);
    r.expect_code(0);
    verdicts(
        &r,
        &["existing_mcp_json", "nested_git_one_level"],
        &[
            "new_envrc",
            "new_mcp_in_subdir",
            "nested_git_two_levels",
            "git_in_a_new_directory",
        ],
    );
    assert_eq!(s.host_read(&s.work.join(".mcp.json")), "{}");
    assert_eq!(s.host_read(&s.work.join("a/.git/config")), "[core]\n");
    // the gap: a new name at the root exists while the command runs (what reads it meanwhile trusts it) …
    r.stdout_has("during: pwned");
    // … and is moved aside when it ends
    assert!(!s.work.join(".envrc").exists());
    assert_eq!(s.host_read(&s.work.join(".envrc.loom-moved")), "pwned");
    // names below the root's own entries are not looked for: they stay
    assert_eq!(s.host_read(&s.work.join("a/.mcp.json")), "pwned");
    assert_eq!(s.host_read(&s.work.join("a/b/.git/config")), "pwned");
    assert!(s.work.join("fresh/.git/hooks").is_dir());
}

#[test]
fn renames_beside_protected_paths_are_allowed() {
    need_sandbox!();
    let s = Sbx::new();
    for d in [".git", "src", "a/.git"] {
        std::fs::create_dir_all(s.work.join(d)).unwrap();
    }
    std::fs::write(s.work.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(s.work.join("src/main.rs"), "fn main() {}\n").unwrap();
    let code = r#"
attempt("rename_git", lambda: os.rename(".git", "git-old"))
attempt("rename_dir_holding_nested_git", lambda: os.rename("a", "a-old"))
attempt("rename_sibling_dir", lambda: os.rename("src", "src-old"))
attempt("rename_file", lambda: os.rename("notes.txt", "notes-old.txt"))
"#;
    let r = s.py(&s.grant(), &[], code);
    r.expect_code(0);
    r.stdout_has("rename_git: BLOCKED EBUSY")
        .stdout_has("rename_dir_holding_nested_git: BLOCKED EBUSY");
    verdicts(&r, &[], &["rename_sibling_dir", "rename_file"]);
    assert!(s.work.join(".git/HEAD").is_file());
    assert!(s.work.join("a/.git").is_dir());
    assert!(s.work.join("src-old/main.rs").is_file());
    assert!(!s.work.join("src").exists());
}

#[test]
fn pathname_sockets_inside_granted_roots_are_connectable_in_tiers_a_and_c() {
    need_sandbox!();
    let s = Sbx::new();
    let inside = s.outside.join("svc.sock");
    let beyond = s.home.join("agent.sock");
    let code = format!(
        r#"
def connect(addr):
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.settimeout(3)
    c.connect(addr)
attempt("socket_in_read_root", lambda: connect("{i}"))
attempt("socket_outside_roots", lambda: connect("{b}"))
"#,
        i = inside.display(),
        b = beyond.display()
    );
    let mut ran = 0;
    for tier in ["a", "c"] {
        if !tier_available(&s, tier) {
            continue;
        }
        let _ = std::fs::remove_file(&inside);
        let _ = std::fs::remove_file(&beyond);
        let in_root = UnixListener::bind(&inside).unwrap();
        let out_root = UnixListener::bind(&beyond).unwrap();
        in_root.set_nonblocking(true).unwrap();
        out_root.set_nonblocking(true).unwrap();
        let r = s.py(&s.grant(), &["--tier", tier], &code);
        r.expect_code(0);
        verdicts(&r, &["socket_outside_roots"], &["socket_in_read_root"]);
        r.stdout_has("socket_outside_roots: BLOCKED ENOENT");
        assert!(
            in_root.accept().is_ok(),
            "tier {tier}: the socket inside a root got no client"
        );
        assert!(
            out_root.accept().is_err(),
            "tier {tier}: the socket outside the roots got a client"
        );
        ran += 1;
    }
    assert!(ran > 0, "tier A is available, so at least it ran");
}

#[test]
fn uid_0_reads_root_only_system_files_but_cannot_write_them() {
    need_sandbox!();
    if !is_root() {
        eprintln!("SKIPPED: not uid 0; the limit is about commands run by root");
        return;
    }
    if !std::path::Path::new("/etc/shadow").is_file() {
        eprintln!("SKIPPED: no /etc/shadow on this host");
        return;
    }
    let s = Sbx::new();
    let code = r#"
attempt("read_shadow", lambda: open("/etc/shadow").read())
attempt("write_shadow", lambda: write("/etc/shadow", "", "a"))
attempt("write_core_pattern", lambda: write("/proc/sys/kernel/core_pattern", "|/tmp/x"))
print("uid", os.getuid())
"#;
    let r = s.py(&s.grant(), &[], code);
    r.expect_code(0).stdout_has("uid 0");
    verdicts(
        &r,
        &["write_shadow", "write_core_pattern"],
        &["read_shadow"],
    );
}

/// Forks `n` children that wait on a pipe (so they all exist at once), then prints `FORKED n` or `LIMITED <errno>`.
const FORK_N: &str = r#"
import os, sys, errno
n = int(sys.argv[1])
r, w = os.pipe()
kids = []
try:
    for i in range(n):
        pid = os.fork()
        if pid == 0:
            os.close(w); os.read(r, 1); os._exit(0)
        kids.append(pid)
    print("FORKED", len(kids), flush=True)
except OSError as e:
    print("LIMITED", errno.errorcode[e.errno], len(kids), flush=True)
os.close(w)
for k in kids:
    os.waitpid(k, 0)
"#;

#[test]
fn uid_0_is_exempt_from_rlimit_nproc() {
    need_sandbox!();
    if !is_root() {
        eprintln!("SKIPPED: not uid 0; the limit is about commands run by root");
        return;
    }
    let s = Sbx::new();
    let args = ["python3", "-c", FORK_N, "8"];
    let r = s.run(&s.grant(), &["--max-procs", "3"], &args);
    r.expect_code(0).stdout_has("FORKED 8");
    // Control: the same command and limit as an unprivileged user stops at the limit.
    let has_user = Command::new("id")
        .arg("loomtest")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_user {
        eprintln!("SKIPPED control: no user loomtest (`.ci/run` creates it)");
        return;
    }
    let root = s.work.parent().unwrap();
    assert!(Command::new("chown")
        .arg("-R")
        .arg("loomtest:")
        .arg(root)
        .status()
        .unwrap()
        .success());
    let out = Command::new("runuser")
        .args([
            "-u",
            "loomtest",
            "--",
            "env",
            "-i",
            "PATH=/usr/local/bin:/usr/bin:/bin",
        ])
        .arg(format!("HOME={}", s.home.display()))
        .arg(crate::loom())
        .args(["sandbox", "run", "--grant", &s.grant(), "--cwd"])
        .arg(&s.work)
        .args(["--max-procs", "3", "--"])
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() && stdout.is_empty() {
        eprintln!(
            "SKIPPED control: loomtest cannot run loom here: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    assert!(
        stdout.contains("LIMITED EAGAIN"),
        "as loomtest RLIMIT_NPROC should stop the forks: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn tier_b_reads_proc_of_same_uid_processes_and_not_host_tmp() {
    let s = Sbx::new();
    if !tier_available(&s, "b") {
        return;
    }
    let mark = marker("environ");
    let mut victim = Command::new("python3")
        .args(["-c", "import time; time.sleep(30)", &mark])
        .env("LOOM_LIMIT_MARK", &mark)
        .spawn()
        .unwrap();
    let host_tmp = std::path::PathBuf::from("/tmp").join(format!("{mark}.txt"));
    std::fs::write(&host_tmp, "host tmp").unwrap();
    let code = format!(
        r#"
def cmdline():
    data = open("/proc/{pid}/cmdline", "rb").read()
    assert b"{mark}" in data, data
attempt("other_cmdline", cmdline)
attempt("other_status", lambda: open("/proc/{pid}/status").read())
attempt("other_environ", lambda: open("/proc/{pid}/environ", "rb").read())
attempt("other_maps", lambda: open("/proc/{pid}/maps").read())
attempt("host_tmp", lambda: open("{t}").read())
def own_tmp():
    d = os.environ.get("TMPDIR", "/tmp")
    write(os.path.join(d, "scratch"))
    print("TMPDIR", d, flush=True)
attempt("private_tmpdir", own_tmp)
"#,
        pid = victim.id(),
        t = host_tmp.display()
    );
    let b = s.py(&s.grant(), &["--tier", "b"], &code);
    let a = if tier_available(&s, "a") {
        Some(s.py(&s.grant(), &["--tier", "a"], &code))
    } else {
        None
    };
    let _ = victim.kill();
    let _ = victim.wait();
    let _ = std::fs::remove_file(&host_tmp);
    b.expect_code(0);
    verdicts(
        &b,
        &["host_tmp"],
        &["other_cmdline", "other_status", "private_tmpdir"],
    );
    // What needs ptrace access to the process is denied by Landlock, which scopes ptrace to the sandbox's own domain.
    b.stdout_has("other_environ: BLOCKED EACCES")
        .stdout_has("other_maps: BLOCKED EACCES");
    let tmpdir = b
        .stdout()
        .lines()
        .find_map(|l| l.strip_prefix("TMPDIR ").map(str::to_string))
        .unwrap();
    assert_ne!(tmpdir, "/tmp", "tier B's command got the host's /tmp");
    assert!(
        !std::path::Path::new(&tmpdir).exists(),
        "tier B's private TMPDIR {tmpdir} outlived the command"
    );
    // Control: tier A's pid namespace hides the host process.
    if let Some(a) = a {
        a.expect_code(0);
        verdicts(
            &a,
            &["other_cmdline", "other_status", "other_environ", "host_tmp"],
            &["private_tmpdir"],
        );
        a.stdout_has("other_cmdline: BLOCKED ENOENT");
    }
}

#[test]
fn tier_c_has_no_landlock_layer() {
    need_sandbox!();
    let s = Sbx::new();
    if !tier_available(&s, "c") {
        return;
    }
    let name = marker("abs-c");
    let listener = {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        UnixListener::bind_addr(&addr).unwrap()
    };
    listener.set_nonblocking(true).unwrap();
    let grant = format!(
        r#"{{ commands = "*", paths = ["{}"], network = "*" }}"#,
        s.work.display()
    );
    let code = format!(
        r#"
def conn():
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.settimeout(3)
    c.connect("\0{name}")
attempt("host_abstract_socket", conn)
attempt("write_outside", lambda: write("{v}"))
"#,
        v = s.outside.join("victim.txt").display()
    );
    // Control: tier A's Landlock scoping refuses the host's abstract socket even with the network on.
    let a = s.py(&grant, &["--tier", "a", "-v"], &code);
    a.expect_code(0).stderr_has("landlock=full");
    verdicts(&a, &["host_abstract_socket", "write_outside"], &[]);
    assert!(listener.accept().is_err(), "tier A reached the host socket");
    let c = s.py(&grant, &["--tier", "c", "-v"], &code);
    c.expect_code(0);
    c.stderr_has("landlock=off")
        .stderr_has("tier=C landlock=not-enforced");
    // The mount view still keeps the outside file out; nothing else scopes the socket.
    verdicts(&c, &["write_outside"], &["host_abstract_socket"]);
    assert!(
        listener.accept().is_ok(),
        "tier C did not reach the host socket"
    );
    assert_eq!(s.host_read(&s.outside.join("victim.txt")), "original");
}

#[test]
fn only_process_count_and_file_size_are_limited() {
    need_sandbox!();
    let s = Sbx::new();
    let probe = "import resource as r
for k in ['RLIMIT_CPU', 'RLIMIT_AS', 'RLIMIT_DATA', 'RLIMIT_STACK', 'RLIMIT_NPROC', 'RLIMIT_FSIZE']:
    print(k, r.getrlimit(getattr(r, k)))
";
    let host = Command::new("python3")
        .args(["-c", probe])
        .output()
        .unwrap();
    assert!(host.status.success());
    let host = String::from_utf8_lossy(&host.stdout).to_string();
    let r = s.run(
        &s.grant(),
        &["--max-procs", "77", "--max-file-size", "123456"],
        &["python3", "-c", probe],
    );
    r.expect_code(0)
        .stdout_has("RLIMIT_NPROC (77, 77)")
        .stdout_has("RLIMIT_FSIZE (123456, 123456)");
    for line in host.lines() {
        if ["RLIMIT_CPU", "RLIMIT_AS", "RLIMIT_DATA", "RLIMIT_STACK"]
            .iter()
            .any(|k| line.starts_with(&format!("{k} ")))
        {
            r.stdout_has(line);
        }
    }
}

#[test]
fn hard_links_made_before_reach_the_outside_file() {
    need_sandbox!();
    let s = Sbx::new();
    let victim = s.outside.join("victim.txt");
    std::fs::hard_link(&victim, s.work.join("old-link")).unwrap();
    let code = format!(
        r#"
attempt("write_direct", lambda: write("{v}", "direct"))
attempt("new_link", lambda: os.link("{v}", "new-link"))
attempt("write_old_link", lambda: write("old-link", "through the old link"))
"#,
        v = victim.display()
    );
    for tier in ["a", "b", "c"] {
        if !tier_available(&s, tier) {
            continue;
        }
        std::fs::write(&victim, "original").unwrap();
        let r = s.py(&s.grant(), &["--tier", tier], &code);
        r.expect_code(0);
        verdicts(&r, &["write_direct", "new_link"], &["write_old_link"]);
        assert_eq!(
            s.host_read(&victim),
            "through the old link",
            "tier {tier}: the outside file did not change through the old link"
        );
    }
}

#[test]
fn the_callers_stdin_is_readable() {
    need_sandbox!();
    let s = Sbx::new();
    let code = format!(
        "{}\nimport fcntl, termios\nprint('read:', sys.stdin.read().strip())\nattempt('tiocsti', lambda: fcntl.ioctl(0, termios.TIOCSTI, b'x'))\n",
        crate::PRELUDE
    );
    let grant = s.grant();
    let work = s.work.to_str().unwrap();
    let args = [
        "sandbox", "run", "--grant", &grant, "--cwd", work, "--", "python3", "-c", &code,
    ];
    let mut child = Command::new(crate::loom())
        .args(args)
        .current_dir(s.scratch.path())
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", &s.home)
        .env("LOOM_DATA_HOME", s.scratch.path().join(".loom-data"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"typed by the caller\n")
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let r = Run {
        args: args.iter().map(|a| a.to_string()).collect(),
        cwd: s.scratch.path().to_path_buf(),
        output,
    };
    r.expect_code(0).stdout_has("read: typed by the caller");
    r.stdout_has("tiocsti: BLOCKED EPERM");
}

/// Tier B, a cancel by signal: `loom sandbox run` killed by SIGTERM kills the command's process group from its
/// handler, which cannot scan `/proc` for the session, and exits; a descendant that moved to a process group of its
/// own (`setpgid`, which tier B allows; `setsid` it denies) is killed by the session's guard once loom has ended
/// (`sandbox/src/session_guard.rs`). Before the guard, it outlived the cancel. (When loom ends a call itself, the
/// whole session is killed: `tier_b::tier_b_kills_the_whole_session_when_the_call_ends`.)
#[test]
fn a_signal_cancel_of_tier_b_kills_the_whole_session() {
    let s = Sbx::new();
    if !tier_available(&s, "b") {
        return;
    }
    let work = s.work.display().to_string();
    let grant = s.grant();
    let script = r#"import os, time
pid = os.fork()
if pid == 0:
    os.setpgid(0, 0)
    open("moved.pid", "w").write(str(os.getpid()))
    time.sleep(300)
    os._exit(0)
open("stayed.pid", "w").write(str(os.getpid()))
time.sleep(300)
"#;
    let mut child = Command::new(crate::loom())
        .args([
            "sandbox", "run", "--grant", &grant, "--cwd", &work, "--tier", "b", "--", "python3",
            "-c", script,
        ])
        .current_dir(&work)
        // outside the writable root: loom's records there are kept read-only, which tier B can only do by granting
        // the root entry by entry (nothing new directly in it)
        .env("LOOM_DATA_HOME", s.work.with_file_name(".loom-data"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let read_pid = |name: &str| -> Option<i32> {
        std::fs::read_to_string(s.work.join(name))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    // wait until both processes said who they are (bounded: the command writes them at once)
    let mut pids = None;
    for _ in 0..600 {
        if let (Some(m), Some(st)) = (read_pid("moved.pid"), read_pid("stayed.pid")) {
            pids = Some((m, st));
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let Some((moved, stayed)) = pids else {
        let _ = child.kill();
        panic!("the command never started its two processes");
    };
    // SAFETY: signalling the loom process this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let _ = child.wait();
    let alive = |pid: i32| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        stat.contains("(python3)") && !stat.contains(") Z")
    };
    // the group is killed on the way out, the rest by the guard; give the kills a moment to land (bounded)
    for _ in 0..200 {
        if !alive(stayed) && !alive(moved) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    let (moved_alive, stayed_alive) = (alive(moved), alive(stayed));
    for pid in [moved, stayed] {
        if alive(pid) {
            // SAFETY: cleaning up what this test left behind.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
    assert!(
        !stayed_alive,
        "the command's own process group outlived the cancel"
    );
    assert!(
        !moved_alive,
        "the descendant in a group of its own outlived the cancel"
    );
}
