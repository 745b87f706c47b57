//! Abuse of the broker from inside the sandboxed shell. Each test asserts the refusal or confinement AND a working
//! control, so none passes vacuously.

use std::time::{Duration, Instant};

use crate::{install, need_sandbox, Bk};

/// Runs the shim for `gcalcli` with a chosen argv[0] (`exec -a`), as a hostile caller inside the shell could.
fn shim_as(argv0: &str, args: &str) -> String {
    format!(r#"(exec -a '{argv0}' "$(command -v gcalcli)" {args}); echo "rc=$?""#)
}

#[test]
fn a_command_no_row_names_is_refused() {
    need_sandbox!();
    let b = Bk::new();
    let r = b.bash(
        &b.grant(""),
        &[],
        &format!(
            "{}\n{}\ngcalcli agenda control",
            shim_as("ls", "-la"),
            shim_as("bash", "-c id")
        ),
    );
    r.stdout_has("rc=127\n")
        .stderr_has("loom-shim: bash: `ls` is not named by any row of this grant")
        .stderr_has("`bash` is not named by any row")
        .stderr_has("(brokered commands: gcalcli)")
        .stdout_has("gcalcli argv: agenda control\n");
    assert_eq!(r.stdout().matches("rc=127").count(), 2, "{}", r.stdout());
}

#[test]
fn argv0_given_as_a_path_is_refused() {
    need_sandbox!();
    let b = Bk::new();
    let host = b.hostbin.join("gcalcli");
    let r = b.bash(
        &b.grant(""),
        &[],
        &format!(
            "{}\n{}\n{}",
            shim_as(&host.display().to_string(), "agenda x"),
            shim_as("./gcalcli", "agenda x"),
            shim_as("gcalcli", "agenda control")
        ),
    );
    r.stderr_has(&format!("`{}` is a path", host.display()))
        .stderr_has("`./gcalcli` is a path")
        .stdout_has("gcalcli argv: agenda control\nrc=0\n");
    assert_eq!(r.stdout().matches("rc=126").count(), 2, "{}", r.stdout());
}

#[test]
fn env_cannot_inject_code_or_a_path_into_the_brokered_command() {
    need_sandbox!();
    let b = Bk::new();
    // A planted gcalcli on a PATH the caller controls, and a preload library path the caller controls.
    std::fs::create_dir_all(b.work.join("fakebin")).unwrap();
    install(
        &b.work.join("fakebin/gcalcli"),
        "#!/bin/sh\necho PWNED-BY-PLANTED-BINARY\n",
    );
    let grant = b.grant(r#", env = ["GCAL_OK"]"#);
    let r = b.bash(
        &grant,
        &[],
        &format!(
            r#"export LD_PRELOAD={work}/evil.so LD_LIBRARY_PATH={work} BASH_ENV={work}/evil.sh PYTHONPATH={work} GCAL_OK=passed SECRET_TOKEN=s3cret
shim="$(command -v gcalcli)"
(PATH={work}/fakebin:$PATH; exec -a gcalcli "$shim" env)"#,
            work = b.work.display()
        ),
    );
    let out = r.stdout();
    r.expect_code(0).stdout_lacks("PWNED");
    for bad in [
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "BASH_ENV",
        "PYTHONPATH",
        "SECRET_TOKEN",
        "fakebin",
    ] {
        assert!(
            !out.contains(bad),
            "{bad} reached the brokered command:\n{out}"
        );
    }
    // Control: what the row's env names exactly does cross.
    r.stdout_has("GCAL_OK=passed\n");
    // The row's env = ["GCAL_OK"] drops tier 2 (PATH) entirely; with env absent, PATH is the host's, never the caller's.
    let r = b.bash(
        &b.grant(""),
        &[],
        &format!(
            r#"shim="$(command -v gcalcli)"; (PATH={work}/fakebin:$PATH; exec -a gcalcli "$shim" env) | grep '^PATH='"#,
            work = b.work.display()
        ),
    );
    r.expect_code(0)
        .stdout_has(&format!("PATH={}\n", b.host_path()));
}

#[test]
fn even_env_star_never_passes_code_or_config_redirects_from_the_caller() {
    need_sandbox!();
    let b = Bk::new();
    let home = std::env::var("HOME").unwrap_or_default();
    let r = b.bash(
        &b.grant(r#", env = "*""#),
        &[],
        &format!(
            r#"export LD_PRELOAD={work}/evil.so PAGER='sh -c evil' GIT_SSH_COMMAND=evil HOME={work} CALLER_VAR=crossed
gcalcli env"#,
            work = b.work.display()
        ),
    );
    let out = r.stdout();
    r.expect_code(0);
    for bad in [
        "CALLER_VAR",
        "LD_PRELOAD",
        "PAGER=sh",
        "GIT_SSH_COMMAND",
        &format!("HOME={}", b.work.display()),
    ] {
        assert!(
            !out.contains(bad),
            "{bad} reached the brokered command:\n{out}"
        );
    }
    if !home.is_empty() {
        r.stdout_has(&format!("HOME={home}\n"));
    }
}

#[test]
fn a_flood_of_requests_is_bounded_and_does_not_hang() {
    need_sandbox!();
    let b = Bk::new();
    let start = Instant::now();
    let r = b.bash(
        &b.grant(""),
        &["--broker-max-calls", "2", "--broker-max-waiting", "2"],
        r#"for i in $(seq 1 40); do (gcalcli sleep 0.3 >/dev/null 2>&1; echo "rc=$?") & done; wait
gcalcli agenda after-the-flood"#,
    );
    let out = r.stdout();
    let ok = out.matches("rc=0").count();
    let refused = out.matches("rc=126").count();
    assert_eq!(ok + refused, 40, "{out}");
    assert!(ok >= 2, "some calls must run: {out}");
    assert!(
        refused >= 1,
        "a flood beyond the bounds must be refused: {out}"
    );
    r.expect_code(0)
        .stdout_has("gcalcli argv: agenda after-the-flood\n");
    assert!(
        start.elapsed() < Duration::from_secs(40),
        "{:?}",
        start.elapsed()
    );

    // Output and time are bounded per call; the control calls under the bounds pass.
    let r = b.bash(
        &b.grant(""),
        &[
            "--broker-max-output",
            "100000",
            "--broker-timeout-ms",
            "1500",
        ],
        r#"gcalcli big 5000000 | wc -c; echo "big=${PIPESTATUS[0]}"
gcalcli sleep 30; echo "slow=$?"
gcalcli big 1000 | wc -c"#,
    );
    r.stdout_has("big=137\n")
        .stdout_has("slow=137\n")
        .stdout_has("1000\n")
        .stderr_has("output exceeded the broker's limit of 100000 bytes")
        .stderr_has("timed out");
}

#[test]
fn descriptors_passed_over_the_socket_are_refused() {
    need_sandbox!();
    let b = Bk::new();
    // A hand-written client inside the shell: the same request, once with a descriptor attached, once without.
    let py = r#"
import os, socket, struct
def request(argv):
    p = struct.pack(">H", 1) + struct.pack(">I", len(argv))
    for a in argv: p += struct.pack(">I", len(a)) + a
    cwd = os.getcwd().encode(); p += struct.pack(">I", len(cwd)) + cwd + struct.pack(">I", 0)
    return bytes([1]) + struct.pack(">I", len(p)) + p
def call(fds):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(os.environ["LOOM_BROKER_SOCKET"])
    msg = request([b"gcalcli", b"agenda", b"fd"])
    if fds: socket.send_fds(s, [msg], fds)
    else: s.sendall(msg)
    try: s.sendall(bytes([3]) + struct.pack(">I", 0))
    except BrokenPipeError: pass
    data = b""
    while True:
        try: c = s.recv(65536)
        except ConnectionResetError: break
        if not c: break
        data += c
    frames = []
    while data:
        t, n = data[0], struct.unpack(">I", data[1:5])[0]
        frames.append((t, data[5:5+n])); data = data[5+n:]
    return frames
for t, p in call([os.open("/etc/hostname", os.O_RDONLY)]):
    print("with-fd", hex(t), p[1:].decode() if t == 0x84 else p)
for t, p in call([]):
    print("control", hex(t), p)
"#;
    let r = b.bash(&b.grant(""), &[], &format!("python3 -c '{py}'"));
    r.expect_code(0)
        .stdout_has(
            "with-fd 0x84 bad request: file descriptors passed over the broker socket are refused",
        )
        .stdout_has("control 0x81 b'gcalcli argv: agenda fd\\n'")
        .stdout_has("control 0x83");
}

#[test]
fn a_brokered_command_cannot_write_outside_its_own_rows_paths() {
    need_sandbox!();
    let b = Bk::new();
    let r = b.bash(
        &b.grant(""),
        &[],
        &format!(
            r#"gcalcli write {work}/from-gcalcli; echo "work=$?"
gcalcli write {gcal}/from-gcalcli; echo "gcal=$?"
echo shell > {gcal}/from-shell 2>/dev/null; echo "shell-into-gcal=$?"
echo shell > {work}/from-shell; echo "shell-into-work=$?""#,
            work = b.work.display(),
            gcal = b.gcal.display()
        ),
    );
    r.expect_code(0)
        .stdout_has("work=4\n")
        .stdout_has("gcal=0\n")
        .stdout_has("shell-into-work=0\n");
    assert!(
        !r.stdout().contains("shell-into-gcal=0"),
        "rows never combine: {}",
        r.stdout()
    );
    assert!(
        !b.work.join("from-gcalcli").exists(),
        "the brokered command wrote outside its row"
    );
    assert_eq!(
        std::fs::read_to_string(b.gcal.join("from-gcalcli")).unwrap(),
        "brokered\n"
    );
    assert!(!b.gcal.join("from-shell").exists());
}

#[test]
fn what_a_brokered_command_creates_at_a_protected_name_is_moved_aside() {
    need_sandbox!();
    let b = Bk::new();
    let r = b.bash(
        &b.grant(""),
        &[],
        &format!(
            r#"gcalcli write {gcal}/.envrc; echo "gcal=$?""#,
            gcal = b.gcal.display()
        ),
    );
    let envrc = b.gcal.join(".envrc");
    r.expect_code(0).stdout_has("gcal=0\n").stderr_has(&format!(
        "loom-broker: gcalcli: [loom: {} (a protected name that did not exist when the command started) was moved to {}.loom-moved]",
        envrc.display(),
        envrc.display()
    ));
    assert!(!envrc.exists());
    assert_eq!(
        std::fs::read_to_string(b.gcal.join(".envrc.loom-moved")).unwrap(),
        "brokered\n"
    );
}
