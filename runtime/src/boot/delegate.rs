//! `delegate {agent, task}`: runs a subagent profile (`.loom/agents/NAME.md`) on one task and returns its answer.
//!
//! The child is this agent narrowed by the kernel's verdict on the profile ([`loom_kernel::judge_profile`]): the
//! same manifest with only the tool instances the profile keeps (each with this agent's grant), the profile's body
//! as its prompt, its model, its `maxTurns`, a session of its own kept in memory (its own history, record and
//! processes), and no tool that delegates further. It inherits this agent's permission rules with the rest of the
//! manifest, is checked against this agent's ceiling before it boots, and gets only the task text. The grant names
//! the profiles a delegation may use: `delegate = { capabilities = { agents = ["reviewer"] } }`.

use loom_kernel::{Profile, ProfileVerdict, Row, Value};

use super::subagent::{run_child, SpawnEnv};
use crate::load::Loaded;
use crate::model::ToolSpec;
use crate::profiles::FoundProfile;
use crate::tools::{check_fields, str_field, Prepared, Tool, ToolEnv};
use crate::update::ToolKind;

/// The `delegate` tool.
pub struct DelegateTool {
    env: ToolEnv,
    spawn: SpawnEnv,
    /// The usable profiles this grant names, with the kernel's verdicts.
    profiles: Vec<(Profile, ProfileVerdict)>,
}

impl DelegateTool {
    /// The tool for one granted instance: the profiles found (`found`) that its grant names. A name the grant gives
    /// that is no usable profile is an error (boot stops naming it).
    pub fn new(
        env: ToolEnv,
        spawn: SpawnEnv,
        found: &[FoundProfile],
    ) -> Result<DelegateTool, String> {
        let usable: Vec<(Profile, ProfileVerdict)> = found
            .iter()
            .filter(|f| !f.shadowed)
            .filter_map(|f| f.result.as_ref().ok())
            .filter(|(_, v)| v.problems.is_empty())
            .cloned()
            .collect();
        let granted = loom_kernel::granted_profiles(&env.grant);
        let profiles: Vec<(Profile, ProfileVerdict)> = match &granted {
            None => usable,
            Some(names) => {
                for n in names {
                    if !usable.iter().any(|(p, _)| &p.name == n) {
                        let why = found
                            .iter()
                            .find(|f| f.path.file_stem().and_then(|s| s.to_str()) == Some(n.as_str()))
                            .map(|f| match &f.result {
                                Err(e) => format!("{} does not parse: {e}", f.path.display()),
                                Ok((_, v)) => format!("{} is refused: {}", f.path.display(), v.problems.join("; ")),
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
                usable
                    .into_iter()
                    .filter(|(p, _)| names.contains(&p.name))
                    .collect()
            }
        };
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
        let names: Vec<&str> = self.profiles.iter().map(|(p, _)| p.name.as_str()).collect();
        let list: Vec<String> = self
            .profiles
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
        ToolSpec {
            name: self.env.instance.clone(),
            description: format!(
                "Give one task to a subagent and wait for its answer. It sees only the task text, works with its own \
                 history and at most your tools and authority, and cannot delegate further. Agents: {}.",
                if list.is_empty() {
                    "none".to_string()
                } else {
                    list.join("; ")
                }
            ),
            input_schema: serde_json::json!({
                "type": "object",
                "properties": {
                    "agent": { "type": "string", "enum": names },
                    "task": { "type": "string", "description": "Everything the subagent needs to know: it sees nothing else." },
                },
                "required": ["agent", "task"],
                "additionalProperties": false
            }),
        }
    }

    fn prepare(&self, input: &serde_json::Value) -> Result<Prepared, String> {
        let tool = self.env.instance.clone();
        check_fields(input, &tool, &["agent", "task"])?;
        let name = str_field(input, &tool, "agent")?.to_string();
        let task = str_field(input, &tool, "task")?.to_string();
        if task.trim().is_empty() {
            return Err(format!(
                "{tool}: task is empty; say what the subagent should do"
            ));
        }
        let (profile, verdict) = self
            .profiles
            .iter()
            .find(|(p, _)| p.name == name)
            .cloned()
            .ok_or_else(|| {
                let names: Vec<&str> = self.profiles.iter().map(|(p, _)| p.name.as_str()).collect();
                format!(
                    "{tool}: no profile {name:?} is granted (granted: {})",
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                )
            })?;
        if profile.worktree {
            return Err(format!(
                "{tool}: profile {name:?} asks for isolation: worktree, which this build of loom does not provide yet; \
                 nothing was started (remove the isolation key to run it in the working directory)"
            ));
        }
        let spawn = self.spawn.clone();
        Ok(crate::tools::CallHead::args(
            &tool,
            Row::from_pairs([("agents", Value::strs([name.as_str()]))]),
        )
        .then(Box::new(move |_auth, ctx| {
            Box::pin(async move {
                let parent = &spawn.parent;
                let child = Loaded {
                    path: parent.path.clone(),
                    dir: parent.dir.clone(),
                    manifest: loom_kernel::profile_manifest(&parent.manifest, &profile, &verdict),
                };
                match run_child(&tool, &name, child, &task, &spawn, &ctx, None).await {
                    Ok(run) => run.into_output(&tool, &name, &name, true),
                    Err(refused) => refused,
                }
            })
        })))
    }
}
