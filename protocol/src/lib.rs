//! # loom-protocol: the vocabulary every other crate speaks
//!
//! Provider-neutral model messages and the events a harness streams back ([`model`]); the updates an agent tells
//! its host, shaped as ACP `session/update` payloads ([`update`]); the bounded and lossless subscriptions to them
//! ([`bus`]); the [`Harness`] trait with [`HarnessError`] classified for retry ([`harness`]); and [`Secret`], a value
//! that never prints itself, with the [`SecretLookup`] seam through which harnesses and server configurations find
//! theirs ([`secret`]).
//!
//! ## What this crate must never do
//! No I/O: no files, no network, no processes, no environment reads. It holds types and the pure functions over
//! them, so the kernel's callers, the vendors, the MCP client and the runtime can share them without depending on
//! each other. No authority decisions either: those are `loom-kernel`'s. No `unsafe`.
//!
//! ## Example
//! ```
//! use loom_protocol::{Bus, Capacity, Chunk, Content, SessionUpdate};
//!
//! let bus = Bus::default();
//! let sub = bus.subscribe(Capacity::Unbounded);
//! let hi = SessionUpdate::AgentMessageChunk(Chunk { content: Content::text("hi"), message_id: None });
//! bus.publish(&hi);
//! assert_eq!(sub.try_recv(), Some(hi));
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod bus;
pub mod harness;
pub mod model;
pub mod secret;
pub mod update;

pub use bus::{Bus, Capacity, Subscription, DEFAULT_CAPACITY};
pub use harness::{EventStream, Harness, HarnessError};
pub use model::{
    ContentBlock, Message, ModelEvent, ModelRequest, Role, StopReason, ToolSpec, Usage,
};
pub use secret::{Secret, SecretLookup};
pub use update::{
    Chunk, Content, Frame, FrameKind, Location, SessionUpdate, ThoughtChunk, ThoughtMeta, ToolCall,
    ToolCallContent, ToolCallUpdate, ToolKind, ToolStatus, TurnStop, UsageMeta, UsageUpdate,
};
