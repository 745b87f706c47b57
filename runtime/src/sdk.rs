//! The SDK: the same manifest as a Rust value. [`AgentDef`] holds the manifest as a TOML table — exactly the shape
//! of `agent.toml`, parsed by the same closed grammar, so errors name the same keys — and any slot may hold an
//! instance built in code instead of a spec: the harness, and each session layer (e.g. a [`CompactingLayer`] you
//! keep a handle to for a `/compact` command).
//!
//! Instances never widen authority: tools, grants, the ceiling and the boot law check come from the manifest table
//! exactly as from a file, and `loom audit` of the same table reports the same surface. An instance layer appears
//! in the manifest under its own [`Layer::name`], so the audit still shows the chain.
//!
//! [`CompactingLayer`]: crate::CompactingLayer

use std::path::PathBuf;
use std::sync::Arc;

use loom_kernel::manifest_from_table;

use crate::boot::{boot_with, BootError, BootOptions, Booted, Prebuilt};
use crate::harness::Harness;
use crate::load::{env_map, LoadError, Loaded};
use crate::session::Layer;

/// One layer of an SDK session, top first.
pub enum LayerSlot {
    /// A layer written as `[[session.layers]]` would write it: `provider` and its config keys.
    Spec(toml::Table),
    /// A layer built in code, used as it is.
    Instance(Box<dyn Layer>),
}

impl LayerSlot {
    /// A built-in layer by name with no config (`"in-memory"`, `"file"`, …).
    pub fn named(provider: &str) -> LayerSlot {
        let mut t = toml::Table::new();
        t.insert("provider".into(), toml::Value::String(provider.into()));
        LayerSlot::Spec(t)
    }
}

/// An agent defined in code.
pub struct AgentDef {
    /// The manifest, as the TOML table `agent.toml` would parse to. Agent fields may sit at the top level
    /// (`name = "..."`) or in `[agent]`.
    pub manifest: toml::Table,
    /// Where paths in the manifest resolve (the role of the manifest's directory).
    pub dir: PathBuf,
    /// A harness built in code, used instead of `[harness]` (`maxTurnRequests` is still read from `[harness]` when
    /// present).
    pub harness: Option<Arc<dyn Harness>>,
    /// The session as slots, used instead of `[session]`.
    pub session: Option<Vec<LayerSlot>>,
}

impl AgentDef {
    /// A definition from a manifest table, with every slot taken from the table.
    pub fn new(manifest: toml::Table, dir: impl Into<PathBuf>) -> AgentDef {
        AgentDef {
            manifest,
            dir: dir.into(),
            harness: None,
            session: None,
        }
    }
}

/// Boots an agent from `def`: the SDK's `runAgent(manifest)`. Errors are the boot errors a file would give, naming
/// keys as `agent.toml` would (the file is shown as `<name>.sdk` in `dir`).
pub fn run_agent(def: AgentDef, opts: BootOptions) -> Result<Booted, BootError> {
    let mut table = def.manifest;
    let mut layers = Vec::new();
    if let Some(slots) = def.session {
        let mut specs = Vec::new();
        for slot in slots {
            match slot {
                LayerSlot::Spec(t) => {
                    specs.push(toml::Value::Table(t));
                    layers.push(None);
                }
                LayerSlot::Instance(layer) => {
                    let mut t = toml::Table::new();
                    t.insert(
                        "provider".into(),
                        toml::Value::String(layer.name().to_string()),
                    );
                    specs.push(toml::Value::Table(t));
                    layers.push(Some(layer));
                }
            }
        }
        let mut session = toml::Table::new();
        session.insert("layers".into(), toml::Value::Array(specs));
        table.insert("session".into(), toml::Value::Table(session));
    }
    let name = table
        .get("name")
        .or_else(|| table.get("agent").and_then(|a| a.get("name")))
        .and_then(toml::Value::as_str)
        .unwrap_or("agent")
        .to_string();
    let path = def.dir.join(format!("{name}.sdk"));
    let manifest = manifest_from_table(&table, &path.display().to_string(), "", &env_map())
        .map_err(|e| BootError::Load(LoadError::Manifest(e)))?;
    let loaded = Arc::new(Loaded {
        path,
        dir: def.dir,
        manifest,
    });
    boot_with(
        loaded,
        opts,
        Prebuilt {
            harness: def.harness,
            layers,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CompactingConfig, CompactingLayer};
    use loom_harness::TestHarness;

    fn table(text: &str) -> toml::Table {
        toml::from_str(text).unwrap()
    }

    fn opts(dir: &std::path::Path) -> BootOptions {
        BootOptions {
            cwd: Some(dir.to_path_buf()),
            ..BootOptions::default()
        }
    }

    #[test]
    fn instances_fill_their_slots_and_specs_are_built_as_from_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut def = AgentDef::new(
            table("name = \"sdk\"\n[tools]\nread_file = \"builtin\"\n[capabilities]\nread_file = { paths = [\"./\"] }\n"),
            dir.path(),
        );
        def.harness = Some(Arc::new(TestHarness::echo()));
        let (config, _) = CompactingConfig::from_toml(&toml::Table::new(), dir.path()).unwrap();
        def.session = Some(vec![
            LayerSlot::Instance(Box::new(CompactingLayer::heuristic(config).unwrap())),
            LayerSlot::named("in-memory"),
        ]);
        let booted = run_agent(def, opts(dir.path())).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let out = rt.block_on(booted.agent.prompt("hi from code", Default::default()));
        assert_eq!(out.final_text, "hi from code");
        let names: Vec<String> = booted
            .agent
            .tool_specs()
            .into_iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(names, ["read_file"]);
    }

    #[test]
    fn the_table_is_checked_by_the_same_grammar_and_the_harness_slot_is_required() {
        let dir = tempfile::tempdir().unwrap();
        let bad = AgentDef::new(table("name = \"sdk\"\nsytem_prompt = \"x\"\n"), dir.path());
        let err = run_agent(bad, opts(dir.path())).err().unwrap().to_string();
        assert!(
            err.contains("sytem_prompt") && err.contains("did you mean system_prompt"),
            "{err}"
        );
        let no_harness = AgentDef::new(table("name = \"sdk\"\n"), dir.path());
        let err = run_agent(no_harness, opts(dir.path()))
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("no [harness]"), "{err}");
    }

    #[test]
    fn a_harness_instance_gets_no_more_than_the_manifest_grants() {
        let dir = tempfile::tempdir().unwrap();
        // a harness instance asks to read outside the grant the manifest value gives
        let mut def = AgentDef::new(
            table(
                "name = \"sdk\"\n[tools]\nread_file = \"builtin\"\n[capabilities]\nread_file = { paths = [\"./\"] }\n",
            ),
            dir.path(),
        );
        let script = table(
            "script = [[ { call = { tool = \"read_file\", input = { path = \"/etc/passwd\" } } }, { say = \"x\" } ]]",
        );
        def.harness = Some(Arc::new(TestHarness::from_config(&script).unwrap()));
        def.session = Some(vec![LayerSlot::named("in-memory")]);
        let agent = run_agent(def, opts(dir.path())).unwrap().agent;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(agent.prompt("read it", Default::default()));
        let history = rt.block_on(agent.preamble("")).unwrap().events;
        let result = history
            .iter()
            .find_map(|u| match u {
                loom_protocol::SessionUpdate::ToolCallUpdate(t) => Some(t.text()),
                _ => None,
            })
            .unwrap();
        assert!(result.contains("outside this tool's grant"), "{result}");
    }
}
