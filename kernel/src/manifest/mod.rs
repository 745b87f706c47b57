//! The manifest grammar: `agent.toml` text (plus an explicit env map) to a typed, closed [`Manifest`], and
//! contributed tool groups to [`ToolGroup`]s, parsed by the same code.
//!
//! Pure: the caller passes text and an env map; nothing here reads a file or the environment. Every key is known:
//! an unknown key is an error naming its key path and the nearest valid key. Nothing here decides authority — grants
//! are parsed into [`Grant`](crate::Grant) values and left for the ceiling and judging code.
//!
//! Files, one concept each: `text` (size, nesting, syntax), `subst` (`${VAR}`), `suggest` (closed key sets),
//! `typed` (typed reads), `agent`, `harness`, `session`, `providers`, `tools`, `permissions`, `group`,
//! and `parse` (the whole manifest, with the sub-manifests its grants carry).

mod agent;
mod consent;
mod error;
mod group;
mod harness;
mod hooks;
mod parse;
mod permissions;
mod providers;
mod sandbox;
mod session;
mod subst;
pub(crate) mod suggest;
mod supervise;
mod text;
mod tools;
mod typed;

#[cfg(test)]
mod tests;

pub use agent::{is_safe_id, AgentSpec, SystemPrompt, MAX_ID_LEN};
pub use error::ManifestError;
pub use group::{parse_sidecar_group, parse_tool_group, ToolGroup};
pub(crate) use harness::is_builtin_harness;
pub use harness::HarnessSpec;
pub use parse::{manifest_from_table, parse_manifest, Manifest};
pub use parse::{SubagentRef, SubagentSource};
pub use providers::{ProviderSpec, Source, META_FACTORIES};
pub use sandbox::{AcceptedGap, SandboxSection};
pub use session::{LayerSpec, SessionSpec};
pub use supervise::{SupervisorSpec, DEFAULT_MAX_ROUNDS, DEFAULT_REVIEW_BUDGET};
pub use text::{MAX_MANIFEST_BYTES, MAX_NESTING};
pub use tools::{ProviderRef, Shipped, ToolEntry, DEFAULT_TOOLS};
