#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Adversarial suite for the sandbox: every attempt runs inside the real `loom sandbox run` (the production spawn
//! path) and must be BLOCKED, and each test also runs a matching allowed control so that no test passes vacuously.
//! Tests that need a facility the host lacks print the reason and return.

mod attacks;
mod cli;
mod containers;
mod hardening;
mod limits;
mod net;
mod procs;
mod tier_b;
mod tiers;
mod unprivileged;

use std::path::{Path, PathBuf};
use std::process::Command;

use loom_tests::{loom_bin, Run, Scratch};

/// The `loom` binary under test: `$LOOM_BIN` when set (the unprivileged re-run, which cannot run cargo), else the
/// workspace build.
pub fn loom() -> PathBuf {
    std::env::var_os("LOOM_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(loom_bin)
}

/// The Python prelude every attempt script starts with: `attempt(name, fn)` prints `name: ALLOWED` or
/// `name: BLOCKED <errno name>`.
pub const PRELUDE: &str = r#"
import os, sys, socket, errno, ctypes, time
libc = ctypes.CDLL(None, use_errno=True)
def attempt(name, fn):
    try:
        r = fn()
        if r is not None and r is not True and isinstance(r, int) and r < 0:
            e = ctypes.get_errno()
            print(f"{name}: BLOCKED {errno.errorcode.get(e, e)}", flush=True)
        else:
            print(f"{name}: ALLOWED", flush=True)
    except OSError as e:
        print(f"{name}: BLOCKED {errno.errorcode.get(e.errno, e.errno)}", flush=True)
def write(path, text="pwned", mode="w"):
    with open(path, mode) as f:
        f.write(text)
"#;

/// A scratch layout: `work/` (the project, granted writable), `outside/` (granted read-only in most tests, or not
/// at all), and `home/` (the fake HOME, with `.ssh/id_rsa`).
pub struct Sbx {
    /// The scratch directory.
    pub scratch: Scratch,
    /// The project directory.
    pub work: PathBuf,
    /// A directory outside the writable roots.
    pub outside: PathBuf,
    /// The fake home directory.
    pub home: PathBuf,
}

/// Is tier A (the suite's subject) usable here? Prints the reason when not. Checked once per test process.
pub fn sandbox_available() -> bool {
    static TIER: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let tier = TIER.get_or_init(|| {
        let out = Command::new(loom())
            .args(["doctor", "--json"])
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        v["tier"].as_str().map(str::to_string)
    });
    match tier.as_deref() {
        Some("A") => true,
        Some(other) => {
            eprintln!("SKIPPED: this suite exercises tier A, and this host only offers tier {other} (see `loom doctor`)");
            false
        }
        None => {
            eprintln!("SKIPPED: no sandbox backend on this host (see `loom doctor`)");
            false
        }
    }
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

impl Sbx {
    /// A fresh layout.
    pub fn new() -> Sbx {
        let scratch = Scratch::new();
        let root = std::fs::canonicalize(scratch.path()).unwrap();
        let work = root.join("work");
        let outside = root.join("outside");
        let home = root.join("home");
        for d in [&work, &outside, &home.join(".ssh")] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(outside.join("victim.txt"), "original").unwrap();
        std::fs::write(home.join(".ssh/id_rsa"), "PRIVATE KEY").unwrap();
        std::fs::write(work.join("notes.txt"), "hello").unwrap();
        Sbx {
            scratch,
            work,
            outside,
            home,
        }
    }

    /// A writable project with read-only access to `outside/`.
    pub fn grant(&self) -> String {
        format!(
            r#"{{ commands = "*", paths = ["{}"], read_paths = ["{}"] }}"#,
            self.work.display(),
            self.outside.display()
        )
    }

    /// Runs `loom sandbox run --grant G --cwd work [extra] -- argv...` with HOME set to the fake home, a secret in
    /// loom's own environment, and a PATH that does not depend on the test runner's home.
    pub fn run(&self, grant: &str, extra: &[&str], argv: &[&str]) -> Run {
        let work = self.work.to_str().unwrap().to_string();
        let mut args: Vec<&str> = vec!["sandbox", "run", "--grant", grant, "--cwd", &work];
        args.extend_from_slice(extra);
        args.push("--");
        args.extend_from_slice(argv);
        self.loom_env(
            &args,
            &[
                ("HOME", self.home.to_str().unwrap()),
                ("PATH", "/usr/local/bin:/usr/bin:/bin"),
                ("SECRET_TOKEN", "hunter2-secret"),
            ],
        )
    }

    /// Runs `loom args...` in the scratch directory with a clean environment plus `env`.
    pub fn loom(&self, args: &[&str]) -> Run {
        self.loom_env(args, &[])
    }

    fn loom_env(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut cmd = Command::new(loom());
        cmd.args(args).current_dir(self.scratch.path()).env_clear();
        for key in ["PATH", "HOME", "TMPDIR"] {
            if let Some(v) = std::env::var_os(key) {
                cmd.env(key, v);
            }
        }
        cmd.env("LOOM_DATA_HOME", self.scratch.path().join(".loom-data"))
            .env("NO_COLOR", "1")
            .envs(env.iter().copied());
        Run {
            args: args.iter().map(|s| s.to_string()).collect(),
            cwd: self.scratch.path().to_path_buf(),
            output: cmd.output().unwrap(),
        }
    }

    /// Runs a Python script (after [`PRELUDE`]) in the sandbox.
    pub fn py(&self, grant: &str, extra: &[&str], code: &str) -> Run {
        let script = format!("{PRELUDE}\n{code}");
        self.run(grant, extra, &["python3", "-c", &script])
    }

    /// Reads a host file.
    pub fn host_read(&self, p: &Path) -> String {
        std::fs::read_to_string(p).unwrap_or_default()
    }
}

impl Default for Sbx {
    fn default() -> Self {
        Self::new()
    }
}

/// Asserts each `name: BLOCKED` and `name: ALLOWED` line.
#[track_caller]
pub fn verdicts(run: &Run, blocked: &[&str], allowed: &[&str]) {
    for b in blocked {
        run.stdout_has(&format!("{b}: BLOCKED"));
    }
    for a in allowed {
        run.stdout_has(&format!("{a}: ALLOWED"));
    }
}

/// True when the test runs as root.
/// Can `loom sandbox run --tier <tier>` run here? Prints the reason when not.
pub fn tier_available(s: &Sbx, tier: &str) -> bool {
    let r = s.run(&s.grant(), &["--tier", tier], &["true"]);
    if r.code() == 0 {
        return true;
    }
    eprintln!("SKIPPED: tier {tier} is not available here: {}", r.stderr());
    false
}

pub fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc_geteuid() == 0 }
}

extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}

/// Host processes whose command line contains `marker`.
pub fn host_procs_with(marker: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == std::process::id() {
            continue;
        }
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            if String::from_utf8_lossy(&cmd).contains(marker) {
                out.push(pid);
            }
        }
    }
    out
}

/// A unique marker for process names and socket names.
pub fn marker(tag: &str) -> String {
    use std::time::{SystemTime, UNIX_EPOCH};
    let n = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("loomtest-{tag}-{}-{n}", std::process::id())
}
