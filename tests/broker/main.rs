#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The command broker through the real `loom sandbox run`: a capability set with a general row and a `gcalcli`
//! row runs `bash -c …` under the general row, and every `gcalcli` reached from inside it — plainly, in a pipeline,
//! from a nested shell or a Python one-liner — runs under its own row via the broker. Fidelity tests check that
//! the call behaves as if it ran in place; abuse tests check each refusal or confinement AND a working control.
//! Tests print the reason and return when the host has no sandbox backend.

mod abuse;
mod allowlist;
mod fidelity;
mod lifecycle;

use std::io::Read;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

use loom_tests::{loom_bin, Run, Scratch};

/// The fake `gcalcli`, installed on the host PATH that loom runs with (never visible to the general row's shell).
/// Its first argument picks a behaviour.
const FAKE_GCALCLI: &str = r#"#!/bin/bash
case "$1" in
  agenda) echo "gcalcli argv: $*" ;;
  pwd) pwd ;;
  env) env | sort ;;
  cat) exec cat ;;
  big) head -c "$2" /dev/zero | tr '\0' x ;;
  exit) echo "exiting $2" >&2; exit "$2" ;;
  kill) kill -"$2" $$ ;;
  sleep) sleep "$2"; echo slept ;;
  net)
    if exec 3<>"/dev/tcp/127.0.0.1/$2"; then echo "hello-from-${3:-gcalcli}" >&3; exec 3>&-; echo net-ok; else echo net-failed; exit 3; fi ;;
  write)
    if echo brokered > "$2"; then echo write-ok; else echo write-failed; exit 4; fi ;;
  *) echo "gcalcli: unknown $1" >&2; exit 2 ;;
esac
"#;

/// A scratch layout: `work/` (the general row's project), `gcal/` (the gcalcli row's own directory), `hostbin/`
/// (the host PATH directory holding the real `gcalcli`).
pub struct Bk {
    /// The scratch directory.
    pub scratch: Scratch,
    /// The general row's writable root and the shell's cwd.
    pub work: PathBuf,
    /// The gcalcli row's writable root.
    pub gcal: PathBuf,
    /// Where the real gcalcli lives.
    pub hostbin: PathBuf,
}

impl Default for Bk {
    fn default() -> Self {
        Self::new()
    }
}

impl Bk {
    /// A fresh layout.
    pub fn new() -> Bk {
        let scratch = Scratch::new();
        let root = std::fs::canonicalize(scratch.path()).unwrap();
        let work = root.join("work");
        let gcal = root.join("gcal");
        let hostbin = root.join("hostbin");
        for d in [&work, &gcal, &hostbin] {
            std::fs::create_dir_all(d).unwrap();
        }
        install(&hostbin.join("gcalcli"), FAKE_GCALCLI);
        Bk {
            scratch,
            work,
            gcal,
            hostbin,
        }
    }

    /// The usual capability set: a network-less shell over `work/`, and gcalcli with the network over `gcal/`
    /// (plus `extra` kinds on the gcalcli row).
    pub fn grant(&self, extra: &str) -> String {
        format!(
            r#"[{{ commands = "*", paths = ["{}"] }}, {{ commands = ["gcalcli"], network = "*", paths = ["{}"]{extra} }}]"#,
            self.work.display(),
            self.gcal.display()
        )
    }

    /// The host PATH loom runs with.
    pub fn host_path(&self) -> String {
        format!("{}:/usr/bin:/bin", self.hostbin.display())
    }

    /// Runs `bash -c script` under `grant` through `loom sandbox run`, with `flags` before `--`.
    pub fn bash(&self, grant: &str, flags: &[&str], script: &str) -> Run {
        self.bash_env(grant, flags, script, &[])
    }

    /// Like [`Bk::bash`], with extra variables in loom's own (host) environment.
    pub fn bash_env(&self, grant: &str, flags: &[&str], script: &str, env: &[(&str, &str)]) -> Run {
        let work = self.work.display().to_string();
        let mut args = vec![
            "sandbox",
            "run",
            "--grant",
            grant,
            "--cwd",
            &work,
            "--timeout-ms",
            "60000",
        ];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["--", "bash", "-c", script]);
        let path = self.host_path();
        let mut vars = vec![("PATH", path.as_str())];
        vars.extend_from_slice(env);
        self.scratch.loom_env(&args, &vars)
    }
}

/// Writes an executable file.
pub fn install(path: &std::path::Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Is the sandbox usable here at all? Prints the reason when not.
pub fn sandbox_available() -> bool {
    let out = Command::new(loom_bin()).arg("doctor").output().unwrap();
    if out.status.success() {
        return true;
    }
    eprintln!(
        "SKIPPED: no sandbox backend on this host:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    false
}

/// Skips (returns from) the test when the host has no sandbox.
#[macro_export]
macro_rules! need_sandbox {
    () => {
        if !$crate::sandbox_available() {
            return;
        }
    };
}

/// A TCP listener on host loopback that reports what each client sends (collects for `wait`).
pub fn tcp_listener() -> (u16, mpsc::Receiver<String>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for mut c in l.incoming().flatten() {
            let mut buf = String::new();
            let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
            let _ = c.read_to_string(&mut buf);
            if tx.send(buf).is_err() {
                return;
            }
        }
    });
    (port, rx)
}

/// Everything a listener received within a short grace period.
pub fn received(rx: &mpsc::Receiver<String>) -> Vec<String> {
    let mut out = Vec::new();
    while let Ok(s) = rx.recv_timeout(Duration::from_millis(300)) {
        out.push(s);
    }
    out
}
