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
//! - `boot`: manifest -> [`Agent`] ([`boot_with`]), what it takes and gives (`boot/options.rs`), and the sub-agent
//!   tool, which boots a child through the entry point boot hands it.
//! - `session`: the [`Layer`] trait, the [`Chain`], `to_messages` (stored events -> conversation), and the
//!   `in-memory` / `file` / `compacting` / `skills` layers; `compactor` holds the [`Compactor`] trait with the
//!   [`HeuristicCompactor`] and the [`ModelCompactor`]. The turn loop runs [`Chain::compact`] before each request
//!   and once more, forced, on a context overflow (then retries the request once). New layers implement [`Layer`]
//!   and register in [`build_chain`].
//! - `providers`: external provider processes and MCP servers — install, lock, start, and their three adapters (a
//!   tool, a session layer, a harness), so nothing else in the crate knows a provider process exists.
//! - `secrets`: the [`SecretChain`]; `hooks`, `approvals`, `storage`, `load`, `baseline`; `sdk`, `repl`, `prompt`:
//!   the front ends' entry points.
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
mod baseline;
mod boot;
mod contributed;
mod display;
mod explain;
mod hooks;
mod inspect;
mod load;
mod prompt;
mod providers;
mod repl;
mod retry;
mod sdk;
mod secrets;
mod session;
mod storage;

use loom_harness as harness;
use loom_mcp as mcp;
use loom_protocol::{bus, model, update};
use loom_tools as tools;

#[cfg(test)]
mod tests;

pub use agent::{
    Agent, AgentParts, AskAnswer, Asker, Explanation, PermissionAsk, Preamble, ToolSlot,
    TurnOutcome,
};
pub use approvals::{ApprovalStore, Remembered};
pub use authority::{resolve_authority, secret_stores, AuthorityPlace};
pub use baseline::git_show;
pub use baseline::{git_baseline, BaselineSpec};
pub use boot::{boot, boot_loaded, boot_with, BootError, BootOptions, Booted, Prebuilt};
pub use display::terminal_safe;
pub use explain::explain_call;
pub use inspect::{inspect_server, Inspected};
pub use load::{
    env_map, load_manifest, load_manifest_with_env, path_ctx, read_text, FsLoader, LoadError,
    Loaded,
};
pub use prompt::{prompt_blocking, PromptSink};
pub use providers::resolve_mcp_tools;
pub use providers::Resolved;
pub use providers::{
    install, provider_infos, shipped_sources, shipped_states, sources as provider_sources,
    InstallOptions, ProviderInfo,
};
pub use repl::{answer_line, ask_question, run_repl, Command, ReplUi, TurnStats};
pub use retry::{Sleeper, MAX_RETRY_AFTER};
pub use sdk::{run_agent, AgentDef, LayerSlot};
pub use secrets::SecretChain;
pub use session::{build_chain, discover, SkillsLayer};
pub use session::{manifest_skills, session_group, Discovery, SkillSource, SkillsEnv};
pub use session::{
    resumable_log, Chain, CompactCtx, CompactMode, CompactingConfig, CompactingLayer, Compaction,
    Compactor, FileLayer, HeuristicCompactor, Layer, MemoryLayer, ModelCompactor, SessionError,
    SummaryError,
};
pub use storage::{data_home, models_dir, run_id, storage_dir};
