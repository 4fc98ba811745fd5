//! Instruction counts per slice (post + complete) through the composed hot
//! path and the hand-composed equivalent, for callgrind:
//!
//! ```sh
//! cargo build --release -p railyard-benches --example hotpath_icount
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!   target/release/examples/hotpath_icount composed_enforce 1000000
//! ```
//!
//! (Collected refs at N minus refs at 0) / N = instructions per slice.
//! `ci/icount.sh` does exactly that for every arm.
use railyard_benches::hotpath::Fixture;

fn main() {
    let mut args = std::env::args().skip(1);
    let which = args.next().unwrap_or_else(|| "composed_enforce".into());
    let n: u64 = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let mut f = Fixture::new();
    f.run(&which, n);
}
