//! # loom-runtime
//!
//! Running an agent: loading a manifest from disk, boot (ceiling, grants, the lattice law check, harness, session
//! chain, tools, secrets), the turn loop, sessions, provider processes, hooks, approvals, per-agent storage, git
//! baselines for the CI gate, the SDK, the REPL and `loom prompt`. It gathers facts and enforces the kernel's
//! answers; it never decides authority on its own — every tool call goes through [`loom_kernel::decide`] before it
//! runs. The vocabulary (messages, updates, the bus, the [`Harness`](loom_protocol::Harness) trait) is `loom-protocol`'s, the vendors are
//! `loom-harness`'s, the built-in tools `loom-tools`', the MCP client `loom-mcp`'s; this crate re-exports what its
//! users need of them.
//!
//! ## Layout (one concept per module) and the seams later work plugs into
//! - `agent`: [`Agent`] and the turn loop; `retry` (policy + injectable [`Sleeper`]); the doom-loop guard is
//!   `loom_kernel::DoomGuard`.
//! - `boot`: manifest -> [`Agent`] ([`boot`], [`boot_loaded`]), what it takes and gives (`boot/options.rs`), and the sub-agent
//!   tool, which boots a child through the entry point boot hands it.
//! - `session`: the [`Layer`] trait, the [`Chain`], `to_messages` (stored events -> conversation), and the
//!   `in-memory` / `file` / `compacting` / `skills` layers; `compactor` holds the [`Compactor`] trait with the
//!   [`HeuristicCompactor`] and the [`ModelCompactor`]. The turn loop runs [`Chain::compact`] before each request
//!   and once more, forced, on a context overflow (then retries the request once). New layers implement [`Layer`]
//!   and register in `build_chain_with` (`session/mod.rs`).
//! - `providers`: external provider processes and MCP servers — install, lock, start, and their three adapters (a
//!   tool, a session layer, a harness), so nothing else in the crate knows a provider process exists.
//! - `secrets`: the [`SecretChain`]; `hooks`, `approvals`, `storage`, `load`, `baseline`; `sdk`, `repl`, `prompt`:
//!   the front ends' entry points.
//!
//! ## Public surface
//! The crate root is the SDK: load a manifest, boot it (or build an [`Agent`] from parts), run turns, answer asks,
//! and build or extend its session. [`repl`] is the interactive loop of `loom run`; [`frontend`] what loom's other
//! commands gather from disk (authority files, baselines, installs, the MCP tools audit renders). Errors are typed
//! per operation ([`BootError`], [`LoadError`], [`SessionError`], [`ApprovalError`], [`MissingSecrets`],
//! [`ExplainError`], …) and render the message a user reads.
//!
//! ## What this crate must never do
//! Run a tool the kernel did not authorise; run a bash command outside the sandbox unless its grant is `"*"`; let a
//! harness run tools; put a secret value into a log, an update or an error; silently drop anything the manifest
//! names that it does not implement (that is a boot error naming it).
//!
//! ## Example
//! ```
//! use std::sync::Arc;
//! use loom_harness::TestHarness;
//! use loom_protocol::TurnStop;
//! use loom_runtime::{Agent, AgentParts, Chain, MemoryLayer};
//!
//! let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
//! rt.block_on(async {
//!     let session = Chain::new(vec![Box::new(MemoryLayer::default())]).unwrap();
//!     let ctx = loom_kernel::PathCtx::new("/", None);
//!     let agent = Agent::new(AgentParts::new(Arc::new(TestHarness::echo()), session, ctx));
//!     let out = agent.prompt("hello", tokio_util::sync::CancellationToken::new()).await;
//!     assert_eq!((out.stop, out.final_text.as_str()), (TurnStop::EndTurn, "hello"));
//! });
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod agent;
mod approvals;
mod authority;
mod background;
mod baseline;
mod boot;
mod contributed;
mod display;
mod environment;
mod explain;
mod guidance;
mod hooks;
mod inspect;
mod load;
mod profiles;
mod prompt;
mod providers;
mod record;
mod retry;
mod sdk;
mod secrets;
mod session;
mod storage;
mod tool_search;
mod worktrees;

use loom_harness as harness;
use loom_mcp as mcp;
use loom_protocol::{bus, model, update};
use loom_tools as tools;

#[cfg(test)]
mod tests;

// The SDK: what an embedder needs to load, boot and run an agent, answer its asks, and build its session.
pub use agent::{
    Agent, AgentParts, AskAnswer, Asker, ExplainRefusal, Explanation, PermissionAsk, Preamble,
    ToolSlot, TurnOutcome,
};
pub use approvals::{ApprovalError, ApprovalStore, Remembered};
pub use boot::{boot, boot_loaded, BootError, BootOptions, Booted};
pub use display::terminal_safe;
pub use explain::{explain_call, ExplainError};
pub use load::{env_map, load_manifest, path_ctx, LoadError, Loaded};
pub use prompt::{prompt_blocking, PromptSink};
pub use retry::{Sleeper, MAX_RETRY_AFTER};
pub use sdk::{run_agent, AgentDef, LayerSlot};
pub use secrets::{MissingSecrets, SecretChain};
pub use session::{
    resumable_log, Chain, CompactCtx, CompactMode, CompactingConfig, CompactingLayer, Compaction,
    Compactor, FileLayer, HeuristicCompactor, Layer, MemoryLayer, ModelCompactor, SessionError,
    SummaryError,
};
pub use storage::{data_home, models_dir, run_id, storage_dir, sweep_records_dir};

pub mod repl;

/// What loom's own commands gather from disk beyond running an agent: the authority files, git baselines,
/// provider installs and the MCP tools `loom audit` renders, the skills catalog, `loom mcp inspect`. For the `loom`
/// binary; embedders need none of it.
pub mod frontend {
    pub use crate::authority::{resolve_authority, secret_stores, AuthorityPlace};
    pub use crate::baseline::{git_baseline, BaselineSpec};
    pub use crate::inspect::{inspect_server, InspectError, Inspected};
    pub use crate::load::{load_manifest_with_env, read_text, FsLoader};
    pub use crate::profiles::{discover_profiles, FoundProfile};
    pub use crate::providers::{
        install, provider_infos, resolve_mcp_tools, shipped_sources, shipped_states,
        sources as provider_sources, InstallError, InstallOptions, ProviderInfo, Resolved,
    };
    pub use crate::session::{manifest_skills, session_group, Discovery, SkillSource, SkillsEnv};
    pub use crate::worktrees::{
        list_worktrees, remove_worktree_blocking, worktrees_home, Listed as ListedWorktree,
        RemoveError as WorktreeRemoveError, WorktreeRecord,
    };
}
