//! Exit codes, documented in README.md.

/// Success.
pub const OK: i32 = 0;
/// A failed run or audit (the manifest is not fully resolvable, a law failed, a command failed).
pub const FAILED: i32 = 1;
/// A usage error (unknown flag, missing argument).
pub const USAGE: i32 = 2;
/// The CI gate: the new effective ceiling is not contained in the baseline's.
pub const CEILING_GREW: i32 = 3;
/// The run was cancelled.
#[allow(dead_code)]
pub const CANCELLED: i32 = 130;
