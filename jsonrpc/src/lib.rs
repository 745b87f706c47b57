//! # loom-jsonrpc: JSON-RPC 2.0 for loom's two peers, without I/O
//!
//! The MCP client (`loom-mcp`, talking to servers over stdio and Streamable HTTP) and the ACP server (`loom-acp`,
//! talking to an editor over stdio) speak the same JSON-RPC 2.0. This crate holds what they share: framing under a
//! byte cap ([`LineFramer`] for newline-delimited streams, [`SseFramer`] for `text/event-stream` bodies), classifying
//! an incoming message ([`classify`], [`Incoming`]), the standard error codes, and building every message loom sends
//! ([`request`], [`notification`], [`reply`], [`reply_error`]). Public in full so the fuzz targets can drive the
//! framers and the classifier with arbitrary bytes.
//!
//! Hand-written rather than a JSON-RPC crate: loom needs the byte cap applied while a message is still arriving (a
//! peer is untrusted and may send an endless line), and the two peers each run their own transport and dispatch;
//! what is shared is this small, pure layer.
//!
//! ## What this crate must never do
//! I/O of any kind (callers own their transports), hold a message past its cap, or panic on any input: every byte
//! sequence either frames, is skipped, or is reported.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod frame;
mod message;

pub use frame::{parse_message, Frame, LineFramer, SseFramer};
pub use message::{
    classify, classify_line, notification, reply, reply_error, request, Incoming, RpcError,
    INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR,
};
