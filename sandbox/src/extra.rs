//! Hooks the command broker needs: spawning a confined command with caller-chosen standard streams and learning its
//! process-group id as soon as it exists. The one implementation lives in `spawn.rs` (so the broker and
//! `loom sandbox run` share every check and backend); this module re-exports it under the names loom-broker uses.

pub use crate::spawn::{spawn_sandboxed_io, Stream, Streams};
