//! `spawn_subagent`: runs a sub-agent for one turn and returns its final message.
//!
//! Two modes, as the grant says. A row with a `manifest` kind names the sub-agent explicitly (inline table, or a path
//! relative to the parent manifest's directory): the grant *is* the delegated authority. A grant without one (`"*"`,
//! or rows without `manifest`) is a self-copy: the parent's manifest with every `spawn_subagent` instance stripped
//! from `[tools]` and `[capabilities]`, so recursion bottoms out one level deep.
//!
//! The kernel decides twice before anything boots: [`decide`](loom_kernel::decide) picks the grant row that covers
//! the chosen sub-manifest, and [`ceiling_excess`] refuses a sub-manifest whose effective ceiling exceeds the
//! parent's — checked at spawn time, because a sub-manifest on disk may have changed since boot.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use loom_kernel::{
    ceiling_excess, manifest_from_table, subagent_choices, Authority, Manifest, PathCtx, Row,
    SubagentChoice, MAX_DEPTH,
};

use super::options::{BootFn, BootOptions, HarnessCell, Lineage};
use crate::load::{env_map, load_manifest, Loaded};
use crate::model::ToolSpec;
use crate::tools::{
    check_fields, str_field, Prepared, Progress, Tool, ToolCtx, ToolEnv, ToolOutput,
};
use crate::update::{SessionUpdate, ToolKind};
use loom_protocol::Capacity;

const UNDERLYING: &str = "spawn_subagent";

/// What the tool needs to boot sub-agents: the parent's manifest and the options it booted with.
#[derive(Clone)]
pub struct SpawnEnv {
    /// The parent manifest.
    pub parent: Arc<Loaded>,
    /// How the parent's grants resolve (its working directory).
    pub ctx: PathCtx,
    /// The parent's boot options (secrets, sandbox, clock, working directory, lineage).
    pub opts: BootOptions,
    /// The parent's harness.
    pub harness: HarnessCell,
    /// The parent's authority files (its own and its ancestors').
    pub authority: Arc<Authority>,
    /// The sha-256 of each sub-manifest file as it was at the parent's boot: a file that changed since is refused.
    pub submanifests: Arc<BTreeMap<PathBuf, [u8; 32]>>,
    /// How a sub-agent boots (boot passes its own entry point).
    pub boot: BootFn,
}

/// The `spawn_subagent` tool.
pub struct SpawnSubagentTool {
    env: ToolEnv,
    spawn: SpawnEnv,
    /// The choices the grant offers, with the name the model picks them by.
    choices: Vec<(String, SubagentChoice)>,
}

impl SpawnSubagentTool {
    /// The tool for one granted instance.
    pub fn new(env: ToolEnv, spawn: SpawnEnv) -> SpawnSubagentTool {
        let choices = subagent_choices(&env.grant, &spawn.parent.manifest.agent.name);
        SpawnSubagentTool {
            env,
            spawn,
            choices,
        }
    }

    fn pick(&self, input: &serde_json::Value) -> Result<&(String, SubagentChoice), String> {
        let tool = &self.env.instance;
        match input.get("agent") {
            None | Some(serde_json::Value::Null) if self.choices.len() == 1 => Ok(&self.choices[0]),
            None | Some(serde_json::Value::Null) => Err(format!(
                "{tool}: this grant offers several sub-agents; say which with \"agent\" (one of {})",
                self.names()
            )),
            Some(serde_json::Value::String(want)) => self
                .choices
                .iter()
                .find(|(n, _)| n == want)
                .ok_or_else(|| format!("{tool}: no sub-agent named {want:?} is granted (granted: {})", self.names())),
            Some(_) => Err(format!("{tool}: agent must be a string")),
        }
    }

    fn names(&self) -> String {
        let names: Vec<String> = self.choices.iter().map(|(n, _)| format!("{n:?}")).collect();
        if names.is_empty() {
            "none".into()
        } else {
            names.join(", ")
        }
    }
}

/// The name an explicit sub-agent is picked by: its agent name when written inline, else its path.
impl Tool for SpawnSubagentTool {
    fn name(&self) -> &str {
        &self.env.instance
    }

    fn builtin(&self) -> Option<&'static str> {
        Some("spawn_subagent")
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Other
    }

    fn spec(&self) -> ToolSpec {
        let mut properties = serde_json::json!({
            "prompt": { "type": "string", "description": "The user message to send to the sub-agent." }
        });
        let mut required = vec!["prompt"];
        if self.choices.len() > 1 {
            let names: Vec<&str> = self.choices.iter().map(|(n, _)| n.as_str()).collect();
            properties["agent"] = serde_json::json!({
                "type": "string",
                "enum": names,
                "description": "Which granted sub-agent to run."
            });
            required.push("agent");
        }
        ToolSpec {
            name: self.env.instance.clone(),
            description: "Run a sub-agent for one turn with the given prompt and return its final message. The \
                          sub-agent works with its own tools and authority, never more than yours."
                .into(),
            input_schema: serde_json::json!({
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": false
            }),
        }
    }

    fn wants_history(&self) -> bool {
        true
    }

    fn prepare(&self, input: &serde_json::Value) -> Result<Prepared, String> {
        let tool = self.env.instance.clone();
        check_fields(input, &tool, &["prompt", "agent"])?;
        let prompt = str_field(input, &tool, "prompt")?.to_string();
        let (name, choice) = self.pick(input)?.clone();
        // the kernel picks the row that grants this sub-agent: the `manifest` kind for an explicit one, nothing for a
        // self-copy
        let mut want = Row::default();
        if let SubagentChoice::Explicit(v) = &choice {
            want.insert("manifest", v.clone());
        }
        let spawn = self.spawn.clone();
        Ok(
            crate::tools::CallHead::args(&tool, want).then(Box::new(move |_auth, ctx| {
                Box::pin(async move { run(&tool, &name, &choice, &prompt, &spawn, ctx).await })
            })),
        )
    }
}

/// Resolves, checks and boots the sub-agent, then runs one turn.
async fn run(
    tool: &str,
    name: &str,
    choice: &SubagentChoice,
    prompt: &str,
    spawn: &SpawnEnv,
    ctx: ToolCtx,
) -> ToolOutput {
    let depth = spawn.opts.lineage.depth + 1;
    if depth > MAX_DEPTH {
        return ToolOutput::error(format!(
            "{tool}: refusing to spawn {name:?}: sub-agents are nested {depth} deep (the limit is {MAX_DEPTH}); \
             a sub-manifest probably spawns itself"
        ));
    }
    let mut child = match resolve(tool, choice, spawn) {
        Ok(c) => c,
        Err(e) => return ToolOutput::error(e),
    };
    // the parent's deny and ask rules and PreToolUse hooks bind the sub-agent too (a self-copy has them already)
    if matches!(choice, SubagentChoice::Explicit(_)) {
        loom_kernel::inherit_policy(
            &spawn.parent.manifest,
            &spawn.parent.dir.display().to_string(),
            &mut child.manifest,
        );
    }
    let history = fork_snapshot(ctx.history.as_deref().unwrap_or(&[]));
    let run = match run_child(
        tool,
        name,
        child,
        prompt,
        spawn,
        &ctx,
        ChildStart {
            history: Some(history),
            place: None,
        },
    )
    .await
    {
        Ok(r) => r,
        Err(refused) => return refused,
    };
    run.into_output(tool, name, &format!("the sub-agent {name:?}"), false)
}

/// What one child agent's turn gave.
pub(super) struct ChildRun {
    /// The turn's outcome.
    pub outcome: crate::agent::TurnOutcome,
    /// What its boot said.
    pub notes: Vec<String>,
    /// Closing its session.
    pub closed: Result<(), crate::session::SessionError>,
}

impl ChildRun {
    /// The call's result: the child's last answer, or why there is none (`who` names the child in messages). With
    /// `incomplete_ok`, a child that used up its requests gives its last answer marked incomplete instead of an
    /// error.
    pub(super) fn into_output(
        self,
        tool: &str,
        name: &str,
        who: &str,
        incomplete_ok: bool,
    ) -> ToolOutput {
        let out = self.outcome;
        let raw = serde_json::json!({
            "agent": name,
            "stop": format!("{:?}", out.stop),
            "complete": out.stop == loom_protocol::TurnStop::EndTurn,
            "notes": self.notes,
        });
        let mut result = match (&out.error, out.stop) {
            (_, loom_protocol::TurnStop::Cancelled) => ToolOutput::interrupted(&out.final_text),
            (_, loom_protocol::TurnStop::MaxTurnRequests) if incomplete_ok => ToolOutput::ok(format!(
                "[incomplete: {name} used all of its requests (maxTurns) before it finished; its last answer \
                 follows]\n{}",
                out.final_text
            )),
            (Some(e), _) => ToolOutput::error(format!("{tool}: {who} failed: {e}")),
            (None, _) => ToolOutput::ok(out.final_text),
        };
        if let Err(e) = self.closed {
            result = ToolOutput::error(format!(
                "{tool}: {who} could not close its session: {e}\n{}",
                result.text
            ));
        }
        result.raw_output = Some(raw);
        result
    }
}

/// Checks that `child` holds no more authority than the parent (the kernel's ceiling comparison), boots it one
/// level deeper (starting from `history` when given) and runs one turn of `prompt`, its streamed text forwarded as
/// this call's progress. `Err`: the refusal or boot failure, as the call's result (nothing ran).
pub(super) async fn run_child(
    tool: &str,
    name: &str,
    child: Loaded,
    prompt: &str,
    spawn: &SpawnEnv,
    ctx: &ToolCtx,
    start: ChildStart<'_>,
) -> Result<ChildRun, ToolOutput> {
    let booted = boot_child(tool, name, child, spawn, start).map_err(|e| *e)?;
    let agent = booted.agent;
    // the sub-agent's streamed text becomes this call's progress
    let sub = agent.subscribe(Capacity::Bounded(crate::bus::DEFAULT_CAPACITY));
    let progress = ctx.progress.clone();
    let forward = tokio::spawn(async move {
        let mut text = String::new();
        while let Some(u) = sub.recv().await {
            if let SessionUpdate::AgentMessageChunk(c) = &u {
                text.push_str(c.content.as_text());
                progress(Progress {
                    content: tail(&text, 4096).to_string(),
                    raw_output: None,
                    terminal: None,
                });
            }
        }
    });
    let outcome = agent.prompt(prompt, ctx.cancel.clone()).await;
    let closed = agent.close().await;
    drop(agent);
    let _ = forward.await;
    Ok(ChildRun {
        outcome,
        notes: booted.notes,
        closed,
    })
}

/// How a child starts: from a copy of its parent's history (`spawn_subagent`), and somewhere other than its parent's
/// working directory (a worktree).
#[derive(Default)]
pub(super) struct ChildStart<'a> {
    /// The history it starts from.
    pub history: Option<Vec<SessionUpdate>>,
    /// Where it runs.
    pub place: Option<&'a Place>,
}

/// Where a child runs when not in its parent's working directory: its own working directory and how its grants
/// resolve there (a worktree: [`loom_kernel::worktree_ctx`]).
pub(super) struct Place {
    /// The child's working directory.
    pub cwd: PathBuf,
    /// How grants resolve for the ceiling check and the child.
    pub ctx: PathCtx,
}

/// The ceiling check and boot of [`run_child`], without the turn: the booted child, or the refusal or boot failure
/// as the call's result (nothing started). With `place`, the child works there, and the ceiling check compares
/// parent and child under its context.
pub(super) fn boot_child(
    tool: &str,
    name: &str,
    child: Loaded,
    spawn: &SpawnEnv,
    start: ChildStart<'_>,
) -> Result<super::options::Booted, Box<ToolOutput>> {
    let depth = spawn.opts.lineage.depth + 1;
    let ChildStart { history, place } = start;
    let ctx = place.map_or(&spawn.ctx, |p| &p.ctx);
    // the ceiling check, at spawn time, before the sub-agent boots
    let parent_ceiling = spawn.parent.manifest.effective_ceiling(ctx);
    let child_ceiling = child.manifest.effective_ceiling(ctx);
    let excess = ceiling_excess(
        &spawn.parent.manifest,
        &parent_ceiling,
        &child.manifest,
        &child_ceiling,
        ctx,
    );
    if !excess.is_empty() {
        let keys: Vec<String> = excess
            .iter()
            .map(|x| match (&x.why, &x.parent) {
                (Some(why), _) => why.clone(),
                (None, Some(p)) => format!(
                    "{} = {} exceeds the parent's {} = {p}",
                    x.key, x.child, x.key
                ),
                (None, None) => format!(
                    "{} = {} is not granted to the parent at all",
                    x.key, x.child
                ),
            })
            .collect();
        return Err(Box::new(ToolOutput::error(format!(
            "{tool}: CapabilityError: the sub-agent {name:?} would hold more authority than this agent: {}; \
             narrow the sub-manifest's [capabilities] (nothing was started)",
            keys.join("; ")
        ))));
    }
    let mut opts = spawn.opts.clone();
    if let Some(p) = place {
        opts.cwd = Some(p.cwd.clone());
    }
    opts.lineage = Lineage {
        depth,
        parent_history: history,
        parent_harness: spawn.harness.get().cloned(),
        authority: (*spawn.authority).clone(),
    };
    (spawn.boot)(Arc::new(child), opts).map_err(|e| {
        Box::new(ToolOutput::error(format!(
            "{tool}: the sub-agent {name:?} did not boot: {e}"
        )))
    })
}

/// The last `max` bytes of `s`, cut at a character boundary.
fn tail(s: &str, max: usize) -> &str {
    let mut start = s.len().saturating_sub(max);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// The sub-manifest for `choice`.
fn resolve(tool: &str, choice: &SubagentChoice, spawn: &SpawnEnv) -> Result<Loaded, String> {
    let parent: &Loaded = &spawn.parent;
    match choice {
        SubagentChoice::SelfCopy => Ok(Loaded {
            path: parent.path.clone(),
            dir: parent.dir.clone(),
            manifest: self_copy(&parent.manifest),
        }),
        SubagentChoice::Explicit(v) => match v.as_str() {
            Some(path) => {
                let target: PathBuf = crate::authority::resolved(&parent.dir.join(path));
                let loaded = load_manifest(&target)
                    .map_err(|e| format!("{tool}: cannot load the sub-manifest: {e}"))?;
                // the file must be the one audited and hashed at boot: anything else (rewritten, or created since)
                // could carry hooks or servers no ceiling check would see
                let now = std::fs::read(&loaded.path)
                    .map(|b| crate::authority::sha256(&b))
                    .map_err(|e| {
                        format!(
                            "{tool}: cannot read the sub-manifest {}: {e}",
                            target.display()
                        )
                    })?;
                match spawn.submanifests.get(&loaded.path) {
                    Some(at_boot) if *at_boot == now => Ok(loaded),
                    Some(_) => Err(format!(
                        "{tool}: the sub-manifest {} changed since this agent booted, so it is not the one that was \
                         audited; it was not started — restart loom to audit and load the new version",
                        loaded.path.display()
                    )),
                    None => Err(format!(
                        "{tool}: the sub-manifest {} did not exist when this agent booted, so it was never \
                         audited; it was not started — restart loom to audit and load it",
                        loaded.path.display()
                    )),
                }
            }
            None => {
                let text = format!("manifest = {}", v.to_toml());
                let table: toml::Table = toml::from_str(&text)
                    .map_err(|e| format!("{tool}: the granted sub-manifest is not a table: {e}"))?;
                let Some(toml::Value::Table(t)) = table.get("manifest") else {
                    return Err(format!("{tool}: the granted sub-manifest is not a table"));
                };
                let manifest = manifest_from_table(
                    t,
                    &parent.path.display().to_string(),
                    &format!("capabilities.{tool}.manifest"),
                    &env_map(),
                )
                .map_err(|e| format!("{tool}: the granted sub-manifest does not parse: {e}"))?;
                Ok(Loaded {
                    path: parent.path.clone(),
                    dir: parent.dir.clone(),
                    manifest,
                })
            }
        },
    }
}

/// The parent with every spawn_subagent instance stripped from `[tools]` and `[capabilities]`, and its `file`
/// session layers kept in memory instead (a copy shares the parent's storage directory, and two agents appending to
/// one session log would mix their conversations).
fn self_copy(parent: &Manifest) -> Manifest {
    let mut m = parent.clone();
    let spawners: Vec<String> = parent
        .tools
        .keys()
        .chain(parent.capabilities.iter().flat_map(|c| c.keys()))
        .filter(|k| parent.underlying(k) == UNDERLYING)
        .cloned()
        .collect();
    for k in &spawners {
        m.tools.remove(k);
        if let Some(c) = m.capabilities.as_mut() {
            c.remove(k);
        }
    }
    m.subagents.retain(|s| !spawners.contains(&s.key));
    // a copy keeps its own conversation: it never appends to the parent's session file
    for layer in &mut m.session.layers {
        if layer.provider == "file" {
            layer.provider = "in-memory".into();
            layer.config = toml::Table::new();
        }
    }
    m
}

/// The parent's history as a fork starts from: everything recorded, minus tool calls that have no result yet (the
/// spawn_subagent call itself, and any call of the same batch still waiting).
fn fork_snapshot(history: &[SessionUpdate]) -> Vec<SessionUpdate> {
    use crate::update::ToolStatus;
    let finished: std::collections::BTreeSet<&str> = history
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::ToolCallUpdate(t)
                if matches!(t.status, Some(ToolStatus::Completed | ToolStatus::Failed)) =>
            {
                Some(t.tool_call_id.as_str())
            }
            _ => None,
        })
        .collect();
    history
        .iter()
        .filter(|u| match u {
            SessionUpdate::ToolCall(c) => finished.contains(c.tool_call_id.as_str()),
            SessionUpdate::ToolCallUpdate(t) => finished.contains(t.tool_call_id.as_str()),
            _ => true,
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::boot::boot_loaded;

    fn manifest(text: &str) -> Manifest {
        loom_kernel::parse_manifest(text, "agent.toml", &Default::default()).unwrap()
    }

    #[test]
    fn self_copy_strips_every_spawner_and_keeps_the_rest() {
        let m = manifest(
            "[agent]\nname = \"lead\"\n[session]\nprovider = \"file\"\n[tools]\nread_file = \"builtin\"\nhelper = { provider = \"builtin\", tool = \
             \"spawn_subagent\" }\n[capabilities]\nread_file = { paths = [\"./\"] }\nhelper = \"*\"\n",
        );
        let copy = self_copy(&m);
        assert!(copy.tools.contains_key("read_file"));
        assert!(!copy.tools.contains_key("helper"));
        let caps = copy.capabilities.unwrap();
        assert!(caps.contains_key("read_file") && !caps.contains_key("helper"));
        assert_eq!(copy.session.layers[0].provider, "in-memory");
    }

    fn user(text: &str) -> SessionUpdate {
        SessionUpdate::UserMessageChunk(crate::update::Chunk {
            content: crate::update::Content::text(text),
            message_id: None,
        })
    }

    fn loaded(dir: &std::path::Path, text: &str) -> Arc<Loaded> {
        Arc::new(Loaded {
            path: dir.join("agent.toml"),
            dir: dir.to_path_buf(),
            manifest: manifest(text),
        })
    }

    const FORKED: &str =
        "[agent]\nname = \"f\"\n[harness]\nprovider = \"test\"\necho = true\n[session]\n\
                          provider = \"fork-of-parent\"\n[tools]\n";

    #[test]
    fn fork_of_parent_starts_from_the_snapshot_and_is_refused_in_a_root_agent() {
        let dir = tempfile::tempdir().unwrap();
        let opts = BootOptions {
            cwd: Some(dir.path().to_path_buf()),
            lineage: Lineage {
                depth: 1,
                parent_history: Some(vec![user("parent said this")]),
                ..Lineage::default()
            },
            ..BootOptions::default()
        };
        let booted = boot_loaded(loaded(dir.path(), FORKED), opts).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let pre = rt.block_on(booted.agent.preamble("child prompt")).unwrap();
        assert_eq!(
            pre.events,
            vec![user("parent said this"), user("child prompt")]
        );

        let root = BootOptions {
            cwd: Some(dir.path().to_path_buf()),
            ..BootOptions::default()
        };
        let err = boot_loaded(loaded(dir.path(), FORKED), root)
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("works only in a sub-agent's manifest"),
            "{err}"
        );
    }

    #[test]
    fn the_fork_snapshot_leaves_out_calls_without_a_result() {
        use crate::update::{ToolCall, ToolCallUpdate, ToolStatus};
        let call = |id: &str| {
            SessionUpdate::ToolCall(ToolCall {
                tool_call_id: id.into(),
                title: "t".into(),
                kind: ToolKind::Other,
                status: ToolStatus::Pending,
                raw_input: serde_json::json!({}),
                content: Vec::new(),
                locations: Vec::new(),
            })
        };
        let done = SessionUpdate::ToolCallUpdate(ToolCallUpdate {
            tool_call_id: "a".into(),
            status: Some(ToolStatus::Completed),
            content: None,
            raw_output: None,
        });
        let snap = fork_snapshot(&[user("u"), call("a"), done.clone(), call("b")]);
        assert_eq!(snap, vec![user("u"), call("a"), done]);
    }

    #[test]
    fn tail_cuts_at_a_char_boundary() {
        assert_eq!(tail("héllo", 4), "llo");
        assert_eq!(tail("abc", 10), "abc");
    }
}
