//! # loom-broker
//!
//! The command broker: per-command grants that follow their command into pipelines and interpreters. Not built yet
//! (issue 4); this crate holds its place in the dependency order `runtime -> broker -> sandbox -> kernel`.
//! It must never run a command that no grant row names, and never run one unsandboxed.
