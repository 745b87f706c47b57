//! What boot takes and gives: [`BootOptions`] (with the [`Lineage`] a sub-agent inherits), [`Prebuilt`] parts, a
//! [`Booted`] agent, or a [`BootError`] naming the file, the key and the fix.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use loom_kernel::{Authority, LawViolation};

use crate::agent::Agent;
use crate::harness::{Harness, HarnessConfigError};
use crate::load::{LoadError, Loaded};
use crate::retry::Sleeper;
use crate::secrets::Secret;
use crate::session::{Layer, SessionError};
use crate::tools::SandboxEnv;
use crate::update::SessionUpdate;

/// How an agent boots another one: [`super::boot_loaded`], passed to the tool that spawns sub-agents.
pub type BootFn = Arc<dyn Fn(Arc<Loaded>, BootOptions) -> Result<Booted, BootError> + Send + Sync>;

/// What boot needs besides the manifest.
#[derive(Clone, Default)]
pub struct BootOptions {
    /// The working directory (default: the process's).
    pub cwd: Option<PathBuf>,
    /// The caller's secret store (first in the chain).
    pub secrets: BTreeMap<String, Secret>,
    /// Where the sandbox machinery lives.
    pub sandbox: SandboxEnv,
    /// The clock retries wait on (default: tokio's).
    pub sleeper: Option<Arc<dyn Sleeper>>,
    /// What a sub-agent inherits from the agent that spawned it (default: a root agent).
    pub lineage: Lineage,
    /// Start in plan mode (`--plan`): tools that change anything are neither offered nor run.
    pub plan_mode: bool,
    /// `loom job run`'s results directory: an authority file of this agent (its file tools refuse it, its commands
    /// see it read-only), so a cell's agent cannot rewrite any cell's record.
    pub job_results: Option<PathBuf>,
}

/// A booted agent and what boot wants the user to know.
pub struct Booted {
    /// The agent.
    pub agent: Agent,
    /// Notes for stderr (a layer running reduced, a torn session line skipped).
    pub notes: Vec<String>,
}

/// Why an agent could not boot. Messages name the file, the key and the fix; they never hold a secret value.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BootError {
    /// The manifest could not be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The working directory is unusable.
    #[error("cannot use the working directory {path}: {source}")]
    Cwd {
        /// The directory.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A tool cannot be provided.
    #[error("{file}: tools.{tool}: {message}")]
    Tool {
        /// The manifest.
        file: String,
        /// The tool instance.
        tool: String,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// The manifest names something this build cannot boot (the kernel's `boot_refusals`, which audit shows too).
    #[error("{file}: {key}: {message}")]
    Refused {
        /// The manifest.
        file: String,
        /// The key: `[harness]`, `[harness].provider`, `tools.<instance>`.
        key: String,
        /// Why, and the fix.
        message: String,
    },
    /// An algebra in use breaks a lattice law.
    #[error("refusing to boot: {0}")]
    Laws(#[from] LawViolation),
    /// The harness cannot be built.
    #[error("{file}: {source}")]
    Harness {
        /// The manifest.
        file: String,
        /// Why.
        source: HarnessConfigError,
    },
    /// The session chain cannot be built.
    #[error("{file}: {source}")]
    Session {
        /// The manifest.
        file: String,
        /// Why.
        source: SessionError,
    },
    /// Secrets are missing or a secrets file is malformed.
    #[error("{file}: {message}")]
    Secrets {
        /// The manifest.
        file: String,
        /// Why (never a value).
        message: String,
    },
    /// The agent's stored state cannot be used.
    #[error("{file}: {message}")]
    Storage {
        /// The manifest.
        file: String,
        /// Why, and the fix.
        message: String,
    },
    /// A confined command still running (under this loom or another) created a protected name where this agent
    /// reads (its working directory, its manifest's directory): the agent would trust what that command made.
    #[error(
        "refusing to boot: {} did not exist when a confined command that is still running started, so that command \
         may have made it, and this agent would trust it (guidance, secrets, skills, settings); it is moved aside \
         when that command ends: start this agent once it has ended (the command's record: {record})",
        .paths.join(", ")
    )]
    Planted {
        /// What the command created.
        paths: Vec<String>,
        /// The running command's record (its name starts with its loom's pid).
        record: String,
    },
    /// The system prompt file cannot be read.
    #[error("{file}: agent.system_prompt: {message}")]
    SystemPrompt {
        /// The manifest.
        file: String,
        /// Why.
        message: String,
    },
}

/// Parts built in code (the SDK) that boot uses instead of building them from the manifest.
#[derive(Default)]
pub struct Prebuilt {
    /// The harness, instead of `[harness]`.
    pub harness: Option<Arc<dyn Harness>>,
    /// Session layers by position in `[session]`: a present entry is used instead of building that layer.
    pub layers: Vec<Option<Box<dyn Layer>>>,
}

/// What a spawned sub-agent inherits from the agent that spawns it.
#[derive(Clone, Default)]
pub struct Lineage {
    /// How many agents above this one spawned it (0: a root agent).
    pub depth: usize,
    /// The parent's history at spawn time, for a `fork-of-parent` session layer (`None` for a root agent).
    pub parent_history: Option<Vec<SessionUpdate>>,
    /// The parent's harness and `maxTurnRequests`, for a `small-model-of-parent` harness (`None` for a root agent).
    pub parent_harness: Option<(Arc<dyn Harness>, u32)>,
    /// The authority files of every agent above this one: kept out of this agent's reach too.
    pub authority: Authority,
}

/// The parent's harness, set once boot has built it (tools are built first).
pub type HarnessCell = Arc<std::sync::OnceLock<(Arc<dyn Harness>, u32)>>;
