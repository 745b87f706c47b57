//! A brokered command behaves as if it ran in place: argv, cwd, stdin, stdout, stderr and exit status round-trip,
//! however deeply it is nested; and it carries its own row (the network) while the shell around it has none.

use std::time::{Duration, Instant};

use crate::{install, need_sandbox, received, tcp_listener, Bk};

#[test]
fn reached_plainly_in_a_pipeline_from_bash_c_and_from_python() {
    need_sandbox!();
    let b = Bk::new();
    let r = b.bash(
        &b.grant(""),
        &[],
        r#"gcalcli agenda plain 'two words'
gcalcli agenda piped | tr a-z A-Z
bash -c 'gcalcli agenda nested'
python3 -c 'import subprocess; r = subprocess.run(["gcalcli", "agenda", "py"], capture_output=True, text=True); print("py:", r.stdout.strip(), r.returncode)'
"#,
    );
    r.expect_code(0)
        .stdout_has("gcalcli argv: agenda plain two words\n")
        .stdout_has("GCALCLI ARGV: AGENDA PIPED\n")
        .stdout_has("gcalcli argv: agenda nested\n")
        .stdout_has("py: gcalcli argv: agenda py 0\n");
}

#[test]
fn an_empty_environment_still_reaches_the_broker() {
    need_sandbox!();
    let b = Bk::new();
    let shim_dir = "$(dirname \"$(command -v gcalcli)\")";
    let r = b.bash(
        &b.grant(""),
        &[],
        &format!("d={shim_dir}; cd / && env -i \"$d/gcalcli\" agenda x; echo rc=$?; env -i PATH=\"$d\" gcalcli agenda clean"),
    );
    // Even with an empty environment (no LOOM_BROKER_SOCKET) the shim finds its broker. Invoked by path the shim
    // sends a path as argv[0], which the broker refuses (see abuse); by name it works.
    r.stdout_has("rc=126")
        .stdout_has("gcalcli argv: agenda clean\n");
}

#[test]
fn cwd_is_read_where_the_command_is_invoked_however_deep() {
    need_sandbox!();
    let b = Bk::new();
    std::fs::create_dir_all(b.work.join("a/b/c")).unwrap();
    // The gcalcli row may also read the project, so the caller's cwd is inside its paths.
    let grant = b.grant(&format!(r#", read_paths = ["{}"]"#, b.work.display()));
    let r = b.bash(
        &grant,
        &[],
        r#"cd a && bash -c 'cd b && sh -c "cd c && python3 -c \"import subprocess; subprocess.run([\\\"gcalcli\\\", \\\"pwd\\\"])\""'"#,
    );
    r.expect_code(0)
        .stdout_has(&format!("{}\n", b.work.join("a/b/c").display()));
    // Control: a cwd outside the row's paths is never used; the call starts in an empty neutral directory.
    let r = b.bash(
        &b.grant(""),
        &[],
        "cd /tmp && gcalcli pwd && ls -A \"$(gcalcli pwd)\" | wc -l",
    );
    r.expect_code(0)
        .stdout_lacks("/tmp\n")
        .stdout_has("/cwd\n0\n");
}

#[test]
fn stdin_streams_both_ways() {
    need_sandbox!();
    let b = Bk::new();
    // A request/response conversation with a brokered coprocess: only works if stdin and stdout stream.
    let r = b.bash(
        &b.grant(""),
        &[],
        r#"coproc G { gcalcli cat; }
echo ping >&"${G[1]}"
read -t 10 line <&"${G[0]}" && echo "got=$line"
echo pong >&"${G[1]}"
read -t 10 line <&"${G[0]}" && echo "got=$line"
exec {G[1]}>&-
wait
seq 1 100000 | gcalcli cat | tail -n 1"#,
    );
    r.expect_code(0)
        .stdout_has("got=ping\ngot=pong\n")
        .stdout_has("100000\n");
}

#[test]
fn large_outputs_and_inputs_arrive_whole() {
    need_sandbox!();
    let b = Bk::new();
    let r = b.bash(
        &b.grant(""),
        &[],
        "gcalcli big 20000000 | wc -c; head -c 12000000 /dev/urandom > in.bin; gcalcli cat < in.bin | cmp - in.bin && echo same",
    );
    r.expect_code(0)
        .stdout_has("20000000\n")
        .stdout_has("same\n");
}

#[test]
fn exit_codes_signal_deaths_and_pipefail() {
    need_sandbox!();
    let b = Bk::new();
    let r = b.bash(
        &b.grant(""),
        &[],
        r#"gcalcli exit 7; echo "exit=$?"
gcalcli kill 15; echo "term=$?"
set -o pipefail
gcalcli kill 9 | cat; echo "pipefail=$?"
gcalcli exit 3 | true; echo "pipestatus=${PIPESTATUS[0]}"
gcalcli big 10000000 | head -c 10 >/dev/null; echo "sigpipe=${PIPESTATUS[0]}"
gcalcli agenda ok | cat; echo "ok=$?""#,
    );
    r.expect_code(0)
        .stdout_has("exit=7\n")
        .stdout_has("term=143\n")
        .stdout_has("pipefail=137\n")
        .stdout_has("pipestatus=3\n")
        .stdout_has("sigpipe=141\n")
        .stdout_has("ok=0\n")
        .stderr_has("exiting 7\n");
    // The shell's own exit status is the brokered command's.
    b.bash(&b.grant(""), &[], "gcalcli exit 42").expect_code(42);
}

#[test]
fn the_brokered_command_has_the_network_and_the_shell_does_not() {
    need_sandbox!();
    let b = Bk::new();
    let (port, rx) = tcp_listener();
    let r = b.bash(
        &b.grant(""),
        &[],
        &format!(
            r#"gcalcli net {port} brokered
if exec 3<>/dev/tcp/127.0.0.1/{port}; then echo hello-from-shell >&3; echo shell-net-ok; else echo shell-net-failed; fi"#
        ),
    );
    r.stdout_has("net-ok\n").stdout_has("shell-net-failed\n");
    let got = received(&rx);
    assert!(
        got.iter().any(|s| s.contains("hello-from-brokered")),
        "{got:?}"
    );
    assert!(
        !got.iter().any(|s| s.contains("hello-from-shell")),
        "{got:?}"
    );
}

#[test]
fn an_absolute_path_or_a_renamed_copy_falls_back_to_the_general_row() {
    need_sandbox!();
    let b = Bk::new();
    let (port, rx) = tcp_listener();
    // Copies of the real binary the shell can see: by absolute path, and renamed.
    std::fs::create_dir_all(b.work.join("bin")).unwrap();
    install(&b.work.join("bin/gcalcli"), super::FAKE_GCALCLI);
    install(&b.work.join("gcal-renamed"), super::FAKE_GCALCLI);
    let r = b.bash(
        &b.grant(""),
        &[],
        &format!(
            r#"{work}/bin/gcalcli net {port} by-path; echo "path=$?"
./gcal-renamed net {port} renamed; echo "renamed=$?"
gcalcli net {port} control; echo "control=$?""#,
            work = b.work.display()
        ),
    );
    r.expect_code(0)
        .stdout_has("path=3\n")
        .stdout_has("renamed=3\n")
        .stdout_has("control=0\n");
    let got = received(&rx);
    assert!(
        got.iter().any(|s| s.contains("hello-from-control")),
        "{got:?}"
    );
    assert!(
        !got.iter()
            .any(|s| s.contains("by-path") || s.contains("renamed")),
        "dodging the shim must lose the grant: {got:?}"
    );
}

#[test]
fn a_call_overhead_is_small() {
    need_sandbox!();
    let b = Bk::new();
    // Not a benchmark (benches/broker.sh is): a sanity bound so a pathological slowdown is caught.
    let start = Instant::now();
    b.bash(
        &b.grant(""),
        &[],
        "for i in 1 2 3 4 5 6 7 8 9 10; do gcalcli agenda $i >/dev/null; done",
    )
    .expect_code(0);
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn a_rowed_commands_env_grant_follows_it_into_the_shell() {
    need_sandbox!();
    let b = Bk::new();
    // `env` has its own row that may see SECRET_*; the shell around it may not.
    let grant = format!(
        r#"[{{ commands = "*", paths = ["{w}"] }}, {{ commands = ["env"], env = ["SECRET_*"] }}]"#,
        w = b.work.display()
    );
    let r = b.bash_env(
        &grant,
        &[],
        r#"echo "shell sees ${SECRET_TOKEN:-nothing}"; sh -c 'env | grep ^SECRET_'"#,
        &[("SECRET_TOKEN", "hunter2")],
    );
    r.expect_code(0)
        .stdout_has("shell sees nothing\n")
        .stdout_has("SECRET_TOKEN=hunter2\n");
}
