//! Exit codes, documented in README.md.

/// Success.
pub const OK: i32 = 0;
/// A failed run or audit (the manifest is not fully resolvable, a law failed, a command failed).
pub const FAILED: i32 = 1;
/// A usage error (unknown flag, missing argument).
pub const USAGE: i32 = 2;
/// The CI gate: the new effective ceiling is not contained in the baseline's.
pub const CEILING_GREW: i32 = 3;
/// A turn failed on a transient provider error (rate limit, overload, network, 5xx) after its retries: trying again
/// later may succeed (EX_TEMPFAIL, so an engine can retry the job).
pub const TEMPFAIL: i32 = 75;
/// A required sandbox tier is not available here (`--require-tier`; EX_UNAVAILABLE).
pub const UNAVAILABLE: i32 = 69;
/// The run was cancelled (Ctrl-C, SIGTERM, SIGHUP), the session flushed.
pub const CANCELLED: i32 = 130;
