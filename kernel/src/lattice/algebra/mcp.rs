//! MCP per-argument grants.

use super::default::{sample_rows, sample_strs, value_contains};
use super::Algebra;
use crate::lattice::grant::{Grant, Row};
use crate::lattice::rng::Rng;
use crate::lattice::value::Value;

/// The algebra of MCP tools. Each kind is an argument of the upstream tool: a literal binds (and hides) the argument
/// and is sent on every call, an array narrows it to an enum the model may also leave out, `"*"` keeps it open, and an
/// argument the grant does not name disappears from the call (the server's default then applies). Containment is
/// decided on what can be sent, not on which arguments are named:
/// - every argument the sub-row names must be named by the super-row, with a containing value (a literal is
///   contained by the same literal, by an enum holding it and by `"*"`; an enum by a wider enum or `"*"`);
/// - an argument the super-row binds to a literal must be bound to the same literal by the sub-row: leaving it out,
///   or widening it to an enum (even a one-element one, which the model may omit), lets the server default apply —
///   `dryRun = true` dropped is a real edit.
///
/// (Schema rewriting lives in [`crate::contrib::mcp`].)
#[derive(Debug, Clone, Copy, Default)]
pub struct McpAlgebra;

/// A value the call always sends as it is: anything but `"*"` (open) and an array (an enum the model may omit).
fn is_bound(v: &Value) -> bool {
    !matches!(v, Value::Star | Value::List(_))
}

/// MCP row containment (see [`McpAlgebra`]).
pub(crate) fn mcp_row_contains(sup: &Row, sub: &Row) -> bool {
    sub.0.iter().all(|(k, v)| {
        sup.get(k.as_str()).is_some_and(|s| {
            if is_bound(s) {
                s == v
            } else {
                value_contains(s, v)
            }
        })
    }) && sup
        .0
        .iter()
        .all(|(k, s)| !is_bound(s) || sub.get(k.as_str()) == Some(s))
}

impl Algebra for McpAlgebra {
    fn name(&self) -> &'static str {
        "mcp"
    }

    fn row_contains(&self, sup: &Row, sub: &Row) -> bool {
        mcp_row_contains(sup, sub)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lattice::grant::test_grant as g;

    #[track_caller]
    fn contains(sup: &str, sub: &str, want: bool) {
        assert_eq!(
            McpAlgebra.contains(&g(sup), &g(sub)),
            want,
            "contains({sup}, {sub})"
        );
    }

    #[test]
    fn a_bound_argument_stays_bound() {
        // K6: dropping a bound argument lets the server default apply
        contains("{ path = \"*\", dryRun = true }", "{ path = \"*\" }", false);
        // a literal widened to an enum the model may omit
        contains(
            "{ path = \"*\", dryRun = true }",
            "{ path = \"*\", dryRun = [true] }",
            false,
        );
        // the same literal, with the open argument narrowed: contained
        contains(
            "{ path = \"*\", dryRun = true }",
            "{ path = \"/a\", dryRun = true }",
            true,
        );
        contains(
            "{ path = \"*\", dryRun = true }",
            "{ path = \"*\", dryRun = false }",
            false,
        );
    }

    #[test]
    fn open_and_enum_arguments_narrow() {
        contains("{ status = \"*\" }", "{ status = [\"a\"] }", true);
        contains("{ status = \"*\" }", "{}", true);
        contains("{ status = [\"a\", \"b\"] }", "{ status = \"a\" }", true);
        contains("{ status = [\"a\", \"b\"] }", "{}", true);
        contains("{ status = [\"a\"] }", "{ status = \"*\" }", false);
        // an argument the super-row never sends
        contains("{ status = \"*\" }", "{ status = \"*\", limit = 1 }", false);
    }
}
