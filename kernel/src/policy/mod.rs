//! Per-call policy: the decision for a tool call, permission rules and the command lines they read, plan mode, the
//! doom-loop guard, hooks, the environment and secrets a command sees, what the sandbox refuses in a row, authority
//! files, and what a sub-agent inherits.

pub(crate) mod authority;
pub(crate) mod authority_kind;
pub(crate) mod cmdline;
pub(crate) mod cmdrule;
pub(crate) mod decide;
pub(crate) mod doom;
pub(crate) mod hooks;
pub(crate) mod inherit;
pub(crate) mod inspection;
pub(crate) mod narrow;
pub(crate) mod plan;
pub(crate) mod rules;
pub(crate) mod sandbox_row;
pub(crate) mod secrets;
