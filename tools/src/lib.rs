//! # loom-tools: the built-in tools
//!
//! A tool never decides authority: [`Tool::prepare`] parses the input and gathers facts (the
//! canonical path a file tool would touch — symlinks resolved first —, the command line and working directory of a
//! bash call) into a kernel [`Request`]; the turn loop asks the kernel; only an authorised call's
//! [`Prepared::run`] is executed, with the kernel's [`Authorization`].
//!
//! ## Adding a tool
//! A module here implementing [`Tool`], its name in [`IMPLEMENTED`] and in [`builtin_tool`], and its contract (the
//! kinds it requires or may use) in the kernel, so `loom audit` shows it and the kernel decides each call on its
//! actual arguments.
//!
//! ## What this crate must never do
//! Decide authority (a tool gathers facts; the runtime's turn loop asks the kernel and runs only an authorised call),
//! follow a link out of a granted root (file I/O goes through [`beneath`]), run a command outside the sandbox unless
//! its grant is `"*"`, or put a secret into an output or an error.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod bash;
pub mod beneath;
mod client;
mod confined;
mod context7;
mod edit_file;
mod file_compare;
mod file_info;
mod find;
mod find_symbol;
mod git;
mod glob;
mod grep;
mod ignores;
mod json;
mod list_directory;
mod notebook;
mod output;
mod patch;
mod paths;
pub mod process;
mod project_info;
mod project_run;
mod read_call;
mod read_file;
mod read_many;
pub mod record;
mod rewrite;
mod seen;
mod tree;
mod undo;
mod walk;
mod web_search;
mod worktree;
mod write_file;

use std::path::PathBuf;
use std::sync::Arc;

use futures::future::BoxFuture;
use loom_kernel::{Authorization, CallFacts, Grant, PathCtx, Request};
use tokio_util::sync::CancellationToken;

use loom_protocol::model::ToolSpec;
use loom_protocol::update::{Location, ToolCallContent, ToolKind};

pub use bash::{BashTool, SandboxEnv};
pub use client::{ClientFs, ClientTerminals};
pub use context7::{Context7Op, Context7Tool, CONTEXT7_API_KEY, CONTEXT7_BASE};
pub use edit_file::{apply_edits, EditError, EditFileTool};
pub use file_compare::{FileCompareTool, COMPARE_MAX_BYTES};
pub use file_info::FileInfoTool;
pub use find::{glob_match, FindTool};
pub use find_symbol::{FindSymbolTool, SYMBOL_MAX_VISITED};
pub use git::{find_repo, work_tree_dirty, GitOp, GitTool, Repo, GIT_OUTPUT_CAP, GIT_TIMEOUT};
pub use glob::GlobTool;
pub use grep::GrepTool;
pub use json::{JsonEditTool, ReadJsonTool};
pub use list_directory::ListDirectoryTool;
pub use notebook::{NotebookEditTool, NotebookReadTool};
pub use output::{OutputBuffer, Snapshot};
pub use patch::{ApplyPatchTool, MAX_PATCHED_FILES, MAX_PATCHED_FILE_BYTES, MAX_PATCH_BYTES};
pub use paths::{resolve_path, PathMode};
pub use process::{ProcessOp, ProcessTable, ProcessTool};
pub use project_info::ProjectInfoTool;
pub use project_run::{ProjectRunTool, RunKind, RUN_DEFAULT_TIMEOUT_MS, RUN_MAX_TIMEOUT_MS};
pub use read_file::ReadFileTool;
pub use read_many::{ReadManyTool, READ_MANY_MAX_FILES, READ_MANY_TOTAL};
pub use record::{RecordError, RecordLog, RecordOp, RecordTool};
pub use seen::{SeenFiles, Unseen};
pub use tree::TreeTool;
pub use undo::{
    content_hash, UndoLog, UndoTool, UNDO_MAX_BYTES, UNDO_MAX_FILE_BYTES, UNDO_MAX_PER_FILE,
};
pub use web_search::{WebSearchTool, BRAVE_ENDPOINT, BRAVE_SEARCH_API_KEY};
pub use worktree::{add_worktree, prune_worktrees};
pub use write_file::WriteFileTool;

/// The built-in tools this build implements, by underlying name: every built-in the kernel has a contract for
/// ([`loom_kernel::BUILTIN_TOOLS`]; a test checks each is built).
pub const IMPLEMENTED: &[&str] = &loom_kernel::BUILTIN_TOOLS;

/// Interim output of a running call.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// The cumulative tail of the output (not a delta).
    pub content: String,
    /// Structured detail.
    pub raw_output: Option<serde_json::Value>,
    /// The client terminal the call runs in, shown in place of the text (see [`ClientTerminals`]).
    pub terminal: Option<String>,
}

/// Publishes progress of one call.
pub type ProgressFn = Arc<dyn Fn(Progress) + Send + Sync>;

/// What a running call gets.
#[derive(Clone)]
pub struct ToolCtx {
    /// The kernel's authorisations of [`Prepared::more`], in order (empty for a call with one request).
    pub more: Vec<Authorization>,
    /// Fires when the turn is cancelled (a child of the turn's token).
    pub cancel: CancellationToken,
    /// Publishes progress to subscribers (never to the session).
    pub progress: ProgressFn,
    /// The agent's history when the call started, for tools that [`Tool::wants_history`] (`None` otherwise).
    pub history: Option<Vec<loom_protocol::update::SessionUpdate>>,
    /// The client that does file I/O for the file tools (an ACP client advertising `fs`; `None`: loom does it).
    pub client_fs: Option<Arc<dyn ClientFs>>,
    /// The client's terminals, where bash runs when the terminal form keeps its confinement (an ACP client
    /// advertising `terminal`; `None`: loom runs commands itself).
    pub terminals: Option<Arc<dyn ClientTerminals>>,
}

/// How a call ended.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolOutput {
    /// The result text the model sees.
    pub text: String,
    /// True when the call failed.
    pub is_error: bool,
    /// Structured output for hosts (exit code, spill path, …).
    pub raw_output: Option<serde_json::Value>,
    /// Rich content for hosts (diffs).
    pub content: Vec<ToolCallContent>,
    /// True when the call was cut short by cancellation.
    pub interrupted: bool,
}

impl ToolOutput {
    /// A successful result.
    pub fn ok(text: impl Into<String>) -> ToolOutput {
        ToolOutput {
            text: text.into(),
            ..ToolOutput::default()
        }
    }

    /// A failed result.
    pub fn error(text: impl Into<String>) -> ToolOutput {
        ToolOutput {
            text: text.into(),
            is_error: true,
            ..ToolOutput::default()
        }
    }

    /// An interrupted call.
    pub fn interrupted(detail: &str) -> ToolOutput {
        ToolOutput {
            text: if detail.is_empty() {
                "interrupted".to_string()
            } else {
                format!("interrupted\n{detail}")
            },
            is_error: true,
            raw_output: Some(serde_json::json!({ "interrupted": true })),
            interrupted: true,
            ..ToolOutput::default()
        }
    }
}

/// The deferred effect of an authorised call.
pub type Run = Box<dyn FnOnce(Authorization, ToolCtx) -> BoxFuture<'static, ToolOutput> + Send>;

/// A parsed call with its facts, waiting for the kernel's decision.
pub struct Prepared {
    /// What the kernel decides on.
    pub request: Request,
    /// Every further path the call touches (`read_many`, `file_compare`, `apply_patch`), each decided like
    /// `request` — the kernel's grant and authority checks and the `[permissions]` rules — the call running only
    /// when all are allowed; their authorisations reach the run in [`ToolCtx::more`], in this order.
    pub more: Vec<(Request, CallFacts)>,
    /// What permission rules match against.
    pub facts: CallFacts,
    /// Files it touches, for hosts.
    pub locations: Vec<Location>,
    /// Runs the call once authorised.
    pub run: Run,
}

/// What a call asks the kernel, before the run is attached ([`CallHead::then`]): the common shapes of a prepared
/// call.
pub struct CallHead {
    request: Request,
    facts: CallFacts,
    locations: Vec<Location>,
}

impl CallHead {
    /// A call about one path (`shown`, as the kernel decides it): the kernel decides `access` to it, permission rules
    /// see the tool and the path, and hosts see it as the call's location.
    pub fn one_path(tool: &str, shown: &str, access: loom_kernel::Access) -> CallHead {
        CallHead {
            request: Request::File {
                path: shown.to_string(),
                access,
            },
            facts: CallFacts {
                tool: tool.to_string(),
                path: Some(shown.to_string()),
                ..CallFacts::default()
            },
            locations: vec![Location {
                path: shown.to_string(),
            }],
        }
    }

    /// A call of a tool whose grant has no kinds: the kernel decides only whether the tool may be called at all.
    pub fn whole_tool(tool: &str) -> CallHead {
        CallHead::args(tool, loom_kernel::Row::default())
    }

    /// A call the kernel decides by the argument row `want` against the tool's grant (no path, no location).
    pub fn args(tool: &str, want: loom_kernel::Row) -> CallHead {
        CallHead {
            request: Request::Args(want),
            facts: CallFacts {
                tool: tool.to_string(),
                ..CallFacts::default()
            },
            locations: Vec::new(),
        }
    }

    /// The same, with the host the call reaches (for permission rules that match hosts).
    pub fn host(mut self, host: Option<String>) -> CallHead {
        self.facts.host = host;
        self
    }

    /// The prepared call: this head, and `run` once the kernel allows it.
    pub fn then(self, run: Run) -> Prepared {
        Prepared {
            request: self.request,
            more: Vec::new(),
            facts: self.facts,
            locations: self.locations,
            run,
        }
    }
}

/// Where a tool instance runs and under which grant.
#[derive(Debug, Clone)]
pub struct ToolEnv {
    /// The instance name the model calls.
    pub instance: String,
    /// The grant it runs under.
    pub grant: Grant,
    /// How relative grant paths resolve.
    pub ctx: PathCtx,
    /// The agent's working directory (canonical).
    pub cwd: PathBuf,
    /// The agent's authority files. A tool that reads files the call did not name one by one (a content search
    /// below a directory) asks the kernel about each ([`loom_kernel::authority_denial`]) and leaves out what it
    /// refuses (a secret store).
    pub authority: Arc<loom_kernel::Authority>,
    /// The agent's undo snapshots: every change tool records what it replaced, and `undo` puts it back.
    pub undo: UndoLog,
    /// The agent's working record (checklist, tasks, notes, goal): the record tools read and change it.
    pub record: RecordLog,
    /// The agent's background processes: `bash` with `background = true` starts them, the process tools poll and
    /// end them.
    pub processes: ProcessTable,
    /// What the model has read of each file: with `[agent] read_before_write` on, `write_file` replaces an existing
    /// file only when the session has read (or written) the text it now holds. Off by default.
    pub seen: SeenFiles,
}

/// A tool the model may call.
pub trait Tool: Send + Sync {
    /// The instance name.
    fn name(&self) -> &str;
    /// Its ACP kind.
    fn kind(&self) -> ToolKind;
    /// How the model sees it.
    fn spec(&self) -> ToolSpec;
    /// Parses `input` and gathers the facts the kernel decides on. An error is fed back to the model.
    fn prepare(&self, input: &serde_json::Value) -> Result<Prepared, String>;
    /// The built-in tool this is (`bash` for a built-in the manifest or a skill renamed `run`), so that ask and deny
    /// rules written for the built-in match it too; `None` for tools that are not built-ins.
    fn builtin(&self) -> Option<&'static str> {
        None
    }
    /// True when a run needs the agent's history in [`ToolCtx::history`] (spawn_subagent, for `fork-of-parent`).
    fn wants_history(&self) -> bool {
        false
    }
}

/// Reads a required string field.
pub fn str_field<'a>(
    input: &'a serde_json::Value,
    tool: &str,
    key: &str,
) -> Result<&'a str, InputError> {
    match input.get(key) {
        Some(serde_json::Value::String(s)) => Ok(s),
        Some(_) => Err(InputError::WrongType {
            tool: tool.to_string(),
            field: key.to_string(),
            want: "a string",
        }),
        None => Err(InputError::Missing {
            tool: tool.to_string(),
            field: key.to_string(),
        }),
    }
}

/// Reads an optional boolean field.
pub(crate) fn bool_field(
    input: &serde_json::Value,
    tool: &str,
    key: &str,
) -> Result<bool, InputError> {
    match input.get(key) {
        None | Some(serde_json::Value::Null) => Ok(false),
        Some(serde_json::Value::Bool(b)) => Ok(*b),
        Some(_) => Err(InputError::WrongType {
            tool: tool.to_string(),
            field: key.to_string(),
            want: "true or false",
        }),
    }
}

/// Refuses an input that is not an object or has unknown fields.
pub fn check_fields(
    input: &serde_json::Value,
    tool: &str,
    known: &[&str],
) -> Result<(), InputError> {
    let known_list = || known.iter().map(|k| k.to_string()).collect();
    let obj = input.as_object().ok_or_else(|| InputError::NotAnObject {
        tool: tool.to_string(),
        known: known_list(),
    })?;
    for k in obj.keys() {
        if !known.contains(&k.as_str()) {
            return Err(InputError::UnknownField {
                tool: tool.to_string(),
                field: k.clone(),
                known: known_list(),
            });
        }
    }
    Ok(())
}

/// Why a tool refuses its input before any decision is asked for. Each message names the tool and the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InputError {
    /// The input is not a JSON object.
    #[error("{tool}: the input must be a JSON object with fields {}", .known.join(", "))]
    NotAnObject {
        /// The tool instance.
        tool: String,
        /// Its fields.
        known: Vec<String>,
    },
    /// A field the tool does not have.
    #[error("{tool}: unknown field {field:?} (expected {})", .known.join(", "))]
    UnknownField {
        /// The tool instance.
        tool: String,
        /// The field given.
        field: String,
        /// Its fields.
        known: Vec<String>,
    },
    /// A required field is missing.
    #[error("{tool}: missing required field {field:?}")]
    Missing {
        /// The tool instance.
        tool: String,
        /// The field.
        field: String,
    },
    /// A field of the wrong type.
    #[error("{tool}: {field} must be {want}")]
    WrongType {
        /// The tool instance.
        tool: String,
        /// The field.
        field: String,
        /// What it must be.
        want: &'static str,
    },
}

impl From<InputError> for String {
    fn from(e: InputError) -> String {
        e.to_string()
    }
}

/// Builds the tool for one granted built-in instance.
pub fn builtin_tool(underlying: &str, env: ToolEnv, sandbox: &SandboxEnv) -> Option<Arc<dyn Tool>> {
    Some(match underlying {
        "read_file" => Arc::new(ReadFileTool { env }),
        "write_file" => Arc::new(WriteFileTool { env }),
        "edit_file" => Arc::new(EditFileTool { env }),
        "find" => Arc::new(FindTool { env }),
        "grep" => Arc::new(GrepTool { env }),
        "list_directory" => Arc::new(ListDirectoryTool { env }),
        "glob" => Arc::new(GlobTool { env }),
        "tree" => Arc::new(TreeTool { env }),
        "file_info" => Arc::new(FileInfoTool { env }),
        "project_info" => Arc::new(ProjectInfoTool { env }),
        "undo" => Arc::new(UndoTool { env }),
        "read_many" => Arc::new(ReadManyTool { env }),
        "find_symbol" => Arc::new(FindSymbolTool { env }),
        "file_compare" => Arc::new(FileCompareTool { env }),
        "notebook_read" => Arc::new(NotebookReadTool { env }),
        "notebook_edit" => Arc::new(NotebookEditTool { env }),
        "read_json" => Arc::new(ReadJsonTool { env }),
        "json_edit" => Arc::new(JsonEditTool { env }),
        "apply_patch" => Arc::new(ApplyPatchTool { env }),
        "bash" => Arc::new(BashTool::new(env, sandbox.clone())),
        other => match (
            GitOp::of(other),
            RunKind::of(other),
            RecordOp::of(other),
            ProcessOp::of(other),
        ) {
            (Some(op), _, _, _) => Arc::new(GitTool::new(op, env, sandbox.clone())),
            (_, Some(kind), _, _) => Arc::new(ProjectRunTool::new(kind, env, sandbox.clone())),
            (_, _, Some(op), _) => Arc::new(RecordTool::new(op, env)),
            (_, _, _, Some(op)) => Arc::new(ProcessTool::new(op, env)),
            _ => return None,
        },
    })
}

#[cfg(test)]
mod testutil {
    use super::*;
    use loom_kernel::{decide, AlgebraKind, Decision};

    /// The kernel's authorisation of `request` (a test that runs a call by hand); panics on a denial.
    pub fn authorize(
        algebra: AlgebraKind,
        ctx: &PathCtx,
        grant: &Grant,
        request: &Request,
    ) -> Authorization {
        match decide("t", algebra, ctx, grant, request) {
            Decision::Allow(a) => a,
            Decision::Deny(d) => panic!("{d}"),
        }
    }

    /// [`authorize`] for a prepared bash call.
    pub fn authorized(env: &ToolEnv, p: &Prepared) -> Authorization {
        authorize(AlgebraKind::Bash, &env.ctx, &env.grant, &p.request)
    }

    /// Makes a FIFO at `path` (mode 0600).
    pub fn mkfifo(path: &std::path::Path) {
        use rustix::fs::{mknodat, FileType, Mode, CWD};
        mknodat(CWD, path, FileType::Fifo, Mode::from_raw_mode(0o600), 0).unwrap();
    }

    /// Prepares, decides (under the Files or Bash algebra) and runs one call.
    pub async fn call(
        tool: &dyn Tool,
        kind: AlgebraKind,
        env: &ToolEnv,
        input: serde_json::Value,
    ) -> ToolOutput {
        call_after(tool, kind, env, input, || {}).await
    }

    /// [`call`], with `between` run after the decision and before the call runs: what a racing process could do.
    pub async fn call_after(
        tool: &dyn Tool,
        kind: AlgebraKind,
        env: &ToolEnv,
        input: serde_json::Value,
        between: impl FnOnce(),
    ) -> ToolOutput {
        call_through(tool, kind, env, input, between, None).await
    }

    /// [`call`] in an editor: `client` reads and writes the files (ACP `fs/*`).
    pub async fn call_in_client(
        tool: &dyn Tool,
        kind: AlgebraKind,
        env: &ToolEnv,
        input: serde_json::Value,
        client: Arc<dyn crate::ClientFs>,
    ) -> ToolOutput {
        call_through(tool, kind, env, input, || {}, Some(client)).await
    }

    async fn call_through(
        tool: &dyn Tool,
        kind: AlgebraKind,
        env: &ToolEnv,
        input: serde_json::Value,
        between: impl FnOnce(),
        client_fs: Option<Arc<dyn crate::ClientFs>>,
    ) -> ToolOutput {
        let p = match tool.prepare(&input) {
            Ok(p) => p,
            Err(e) => return ToolOutput::error(e),
        };
        let decision = decide(&env.instance, kind, &env.ctx, &env.grant, &p.request);
        let mut more = Vec::new();
        for (r, _) in &p.more {
            match decide(&env.instance, kind, &env.ctx, &env.grant, r) {
                Decision::Allow(a) => more.push(a),
                Decision::Deny(d) => return ToolOutput::error(d.to_string()),
            }
        }
        between();
        match decision {
            Decision::Allow(a) => {
                let ctx = ToolCtx {
                    more,
                    cancel: CancellationToken::new(),
                    progress: Arc::new(|_| {}),
                    history: None,
                    client_fs,
                    terminals: None,
                };
                (p.run)(a, ctx).await
            }
            Decision::Deny(d) => ToolOutput::error(d.to_string()),
        }
    }

    /// A tool env over `dir` with `grant` (TOML text of the grant value).
    pub fn env(instance: &str, dir: &std::path::Path, grant: &str) -> ToolEnv {
        let t: toml::Table = toml::from_str(&format!("g = {grant}")).unwrap();
        let cwd = std::fs::canonicalize(dir).unwrap();
        ToolEnv {
            instance: instance.into(),
            grant: Grant::from_toml(&t["g"]).unwrap(),
            ctx: PathCtx::new(cwd.to_string_lossy().into_owned(), None),
            cwd,
            authority: Arc::default(),
            undo: Default::default(),
            record: Default::default(),
            processes: Default::default(),
            seen: Default::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::env;
    use super::*;

    /// Every built-in the kernel knows is built here, except the ones the runtime builds itself (they need a key, the
    /// agent's catalog or its boot).
    #[test]
    fn every_kernel_built_in_is_built() {
        let dir = tempfile::tempdir().unwrap();
        // the tools that start agents need the agent's boot
        let by_runtime: Vec<&str> = [
            "web_search",
            "context7_search",
            "context7_resolve_library",
            "context7_query_docs",
            "tool_search",
        ]
        .into_iter()
        .chain(loom_kernel::DELEGATING_TOOLS.iter().copied())
        .collect();
        for name in IMPLEMENTED.iter().filter(|n| !by_runtime.contains(n)) {
            assert!(
                builtin_tool(name, env(name, dir.path(), "\"*\""), &SandboxEnv::default())
                    .is_some(),
                "{name}"
            );
        }
    }

    /// The kernel keeps its own list of the built-ins that write (an install directory or a lock in reach of one
    /// is refused): every built-in tool this crate makes that edits or executes is on it, and no reading one is.
    #[test]
    fn the_kernel_knows_every_built_in_that_writes() {
        let dir = tempfile::tempdir().unwrap();
        let sandbox = SandboxEnv::default();
        for name in loom_kernel::FILE_TOOLS
            .iter()
            .chain(loom_kernel::COMMAND_TOOLS.iter())
        {
            let tool = builtin_tool(name, env(name, dir.path(), "\"*\""), &sandbox)
                .unwrap_or_else(|| panic!("{name} is not built"));
            let writes = matches!(tool.kind(), ToolKind::Edit | ToolKind::Execute);
            let listed = loom_kernel::FILE_WRITERS.contains(name)
                || loom_kernel::COMMAND_TOOLS.contains(name);
            assert_eq!(writes, listed, "{name}: kind {:?}", tool.kind());
        }
    }

    /// A path outside the grant is refused the same way whether it exists or not, by every tool that reads or
    /// changes an existing file: the kernel decides a missing path before anything says it is missing, so no call
    /// tells the model what exists outside its grant. Inside the grant a missing file is reported as missing.
    #[tokio::test]
    async fn a_missing_path_outside_the_grant_is_refused_like_an_existing_one() {
        use super::testutil::call;
        use loom_kernel::AlgebraKind;
        use serde_json::json;

        let work = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("there.txt"), "secret\n").unwrap();
        std::fs::write(work.path().join("a.txt"), "a\n").unwrap();
        let o = std::fs::canonicalize(outside.path()).unwrap();
        let (there, gone) = (o.join("there.txt"), o.join("gone/deeper.txt"));
        let grant = r#"{ paths = ["./"] }"#;
        // each tool, and its input naming one path
        type Naming = fn(&str) -> serde_json::Value;
        let tools: Vec<(Box<dyn Tool>, Naming)> = vec![
            (
                Box::new(ReadFileTool {
                    env: env("read_file", work.path(), grant),
                }),
                |p| json!({ "path": p }),
            ),
            (
                Box::new(EditFileTool {
                    env: env("edit_file", work.path(), grant),
                }),
                |p| json!({ "path": p, "edits": [{ "old_text": "s", "new_text": "t" }] }),
            ),
            (
                Box::new(GrepTool {
                    env: env("grep", work.path(), grant),
                }),
                |p| json!({ "pattern": "s", "path": p }),
            ),
            (
                Box::new(FileInfoTool {
                    env: env("file_info", work.path(), grant),
                }),
                |p| json!({ "path": p }),
            ),
            (
                Box::new(ReadManyTool {
                    env: env("read_many", work.path(), grant),
                }),
                |p| json!({ "paths": [p] }),
            ),
            (
                Box::new(FileCompareTool {
                    env: env("file_compare", work.path(), grant),
                }),
                |p| json!({ "a": "a.txt", "b": p }),
            ),
        ];
        for (tool, input) in &tools {
            let kind = AlgebraKind::Files;
            let e = env(tool.name(), work.path(), grant);
            let mut said = Vec::new();
            for p in [&there, &gone] {
                let p = p.display().to_string();
                let out = call(tool.as_ref(), kind, &e, input(&p)).await;
                assert!(out.is_error, "{}: {p}: {}", tool.name(), out.text);
                said.push(out.text.replace(&p, "PATH"));
            }
            assert!(
                said[0].contains("outside this tool's grant"),
                "{}: {}",
                tool.name(),
                said[0]
            );
            assert_eq!(said[0], said[1], "{}", tool.name());
            // inside the grant, a missing file is reported as missing, after the decision
            let inside = call(tool.as_ref(), kind, &e, input("nope.txt")).await;
            assert!(
                inside.is_error && inside.text.contains("No such file"),
                "{}: {}",
                tool.name(),
                inside.text
            );
        }
        // bash's `cwd`: a directory outside the grant and a missing one are refused alike; inside the grant, one
        // that is missing is named as not a directory (nothing runs)
        let e = env("bash", work.path(), r#"{ commands = "*", paths = ["./"] }"#);
        let bash = BashTool::new(e.clone(), SandboxEnv::default());
        let mut said = Vec::new();
        for d in [o.clone(), o.join("gone")] {
            let d = d.display().to_string();
            let input = json!({ "command": "true", "cwd": d });
            let out = call(&bash, AlgebraKind::Bash, &e, input).await;
            assert!(
                out.is_error && !out.text.contains("not a directory"),
                "{d}: {}",
                out.text
            );
            said.push(out.text.replace(&d, "PATH"));
        }
        assert_eq!(said[0], said[1]);
        let input = json!({ "command": "true", "cwd": "nope" });
        let out = call(&bash, AlgebraKind::Bash, &e, input).await;
        assert!(
            out.is_error && out.text.ends_with("nope is not a directory"),
            "{}",
            out.text
        );
        // the limits SECURITY.md names, which still answer before the decision: a dangling symlink as the last name,
        // and `..` through a directory that does not exist
        std::os::unix::fs::symlink(o.join("ghost"), o.join("dangling")).unwrap();
        let e = env("read_file", work.path(), grant);
        let read = ReadFileTool { env: e.clone() };
        for (p, says) in [
            (
                o.join("dangling"),
                "is a symlink whose target does not exist",
            ),
            (
                o.join("gone/../there.txt"),
                "through a directory that does not exist",
            ),
        ] {
            let input = json!({ "path": p.display().to_string() });
            let out = call(&read, AlgebraKind::Files, &e, input).await;
            assert!(out.is_error && out.text.contains(says), "{}", out.text);
        }
    }
}
