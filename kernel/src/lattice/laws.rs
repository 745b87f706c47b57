//! The boot property check: every algebra in use must be a join-semilattice, or the agent does not boot.

use std::fmt;

use crate::lattice::algebra::{equivalent, Algebra};
use crate::lattice::grant::Grant;
use crate::lattice::rng::Rng;

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
    let mut check = LawCheck::new(tool, alg, seed, trials);
    let mut tally = LawTally::default();
    while let Some(trial) = check.draw(alg) {
        trial.check(alg, &mut tally);
        if tally.broken() {
            break;
        }
    }
    check.verdict(tally)
}

/// [`check_laws`] a trial at a time, for a caller that spreads the work over threads (`loom audit` does).
///
/// Each trial's grants come from a generator of its own, seeded from the check's seed and the trial's index, so
/// any worker can draw any trial ([`LawCheck::trial`]) and check it with its own instance of the same algebra into
/// a [`LawTally`]. A worker that checks its trials in increasing index order and stops at its first broken one
/// gives [`LawCheck::finish`] what it needs to return exactly what `check_laws` returns for the same arguments.
#[derive(Debug, Clone)]
pub struct LawCheck {
    tool: String,
    algebra: &'static str,
    seed: u64,
    trials: usize,
    drawn: usize,
}

/// What the trials checked into it found: how many, the transitive chains exercised, and the first broken law.
#[derive(Debug, Clone, Default)]
pub struct LawTally {
    checked: usize,
    chains: usize,
    broken: Option<(usize, Broken)>,
}

impl LawTally {
    /// True once a trial broke a law: later trials cannot change the outcome.
    pub fn broken(&self) -> bool {
        self.broken.is_some()
    }
}

impl LawCheck {
    /// The check of `alg` (its name is taken now) for `tool`, with `trials` trials drawn from `seed`.
    pub fn new(tool: &str, alg: &dyn Algebra, seed: u64, trials: usize) -> LawCheck {
        LawCheck {
            tool: tool.to_string(),
            algebra: alg.name(),
            seed,
            trials,
            drawn: 0,
        }
    }

    /// Draws the next trial's grants with `alg`, or `None` once every trial has been drawn.
    pub fn draw(&mut self, alg: &dyn Algebra) -> Option<Trial> {
        if self.drawn == self.trials {
            return None;
        }
        let trial = self.trial(alg, self.drawn);
        self.drawn += 1;
        Some(trial)
    }

    /// How many trials the check runs.
    pub fn trials(&self) -> usize {
        self.trials
    }

    /// Draws trial `index` (of `0..trials()`) with `alg`: the same grants whoever draws it, in whatever order.
    pub fn trial(&self, alg: &dyn Algebra, index: usize) -> Trial {
        Trial::draw(index, alg, &mut trial_rng(self.seed, index))
    }

    /// Joins the tallies: the broken law of the earliest trial that broke one, or the report. `None` when the
    /// tallies pass but did not check every trial (a tally lost with a crashed thread must not pass).
    pub fn finish(
        &self,
        tallies: impl IntoIterator<Item = LawTally>,
    ) -> Option<Result<LawReport, LawViolation>> {
        let mut all = LawTally::default();
        for t in tallies {
            all.checked += t.checked;
            all.chains += t.chains;
            if let Some((i, broken)) = t.broken {
                if all.broken.as_ref().is_none_or(|(j, _)| i < *j) {
                    all.broken = Some((i, broken));
                }
            }
        }
        (all.broken() || all.checked == self.trials).then(|| self.verdict(all))
    }

    fn verdict(&self, tally: LawTally) -> Result<LawReport, LawViolation> {
        match tally.broken {
            Some((_, broken)) => Err(broken.violation(&self.tool, self.algebra, self.seed)),
            None => Ok(LawReport {
                tool: self.tool.clone(),
                algebra: self.algebra,
                seed: self.seed,
                trials: self.trials,
                transitive_chains: tally.chains,
            }),
        }
    }
}

/// One trial of a [`LawCheck`]: the grants it drew, in the order it drew them (`a` as sampled, `b` and `c`
/// canonical, and `small`, a random subset of `b`'s rows).
#[derive(Debug, Clone)]
pub struct Trial {
    index: usize,
    raw_a: Grant,
    b: Grant,
    c: Grant,
    small: Grant,
}

/// A law a trial broke, with its counterexample.
#[derive(Debug, Clone)]
struct Broken {
    law: Law,
    counterexample: Vec<(&'static str, Grant)>,
}

impl Broken {
    fn new(law: Law, ce: &[(&'static str, &Grant)]) -> Broken {
        Broken {
            law,
            counterexample: ce.iter().map(|(n, g)| (*n, (*g).clone())).collect(),
        }
    }

    fn violation(self, tool: &str, algebra: &'static str, seed: u64) -> LawViolation {
        LawViolation {
            tool: tool.to_string(),
            algebra,
            law: self.law,
            seed,
            counterexample: self
                .counterexample
                .into_iter()
                .map(|(n, g)| (n.to_string(), g))
                .collect(),
        }
    }
}

impl Trial {
    fn draw(index: usize, alg: &dyn Algebra, rng: &mut Rng) -> Trial {
        let raw_a = alg.sample(rng);
        // the laws run on canonical forms (cheap to compare); b and c are only canonicalised, a is checked below
        let b = alg.canonicalize_owned(alg.sample(rng));
        let c = alg.canonicalize_owned(alg.sample(rng));
        // random triples rarely chain, so a chain merge(b, a) ⊇ b ⊇ small is also built from the samples
        let small = sub_grant(&b, rng);
        Trial {
            index,
            raw_a,
            b,
            c,
            small,
        }
    }

    /// Checks every law on this trial with `alg` (the algebra it was drawn with, or another instance of it) into
    /// `tally`. A tally that has seen a broken law ignores later trials, as [`check_laws`] stops at the first.
    pub fn check(&self, alg: &dyn Algebra, tally: &mut LawTally) {
        if tally.broken() {
            return;
        }
        tally.checked += 1;
        if let Err(broken) = self.laws(alg, &mut tally.chains) {
            tally.broken = Some((self.index, broken));
        }
    }

    /// Every law on this trial's grants, in [`Law`] order after reflexivity and the canonical form.
    fn laws(&self, alg: &dyn Algebra, chains: &mut usize) -> Result<(), Broken> {
        let Trial {
            raw_a, b, c, small, ..
        } = self;
        if !alg.contains(raw_a, raw_a) {
            return Err(Broken::new(Law::Reflexive, &[("a", raw_a)]));
        }
        // the canonical form must mean the same as the raw one (checked on a, every trial)
        let a = &alg.canonicalize(raw_a);
        if !equivalent(alg, raw_a, a) {
            return Err(Broken::new(
                Law::Canonical,
                &[("a", raw_a), ("canonicalize(a)", a)],
            ));
        }
        let ba = &alg.merge(b, a);
        for (x, y, z) in [(a, b, c), (ba, b, small)] {
            if alg.contains(x, y) && alg.contains(y, z) {
                *chains += 1;
                if !alg.contains(x, z) {
                    return Err(Broken::new(
                        Law::Transitive,
                        &[("a", x), ("b", y), ("c", z)],
                    ));
                }
            }
        }
        let ab = &alg.merge(a, b);
        if !alg.contains(ab, a) || !alg.contains(ab, b) {
            return Err(Broken::new(
                Law::MergeUpperBound,
                &[("a", a), ("b", b), ("merge(a, b)", ab)],
            ));
        }
        if !equivalent(alg, ab, ba) {
            return Err(Broken::new(
                Law::Commutative,
                &[("a", a), ("b", b), ("merge(a, b)", ab), ("merge(b, a)", ba)],
            ));
        }
        let aa = &alg.merge(a, a);
        if !equivalent(alg, aa, a) {
            return Err(Broken::new(
                Law::Idempotent,
                &[("a", a), ("merge(a, a)", aa)],
            ));
        }
        let left = &alg.merge(ab, c);
        let right = &alg.merge(a, &alg.merge(b, c));
        if !equivalent(alg, left, right) {
            return Err(Broken::new(
                Law::Associative,
                &[
                    ("a", a),
                    ("b", b),
                    ("c", c),
                    ("merge(merge(a, b), c)", left),
                    ("merge(a, merge(b, c))", right),
                ],
            ));
        }
        if !adds_nothing(alg, a, b, ab) {
            return Err(Broken::new(
                Law::MergeAddsNothing,
                &[("a", a), ("b", b), ("merge(a, b)", ab)],
            ));
        }
        Ok(())
    }
}

/// The generator of trial `index` of a check seeded with `seed`: the check's seed and the index mixed through one
/// SplitMix64 step, so neighbouring trials (and neighbouring seeds) draw unrelated grants.
fn trial_rng(seed: u64, index: usize) -> Rng {
    let mut mix = Rng::seeded(seed ^ (index as u64).wrapping_mul(0xD1B5_4A32_D192_ED03));
    Rng::seeded(mix.next_u64())
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
    use crate::lattice::algebra::{AlgebraKind, DefaultAlgebra};
    use crate::lattice::grant::Row;
    use crate::lattice::path::PathCtx;
    use crate::lattice::value::Value;

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
    fn a_check_spread_over_tallies_is_the_check() {
        let ctx = PathCtx::new("/w", Some("/home/u".into()));
        let mut algebras: Vec<Box<dyn Algebra>> = [
            AlgebraKind::Default,
            AlgebraKind::Files,
            AlgebraKind::Bash,
            AlgebraKind::Mcp,
        ]
        .into_iter()
        .map(|k| k.build(&ctx))
        .collect();
        algebras.push(Box::new(BoundingBox));
        algebras.push(Box::new(NotReflexive));
        for alg in &algebras {
            for seed in [DEFAULT_SEED, 1, 7] {
                let whole = check_laws("t", alg.as_ref(), seed, DEFAULT_TRIALS);
                for spread in [1, 2, 3, 5] {
                    // trial i goes to tally i % spread, checked with another instance where the algebra has one
                    let mut check = LawCheck::new("t", alg.as_ref(), seed, DEFAULT_TRIALS);
                    let mut tallies: Vec<LawTally> =
                        (0..spread).map(|_| LawTally::default()).collect();
                    let mut i = 0;
                    while let Some(trial) = check.draw(alg.as_ref()) {
                        trial.check(alg.as_ref(), &mut tallies[i % spread]);
                        i += 1;
                    }
                    assert_eq!(i, DEFAULT_TRIALS);
                    let reversed: Vec<LawTally> = tallies.iter().rev().cloned().collect();
                    assert_eq!(
                        check.finish(reversed),
                        Some(whole.clone()),
                        "{}",
                        alg.name()
                    );
                    if whole.is_ok() && spread > 1 {
                        // a tally lost with its thread never passes
                        assert_eq!(check.finish(tallies[1..].to_vec()), None);
                    }
                    // as `loom audit` does it: worker w draws trials w, w + spread, ... itself, in order, and
                    // stops at its first broken trial
                    let shares: Vec<LawTally> = (0..spread)
                        .map(|w| {
                            let mut tally = LawTally::default();
                            for index in (w..check.trials()).step_by(spread) {
                                check
                                    .trial(alg.as_ref(), index)
                                    .check(alg.as_ref(), &mut tally);
                                if tally.broken() {
                                    break;
                                }
                            }
                            tally
                        })
                        .collect();
                    assert_eq!(check.finish(shares), Some(whole.clone()), "{}", alg.name());
                }
            }
        }
    }

    #[test]
    fn a_trial_is_the_same_whoever_draws_it() {
        let ctx = PathCtx::new("/w", Some("/home/u".into()));
        let alg = AlgebraKind::Bash.build(&ctx);
        let mut check = LawCheck::new("t", alg.as_ref(), DEFAULT_SEED, 20);
        let in_order: Vec<String> = std::iter::from_fn(|| check.draw(alg.as_ref()))
            .map(|t| format!("{t:?}"))
            .collect();
        assert_eq!(in_order.len(), 20);
        for index in (0..20).rev() {
            let other = AlgebraKind::Bash.build(&ctx);
            let alone = format!("{:?}", check.trial(other.as_ref(), index));
            assert_eq!(alone, in_order[index], "trial {index}");
        }
        // neighbouring trials draw different grants
        assert_ne!(
            in_order[0].replace("index: 0", ""),
            in_order[1].replace("index: 1", "")
        );
    }

    #[test]
    fn the_check_is_reproducible() {
        let a = check_laws("x", &NotReflexive, 42, 300).unwrap_err();
        let b = check_laws("x", &NotReflexive, 42, 300).unwrap_err();
        assert_eq!(a, b);
        // the fault is containment of `"*"` values; whichever law trips first, its counterexample holds one
        assert!(
            a.counterexample
                .iter()
                .any(|(_, g)| g.to_string().contains('*')),
            "{a}"
        );
    }
}
