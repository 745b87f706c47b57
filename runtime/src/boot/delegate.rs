//! `delegate {agent, task}`: runs a subagent profile (`.loom/agents/NAME.md`) on one task and returns its answer.
//!
//! The child is this agent narrowed by the kernel's verdict on the profile ([`loom_kernel::judge_profile`]): the
//! same manifest with only the tool instances the profile keeps (each with this agent's grant), the profile's body
//! as its prompt, its model, its `maxTurns`, a session of its own kept in memory (its own history, record and
//! processes), and no tool that delegates further. It inherits this agent's permission rules with the rest of the
//! manifest, is checked against this agent's ceiling before it boots, and gets only the task text. The grant names
//! the profiles a delegation may use: `delegate = { capabilities = { agents = ["reviewer"] } }`.

use loom_kernel::{CallFacts, ModelChoice, Profile, ProfileVerdict, Request, Row, Value};

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
        let granted = granted_names(&env.grant);
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

/// The profile names a grant allows: `None` for every one (`"*"`, or a row granting `agents = "*"`).
fn granted_names(grant: &loom_kernel::Grant) -> Option<Vec<String>> {
    let rows = grant.rows()?;
    let mut names = Vec::new();
    for r in rows {
        match r.get("agents") {
            Some(Value::Star) => return None,
            Some(v) => names.extend(
                v.elements()
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|x| x.as_str().map(str::to_string)),
            ),
            None => {}
        }
    }
    Some(names)
}

/// The child's manifest: the parent narrowed to the profile's verdict.
fn child_manifest(
    parent: &loom_kernel::Manifest,
    profile: &Profile,
    verdict: &ProfileVerdict,
) -> loom_kernel::Manifest {
    let mut m = parent.clone();
    m.tools.retain(|k, _| verdict.tools.contains(k));
    if let Some(c) = m.capabilities.as_mut() {
        c.retain(|k, _| verdict.tools.contains(k));
    }
    m.subagents.clear();
    m.agent.system_prompt = Some(loom_kernel::SystemPrompt::Text(profile.prompt.clone()));
    m.agent.description = Some(profile.description.clone());
    // its own conversation, kept in memory: the parent's skills and compaction, but no storage of the parent's (a
    // file log, a provider's layer) and no persisted compaction state
    let mut layers: Vec<loom_kernel::LayerSpec> = m
        .session
        .layers
        .iter()
        .filter(|l| matches!(l.provider.as_str(), "skills" | "compacting"))
        .cloned()
        .collect();
    for l in &mut layers {
        l.config.remove("persist");
    }
    let mut memory = parent
        .session
        .layers
        .first()
        .cloned()
        .unwrap_or_else(|| loom_kernel::SessionSpec::default_chain().layers[0].clone());
    memory.provider = "in-memory".into();
    memory.config = toml::Table::new();
    memory.storage = true;
    layers.push(memory);
    m.session.layers = layers;
    m.supervisor = loom_kernel::SupervisorSpec::default();
    // a profile narrows the request budget too: never more than this agent's own
    let parent_max = crate::harness::max_turn_requests_of(parent.harness.as_ref())
        .unwrap_or(crate::harness::DEFAULT_MAX_TURN_REQUESTS);
    let max = profile.max_turns.map_or(parent_max, |n| n.min(parent_max));
    match &verdict.model {
        ModelChoice::Parent => {}
        ModelChoice::Harness(h) => m.harness = parent.harnesses.get(h).cloned(),
        ModelChoice::Model(model) => {
            if let Some(h) = m.harness.as_mut() {
                h.config
                    .insert("model".into(), toml::Value::String(model.clone()));
            }
        }
    }
    if let Some(h) = m.harness.as_mut() {
        h.config.insert(
            "maxTurnRequests".into(),
            toml::Value::Integer(i64::from(max)),
        );
    }
    m
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
        Ok(Prepared {
            // the kernel decides the profile against the grant's `agents`
            request: Request::Args(Row::from_pairs([("agents", Value::strs([name.as_str()]))])),
            more: Vec::new(),
            facts: CallFacts {
                tool: tool.clone(),
                ..CallFacts::default()
            },
            locations: Vec::new(),
            run: Box::new(move |_auth, ctx| {
                Box::pin(async move {
                    let parent = &spawn.parent;
                    let child = Loaded {
                        path: parent.path.clone(),
                        dir: parent.dir.clone(),
                        manifest: child_manifest(&parent.manifest, &profile, &verdict),
                    };
                    match run_child(&tool, &name, child, &task, &spawn, &ctx, None).await {
                        Ok(run) => run.into_output(&tool, &name, &name, true),
                        Err(refused) => refused,
                    }
                })
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_child_is_the_parent_narrowed_to_the_verdict() {
        let parent = loom_kernel::parse_manifest(
            "[agent]\nname = \"p\"\n[harness]\nprovider = \"test\"\n[harnesses.cheap]\nprovider = \"test\"\necho = true\n\
             [session]\nlayers = [\"file\"]\n[supervisor]\nenabled = true\n\
             [tools]\nread_file = \"builtin\"\nbash = \"builtin\"\ndelegate = \"builtin\"\n\
             [capabilities]\nread_file = { read_paths = [\"./\"] }\nbash = { commands = \"*\" }\ndelegate = \"*\"\n",
            "agent.toml",
            &std::collections::BTreeMap::new(),
        )
        .unwrap();
        let profile = loom_kernel::parse_profile(
            "---\nname: r\ndescription: reads\nmodel: cheap\nmaxTurns: 4\n---\nRead only.\n",
            "r",
        )
        .unwrap();
        let verdict = loom_kernel::judge_profile(&parent, &profile);
        assert_eq!(verdict.tools, ["bash", "read_file"]);
        let with_bash = child_manifest(&parent, &profile, &verdict);
        assert!(!with_bash.tools.contains_key("delegate"));
        let narrow = loom_kernel::parse_profile(
            "---\nname: r\ndescription: reads\nmodel: cheap\nmaxTurns: 4\ntools: [read_file]\n---\nRead only.\n",
            "r",
        )
        .unwrap();
        let v = loom_kernel::judge_profile(&parent, &narrow);
        let m = child_manifest(&parent, &narrow, &v);
        assert_eq!(m.tools.keys().collect::<Vec<_>>(), ["read_file"]);
        assert_eq!(
            m.capabilities.as_ref().unwrap().keys().collect::<Vec<_>>(),
            ["read_file"]
        );
        assert_eq!(m.session.layers[0].provider, "in-memory");
        assert!(!m.supervisor.enabled);
        let h = m.harness.as_ref().unwrap();
        assert_eq!(
            h.config.get("echo").and_then(toml::Value::as_bool),
            Some(true)
        );
        assert_eq!(
            h.config
                .get("maxTurnRequests")
                .and_then(toml::Value::as_integer),
            Some(4)
        );
        assert_eq!(
            m.agent.system_prompt,
            Some(loom_kernel::SystemPrompt::Text("Read only.".into()))
        );
        // a profile cannot raise the request budget above this agent's (16, the default)
        let greedy = loom_kernel::parse_profile(
            "---\nname: g\ndescription: d\nmaxTurns: 500\n---\nGo.\n",
            "g",
        )
        .unwrap();
        let v = loom_kernel::judge_profile(&parent, &greedy);
        let m = child_manifest(&parent, &greedy, &v);
        assert_eq!(
            m.harness
                .as_ref()
                .unwrap()
                .config
                .get("maxTurnRequests")
                .and_then(toml::Value::as_integer),
            Some(16)
        );
    }
}
