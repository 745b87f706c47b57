//! `delegate {agent, task}`: runs a subagent profile (`.loom/agents/NAME.md`) on one task and returns its answer.
//!
//! The child is this agent narrowed by the kernel's verdict on the profile ([`loom_kernel::judge_profile`]): the
//! same manifest with only the tool instances the profile keeps (each with this agent's grant), the profile's body
//! as its prompt, its model, its `maxTurns`, a session of its own kept in memory (its own history, record and
//! processes), and no tool that delegates further. It inherits this agent's permission rules with the rest of the
//! manifest, is checked against this agent's ceiling before it boots, and gets only the task text. The grant names
//! the profiles a delegation may use: `delegate = { capabilities = { agents = ["reviewer"] } }`.

use loom_kernel::{Profile, ProfileVerdict, Row, Value};

use tokio_util::sync::CancellationToken;

use super::subagent::{run_child, ChildStart, Place, SpawnEnv};
use crate::load::Loaded;
use crate::model::ToolSpec;
use crate::profiles::FoundProfile;
use crate::tools::{check_fields, str_field, Prepared, Tool, ToolEnv, ToolOutput};
use crate::update::ToolKind;
use crate::worktrees::WorktreeRecord;

/// The profiles one granted instance of `delegate` or `background_spawn` may run, with the kernel's verdicts.
#[derive(Clone)]
pub(super) struct GrantedProfiles(Vec<(Profile, ProfileVerdict)>);

/// A profile picked by a call, with its task.
pub(super) struct Picked {
    pub name: String,
    pub task: String,
    pub profile: Profile,
    pub verdict: ProfileVerdict,
}

impl Picked {
    /// The child's manifest: the parent's narrowed to the profile (the kernel's [`loom_kernel::profile_manifest`]).
    pub fn child(&self, parent: &Loaded) -> Loaded {
        Loaded {
            path: parent.path.clone(),
            dir: parent.dir.clone(),
            manifest: loom_kernel::profile_manifest(&parent.manifest, &self.profile, &self.verdict),
        }
    }

    /// Where `child` runs: in the parent's working directory (`None`), or — for a profile with `isolation: worktree`
    /// — in a fresh worktree of the repository's committed `HEAD`, its relative grants resolving there
    /// ([`loom_kernel::worktree_ctx`]). `Err`: the call's error (not in a repository, a grant that would climb out of
    /// the worktree, git's refusal), with no worktree left behind.
    pub async fn isolate(
        &self,
        tool: &str,
        child: &Loaded,
        spawn: &SpawnEnv,
        cancel: &CancellationToken,
    ) -> Result<Option<(Place, WorktreeRecord)>, String> {
        if !self.profile.worktree {
            return Ok(None);
        }
        let name = &self.name;
        let refuse = |e: String| {
            format!("{tool}: profile {name:?} runs in a git worktree, but {e}; nothing was started")
        };
        let cwd = match &spawn.opts.cwd {
            Some(c) => c.clone(),
            None => std::env::current_dir().map_err(|e| refuse(e.to_string()))?,
        };
        // the kernel rebases the grants before anything is checked out
        let rebase = |dest: &std::path::Path, child_cwd: &std::path::Path| {
            loom_kernel::worktree_ctx(
                &child.manifest,
                &spawn.ctx,
                &dest.to_string_lossy(),
                &child_cwd.to_string_lossy(),
            )
            .map_err(|problems| format!("its grants cannot move there: {}", problems.join("; ")))
        };
        let made = crate::worktrees::make_worktree(
            &cwd,
            &crate::load::env_map(),
            crate::worktrees::Purpose {
                agent: &spawn.parent.manifest.agent.name,
                profile: name,
                task: &self.task,
            },
            rebase,
            &spawn.opts.sandbox,
            cancel,
        )
        .await
        .map_err(refuse)?;
        Ok(Some((
            Place {
                cwd: made.cwd,
                ctx: made.checked,
            },
            made.record,
        )))
    }
}

/// What a worktree child's result or report ends with: where it worked, and how to remove the worktree.
pub(super) fn worktree_note(rec: &WorktreeRecord) -> String {
    format!(
        "\n[worked in the git worktree {} (id {}), kept for review; `loom worktrees remove {}` deletes it]",
        rec.path.display(),
        rec.id,
        rec.id
    )
}

/// The worktree as a call's raw output names it.
pub(super) fn worktree_json(rec: &WorktreeRecord) -> serde_json::Value {
    serde_json::json!({ "id": rec.id, "path": rec.path })
}

impl GrantedProfiles {
    /// The profiles found (`found`) that `grant` names. A name the grant gives that is no usable profile is an error
    /// (boot stops naming it).
    pub fn new(
        grant: &loom_kernel::Grant,
        found: &[FoundProfile],
    ) -> Result<GrantedProfiles, String> {
        let usable: Vec<(Profile, ProfileVerdict)> = found
            .iter()
            .filter(|f| !f.shadowed)
            .filter_map(|f| f.result.as_ref().ok())
            .filter(|(_, v)| v.problems.is_empty())
            .cloned()
            .collect();
        let Some(names) = loom_kernel::granted_profiles(grant) else {
            return Ok(GrantedProfiles(usable));
        };
        for n in &names {
            if !usable.iter().any(|(p, _)| &p.name == n) {
                let why = found
                    .iter()
                    .find(|f| f.path.file_stem().and_then(|s| s.to_str()) == Some(n.as_str()))
                    .map(|f| match &f.result {
                        Err(e) => format!("{} does not parse: {e}", f.path.display()),
                        Ok((_, v)) => {
                            format!("{} is refused: {}", f.path.display(), v.problems.join("; "))
                        }
                    })
                    .unwrap_or_else(|| {
                        format!(
                            "there is no {n}.md in .loom/agents or loom's data directory's agents/"
                        )
                    });
                return Err(format!(
                    "its grant names the profile {n:?}, which cannot be used: {why}"
                ));
            }
        }
        Ok(GrantedProfiles(
            usable
                .into_iter()
                .filter(|(p, _)| names.contains(&p.name))
                .collect(),
        ))
    }

    /// The profiles' names.
    pub fn names(&self) -> Vec<&str> {
        self.0.iter().map(|(p, _)| p.name.as_str()).collect()
    }

    /// Each profile with its description and tools, for a tool's description.
    pub fn listing(&self) -> String {
        let list: Vec<String> = self
            .0
            .iter()
            .map(|(p, v)| {
                format!(
                    "{} ({}; tools: {})",
                    p.name,
                    p.description,
                    v.tools.join(", ")
                )
            })
            .collect();
        if list.is_empty() {
            "none".to_string()
        } else {
            list.join("; ")
        }
    }

    /// The input schema of a call that names a profile and a task.
    pub fn schema(&self) -> serde_json::Value {
        serde_json::json!({
            "type": "object",
            "properties": {
                "agent": { "type": "string", "enum": self.names() },
                "task": { "type": "string", "description": "Everything the subagent needs to know: it sees nothing else." },
            },
            "required": ["agent", "task"],
            "additionalProperties": false
        })
    }

    /// The profile and task `input` (`{agent, task}`) names: an unknown or ungranted profile, or an empty task, is
    /// the call's error.
    pub fn pick(&self, tool: &str, input: &serde_json::Value) -> Result<Picked, String> {
        check_fields(input, tool, &["agent", "task"])?;
        let name = str_field(input, tool, "agent")?.to_string();
        let task = str_field(input, tool, "task")?.to_string();
        if task.trim().is_empty() {
            return Err(format!(
                "{tool}: task is empty; say what the subagent should do"
            ));
        }
        let (profile, verdict) = self
            .0
            .iter()
            .find(|(p, _)| p.name == name)
            .cloned()
            .ok_or_else(|| {
                let names = self.names();
                format!(
                    "{tool}: no profile {name:?} is granted (granted: {})",
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                )
            })?;
        Ok(Picked {
            name,
            task,
            profile,
            verdict,
        })
    }
}

/// The `delegate` tool.
pub struct DelegateTool {
    env: ToolEnv,
    spawn: SpawnEnv,
    profiles: GrantedProfiles,
}

impl DelegateTool {
    /// The tool for one granted instance: the profiles found (`found`) that its grant names (see
    /// [`GrantedProfiles::new`]).
    pub fn new(
        env: ToolEnv,
        spawn: SpawnEnv,
        found: &[FoundProfile],
    ) -> Result<DelegateTool, String> {
        let profiles = GrantedProfiles::new(&env.grant, found)?;
        Ok(DelegateTool {
            env,
            spawn,
            profiles,
        })
    }
}

impl Tool for DelegateTool {
    fn name(&self) -> &str {
        &self.env.instance
    }

    fn builtin(&self) -> Option<&'static str> {
        Some("delegate")
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Other
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.env.instance.clone(),
            description: format!(
                "Give one task to a subagent and wait for its answer. It sees only the task text, works with its own \
                 history and at most your tools and authority, and cannot delegate further. Agents: {}.",
                self.profiles.listing()
            ),
            input_schema: self.profiles.schema(),
        }
    }

    fn prepare(&self, input: &serde_json::Value) -> Result<Prepared, String> {
        let tool = self.env.instance.clone();
        let picked = self.profiles.pick(&tool, input)?;
        let spawn = self.spawn.clone();
        Ok(crate::tools::CallHead::args(
            &tool,
            Row::from_pairs([("agents", Value::strs([picked.name.as_str()]))]),
        )
        .then(Box::new(move |_auth, ctx| {
            Box::pin(async move {
                let child = picked.child(&spawn.parent);
                let name = &picked.name;
                let placed = match picked.isolate(&tool, &child, &spawn, &ctx.cancel).await {
                    Ok(p) => p,
                    Err(e) => return ToolOutput::error(e),
                };
                let place = placed.as_ref().map(|(p, _)| p);
                let mut out = match run_child(
                    &tool,
                    name,
                    child,
                    &picked.task,
                    &spawn,
                    &ctx,
                    ChildStart {
                        history: None,
                        place,
                    },
                )
                .await
                {
                    Ok(run) => run.into_output(&tool, name, name, true),
                    Err(mut refused) => {
                        if let Some((_, rec)) = &placed {
                            refused
                                .text
                                .push_str(&discard_worktree(rec, &spawn.opts.sandbox).await);
                        }
                        return refused;
                    }
                };
                if let Some((_, rec)) = &placed {
                    out.text.push_str(&worktree_note(rec));
                    if let Some(serde_json::Value::Object(raw)) = out.raw_output.as_mut() {
                        raw.insert("worktree".into(), worktree_json(rec));
                    }
                }
                out
            })
        })))
    }
}

/// Removes the worktree of a child that never ran (it holds nothing worth keeping); what to add to the refusal.
pub(crate) async fn discard_worktree(
    rec: &WorktreeRecord,
    sandbox: &loom_tools::SandboxEnv,
) -> String {
    let env = crate::load::env_map();
    match crate::worktrees::remove_worktree(&env, &rec.id, sandbox).await {
        Ok(_) => format!(" (its worktree {} was removed)", rec.id),
        Err(e) => format!(
            " (its worktree {} could not be removed: {e}; `loom worktrees remove {}` removes it)",
            rec.id, rec.id
        ),
    }
}
