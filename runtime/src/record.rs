//! The working record in the agent's requests and updates: what a compaction keeps, the plan published to hosts, and
//! the system prompt's instructions for the record tools. The record itself and its tools are `loom_tools::record`'s.

use loom_protocol::update::{Plan, PlanEntry, SessionUpdate};
use loom_tools::record::{Record, Status};

use crate::session::compactor::opening_summary;

/// After a compaction (the history opens with its summary), the record is appended to that summary: the model keeps
/// its checklist, tasks, notes and goal however much of the conversation was summarised. Nothing happens to a
/// history without a summary (the record tools' own results are still in it) or when the record is empty.
pub(crate) fn keep_through_compaction(events: &mut [SessionUpdate], record: &Record) {
    if record.is_empty() {
        return;
    }
    let Some(first) = opening_summary(events) else {
        return;
    };
    let mut text = first.content.as_text().to_string();
    text.push_str(&format!(
        "\n\n<working-record note=\"kept through the compaction; todo_read shows it whole\">\n{}\n</working-record>",
        record.render()
    ));
    first.content = crate::update::Content::text(text);
}

/// The record as an ACP plan: the checklist items in order, then the tasks not removed (`task N: title`).
pub(crate) fn plan_of(record: &Record) -> Plan {
    let entry = |content: String, status: Status| PlanEntry {
        content,
        priority: "medium".into(),
        status: status.name().into(),
    };
    let todos = record
        .todos
        .iter()
        .map(|t| entry(t.content.clone(), t.status));
    let tasks = record
        .tasks
        .iter()
        .map(|t| entry(format!("task {}: {}", t.id, t.title), t.status));
    Plan {
        entries: todos.chain(tasks).collect(),
    }
}

/// The system prompt section for an agent with record tools (`names`: its instances of `todo_read`, `todo_write` /
/// `update_plan`, `task`, `note`, by built-in), `None` when it has none.
pub(crate) fn prompt_section(names: &[(&str, String)]) -> Option<String> {
    let of = |b: &str| names.iter().find(|(u, _)| *u == b).map(|(_, i)| i.as_str());
    let write = of("todo_write").or(of("update_plan"));
    if names.is_empty() {
        return None;
    }
    let mut s = String::from(
        "# Working record\n\nYou keep a working record of this session outside the conversation; it survives \
         compaction and resume.",
    );
    match (of("todo_read"), write) {
        (Some(read), Some(write)) => s.push_str(&format!(
            " Before multi-step work, call {read}, then {write} with every requirement the user stated and every \
             verification step (tests, checks) as a checklist item; keep exactly one item in_progress while you \
             work and mark each completed as soon as it is done."
        )),
        (None, Some(write)) => s.push_str(&format!(
            " Before multi-step work, call {write} with every requirement and verification step as a checklist \
             item; keep one item in_progress and mark each completed as soon as it is done."
        )),
        (Some(read), None) => s.push_str(&format!(" {read} shows the record.")),
        (None, None) => {}
    }
    if let Some(task) = of("task") {
        s.push_str(&format!(
            " Use {task} for work with dependencies (blocked_by): a task starts only after the tasks it waits for \
             are completed."
        ));
    }
    if let Some(note) = of("note") {
        s.push_str(&format!(
            " Use {note} to record findings, changed paths, decisions, failed attempts, evidence, blockers and next \
             actions as you go."
        ));
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::update::{Chunk, Content};
    use loom_tools::record::Todo;

    fn user(id: &str, text: &str) -> SessionUpdate {
        SessionUpdate::UserMessageChunk(Chunk {
            content: Content::text(text),
            message_id: Some(id.into()),
        })
    }

    #[test]
    fn the_record_joins_a_compaction_summary_and_nothing_else() {
        let mut r = Record::new();
        let mut plain = vec![user("loom-compaction-1", "summary")];
        keep_through_compaction(&mut plain, &r);
        assert_eq!(plain, vec![user("loom-compaction-1", "summary")]);
        r.set_todos(vec![Todo {
            content: "fix".into(),
            status: Status::InProgress,
        }])
        .unwrap();
        r.create_task("ship", None, None, vec![]).unwrap();
        let mut events = vec![user("loom-compaction-1", "summary"), user("u1", "next")];
        keep_through_compaction(&mut events, &r);
        let SessionUpdate::UserMessageChunk(c) = &events[0] else {
            panic!()
        };
        assert!(
            c.content
                .as_text()
                .starts_with("summary\n\n<working-record")
                && c.content.as_text().contains("1. [~] fix"),
            "{c:?}"
        );
        let mut no_summary = vec![user("u1", "hello")];
        keep_through_compaction(&mut no_summary, &r);
        assert_eq!(no_summary, vec![user("u1", "hello")]);
        let plan = plan_of(&r);
        let shown: Vec<(&str, &str)> = plan
            .entries
            .iter()
            .map(|e| (e.content.as_str(), e.status.as_str()))
            .collect();
        assert_eq!(shown, [("fix", "in_progress"), ("task 1: ship", "pending")]);
        let wire = serde_json::to_value(SessionUpdate::Plan(plan)).unwrap();
        assert_eq!(wire["sessionUpdate"], "plan");
        assert_eq!(wire["entries"][0]["priority"], "medium");
    }

    #[test]
    fn the_prompt_names_the_instances_the_agent_has() {
        assert_eq!(prompt_section(&[]), None);
        let s = prompt_section(&[
            ("todo_read", "todo_read".into()),
            ("update_plan", "plan".into()),
            ("note", "note".into()),
        ])
        .unwrap();
        assert!(
            s.contains("call todo_read, then plan with every requirement"),
            "{s}"
        );
        assert!(s.contains("Use note to record findings"), "{s}");
        assert!(!s.contains("blocked_by"), "{s}");
    }
}
