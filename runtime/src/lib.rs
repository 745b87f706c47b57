//! # loom-runtime
//!
//! Running an agent: loading a manifest from disk, boot (ceiling, grants, the lattice law check, harness, session
//! chain, tools, secrets), the turn loop, sessions, provider processes, hooks, approvals, per-agent storage, git
//! baselines for the CI gate, the SDK, the REPL and `loom prompt`. It gathers facts and enforces the kernel's
//! answers; it never decides authority on its own — every tool call goes through [`loom_kernel::decide`] before it
//! runs. The vocabulary (messages, updates, the bus, the [`Harness`] trait) is `loom-protocol`'s, the vendors are
//! `loom-harness`'s, the built-in tools `loom-tools`', the MCP client `loom-mcp`'s; this crate re-exports what its
//! users need of them.
//!
//! ## Layout (one concept per module) and the seams later work plugs into
//! - `agent`: [`Agent`] and the turn loop; `retry` (policy + injectable [`Sleeper`]); the doom-loop guard is
//!   `loom_kernel::DoomGuard`.
//! - `boot`: manifest -> [`Agent`] ([`boot_with`]), what it takes and gives (`boot/options.rs`), and the sub-agent
//!   tool, which boots a child through the entry point boot hands it.
//! - `session`: the [`Layer`] trait, the [`Chain`], [`to_messages`] (stored events -> conversation), and the
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
//! use loom_runtime::{Agent, AgentParts, Capacity, Chain, MemoryLayer, TestHarness, TurnStop};
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
pub use approvals::{ApprovalStore, Remembered, APPROVALS_FILE};
pub use authority::{
    resolve_authority, sandbox_paths, secret_stores, AuthorityPlace, LOOM_EXECUTABLES,
};
pub use baseline::{git_baseline, git_show, BaselineSpec, GitBaseline, GitLoader};
pub use boot::{
    boot, boot_loaded, boot_with, BootError, BootFn, BootOptions, Booted, HarnessCell, Lineage,
    Prebuilt, SpawnEnv, SpawnSubagentTool,
};
pub use bus::{Bus, Capacity, Subscription, DEFAULT_CAPACITY};
pub use contributed::rejection_note;
pub use display::terminal_safe;
pub use explain::{explain_call, ExplainError};
pub use harness::local::DEFAULT_CONTEXT as LOCAL_DEFAULT_CONTEXT;
pub use harness::HarnessPlace;
pub use harness::{
    anthropic_request_body, AnthropicConfig, AnthropicDecoder, AnthropicHarness, ANTHROPIC_API_KEY,
    ANTHROPIC_DEFAULT_API_BASE, ANTHROPIC_DEFAULT_MAX_TOKENS, ANTHROPIC_DEFAULT_MODEL,
    ANTHROPIC_VERSION,
};
pub use harness::{
    build_harness, build_harness_in, classify_http, parse_retry_after, EventStream, Harness,
    HarnessConfigError, HarnessError, SseEvent, SseLimits, SseParser, TestHarness, TestStep,
    TestTurn, DEFAULT_MAX_TURN_REQUESTS, MAX_SSE_EVENT, MAX_SSE_LINE, MAX_SSE_STREAM,
};
pub use harness::{
    chat_request_body, ChatDecoder, OpenAiChatConfig, OpenAiChatHarness, OPENAI_API_KEY,
    OPENAI_DEFAULT_API_BASE, OPENAI_DEFAULT_MODEL,
};
pub use harness::{responses_request_body, OpenAiConfig, OpenAiHarness, ResponsesDecoder};
pub use hooks::{HookOutcome, HookRunner, HOOK_OUTPUT_LIMIT};
pub use inspect::{inspect_server, Inspected};
pub use load::{
    env_map, load_manifest, load_manifest_with_env, path_ctx, read_text, resolve_permissions,
    FsLoader, LoadError, Loaded, MAX_MANIFEST_BYTES,
};
pub use loom_kernel::{DoomGuard, DOOM_LOOP_THRESHOLD};
pub use loom_kernel::{McpResolution, ShippedSource, ShippedState};
pub use mcp::{
    flatten_result, server_config, CallResult, Launch, McpError, McpServer, ServerConfig,
    UpstreamTool, DEFAULT_CALL_TIMEOUT_MS, DEFAULT_STARTUP_TIMEOUT_MS, MAX_MESSAGE_BYTES,
    MAX_RESULT_CHARS, PROTOCOL_VERSIONS, STDERR_TAIL_BYTES,
};
pub use mcp::{
    parse_message as parse_mcp_message, Frame as McpFrame, LineFramer as McpLineFramer,
    SseFramer as McpSseFramer,
};
pub use model::{
    ContentBlock, Message, ModelEvent, ModelRequest, Role, StopReason, ToolSpec, Usage,
};
pub use prompt::{prompt_blocking, PromptError, PromptSink};
pub use providers::McpTool;
pub use providers::{
    entry_of, group_sources, install, install_dir, provider_infos, provider_source, read_lock,
    resolve as resolve_provider, resolve_shipped, shipped_sources, shipped_states,
    sources as provider_sources, state_of as provider_state, tree_hash, InstallOptions, Installed,
    ProviderInfo, ProviderPlace, Resolved,
};
pub use providers::{mcp_provider, resolve_mcp_tools, McpPlace, McpServers};
pub use repl::{
    answer_line, ask_question, parse_answer, parse_command, run_repl, Command, ReplUi, TurnStats,
    COMMANDS, TICK,
};
pub use retry::{
    RetryPolicy, Sleeper, TokioSleeper, BASE_DELAY, MAX_ATTEMPTS, MAX_DELAY, MAX_RETRY_AFTER,
};
pub use sdk::{run_agent, AgentDef, LayerSlot};
pub use secrets::{
    env_names, secret_store_paths, user_secrets_path, Secret, SecretChain, SecretSource,
    SecretsFileError,
};
pub use session::bundled_skills;
pub use session::{
    build_chain, resumable_log, to_messages, Chain, Clock, CompactCtx, CompactMode,
    CompactingConfig, CompactingLayer, Compaction, Compactor, FileLayer, HeuristicCompactor, Layer,
    MemoryLayer, ModelCompactor, SessionError, SessionPlace, SummaryError, SystemClock,
    CHARS_PER_TOKEN, COMPACTION_TURN_BIT, DEFAULT_COMPACTOR_SYSTEM, DEFAULT_INSTRUCTION,
    DEFAULT_KEEP, DEFAULT_THRESHOLD, PAUSE_AFTER_FAILURE, STATE_FILE, SUMMARY_HEADER,
    SUMMARY_ID_PREFIX,
};
pub use session::{
    discover, discover_tagged, layer_roots, load_skill, manifest_skills, session_group,
    skill_roots, tagged_skill_roots, Discovery, FoundSkill, Keeper, Override, SkillSource,
    SkillsEnv, SkillsLayer, MAX_BUNDLED_READ, MAX_KEPT_CHARS, MAX_KEPT_SKILLS, MAX_LISTED,
    MAX_SKILL_FILE, SKILLS_SESSION_GROUP,
};
pub use storage::{
    data_home, ensure_storage, models_dir, run_id, storage_dir, RunIdError, OWNER_FILE,
};
pub use tools::{
    apply_edits, builtin_tool, glob_match, resolve_path, BashTool, ClientFs, ClientTerminals,
    EditError, EditFileTool, FindTool, OutputBuffer, PathMode, Prepared, Progress, ProgressFn,
    ReadFileTool, SandboxEnv, Snapshot, Tool, ToolCtx, ToolEnv, ToolOutput, WriteFileTool,
    IMPLEMENTED,
};
pub use tools::{WebSearchTool, BRAVE_ENDPOINT, BRAVE_SEARCH_API_KEY};
pub use update::{
    Chunk, Content, Frame, FrameKind, Location, SessionUpdate, ThoughtChunk, ThoughtMeta, ToolCall,
    ToolCallContent, ToolCallUpdate, ToolKind, ToolStatus, TurnStop, UsageUpdate,
};
