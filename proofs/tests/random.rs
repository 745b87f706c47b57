//! The same lattice laws over LARGE random grants (dozens of rows, long path lists, random env patterns), with
//! proptest strategies and quickcheck generators, and a sanity comparison with the kernel's boot check
//! (`loom_kernel::check_laws`).
//!
//! Random triples rarely chain, so transitivity is also checked on built chains `a ⊇ b ⊇ c`: `b` is `a` narrowed
//! (rows dropped, list elements dropped, `"*"` replaced by a list, paths made deeper, env patterns made narrower)
//! and `c` is `b` narrowed. The law is checked as the implication whatever the narrowing produced.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use loom_kernel::{
    check_laws, equivalent, Algebra, AlgebraKind, Grant, Rng, Row, Value, DEFAULT_SEED,
    DEFAULT_TRIALS,
};
use loom_proofs::laws::{self, Matrix};
use loom_proofs::{ctx, ALL_KINDS};
use proptest::prelude::*;
use quickcheck::{Arbitrary, Gen, QuickCheck, TestResult};

// ---------------------------------------------------------------------------------------------------------------
// The laws, on one random triple.

/// Checks every law on `(a, b, c)` and on the chain `a ⊇ narrow(a) ⊇ narrow(narrow(a))`; `Err` names the law.
fn laws_hold(alg: &dyn Algebra, a: &Grant, b: &Grant, c: &Grant, seed: u64) -> Result<(), String> {
    let show = |law: &str, gs: &[(&str, &Grant)]| {
        let parts: Vec<String> = gs.iter().map(|(n, g)| format!("{n} = {g}")).collect();
        format!("{} algebra breaks {law}: {}", alg.name(), parts.join(", "))
    };
    for x in [a, b, c] {
        if !alg.contains(x, x) {
            return Err(show("reflexivity", &[("a", x)]));
        }
        if !alg.contains(x, &Grant::none()) {
            return Err(show("the empty request fits every grant", &[("a", x)]));
        }
        if alg.contains(x, &Grant::Unrestricted) != matches!(x, Grant::Unrestricted) {
            return Err(show("only \"*\" contains \"*\"", &[("a", x)]));
        }
        let xx = alg.merge(x, x);
        if !equivalent(alg, &xx, x) {
            return Err(show("idempotence", &[("a", x)]));
        }
    }
    let mut rng = Rng::seeded(seed);
    let mid = narrow(a, &mut rng);
    let small = narrow(&mid, &mut rng);
    for (x, y, z) in [
        (a, b, c),
        (a, &mid, &small),
        (&alg.merge(a, b), b, &narrow(b, &mut rng)),
    ] {
        if alg.contains(x, y) && alg.contains(y, z) && !alg.contains(x, z) {
            return Err(show("transitivity", &[("a", x), ("b", y), ("c", z)]));
        }
    }
    let ab = alg.merge(a, b);
    if !alg.contains(&ab, a) || !alg.contains(&ab, b) {
        return Err(show("merge is an upper bound", &[("a", a), ("b", b)]));
    }
    if !equivalent(alg, &ab, &alg.merge(b, a)) {
        return Err(show("commutativity", &[("a", a), ("b", b)]));
    }
    let left = alg.merge(&ab, c);
    let right = alg.merge(a, &alg.merge(b, c));
    if !equivalent(alg, &left, &right) {
        return Err(show("associativity", &[("a", a), ("b", b), ("c", c)]));
    }
    if let Some(rows) = ab.rows() {
        for r in rows {
            let one = Grant::row(r.clone());
            if !alg.contains(a, &one) && !alg.contains(b, &one) {
                return Err(show("merge adds nothing", &[("a", a), ("b", b)]));
            }
        }
    } else if !matches!(a, Grant::Unrestricted) && !matches!(b, Grant::Unrestricted) {
        return Err(show("merge adds nothing", &[("a", a), ("b", b)]));
    }
    // rows never combine: a request fits the set exactly when it fits one of its rows
    if let Some(rows) = ab.rows() {
        let requests: Vec<Grant> = [&mid, &small, c]
            .into_iter()
            .filter_map(Grant::rows)
            .flatten()
            .map(|r| Grant::row(r.clone()))
            .collect();
        for q in &requests {
            let one = rows.iter().any(|r| alg.contains(&Grant::row(r.clone()), q));
            if alg.contains(&ab, q) != one {
                return Err(show(
                    "rows never combine",
                    &[("grant", &ab), ("request", q)],
                ));
            }
        }
    }
    Ok(())
}

/// A grant most likely contained in `g`: rows dropped, values narrowed.
fn narrow(g: &Grant, rng: &mut Rng) -> Grant {
    let rows: Vec<Row> = match g {
        Grant::Unrestricted => return Grant::set((0..3).map(|_| rng_row(rng)).collect()),
        Grant::Set(rows) => rows.clone(),
    };
    let mut out = Vec::new();
    for r in rows {
        if rng.one_in(3) {
            continue;
        }
        let mut row = Row::default();
        for (k, v) in r.0.iter() {
            if k != "env" && rng.one_in(5) {
                continue;
            }
            let v = narrow_value(k, v, rng);
            row.insert(k.clone(), v);
        }
        out.push(row);
    }
    Grant::set(out)
}

fn narrow_value(kind: &str, v: &Value, rng: &mut Rng) -> Value {
    match v {
        Value::Star => match kind {
            "network" => Value::list(vec![]),
            "paths" | "read_paths" => Value::strs(["./src", "/tmp/x"]),
            "env" => Value::strs(["AWS_*", "PATH"]),
            _ => Value::strs(["x"]),
        },
        Value::List(items) => {
            let mut out = Vec::new();
            for e in items {
                if rng.one_in(3) {
                    continue;
                }
                out.push(match e {
                    Value::Str(s) if (kind == "paths" || kind == "read_paths") && rng.one_in(2) => {
                        Value::Str(format!("{s}/deeper"))
                    }
                    Value::Str(s) if kind == "env" && s.ends_with('*') && rng.one_in(2) => {
                        Value::Str(format!("{}X_*", &s[..s.len() - 1]))
                    }
                    other => other.clone(),
                });
            }
            Value::list(out)
        }
        other => other.clone(),
    }
}

fn rng_row(rng: &mut Rng) -> Row {
    Row::from_pairs([
        ("commands", Value::strs([format!("c{}", rng.below(4))])),
        ("paths", Value::strs([format!("./d{}", rng.below(4))])),
    ])
}

// ---------------------------------------------------------------------------------------------------------------
// proptest strategies.

const WORDS: [&str; 8] = ["cat", "ls", "git", "gcalcli", "dig", "curl", "rg", "x"];
const PREFIXES: [&str; 7] = ["./", "/", "~/", "", "/tmp/work/", "/tmp/workother/", "../"];
const SEGMENTS: [&str; 10] = [
    ".",
    "..",
    "src",
    "a",
    "b",
    "tmp",
    "work",
    "workother",
    "",
    ".cfg",
];
const ENV_NAMES: [&str; 12] = [
    "PATH",
    "PWD",
    "HOME",
    "TERM",
    "AWS_*",
    "AWS_KEY",
    "AWS_S3_*",
    "AWS_S3_KEY",
    "GH_TOKEN",
    "A*",
    "EDITOR",
    "TMPDIR",
];

fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(WORDS.to_vec()).prop_map(String::from),
        1 => "[a-z]{1,6}",
    ]
}

fn path() -> impl Strategy<Value = String> {
    (
        prop::sample::select(PREFIXES.to_vec()),
        prop::collection::vec(prop::sample::select(SEGMENTS.to_vec()), 0..5),
    )
        .prop_map(|(p, segs)| format!("{p}{}", segs.join("/")))
}

fn env_pattern() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(ENV_NAMES.to_vec()).prop_map(String::from),
        1 => "[A-C]{1,3}(_[A-C]{1,2})?",
        1 => "[A-C]{1,3}_?\\*",
    ]
}

fn star_or_list<S: Strategy<Value = String>>(elem: S, max: usize) -> impl Strategy<Value = Value> {
    prop_oneof![
        1 => Just(Value::Star),
        5 => prop::collection::vec(elem, 0..max).prop_map(Value::strs),
    ]
}

fn network() -> impl Strategy<Value = Value> {
    prop::sample::select(vec![
        Value::Star,
        Value::Bool(true),
        Value::Bool(false),
        Value::list(vec![]),
    ])
}

fn bash_row() -> impl Strategy<Value = Row> {
    (
        prop::option::of(star_or_list(word(), 8)),
        prop::option::of(star_or_list(path(), 12)),
        prop::option::of(star_or_list(path(), 12)),
        prop::option::of(network()),
        prop::option::of(star_or_list(env_pattern(), 8)),
    )
        .prop_map(|(c, p, rp, n, e)| {
            let kinds = ["commands", "paths", "read_paths", "network", "env"];
            Row::from_pairs(
                kinds
                    .into_iter()
                    .zip([c, p, rp, n, e])
                    .filter_map(|(k, v)| v.map(|v| (k, v))),
            )
        })
}

fn files_row() -> impl Strategy<Value = Row> {
    (
        prop::option::of(star_or_list(path(), 12)),
        prop::option::of(star_or_list(path(), 12)),
    )
        .prop_map(|(p, rp)| {
            Row::from_pairs(
                ["paths", "read_paths"]
                    .into_iter()
                    .zip([p, rp])
                    .filter_map(|(k, v)| v.map(|v| (k, v))),
            )
        })
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        word().prop_map(Value::Str),
        (0i64..4).prop_map(Value::Int),
        any::<bool>().prop_map(Value::Bool),
    ]
}

fn default_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        1 => Just(Value::Star),
        2 => scalar(),
        3 => prop::collection::vec(scalar(), 0..8).prop_map(Value::list),
    ]
}

fn default_row() -> impl Strategy<Value = Row> {
    prop::collection::btree_map(
        prop::sample::select(vec!["a", "b", "c", "status", "limit", "path"]).prop_map(String::from),
        default_value(),
        0..5,
    )
    .prop_map(Row::from)
}

/// `"*"` now and then; otherwise a capability set of up to `max_rows` rows.
fn grant<S: Strategy<Value = Row>>(row: S, max_rows: usize) -> impl Strategy<Value = Grant> {
    prop_oneof![
        1 => Just(Grant::Unrestricted),
        15 => prop::collection::vec(row, 0..max_rows).prop_map(Grant::set),
    ]
}

fn check(
    kind: AlgebraKind,
    a: &Grant,
    b: &Grant,
    c: &Grant,
    seed: u64,
) -> Result<(), TestCaseError> {
    let alg = kind.build(&ctx());
    laws_hold(alg.as_ref(), a, b, c, seed).map_err(TestCaseError::fail)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn proptest_bash_laws(a in grant(bash_row(), 40), b in grant(bash_row(), 40), c in grant(bash_row(), 40),
                          seed in any::<u64>()) {
        check(AlgebraKind::Bash, &a, &b, &c, seed)?;
    }

    #[test]
    fn proptest_files_laws(a in grant(files_row(), 40), b in grant(files_row(), 40), c in grant(files_row(), 40),
                           seed in any::<u64>()) {
        check(AlgebraKind::Files, &a, &b, &c, seed)?;
    }

    #[test]
    fn proptest_default_laws(a in grant(default_row(), 40), b in grant(default_row(), 40),
                             c in grant(default_row(), 40), seed in any::<u64>()) {
        check(AlgebraKind::Default, &a, &b, &c, seed)?;
    }

    #[test]
    fn proptest_mcp_laws(a in grant(default_row(), 40), b in grant(default_row(), 40),
                         c in grant(default_row(), 40), seed in any::<u64>()) {
        check(AlgebraKind::Mcp, &a, &b, &c, seed)?;
    }
}

// ---------------------------------------------------------------------------------------------------------------
// quickcheck generators: the same shapes, drawn from quickcheck's `Gen`, shrinking by dropping rows.

fn pick<T: Clone>(g: &mut Gen, items: &[T]) -> T {
    g.choose(items).cloned().unwrap()
}

fn below(g: &mut Gen, n: usize) -> usize {
    usize::arbitrary(g) % n.max(1)
}

fn qc_list(g: &mut Gen, max: usize, elem: impl Fn(&mut Gen) -> String) -> Value {
    if below(g, 6) == 0 {
        return Value::Star;
    }
    let n = below(g, max + 1);
    Value::strs((0..n).map(|_| elem(g)).collect::<Vec<_>>())
}

fn qc_path(g: &mut Gen) -> String {
    let n = below(g, 5);
    let segs: Vec<&str> = (0..n).map(|_| pick(g, &SEGMENTS)).collect();
    format!("{}{}", pick(g, &PREFIXES), segs.join("/"))
}

fn qc_env(g: &mut Gen) -> String {
    if below(g, 4) == 0 {
        let letters = ["A", "B", "C", "_"];
        let n = 1 + below(g, 4);
        let mut s: String = (0..n).map(|_| pick(g, &letters)).collect();
        if bool::arbitrary(g) {
            s.push('*');
        }
        s
    } else {
        pick(g, &ENV_NAMES).to_string()
    }
}

fn qc_bash_row(g: &mut Gen) -> Row {
    let mut pairs = Vec::new();
    if below(g, 5) != 0 {
        pairs.push(("commands", qc_list(g, 8, |g| pick(g, &WORDS).to_string())));
    }
    if bool::arbitrary(g) {
        pairs.push(("paths", qc_list(g, 12, qc_path)));
    }
    if below(g, 3) == 0 {
        pairs.push(("read_paths", qc_list(g, 12, qc_path)));
    }
    if below(g, 3) == 0 {
        let nets = [
            Value::Star,
            Value::Bool(true),
            Value::Bool(false),
            Value::list(vec![]),
        ];
        pairs.push(("network", pick(g, &nets)));
    }
    if bool::arbitrary(g) {
        pairs.push(("env", qc_list(g, 8, qc_env)));
    }
    Row::from_pairs(pairs)
}

/// A large random bash grant: `"*"` one time in twenty, otherwise up to `Gen::size()` / 2 rows.
#[derive(Debug, Clone)]
struct BashGrant(Grant);

impl Arbitrary for BashGrant {
    fn arbitrary(g: &mut Gen) -> BashGrant {
        if below(g, 20) == 0 {
            return BashGrant(Grant::Unrestricted);
        }
        let n = below(g, g.size() / 2 + 1);
        BashGrant(Grant::set((0..n).map(|_| qc_bash_row(g)).collect()))
    }

    fn shrink(&self) -> Box<dyn Iterator<Item = BashGrant>> {
        let Some(rows) = self.0.rows() else {
            return Box::new(std::iter::empty());
        };
        let rows = rows.to_vec();
        Box::new((0..rows.len()).map(move |i| {
            let mut fewer = rows.clone();
            fewer.remove(i);
            BashGrant(Grant::set(fewer))
        }))
    }
}

fn qc_bash(a: BashGrant, b: BashGrant, c: BashGrant, seed: u64) -> TestResult {
    let alg = AlgebraKind::Bash.build(&ctx());
    match laws_hold(alg.as_ref(), &a.0, &b.0, &c.0, seed) {
        Ok(()) => TestResult::passed(),
        Err(e) => TestResult::error(e),
    }
}

fn qc_files(a: BashGrant, b: BashGrant, c: BashGrant, seed: u64) -> TestResult {
    // the file tools read `paths` / `read_paths` with bash's path order, and every other kind by default
    let alg = AlgebraKind::Files.build(&ctx());
    match laws_hold(alg.as_ref(), &a.0, &b.0, &c.0, seed) {
        Ok(()) => TestResult::passed(),
        Err(e) => TestResult::error(e),
    }
}

type Property = fn(BashGrant, BashGrant, BashGrant, u64) -> TestResult;

/// Runs a property on 96 triples of grants of up to 40 rows; prints how many passed.
fn quickcheck(name: &str, prop: Property) {
    match QuickCheck::new()
        .rng(Gen::new(80))
        .tests(96)
        .quicktest(prop)
    {
        Ok(n) => println!("{name}: {n} random triples of up to 40-row grants passed every law"),
        Err(failure) => panic!("{name}: {failure:?}"),
    }
}

#[test]
fn quickcheck_bash_laws() {
    quickcheck("quickcheck_bash_laws", qc_bash);
}

#[test]
fn quickcheck_files_laws() {
    quickcheck("quickcheck_files_laws", qc_files);
}

// ---------------------------------------------------------------------------------------------------------------
// The boot check, compared.

/// The boot check passes every built-in algebra at the boot defaults and at other seeds, and our exhaustive checkers
/// agree on the very grants its sampler draws.
#[test]
fn boot_check_agrees() {
    for kind in ALL_KINDS {
        let alg = kind.build(&ctx());
        for seed in [DEFAULT_SEED, 1, 2, 3] {
            let report = check_laws("t", alg.as_ref(), seed, DEFAULT_TRIALS)
                .unwrap_or_else(|e| panic!("{kind:?} seed {seed:#x}: {e}"));
            assert_eq!(report.trials, DEFAULT_TRIALS);
        }
        // the boot check's own sample of grants, run through every law over all pairs and triples
        let mut rng = Rng::seeded(DEFAULT_SEED);
        let mut sample: Vec<Grant> = (0..30).map(|_| alg.sample(&mut rng)).collect();
        sample.sort();
        sample.dedup();
        let a = alg.as_ref();
        let m = Matrix::build(a, &sample);
        let tallies = [
            laws::reflexive(a, &sample),
            laws::transitive(&sample, &m),
            laws::merge_is_upper_bound(a, &sample),
            laws::commutative(a, &sample),
            laws::idempotent(a, &sample),
            laws::associative(a, &sample),
            laws::merge_adds_nothing(a, &sample),
        ];
        for t in tallies {
            let t = t.unwrap_or_else(|e| panic!("{kind:?}: {e}"));
            assert!(t.cases > 0);
        }
        println!(
            "boot_check_agrees: {kind:?}: check_laws passed at 4 seeds × {DEFAULT_TRIALS} trials; every law over \
             all pairs/triples of {} sampled grants passed",
            sample.len()
        );
    }
}

/// A merge that folds rows into their kind-wise bounding box makes authority no row granted: both the boot check and
/// our checkers must refuse it.
struct BoundingBox;

impl Algebra for BoundingBox {
    fn name(&self) -> &'static str {
        "bounding-box"
    }
    fn row_contains(&self, sup: &Row, sub: &Row) -> bool {
        AlgebraKind::Default.build(&ctx()).row_contains(sup, sub)
    }
    fn merge(&self, a: &Grant, b: &Grant) -> Grant {
        let (Grant::Set(x), Grant::Set(y)) = (a, b) else {
            return Grant::Unrestricted;
        };
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
    fn sample(&self, rng: &mut Rng) -> Grant {
        AlgebraKind::Default.build(&ctx()).sample(rng)
    }
}

#[test]
fn a_broken_merge_is_caught_by_both() {
    assert!(check_laws("broken", &BoundingBox, DEFAULT_SEED, DEFAULT_TRIALS).is_err());
    let d = loom_proofs::sets_domain(AlgebraKind::Default);
    let err = laws::merge_adds_nothing(&BoundingBox, &d.grants).unwrap_err();
    assert_eq!(err.law, "merge adds nothing");
    println!("a_broken_merge_is_caught_by_both: {err}");
}
