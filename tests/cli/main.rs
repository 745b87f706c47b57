#![allow(clippy::unwrap_used, clippy::expect_used)]
//! End-to-end tests of the real `loom` binary.

mod audit;
mod explain;
mod gate;
mod mcp;
mod model_install;
mod rules;
mod sandbox_rows;
mod skill_authority;
mod skills;
mod version;
