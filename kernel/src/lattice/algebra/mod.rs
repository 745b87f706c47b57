//! Capability algebras: containment (`does this grant cover that request?`) and merge (`fold two grants into one`).
//!
//! Loom owns the row form; tools own row meaning. Every algebra lifts a per-row containment to grants the same way:
//! `"*"` contains everything, nothing but `"*"` contains `"*"`, and a capability set contains another iff every row
//! of the smaller one fits entirely within ONE row of the larger. Merge is the de-duplicated union of rows (the free
//! join), never a kind-wise bounding box, so rows never combine into authority no single row granted.

mod bash;
mod default;
mod files;
mod mcp;
mod server;

pub use bash::{BashAlgebra, ENV_TIER1, ENV_TIER2};
pub use default::{value_contains, DefaultAlgebra};
pub use files::{paths_value_contains, FilesAlgebra};
pub use mcp::McpAlgebra;
pub use server::ServerToolAlgebra;

use std::sync::Arc;

use crate::lattice::grant::{Grant, Row};
use crate::lattice::path::PathCtx;
use crate::lattice::rng::Rng;

/// A tool's capability algebra. Implementations must form a join-semilattice up to equivalence; the boot property
/// check ([`crate::check_laws`]) refuses to boot an agent whose algebra breaks a law.
pub trait Algebra: Send + Sync {
    /// A short name for reports (`default`, `files`, `bash`, `mcp`).
    fn name(&self) -> &'static str;

    /// Does row `sup` cover row `sub` entirely?
    fn row_contains(&self, sup: &Row, sub: &Row) -> bool;

    /// Does grant `sup` cover request `sub`? The default lifting is row-wise (see the module doc).
    fn contains(&self, sup: &Grant, sub: &Grant) -> bool {
        match (sup, sub) {
            (Grant::Unrestricted, _) => true,
            (Grant::Set(_), Grant::Unrestricted) => false,
            (Grant::Set(sups), Grant::Set(subs)) => subs.iter().all(|r| {
                // The row that *is* `r` (merges share rows) is tried first, then the others: the order rows are tried
                // in never changes the answer, and for a sound algebra the first try usually settles it.
                match sups.iter().position(|s| Arc::ptr_eq(&s.0, &r.0)) {
                    Some(i) if self.row_contains(&sups[i], r) => true,
                    Some(i) => sups
                        .iter()
                        .enumerate()
                        .any(|(j, s)| j != i && self.row_contains(s, r)),
                    None => sups.iter().any(|s| self.row_contains(s, r)),
                }
            }),
        }
    }

    /// The least grant covering both (the de-duplicated union of rows, or `"*"`).
    fn merge(&self, a: &Grant, b: &Grant) -> Grant {
        union_merge(a, b)
    }

    /// An equivalent grant in this algebra's canonical form (path kinds normalised to absolute paths), so repeated
    /// comparisons skip re-normalising. Must be equivalent to `g`; the property check verifies it.
    fn canonicalize(&self, g: &Grant) -> Grant {
        g.clone()
    }

    /// [`Algebra::canonicalize`] of a grant the caller no longer needs, so an implementation may reuse its rows
    /// instead of copying them. Must return exactly what `canonicalize(&g)` returns.
    fn canonicalize_owned(&self, g: Grant) -> Grant {
        self.canonicalize(&g)
    }

    /// A random grant drawn from a small universe of this algebra's kinds, for the property check.
    fn sample(&self, rng: &mut Rng) -> Grant;
}

/// The free join: `"*"` absorbs; otherwise the canonical union of both sets of rows.
pub fn union_merge(a: &Grant, b: &Grant) -> Grant {
    match (a, b) {
        (Grant::Unrestricted, _) | (_, Grant::Unrestricted) => Grant::Unrestricted,
        (Grant::Set(x), Grant::Set(y)) => Grant::set(x.iter().chain(y.iter()).cloned().collect()),
    }
}

/// Which built-in algebra a tool uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AlgebraKind {
    /// The strict default (absent kind = not granted, lists are sets).
    Default,
    /// Path-scoped file tools (`paths`, `read_paths`).
    Files,
    /// The bash tool (`commands`, `paths`, `read_paths`, `network`, `env`).
    Bash,
    /// MCP per-argument grants.
    Mcp,
    /// A provider-run server tool's limits (`web_search = "anthropic"`): see [`ServerToolAlgebra`].
    ServerTool,
}

/// The built-in tools that run commands under the OS sandbox, each call under the row the kernel picks from a bash
/// grant (`bash`, and `run_tests` / `run_build` / `run_lint`, which run the project's own test, build or lint
/// command): bash's algebra; their rows must be ones the sandbox can express, and their `paths` are where the
/// commands may write.
pub const COMMAND_TOOLS: [&str; 4] = ["bash", "run_tests", "run_build", "run_lint"];

/// The built-in tools whose grant is a file grant (`paths`, `read_paths`) decided per path: the Files algebra.
pub const FILE_TOOLS: [&str; 25] = [
    "read_file",
    "write_file",
    "edit_file",
    "find",
    "grep",
    "glob",
    "list_directory",
    "tree",
    "file_info",
    "project_info",
    "read_many",
    "find_symbol",
    "file_compare",
    "notebook_read",
    "notebook_edit",
    "read_json",
    "json_edit",
    "apply_patch",
    "git_status",
    "git_diff",
    "git_log",
    "git_show",
    "git_blame",
    "git_branches",
    "undo",
];

/// The file tools (of [`FILE_TOOLS`]) that write, create or restore files: their `paths` are where they may write.
/// Every other file tool only reads, whichever kind grants it. With [`COMMAND_TOOLS`], these are the built-ins a
/// grant over loom's own files (an install directory, a lock) must keep away from.
pub const FILE_WRITERS: [&str; 6] = [
    "write_file",
    "edit_file",
    "notebook_edit",
    "json_edit",
    "apply_patch",
    "undo",
];

impl AlgebraKind {
    /// The algebra a built-in tool uses, by its underlying (never its instance) name. A renamed instance such as
    /// `gcal = { provider = "builtin", tool = "bash" }` therefore always gets bash's algebra.
    pub fn for_builtin(underlying: &str) -> AlgebraKind {
        match underlying {
            t if COMMAND_TOOLS.contains(&t) => AlgebraKind::Bash,
            t if FILE_TOOLS.contains(&t) => AlgebraKind::Files,
            _ => AlgebraKind::Default,
        }
    }

    /// Instantiates the algebra with the path facts it needs.
    pub fn build(self, ctx: &PathCtx) -> Box<dyn Algebra> {
        match self {
            AlgebraKind::Default => Box::new(DefaultAlgebra),
            AlgebraKind::Files => Box::new(FilesAlgebra::new(ctx.clone())),
            AlgebraKind::Bash => Box::new(BashAlgebra::new(ctx.clone())),
            AlgebraKind::Mcp => Box::new(McpAlgebra),
            AlgebraKind::ServerTool => Box::new(ServerToolAlgebra),
        }
    }

    /// [`AlgebraKind::build`], with bash's `env` order made secret-aware: `secrets` are the variable names that carry
    /// a secret the agent shares (`[agent] secrets`), which a sub-row may name exactly only where the super-row names
    /// them exactly too (a pattern or `"*"` never passes a secret, so it never covers one). Other kinds ignore it.
    pub fn build_with_secrets(self, ctx: &PathCtx, secrets: &[String]) -> Box<dyn Algebra> {
        match self {
            AlgebraKind::Bash if !secrets.is_empty() => {
                Box::new(BashAlgebra::new(ctx.clone()).with_secrets(secrets))
            }
            other => other.build(ctx),
        }
    }
}

/// True when each grant contains the other.
pub fn equivalent(alg: &dyn Algebra, a: &Grant, b: &Grant) -> bool {
    alg.contains(a, b) && alg.contains(b, a)
}
