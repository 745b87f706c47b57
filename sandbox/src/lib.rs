//! # loom-sandbox
//!
//! Turns the grant row the kernel picked into a `Profile` (plain data) and applies it with the strongest backend the
//! host has. Must never run a command unconfined because a backend is missing.
#![warn(missing_docs)]
