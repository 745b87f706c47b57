//! Sessions are layers. Push flows top to bottom (each layer may transform, drop or fan out an event; storage layers
//! retain what reaches them), pull flows bottom to top (each layer may rewrite the history below it; the top's
//! result is what the model sees), and the other hooks (system prompt sections, `prepare_turn`, `close`) aggregate
//! across layers.
//!
//! The history is a list of [`SessionUpdate`]s (the same ACP shapes hosts see); [`to_messages`] turns it into the
//! conversation a harness sends. Frames are pushed (layers may observe them) but never stored; tool progress never
//! reaches the session.
//!
//! Compaction is a hook of its own ([`Layer::compact`]): the turn loop runs it before each model request
//! ([`CompactMode::Auto`]: a layer compacts when its threshold trips) and once more when the provider reports a
//! context overflow ([`CompactMode::Forced`]); each layer gets the history the layers below it produce and the
//! agent's harness, so a model compactor can summarise through it.

mod compacting;
pub(crate) mod compactor;
mod file;
mod history;
mod memory;
mod skills;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::harness::Harness;
use crate::update::SessionUpdate;

pub use compacting::{CompactingConfig, CompactingLayer, PAUSE_AFTER_FAILURE};
pub use compactor::{Compactor, HeuristicCompactor, ModelCompactor, SummaryError};
pub use file::FileLayer;
pub use history::to_messages;
pub use memory::MemoryLayer;
pub use skills::{
    layer_roots, manifest_skills, session_group, skill_roots, Discovery, Keeper, SkillSource,
    SkillsEnv, SkillsLayer,
};

/// What a compaction may use: the agent's harness (a model compactor summarises through it) and the turn's
/// cancellation token.
#[derive(Clone, Copy)]
pub struct CompactCtx<'a> {
    /// The agent's harness.
    pub harness: &'a dyn Harness,
    /// Cancels the summarisation.
    pub cancel: &'a CancellationToken,
}

/// Why a compaction runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactMode {
    /// Before a request: only when the layer's threshold trips and automatic compaction is not paused.
    Auto,
    /// Now, regardless of thresholds and pauses (a context overflow, `/compact`).
    Forced,
}

/// What one layer's compaction did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Compaction {
    /// The older events were replaced by a summary.
    Compacted {
        /// The layer.
        layer: String,
        /// Events shown before.
        before: usize,
        /// Events shown after (the summary included).
        after: usize,
    },
    /// No summary came back; the history was kept as it was.
    Failed {
        /// The layer.
        layer: String,
        /// The actual cause.
        cause: String,
    },
}

impl std::fmt::Display for Compaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Compaction::Compacted {
                layer,
                before,
                after,
            } => write!(f, "{layer}: compacted {before} events to {after}"),
            Compaction::Failed { layer, cause } => write!(f, "{layer}: compaction failed: {cause}"),
        }
    }
}

/// Why a session operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// Reading or writing the session file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// Another process is writing the log.
    #[error(
        "{path}: another loom process is writing this session log, and a second writer would interleave its events; \
         wait for it to end, or give this run state of its own (--run-id or LOOM_RUN_ID)"
    )]
    Busy {
        /// The file.
        path: String,
    },
    /// A stored line is not a session event (hand-edited or corrupted), other than a torn last line.
    #[error("{path}:{line}: not a session event ({reason}); fix or remove that line (earlier history is intact)")]
    Corrupt {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// The parse error.
        reason: String,
    },
    /// A compaction state file does not parse. It is left as it is; boot stops rather than lose the summary.
    #[error(
        "{path}: not a compaction state file ({reason}); fix or remove it (the history the storage layer keeps is \
         intact; removing the file drops only the summary)"
    )]
    State {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// The chain cannot be built.
    #[error("{0}")]
    Config(String),
}

/// One layer of a session chain.
pub trait Layer: Send {
    /// The layer's provider name (`in-memory`, `file`, …).
    fn name(&self) -> &str;

    /// True for storage layers (they retain events); false for pass-through layers.
    fn stores(&self) -> bool;

    /// Takes events flowing down and returns what flows on to the layer below. Storage layers retain non-frame
    /// events and pass everything on.
    fn push(&mut self, events: Vec<SessionUpdate>) -> Result<Vec<SessionUpdate>, SessionError>;

    /// Takes the history the layers below produced and returns it, possibly rewritten or extended with what this
    /// layer stores.
    fn pull(&self, below: Vec<SessionUpdate>) -> Result<Vec<SessionUpdate>, SessionError>;

    /// A system prompt section this layer contributes.
    fn system_prompt_section(&self) -> Option<String> {
        None
    }

    /// Labeled tool groups this layer contributes (`[tools]`-shaped, judged against the effective ceiling at boot).
    fn tools(&self) -> Vec<loom_kernel::ToolGroup> {
        Vec::new()
    }

    /// What the layer wants the user to know at boot (malformed skills it skipped).
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }

    /// Boot's verdicts on the groups this layer contributed: the labels of the accepted ones (the rest are trimmed,
    /// invisible to the model), and the kernel's rule for re-judging a group mid-session.
    fn bind(&mut self, _accepted: &BTreeSet<String>, _keeps: Keeper) {}

    /// The implementation of a `provider = "session"` tool this layer provides.
    fn session_tool(&self, _name: &str) -> Option<Arc<dyn crate::tools::Tool>> {
        None
    }

    /// The grant the kernel decides calls of that session tool under.
    fn session_tool_grant(&self, _name: &str) -> Option<loom_kernel::Grant> {
        None
    }

    /// What happened since the last call that the user should be told (a skill dropped by a rescan); each notice is
    /// returned once.
    fn take_notices(&mut self) -> Vec<String> {
        Vec::new()
    }

    /// Runs before each turn (skill rescans hook in here).
    fn prepare_turn(&mut self) -> BoxFuture<'_, Result<(), SessionError>> {
        Box::pin(async { Ok(()) })
    }

    /// True for layers that compact (the chain skips the others when compacting).
    fn compacts(&self) -> bool {
        false
    }

    /// Compacts what this layer shows, given the history the layers below produce. `None` when nothing was done.
    fn compact<'a>(
        &'a mut self,
        _below: &'a [SessionUpdate],
        _mode: CompactMode,
        _ctx: &'a CompactCtx<'a>,
    ) -> BoxFuture<'a, Result<Option<Compaction>, SessionError>> {
        Box::pin(async { Ok(None) })
    }

    /// The tokens the last request used, when this layer keeps usage.
    fn tokens_in_context(&self) -> Option<u64> {
        None
    }

    /// Flushes and releases what the layer holds.
    fn close(&mut self) -> BoxFuture<'_, Result<(), SessionError>> {
        Box::pin(async { Ok(()) })
    }
}

/// A chain of layers, top first.
pub struct Chain {
    layers: Vec<Box<dyn Layer>>,
}

impl std::fmt::Debug for Chain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.layers.iter().map(|l| l.name()))
            .finish()
    }
}

impl Chain {
    /// A chain of `layers` (top first). Refused when no layer stores: every turn would see an empty history.
    pub fn new(layers: Vec<Box<dyn Layer>>) -> Result<Chain, SessionError> {
        if !layers.iter().any(|l| l.stores()) {
            return Err(SessionError::Config(format!(
                "session: no layer stores events ({}); every turn would see an empty history — end the chain with \
                 a storage layer such as \"in-memory\" or \"file\"",
                layers.iter().map(|l| l.name()).collect::<Vec<_>>().join(" -> ")
            )));
        }
        Ok(Chain { layers })
    }

    /// Pushes events down the chain.
    pub fn push(&mut self, events: Vec<SessionUpdate>) -> Result<(), SessionError> {
        let mut flowing = events;
        for layer in self.layers.iter_mut() {
            flowing = layer.push(flowing)?;
            if flowing.is_empty() {
                break;
            }
        }
        Ok(())
    }

    /// Pulls the history up the chain.
    pub fn pull(&self) -> Result<Vec<SessionUpdate>, SessionError> {
        let mut history = Vec::new();
        for layer in self.layers.iter().rev() {
            history = layer.pull(history)?;
        }
        Ok(history)
    }

    /// Every layer's system prompt section, top first.
    pub fn system_prompt_sections(&self) -> Vec<String> {
        self.layers
            .iter()
            .filter_map(|l| l.system_prompt_section())
            .collect()
    }

    /// Every layer's tool groups, top first, with the layer's name.
    pub fn tool_groups(&self) -> Vec<(String, loom_kernel::ToolGroup)> {
        self.layers
            .iter()
            .flat_map(|l| l.tools().into_iter().map(|g| (l.name().to_string(), g)))
            .collect()
    }

    /// Every layer's pending notices, top first (see [`Layer::take_notices`]).
    pub fn take_notices(&mut self) -> Vec<String> {
        self.layers
            .iter_mut()
            .flat_map(|l| l.take_notices())
            .collect()
    }

    /// Every layer's boot notes, top first.
    pub fn notes(&self) -> Vec<String> {
        self.layers.iter().flat_map(|l| l.notes()).collect()
    }

    /// Tells every layer which contributed groups boot accepted (see [`Layer::bind`]).
    pub fn bind(&mut self, accepted: &BTreeSet<String>, keeps: Keeper) {
        for l in self.layers.iter_mut() {
            l.bind(accepted, keeps.clone());
        }
    }

    /// The first layer's implementation of session tool `name`, with its grant.
    pub fn session_tool(
        &self,
        name: &str,
    ) -> Option<(Arc<dyn crate::tools::Tool>, loom_kernel::Grant)> {
        self.layers
            .iter()
            .find_map(|l| Some((l.session_tool(name)?, l.session_tool_grant(name)?)))
    }

    /// True when some layer compacts.
    pub fn compacts(&self) -> bool {
        self.layers.iter().any(|l| l.compacts())
    }

    /// Runs every compacting layer's [`Layer::compact`], bottom first, each over the history the layers below it
    /// produce. Returns what each did.
    pub async fn compact(
        &mut self,
        mode: CompactMode,
        ctx: &CompactCtx<'_>,
    ) -> Result<Vec<Compaction>, SessionError> {
        let mut reports = Vec::new();
        if !self.compacts() {
            return Ok(reports);
        }
        let mut history = Vec::new();
        for layer in self.layers.iter_mut().rev() {
            if layer.compacts() {
                reports.extend(layer.compact(&history, mode, ctx).await?);
            }
            history = layer.pull(history)?;
        }
        Ok(reports)
    }

    /// The tokens the last request used, as the topmost layer that keeps usage knows them.
    pub fn tokens_in_context(&self) -> Option<u64> {
        self.layers.iter().find_map(|l| l.tokens_in_context())
    }

    /// Runs every layer's `prepare_turn`, bottom first.
    pub async fn prepare_turn(&mut self) -> Result<(), SessionError> {
        for layer in self.layers.iter_mut().rev() {
            layer.prepare_turn().await?;
        }
        Ok(())
    }

    /// Closes every layer, top first; the first error is returned after all were closed.
    pub async fn close(&mut self) -> Result<(), SessionError> {
        let mut first = None;
        for layer in self.layers.iter_mut() {
            if let Err(e) = layer.close().await {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }
}

/// Where the chain's files go.
#[derive(Debug, Clone)]
pub struct SessionPlace {
    /// The manifest's directory (relative `path`s resolve here).
    pub manifest_dir: PathBuf,
    /// The agent's storage directory (created when a layer needs it).
    pub storage: PathBuf,
    /// The spawning agent's history, when this is a sub-agent (`fork-of-parent` starts from it).
    pub parent_history: Option<Vec<SessionUpdate>>,
    /// What the skills layer needs to find and compile skills.
    pub skills: SkillsEnv,
    /// Layers contributed from outside the chain (a started provider's session layers), by `[providers]` handle.
    pub providers: std::collections::BTreeMap<String, Arc<dyn LayerSource>>,
    /// The manifest's named harnesses (`[harnesses.NAME]`), built: a compacting layer's `summarizer` may name one.
    pub harnesses: NamedHarnesses,
}

/// The manifest's named harnesses (`[harnesses.NAME]`), built at boot, by name.
#[derive(Clone, Default)]
pub struct NamedHarnesses(pub std::collections::BTreeMap<String, Arc<dyn Harness>>);

impl std::fmt::Debug for NamedHarnesses {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.keys()).finish()
    }
}

/// Where the chain gets a layer it does not build itself: a `[session]` entry naming a `[providers]` handle.
pub trait LayerSource: Send + Sync + std::fmt::Debug {
    /// The layer `layer` (the spec's `layer` key; `None`: the source's first) storing the session `session` (the
    /// agent's storage id).
    fn layer(&self, layer: Option<&str>, session: &str) -> Result<Box<dyn Layer>, SessionError>;
}

/// Where a `file` layer keeps its log: its `path` (relative to the manifest's directory), else `session.jsonl` in
/// the agent's storage directory.
pub fn file_log_path(
    spec: &loom_kernel::LayerSpec,
    manifest_dir: &Path,
    storage: &Path,
) -> PathBuf {
    match spec.config.get("path").and_then(toml::Value::as_str) {
        Some(p) if Path::new(p).is_absolute() => PathBuf::from(p),
        // `./x` and `x` are the same log (components() drops the `.`)
        Some(p) => manifest_dir.join(p).components().collect(),
        None => storage.join("session.jsonl"),
    }
}

/// The log of the first `file` layer of `session`, when the chain has one: the history that outlives the process
/// and can be resumed.
pub fn resumable_log(
    session: &loom_kernel::SessionSpec,
    manifest_dir: &Path,
    storage: &Path,
) -> Option<PathBuf> {
    session
        .layers
        .iter()
        .find(|l| l.provider == "file")
        .map(|spec| file_log_path(spec, manifest_dir, storage))
}

/// Builds the chain `[session]` declares (`[session]` absent: skills -> compacting -> in-memory). Layers not
/// implemented are refused by name, never dropped.
#[cfg(test)]
pub fn build_chain(
    session: &loom_kernel::SessionSpec,
    place: &SessionPlace,
) -> Result<(Chain, Vec<String>), SessionError> {
    build_chain_with(session, place, Vec::new())
}

/// [`build_chain`] where some layers are already built (the SDK's instances): `instances[i]`, when present, is
/// used for layer `i` of `session` instead of building it from its spec.
pub fn build_chain_with(
    session: &loom_kernel::SessionSpec,
    place: &SessionPlace,
    mut instances: Vec<Option<Box<dyn Layer>>>,
) -> Result<(Chain, Vec<String>), SessionError> {
    let mut notes = Vec::new();
    let specs: Vec<&loom_kernel::LayerSpec> = session.layers.iter().collect();
    let mut persisted: Option<PathBuf> = None;
    let mut layers: Vec<Box<dyn Layer>> = Vec::new();
    for (i, spec) in specs.into_iter().enumerate() {
        if let Some(layer) = instances.get_mut(i).and_then(Option::take) {
            layers.push(layer);
            continue;
        }
        let layer: Box<dyn Layer> = match spec.provider.as_str() {
            "in-memory" => Box::new(MemoryLayer::default()),
            "skills" => {
                let (roots, note) = layer_roots(&spec.config, &place.manifest_dir, &place.skills);
                Box::new(
                    SkillsLayer::tagged(&roots, place.skills.clone(), note)
                        .keeping_loaded_in(place.storage.join("skills/loaded.json")),
                )
            }
            "compacting" => {
                let (config, config_notes) = CompactingConfig::from_toml(&spec.config, &place.storage)?;
                if let Some(path) = &config.persist {
                    if persisted.replace(path.clone()).is_some() {
                        return Err(SessionError::Config(format!(
                            "session: two compacting layers persist to the same file {}; set persist = true on one",
                            path.display()
                        )));
                    }
                }
                notes.extend(config_notes);
                // the summarizer: the heuristic (default), the agent's own model, or a named harness
                let compactor: Arc<dyn Compactor> = match spec
                    .config
                    .get("summarizer")
                    .and_then(toml::Value::as_str)
                {
                    None | Some("heuristic") => Arc::new(HeuristicCompactor),
                    Some("model") => Arc::new(ModelCompactor::sized_by_harness()),
                    Some(name) => {
                        let h = place.harnesses.0.get(name).ok_or_else(|| {
                            SessionError::Config(format!(
                                "session.compacting.summarizer: names no harness {name:?} that was built"
                            ))
                        })?;
                        Arc::new(ModelCompactor::sized_by_harness().with_harness(h.clone()))
                    }
                };
                Box::new(CompactingLayer::new(config, compactor)?)
            }
            "file" => {
                let (layer, note) = FileLayer::open(&file_log_path(
                    spec,
                    &place.manifest_dir,
                    &place.storage,
                ))?;
                notes.extend(note);
                Box::new(layer)
            }
            "fork-of-parent" => match &place.parent_history {
                Some(h) => Box::new(MemoryLayer::seeded(h.clone())),
                None => {
                    return Err(SessionError::Config(
                        "session: the \"fork-of-parent\" layer starts from the history of the agent that spawned \
                         this one, so it works only in a sub-agent's manifest; use \"in-memory\" or \"file\" here"
                            .into(),
                    ))
                }
            },
            other if place.providers.contains_key(other) => {
                let session = place
                    .storage
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                place.providers[other]
                    .layer(spec.config.get("layer").and_then(toml::Value::as_str), &session)?
            }
            other => {
                return Err(SessionError::Config(format!(
                    "session: the {other:?} layer is not supported yet by this build of loom (supported: \
                     \"in-memory\", \"file\", \"compacting\", \"skills\", \"fork-of-parent\", or a [providers] path/npm/git \
                     handle whose provider offers a session layer); remove it from [session] for now"
                )))
            }
        };
        layers.push(layer);
    }
    Ok((Chain::new(layers)?, notes))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct PassThrough;
    impl Layer for PassThrough {
        fn name(&self) -> &str {
            "pass"
        }
        fn stores(&self) -> bool {
            false
        }
        fn push(&mut self, e: Vec<SessionUpdate>) -> Result<Vec<SessionUpdate>, SessionError> {
            Ok(e)
        }
        fn pull(&self, below: Vec<SessionUpdate>) -> Result<Vec<SessionUpdate>, SessionError> {
            Ok(below)
        }
    }

    /// Drops agent chunks on push; upper-cases user text on pull.
    struct Rewrite;
    impl Layer for Rewrite {
        fn name(&self) -> &str {
            "rewrite"
        }
        fn stores(&self) -> bool {
            false
        }
        fn push(&mut self, e: Vec<SessionUpdate>) -> Result<Vec<SessionUpdate>, SessionError> {
            Ok(e.into_iter()
                .filter(|u| !matches!(u, SessionUpdate::AgentMessageChunk(_)))
                .collect())
        }
        fn pull(&self, below: Vec<SessionUpdate>) -> Result<Vec<SessionUpdate>, SessionError> {
            Ok(below
                .into_iter()
                .map(|u| match u {
                    SessionUpdate::UserMessageChunk(mut c) => {
                        c.content =
                            crate::update::Content::text(c.content.as_text().to_uppercase());
                        SessionUpdate::UserMessageChunk(c)
                    }
                    other => other,
                })
                .collect())
        }
        fn system_prompt_section(&self) -> Option<String> {
            Some("from rewrite".into())
        }
    }

    #[test]
    fn push_flows_down_and_pull_flows_up() {
        use crate::update::{Chunk, Content};
        let chunk = |t: &str| Chunk {
            content: Content::text(t),
            message_id: None,
        };
        let mut chain =
            Chain::new(vec![Box::new(Rewrite), Box::new(MemoryLayer::default())]).unwrap();
        chain
            .push(vec![
                SessionUpdate::UserMessageChunk(chunk("hi")),
                SessionUpdate::AgentMessageChunk(chunk("dropped above storage")),
            ])
            .unwrap();
        assert_eq!(
            chain.pull().unwrap(),
            vec![SessionUpdate::UserMessageChunk(chunk("HI"))]
        );
        assert_eq!(chain.system_prompt_sections(), ["from rewrite"]);
    }

    #[test]
    fn a_chain_without_storage_is_refused() {
        let err = Chain::new(vec![Box::new(PassThrough)])
            .unwrap_err()
            .to_string();
        assert!(err.contains("no layer stores"), "{err}");
        assert!(Chain::new(vec![
            Box::new(PassThrough),
            Box::new(MemoryLayer::default())
        ])
        .is_ok());
    }

    fn chain_of(toml: &str, storage: &Path) -> Result<(Chain, Vec<String>), SessionError> {
        let m = loom_kernel::parse_manifest(
            &format!("[agent]\nname = \"a\"\n{toml}"),
            "agent.toml",
            &Default::default(),
        )
        .unwrap();
        let place = SessionPlace {
            manifest_dir: storage.to_path_buf(),
            storage: storage.to_path_buf(),
            parent_history: None,
            skills: SkillsEnv {
                home: Some(storage.join("home")),
                ..SkillsEnv::default()
            },
            providers: Default::default(),
            harnesses: NamedHarnesses::default(),
        };
        build_chain(&m.session, &place)
    }

    #[test]
    fn the_default_chain_is_skills_over_compacting_over_in_memory() {
        let d = tempfile::tempdir().unwrap();
        let (chain, notes) = chain_of("", d.path()).unwrap();
        assert_eq!(
            format!("{chain:?}"),
            r#"["skills", "compacting", "in-memory"]"#
        );
        assert!(chain.compacts());
        assert!(notes.is_empty(), "{notes:?}");
        // the skills layer contributes the session's read_skill group, and no skill exists: no catalog
        let groups = chain.tool_groups();
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].1.label, skills::SKILLS_SESSION_GROUP);
        assert!(chain.system_prompt_sections().is_empty());
    }

    #[test]
    fn compacting_is_configured_from_toml() {
        let d = tempfile::tempdir().unwrap();
        let (chain, notes) = chain_of(
            "[session]\nlayers = [\"compacting\", \"file\"]\n[session.compacting]\nthreshold = 5\nkeep = 4\n\
             persist = true\ntoken_fraction = 0.5\n",
            d.path(),
        )
        .unwrap();
        assert_eq!(format!("{chain:?}"), r#"["compacting", "file"]"#);
        // token_fraction applies once the harness reports its context window: no note about it
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0]
            .contains("threshold 5 is at or below keep + 2 (keep = 4), so it was raised to 8"));

        let err = chain_of(
            "[session]\nlayers = [\"compacting\", \"in-memory\"]\n[session.compacting]\ntoken_fraction = 0.5\n\
             tokenFraction = 0.6\n",
            d.path(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("token_fraction and tokenFraction are the same setting"),
            "{err}"
        );

        let err = chain_of(
            "[session]\nlayers = [{ provider = \"compacting\", persist = true }, { provider = \"compacting\", \
             persist = true }, { provider = \"in-memory\" }]\n",
            d.path(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("two compacting layers persist to the same file"),
            "{err}"
        );
    }
}
