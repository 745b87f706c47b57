//! MCP per-argument grants.

use super::default::{default_row_contains, sample_rows, sample_strs};
use super::Algebra;
use crate::grant::{Grant, Row};
use crate::rng::Rng;
use crate::value::Value;

/// The algebra of MCP tools. Each kind is an argument of the upstream tool: a literal binds (and hides) the argument,
/// an array narrows it to an enum, `"*"` keeps it open, and an argument the grant does not name disappears. So a
/// literal is contained by an enum holding it, an enum by a wider enum, everything by `"*"`: the default value order
/// with a scalar read as the one-element set. (Schema rewriting lives in [`crate::mcp`].)
#[derive(Debug, Clone, Copy, Default)]
pub struct McpAlgebra;

impl Algebra for McpAlgebra {
    fn name(&self) -> &'static str {
        "mcp"
    }

    fn row_contains(&self, sup: &Row, sub: &Row) -> bool {
        default_row_contains(sup, sub)
    }

    fn sample(&self, rng: &mut Rng) -> Grant {
        const STATUS: [&str; 3] = ["online", "away", "busy"];
        sample_rows(rng, |rng| {
            let mut row = Vec::with_capacity(3);
            if rng.one_in(2) {
                let v = match rng.below(3) {
                    0 => Value::Star,
                    1 => Value::Str((*rng.pick(&STATUS)).to_string()),
                    _ => sample_strs(rng, &STATUS),
                };
                row.push(("status", v));
            }
            if rng.one_in(2) {
                let v = if rng.one_in(3) {
                    Value::Star
                } else {
                    Value::Str(format!("/doc/{}", rng.below(3)))
                };
                row.push(("path", v));
            }
            if rng.one_in(3) {
                row.push(("limit", Value::Int(rng.below(3) as i64)));
            }
            Row::from_pairs(row)
        })
    }
}
