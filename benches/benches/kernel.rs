//! Criterion benches of the policy kernel (see `benches/README.md` for how to run them and the results):
//!
//! - `containment_10k`: a 10,000-row bash capability set against a request that fits its first row (found early),
//!   its last row (found late), and no row (absent: every row is tried);
//! - `merge_5k`: merging two 5,000-row sets (disjoint, and the same set twice);
//! - `boot_check`: `check_laws` with `DEFAULT_TRIALS` (300) for each built-in algebra, and for the four tools a
//!   manifest without `[tools]` gets (bash, read_file, write_file, edit_file), as boot runs it.
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use loom_benches::{bash_set, ctx, first_and_last, request_absent, request_for, DEFAULT_TOOLS};
use loom_kernel::{check_laws, AlgebraKind, DEFAULT_SEED, DEFAULT_TRIALS};

fn containment(c: &mut Criterion) {
    let bash = AlgebraKind::Bash.build(&ctx());
    let set = bash_set(0, 10_000);
    let Some((first, last)) = first_and_last(&set) else {
        return;
    };
    let early = request_for(first);
    let late = request_for(last);
    let absent = request_absent();
    assert!(bash.contains(&set, &early) && bash.contains(&set, &late));
    assert!(!bash.contains(&set, &absent));
    let mut g = c.benchmark_group("containment_10k");
    g.bench_function("found_early", |b| {
        b.iter(|| bash.contains(black_box(&set), black_box(&early)))
    });
    g.bench_function("found_late", |b| {
        b.iter(|| bash.contains(black_box(&set), black_box(&late)))
    });
    g.bench_function("absent", |b| {
        b.iter(|| bash.contains(black_box(&set), black_box(&absent)))
    });
    g.finish();
}

fn merge(c: &mut Criterion) {
    let bash = AlgebraKind::Bash.build(&ctx());
    let x = bash_set(0, 5_000);
    let y = bash_set(5_000, 10_000);
    let mut g = c.benchmark_group("merge_5k");
    g.bench_function("disjoint", |b| {
        b.iter(|| bash.merge(black_box(&x), black_box(&y)))
    });
    g.bench_function("same_set", |b| {
        b.iter(|| bash.merge(black_box(&x), black_box(&x)))
    });
    g.finish();
}

fn boot_check(c: &mut Criterion) {
    let ctx = ctx();
    let mut g = c.benchmark_group("boot_check");
    for kind in [
        AlgebraKind::Default,
        AlgebraKind::Files,
        AlgebraKind::Bash,
        AlgebraKind::Mcp,
    ] {
        let alg = kind.build(&ctx);
        let name = format!("{}_300_trials", alg.name());
        g.bench_function(name, |b| {
            b.iter(|| {
                check_laws(
                    "bench",
                    alg.as_ref(),
                    DEFAULT_SEED,
                    black_box(DEFAULT_TRIALS),
                )
            })
        });
    }
    let tools: Vec<_> = DEFAULT_TOOLS
        .iter()
        .map(|(tool, kind)| (*tool, kind.build(&ctx)))
        .collect();
    g.bench_function("four_default_tools_300_trials", |b| {
        b.iter(|| {
            tools
                .iter()
                .map(|(tool, alg)| {
                    check_laws(tool, alg.as_ref(), DEFAULT_SEED, black_box(DEFAULT_TRIALS))
                })
                .all(|r| r.is_ok())
        })
    });
    g.finish();
}

criterion_group!(benches, containment, merge, boot_check);
criterion_main!(benches);
