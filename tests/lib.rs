//! Shared helpers for loom's cross-crate test suites: a harness that runs the real `loom` binary in a scratch
//! directory and prints the command, cwd, stdout and stderr when an expectation fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// Path of the `loom` binary built by this workspace. The first call in a test process runs `cargo build` for it
/// (a no-op when it is fresh), so running one test package alone never tests a stale binary. (Run alone, the first
/// call builds the whole workspace's test targets once.)
pub fn loom_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let exe = std::env::current_exe()
            .unwrap_or_else(|e| panic!("invariant failed: no current exe: {e}"));
        // target/<profile>/deps/<test-binary>
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let target_dir = profile_dir
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        // `--workspace --all-targets` resolves features exactly as `cargo test --workspace` (the README's test
        // command) does, so in that run it reuses every unit already built, adding only the binaries and the bench
        // targets. Building only the three binaries would resolve features differently (dev-dependencies left out)
        // and rebuild, among others, llama.cpp from source a second time. The binaries: `loom` (loom-cli),
        // `loom-shim` (the command broker installs it from next to `loom`) and `loom-sandbox-exec` (the sandbox's
        // inner stage, also looked up next to `loom`), and `loom-engine` (the local model engine process, also looked up
        // next to `loom`).
        let status = Command::new(env!("CARGO"))
            .args([
                "build",
                "-q",
                "--workspace",
                "--all-targets",
                "--target-dir",
            ])
            .arg(&target_dir)
            .current_dir(workspace_root())
            .status()
            .unwrap_or_else(|e| panic!("invariant failed: cannot run cargo: {e}"));
        assert!(status.success(), "building the loom binary failed");
        profile_dir.join("loom")
    })
    .clone()
}

/// The workspace root (where `examples/` lives).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// A scratch directory plus a way to run `loom` inside it.
pub struct Scratch {
    /// The temporary directory (removed on drop).
    pub dir: tempfile::TempDir,
}

impl Default for Scratch {
    fn default() -> Self {
        Self::new()
    }
}

impl Scratch {
    /// A fresh scratch directory.
    pub fn new() -> Scratch {
        Scratch {
            dir: tempfile::tempdir().unwrap_or_else(|e| panic!("invariant failed: tempdir: {e}")),
        }
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `text` to `name` inside the scratch directory (creating parents) and returns its path.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)
                .unwrap_or_else(|e| panic!("invariant failed: mkdir: {e}"));
        }
        std::fs::write(&p, text)
            .unwrap_or_else(|e| panic!("invariant failed: write {}: {e}", p.display()));
        p
    }

    /// Runs `loom args...` with the scratch directory as cwd and a clean, explicit environment.
    pub fn loom(&self, args: &[&str]) -> Run {
        self.loom_env(args, &[])
    }

    /// Like [`Scratch::loom`], with extra environment variables.
    pub fn loom_env(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        self.loom_in(self.path(), args, env)
    }

    /// Like [`Scratch::loom_env`], run from `cwd` (a directory below the scratch one, usually).
    pub fn loom_in(&self, cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut cmd = Command::new(loom_bin());
        cmd.args(args).current_dir(cwd).env_clear();
        for key in ["PATH", "HOME", "TMPDIR"] {
            if let Ok(v) = std::env::var(key) {
                cmd.env(key, v);
            }
        }
        cmd.env("LOOM_DATA_HOME", self.path().join(".loom-data"))
            .env("NO_COLOR", "1");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let output = cmd
            .output()
            .unwrap_or_else(|e| panic!("invariant failed: cannot run loom: {e}"));
        Run {
            args: args.iter().map(|s| s.to_string()).collect(),
            cwd: cwd.to_path_buf(),
            output,
        }
    }
}

/// The result of one `loom` invocation.
pub struct Run {
    /// Arguments passed.
    pub args: Vec<String>,
    /// Working directory.
    pub cwd: PathBuf,
    /// What the process produced.
    pub output: Output,
}

impl Run {
    /// Standard output as text.
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }

    /// Standard error as text.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    /// The exit code (-1 for a signal death).
    pub fn code(&self) -> i32 {
        self.output.status.code().unwrap_or(-1)
    }

    fn describe(&self) -> String {
        format!(
            "command: loom {}\ncwd: {}\nexit: {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.args.join(" "),
            self.cwd.display(),
            self.code(),
            self.stdout(),
            self.stderr()
        )
    }

    /// Asserts the exit code, printing everything on failure.
    #[track_caller]
    pub fn expect_code(&self, code: i32) -> &Run {
        assert_eq!(
            self.code(),
            code,
            "unexpected exit code\n{}",
            self.describe()
        );
        self
    }

    /// Asserts stdout contains `needle`.
    #[track_caller]
    pub fn stdout_has(&self, needle: &str) -> &Run {
        assert!(
            self.stdout().contains(needle),
            "stdout lacks {needle:?}\n{}",
            self.describe()
        );
        self
    }

    /// Asserts stderr contains `needle`.
    #[track_caller]
    pub fn stderr_has(&self, needle: &str) -> &Run {
        assert!(
            self.stderr().contains(needle),
            "stderr lacks {needle:?}\n{}",
            self.describe()
        );
        self
    }

    /// Asserts stdout does not contain `needle`.
    #[track_caller]
    pub fn stdout_lacks(&self, needle: &str) -> &Run {
        assert!(
            !self.stdout().contains(needle),
            "stdout unexpectedly has {needle:?}\n{}",
            self.describe()
        );
        self
    }

    /// Asserts stderr does not contain `needle`.
    #[track_caller]
    pub fn stderr_lacks(&self, needle: &str) -> &Run {
        assert!(
            !self.stderr().contains(needle),
            "stderr unexpectedly has {needle:?}\n{}",
            self.describe()
        );
        self
    }
}

#[path = "skills_fixture.rs"]
pub mod skills_fixture;
