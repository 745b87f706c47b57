//! The background agent tools: `background_spawn {agent, task}` starts a subagent profile on a task and returns its
//! id at once; `background_list {}` shows each child's status and, once finished, its report;
//! `background_message {id, message}` steers a running child; `background_kill {id}` cancels one.
//!
//! A background child is built exactly as `delegate` builds its child (the profile's narrowed manifest, the ceiling
//! check, a session of its own in memory, this agent's permission rules, no delegating tool) and is booted before
//! `background_spawn` returns, so an unknown profile or a child that cannot boot fails that call. The children and
//! their reports live in the agent's [`BackgroundTable`](crate::background::BackgroundTable): finished reports enter
//! the agent's history at its next step boundary (or its next turn), and its session's end cancels what still runs.
//! `background_spawn` is granted like `delegate` (`agents`); the other three act only on this agent's own children.

use loom_kernel::{Row, Value};

use super::delegate::{discard_worktree, worktree_json, worktree_note, GrantedProfiles};
use super::subagent::{boot_child, ChildRun, ChildStart, SpawnEnv};
use crate::background::{BackgroundTable, Ended};
use crate::model::ToolSpec;
use crate::profiles::FoundProfile;
use crate::tools::{check_fields, str_field, Prepared, Tool, ToolEnv, ToolOutput};
use crate::update::{ToolKind, TurnStop};

/// The longest `background_list` waits for a child to finish.
pub const MAX_WAIT_MS: u64 = 60_000;

/// Which background tool an instance is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackgroundOp {
    /// `background_spawn`.
    Spawn,
    /// `background_list`.
    List,
    /// `background_message`.
    Message,
    /// `background_kill`.
    Kill,
}

impl BackgroundOp {
    /// The op of built-in `underlying`, if it is one of these.
    pub fn of(underlying: &str) -> Option<BackgroundOp> {
        Some(match underlying {
            "background_spawn" => BackgroundOp::Spawn,
            "background_list" => BackgroundOp::List,
            "background_message" => BackgroundOp::Message,
            "background_kill" => BackgroundOp::Kill,
            _ => return None,
        })
    }

    fn builtin(self) -> &'static str {
        match self {
            BackgroundOp::Spawn => "background_spawn",
            BackgroundOp::List => "background_list",
            BackgroundOp::Message => "background_message",
            BackgroundOp::Kill => "background_kill",
        }
    }
}

/// One background tool instance.
pub struct BackgroundTool {
    op: BackgroundOp,
    env: ToolEnv,
    table: BackgroundTable,
    /// `background_spawn` only: how children boot and which profiles the grant names.
    spawn: Option<(SpawnEnv, GrantedProfiles)>,
}

impl BackgroundTool {
    /// The tool for one granted instance. `background_spawn` needs the spawn environment and the profiles found; a
    /// profile its grant names that cannot be used is an error (boot stops naming it).
    pub fn new(
        op: BackgroundOp,
        env: ToolEnv,
        table: BackgroundTable,
        spawn: SpawnEnv,
        found: &[FoundProfile],
    ) -> Result<BackgroundTool, String> {
        let spawn = match op {
            BackgroundOp::Spawn => {
                let profiles = GrantedProfiles::new(&env.grant, found)?;
                Some((spawn, profiles))
            }
            _ => None,
        };
        Ok(BackgroundTool {
            op,
            env,
            table,
            spawn,
        })
    }

    fn id_input(&self, input: &serde_json::Value, fields: &[&str]) -> Result<String, String> {
        let tool = &self.env.instance;
        check_fields(input, tool, fields)?;
        Ok(str_field(input, tool, "id")?.to_string())
    }
}

/// How a background child's turn ended, and its report text.
fn report(
    tool: &str,
    name: &str,
    outcome: crate::agent::TurnOutcome,
    closed: Result<(), crate::session::SessionError>,
) -> (Ended, String) {
    let ended = match (outcome.stop, &outcome.error) {
        (TurnStop::Cancelled, _) => Ended::Killed,
        (TurnStop::MaxTurnRequests, _) => Ended::Incomplete,
        (TurnStop::EndTurn, None) => Ended::Complete,
        _ => Ended::Failed,
    };
    let run = ChildRun {
        outcome,
        notes: Vec::new(),
        closed,
    };
    let out = run.into_output(tool, name, name, true);
    let ended = if out.is_error && ended == Ended::Complete {
        Ended::Failed
    } else {
        ended
    };
    (ended, out.text)
}

impl Tool for BackgroundTool {
    fn name(&self) -> &str {
        &self.env.instance
    }

    fn builtin(&self) -> Option<&'static str> {
        Some(self.op.builtin())
    }

    fn kind(&self) -> ToolKind {
        match self.op {
            BackgroundOp::List => ToolKind::Read,
            _ => ToolKind::Other,
        }
    }

    fn spec(&self) -> ToolSpec {
        let (description, schema) = match (self.op, &self.spawn) {
            (BackgroundOp::Spawn, Some((_, profiles))) => (
                format!(
                    "Start a subagent on one task in the background and get its id at once; go on with your own \
                     work. Its report reaches you when it finishes (background_list shows its status). It sees only \
                     the task text, works with at most your tools and authority, and cannot delegate further. \
                     Agents: {}.",
                    profiles.listing()
                ),
                profiles.schema(),
            ),
            (BackgroundOp::List, _) => (
                format!(
                    "List your background agents: id, profile, task, status (running, complete, incomplete, failed, \
                     killed) and, once finished, the report. wait_ms (up to {MAX_WAIT_MS}) first waits until one of \
                     them finishes."
                ),
                serde_json::json!({
                    "type": "object",
                    "properties": { "wait_ms": { "type": "integer", "minimum": 0, "maximum": MAX_WAIT_MS } },
                    "additionalProperties": false
                }),
            ),
            (BackgroundOp::Message, _) => (
                "Send a running background agent a message: it enters that agent's conversation at its next step. \
                 Fails for an agent that has finished."
                    .to_string(),
                serde_json::json!({
                    "type": "object",
                    "properties": {
                        "id": { "type": "string", "description": "The id background_spawn returned (bg-1)." },
                        "message": { "type": "string" },
                    },
                    "required": ["id", "message"],
                    "additionalProperties": false
                }),
            ),
            _ => (
                "Cancel a running background agent; its report (what it had so far) follows as for any finished \
                 agent."
                    .to_string(),
                serde_json::json!({
                    "type": "object",
                    "properties": {
                        "id": { "type": "string", "description": "The id background_spawn returned (bg-1)." },
                    },
                    "required": ["id"],
                    "additionalProperties": false
                }),
            ),
        };
        ToolSpec {
            name: self.env.instance.clone(),
            description,
            input_schema: schema,
        }
    }

    fn prepare(&self, input: &serde_json::Value) -> Result<Prepared, String> {
        let tool = self.env.instance.clone();
        let table = self.table.clone();
        match self.op {
            BackgroundOp::Spawn => {
                let Some((spawn, profiles)) = self.spawn.clone() else {
                    return Err(format!("{tool}: built without its profiles (a bug)"));
                };
                let picked = profiles.pick(&tool, input)?;
                Ok(crate::tools::CallHead::args(
                    &tool,
                    Row::from_pairs([("agents", Value::strs([picked.name.as_str()]))]),
                )
                .then(Box::new(move |_auth, ctx| {
                    Box::pin(async move {
                        let slot = match table.reserve(&picked.name, &picked.task) {
                            Ok(s) => s,
                            Err(e) => return ToolOutput::error(format!("{tool}: {e}; nothing was started")),
                        };
                        let child = picked.child(&spawn.parent);
                        let placed = match picked.isolate(&tool, &child, &spawn, &ctx.cancel).await {
                            Ok(p) => p,
                            Err(e) => return ToolOutput::error(e),
                        };
                        let place = placed.as_ref().map(|(p, _)| p);
                        let booted =
                            match boot_child(&tool, &picked.name, child, &spawn, ChildStart { history: None, place }) {
                                Ok(b) => b,
                                Err(refused) => {
                                    let mut out = *refused;
                                    if let Some((_, rec)) = &placed {
                                        out.text.push_str(&discard_worktree(rec, &spawn.opts.sandbox).await);
                                    }
                                    return out;
                                }
                            };
                        let name = picked.name.clone();
                        let t = tool.clone();
                        let note = placed.as_ref().map(|(_, rec)| worktree_note(rec));
                        let id = slot.start(booted.agent, picked.task, move |outcome, closed| {
                            let (ended, mut text) = report(&t, &name, outcome, closed);
                            text.push_str(note.as_deref().unwrap_or_default());
                            (ended, text)
                        });
                        let mut text = format!(
                            "started {id} ({}) in the background; its report reaches you when it finishes \
                             (background_list shows its status)",
                            picked.name
                        );
                        if let Some((_, rec)) = &placed {
                            text.push_str(&worktree_note(rec));
                        }
                        let mut out = ToolOutput::ok(text);
                        out.raw_output = Some(serde_json::json!({
                            "id": id,
                            "agent": picked.name,
                            "notes": booted.notes,
                            "worktree": placed.as_ref().map(|(_, rec)| worktree_json(rec)),
                        }));
                        out
                    })
                })))
            }
            BackgroundOp::List => {
                check_fields(input, &tool, &["wait_ms"])?;
                let wait = match input.get("wait_ms") {
                    None | Some(serde_json::Value::Null) => 0,
                    Some(v) => v.as_u64().filter(|n| *n <= MAX_WAIT_MS).ok_or_else(|| {
                        format!("{tool}: wait_ms must be an integer from 0 to {MAX_WAIT_MS}")
                    })?,
                };
                Ok(
                    crate::tools::CallHead::whole_tool(&tool).then(Box::new(move |_auth, ctx| {
                        Box::pin(async move {
                            if wait > 0 {
                                table
                                    .wait_for_an_end(
                                        std::time::Duration::from_millis(wait),
                                        &ctx.cancel,
                                    )
                                    .await;
                            }
                            let rows = table.list();
                            let mut out = ToolOutput::ok(if rows.is_empty() {
                                "no background agents".to_string()
                            } else {
                                rows.iter()
                                    .map(|r| {
                                        let mut line = format!(
                                            "{} ({}): {} — task: {}",
                                            r.id,
                                            r.profile,
                                            r.status,
                                            one_line(&r.task)
                                        );
                                        if let Some(rep) = &r.report {
                                            line.push_str(&format!("\nreport:\n{rep}"));
                                        }
                                        line
                                    })
                                    .collect::<Vec<_>>()
                                    .join("\n\n")
                            });
                            out.raw_output = Some(serde_json::Value::Array(
                                rows.iter()
                                    .map(|r| {
                                        serde_json::json!({
                                            "id": r.id,
                                            "agent": r.profile,
                                            "status": r.status,
                                            "messages": r.messages,
                                            "report": r.report,
                                        })
                                    })
                                    .collect(),
                            ));
                            out
                        })
                    })),
                )
            }
            BackgroundOp::Message => {
                let id = self.id_input(input, &["id", "message"])?;
                let message = str_field(input, &tool, "message")?.to_string();
                if message.trim().is_empty() {
                    return Err(format!("{tool}: message is empty"));
                }
                Ok(
                    crate::tools::CallHead::whole_tool(&tool).then(Box::new(move |_auth, _ctx| {
                        Box::pin(async move {
                            match table.message(&id, &message) {
                                Ok(()) => ToolOutput::ok(format!(
                                "sent to {id}: it enters that agent's conversation at its next step (if it finishes \
                                 first, it never reads it; its report shows what it did)"
                            )),
                                Err(e) => ToolOutput::error(format!("{tool}: {e}")),
                            }
                        })
                    })),
                )
            }
            BackgroundOp::Kill => {
                let id = self.id_input(input, &["id"])?;
                Ok(
                    crate::tools::CallHead::whole_tool(&tool).then(Box::new(move |_auth, _ctx| {
                        Box::pin(async move {
                            match table.kill(&id) {
                                Ok(()) => ToolOutput::ok(format!(
                                "cancelling {id}: it stops at its next step and its report follows"
                            )),
                                Err(e) => ToolOutput::error(format!("{tool}: {e}")),
                            }
                        })
                    })),
                )
            }
        }
    }
}

/// `s` on one line, at most 120 characters.
fn one_line(s: &str) -> String {
    let flat: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > 120 {
        format!("{}…", flat.chars().take(119).collect::<String>())
    } else {
        flat
    }
}
