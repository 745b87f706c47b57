//! Harness server tools (`web_search = "anthropic"`, `web_fetch = "anthropic"`): a grant row is the provider's own
//! limits (see [`crate::server_tool_limits`]), so it compares as limits, not as a grant of kinds.

use super::default::{sample_rows, sample_strs, value_contains};
use super::Algebra;
use crate::lattice::grant::{Grant, Row};
use crate::lattice::rng::Rng;
use crate::lattice::value::Value;

/// The algebra of provider-run server tools. A row is a set of limits, and a kind the row leaves out is no limit:
/// - `allowed_domains`: absent or `"*"` allows every domain; a list is contained by a list holding each of its
///   domains (an absent list is never contained by a present one);
/// - `blocked_domains`: absent blocks nothing; a list is contained by a list it holds entirely (dropping a blocked
///   domain grows);
/// - `max_uses`, `max_content_tokens`: absent is unlimited; a number is contained by any number at least as large;
/// - any other kind (`user_location`, `citations`, ...) contains only the same value (absent only absent).
#[derive(Debug, Clone, Copy, Default)]
pub struct ServerToolAlgebra;

fn limit_contains(kind: &str, sup: Option<&Value>, sub: Option<&Value>) -> bool {
    match kind {
        "allowed_domains" => match (sup, sub) {
            (None | Some(Value::Star), _) => true,
            (Some(_), None | Some(Value::Star)) => false,
            (Some(s), Some(v)) => value_contains(s, v),
        },
        "blocked_domains" => match (sup, sub) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(s), Some(v)) => value_contains(v, s),
        },
        "max_uses" | "max_content_tokens" => match (sup, sub) {
            (None, _) => true,
            (Some(Value::Int(n)), Some(Value::Int(m))) => m <= n,
            (Some(s), v) => Some(s) == v,
        },
        _ => sup == sub,
    }
}

/// Server-tool row containment (see [`ServerToolAlgebra`]).
pub(crate) fn server_row_contains(sup: &Row, sub: &Row) -> bool {
    sup.0
        .keys()
        .chain(sub.0.keys())
        .all(|k| limit_contains(k.as_str(), sup.get(k.as_str()), sub.get(k.as_str())))
}

impl Algebra for ServerToolAlgebra {
    fn name(&self) -> &'static str {
        "server-tool"
    }

    fn row_contains(&self, sup: &Row, sub: &Row) -> bool {
        server_row_contains(sup, sub)
    }

    fn sample(&self, rng: &mut Rng) -> Grant {
        const DOMAINS: [&str; 3] = ["a.org", "b.org", "c.org"];
        sample_rows(rng, |rng| {
            let mut row = Vec::with_capacity(4);
            if rng.one_in(2) {
                let v = if rng.one_in(4) {
                    Value::Star
                } else {
                    sample_strs(rng, &DOMAINS)
                };
                row.push(("allowed_domains", v));
            }
            if rng.one_in(2) {
                row.push(("blocked_domains", sample_strs(rng, &DOMAINS)));
            }
            if rng.one_in(2) {
                row.push(("max_uses", Value::Int(rng.below(4) as i64)));
            }
            if rng.one_in(3) {
                row.push(("user_location", Value::Str("x".into())));
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
            ServerToolAlgebra.contains(&g(sup), &g(sub)),
            want,
            "contains({sup}, {sub})"
        );
    }

    #[test]
    fn limits_compare_as_limits() {
        // K7: dropping a limit is growth
        contains(
            "{ allowed_domains = [\"docs.python.org\"], max_uses = 3 }",
            "{ max_uses = 3 }",
            false,
        );
        contains(
            "{ blocked_domains = [\"pastebin.com\", \"attacker.example\"], max_uses = 5 }",
            "{ blocked_domains = [\"pastebin.com\"], max_uses = 5 }",
            false,
        );
        contains(
            "{ max_uses = 3, citations = true }",
            "{ citations = true }",
            false,
        );
        contains("{ max_uses = 3 }", "{ max_uses = 4 }", false);
        // tightening is contained
        contains("{ max_uses = 3 }", "{ max_uses = 2 }", true);
        contains(
            "{ allowed_domains = \"*\" }",
            "{ max_uses = 2, allowed_domains = [\"a.org\"] }",
            true,
        );
        contains(
            "{ allowed_domains = [\"a.org\", \"b.org\"] }",
            "{ allowed_domains = [\"a.org\"] }",
            true,
        );
        contains(
            "{ blocked_domains = [\"a.org\"] }",
            "{ blocked_domains = [\"a.org\", \"b.org\"] }",
            true,
        );
        contains("{ allowed_domains = \"*\" }", "{}", true);
        // other kinds only as the same value
        contains("{ user_location = \"x\" }", "{ max_uses = 1 }", false);
        contains(
            "{ max_uses = 1 }",
            "{ max_uses = 1, user_location = \"x\" }",
            false,
        );
        contains("\"*\"", "{ max_uses = 9 }", true);
        contains("{ max_uses = 9 }", "\"*\"", false);
    }
}
