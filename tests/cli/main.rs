#![allow(clippy::unwrap_used, clippy::expect_used)]
//! End-to-end tests of the real `loom` binary.

mod audit;
mod docs;
mod explain;
mod gate;
mod gate_tools;
mod help;
mod job;
mod kernel_small;
mod mcp;
mod model_install;
mod newcomer;
mod rules;
mod sandbox_accept;
mod sandbox_rows;
mod skill_authority;
mod skills;
mod version;
