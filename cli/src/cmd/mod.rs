//! One module per subcommand.

pub mod acp;
pub mod audit;
pub mod doctor;
pub mod explain;
pub mod install;
pub mod job;
pub mod manifest_arg;
pub mod mcp;
pub mod model;
pub mod permissions;
pub mod prompt;
pub mod providers;
pub mod run;
pub mod sandbox;
pub mod scope;
pub mod skills;
pub mod worktrees;
