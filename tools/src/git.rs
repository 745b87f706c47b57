//! The git inspection tools: `git_status`, `git_diff`, `git_log`, `git_show`, `git_blame`, `git_branches`.
//!
//! Each call names a path (or the working directory); loom finds the repository it is in (the nearest directory
//! above it holding a `.git` directory — never through a symlink) and asks the kernel to let the tool read that
//! repository's top directory, so a grant that covers only part of a repository cannot read the rest through its
//! history. Once allowed, git runs in the OS sandbox under [`loom_kernel::git_inspection_row`] (read-only over the
//! repository, no network, no inherited environment), and a hostile repository's configuration is given nothing to
//! run: system and user configuration are not read, `core.fsmonitor`, hooks, the pager, external diff and text
//! conversion are switched off on the command line, every filter, diff and merge driver the repository's own
//! configuration defines is blanked (read first with `git config --list`, in the same sandbox, and passed back
//! verbatim through `GIT_CONFIG_KEY_n` — not `-c`, which git splits at the first `=` of a subsection like
//! `[filter "a=b"]`), a repository whose configuration includes other files is refused (an included file could
//! change between the listing and the command), submodules are not entered, and paths are passed literally
//! (`--literal-pathspecs`, after `--`). Arguments go to git as an argv — no shell ever sees them.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use loom_broker::BashPlan;
use loom_kernel::{git_inspection_row, Access, CallFacts, Request};
use serde_json::{json, Value};

use super::confined::{run_confined, Captured, Confined, Keep};
use super::paths::program_on_path;
use super::read_call::int_field;
use super::{
    bool_field, check_fields, resolve_path, str_field, PathMode, Prepared, SandboxEnv, Tool,
    ToolEnv, ToolOutput,
};
use loom_protocol::model::ToolSpec;
use loom_protocol::update::{Location, ToolKind};

/// The most bytes of git's output a call returns (the rest is counted and cut).
pub const GIT_OUTPUT_CAP: usize = 128 * 1024;
/// How long one git command may run.
pub const GIT_TIMEOUT: Duration = Duration::from_secs(60);
/// `git_log`'s default and largest `max_count`.
const LOG_DEFAULT: usize = 20;
const LOG_MAX: usize = 500;

/// Which git inspection a tool does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GitOp {
    /// `git_status`.
    Status,
    /// `git_diff`.
    Diff,
    /// `git_log`.
    Log,
    /// `git_show`.
    Show,
    /// `git_blame`.
    Blame,
    /// `git_branches`.
    Branches,
}

impl GitOp {
    /// The operation of built-in tool `underlying`.
    pub fn of(underlying: &str) -> Option<GitOp> {
        Some(match underlying {
            "git_status" => GitOp::Status,
            "git_diff" => GitOp::Diff,
            "git_log" => GitOp::Log,
            "git_show" => GitOp::Show,
            "git_blame" => GitOp::Blame,
            "git_branches" => GitOp::Branches,
            _ => return None,
        })
    }

    /// The built-in tool's name.
    pub fn builtin(self) -> &'static str {
        match self {
            GitOp::Status => "git_status",
            GitOp::Diff => "git_diff",
            GitOp::Log => "git_log",
            GitOp::Show => "git_show",
            GitOp::Blame => "git_blame",
            GitOp::Branches => "git_branches",
        }
    }

    fn fields(self) -> &'static [&'static str] {
        match self {
            GitOp::Status => &["path"],
            GitOp::Diff => &["path", "staged"],
            GitOp::Log => &["path", "max_count"],
            GitOp::Show => &["rev", "path"],
            GitOp::Blame => &["path"],
            GitOp::Branches => &["path"],
        }
    }

    fn about(self) -> &'static str {
        match self {
            GitOp::Status => "Show the working tree status (`git status --short --branch`) of the repository holding `path` (default: the working directory), limited to `path` when it is below the top.",
            GitOp::Diff => "Show unstaged changes (`git diff`), or staged ones with `staged: true`, limited to `path` when given.",
            GitOp::Log => "Show the commit history (one line per commit: hash, date, author, subject), newest first, of the repository or of `path`; `max_count` commits (default 20, at most 500).",
            GitOp::Show => "Show one revision (`rev`: a commit, tag, `HEAD~2`, or `REV:path` for a file's content at that revision) with its patch.",
            GitOp::Blame => "Show who last changed each line of the file `path` (`git blame`).",
            GitOp::Branches => "List the local and remote-tracking branches with their last commit, the current one marked `*`.",
        }
    }

    fn schema(self) -> Value {
        let path = json!({ "type": "string", "description": "A path inside the repository (default: the working directory)." });
        let (props, required) = match self {
            GitOp::Status | GitOp::Branches => (json!({ "path": path }), json!([])),
            GitOp::Diff => (
                json!({ "path": path, "staged": { "type": "boolean", "description": "Show the staged changes (index against HEAD). Default false." } }),
                json!([]),
            ),
            GitOp::Log => (
                json!({ "path": path, "max_count": { "type": "integer", "minimum": 1, "maximum": LOG_MAX } }),
                json!([]),
            ),
            GitOp::Show => (
                json!({ "rev": { "type": "string", "description": "The revision to show." }, "path": path }),
                json!(["rev"]),
            ),
            GitOp::Blame => (
                json!({ "path": { "type": "string", "description": "The file to blame." } }),
                json!(["path"]),
            ),
        };
        json!({ "type": "object", "properties": props, "required": required })
    }
}

/// A git inspection tool.
#[derive(Debug)]
pub struct GitTool {
    env: ToolEnv,
    sandbox: SandboxEnv,
    op: GitOp,
}

impl GitTool {
    /// The tool for `op` in `env`.
    pub fn new(op: GitOp, env: ToolEnv, sandbox: SandboxEnv) -> GitTool {
        GitTool { env, sandbox, op }
    }
}

/// The repository a path is in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    /// Its top directory (canonical).
    pub top: PathBuf,
    /// The path below the top, when the call named one below it (`None`: the whole repository).
    pub below: Option<PathBuf>,
}

/// Finds the repository holding `path` (canonical): the nearest directory at or above it with a `.git` directory.
/// A `.git` that is a file (a linked worktree or a submodule: its metadata lives elsewhere) or a symlink is refused.
pub fn find_repo(path: &Path) -> Result<Repo, String> {
    for top in path.ancestors() {
        let dot = top.join(".git");
        match std::fs::symlink_metadata(&dot) {
            Ok(m) if m.is_dir() => {
                let below = path
                    .strip_prefix(top)
                    .ok()
                    .filter(|r| !r.as_os_str().is_empty())
                    .map(Path::to_path_buf);
                return Ok(Repo {
                    top: top.to_path_buf(),
                    below,
                });
            }
            Ok(m) if m.file_type().is_symlink() => {
                return Err(format!(
                    "{} is a symlink; the git tools read a repository only through its own .git directory",
                    dot.display()
                ))
            }
            Ok(_) => {
                return Err(format!(
                    "{} is a file (a linked worktree or a submodule, whose metadata lives elsewhere); the git tools \
                     read repositories with their own .git directory only — run git through bash for this one",
                    dot.display()
                ))
            }
            Err(_) => {}
        }
    }
    Err(format!(
        "{} is not inside a git repository (no .git directory above it)",
        path.display()
    ))
}

/// The argv of the operation after `git` and the global options: what the call asked for, checked.
fn op_args(
    op: GitOp,
    input: &Value,
    tool: &str,
    below: Option<&Path>,
) -> Result<Vec<OsString>, String> {
    let mut a: Vec<OsString> = Vec::new();
    let push = |a: &mut Vec<OsString>, items: &[&str]| a.extend(items.iter().map(OsString::from));
    let mut pathspec = true;
    match op {
        GitOp::Status => push(
            &mut a,
            &[
                "status",
                "--short",
                "--branch",
                "--untracked-files=normal",
                "--ignore-submodules=all",
            ],
        ),
        GitOp::Diff => {
            push(
                &mut a,
                &[
                    "diff",
                    "--no-ext-diff",
                    "--no-textconv",
                    "--no-color",
                    "--ignore-submodules=all",
                    "--stat",
                    "--patch",
                ],
            );
            if bool_field(input, tool, "staged")? {
                push(&mut a, &["--cached"]);
            }
        }
        GitOp::Log => {
            let n = int_field(input, tool, "max_count", LOG_DEFAULT, (1, LOG_MAX))?;
            push(
                &mut a,
                &[
                    "log",
                    "--no-color",
                    "--no-show-signature",
                    "--no-ext-diff",
                    "--no-textconv",
                    "--date=short",
                    "--format=%h %ad %an: %s",
                ],
            );
            a.push(format!("--max-count={n}").into());
        }
        GitOp::Show => {
            let rev = str_field(input, tool, "rev")?;
            check_rev(rev, tool)?;
            push(
                &mut a,
                &[
                    "show",
                    "--no-color",
                    "--no-show-signature",
                    "--no-ext-diff",
                    "--no-textconv",
                    "--stat",
                    "--patch",
                    "--end-of-options",
                ],
            );
            a.push(rev.into());
            pathspec = false;
        }
        GitOp::Blame => {
            push(&mut a, &["blame", "--no-textconv", "--date=short"]);
            if below.is_none() {
                return Err(format!(
                    "{tool}: path must name a file inside the repository, not its top"
                ));
            }
        }
        GitOp::Branches => {
            push(
                &mut a,
                &["branch", "--all", "--verbose", "--no-color", "--no-abbrev"],
            );
            pathspec = false;
        }
    }
    if pathspec {
        if let Some(p) = below {
            a.push("--".into());
            a.push(p.as_os_str().to_os_string());
        }
    }
    Ok(a)
}

/// A revision is one word git reads as a revision, never an option.
fn check_rev(rev: &str, tool: &str) -> Result<(), String> {
    if rev.is_empty() || rev.len() > 256 {
        return Err(format!("{tool}: rev must be 1 to 256 characters"));
    }
    if rev.starts_with('-') {
        return Err(format!(
            "{tool}: rev {rev:?} starts with '-'; give a commit, tag or branch name"
        ));
    }
    if rev.chars().any(|c| c.is_control()) {
        return Err(format!("{tool}: rev holds a control character"));
    }
    Ok(())
}

/// The environment git runs with (`env -i` clears everything else): no system or user configuration, no prompt,
/// no pager, no optional locks, no lazy fetch.
const GIT_ENV: &[&str] = &[
    "GIT_CONFIG_NOSYSTEM=1",
    "GIT_CONFIG_GLOBAL=/dev/null",
    "HOME=/nonexistent",
    "LANG=C.UTF-8",
    "GIT_TERMINAL_PROMPT=0",
    "GIT_OPTIONAL_LOCKS=0",
    "GIT_PAGER=cat",
    "PAGER=cat",
    "GIT_NO_LAZY_FETCH=1",
    "GIT_NO_REPLACE_OBJECTS=1",
];

/// Configuration set on the command line for every call: it outranks the repository's own.
const GIT_SAFE_CONFIG: &[&str] = &[
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.pager=cat",
    "core.untrackedCache=false",
    "core.quotePath=false",
    "diff.external=",
    "log.showSignature=false",
    "color.ui=false",
    "submodule.recurse=false",
    "status.submoduleSummary=false",
    "diff.submodule=short",
    "gc.auto=0",
    "maintenance.auto=false",
];

/// Whether a configuration key names a program git may run for an inspection: a filter, diff or merge driver's
/// command (`filter.X.clean`, `filter.X.smudge`, `filter.X.process`, `diff.X.textconv`, `diff.X.command`,
/// `merge.X.driver`).
/// The key is taken as bytes: a subsection may hold any byte but newline and NUL, `=` and non-UTF-8 included.
fn runs_a_program(key: &[u8]) -> bool {
    let (Some(first), Some(last)) = (
        key.iter().position(|b| *b == b'.'),
        key.iter().rposition(|b| *b == b'.'),
    ) else {
        return false;
    };
    if first == last {
        return false;
    }
    let section = key[..first].to_ascii_lowercase();
    let var = key[last + 1..].to_ascii_lowercase();
    matches!(
        (section.as_slice(), var.as_slice()),
        (b"filter", b"clean" | b"smudge" | b"process")
            | (b"diff", b"textconv" | b"command")
            | (b"merge", b"driver")
    )
}

/// Whether a configuration key makes git read another file (`include.path`, `includeIf.<condition>.path`).
fn includes_a_file(key: &[u8]) -> bool {
    let lower = key.to_ascii_lowercase();
    lower.starts_with(b"include.") || lower.starts_with(b"includeif.")
}

/// The keys of `git config --list -z` output (entries `key\nvalue\0`, or `key\0` for a bare boolean), as bytes.
fn config_keys(listing: &[u8]) -> Vec<Vec<u8>> {
    listing
        .split(|b| *b == 0)
        .filter_map(|e| e.split(|b| *b == b'\n').next())
        .filter(|k| !k.is_empty())
        .map(<[u8]>::to_vec)
        .collect()
}

/// The entry every git call carries first through `GIT_CONFIG_KEY_0`, with a value new for each inspection: the
/// listing must show it back with that value, or this git does not honour `GIT_CONFIG_COUNT` (older than 2.31) and
/// the drivers could not be blanked. (The repository can set the key itself, but not guess the value.)
const PROBE_KEY: &str = "loom.blanking";

/// A value no repository can know in advance: the clock, the process and a counter.
fn probe_value() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let h = crate::undo::content_hash(
        format!(
            "{nanos}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        )
        .as_bytes(),
    );
    h[..12].iter().map(|b| format!("{b:02x}")).collect()
}

/// Which drivers to blank in the repository at hand, from its `git config --list -z`: `Err` when the listing lacks
/// [`PROBE_KEY`] with this inspection's `probe` value (this git cannot be told to blank anything) or the
/// configuration includes another file.
fn drivers_to_blank(listing: &[u8], probe: &str) -> Result<Vec<Vec<u8>>, String> {
    let want = format!("{PROBE_KEY}\n{probe}");
    let keys = config_keys(listing);
    if !listing.split(|b| *b == 0).any(|e| e == want.as_bytes()) {
        return Err(
            "this git does not take configuration from GIT_CONFIG_COUNT (git 2.31 or newer does), so loom cannot \
             switch off the repository's filters and drivers; install a newer git"
                .to_string(),
        );
    }
    if let Some(k) = keys.iter().find(|k| includes_a_file(k)) {
        return Err(format!(
            "the repository's configuration includes another file ({}); loom inspects only repositories whose \
             configuration is all in .git/config, because an included file could change between loom reading it \
             and git running — remove the include or inspect the repository with bash",
            String::from_utf8_lossy(k)
        ));
    }
    let mut blanked: Vec<Vec<u8>> = keys.into_iter().filter(|k| runs_a_program(k)).collect();
    blanked.sort();
    blanked.dedup();
    Ok(blanked)
}

/// `env -i VARS… GIT_CONFIG_COUNT=… GIT_CONFIG_KEY_n=BLANKED GIT_CONFIG_VALUE_n= … git --git-dir=… --work-tree=…
/// --literal-pathspecs -c SAFE… ARGS…`. The blanked keys go through the environment verbatim (bytes, `=` included:
/// the environment splits an entry at its first `=`, which is the one loom writes after the variable's name).
fn command(
    env_exe: &Path,
    git: &Path,
    top: &Path,
    probe: &str,
    blanked: &[Vec<u8>],
    args: Vec<OsString>,
) -> Vec<OsString> {
    let mut v: Vec<OsString> = vec![env_exe.into(), "-i".into()];
    v.extend(GIT_ENV.iter().map(OsString::from));
    v.push(format!("GIT_CONFIG_COUNT={}", blanked.len() + 1).into());
    v.push(format!("GIT_CONFIG_KEY_0={PROBE_KEY}").into());
    v.push(format!("GIT_CONFIG_VALUE_0={probe}").into());
    for (i, k) in blanked.iter().enumerate() {
        let mut entry = format!("GIT_CONFIG_KEY_{}=", i + 1).into_bytes();
        entry.extend_from_slice(k);
        v.push(OsString::from_vec(entry));
        v.push(format!("GIT_CONFIG_VALUE_{}=", i + 1).into());
    }
    v.push(git.into());
    let mut dir = OsString::from("--git-dir=");
    dir.push(top.join(".git"));
    let mut work = OsString::from("--work-tree=");
    work.push(top);
    v.extend([dir, work, "--literal-pathspecs".into(), "--no-pager".into()]);
    for c in GIT_SAFE_CONFIG {
        v.extend(["-c".into(), OsString::from(c)]);
    }
    v.extend(args);
    v
}

impl Tool for GitTool {
    fn name(&self) -> &str {
        &self.env.instance
    }

    fn builtin(&self) -> Option<&'static str> {
        Some(self.op.builtin())
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.env.instance.clone(),
            description: format!(
                "{} Read-only: git runs sandboxed with the repository's hooks, filters and external tools off. \
                 Paths resolve against {} and the repository's top directory must be inside this tool's grant ({}).",
                self.op.about(),
                self.env.cwd.display(),
                self.env.grant
            ),
            input_schema: self.op.schema(),
        }
    }

    fn prepare(&self, input: &Value) -> Result<Prepared, String> {
        let name = self.env.instance.clone();
        check_fields(input, &name, self.op.fields())?;
        let raw = match input.get("path") {
            None | Some(Value::Null) if self.op != GitOp::Blame => ".",
            _ => str_field(input, &name, "path")?,
        };
        let path = resolve_path(&self.env.cwd, raw, PathMode::Existing)
            .map_err(|e| format!("{name}: {e}"))?;
        let repo = find_repo(&path).map_err(|e| format!("{name}: {e}"))?;
        let args = op_args(self.op, input, &name, repo.below.as_deref())?;
        let top = repo.top.display().to_string();
        let (env, sandbox) = (self.env.clone(), self.sandbox.clone());
        let op = self.op;
        Ok(Prepared {
            request: Request::File {
                path: top.clone(),
                access: Access::Read,
            },
            more: Vec::new(),
            facts: CallFacts {
                tool: name.clone(),
                path: Some(top.clone()),
                ..CallFacts::default()
            },
            locations: vec![Location {
                path: path.display().to_string(),
            }],
            run: Box::new(move |_auth, ctx| {
                Box::pin(async move {
                    match inspect(&env, &sandbox, &repo.top, args, &ctx.cancel).await {
                        Ok(out) => out,
                        Err(e) => ToolOutput::error(format!("{}: {e}", op.builtin())),
                    }
                })
            }),
        })
    }
}

/// Runs one inspection of the repository at `top` (the kernel allowed reading it): first `git config --list` to
/// learn which drivers the repository defines, then the command with all of them blanked.
async fn inspect(
    env: &ToolEnv,
    sandbox: &SandboxEnv,
    top: &Path,
    args: Vec<OsString>,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<ToolOutput, String> {
    let row = git_inspection_row(&top.display().to_string());
    run_git(env, sandbox, top, row, args, None, cancel).await
}

/// Runs git on the repository at `top` under the sandbox `row`, hardened as every git call loom makes is (module
/// doc): `git config --list` first, then the command with the repository's drivers blanked.
pub(crate) async fn run_git(
    env: &ToolEnv,
    sandbox: &SandboxEnv,
    top: &Path,
    row: loom_kernel::Row,
    args: Vec<OsString>,
    fills: Option<&Path>,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<ToolOutput, String> {
    let git = program_on_path("git").ok_or("git is not installed (no `git` on loom's PATH)")?;
    let env_exe = program_on_path("env").ok_or("`env` is not on loom's PATH")?;
    let probe = probe_value();
    let confined = |cap| Confined {
        env,
        sandbox,
        cwd: top,
        timeout: GIT_TIMEOUT,
        keep: Keep::head(cap),
        combined: false,
        fills,
    };
    let listing = run_confined(
        BashPlan::Confined {
            row: row.clone(),
            argv: command(
                &env_exe,
                &git,
                top,
                &probe,
                &[],
                vec!["config".into(), "--list".into(), "-z".into()],
            ),
        },
        confined(1024 * 1024),
        cancel,
    )
    .await?;
    if listing.cancelled {
        return Ok(ToolOutput::interrupted(""));
    }
    if let Some(note) = loom_sandbox::swept_note(&listing.swept) {
        return Err(note);
    }
    if listing.code != 0 || listing.stdout.total > listing.stdout.bytes.len() as u64 {
        return Err(format!(
            "could not read the repository's configuration (exit {}): {}",
            listing.code,
            listing.stderr.text("stderr").trim()
        ));
    }
    let blanked = drivers_to_blank(&listing.stdout.bytes, &probe)?;
    let shown: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let argv = command(&env_exe, &git, top, &probe, &blanked, args);
    let got = run_confined(
        BashPlan::Confined { row, argv },
        confined(GIT_OUTPUT_CAP),
        cancel,
    )
    .await?;
    Ok(got.noted(render(&got, &shown, &blanked)))
}

/// Whether the work tree of the repository at `top` has changes (tracked files changed or staged; untracked files
/// are not counted), asked of git exactly as the git tools ask it: sandboxed under the read-only row, with the
/// repository's configuration given nothing to run. `Err` when git cannot say (not installed, no sandbox).
pub async fn work_tree_dirty(
    top: &Path,
    sandbox: &SandboxEnv,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<bool, String> {
    let env = loom_env(top, "environment");
    let args: Vec<OsString> = [
        "status",
        "--porcelain",
        "--untracked-files=no",
        "--ignore-submodules=all",
    ]
    .iter()
    .map(OsString::from)
    .collect();
    let out = inspect(&env, sandbox, top, args, cancel).await?;
    if out.is_error {
        return Err(out.text);
    }
    Ok(out.text != "(no output)" && !out.text.trim().is_empty())
}

/// The environment of a git command loom runs for itself (no tool instance, no grant: its row is the kernel's).
pub(crate) fn loom_env(top: &Path, instance: &str) -> ToolEnv {
    ToolEnv {
        instance: instance.into(),
        grant: loom_kernel::Grant::Set(Vec::new()),
        ctx: loom_kernel::PathCtx::new(top.display().to_string(), None),
        cwd: top.to_path_buf(),
        authority: std::sync::Arc::default(),
        undo: super::UndoLog::default(),
        record: super::RecordLog::in_memory(),
        processes: super::ProcessTable::default(),
        seen: super::SeenFiles::default(),
    }
}

/// The tool's result: git's output, or its error with the exit status.
fn render(got: &Captured, args: &[String], blanked: &[Vec<u8>]) -> ToolOutput {
    let blanked: Vec<String> = blanked
        .iter()
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .collect();
    let raw = json!({
        "command": format!("git {}", args.join(" ")),
        "exitCode": got.code,
        "blanked": blanked,
        "stdoutBytes": got.stdout.total,
    });
    if got.cancelled {
        return ToolOutput::interrupted(&got.stdout.text("output"));
    }
    if got.timed_out {
        let mut out = ToolOutput::error(format!(
            "git {} timed out after {} s; the process was killed",
            args.first().map_or("", String::as_str),
            GIT_TIMEOUT.as_secs()
        ));
        out.raw_output = Some(raw);
        return out;
    }
    let mut out = if got.code == 0 {
        let text = got.stdout.text("output");
        ToolOutput::ok(if text.trim().is_empty() {
            "(no output)".to_string()
        } else {
            text
        })
    } else {
        ToolOutput::error(format!(
            "git {} failed (exit {}): {}",
            args.first().map_or("", String::as_str),
            got.code,
            got.stderr.text("stderr").trim()
        ))
    };
    out.raw_output = Some(raw);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_keys_are_found_whatever_their_case() {
        let listing = b"loom.blanking\nnonce1\0core.bare\nfalse\0filter.lfs.clean\ngit-lfs clean\0diff.Y.textconv\nsh x\0merge.m.driver\nx\0diff.external\nx\0filter.a.b.process\nx\0filter.a=b.CLEAN\nx\0filter.\xff.smudge\0user.name\nn\0";
        let keys = drivers_to_blank(listing, "nonce1").unwrap();
        let want: [&[u8]; 6] = [
            b"diff.Y.textconv",
            b"filter.a.b.process",
            b"filter.a=b.CLEAN",
            b"filter.lfs.clean",
            b"filter.\xff.smudge",
            b"merge.m.driver",
        ];
        assert_eq!(keys, want.map(<[u8]>::to_vec));
        assert!(!runs_a_program(b"filter.clean"));
        assert!(!runs_a_program(b"core.fsmonitor"));
        // a git that ignores GIT_CONFIG_COUNT, and a configuration that includes a file, are refused
        assert!(drivers_to_blank(b"filter.x.clean\nx\0", "nonce1")
            .unwrap_err()
            .contains("2.31"));
        // the repository naming the key itself does not pass: it cannot know this inspection's value
        assert!(
            drivers_to_blank(b"loom.blanking\non\0filter.x.clean\nx\0", "nonce1")
                .unwrap_err()
                .contains("2.31")
        );
        assert!(drivers_to_blank(
            b"loom.blanking\nnonce1\0includeIf.gitdir:/x/.path\n/x\0",
            "nonce1"
        )
        .unwrap_err()
        .contains("includes another file"));
    }

    #[test]
    fn revisions_never_become_options() {
        for bad in ["", "-p", "--output=/tmp/x", "a\nb"] {
            assert!(check_rev(bad, "git_show").is_err(), "{bad:?}");
        }
        for ok in ["HEAD", "HEAD~2", "v1.0", "main:src/lib.rs", "abc123"] {
            assert!(check_rev(ok, "git_show").is_ok(), "{ok}");
        }
    }

    #[test]
    fn paths_are_literal_after_a_double_dash_and_the_safe_config_comes_first() {
        let args = op_args(
            GitOp::Diff,
            &json!({"staged": true}),
            "git_diff",
            Some(Path::new("-rf *.rs")),
        )
        .unwrap();
        let argv = command(
            Path::new("/usr/bin/env"),
            Path::new("/usr/bin/git"),
            Path::new("/w/r"),
            "nonce1",
            &[b"filter.a=b.clean".to_vec()],
            args,
        );
        let s: Vec<String> = argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(&s[..2], ["/usr/bin/env", "-i"]);
        let git = s.iter().position(|a| a == "/usr/bin/git").unwrap();
        assert_eq!(
            &s[git + 1..git + 5],
            [
                "--git-dir=/w/r/.git",
                "--work-tree=/w/r",
                "--literal-pathspecs",
                "--no-pager"
            ]
        );
        assert!(s.windows(2).any(|w| w == ["-c", "core.fsmonitor=false"]));
        assert!(s.contains(&"GIT_CONFIG_COUNT=2".to_string()));
        assert!(s
            .windows(2)
            .any(|w| w == ["GIT_CONFIG_KEY_1=filter.a=b.clean", "GIT_CONFIG_VALUE_1="]));
        assert_eq!(&s[s.len() - 3..], ["--cached", "--", "-rf *.rs"]);
        assert!(
            s.contains(&"--no-ext-diff".to_string()) && s.contains(&"--no-textconv".to_string())
        );
    }

    #[test]
    fn the_repository_is_found_above_the_path_and_a_dot_git_file_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let top = d.path().canonicalize().unwrap();
        std::fs::create_dir_all(top.join("r/.git")).unwrap();
        std::fs::create_dir_all(top.join("r/src/a")).unwrap();
        let r = find_repo(&top.join("r/src/a")).unwrap();
        assert_eq!(
            (r.top, r.below),
            (top.join("r"), Some(PathBuf::from("src/a")))
        );
        assert_eq!(find_repo(&top.join("r")).unwrap().below, None);
        std::fs::create_dir_all(top.join("w")).unwrap();
        std::fs::write(top.join("w/.git"), "gitdir: /elsewhere\n").unwrap();
        assert!(find_repo(&top.join("w"))
            .unwrap_err()
            .contains("linked worktree"));
        std::fs::create_dir_all(top.join("l")).unwrap();
        std::os::unix::fs::symlink(top.join("r/.git"), top.join("l/.git")).unwrap();
        assert!(find_repo(&top.join("l")).unwrap_err().contains("symlink"));
    }
}
