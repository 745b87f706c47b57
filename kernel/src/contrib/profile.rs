//! Subagent profiles: `.loom/agents/NAME.md` in the working directory (project) and `<data>/agents/NAME.md` (user),
//! a frontmatter of `name`, `description`, `model`, `effort`, `maxTurns`, `tools`, `disallowedTools` and `isolation`
//! over the child's prompt. The frontmatter is the skill subset (`skill::frontmatter`): nothing in it is evaluated.
//!
//! A profile can only narrow: its tools are the parent's tool instances (all of them when it names none) minus what
//! it disallows, each with the parent's grant — a profile carries no grants of its own — and never a tool that
//! delegates further. [`judge_profile`] says which tools that leaves, or why the profile cannot be used (it names a
//! tool the parent does not have, a model that is neither a name nor a named harness, an unknown key).

use std::collections::BTreeMap;

use crate::contrib::rules::{list_of, unquote};
use crate::contrib::skill::frontmatter::{split_frontmatter, FmValue};
use crate::lattice::grant::Grant;
use crate::lattice::path::{path_within, PathCtx};
use crate::lattice::value::Value;
use crate::manifest::{is_safe_id, Manifest};

/// Where project profiles live, relative to the working directory.
pub const PROFILES_DIR: &str = ".loom/agents";

/// The built-ins a child never gets: they delegate further (or act on agents only a delegating tool starts).
pub const DELEGATING_TOOLS: &[&str] = &[
    "spawn_subagent",
    "delegate",
    "background_spawn",
    "background_list",
    "background_message",
    "background_kill",
];

/// The model requests a turn may make when `[harness]` does not say (`maxTurnRequests`).
pub const DEFAULT_MAX_TURN_REQUESTS: u32 = 16;

/// The most turns a profile may give its child.
pub const MAX_PROFILE_TURNS: u32 = 1000;

/// The keys a profile's frontmatter may have.
const KEYS: &[&str] = &[
    "name",
    "description",
    "model",
    "effort",
    "maxTurns",
    "tools",
    "disallowedTools",
    "isolation",
];

/// One parsed profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// Its name (the file's stem).
    pub name: String,
    /// What it is for.
    pub description: String,
    /// A model of the parent's provider, or a named harness (`[harnesses.NAME]`); `None`: the parent's model.
    pub model: Option<String>,
    /// `low`, `medium` or `high`.
    pub effort: Option<String>,
    /// The most model requests a task gets.
    pub max_turns: Option<u32>,
    /// The parent's tool instances it keeps; `None`: all of them.
    pub tools: Option<Vec<String>>,
    /// The instances it takes away.
    pub disallowed: Vec<String>,
    /// `isolation: worktree`: the child works in a detached git worktree.
    pub worktree: bool,
    /// The child's prompt (the file's body).
    pub prompt: String,
}

/// Parses a profile file `NAME.md` (its stem is `stem`). `Err` names the line or the key and what is wrong.
pub fn parse_profile(text: &str, stem: &str) -> Result<Profile, String> {
    let t = text.strip_prefix('\u{feff}').unwrap_or(text);
    if !t.starts_with("---") {
        return Err(
            "a profile starts with a --- frontmatter naming at least `name` and `description`"
                .into(),
        );
    }
    let (map, body) =
        split_frontmatter(t).map_err(|e| format!("line {}: {}", e.line, e.message))?;
    if let Some(k) = map.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(format!(
            "unknown key `{k}` (a profile has {})",
            KEYS.join(", ")
        ));
    }
    let text_of = |key: &str| -> Result<Option<String>, String> {
        match map.get(key) {
            None => Ok(None),
            Some(FmValue::Str(s)) => Ok(Some(unquote(s.trim()).to_string())),
            Some(_) => Err(format!("{key} must be text")),
        }
    };
    let names_of = |key: &str| -> Result<Option<Vec<String>>, String> {
        map.get(key)
            .map(|v| {
                list_of(v).ok_or_else(|| {
                    format!("{key} must be a list of tool names such as [read_file, grep]")
                })
            })
            .transpose()
    };
    let name = text_of("name")?.ok_or("`name` is missing")?;
    if name != stem {
        return Err(format!(
            "name {name:?} differs from the file's name {stem:?}.md; they must be the same"
        ));
    }
    if !is_safe_id(&name) {
        return Err(format!(
            "name {name:?} is not 1 to 64 characters from A-Z a-z 0-9 . _ -, starting with a letter or a digit"
        ));
    }
    let description = text_of("description")?
        .filter(|d| !d.is_empty())
        .ok_or("`description` is missing")?;
    let effort = text_of("effort")?;
    if let Some(e) = effort
        .as_deref()
        .filter(|e| !matches!(*e, "low" | "medium" | "high"))
    {
        return Err(format!("effort {e:?} is not low, medium or high"));
    }
    let max_turns = match text_of("maxTurns")? {
        None => None,
        Some(n) => Some(
            n.parse::<u32>()
                .ok()
                .filter(|n| (1..=MAX_PROFILE_TURNS).contains(n))
                .ok_or_else(|| {
                    format!("maxTurns {n:?} is not a number from 1 to {MAX_PROFILE_TURNS}")
                })?,
        ),
    };
    let worktree = match text_of("isolation")?.as_deref() {
        None => false,
        Some("worktree") => true,
        Some(other) => return Err(format!("isolation {other:?} is not worktree")),
    };
    let prompt = body.trim().to_string();
    if prompt.is_empty() {
        return Err(
            "the profile has no body: the child's prompt goes after the frontmatter".into(),
        );
    }
    Ok(Profile {
        name,
        description,
        model: text_of("model")?.filter(|m| !m.is_empty()),
        effort,
        max_turns,
        tools: names_of("tools")?,
        disallowed: names_of("disallowedTools")?.unwrap_or_default(),
        worktree,
        prompt,
    })
}

/// What a profile leaves its child, or why it cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileVerdict {
    /// The child's tool instances (the parent's, narrowed), each with the parent's grant.
    pub tools: Vec<String>,
    /// The model: the parent's (`None`), a model id of the parent's provider, or a named harness.
    pub model: ModelChoice,
    /// Why the profile cannot be used (empty: it can).
    pub problems: Vec<String>,
    /// What it names that has no effect (a disallowed tool the parent does not have).
    pub notes: Vec<String>,
}

/// The model a profile's child runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelChoice {
    /// The parent's harness as it is.
    Parent,
    /// The parent's provider with this model.
    Model(String),
    /// A named harness.
    Harness(String),
}

/// Judges `profile` against the parent `manifest`: the child's tools are the parent's instances it names (all when
/// it names none) minus those it disallows and the ones that delegate further; naming a tool the parent lacks
/// would widen it, so the profile is refused.
pub fn judge_profile(manifest: &Manifest, profile: &Profile) -> ProfileVerdict {
    let mut problems = Vec::new();
    let mut notes = Vec::new();
    let parent: BTreeMap<&str, &str> = manifest
        .tools
        .iter()
        .map(|(instance, entry)| {
            (
                instance.as_str(),
                entry.tool.as_deref().unwrap_or(instance.as_str()),
            )
        })
        .collect();
    let wanted: Vec<String> = match &profile.tools {
        Some(names) => {
            for n in names.iter().filter(|n| !parent.contains_key(n.as_str())) {
                problems.push(format!(
                    "tools names {n:?}, which this agent does not have: a profile can only narrow this agent's \
                     tools ({})",
                    parent.keys().copied().collect::<Vec<_>>().join(", ")
                ));
            }
            names.clone()
        }
        None => parent.keys().map(|k| (*k).to_string()).collect(),
    };
    for d in profile
        .disallowed
        .iter()
        .filter(|d| !parent.contains_key(d.as_str()))
    {
        notes.push(format!(
            "disallowedTools names {d:?}, which this agent does not have (no effect)"
        ));
    }
    let mut tools: Vec<String> = wanted
        .into_iter()
        .filter(|t| parent.contains_key(t.as_str()))
        .filter(|t| !profile.disallowed.contains(t))
        .filter(|t| !DELEGATING_TOOLS.contains(&parent[t.as_str()]))
        .collect();
    tools.sort();
    tools.dedup();
    let model = match &profile.model {
        None => ModelChoice::Parent,
        Some(m) if manifest.harnesses.contains_key(m) => ModelChoice::Harness(m.clone()),
        Some(m) if manifest.harness.is_none() => {
            problems.push(format!(
                "model {m:?} is no named harness, and this agent has no [harness] whose provider could run it"
            ));
            ModelChoice::Model(m.clone())
        }
        Some(m) => ModelChoice::Model(m.clone()),
    };
    if let Some(e) = &profile.effort {
        let provider = match &model {
            ModelChoice::Harness(h) => manifest.harnesses.get(h).map(|h| h.provider.as_str()),
            _ => manifest.harness.as_ref().map(|h| h.provider.as_str()),
        };
        if !provider.is_some_and(|p| EFFORT_PROVIDERS.contains(&p)) {
            notes.push(format!(
                "effort {e:?} is not applied: the child's harness ({}) has no reasoning effort setting (only {} do)",
                provider.unwrap_or("none"),
                EFFORT_PROVIDERS.join(" and ")
            ));
        }
    }
    ProfileVerdict {
        tools,
        model,
        problems,
        notes,
    }
}

/// The harnesses that take `effort` (`low`, `medium`, `high`): `anthropic` (as a thinking budget) and `openai` (as
/// the reasoning effort of a reasoning model). A profile's `effort` is applied to its child's harness there.
pub const EFFORT_PROVIDERS: &[&str] = &["anthropic", "openai"];

/// The profile names a grant allows: `None` for every one (`"*"`, or a row granting `agents = "*"`).
pub fn granted_profiles(grant: &Grant) -> Option<Vec<String>> {
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

/// How the grants of a child that runs in a git worktree (`isolation: worktree`) resolve: relative paths against its
/// working directory in the worktree (`child_cwd`, inside `worktree`), so the child's `./` is its own checkout and
/// never the parent's tree; absolute and `~` paths name what they named for the parent. The ceiling check compares
/// parent and child under this one context (the parent's relative grants rebased the same way). `Err` lists each
/// grant path of `manifest` that a rebase would move outside the worktree (a relative path climbing out of it): it
/// would name a place neither tree is, so such a child is not started.
pub fn worktree_ctx(
    manifest: &Manifest,
    parent: &PathCtx,
    worktree: &str,
    child_cwd: &str,
) -> Result<PathCtx, Vec<String>> {
    let ctx = PathCtx::new(child_cwd, parent.home.clone());
    let grants = manifest.capabilities.iter().flat_map(|c| c.iter()).chain(
        manifest
            .tools
            .iter()
            .filter_map(|(k, e)| e.capabilities.as_ref().map(|g| (k, g))),
    );
    let mut problems = Vec::new();
    for (instance, grant) in grants {
        for row in grant.rows().unwrap_or_default() {
            for kind in ["paths", "read_paths"] {
                let raws = row.get(kind).and_then(Value::elements).unwrap_or_default();
                for raw in raws.into_iter().filter_map(Value::as_str) {
                    let moved = ctx.normalize(raw);
                    if moved != parent.normalize(raw) && !path_within(worktree, &moved) {
                        problems.push(format!(
                            "{instance}: {kind} {raw:?} would resolve to {moved}, outside the worktree {worktree}"
                        ));
                    }
                }
            }
        }
    }
    if problems.is_empty() {
        Ok(ctx)
    } else {
        Err(problems)
    }
}

/// The manifest of a profile's child: `parent` narrowed to the kernel's `verdict` on `profile` — only the tool
/// instances it keeps (with the parent's grants), the profile's prompt and description, its model, a request budget
/// never above the parent's, a session of its own in memory (the parent's skills and compaction, no storage of the
/// parent's, nothing persisted), no supervisor and no sub-manifests.
pub fn profile_manifest(
    parent: &Manifest,
    profile: &Profile,
    verdict: &ProfileVerdict,
) -> Manifest {
    let mut m = parent.clone();
    m.tools.retain(|k, _| verdict.tools.contains(k));
    if let Some(c) = m.capabilities.as_mut() {
        c.retain(|k, _| verdict.tools.contains(k));
    }
    m.subagents.clear();
    m.agent.system_prompt = Some(crate::SystemPrompt::Text(profile.prompt.clone()));
    m.agent.description = Some(profile.description.clone());
    // its own conversation, kept in memory: the parent's skills and compaction, but no storage of the parent's (a
    // file log, a provider's layer) and no persisted compaction state
    let mut layers: Vec<crate::LayerSpec> = m
        .session
        .layers
        .iter()
        .filter(|l| matches!(l.provider.as_str(), "skills" | "compacting"))
        .cloned()
        .collect();
    for l in &mut layers {
        l.config.remove("persist");
    }
    layers.push(crate::LayerSpec::builtin("in-memory"));
    m.session.layers = layers;
    m.supervisor = crate::SupervisorSpec::default();
    // a profile narrows the request budget too: never more than this agent's own
    let parent_max = parent
        .harness
        .as_ref()
        .and_then(|h| h.config.get("maxTurnRequests"))
        .and_then(toml::Value::as_integer)
        .and_then(|n| u32::try_from(n).ok())
        .filter(|n| *n > 0)
        .unwrap_or(DEFAULT_MAX_TURN_REQUESTS);
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
        // the profile's effort replaces the harness's own reasoning setting where the harness has one
        if let (Some(e), true) = (
            &profile.effort,
            EFFORT_PROVIDERS.contains(&h.provider.as_str()),
        ) {
            h.config.remove("thinkingBudget");
            h.config
                .insert("effort".into(), toml::Value::String(e.clone()));
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_manifest;

    const REVIEWER: &str = "---\nname: reviewer\ndescription: Review Rust changes with file references\n\
        model: cheap\neffort: high\nmaxTurns: 20\ntools: [read_file, grep, note]\n\
        disallowedTools: [bash, apply_patch]\n---\nInspect the task and the code. Report verified defects.\n";

    fn parent() -> Manifest {
        parse_manifest(
            "[agent]\nname = \"p\"\n[harness]\nprovider = \"test\"\n[harnesses.cheap]\nprovider = \"test\"\n\
             [tools]\nread_file = \"builtin\"\ngrep = \"builtin\"\nbash = \"builtin\"\nnote = \"builtin\"\n\
             helper = { provider = \"builtin\", tool = \"spawn_subagent\" }\n",
            "agent.toml",
            &BTreeMap::new(),
        )
        .unwrap()
    }

    #[test]
    fn a_worktree_child_s_relative_grants_resolve_in_its_worktree_and_never_climb_out() {
        let m = |caps: &str| {
            parse_manifest(
                &format!(
                    "[agent]\nname = \"p\"\n[harness]\nprovider = \"test\"\n[tools]\nbash = \"builtin\"\n\
                     read_file = \"builtin\"\n[capabilities]\n{caps}\n"
                ),
                "agent.toml",
                &BTreeMap::new(),
            )
            .unwrap()
        };
        let parent = PathCtx::new("/repo/sub", Some("/home/u".into()));
        let ok = m(
            "bash = { commands = [\"ls\"], paths = [\"./\", \"../\", \"/opt/x\", \"~/notes\"] }\n\
                    read_file = { read_paths = [\"src\"] }",
        );
        let ctx = worktree_ctx(&ok, &parent, "/wt/bg-1", "/wt/bg-1/sub").unwrap();
        assert_eq!(ctx.normalize("./"), "/wt/bg-1/sub");
        assert_eq!(ctx.normalize("../"), "/wt/bg-1");
        assert_eq!(ctx.normalize("/opt/x"), "/opt/x");
        assert_eq!(ctx.normalize("~/notes"), "/home/u/notes");
        let out = m("bash = { commands = [\"ls\"], paths = [\"../../shared\"] }");
        assert_eq!(
            worktree_ctx(&out, &parent, "/wt/bg-1", "/wt/bg-1/sub").unwrap_err(),
            ["bash: paths \"../../shared\" would resolve to /wt/shared, outside the worktree /wt/bg-1"]
        );
    }

    #[test]
    fn a_profile_parses_and_narrows_the_parent() {
        let p = parse_profile(REVIEWER, "reviewer").unwrap();
        assert_eq!(p.max_turns, Some(20));
        assert_eq!(p.tools.as_deref().unwrap(), ["read_file", "grep", "note"]);
        assert_eq!(
            p.prompt,
            "Inspect the task and the code. Report verified defects."
        );
        let v = judge_profile(&parent(), &p);
        assert!(v.problems.is_empty(), "{v:?}");
        assert_eq!(v.tools, ["grep", "note", "read_file"]);
        assert_eq!(v.model, ModelChoice::Harness("cheap".into()));
        assert_eq!(
            v.notes,
            [
                "disallowedTools names \"apply_patch\", which this agent does not have (no effect)",
                "effort \"high\" is not applied: the child's harness (test) has no reasoning effort setting (only \
                 anthropic and openai do)"
            ]
        );
        // no tools named: all of the parent's but the delegating ones and the disallowed
        let all = parse_profile(
            "---\nname: all\ndescription: d\ndisallowedTools: [bash]\n---\nGo.\n",
            "all",
        )
        .unwrap();
        assert_eq!(
            judge_profile(&parent(), &all).tools,
            ["grep", "note", "read_file"]
        );
    }

    #[test]
    fn a_profile_wider_than_its_parent_or_malformed_is_refused() {
        let wide = parse_profile(
            "---\nname: w\ndescription: d\ntools: [read_file, write_file]\n---\nGo.\n",
            "w",
        )
        .unwrap();
        let v = judge_profile(&parent(), &wide);
        assert_eq!(v.problems.len(), 1);
        assert!(
            v.problems[0].starts_with("tools names \"write_file\", which this agent does not have")
        );
        assert_eq!(v.tools, ["read_file"]);
        for (text, why) in [
            ("Go.\n", "starts with a --- frontmatter"),
            (
                "---\nname: x\ndescription: d\n---\nGo.\n",
                "differs from the file's name",
            ),
            ("---\nname: r\n---\nGo.\n", "`description` is missing"),
            (
                "---\nname: r\ndescription: d\nmaxTurns: 0\n---\nGo.\n",
                "maxTurns \"0\"",
            ),
            (
                "---\nname: r\ndescription: d\nisolation: vm\n---\nGo.\n",
                "isolation \"vm\"",
            ),
            (
                "---\nname: r\ndescription: d\ntools:\n  a: b\n---\nGo.\n",
                "tools must be a list",
            ),
            (
                "---\nname: r\ndescription: d\ncolour: red\n---\nGo.\n",
                "unknown key `colour`",
            ),
            ("---\nname: r\ndescription: d\n---\n\n", "no body"),
        ] {
            let e = parse_profile(text, "r").unwrap_err();
            assert!(e.contains(why), "{text:?}: {e}");
        }
        let worktree = parse_profile(
            "---\nname: r\ndescription: d\nisolation: worktree\n---\nGo.\n",
            "r",
        )
        .unwrap();
        assert!(worktree.worktree);
    }

    #[test]
    fn the_child_is_the_parent_narrowed_to_the_verdict() {
        let parent = crate::parse_manifest(
            "[agent]\nname = \"p\"\n[harness]\nprovider = \"test\"\n[harnesses.cheap]\nprovider = \"test\"\necho = true\n\
             [session]\nlayers = [\"file\"]\n[supervisor]\nenabled = true\n\
             [tools]\nread_file = \"builtin\"\nbash = \"builtin\"\ndelegate = \"builtin\"\n\
             [capabilities]\nread_file = { read_paths = [\"./\"] }\nbash = { commands = \"*\" }\ndelegate = \"*\"\n",
            "agent.toml",
            &std::collections::BTreeMap::new(),
        )
        .unwrap();
        let profile = crate::parse_profile(
            "---\nname: r\ndescription: reads\nmodel: cheap\nmaxTurns: 4\n---\nRead only.\n",
            "r",
        )
        .unwrap();
        let verdict = crate::judge_profile(&parent, &profile);
        assert_eq!(verdict.tools, ["bash", "read_file"]);
        let with_bash = profile_manifest(&parent, &profile, &verdict);
        assert!(!with_bash.tools.contains_key("delegate"));
        let narrow = crate::parse_profile(
            "---\nname: r\ndescription: reads\nmodel: cheap\nmaxTurns: 4\ntools: [read_file]\n---\nRead only.\n",
            "r",
        )
        .unwrap();
        let v = crate::judge_profile(&parent, &narrow);
        let m = profile_manifest(&parent, &narrow, &v);
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
            Some(crate::SystemPrompt::Text("Read only.".into()))
        );
        // a profile cannot raise the request budget above this agent's (16, the default)
        let greedy = crate::parse_profile(
            "---\nname: g\ndescription: d\nmaxTurns: 500\n---\nGo.\n",
            "g",
        )
        .unwrap();
        let v = crate::judge_profile(&parent, &greedy);
        let m = profile_manifest(&parent, &greedy, &v);
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

    #[test]
    fn a_profile_s_effort_replaces_the_reasoning_setting_of_a_harness_that_has_one() {
        let parent = crate::parse_manifest(
            "[agent]\nname = \"p\"\n[harness]\nprovider = \"anthropic\"\nmaxTokens = 32000\nthinkingBudget = 2048\n\
             [harnesses.fast]\nprovider = \"openai\"\nmodel = \"gpt-5-mini\"\n[harnesses.local]\nprovider = \"test\"\n\
             echo = true\n[tools]\nread_file = \"builtin\"\n",
            "agent.toml",
            &std::collections::BTreeMap::new(),
        )
        .unwrap();
        let config = |model: &str| {
            let p = crate::parse_profile(
                &format!("---\nname: r\ndescription: d\n{model}effort: high\n---\nGo.\n"),
                "r",
            )
            .unwrap();
            let v = crate::judge_profile(&parent, &p);
            (
                profile_manifest(&parent, &p, &v).harness.unwrap().config,
                v.notes,
            )
        };
        let (anthropic, notes) = config("");
        assert_eq!(
            anthropic.get("effort").and_then(toml::Value::as_str),
            Some("high")
        );
        assert!(anthropic.get("thinkingBudget").is_none());
        assert!(notes.is_empty(), "{notes:?}");
        let (openai, _) = config("model: fast\n");
        assert_eq!(
            openai.get("effort").and_then(toml::Value::as_str),
            Some("high")
        );
        let (test, notes) = config("model: local\n");
        assert!(test.get("effort").is_none());
        assert_eq!(notes.len(), 1, "{notes:?}");
    }
}
