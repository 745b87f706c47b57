//! Every lattice law, checked exhaustively over the bounded domains of `loom_proofs` for every built-in algebra.
//!
//! Each test prints, per domain, the bound (universe, rows per grant, domain size) and the number of cases checked;
//! run `cargo test -p loom-proofs --test exhaustive -- --nocapture` to see them. `proofs/README.md` lists them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::OnceLock;

use loom_kernel::{Algebra, AlgebraKind};
use loom_proofs::laws::{self, Counterexample, Matrix, Tally};
use loom_proofs::{
    bash_edges_domain, bash_network_spellings_domain, ctx, rows_domain, sets_domain,
    triples_domain, Domain, ALL_KINDS,
};

struct Checked {
    domain: Domain,
    alg: Box<dyn Algebra>,
}

impl Checked {
    fn new(domain: Domain) -> Checked {
        Checked {
            alg: domain.algebra.build(&ctx()),
            domain,
        }
    }

    /// bash's `edges` domain under the secret-aware order the CI gate and containment use
    /// (`AlgebraKind::build_with_secrets` with [`loom_proofs::EDGE_SECRETS`]).
    fn secret_aware(mut domain: Domain) -> Checked {
        let secrets: Vec<String> = loom_proofs::EDGE_SECRETS
            .iter()
            .map(|s| s.to_string())
            .collect();
        domain.name = "edges/secret-aware";
        Checked {
            alg: domain.algebra.build_with_secrets(&ctx(), &secrets),
            domain,
        }
    }
}

/// The `rows`, `sets` and `triples` domains of every built-in algebra, and bash's `edges`, built once per binary.
fn domains() -> &'static [Checked] {
    static DOMAINS: OnceLock<Vec<Checked>> = OnceLock::new();
    DOMAINS.get_or_init(|| {
        let mut out = Vec::new();
        for kind in ALL_KINDS {
            out.push(Checked::new(rows_domain(kind)));
            out.push(Checked::new(sets_domain(kind)));
            out.push(Checked::new(triples_domain(kind)));
        }
        out.push(Checked::new(bash_edges_domain()));
        out.push(Checked::secret_aware(bash_edges_domain()));
        out
    })
}

#[track_caller]
fn report(law: &str, what: &str, c: &Checked, r: Result<Tally, Counterexample>) -> Tally {
    match r {
        Ok(t) => {
            println!(
                "{law}: {} {what} checked ({} exercised) over {}",
                t.cases,
                t.exercised,
                c.domain.bound()
            );
            t
        }
        Err(ce) => panic!(
            "{:?} algebra: {ce}\n  domain: {}",
            c.domain.algebra,
            c.domain.bound()
        ),
    }
}

/// Runs `check` over every domain `pick` accepts, printing each tally and the total.
fn each(
    law: &str,
    what: &str,
    pick: impl Fn(&Domain) -> bool,
    check: impl Fn(&Checked) -> Result<Tally, Counterexample>,
) {
    let mut total = 0;
    for c in domains().iter().filter(|c| pick(&c.domain)) {
        total += report(law, what, c, check(c)).cases;
    }
    println!("{law}: {total} {what} checked in all");
}

fn every(_: &Domain) -> bool {
    true
}

#[test]
fn reflexive() {
    each("reflexive", "grants", every, |c| {
        laws::reflexive(c.alg.as_ref(), &c.domain.grants)
    });
}

#[test]
fn transitive() {
    each("transitive", "triples", every, |c| {
        let m = Matrix::build(c.alg.as_ref(), &c.domain.grants);
        laws::transitive(&c.domain.grants, &m)
    });
}

#[test]
fn merge_is_upper_bound() {
    each("merge_is_upper_bound", "pairs", every, |c| {
        laws::merge_is_upper_bound(c.alg.as_ref(), &c.domain.grants)
    });
}

#[test]
fn commutative() {
    each("commutative", "pairs", every, |c| {
        laws::commutative(c.alg.as_ref(), &c.domain.grants)
    });
}

#[test]
fn idempotent() {
    each("idempotent", "grants", every, |c| {
        laws::idempotent(c.alg.as_ref(), &c.domain.grants)
    });
}

/// Every triple of the `triples` domains, and of the `rows` domains but bash's (201³ = 8.1 million triples of merges
/// is too slow for a test; bash's `triples` domain covers its commands, network and env).
#[test]
fn associative() {
    let pick =
        |d: &Domain| d.name == "triples" || (d.name == "rows" && d.algebra != AlgebraKind::Bash);
    each("associative", "triples", pick, |c| {
        laws::associative(c.alg.as_ref(), &c.domain.grants)
    });
}

#[test]
fn merge_adds_nothing() {
    each("merge_adds_nothing", "pairs", every, |c| {
        laws::merge_adds_nothing(c.alg.as_ref(), &c.domain.grants)
    });
}

#[test]
fn empty_request_contained_by_every_grant() {
    each(
        "empty_request_contained_by_every_grant",
        "grants",
        every,
        |c| laws::empty_request_contained_by_every_grant(c.alg.as_ref(), &c.domain.grants),
    );
}

#[test]
fn only_star_contains_star() {
    each("only_star_contains_star", "grants", every, |c| {
        laws::only_star_contains_star(c.alg.as_ref(), &c.domain.grants)
    });
}

#[test]
fn rows_never_combine() {
    each("rows_never_combine", "(grant, request) pairs", every, |c| {
        let requests = c.domain.single_rows();
        laws::rows_never_combine(c.alg.as_ref(), &c.domain.grants, &requests)
    });
}

/// Regression: a `network` value that is neither on (`"*"`, `true`) nor off (absent, `false`, `[]`) used to fall back
/// to the default value order, which broke transitivity. Minimal counterexamples it found:
/// - a = `{ commands = "*" }`, b = `{ commands = "*", network = false }`, c = `{ commands = "*", network = [false] }`:
///   a ⊇ b (off fits everything) and b ⊇ c (`[false]` ⊆ `false` as sets), but not a ⊇ c;
/// - a = `{ network = true }`, b = `{ network = "*" }`, c = `{ network = "x" }`: a ⊇ b (both on) and b ⊇ c (`"*"`
///   contains every value), but not a ⊇ c.
///
/// Fixed in the kernel by reading `network` as a level: off < any other spelling < on.
#[test]
fn transitive_bash_network_spellings() {
    let c = Checked::new(bash_network_spellings_domain());
    let m = Matrix::build(c.alg.as_ref(), &c.domain.grants);
    report(
        "transitive",
        "triples",
        &c,
        laws::transitive(&c.domain.grants, &m),
    );
}
