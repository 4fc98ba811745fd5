//! Instructions per token round trip, for callgrind (repeatable on a
//! noisy machine, unlike wall time):
//!
//! ```sh
//! cargo build --release -p railyard-benches --example token_icount
//! for c in railyard railyard_cache array_queue mutex_vec; do for n in 0 1000000; do
//!   valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!     target/release/examples/token_icount $c $n [1t|2t|pp] 2>&1 | grep refs; done; done
//! ```
//!
//! (Collected refs at n minus refs at 0) / operations = instructions per
//! round trip. `ci/icount.sh` does exactly that. Modes: `1t` one thread;
//! `2t` two threads, each doing `n` round trips on the shared contender
//! (per round trip = / 2n); `pp` the dedicated-poller pattern, tokens claimed
//! through one handle and completed through another (per token = / n), run
//! on one thread in rounds of 64: under valgrind, which runs one thread at a
//! time, a real poster/poller pair would mostly count spin-waits. So these
//! are the instructions each pattern costs (for the caches: refills,
//! flushes, batch links), not cache-line transfer time: criterion
//! (`benches/token.rs`) measures that, with real threads.

use std::hint::black_box;

use railyard_benches::token::{
    contended, round_trip, AqPool, Direct, MutexPool, Pool, Worker, CACHE, CAP,
};
use railyard_core::token::{TokenPool, TokenRecord};

fn one_thread<W: Worker>(mut h: W, n: u64) -> u64 {
    let mut acc = 0;
    for i in 0..n {
        let wr = h.claim(black_box(i)).unwrap();
        acc ^= h.complete(black_box(wr)).unwrap();
    }
    acc
}

/// `n` tokens claimed through `poster` and completed through `poller`, 64
/// in flight at a time.
fn cross_handles<A: Worker, B: Worker>(mut poster: A, mut poller: B, n: u64) -> u64 {
    let mut acc = 0;
    let mut ids = [0u64; 64];
    let mut done = 0;
    while done < n {
        let k = (n - done).min(64) as usize;
        for (i, id) in ids[..k].iter_mut().enumerate() {
            *id = poster.claim(black_box(done + i as u64)).unwrap();
        }
        for id in &ids[..k] {
            acc ^= poller.complete(black_box(*id)).unwrap();
        }
        done += k as u64;
    }
    acc
}

fn run<P: Pool>(p: &P, mode: &str, n: u64, cached: Option<&TokenPool<u64>>) {
    match (mode, cached) {
        ("1t", None) => {
            let mut acc = 0;
            for i in 0..n {
                acc ^= round_trip(p, black_box(i));
            }
            black_box(acc);
        }
        ("1t", Some(t)) => {
            black_box(one_thread(t.cache::<CACHE>(), n));
        }
        ("2t", None) => {
            contended(&|| Direct(p), 2, n);
        }
        ("2t", Some(t)) => {
            contended(&|| t.cache::<CACHE>(), 2, n);
        }
        ("pp", None) => {
            black_box(cross_handles(Direct(p), Direct(p), n));
        }
        ("pp", Some(t)) => {
            black_box(cross_handles(t.cache::<CACHE>(), t.cache::<CACHE>(), n));
        }
        (m, _) => panic!("unknown mode {m} (1t, 2t, pp)"),
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let which = args.next().unwrap_or_else(|| "railyard".into());
    let n: u64 = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let mode = args.next().unwrap_or_else(|| "1t".into());
    let ours = TokenPool::<u64>::new(CAP).unwrap();
    match which.as_str() {
        "railyard" => run(&ours, &mode, n, None),
        "railyard_cache" => run(&ours, &mode, n, Some(&ours)),
        "array_queue" => run(&AqPool::new(), &mode, n, None),
        "mutex_vec" => run(&MutexPool::new(), &mode, n, None),
        // The real record (one thread only): what the record costs on top
        // of the `railyard` arm's u64.
        "railyard_full_record" => {
            let full = TokenPool::<TokenRecord>::new(CAP).unwrap();
            let mut acc = 0u64;
            for i in 0..n {
                let rec = TokenRecord {
                    bytes: i as u32,
                    post_ns: i,
                    ..TokenRecord::default()
                };
                let wr = full.claim(black_box(rec)).unwrap();
                acc ^= black_box(full.complete(black_box(wr)).unwrap()).post_ns;
            }
            black_box(acc);
        }
        other => panic!("unknown contender {other}"),
    }
    println!("{which} {mode} {n}");
}
