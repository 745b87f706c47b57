//! The boot property check: every algebra in use must be a join-semilattice, or the agent does not boot.

use std::fmt;

use crate::algebra::{equivalent, Algebra};
use crate::grant::Grant;
use crate::rng::Rng;

/// The default seed of the boot check. Fixed, so a failure reproduces; callers may pass another.
pub const DEFAULT_SEED: u64 = 0x100E_5EED;
/// The default number of trials per law per tool at boot.
pub const DEFAULT_TRIALS: usize = 300;

/// One lattice law.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Law {
    /// `contains(a, a)`.
    Reflexive,
    /// `contains(a, b) && contains(b, c) => contains(a, c)`.
    Transitive,
    /// `merge(a, b)` contains `a` and `b`.
    MergeUpperBound,
    /// `merge(a, b) ~ merge(b, a)`.
    Commutative,
    /// `merge(a, a) ~ a`.
    Idempotent,
    /// `merge(merge(a, b), c) ~ merge(a, merge(b, c))`.
    Associative,
    /// Every row of `merge(a, b)` is granted by `a` or by `b`: merge adds nothing neither input granted.
    MergeAddsNothing,
    /// `canonicalize(a) ~ a`: the canonical form means the same.
    Canonical,
}

impl Law {
    /// Every law, in the order they are checked.
    pub const ALL: [Law; 8] = [
        Law::Reflexive,
        Law::Transitive,
        Law::MergeUpperBound,
        Law::Commutative,
        Law::Idempotent,
        Law::Associative,
        Law::MergeAddsNothing,
        Law::Canonical,
    ];
}

impl fmt::Display for Law {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Law::Reflexive => "reflexivity: contains(a, a)",
            Law::Transitive => {
                "transitivity: contains(a, b) and contains(b, c) imply contains(a, c)"
            }
            Law::MergeUpperBound => "merge is an upper bound: merge(a, b) contains a and b",
            Law::Commutative => "commutativity: merge(a, b) is equivalent to merge(b, a)",
            Law::Idempotent => "idempotence: merge(a, a) is equivalent to a",
            Law::Associative => {
                "associativity: merge(merge(a, b), c) is equivalent to merge(a, merge(b, c))"
            }
            Law::MergeAddsNothing => {
                "merge adds nothing: every row of merge(a, b) is granted by a or by b"
            }
            Law::Canonical => "canonical form: canonicalize(a) is equivalent to a",
        })
    }
}

/// A passed check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LawReport {
    /// The tool instance checked.
    pub tool: String,
    /// The algebra's name.
    pub algebra: &'static str,
    /// The seed used.
    pub seed: u64,
    /// Trials run per law.
    pub trials: usize,
    /// How many transitivity trials had both premises true (so the implication was really exercised).
    pub transitive_chains: usize,
}

/// A broken law, with the grants that break it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "tool `{tool}`: its {algebra} capability algebra breaks {law} (seed {seed:#x}); counterexample: {}; \
     loom refuses to boot an agent whose grants it cannot compare soundly — fix the tool's contains/merge",
    render_counterexample(counterexample)
)]
pub struct LawViolation {
    /// The tool instance.
    pub tool: String,
    /// The algebra's name.
    pub algebra: &'static str,
    /// The law broken.
    pub law: Law,
    /// The seed that found it.
    pub seed: u64,
    /// Named grants (`a`, `b`, `c`, `merge(a, b)`, ...).
    pub counterexample: Vec<(String, Grant)>,
}

fn render_counterexample(items: &[(String, Grant)]) -> String {
    items
        .iter()
        .map(|(n, g)| format!("{n} = {g}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks every [`Law`] for `alg`, `trials` times each, with grants drawn by the algebra's own sampler from `seed`.
/// The same seed always draws the same grants.
pub fn check_laws(
    tool: &str,
    alg: &dyn Algebra,
    seed: u64,
    trials: usize,
) -> Result<LawReport, LawViolation> {
    let mut rng = Rng::seeded(seed);
    let fail = |law: Law, ce: Vec<(&str, &Grant)>| LawViolation {
        tool: tool.to_string(),
        algebra: alg.name(),
        law,
        seed,
        counterexample: ce
            .into_iter()
            .map(|(n, g)| (n.to_string(), g.clone()))
            .collect(),
    };
    let mut chains = 0;
    for _ in 0..trials {
        let raw_a = alg.sample(&mut rng);
        if !alg.contains(&raw_a, &raw_a) {
            return Err(fail(Law::Reflexive, vec![("a", &raw_a)]));
        }
        // the laws run on canonical forms (cheap to compare); the canonical form must mean the same as the raw one
        let canonical = |raw: Grant| {
            let c = alg.canonicalize(&raw);
            if equivalent(alg, &raw, &c) {
                Ok(c)
            } else {
                Err(fail(
                    Law::Canonical,
                    vec![("a", &raw), ("canonicalize(a)", &c)],
                ))
            }
        };
        // the canonical-form law is checked on `a` every trial (300 checks); b and c are only canonicalised
        let a = canonical(raw_a)?;
        let b = alg.canonicalize_owned(alg.sample(&mut rng));
        let c = alg.canonicalize_owned(alg.sample(&mut rng));
        // random triples rarely chain, so also build a chain big ⊇ b ⊇ small from the samples
        let ba = alg.merge(&b, &a);
        let small = sub_grant(&b, &mut rng);
        for (x, y, z) in [(&a, &b, &c), (&ba, &b, &small)] {
            if alg.contains(x, y) && alg.contains(y, z) {
                chains += 1;
                if !alg.contains(x, z) {
                    return Err(fail(Law::Transitive, vec![("a", x), ("b", y), ("c", z)]));
                }
            }
        }
        let ab = alg.merge(&a, &b);
        if !alg.contains(&ab, &a) || !alg.contains(&ab, &b) {
            return Err(fail(
                Law::MergeUpperBound,
                vec![("a", &a), ("b", &b), ("merge(a, b)", &ab)],
            ));
        }
        if !equivalent(alg, &ab, &ba) {
            return Err(fail(
                Law::Commutative,
                vec![
                    ("a", &a),
                    ("b", &b),
                    ("merge(a, b)", &ab),
                    ("merge(b, a)", &ba),
                ],
            ));
        }
        let aa = alg.merge(&a, &a);
        if !equivalent(alg, &aa, &a) {
            return Err(fail(Law::Idempotent, vec![("a", &a), ("merge(a, a)", &aa)]));
        }
        let left = alg.merge(&ab, &c);
        let right = alg.merge(&a, &alg.merge(&b, &c));
        if !equivalent(alg, &left, &right) {
            return Err(fail(
                Law::Associative,
                vec![
                    ("a", &a),
                    ("b", &b),
                    ("c", &c),
                    ("merge(merge(a, b), c)", &left),
                    ("merge(a, merge(b, c))", &right),
                ],
            ));
        }
        if !adds_nothing(alg, &a, &b, &ab) {
            return Err(fail(
                Law::MergeAddsNothing,
                vec![("a", &a), ("b", &b), ("merge(a, b)", &ab)],
            ));
        }
    }
    Ok(LawReport {
        tool: tool.to_string(),
        algebra: alg.name(),
        seed,
        trials,
        transitive_chains: chains,
    })
}

/// A grant made of a random subset of `g`'s rows (so `g` contains it under any sound lifting).
fn sub_grant(g: &Grant, rng: &mut Rng) -> Grant {
    match g {
        Grant::Unrestricted => Grant::Unrestricted,
        Grant::Set(rows) => Grant::set(rng.subset(rows)),
    }
}

fn adds_nothing(alg: &dyn Algebra, a: &Grant, b: &Grant, merged: &Grant) -> bool {
    match merged {
        Grant::Unrestricted => matches!(a, Grant::Unrestricted) || matches!(b, Grant::Unrestricted),
        Grant::Set(rows) => rows.iter().all(|r| {
            let one = Grant::row(r.clone());
            alg.contains(a, &one) || alg.contains(b, &one)
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algebra::{AlgebraKind, DefaultAlgebra};
    use crate::grant::Row;
    use crate::path::PathCtx;
    use crate::value::Value;

    #[test]
    fn every_builtin_algebra_passes() {
        let ctx = PathCtx::new("/w", Some("/home/u".into()));
        for kind in [
            AlgebraKind::Default,
            AlgebraKind::Files,
            AlgebraKind::Bash,
            AlgebraKind::Mcp,
        ] {
            let alg = kind.build(&ctx);
            let report = check_laws("t", alg.as_ref(), DEFAULT_SEED, 500).unwrap();
            assert!(
                report.transitive_chains > 100,
                "{kind:?}: only {} chains",
                report.transitive_chains
            );
        }
    }

    /// An algebra whose merge is the kind-wise bounding box: it makes authority no row granted.
    struct BoundingBox;
    impl Algebra for BoundingBox {
        fn name(&self) -> &'static str {
            "bounding-box"
        }
        fn row_contains(&self, sup: &Row, sub: &Row) -> bool {
            DefaultAlgebra.row_contains(sup, sub)
        }
        fn merge(&self, a: &Grant, b: &Grant) -> Grant {
            match (a, b) {
                (Grant::Set(x), Grant::Set(y)) => {
                    let mut row = Row::default();
                    for r in x.iter().chain(y) {
                        for (k, v) in r.0.iter() {
                            let merged = match row.0.get(k) {
                                Some(old) if old != v => Value::Star,
                                _ => v.clone(),
                            };
                            row.insert(k.clone(), merged);
                        }
                    }
                    Grant::row(row)
                }
                _ => Grant::Unrestricted,
            }
        }
        fn sample(&self, rng: &mut Rng) -> Grant {
            DefaultAlgebra.sample(rng)
        }
    }

    #[test]
    fn a_bounding_box_merge_is_caught_and_named() {
        let err = check_laws("gcal", &BoundingBox, 1, 300).unwrap_err();
        assert_eq!(err.tool, "gcal");
        // a bounding box folds two rows into one, so merge(a, a) already differs from a
        assert!(
            matches!(err.law, Law::Idempotent | Law::MergeAddsNothing),
            "{err}"
        );
        let msg = err.to_string();
        assert!(
            msg.contains("tool `gcal`")
                && msg.contains(&err.law.to_string())
                && msg.contains("counterexample"),
            "{msg}"
        );
    }

    /// An algebra whose containment ignores `"*"` on the sub side: not reflexive for `"*"` rows.
    struct NotReflexive;
    impl Algebra for NotReflexive {
        fn name(&self) -> &'static str {
            "broken"
        }
        fn row_contains(&self, sup: &Row, sub: &Row) -> bool {
            sub.0.values().all(|v| *v != Value::Star) && DefaultAlgebra.row_contains(sup, sub)
        }
        fn sample(&self, rng: &mut Rng) -> Grant {
            DefaultAlgebra.sample(rng)
        }
    }

    #[test]
    fn the_check_is_reproducible() {
        let a = check_laws("x", &NotReflexive, 42, 300).unwrap_err();
        let b = check_laws("x", &NotReflexive, 42, 300).unwrap_err();
        assert_eq!(a, b);
        assert_eq!(a.law, Law::Reflexive);
    }
}
