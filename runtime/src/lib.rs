//! # loom-runtime
//!
//! Everything that does I/O to run an agent. Today: loading a manifest from disk (the text, the env map, the base
//! and home directories) and handing it to the kernel. It gathers facts and enforces the kernel's answers; it never
//! decides authority on its own.
#![warn(missing_docs)]
