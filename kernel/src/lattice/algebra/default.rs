//! The strict default algebra.

use super::Algebra;
use crate::lattice::grant::{Grant, Row};
use crate::lattice::rng::Rng;
use crate::lattice::value::Value;

/// The default algebra, as the seed states it: a kind absent from a grant is not granted; `"*"` contains every value
/// and only `"*"` contains `"*"`; a list contains another list (or a scalar) when it holds each of its elements;
/// scalars and objects contain only themselves.
#[derive(Debug, Clone, Copy, Default)]
pub struct DefaultAlgebra;

/// Default value containment (see [`DefaultAlgebra`]). A scalar behaves as the one-element set holding it.
pub fn value_contains(sup: &Value, sub: &Value) -> bool {
    match (sup, sub) {
        (Value::Star, _) => true,
        (_, Value::Star) => false,
        _ => match (sup.as_set(), sub.as_set()) {
            // both sets are sorted, so containment is one merge-walk
            (Some(sups), Some(subs)) => sorted_subset(subs, sups),
            _ => false,
        },
    }
}

/// True when every element of sorted `sub` is in sorted `sup`.
fn sorted_subset(sub: &[Value], sup: &[Value]) -> bool {
    let mut it = sup.iter();
    'next: for s in sub {
        for candidate in it.by_ref() {
            match candidate.cmp(s) {
                std::cmp::Ordering::Less => continue,
                std::cmp::Ordering::Equal => continue 'next,
                std::cmp::Ordering::Greater => return false,
            }
        }
        return false;
    }
    true
}

/// Row containment with default semantics for every kind: each kind the sub-row requests must be granted by the
/// super-row with a containing value.
pub fn default_row_contains(sup: &Row, sub: &Row) -> bool {
    sup.0.covers_each(&sub.0, value_contains)
}

impl Algebra for DefaultAlgebra {
    fn name(&self) -> &'static str {
        "default"
    }

    fn row_contains(&self, sup: &Row, sub: &Row) -> bool {
        default_row_contains(sup, sub)
    }

    fn sample(&self, rng: &mut Rng) -> Grant {
        sample_rows(rng, |rng| {
            let mut row = Vec::with_capacity(3);
            for kind in ["a", "b", "c"] {
                if rng.one_in(2) {
                    row.push((kind, sample_scalarish(rng)));
                }
            }
            Row::from_pairs(row)
        })
    }
}

/// Samples `"*"` (rarely), `{}` or a set of 1 or 2 rows made by `row`. Small on purpose: the boot check runs on
/// every start; `proofs/` covers larger sets exhaustively and at random.
pub(crate) fn sample_rows(rng: &mut Rng, mut row: impl FnMut(&mut Rng) -> Row) -> Grant {
    if rng.one_in(12) {
        return Grant::Unrestricted;
    }
    let n = rng.below(3);
    Grant::set((0..n).map(|_| row(rng)).collect())
}

/// A random subset of `items` as a list of strings: the draws of [`Rng::subset`], without its intermediate vector.
pub(crate) fn sample_strs(rng: &mut Rng, items: &[&str]) -> Value {
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        if rng.one_in(2) {
            out.push(Value::Str((*item).to_string()));
        }
    }
    Value::list(out)
}

/// Samples a value over a tiny universe: `"*"`, scalars, small lists.
pub(crate) fn sample_scalarish(rng: &mut Rng) -> Value {
    const WORDS: [&str; 3] = ["x", "y", "z"];
    match rng.below(5) {
        0 => Value::Star,
        1 => Value::Str((*rng.pick(&WORDS)).to_string()),
        2 => Value::Int(rng.below(3) as i64),
        _ => sample_strs(rng, &WORDS),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::lattice::grant::test_grant as g;

    #[track_caller]
    fn contains(sup: &str, sub: &str, want: bool) {
        assert_eq!(
            DefaultAlgebra.contains(&g(sup), &g(sub)),
            want,
            "contains({sup}, {sub})"
        );
    }

    #[test]
    fn seed_semantics() {
        contains("\"*\"", "\"*\"", true);
        contains("{ a = \"*\" }", "\"*\"", false);
        contains("{ a = \"*\" }", "{ a = [\"x\"] }", true);
        contains("{ a = [\"x\"] }", "{ a = \"*\" }", false);
        contains("{ a = [\"x\", \"y\"] }", "{ a = [\"y\"] }", true);
        contains("{ a = [\"x\", \"y\"] }", "{ a = \"y\" }", true);
        contains("{ a = [\"x\"] }", "{ b = [\"x\"] }", false);
        contains("{}", "{}", true);
        contains("{}", "{ a = 1 }", false);
        contains("{ a = 1 }", "{}", true);
        // a capability set is a union of boxes, not a bounding box
        contains(
            "[{ a = \"x\" }, { b = \"y\" }]",
            "{ a = \"x\", b = \"y\" }",
            false,
        );
        contains(
            "[{ a = \"x\" }, { b = \"y\" }]",
            "[{ a = \"x\" }, { b = \"y\" }]",
            true,
        );
    }

    #[test]
    fn merge_is_the_union_of_rows() {
        let m = DefaultAlgebra.merge(&g("{ a = \"x\" }"), &g("{ b = \"y\" }"));
        assert_eq!(m, g("[{ a = \"x\" }, { b = \"y\" }]"));
        assert!(!DefaultAlgebra.contains(&m, &g("{ a = \"x\", b = \"y\" }")));
        assert_eq!(
            DefaultAlgebra.merge(&g("\"*\""), &g("{}")),
            Grant::Unrestricted
        );
    }
}
