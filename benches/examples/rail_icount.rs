//! Instructions per rail `pick` + `release(Completed)` with the peer flag
//! off, for callgrind: build once without and once with `peer-feedback` to
//! compare "no ledger compiled in" with "compiled in, flag off" on
//! repeatable instruction counts instead of noisy nanoseconds.
//! `ci/icount.sh` runs it.
//!
//! Args: `<devices> <iterations>`.

use std::hint::black_box;

use railyard_core::rail::{DeviceSpec, Outcome, RailConfig, Selector};

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(4);
    let iters: u64 = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let devs: Vec<DeviceSpec> = (0..n).map(|_| DeviceSpec::new(25_000_000_000)).collect();
    let sel = Selector::new(&devs, RailConfig::default()).unwrap();
    let mut now = 10_000u64;
    for i in 0..iters {
        now += 3_000;
        let p = sel.pick(black_box(Some(i as u32 % 4)), black_box(65536), now);
        sel.release(
            p.charge,
            Outcome::Completed {
                post_ns: now - 2_000,
            },
            now,
        )
        .unwrap();
    }
    println!(
        "{n} devices, {iters} picks, counters {:?}",
        sel.counters().decisions
    );
}
