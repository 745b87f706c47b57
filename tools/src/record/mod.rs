//! The working record and its tools: `todo_read`, `todo_write` (and `update_plan`, the same checklist in Codex's
//! shape), `task` and `note`.
//!
//! The record is session bookkeeping, never the workspace: the tools read and change only the agent's
//! [`RecordLog`], so plan mode lets them run. It lives outside the conversation — in memory, and, for a session that
//! can be resumed, in a file in the agent's storage (out of the agent's reach), written whole to a temporary file,
//! synced and renamed over the old one, so a crash leaves the old record or the new one, never half of one. A change
//! is checked whole first ([`model`]): a refused change leaves the record as it was.

pub mod model;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{json, Value};

use super::{check_fields, str_field, Prepared, Tool, ToolEnv, ToolOutput};
use loom_protocol::model::ToolSpec;
use loom_protocol::update::ToolKind;
pub use model::{Note, NoteKind, Record, Status, Task, TaskChange, Todo, NOTE_KINDS};

/// The stored form's version.
const RECORD_VERSION: u64 = 1;

/// Why a stored record cannot be used.
#[derive(Debug, thiserror::Error)]
#[error(
    "{path}: not a working record ({reason}); fix or remove it (it holds the session's checklist, tasks and notes; \
     removing it starts an empty record)"
)]
pub struct RecordError {
    /// The file.
    pub path: String,
    /// What is wrong.
    pub reason: String,
}

struct Inner {
    record: Record,
    file: Option<PathBuf>,
    version: u64,
}

/// An agent's working record, shared by its record tools and the runtime (a cheap handle).
#[derive(Clone)]
pub struct RecordLog(Arc<Mutex<Inner>>);

impl Default for RecordLog {
    fn default() -> RecordLog {
        RecordLog::in_memory()
    }
}

impl std::fmt::Debug for RecordLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = self.lock();
        f.debug_struct("RecordLog")
            .field("file", &inner.file)
            .field("version", &inner.version)
            .finish()
    }
}

impl RecordLog {
    /// A record kept in memory only (a session that does not outlive the process).
    pub fn in_memory() -> RecordLog {
        RecordLog(Arc::new(Mutex::new(Inner {
            record: Record::new(),
            file: None,
            version: 0,
        })))
    }

    /// The record stored in `file` (empty when the file does not exist yet); every change is saved there.
    pub fn open(file: &Path) -> Result<RecordLog, RecordError> {
        let bad = |reason: String| RecordError {
            path: file.display().to_string(),
            reason,
        };
        let record = match std::fs::read(file) {
            Ok(bytes) => {
                let v: Value = serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
                match v.get("version").and_then(Value::as_u64) {
                    Some(RECORD_VERSION) => {}
                    Some(n) => {
                        return Err(bad(format!(
                            "version {n}; this loom reads version {RECORD_VERSION}"
                        )))
                    }
                    None => return Err(bad("no version".into())),
                }
                let mut v = v;
                if let Some(o) = v.as_object_mut() {
                    o.remove("version");
                }
                let r: Record = serde_json::from_value(v).map_err(|e| bad(e.to_string()))?;
                r.validate().map_err(bad)?;
                r
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Record::new(),
            Err(e) => return Err(bad(format!("cannot be read: {e}"))),
        };
        Ok(RecordLog(Arc::new(Mutex::new(Inner {
            record,
            file: Some(file.to_path_buf()),
            version: 0,
        }))))
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // a panic while holding the lock cannot leave a half-made record: changes are swapped in whole
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The record now.
    pub fn snapshot(&self) -> Record {
        self.lock().record.clone()
    }

    /// How many changes were made in this process (to tell whether the record changed since it was last shown).
    pub fn version(&self) -> u64 {
        self.lock().version
    }

    /// The file the record is kept in, if any.
    pub fn file(&self) -> Option<PathBuf> {
        self.lock().file.clone()
    }

    /// Applies `f` to a copy of the record; when it succeeds the copy is saved (if the record has a file) and only
    /// then becomes the record. On any error nothing changed.
    pub fn change<T>(&self, f: impl FnOnce(&mut Record) -> Result<T, String>) -> Result<T, String> {
        let mut inner = self.lock();
        let mut next = inner.record.clone();
        let out = f(&mut next)?;
        if next == inner.record {
            return Ok(out);
        }
        if let Some(file) = &inner.file {
            save(file, &next).map_err(|e| {
                format!(
                    "the working record could not be saved to {} ({e}); nothing was changed",
                    file.display()
                )
            })?;
        }
        inner.record = next;
        inner.version += 1;
        Ok(out)
    }
}

/// Writes `record` to `file` crash-safely: a temporary file beside it, synced, renamed over it, the directory synced.
fn save(file: &Path, record: &Record) -> std::io::Result<()> {
    use std::io::Write;
    let mut v = serde_json::to_value(record).map_err(std::io::Error::other)?;
    if let Some(o) = v.as_object_mut() {
        o.insert("version".into(), json!(RECORD_VERSION));
    }
    let text = serde_json::to_vec_pretty(&v).map_err(std::io::Error::other)?;
    let dir = file.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        file.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("record"),
        std::process::id()
    ));
    let written = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&text)?;
        f.sync_all()?;
        std::fs::rename(&tmp, file)?;
        std::fs::File::open(dir)?.sync_all()
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Which record tool an instance is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordOp {
    /// `todo_read`.
    Read,
    /// `todo_write`.
    Write,
    /// `update_plan`: `todo_write` in Codex's shape (`plan: [{step, status}]`).
    UpdatePlan,
    /// `task`.
    Task,
    /// `note`.
    Note,
}

impl RecordOp {
    /// The op of built-in `underlying`.
    pub fn of(underlying: &str) -> Option<RecordOp> {
        Some(match underlying {
            "todo_read" => RecordOp::Read,
            "todo_write" => RecordOp::Write,
            "update_plan" => RecordOp::UpdatePlan,
            "task" => RecordOp::Task,
            "note" => RecordOp::Note,
            _ => return None,
        })
    }

    fn builtin(self) -> &'static str {
        match self {
            RecordOp::Read => "todo_read",
            RecordOp::Write => "todo_write",
            RecordOp::UpdatePlan => "update_plan",
            RecordOp::Task => "task",
            RecordOp::Note => "note",
        }
    }

    fn about(self) -> &'static str {
        match self {
            RecordOp::Read => {
                "Read the working record: the goal, the checklist, the tasks (with descriptions and what blocks \
                 them) and the notes. Call it before planning multi-step work."
            }
            RecordOp::Write | RecordOp::UpdatePlan => {
                "Replace the ordered checklist whole: every requirement and verification step of the work, each \
                 pending, in_progress or completed, at most one in_progress. Update it as you make progress."
            }
            RecordOp::Task => {
                "Manage tasks: create (title, description?, blocked_by?: ids it waits for), update (id and the \
                 fields to change), get (id), list, remove (id). Dependency cycles are refused, and a task starts \
                 or completes only after every task it waits for is completed."
            }
            RecordOp::Note => {
                "Record a note in the working record: a finding, changed_path, decision, failed_attempt, evidence, \
                 blocker or next_action (kind, default finding); kind goal sets the session's goal. Notes survive \
                 compaction."
            }
        }
    }

    fn schema(self) -> Value {
        let status = json!({ "type": "string", "enum": ["pending", "in_progress", "completed"] });
        match self {
            RecordOp::Read => {
                json!({ "type": "object", "properties": {}, "additionalProperties": false })
            }
            RecordOp::Write => json!({
                "type": "object",
                "properties": { "todos": { "type": "array", "items": {
                    "type": "object",
                    "properties": { "content": { "type": "string" }, "status": status },
                    "required": ["content", "status"],
                }}},
                "required": ["todos"],
            }),
            RecordOp::UpdatePlan => json!({
                "type": "object",
                "properties": {
                    "explanation": { "type": "string" },
                    "plan": { "type": "array", "items": {
                        "type": "object",
                        "properties": { "step": { "type": "string" }, "status": status },
                        "required": ["step", "status"],
                    }},
                },
                "required": ["plan"],
            }),
            RecordOp::Task => json!({
                "type": "object",
                "properties": {
                    "action": { "type": "string", "enum": ["create", "update", "get", "list", "remove"] },
                    "id": { "type": "integer", "minimum": 1 },
                    "title": { "type": "string" },
                    "description": { "type": "string" },
                    "status": status,
                    "blocked_by": { "type": "array", "items": { "type": "integer", "minimum": 1 } },
                },
                "required": ["action"],
            }),
            RecordOp::Note => {
                let mut kinds: Vec<&str> = NOTE_KINDS.to_vec();
                kinds.push("goal");
                json!({
                    "type": "object",
                    "properties": {
                        "text": { "type": "string" },
                        "kind": { "type": "string", "enum": kinds },
                    },
                    "required": ["text"],
                })
            }
        }
    }
}

/// A record tool instance.
pub struct RecordTool {
    op: RecordOp,
    env: ToolEnv,
}

impl RecordTool {
    /// The tool for `op`.
    pub fn new(op: RecordOp, env: ToolEnv) -> RecordTool {
        RecordTool { op, env }
    }
}

/// One change or question, parsed from the call's input before anything is decided.
enum Action {
    Read,
    Todos(Vec<Todo>),
    Create {
        title: String,
        description: Option<String>,
        status: Option<Status>,
        blocked_by: Vec<u64>,
    },
    Update(u64, TaskChange),
    Get(u64),
    List,
    Remove(u64),
    Note(NoteKind, String),
    Goal(String),
}

fn status_of(v: &Value, tool: &str, at: &str) -> Result<Status, String> {
    let s = v
        .as_str()
        .ok_or_else(|| format!("{tool}: {at} must be a string"))?;
    Status::parse(s).ok_or_else(|| {
        format!("{tool}: {at} is {s:?}; a status is pending, in_progress or completed")
    })
}

/// The checklist of `todo_write {todos: [{content, status}]}` or `update_plan {plan: [{step, status}]}`.
fn parse_list(input: &Value, tool: &str, key: &str, text_key: &str) -> Result<Vec<Todo>, String> {
    let items = input
        .get(key)
        .and_then(Value::as_array)
        .ok_or_else(|| format!("{tool}: {key} must be an array of {{{text_key}, status}}"))?;
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let at = format!("{key}[{i}]");
            let o = item
                .as_object()
                .ok_or_else(|| format!("{tool}: {at} must be an object {{{text_key}, status}}"))?;
            if let Some(k) = o.keys().find(|k| *k != text_key && *k != "status") {
                return Err(format!(
                    "{tool}: {at} has unknown field {k:?} (an item has {text_key} and status)"
                ));
            }
            let content = o
                .get(text_key)
                .and_then(Value::as_str)
                .ok_or_else(|| format!("{tool}: {at}.{text_key} must be a string"))?;
            let status = status_of(
                o.get("status").unwrap_or(&Value::Null),
                tool,
                &format!("{at}.status"),
            )?;
            Ok(Todo {
                content: content.to_string(),
                status,
            })
        })
        .collect()
}

fn ids_of(v: &Value, tool: &str) -> Result<Vec<u64>, String> {
    v.as_array()
        .and_then(|a| a.iter().map(Value::as_u64).collect::<Option<Vec<u64>>>())
        .ok_or_else(|| format!("{tool}: blocked_by must be an array of task ids"))
}

fn id_of(input: &Value, tool: &str, action: &str) -> Result<u64, String> {
    match input.get("id") {
        Some(v) => v
            .as_u64()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("{tool}: id must be a task id (a positive integer)")),
        None => Err(format!("{tool}: {action} needs the task's id")),
    }
}

impl RecordTool {
    fn parse(&self, input: &Value) -> Result<Action, String> {
        let tool = self.env.instance.as_str();
        match self.op {
            RecordOp::Read => {
                check_fields(input, tool, &[])?;
                Ok(Action::Read)
            }
            RecordOp::Write => {
                check_fields(input, tool, &["todos"])?;
                Ok(Action::Todos(parse_list(input, tool, "todos", "content")?))
            }
            RecordOp::UpdatePlan => {
                check_fields(input, tool, &["plan", "explanation"])?;
                Ok(Action::Todos(parse_list(input, tool, "plan", "step")?))
            }
            RecordOp::Note => {
                check_fields(input, tool, &["text", "kind"])?;
                let text = str_field(input, tool, "text")?.to_string();
                match input.get("kind") {
                    None | Some(Value::Null) => Ok(Action::Note(NoteKind::default(), text)),
                    Some(Value::String(k)) if k == "goal" => Ok(Action::Goal(text)),
                    Some(Value::String(k)) => NoteKind::parse(k)
                        .map(|kind| Action::Note(kind, text))
                        .ok_or_else(|| {
                            format!(
                                "{tool}: kind {k:?} is not a note kind; one of {}, or goal",
                                NOTE_KINDS.join(", ")
                            )
                        }),
                    Some(_) => Err(format!("{tool}: kind must be a string")),
                }
            }
            RecordOp::Task => {
                let action = str_field(input, tool, "action")?;
                let fields: &[&str] = match action {
                    "create" => &["action", "title", "description", "status", "blocked_by"],
                    "update" => &[
                        "action",
                        "id",
                        "title",
                        "description",
                        "status",
                        "blocked_by",
                    ],
                    "get" | "remove" => &["action", "id"],
                    "list" => &["action"],
                    other => {
                        return Err(format!(
                        "{tool}: action {other:?} is not one of create, update, get, list, remove"
                    ))
                    }
                };
                check_fields(input, tool, fields)?;
                let opt_str = |k: &str| -> Result<Option<String>, String> {
                    match input.get(k) {
                        None | Some(Value::Null) => Ok(None),
                        Some(_) => Ok(Some(str_field(input, tool, k)?.to_string())),
                    }
                };
                let status = match input.get("status") {
                    None | Some(Value::Null) => None,
                    Some(v) => Some(status_of(v, tool, "status")?),
                };
                let blocked_by = match input.get("blocked_by") {
                    None | Some(Value::Null) => None,
                    Some(v) => Some(ids_of(v, tool)?),
                };
                Ok(match action {
                    "create" => Action::Create {
                        title: opt_str("title")?
                            .ok_or_else(|| format!("{tool}: create needs a title"))?,
                        description: opt_str("description")?,
                        status,
                        blocked_by: blocked_by.unwrap_or_default(),
                    },
                    "update" => {
                        let change = TaskChange {
                            title: opt_str("title")?,
                            description: opt_str("description")?,
                            status,
                            blocked_by,
                        };
                        if change == TaskChange::default() {
                            return Err(format!(
                                "{tool}: update names nothing to change (title, description, status or blocked_by)"
                            ));
                        }
                        Action::Update(id_of(input, tool, "update")?, change)
                    }
                    "get" => Action::Get(id_of(input, tool, "get")?),
                    "remove" => Action::Remove(id_of(input, tool, "remove")?),
                    _ => Action::List,
                })
            }
        }
    }
}

/// Carries out `action` on `log`; the tool's answer.
fn perform(log: &RecordLog, action: Action) -> Result<String, String> {
    match action {
        Action::Read => Ok(log.snapshot().render()),
        Action::Todos(todos) => log.change(|r| {
            r.set_todos(todos)?;
            Ok(format!("The checklist now:\n{}", r.render_todos()))
        }),
        Action::Create {
            title,
            description,
            status,
            blocked_by,
        } => log.change(|r| {
            let id = r.create_task(&title, description.as_deref(), status, blocked_by)?;
            Ok(format!("created task {id}\n{}", r.render_task(r.task(id)?)))
        }),
        Action::Update(id, change) => log.change(|r| {
            r.update_task(id, change)?;
            Ok(format!("updated task {id}\n{}", r.render_task(r.task(id)?)))
        }),
        Action::Get(id) => {
            let r = log.snapshot();
            Ok(r.render_task(r.task(id)?))
        }
        Action::List => {
            let r = log.snapshot();
            if r.tasks.is_empty() {
                return Ok("(no tasks)".to_string());
            }
            Ok(r.tasks
                .iter()
                .map(|t| r.render_task(t))
                .collect::<Vec<_>>()
                .join("\n"))
        }
        Action::Remove(id) => log.change(|r| {
            let t = r.remove_task(id)?;
            Ok(format!("removed task {id} ({})", t.title))
        }),
        Action::Note(kind, text) => log.change(|r| {
            Ok(match r.add_note(kind, &text)? {
                None => format!("noted ({})", kind.name()),
                Some(old) => format!(
                    "noted ({}); the oldest note was dropped to keep {} ({}: {})",
                    kind.name(),
                    model::MAX_NOTES,
                    old.kind.name(),
                    old.text
                ),
            })
        }),
        Action::Goal(text) => log.change(|r| {
            r.set_goal(&text)?;
            Ok(match &r.goal {
                Some(g) => format!("the goal is now: {g}"),
                None => "the goal is cleared".to_string(),
            })
        }),
    }
}

impl Tool for RecordTool {
    fn name(&self) -> &str {
        &self.env.instance
    }

    fn builtin(&self) -> Option<&'static str> {
        Some(self.op.builtin())
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Think
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.env.instance.clone(),
            description: format!(
                "{} Session bookkeeping: it changes nothing in the workspace.",
                self.op.about()
            ),
            input_schema: self.op.schema(),
        }
    }

    fn prepare(&self, input: &Value) -> Result<Prepared, String> {
        let name = self.env.instance.clone();
        let action = self.parse(input)?;
        let log = self.env.record.clone();
        Ok(
            crate::CallHead::whole_tool(&name).then(Box::new(move |_auth, _ctx| {
                Box::pin(async move {
                    match perform(&log, action) {
                        Ok(text) => ToolOutput::ok(text),
                        Err(e) => {
                            ToolOutput::error(format!("{name}: {e}; the record is unchanged"))
                        }
                    }
                })
            })),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{call, env};
    use loom_kernel::AlgebraKind;

    fn tool(op: RecordOp, e: &ToolEnv) -> RecordTool {
        let mut e = e.clone();
        e.instance = op.builtin().into();
        RecordTool::new(op, e)
    }

    async fn run(t: &RecordTool, input: Value) -> ToolOutput {
        call(t, AlgebraKind::Default, &t.env, input).await
    }

    #[tokio::test]
    async fn the_tools_share_one_record_and_refusals_change_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let e = env("todo_read", dir.path(), "\"*\"");
        let (read, write, plan, task, note) = (
            tool(RecordOp::Read, &e),
            tool(RecordOp::Write, &e),
            tool(RecordOp::UpdatePlan, &e),
            tool(RecordOp::Task, &e),
            tool(RecordOp::Note, &e),
        );
        let w = run(
            &write,
            json!({"todos": [{"content": "read", "status": "completed"}, {"content": "fix", "status": "in_progress"}]}),
        )
        .await;
        assert_eq!(w.text, "The checklist now:\n1. [x] read\n2. [~] fix");
        let bad = run(
            &plan,
            json!({"plan": [{"step": "a", "status": "in_progress"}, {"step": "b", "status": "in_progress"}]}),
        )
        .await;
        assert!(
            bad.is_error && bad.text.contains("at most one item is in_progress"),
            "{}",
            bad.text
        );
        let bad = run(
            &write,
            json!({"todos": [{"content": "a", "status": "done"}]}),
        )
        .await;
        assert!(
            bad.is_error && bad.text.contains("todos[0].status is \"done\""),
            "{}",
            bad.text
        );
        let c = run(&task, json!({"action": "create", "title": "one"})).await;
        assert_eq!(c.text, "created task 1\n[ ] task 1: one");
        run(
            &task,
            json!({"action": "create", "title": "two", "blocked_by": [1]}),
        )
        .await;
        let cyc = run(
            &task,
            json!({"action": "update", "id": 1, "blocked_by": [2]}),
        )
        .await;
        assert!(
            cyc.is_error && cyc.text.contains("dependency cycle") && cyc.text.contains("unchanged"),
            "{}",
            cyc.text
        );
        let early = run(
            &task,
            json!({"action": "update", "id": 2, "status": "completed"}),
        )
        .await;
        assert!(early.is_error, "{}", early.text);
        run(&note, json!({"text": "ship it", "kind": "goal"})).await;
        run(
            &note,
            json!({"text": "the cache is cold", "kind": "evidence"}),
        )
        .await;
        let r = run(&read, json!({})).await;
        assert_eq!(
            r.text,
            "Goal: ship it\n\nChecklist:\n1. [x] read\n2. [~] fix\n\nTasks:\n[ ] task 1: one\n[ ] task 2: two \
             (after 1; blocked by 1)\n\nNotes:\n- evidence: the cache is cold"
        );
        assert_eq!(e.record.version(), 5);
        let unknown = run(&note, json!({"text": "x", "kind": "rumour"})).await;
        assert!(unknown.is_error && unknown.text.contains("not a note kind"));
    }

    #[test]
    fn a_stored_record_survives_the_process_and_a_damaged_one_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("agent/record.json");
        let log = RecordLog::open(&file).unwrap();
        assert!(log.snapshot().is_empty());
        log.change(|r| r.set_goal("keep going")).unwrap();
        log.change(|r| r.create_task("t", None, None, vec![]).map(|_| ()))
            .unwrap();
        let again = RecordLog::open(&file).unwrap();
        assert_eq!(again.snapshot(), log.snapshot());
        // a refused change writes nothing
        let before = std::fs::read(&file).unwrap();
        assert!(log
            .change(|r| r.create_task("u", None, None, vec![7]).map(|_| ()))
            .is_err());
        assert_eq!(std::fs::read(&file).unwrap(), before);
        // a save that fails leaves the record as it was
        std::fs::remove_file(&file).unwrap();
        std::fs::create_dir(&file).unwrap();
        let e = log.change(|r| r.set_goal("other")).unwrap_err();
        assert!(e.contains("could not be saved"), "{e}");
        assert_eq!(log.snapshot().goal.as_deref(), Some("keep going"));
        std::fs::remove_dir(&file).unwrap();
        std::fs::write(&file, "{\"version\": 1, \"todo\": 3}").unwrap();
        let e = RecordLog::open(&file).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("{}: not a working record", file.display()))
                && e.contains("todo"),
            "{e}"
        );
        std::fs::write(&file, "{\"version\": 9}").unwrap();
        assert!(RecordLog::open(&file)
            .unwrap_err()
            .to_string()
            .contains("version 9"));
    }
}
