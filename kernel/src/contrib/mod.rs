//! Ceilings and contributions: effective ceilings, ceiling keys, the judging of contributed tool groups (skills,
//! session layers), skills, sub-agent containment, installed and shipped providers, the built-in tools' contracts,
//! MCP pre-binding, harness server tools, what boot refuses, and the CI gate.

pub(crate) mod bootable;
pub(crate) mod ceiling;
pub(crate) mod contracts;
pub(crate) mod gate;
pub(crate) mod install;
pub(crate) mod judge;
pub(crate) mod key_target;
pub(crate) mod keys;
pub(crate) mod mcp;
pub(crate) mod profile;
pub(crate) mod rules;
pub(crate) mod server_tools;
pub(crate) mod shipped;
pub(crate) mod skill;
pub(crate) mod subagent;
