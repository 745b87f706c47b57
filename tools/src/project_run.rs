//! `run_tests`, `run_build`, `run_lint`: run the project's own test, build or lint command.
//!
//! The tool finds the project's build system in the directory the call names (default: the working directory) —
//! Cargo, npm / pnpm / yarn / bun (by lockfile, with the script from `package.json`), Go, Python (pytest when it is
//! configured, else unittest; ruff or flake8 when configured), Make (a `test`/`build`/`lint` target) — and turns it
//! into one argv. That argv, in that directory, is what the kernel decides, exactly as for a `bash` call given
//! `command` and `args`: the tool's grant is a bash grant, `commands` must allow the program, and the command runs
//! confined under the row the kernel picked (or unconfined for the grant `"*"`), through the same process layer as
//! `bash`. Detection reads only the build files in that one directory, each checked against the kernel's authority
//! files first; a program that is not installed or a script the project does not define is an error naming it.
//! The result gives the exact command, the real exit status, and the output failure-first: the lines that look like
//! failures (from anywhere in the output), then its tail.

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use loom_broker::BashPlan;
use loom_kernel::{authority_denial, Access, Authority, CallFacts, Request};
use serde_json::{json, Value};

use super::confined::{run_confined, Captured, Confined, Keep};
use super::paths::program_on_path;
use super::read_call::int_field;
use super::{
    check_fields, resolve_path, str_field, PathMode, Prepared, SandboxEnv, Tool, ToolEnv,
    ToolOutput,
};
use loom_protocol::model::ToolSpec;
use loom_protocol::update::{Location, ToolKind};

/// The default time limit (10 minutes): test suites take longer than a shell command.
pub const RUN_DEFAULT_TIMEOUT_MS: usize = 600_000;
/// The longest a call may ask for (1 hour).
pub const RUN_MAX_TIMEOUT_MS: usize = 3_600_000;
/// How much of the output's end the result shows.
const TAIL_BYTES: usize = 24 * 1024;
/// How much of its start.
const HEAD_BYTES: usize = 2 * 1024;
/// The largest build file read for detection.
const MAX_BUILD_FILE_BYTES: u64 = 256 * 1024;

/// What the tool runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunKind {
    /// `run_tests`.
    Tests,
    /// `run_build`.
    Build,
    /// `run_lint`.
    Lint,
}

impl RunKind {
    /// The kind of built-in tool `underlying`.
    pub fn of(underlying: &str) -> Option<RunKind> {
        Some(match underlying {
            "run_tests" => RunKind::Tests,
            "run_build" => RunKind::Build,
            "run_lint" => RunKind::Lint,
            _ => return None,
        })
    }

    /// The built-in tool's name.
    pub fn builtin(self) -> &'static str {
        match self {
            RunKind::Tests => "run_tests",
            RunKind::Build => "run_build",
            RunKind::Lint => "run_lint",
        }
    }

    /// The `package.json` script and Makefile target it runs.
    fn script(self) -> &'static str {
        match self {
            RunKind::Tests => "test",
            RunKind::Build => "build",
            RunKind::Lint => "lint",
        }
    }
}

/// The build systems, in the order they are preferred when a directory has several.
const SYSTEMS: [&str; 5] = ["cargo", "node", "go", "python", "make"];

/// A detected command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Detected {
    /// The build system (one of [`SYSTEMS`]).
    pub system: &'static str,
    /// The argv.
    pub argv: Vec<String>,
}

/// Reads the small build files of one directory, each only if the kernel's authority check lets the tool read it.
pub(crate) struct BuildFiles<'a> {
    /// The directory (canonical).
    pub dir: &'a Path,
    /// The tool, for the authority check.
    pub tool: &'a str,
    /// The agent's authority files.
    pub authority: &'a Authority,
}

impl BuildFiles<'_> {
    fn allowed(&self, name: &str) -> bool {
        let request = Request::File {
            path: self.dir.join(name).display().to_string(),
            access: Access::Read,
        };
        authority_denial(self.tool, &request, self.authority).is_none()
    }

    /// True when `name` is a regular file there (never through a symlink).
    fn exists(&self, name: &str) -> bool {
        self.allowed(name)
            && std::fs::symlink_metadata(self.dir.join(name)).is_ok_and(|m| m.is_file())
    }

    /// Its text (at most 256 KiB), when it is a regular file there.
    fn read(&self, name: &str) -> Option<String> {
        if !self.exists(name) {
            return None;
        }
        // never through a symlink swapped in since, never blocking on a FIFO
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(self.dir.join(name))
            .ok()?;
        if !f.metadata().is_ok_and(|m| m.is_file()) {
            return None;
        }
        let mut text = String::new();
        f.take(MAX_BUILD_FILE_BYTES)
            .read_to_string(&mut text)
            .ok()?;
        Some(text)
    }
}

/// The project's command for `kind` in `files.dir`: of build system `system` when given, else of the first one found
/// in [`SYSTEMS`] order that defines one. `filter` narrows the tests run (a test name or pattern).
pub(crate) fn detect(
    kind: RunKind,
    files: &BuildFiles<'_>,
    system: Option<&str>,
    filter: Option<&str>,
) -> Result<Detected, String> {
    if let Some(s) = system {
        if !SYSTEMS.contains(&s) {
            return Err(format!("system must be one of {}", SYSTEMS.join(", ")));
        }
    }
    let mut why_not: Vec<String> = Vec::new();
    for s in SYSTEMS {
        if system.is_some_and(|want| want != s) {
            continue;
        }
        match detect_one(s, kind, files, filter) {
            Some(Ok(argv)) => return Ok(Detected { system: s, argv }),
            Some(Err(why)) => why_not.push(why),
            None => {}
        }
    }
    if !why_not.is_empty() {
        return Err(why_not.join("; "));
    }
    Err(match system {
        Some(s) => format!("{} has no {s} project", files.dir.display()),
        None => format!(
            "no build system found in {} (looked for Cargo.toml, package.json, go.mod, pyproject.toml, setup.py, \
             setup.cfg, requirements.txt, Makefile); pass `path` to the project's directory",
            files.dir.display()
        ),
    })
}

/// `None`: not this system's project; `Some(Err)`: its project, but it defines no such command.
fn detect_one(
    system: &str,
    kind: RunKind,
    files: &BuildFiles<'_>,
    filter: Option<&str>,
) -> Option<Result<Vec<String>, String>> {
    let argv = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    Some(match system {
        "cargo" => {
            files.read("Cargo.toml")?;
            let mut v = match kind {
                RunKind::Tests => argv(&["cargo", "test", "--color", "never"]),
                RunKind::Build => argv(&["cargo", "build", "--color", "never"]),
                RunKind::Lint => argv(&["cargo", "clippy", "--color", "never", "--all-targets"]),
            };
            if let (RunKind::Tests, Some(f)) = (kind, filter) {
                v.push(f.to_string());
            }
            Ok(v)
        }
        "node" => {
            let text = files.read("package.json")?;
            let manager = if files.exists("pnpm-lock.yaml") {
                "pnpm"
            } else if files.exists("yarn.lock") {
                "yarn"
            } else if files.exists("bun.lockb") || files.exists("bun.lock") {
                "bun"
            } else {
                "npm"
            };
            let parsed: Value = match serde_json::from_str(&text) {
                Ok(v) => v,
                Err(e) => return Some(Err(format!("package.json is not valid JSON: {e}"))),
            };
            let scripts: Vec<String> = parsed
                .get("scripts")
                .and_then(Value::as_object)
                .map(|s| s.keys().cloned().collect())
                .unwrap_or_default();
            let script = kind.script();
            if !scripts.iter().any(|s| s == script) {
                return Some(Err(format!(
                    "package.json defines no \"{script}\" script (scripts: {}); add one, or run the command through bash",
                    if scripts.is_empty() { "none".to_string() } else { scripts.join(", ") }
                )));
            }
            let mut v = argv(&[manager, "run", script]);
            if let (RunKind::Tests, Some(f)) = (kind, filter) {
                v.extend(["--".to_string(), f.to_string()]);
            }
            Ok(v)
        }
        "go" => {
            files.read("go.mod")?;
            let mut v = match kind {
                RunKind::Tests => argv(&["go", "test", "./..."]),
                RunKind::Build => argv(&["go", "build", "./..."]),
                RunKind::Lint => argv(&["go", "vet", "./..."]),
            };
            if let (RunKind::Tests, Some(f)) = (kind, filter) {
                v.extend(["-run".to_string(), f.to_string()]);
            }
            Ok(v)
        }
        "python" => {
            let markers = [
                "pyproject.toml",
                "setup.py",
                "setup.cfg",
                "requirements.txt",
            ];
            if !markers.iter().any(|m| files.exists(m)) {
                return None;
            }
            let pyproject = files.read("pyproject.toml").unwrap_or_default();
            let setup_cfg = files.read("setup.cfg").unwrap_or_default();
            match kind {
                RunKind::Tests => {
                    let pytest = files.exists("pytest.ini")
                        || files.exists("conftest.py")
                        || pyproject.contains("[tool.pytest")
                        || setup_cfg.contains("[tool:pytest]")
                        || files
                            .read("tox.ini")
                            .is_some_and(|t| t.contains("[pytest]"));
                    let mut v = if pytest {
                        argv(&["python3", "-m", "pytest", "-q", "--color=no"])
                    } else {
                        argv(&["python3", "-m", "unittest"])
                    };
                    if let Some(f) = filter {
                        if pytest {
                            v.extend(["-k".to_string(), f.to_string()]);
                        } else {
                            v.push(f.to_string());
                        }
                    }
                    Ok(v)
                }
                RunKind::Build => {
                    if pyproject.contains("[build-system]") {
                        Ok(argv(&["python3", "-m", "build"]))
                    } else {
                        Err("the Python project declares no [build-system] in pyproject.toml, so there is nothing to \
                             build"
                            .to_string())
                    }
                }
                RunKind::Lint => {
                    if files.exists("ruff.toml")
                        || files.exists(".ruff.toml")
                        || pyproject.contains("[tool.ruff")
                    {
                        Ok(argv(&["ruff", "check", "."]))
                    } else if files.exists(".flake8") || setup_cfg.contains("[flake8]") {
                        Ok(argv(&["flake8"]))
                    } else {
                        Err("the Python project configures no linter (looked for ruff in ruff.toml, .ruff.toml or \
                             [tool.ruff], and flake8 in .flake8 or [flake8])"
                            .to_string())
                    }
                }
            }
        }
        "make" => {
            let text = ["GNUmakefile", "makefile", "Makefile"]
                .iter()
                .find_map(|m| files.read(m))?;
            let target = kind.script();
            let defined = text.lines().any(|l| {
                l.split_once(':').is_some_and(|(names, rest)| {
                    !rest.starts_with('=') && names.split_whitespace().any(|n| n == target)
                })
            });
            if defined {
                Ok(argv(&["make", target]))
            } else {
                Err(format!("the Makefile defines no `{target}` target"))
            }
        }
        _ => return None,
    })
}

/// Whether a line of output looks like a failure (what the summary puts first).
fn is_failure_line(line: &str) -> bool {
    const MARKS: [&str; 14] = [
        "FAIL",
        "failed",
        "Failed",
        "panicked",
        "error",
        "Error",
        "ERROR",
        "Traceback",
        "not ok ",
        "assert",
        "Assert",
        "✗",
        "✕",
        "×",
    ];
    let t = line.trim_start();
    (MARKS.iter().any(|m| line.contains(m)) || t.starts_with("E ") || t.starts_with("--- FAIL"))
        && !line.contains(" 0 failed")
        && !line.contains("0 errors")
}

/// A project command tool.
#[derive(Debug)]
pub struct ProjectRunTool {
    env: ToolEnv,
    sandbox: SandboxEnv,
    kind: RunKind,
}

impl ProjectRunTool {
    /// The tool for `kind` in `env`.
    pub fn new(kind: RunKind, env: ToolEnv, sandbox: SandboxEnv) -> ProjectRunTool {
        ProjectRunTool { env, sandbox, kind }
    }
}

impl Tool for ProjectRunTool {
    fn name(&self) -> &str {
        &self.env.instance
    }

    fn builtin(&self) -> Option<&'static str> {
        Some(self.kind.builtin())
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Execute
    }

    fn spec(&self) -> ToolSpec {
        let what = match self.kind {
            RunKind::Tests => "Run the project's tests",
            RunKind::Build => "Build the project",
            RunKind::Lint => "Run the project's linter",
        };
        let mut props = json!({
            "path": { "type": "string", "description": "The project's directory (default: the working directory)." },
            "system": { "type": "string", "enum": SYSTEMS, "description": "The build system to use when the directory has several (default: the first found, in this order)." },
            "timeout_ms": { "type": "integer", "minimum": 1, "maximum": RUN_MAX_TIMEOUT_MS, "description": "Default 600000 (10 minutes)." },
        });
        if self.kind == RunKind::Tests {
            props["filter"] = json!({ "type": "string", "description": "Only tests matching this name or pattern (cargo test FILTER, go test -run, pytest -k, a unittest name, or passed to the npm script)." });
        }
        ToolSpec {
            name: self.env.instance.clone(),
            description: format!(
                "{what}: detects Cargo, npm/pnpm/yarn/bun (package.json scripts), Go, Python (pytest or unittest; ruff \
                 or flake8) or Make in `path`, runs its command sandboxed like bash, and returns the exact command, \
                 the exit status and the output with failures first. The program must be allowed by this tool's \
                 grant ({}).",
                self.env.grant
            ),
            input_schema: json!({ "type": "object", "properties": props }),
        }
    }

    fn prepare(&self, input: &Value) -> Result<Prepared, String> {
        let name = self.env.instance.clone();
        let fields: &[&str] = match self.kind {
            RunKind::Tests => &["path", "system", "filter", "timeout_ms"],
            _ => &["path", "system", "timeout_ms"],
        };
        check_fields(input, &name, fields)?;
        let opt = |key: &str| -> Result<Option<&str>, String> {
            match input.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(_) => Ok(Some(str_field(input, &name, key)?)),
            }
        };
        let dir = match opt("path")? {
            None => self.env.cwd.clone(),
            Some(p) => resolve_path(&self.env.cwd, p, PathMode::Existing)
                .map_err(|e| format!("{name}: path {e}"))?,
        };
        // the build files are read only where a command of this grant could run: elsewhere nothing is read, so no
        // error names what a project outside the grant holds
        if !loom_kernel::command_dir_fits(
            &self.env.ctx,
            &self.env.grant,
            &dir.display().to_string(),
        ) {
            return Err(format!(
                "{name}: {} is outside this tool's grant (no row's paths or read_paths hold it); run it in a \
                 directory the grant covers ({})",
                dir.display(),
                self.env.grant
            ));
        }
        if !dir.is_dir() {
            return Err(format!("{name}: {} is not a directory", dir.display()));
        }
        let filter = opt("filter")?;
        if filter.is_some_and(|f| f.is_empty() || f.starts_with('-')) {
            return Err(format!(
                "{name}: filter must be a test name or pattern, not empty and not an option"
            ));
        }
        let timeout_ms = int_field(
            input,
            &name,
            "timeout_ms",
            RUN_DEFAULT_TIMEOUT_MS,
            (1, RUN_MAX_TIMEOUT_MS),
        )?;
        let files = BuildFiles {
            dir: &dir,
            tool: &name,
            authority: &self.env.authority,
        };
        let detected = detect(self.kind, &files, opt("system")?, filter)
            .map_err(|e| format!("{name}: {e}"))?;
        let program = detected.argv.first().cloned().unwrap_or_default();
        if program_on_path(&program).is_none() {
            return Err(format!(
                "{name}: {program} is not installed (no `{program}` on PATH), so the {} project's command `{}` cannot run",
                detected.system,
                detected.argv.join(" ")
            ));
        }
        let cwd = dir.display().to_string();
        let line = detected.argv.join(" ");
        let (env, sandbox, kind) = (self.env.clone(), self.sandbox.clone(), self.kind);
        let argv = detected.argv.clone();
        Ok(Prepared {
            request: Request::BashArgv {
                argv: detected.argv.clone(),
                cwd: cwd.clone(),
            },
            more: Vec::new(),
            facts: CallFacts {
                tool: name.clone(),
                path: Some(cwd.clone()),
                command: Some(line.clone()),
                argv: Some(detected.argv),
                ..CallFacts::default()
            },
            locations: vec![Location { path: cwd }],
            run: Box::new(move |auth, ctx| {
                Box::pin(async move {
                    let given: Vec<OsString> = argv.iter().map(OsString::from).collect();
                    let plan = match BashPlan::from_authorization(
                        &env.instance,
                        auth,
                        &env.grant,
                        given,
                    ) {
                        Ok(p) => p,
                        Err(e) => return ToolOutput::error(e.to_string()),
                    };
                    let timeout = Duration::from_millis(timeout_ms as u64);
                    let started = Instant::now();
                    let got = run_confined(
                        plan,
                        Confined {
                            env: &env,
                            sandbox: &sandbox,
                            cwd: &dir,
                            timeout,
                            keep: Keep {
                                head: HEAD_BYTES,
                                tail: TAIL_BYTES,
                                hits: Some(is_failure_line),
                            },
                            combined: true,
                            fills: None,
                        },
                        &ctx.cancel,
                    )
                    .await;
                    match got {
                        Ok(got) => {
                            got.noted(report(kind, &line, &dir, &got, started.elapsed(), timeout))
                        }
                        Err(e) => ToolOutput::error(format!(
                            "{}: `{line}` did not run: {e}",
                            kind.builtin()
                        )),
                    }
                })
            }),
        })
    }
}

/// The result: the command, how it ended, then (on failure) the failure lines, then the output's head and tail.
fn report(
    kind: RunKind,
    line: &str,
    dir: &Path,
    got: &Captured,
    took: Duration,
    timeout: Duration,
) -> ToolOutput {
    let out = &got.stdout;
    let status = if got.cancelled {
        "cancelled".to_string()
    } else if got.timed_out {
        format!(
            "timed out after {} s; the process tree was killed",
            timeout.as_secs()
        )
    } else if got.code == 0 {
        "passed (exit 0)".to_string()
    } else {
        format!("FAILED (exit {})", got.code)
    };
    let mut text = format!(
        "$ {line}    (in {})\n{status} after {:.1} s\n",
        dir.display(),
        took.as_secs_f64()
    );
    let failed = got.code != 0 || got.timed_out;
    if failed && !out.hits.is_empty() {
        text.push_str(&format!(
            "\n--- lines that look like failures ({}) ---\n",
            out.hits.len()
        ));
        for h in &out.hits {
            text.push_str(h);
            text.push('\n');
        }
    }
    let shown = out.bytes.len() + out.tail.len();
    if out.total == 0 {
        text.push_str("\n(no output)\n");
    } else if (shown as u64) >= out.total {
        text.push_str("\n--- output ---\n");
        text.push_str(&String::from_utf8_lossy(&out.bytes));
        text.push_str(&String::from_utf8_lossy(&out.tail));
    } else {
        text.push_str(&format!(
            "\n--- output: the first {} and the last {} of {} bytes ---\n",
            out.bytes.len(),
            out.tail.len(),
            out.total
        ));
        text.push_str(&String::from_utf8_lossy(&out.bytes));
        text.push_str("\n[…]\n");
        text.push_str(&String::from_utf8_lossy(&out.tail));
    }
    let raw = json!({
        "command": line,
        "cwd": dir.display().to_string(),
        "exitCode": got.code,
        "timedOut": got.timed_out,
        "durationMs": u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
        "totalBytes": out.total,
        "tool": kind.builtin(),
    });
    if got.cancelled {
        let mut o = ToolOutput::interrupted(&text);
        o.raw_output = Some(raw);
        return o;
    }
    ToolOutput {
        text,
        is_error: failed,
        raw_output: Some(raw),
        ..ToolOutput::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detect_in(
        files: &[(&str, &str)],
        kind: RunKind,
        filter: Option<&str>,
    ) -> Result<Detected, String> {
        let d = tempfile::tempdir().unwrap();
        for (n, t) in files {
            std::fs::write(d.path().join(n), t).unwrap();
        }
        let authority = Authority::default();
        let b = BuildFiles {
            dir: d.path(),
            tool: "run_tests",
            authority: &authority,
        };
        detect(kind, &b, None, filter)
    }

    #[track_caller]
    fn argv(files: &[(&str, &str)], kind: RunKind, filter: Option<&str>) -> String {
        detect_in(files, kind, filter).unwrap().argv.join(" ")
    }

    #[test]
    fn each_build_system_gives_its_command() {
        let cargo = [("Cargo.toml", "[package]\nname = \"x\"\n")];
        assert_eq!(
            argv(&cargo, RunKind::Tests, Some("parse")),
            "cargo test --color never parse"
        );
        assert_eq!(
            argv(&cargo, RunKind::Lint, None),
            "cargo clippy --color never --all-targets"
        );
        let npm = [(
            "package.json",
            r#"{"scripts": {"test": "node t.js", "build": "tsc"}}"#,
        )];
        assert_eq!(argv(&npm, RunKind::Tests, None), "npm run test");
        assert_eq!(argv(&npm, RunKind::Tests, Some("x")), "npm run test -- x");
        let pnpm = [
            ("package.json", r#"{"scripts": {"build": "tsc"}}"#),
            ("pnpm-lock.yaml", ""),
        ];
        assert_eq!(argv(&pnpm, RunKind::Build, None), "pnpm run build");
        let e = detect_in(&pnpm, RunKind::Lint, None).unwrap_err();
        assert_eq!(e, "package.json defines no \"lint\" script (scripts: build); add one, or run the command through bash");
        assert_eq!(
            argv(&[("go.mod", "module m\n")], RunKind::Tests, Some("TestX")),
            "go test ./... -run TestX"
        );
        let py = [("pyproject.toml", "[tool.pytest.ini_options]\n")];
        assert_eq!(
            argv(&py, RunKind::Tests, Some("slow")),
            "python3 -m pytest -q --color=no -k slow"
        );
        assert_eq!(
            argv(&[("requirements.txt", "")], RunKind::Tests, None),
            "python3 -m unittest"
        );
        assert!(detect_in(&[("requirements.txt", "")], RunKind::Lint, None)
            .unwrap_err()
            .contains("configures no linter"));
        let make = [("Makefile", "VAR := 1\nbuild test: deps\n\tcc x.c\n")];
        assert_eq!(argv(&make, RunKind::Tests, None), "make test");
        assert_eq!(
            detect_in(&make, RunKind::Lint, None).unwrap_err(),
            "the Makefile defines no `lint` target"
        );
        // the first system that defines the command wins; one that does not is skipped
        let both = [
            ("package.json", r#"{"scripts": {}}"#),
            ("Makefile", "lint:\n\ttrue\n"),
        ];
        assert_eq!(argv(&both, RunKind::Lint, None), "make lint");
        assert!(detect_in(&[], RunKind::Tests, None)
            .unwrap_err()
            .starts_with("no build system found"));
    }

    #[test]
    fn failure_lines_are_picked_and_summaries_of_success_are_not() {
        for l in [
            "test parse ... FAILED",
            "thread 'x' panicked at src/a.rs:3:5",
            "E   AssertionError: 1 != 2",
            "not ok 1 - adds",
            "--- FAIL: TestX (0.00s)",
            "error[E0308]: mismatched types",
        ] {
            assert!(is_failure_line(l), "{l}");
        }
        for l in [
            "test result: ok. 3 passed; 0 failed",
            "running 3 tests",
            "ok 1 - adds",
        ] {
            assert!(!is_failure_line(l), "{l}");
        }
    }
}
