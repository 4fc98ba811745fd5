//! The composed hot path against the same work composed by hand, in the
//! same run (see `railyard_benches::hotpath` for what one op is).
//!
//! `cargo bench -p railyard-benches --bench hotpath`; instruction counts
//! (repeatable on a noisy host): `ci/icount.sh` (the `hotpath_icount`
//! example under callgrind).
//!
//! Goals (issue #13): the composition costs ≤ 2 % instructions over the
//! hand-composed path, and ≤ 40 ns per slice in enforce. Measured figures
//! are in `railyard_core::completion`'s module docs.
use criterion::{criterion_group, criterion_main, Criterion};
use railyard_benches::hotpath::Fixture;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("hotpath_post_complete");
    for arm in [
        "hand_nocc",
        "composed_nocc",
        "composed_off",
        "composed_observe",
        "hand_enforce",
        "composed_enforce",
        "hand_all",
        "composed_all",
    ] {
        let mut f = Fixture::new();
        g.bench_function(arm, |b| {
            let mut now = 0u64;
            let op: fn(&mut Fixture, u64) = match arm {
                "hand_nocc" => Fixture::hand_nocc,
                "composed_nocc" => Fixture::composed_nocc,
                "composed_off" => Fixture::composed_off,
                "composed_observe" => Fixture::composed_observe,
                "hand_enforce" => Fixture::hand_enforce,
                "composed_enforce" => Fixture::composed_enforce,
                "hand_all" => Fixture::hand_all,
                _ => Fixture::composed_all,
            };
            b.iter(|| {
                now += 1000;
                op(&mut f, now)
            })
        });
        f.check_idle();
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
