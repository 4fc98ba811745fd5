//! Instruction counts per token round trip, for callgrind (repeatable on a
//! noisy machine, unlike wall time):
//!
//! ```sh
//! cargo build --release -p railyard-benches --example token_icount
//! for c in railyard array_queue mutex_vec; do for n in 0 1000000; do
//!   valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!     target/release/examples/token_icount $c $n 2>&1 | grep refs; done; done
//! ```
//!
//! (Collected refs at 1e6 minus refs at 0) / 1e6 = instructions per round
//! trip. `ci/icount.sh` does exactly that.

use std::hint::black_box;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

use crossbeam_queue::ArrayQueue;
use railyard_core::token::TokenPool;

const CAP: usize = 1024;

fn publish(seq: &[AtomicU32], rec: &[AtomicU64], i: u32, v: u64) -> u64 {
    let s = seq[i as usize].load(Ordering::Relaxed).wrapping_add(1);
    rec[i as usize].store(v, Ordering::Relaxed);
    seq[i as usize].store(s, Ordering::Release);
    (u64::from(s) << 32) | u64::from(i)
}

fn take(seq: &[AtomicU32], rec: &[AtomicU64], wr: u64) -> (u32, u64) {
    let i = wr as u32;
    let s = (wr >> 32) as u32;
    seq[i as usize]
        .compare_exchange(s, s.wrapping_add(1), Ordering::AcqRel, Ordering::Relaxed)
        .unwrap();
    (i, rec[i as usize].load(Ordering::Relaxed))
}

fn main() {
    let mut args = std::env::args().skip(1);
    let which = args.next().unwrap_or_else(|| "railyard".into());
    let n: u64 = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let seq: Vec<AtomicU32> = (0..CAP).map(|_| AtomicU32::new(0)).collect();
    let rec: Vec<AtomicU64> = (0..CAP).map(|_| AtomicU64::new(0)).collect();
    let mut acc = 0u64;
    match which.as_str() {
        "railyard" => {
            let p = TokenPool::<u64>::new(CAP).unwrap();
            for i in 0..n {
                let wr = p.claim(black_box(i)).unwrap();
                acc ^= p.complete(black_box(wr)).unwrap();
            }
        }
        "array_queue" => {
            let q = ArrayQueue::new(CAP);
            for i in 0..CAP as u32 {
                q.push(i).unwrap();
            }
            for i in 0..n {
                let idx = q.pop().unwrap();
                let wr = publish(&seq, &rec, idx, black_box(i));
                let (idx, v) = take(&seq, &rec, black_box(wr));
                q.push(idx).unwrap();
                acc ^= v;
            }
        }
        "mutex_vec" => {
            let m = Mutex::new((0..CAP as u32).collect::<Vec<_>>());
            for i in 0..n {
                let idx = m.lock().unwrap().pop().unwrap();
                let wr = publish(&seq, &rec, idx, black_box(i));
                let (idx, v) = take(&seq, &rec, black_box(wr));
                m.lock().unwrap().push(idx);
                acc ^= v;
            }
        }
        other => panic!("unknown contender {other}"),
    }
    println!("{which} {n} {acc}");
}
