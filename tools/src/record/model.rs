//! The working record itself, with no I/O: the ordered checklist (`todo_write`), the tasks and their dependencies
//! (`task`), the notes and the session goal (`note`), every change checked whole before it is made, and the texts
//! the model and the user are shown.
//!
//! Tasks form a directed acyclic graph (an edge from each task a task is `blocked_by` to it): a change that would
//! close a cycle is refused naming the tasks on it, and a task starts or completes only once every task it waits for
//! is completed (petgraph finds the cycles).

use std::collections::BTreeMap;

use petgraph::algo::kosaraju_scc;
use petgraph::graphmap::DiGraphMap;
use serde::{Deserialize, Serialize};

/// The most checklist items.
pub const MAX_TODOS: usize = 100;
/// The most tasks.
pub const MAX_TASKS: usize = 200;
/// The most notes kept (the oldest goes first beyond this).
pub const MAX_NOTES: usize = 200;
/// The longest checklist item, task title or goal, in characters.
pub const MAX_LINE_CHARS: usize = 500;
/// The longest task description or note, in characters.
pub const MAX_TEXT_CHARS: usize = 4000;

/// Where an item stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Not started.
    #[default]
    Pending,
    /// Being worked on.
    InProgress,
    /// Done.
    Completed,
}

impl Status {
    /// The status a model wrote: `pending`, `in_progress` or `completed`.
    pub fn parse(s: &str) -> Option<Status> {
        match s {
            "pending" => Some(Status::Pending),
            "in_progress" => Some(Status::InProgress),
            "completed" => Some(Status::Completed),
            _ => None,
        }
    }

    /// Its name on the wire.
    pub fn name(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::InProgress => "in_progress",
            Status::Completed => "completed",
        }
    }

    fn mark(self) -> &'static str {
        match self {
            Status::Pending => "[ ]",
            Status::InProgress => "[~]",
            Status::Completed => "[x]",
        }
    }
}

/// One checklist item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Todo {
    /// What it is.
    pub content: String,
    /// Where it stands.
    pub status: Status,
}

/// One task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    /// Its id (from 1, never reused in a session).
    pub id: u64,
    /// A short title.
    pub title: String,
    /// What it involves.
    #[serde(default)]
    pub description: String,
    /// Where it stands.
    pub status: Status,
    /// The tasks it waits for.
    #[serde(default)]
    pub blocked_by: Vec<u64>,
}

/// What a note records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum NoteKind {
    /// Something found out.
    #[default]
    Finding,
    /// A path changed.
    ChangedPath,
    /// A decision and why.
    Decision,
    /// Something tried that did not work.
    FailedAttempt,
    /// Evidence for a claim (a test run, a command's output).
    Evidence,
    /// What stands in the way.
    Blocker,
    /// What to do next.
    NextAction,
}

/// The note kinds, as the model writes them.
pub const NOTE_KINDS: [&str; 7] = [
    "finding",
    "changed_path",
    "decision",
    "failed_attempt",
    "evidence",
    "blocker",
    "next_action",
];

impl NoteKind {
    /// The kind a model wrote.
    pub fn parse(s: &str) -> Option<NoteKind> {
        Some(match s {
            "finding" => NoteKind::Finding,
            "changed_path" => NoteKind::ChangedPath,
            "decision" => NoteKind::Decision,
            "failed_attempt" => NoteKind::FailedAttempt,
            "evidence" => NoteKind::Evidence,
            "blocker" => NoteKind::Blocker,
            "next_action" => NoteKind::NextAction,
            _ => return None,
        })
    }

    /// Its name on the wire.
    pub fn name(self) -> &'static str {
        NOTE_KINDS[self as usize]
    }
}

/// One note.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Note {
    /// What it records.
    pub kind: NoteKind,
    /// The note.
    pub text: String,
}

/// The whole working record of a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Record {
    /// The session's goal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal: Option<String>,
    /// The ordered checklist.
    #[serde(default)]
    pub todos: Vec<Todo>,
    /// The tasks, by id.
    #[serde(default)]
    pub tasks: Vec<Task>,
    /// The next task id.
    #[serde(default = "first_id")]
    pub next_id: u64,
    /// The notes, oldest first.
    #[serde(default)]
    pub notes: Vec<Note>,
}

fn first_id() -> u64 {
    1
}

/// A change to a task (`task {action: "update"}`): the fields given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskChange {
    /// A new title.
    pub title: Option<String>,
    /// A new description.
    pub description: Option<String>,
    /// A new status.
    pub status: Option<Status>,
    /// A new list of the tasks it waits for.
    pub blocked_by: Option<Vec<u64>>,
}

fn check_text(what: &str, text: &str, max: usize) -> Result<String, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err(format!("{what} is empty"));
    }
    let n = t.chars().count();
    if n > max {
        return Err(format!("{what} is {n} characters; at most {max}"));
    }
    Ok(t.to_string())
}

impl Record {
    /// A new, empty record.
    pub fn new() -> Record {
        Record {
            next_id: 1,
            ..Record::default()
        }
    }

    /// Replaces the checklist whole. Refused (nothing changed) when an item is empty or too long, there are too
    /// many, or more than one is in progress.
    pub fn set_todos(&mut self, todos: Vec<Todo>) -> Result<(), String> {
        if todos.len() > MAX_TODOS {
            return Err(format!(
                "the checklist has {} items; at most {MAX_TODOS}",
                todos.len()
            ));
        }
        let mut checked = Vec::with_capacity(todos.len());
        for (i, t) in todos.into_iter().enumerate() {
            checked.push(Todo {
                content: check_text(&format!("item {}", i + 1), &t.content, MAX_LINE_CHARS)?,
                status: t.status,
            });
        }
        let busy: Vec<usize> = checked
            .iter()
            .enumerate()
            .filter(|(_, t)| t.status == Status::InProgress)
            .map(|(i, _)| i + 1)
            .collect();
        if busy.len() > 1 {
            return Err(format!(
                "items {} are all in_progress; at most one item is in_progress at a time (mark the others pending \
                 or completed)",
                list(&busy)
            ));
        }
        self.todos = checked;
        Ok(())
    }

    /// The task with `id`.
    pub fn task(&self, id: u64) -> Result<&Task, String> {
        self.tasks
            .iter()
            .find(|t| t.id == id)
            .ok_or_else(|| self.unknown(id))
    }

    fn unknown(&self, id: u64) -> String {
        if self.tasks.is_empty() {
            format!("there is no task {id} (there are no tasks; create one first)")
        } else {
            let ids: Vec<u64> = self.tasks.iter().map(|t| t.id).collect();
            format!("there is no task {id} (the tasks are {})", list(&ids))
        }
    }

    /// Creates a task; its id.
    pub fn create_task(
        &mut self,
        title: &str,
        description: Option<&str>,
        status: Option<Status>,
        blocked_by: Vec<u64>,
    ) -> Result<u64, String> {
        if self.tasks.len() >= MAX_TASKS {
            return Err(format!(
                "there are {MAX_TASKS} tasks already; remove finished ones first"
            ));
        }
        let id = self.next_id;
        let task = Task {
            id,
            title: check_text("title", title, MAX_LINE_CHARS)?,
            description: match description {
                Some(d) if !d.trim().is_empty() => check_text("description", d, MAX_TEXT_CHARS)?,
                _ => String::new(),
            },
            status: status.unwrap_or_default(),
            blocked_by: dedup(blocked_by),
        };
        let mut next = self.clone();
        next.tasks.push(task);
        next.next_id = id + 1;
        next.check_tasks(id)?;
        *self = next;
        Ok(id)
    }

    /// Changes a task.
    pub fn update_task(&mut self, id: u64, change: TaskChange) -> Result<(), String> {
        let mut next = self.clone();
        let at = next
            .tasks
            .iter()
            .position(|t| t.id == id)
            .ok_or_else(|| self.unknown(id))?;
        let t = &mut next.tasks[at];
        if let Some(title) = change.title {
            t.title = check_text("title", &title, MAX_LINE_CHARS)?;
        }
        if let Some(d) = change.description {
            t.description = if d.trim().is_empty() {
                String::new()
            } else {
                check_text("description", &d, MAX_TEXT_CHARS)?
            };
        }
        if let Some(s) = change.status {
            t.status = s;
        }
        if let Some(b) = change.blocked_by {
            t.blocked_by = dedup(b);
        }
        next.check_tasks(id)?;
        *self = next;
        Ok(())
    }

    /// Removes a task; refused while another waits for it.
    pub fn remove_task(&mut self, id: u64) -> Result<Task, String> {
        let at = self
            .tasks
            .iter()
            .position(|t| t.id == id)
            .ok_or_else(|| self.unknown(id))?;
        let waiting: Vec<u64> = self
            .tasks
            .iter()
            .filter(|t| t.blocked_by.contains(&id))
            .map(|t| t.id)
            .collect();
        if !waiting.is_empty() {
            return Err(format!(
                "task {id} cannot be removed: task {} waits for it (take {id} out of their blocked_by first)",
                list(&waiting)
            ));
        }
        Ok(self.tasks.remove(at))
    }

    /// Checks the tasks after a change to task `changed`: every dependency exists and is not the task itself, the
    /// graph has no cycle, a started or completed task has all its dependencies completed, and no task that waits
    /// for `changed` is ahead of it.
    fn check_tasks(&self, changed: u64) -> Result<(), String> {
        let by_id: BTreeMap<u64, &Task> = self.tasks.iter().map(|t| (t.id, t)).collect();
        let mut graph: DiGraphMap<u64, ()> = DiGraphMap::new();
        for t in &self.tasks {
            graph.add_node(t.id);
            for d in &t.blocked_by {
                if *d == t.id {
                    return Err(format!("task {} cannot wait for itself", t.id));
                }
                if !by_id.contains_key(d) {
                    return Err(format!("task {} waits for {}", t.id, self.unknown(*d)));
                }
                graph.add_edge(*d, t.id, ());
            }
        }
        if let Some(mut cycle) = kosaraju_scc(&graph).into_iter().find(|c| c.len() > 1) {
            cycle.sort_unstable();
            return Err(format!(
                "that would make a dependency cycle: tasks {} wait for each other, so none could ever start",
                list(&cycle)
            ));
        }
        let t = by_id[&changed];
        if t.status != Status::Pending {
            let open: Vec<u64> = t
                .blocked_by
                .iter()
                .copied()
                .filter(|d| by_id[d].status != Status::Completed)
                .collect();
            if !open.is_empty() {
                return Err(format!(
                    "task {changed} cannot be {} before task {} {} completed",
                    t.status.name(),
                    list(&open),
                    if open.len() == 1 { "is" } else { "are" }
                ));
            }
        }
        if t.status != Status::Completed {
            let ahead: Vec<u64> = self
                .tasks
                .iter()
                .filter(|o| o.blocked_by.contains(&changed) && o.status != Status::Pending)
                .map(|o| o.id)
                .collect();
            if !ahead.is_empty() {
                return Err(format!(
                    "task {changed} cannot be {} while task {} that waits for it is already started or completed",
                    t.status.name(),
                    list(&ahead)
                ));
            }
        }
        Ok(())
    }

    /// Adds a note; the oldest is dropped beyond [`MAX_NOTES`] (returned, to say so).
    pub fn add_note(&mut self, kind: NoteKind, text: &str) -> Result<Option<Note>, String> {
        let text = check_text("the note", text, MAX_TEXT_CHARS)?;
        self.notes.push(Note { kind, text });
        Ok((self.notes.len() > MAX_NOTES).then(|| self.notes.remove(0)))
    }

    /// Sets (or, with empty text, clears) the goal.
    pub fn set_goal(&mut self, text: &str) -> Result<(), String> {
        self.goal = if text.trim().is_empty() {
            None
        } else {
            Some(check_text("the goal", text, MAX_LINE_CHARS)?)
        };
        Ok(())
    }

    /// Checks a record read back from storage as every change is checked: the checklist's items and statuses,
    /// unique task ids below `next_id`, the task graph (dependencies exist, no cycle, no task ahead of one it waits
    /// for), and the lengths of the notes and the goal.
    pub fn validate(&self) -> Result<(), String> {
        self.clone().set_todos(self.todos.clone())?;
        if self.tasks.len() > MAX_TASKS {
            return Err(format!("{} tasks; at most {MAX_TASKS}", self.tasks.len()));
        }
        let mut ids = std::collections::BTreeSet::new();
        for t in &self.tasks {
            if !ids.insert(t.id) || t.id == 0 || t.id >= self.next_id {
                return Err(format!(
                    "task id {} is repeated, zero, or not below nextId {}",
                    t.id, self.next_id
                ));
            }
            check_text(&format!("task {} title", t.id), &t.title, MAX_LINE_CHARS)?;
            if t.description.chars().count() > MAX_TEXT_CHARS {
                return Err(format!("task {} description is too long", t.id));
            }
        }
        for t in &self.tasks {
            self.check_tasks(t.id)?;
        }
        if self.notes.len() > MAX_NOTES {
            return Err(format!("{} notes; at most {MAX_NOTES}", self.notes.len()));
        }
        for n in &self.notes {
            check_text("a note", &n.text, MAX_TEXT_CHARS)?;
        }
        if let Some(g) = &self.goal {
            check_text("the goal", g, MAX_LINE_CHARS)?;
        }
        Ok(())
    }

    /// True when nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.goal.is_none()
            && self.todos.is_empty()
            && self.tasks.is_empty()
            && self.notes.is_empty()
    }

    /// The checklist items and tasks not completed, as lines (for the supervisor and the user).
    pub fn unfinished(&self) -> Vec<String> {
        let todos = self
            .todos
            .iter()
            .filter(|t| t.status != Status::Completed)
            .map(|t| format!("{} {}", t.status.mark(), t.content));
        let tasks = self
            .tasks
            .iter()
            .filter(|t| t.status != Status::Completed)
            .map(|t| format!("{} task {}: {}", t.status.mark(), t.id, t.title));
        todos.chain(tasks).collect()
    }

    /// The checklist as text: one `[ ]` / `[~]` / `[x]` line per item.
    pub fn render_todos(&self) -> String {
        if self.todos.is_empty() {
            return "(the checklist is empty)".to_string();
        }
        self.todos
            .iter()
            .enumerate()
            .map(|(i, t)| format!("{}. {} {}", i + 1, t.status.mark(), t.content))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// One task as text.
    pub fn render_task(&self, t: &Task) -> String {
        let mut s = format!("{} task {}: {}", t.status.mark(), t.id, t.title);
        if !t.blocked_by.is_empty() {
            let open: Vec<u64> = t
                .blocked_by
                .iter()
                .copied()
                .filter(|d| self.task(*d).is_ok_and(|o| o.status != Status::Completed))
                .collect();
            s.push_str(&format!(" (after {}", list(&t.blocked_by)));
            if !open.is_empty() && t.status == Status::Pending {
                s.push_str(&format!("; blocked by {}", list(&open)));
            }
            s.push(')');
        }
        if !t.description.is_empty() {
            for line in t.description.lines() {
                s.push_str("\n    ");
                s.push_str(line);
            }
        }
        s
    }

    /// The whole record as text (what `todo_read` returns, and what a compaction keeps).
    pub fn render(&self) -> String {
        let mut parts = Vec::new();
        if let Some(g) = &self.goal {
            parts.push(format!("Goal: {g}"));
        }
        parts.push(format!("Checklist:\n{}", self.render_todos()));
        if !self.tasks.is_empty() {
            let tasks: Vec<String> = self.tasks.iter().map(|t| self.render_task(t)).collect();
            parts.push(format!("Tasks:\n{}", tasks.join("\n")));
        }
        if !self.notes.is_empty() {
            let notes: Vec<String> = self
                .notes
                .iter()
                .map(|n| format!("- {}: {}", n.kind.name(), n.text))
                .collect();
            parts.push(format!("Notes:\n{}", notes.join("\n")));
        }
        parts.join("\n\n")
    }
}

fn dedup(mut ids: Vec<u64>) -> Vec<u64> {
    let mut seen = std::collections::BTreeSet::new();
    ids.retain(|i| seen.insert(*i));
    ids
}

fn list<T: std::fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(T::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn todo(content: &str, status: Status) -> Todo {
        Todo {
            content: content.into(),
            status,
        }
    }

    #[test]
    fn the_checklist_is_replaced_whole_and_validated() {
        let mut r = Record::new();
        r.set_todos(vec![
            todo("read the code", Status::Completed),
            todo("fix the bug", Status::InProgress),
            todo("run the tests", Status::Pending),
        ])
        .unwrap();
        assert_eq!(
            r.render_todos(),
            "1. [x] read the code\n2. [~] fix the bug\n3. [ ] run the tests"
        );
        let before = r.clone();
        let e = r
            .set_todos(vec![
                todo("a", Status::InProgress),
                todo("b", Status::Pending),
                todo("c", Status::InProgress),
            ])
            .unwrap_err();
        assert!(e.contains("items 1, 3 are all in_progress"), "{e}");
        assert!(r
            .set_todos(vec![
                todo("a", Status::Pending),
                todo("  ", Status::Pending)
            ])
            .unwrap_err()
            .contains("item 2 is empty"));
        assert_eq!(r, before, "a refused change leaves the record as it was");
        assert_eq!(
            r.unfinished(),
            ["[~] fix the bug", "[ ] run the tests"].map(String::from)
        );
    }

    #[test]
    fn tasks_form_a_dag_and_run_in_dependency_order() {
        let mut r = Record::new();
        let a = r.create_task("design", None, None, vec![]).unwrap();
        let b = r
            .create_task("build", Some("the parser"), None, vec![a])
            .unwrap();
        let c = r.create_task("ship", None, None, vec![b]).unwrap();
        assert_eq!((a, b, c), (1, 2, 3));
        // a cycle is refused, naming the tasks on it
        let e = r
            .update_task(
                a,
                TaskChange {
                    blocked_by: Some(vec![c]),
                    ..TaskChange::default()
                },
            )
            .unwrap_err();
        assert!(e.contains("tasks 1, 2, 3 wait for each other"), "{e}");
        assert!(r
            .update_task(
                a,
                TaskChange {
                    blocked_by: Some(vec![a]),
                    ..TaskChange::default()
                }
            )
            .unwrap_err()
            .contains("cannot wait for itself"));
        // starting before the dependencies are done is refused
        let start = |s| TaskChange {
            status: Some(s),
            ..TaskChange::default()
        };
        let e = r.update_task(b, start(Status::InProgress)).unwrap_err();
        assert_eq!(e, "task 2 cannot be in_progress before task 1 is completed");
        assert!(r
            .create_task("early", None, Some(Status::Completed), vec![a, b])
            .unwrap_err()
            .contains("before task 1, 2 are completed"));
        r.update_task(a, start(Status::Completed)).unwrap();
        r.update_task(b, start(Status::InProgress)).unwrap();
        // reopening a task whose dependent has started is refused
        let e = r.update_task(a, start(Status::Pending)).unwrap_err();
        assert!(e.contains("task 2 that waits for it"), "{e}");
        // unknown ids and removals that would strand a dependent
        assert!(r
            .create_task("x", None, None, vec![9])
            .unwrap_err()
            .contains("there is no task 9 (the tasks are 1, 2, 3"));
        assert!(r
            .remove_task(b)
            .unwrap_err()
            .contains("task 3 waits for it"));
        r.remove_task(c).unwrap();
        r.remove_task(b).unwrap();
        assert_eq!(r.tasks.len(), 1);
        // ids are never reused (3 was removed), and a refused create took none
        assert_eq!(r.create_task("again", None, None, vec![]).unwrap(), 4);
    }

    #[test]
    fn notes_and_the_goal_render_with_the_rest() {
        let mut r = Record::new();
        r.set_goal("make the parser fast").unwrap();
        r.add_note(NoteKind::Decision, "use a lookup table")
            .unwrap();
        r.add_note(NoteKind::parse("changed_path").unwrap(), "src/parse.rs")
            .unwrap();
        r.create_task("bench", Some("criterion\nside by side"), None, vec![])
            .unwrap();
        r.create_task("tune", None, None, vec![1]).unwrap();
        assert_eq!(
            r.render(),
            "Goal: make the parser fast\n\nChecklist:\n(the checklist is empty)\n\nTasks:\n[ ] task 1: bench\n    \
             criterion\n    side by side\n[ ] task 2: tune (after 1; blocked by 1)\n\nNotes:\n- decision: use a \
             lookup table\n- changed_path: src/parse.rs"
        );
        for _ in 0..MAX_NOTES - 2 {
            assert_eq!(r.add_note(NoteKind::Finding, "x").unwrap(), None);
        }
        let dropped = r.add_note(NoteKind::Finding, "y").unwrap().unwrap();
        assert_eq!(dropped.text, "use a lookup table");
        assert_eq!(r.notes.len(), MAX_NOTES);
        assert!(NoteKind::parse("gossip").is_none());
        for k in NOTE_KINDS {
            assert_eq!(NoteKind::parse(k).unwrap().name(), k);
        }
    }

    #[test]
    fn the_stored_form_round_trips() {
        let mut r = Record::new();
        r.set_goal("g").unwrap();
        r.set_todos(vec![todo("a", Status::InProgress)]).unwrap();
        r.create_task("t", None, None, vec![]).unwrap();
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.contains("\"nextId\":2"), "{text}");
        let back: Record = serde_json::from_str(&text).unwrap();
        assert_eq!(back, r);
        assert!(serde_json::from_str::<Record>("{\"todo\": []}").is_err());
        assert_eq!(back.validate(), Ok(()));
        // a stored record is checked like a change: a cycle, or two items in progress, is refused
        let mut cyclic = back.clone();
        cyclic.create_task("u", None, None, vec![1]).unwrap();
        cyclic.tasks[0].blocked_by = vec![2];
        assert!(cyclic.validate().unwrap_err().contains("dependency cycle"));
        let mut busy = back;
        busy.todos.push(todo("b", Status::InProgress));
        assert!(busy.validate().unwrap_err().contains("in_progress"));
    }
}
