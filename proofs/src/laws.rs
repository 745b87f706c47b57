//! Law checkers: each law over every value, pair or triple of a domain, through the kernel's own `contains` and
//! `merge`. Each returns a [`Tally`] (how many cases were checked, and how many really exercised the law) or the first
//! [`Counterexample`].
//!
//! "Equal" in a law means equivalent ([`loom_kernel::equivalent`]): containment is a preorder.

use std::fmt;

use loom_kernel::{equivalent, Algebra, Grant};

/// How many cases a check covered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Cases checked (values, pairs or triples).
    pub cases: u64,
    /// Cases where the law had something to say: for transitivity the triples whose two premises both held, for
    /// `rows_never_combine` the pairs where the set contains the request, for `only_star_contains_star` the grants
    /// that are `"*"`. Equal to `cases` for the unconditional laws.
    pub exercised: u64,
}

/// A broken law and the grants that break it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counterexample {
    /// The law's name.
    pub law: &'static str,
    /// Named grants (`a`, `b`, `merge(a, b)`, ...).
    pub grants: Vec<(String, Grant)>,
}

impl fmt::Display for Counterexample {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} is broken by ", self.law)?;
        for (i, (name, g)) in self.grants.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{name} = {g}")?;
        }
        Ok(())
    }
}

fn fail(law: &'static str, grants: &[(&str, &Grant)]) -> Counterexample {
    Counterexample {
        law,
        grants: grants
            .iter()
            .map(|(n, g)| ((*n).to_string(), (*g).clone()))
            .collect(),
    }
}

type Check = Result<Tally, Counterexample>;

fn all(cases: u64) -> Check {
    Ok(Tally {
        cases,
        exercised: cases,
    })
}

fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Runs `f(i)` for every `i in 0..n` on all cores; returns the first error by index, or the sum of the tallies.
fn par_for(n: usize, f: impl Fn(usize) -> Check + Sync) -> Check {
    let t = threads().min(n.max(1));
    let results: Vec<Check> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..t)
            .map(|w| {
                let f = &f;
                scope.spawn(move || {
                    let mut tally = Tally::default();
                    let mut i = w;
                    while i < n {
                        let r = f(i)?;
                        tally.cases += r.cases;
                        tally.exercised += r.exercised;
                        i += t;
                    }
                    Ok(tally)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h.join() {
                Ok(r) => r,
                Err(panic) => std::panic::resume_unwind(panic),
            })
            .collect()
    });
    let mut tally = Tally::default();
    for r in results {
        let r = r?;
        tally.cases += r.cases;
        tally.exercised += r.exercised;
    }
    Ok(tally)
}

/// The kernel's containment relation over a domain, one bit per pair: `get(i, j)` is `contains(d[i], d[j])`.
#[derive(Debug, Clone)]
pub struct Matrix {
    n: usize,
    words: usize,
    bits: Vec<u64>,
}

impl Matrix {
    /// Asks the kernel `contains(d[i], d[j])` for every pair (`n²` calls, on all cores).
    pub fn build(alg: &dyn Algebra, d: &[Grant]) -> Matrix {
        let n = d.len();
        let words = n.div_ceil(64);
        let t = threads().min(n.max(1));
        let parts: Vec<Vec<(usize, Vec<u64>)>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..t)
                .map(|w| {
                    scope.spawn(move || {
                        let mut out = Vec::new();
                        let mut i = w;
                        while i < n {
                            let mut row = vec![0u64; words];
                            for (j, b) in d.iter().enumerate() {
                                if alg.contains(&d[i], b) {
                                    row[j / 64] |= 1 << (j % 64);
                                }
                            }
                            out.push((i, row));
                            i += t;
                        }
                        out
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| match h.join() {
                    Ok(r) => r,
                    Err(panic) => std::panic::resume_unwind(panic),
                })
                .collect()
        });
        let mut bits = vec![0u64; n * words];
        for (i, row) in parts.into_iter().flatten() {
            bits[i * words..(i + 1) * words].copy_from_slice(&row);
        }
        Matrix { n, words, bits }
    }

    /// `contains(d[i], d[j])`.
    pub fn get(&self, i: usize, j: usize) -> bool {
        self.bits[i * self.words + j / 64] >> (j % 64) & 1 == 1
    }

    fn row(&self, i: usize) -> &[u64] {
        &self.bits[i * self.words..(i + 1) * self.words]
    }

    /// How many pairs are related.
    pub fn count(&self) -> u64 {
        self.bits.iter().map(|w| u64::from(w.count_ones())).sum()
    }
}

/// Reflexivity: `contains(a, a)` for every `a`.
pub fn reflexive(alg: &dyn Algebra, d: &[Grant]) -> Check {
    for a in d {
        if !alg.contains(a, a) {
            return Err(fail("reflexivity", &[("a", a)]));
        }
    }
    all(d.len() as u64)
}

/// Transitivity over every triple `(a, b, c)` of `d`: `contains(a, b) && contains(b, c) => contains(a, c)`, decided
/// from the kernel's containment matrix `m` of `d`. `exercised` counts the triples whose premises both hold.
pub fn transitive(d: &[Grant], m: &Matrix) -> Check {
    let n = m.n;
    let mut chains = 0u64;
    for i in 0..n {
        let ri = m.row(i);
        for j in 0..n {
            if !m.get(i, j) {
                continue;
            }
            let rj = m.row(j);
            for (w, (&x, &y)) in ri.iter().zip(rj).enumerate() {
                chains += u64::from(y.count_ones());
                let missing = y & !x;
                if missing != 0 {
                    let k = w * 64 + missing.trailing_zeros() as usize;
                    return Err(fail(
                        "transitivity",
                        &[("a", &d[i]), ("b", &d[j]), ("c", &d[k])],
                    ));
                }
            }
        }
    }
    Ok(Tally {
        cases: (n as u64).pow(3),
        exercised: chains,
    })
}

/// Merge is an upper bound: `merge(a, b)` contains `a` and `b`, for every pair.
pub fn merge_is_upper_bound(alg: &dyn Algebra, d: &[Grant]) -> Check {
    par_for(d.len(), |i| {
        let a = &d[i];
        for b in d {
            let m = alg.merge(a, b);
            if !alg.contains(&m, a) || !alg.contains(&m, b) {
                return Err(fail(
                    "merge is an upper bound",
                    &[("a", a), ("b", b), ("merge(a, b)", &m)],
                ));
            }
        }
        all(d.len() as u64)
    })
}

/// Commutativity: `merge(a, b)` is equivalent to `merge(b, a)`, for every pair.
pub fn commutative(alg: &dyn Algebra, d: &[Grant]) -> Check {
    par_for(d.len(), |i| {
        let a = &d[i];
        for b in d {
            let ab = alg.merge(a, b);
            let ba = alg.merge(b, a);
            if !equivalent(alg, &ab, &ba) {
                return Err(fail(
                    "commutativity",
                    &[
                        ("a", a),
                        ("b", b),
                        ("merge(a, b)", &ab),
                        ("merge(b, a)", &ba),
                    ],
                ));
            }
        }
        all(d.len() as u64)
    })
}

/// Idempotence: `merge(a, a)` is equivalent to `a`, for every `a`.
pub fn idempotent(alg: &dyn Algebra, d: &[Grant]) -> Check {
    for a in d {
        let aa = alg.merge(a, a);
        if !equivalent(alg, &aa, a) {
            return Err(fail("idempotence", &[("a", a), ("merge(a, a)", &aa)]));
        }
    }
    all(d.len() as u64)
}

/// Associativity: `merge(merge(a, b), c)` is equivalent to `merge(a, merge(b, c))`, for every triple.
pub fn associative(alg: &dyn Algebra, d: &[Grant]) -> Check {
    let n = d.len();
    // merge(x, y) for every pair, computed once: each triple then costs two merges and one equivalence
    let pairs: Vec<Vec<Grant>> = (0..n)
        .map(|i| d.iter().map(|b| alg.merge(&d[i], b)).collect())
        .collect();
    par_for(n, |i| {
        let a = &d[i];
        for j in 0..n {
            let ab = &pairs[i][j];
            for (k, c) in d.iter().enumerate() {
                let left = alg.merge(ab, c);
                let right = alg.merge(a, &pairs[j][k]);
                if !equivalent(alg, &left, &right) {
                    return Err(fail(
                        "associativity",
                        &[
                            ("a", a),
                            ("b", &d[j]),
                            ("c", c),
                            ("merge(merge(a, b), c)", &left),
                            ("merge(a, merge(b, c))", &right),
                        ],
                    ));
                }
            }
        }
        all((n * n) as u64)
    })
}

/// Merge adds nothing: every row of `merge(a, b)` is granted by `a` or by `b` (and `merge(a, b)` is `"*"` only when
/// `a` or `b` is), for every pair.
pub fn merge_adds_nothing(alg: &dyn Algebra, d: &[Grant]) -> Check {
    par_for(d.len(), |i| {
        let a = &d[i];
        for b in d {
            let m = alg.merge(a, b);
            let ok = match &m {
                Grant::Unrestricted => {
                    matches!(a, Grant::Unrestricted) || matches!(b, Grant::Unrestricted)
                }
                Grant::Set(rows) => rows.iter().all(|r| {
                    let one = Grant::row(r.clone());
                    alg.contains(a, &one) || alg.contains(b, &one)
                }),
            };
            if !ok {
                return Err(fail(
                    "merge adds nothing",
                    &[("a", a), ("b", b), ("merge(a, b)", &m)],
                ));
            }
        }
        all(d.len() as u64)
    })
}

/// The empty request `{}` is contained by every grant (`{}` and `"*"` included).
pub fn empty_request_contained_by_every_grant(alg: &dyn Algebra, d: &[Grant]) -> Check {
    let empty = Grant::none();
    for g in d {
        if !alg.contains(g, &empty) {
            return Err(fail("the empty request fits every grant", &[("grant", g)]));
        }
    }
    all(d.len() as u64)
}

/// `"*"` contains every grant, and nothing but `"*"` contains `"*"`.
pub fn only_star_contains_star(alg: &dyn Algebra, d: &[Grant]) -> Check {
    let star = Grant::Unrestricted;
    let mut stars = 0;
    for g in d {
        if !alg.contains(&star, g) {
            return Err(fail("\"*\" contains everything", &[("grant", g)]));
        }
        let is_star = matches!(g, Grant::Unrestricted);
        stars += u64::from(is_star);
        if alg.contains(g, &star) != is_star {
            return Err(fail("only \"*\" contains \"*\"", &[("grant", g)]));
        }
    }
    Ok(Tally {
        cases: d.len() as u64,
        exercised: stars,
    })
}

/// Rows never combine: for every capability set `g` of the domain and every single-row request `q`, `g` contains
/// `q` exactly when ONE row of `g` does. (So no request that needs two rows' authority at once is ever granted.)
pub fn rows_never_combine(alg: &dyn Algebra, d: &[Grant], requests: &[Grant]) -> Check {
    par_for(d.len(), |i| {
        let g = &d[i];
        let Some(rows) = g.rows() else {
            return Ok(Tally::default());
        };
        let mut tally = Tally::default();
        for q in requests {
            let whole = alg.contains(g, q);
            let one = rows.iter().any(|r| alg.contains(&Grant::row(r.clone()), q));
            tally.cases += 1;
            tally.exercised += u64::from(whole);
            if whole != one {
                return Err(fail("rows never combine", &[("grant", g), ("request", q)]));
            }
        }
        Ok(tally)
    })
}
