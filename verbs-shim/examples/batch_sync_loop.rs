//! The Rust-engine baseline of `scripts/bench-python.sh`: the same loop
//! `python/bench/batch_write.py` runs through Python, straight on
//! [`railyard_verbs::engine::Engine`]: two engines in one process (one
//! device, loopback), 128 × 64 KiB WRITEs per batch, each batch submitted,
//! waited for (the same spin-then-sleep wait the Python binding uses) and
//! freed, `iters` times after 5 warm-up batches.
//!
//! ```text
//! batch_sync_loop [iters] [device]
//! ```
//!
//! Prints `RESULT rust batches=N MiB/s=X us/call=Y`. Settings come from the
//! `MC_*` variables.

use railyard_verbs::engine::{Engine, EngineConfig, Op, TaskState, Transfer};
use std::time::{Duration, Instant};

const N: usize = 128;
const SIZE: u64 = 64 << 10;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let iters: usize = args.get(1).map_or(Ok(200), |s| s.parse())?;
    let mut cfg = EngineConfig::from_env()?;
    if let Some(d) = args.get(2) {
        cfg.device = Some(d.clone());
    }
    let a = Engine::new(cfg.clone())?;
    let b = Engine::new(cfg)?;
    let src = a.alloc_memory(N * SIZE as usize)?;
    let dst = b.alloc_memory(N * SIZE as usize)?;
    let seg = a.open_segment(b.listen_addr())?;
    let ts: Vec<Transfer> = (0..N as u64)
        .map(|i| Transfer {
            op: Op::Write,
            local: src.addr() + i * SIZE,
            len: SIZE,
            segment: seg,
            remote_offset: dst.addr() + i * SIZE,
        })
        .collect();
    let one = || -> Result<(), Box<dyn std::error::Error>> {
        let batch = a.allocate_batch(N)?;
        a.submit(batch, &ts)?;
        let mut spins = 0u32;
        loop {
            let st = a.batch_status(batch)?;
            if st.iter().all(|s| s.state.is_terminal()) {
                if st.iter().any(|s| s.state != TaskState::Completed) {
                    return Err(format!("batch failed: {st:?}").into());
                }
                break;
            }
            spins += 1;
            if spins < 64 {
                std::thread::yield_now();
            } else {
                let us = (u64::from(spins - 64) * 10).clamp(10, 500);
                std::thread::sleep(Duration::from_micros(us));
            }
        }
        a.free_batch(batch)?;
        Ok(())
    };
    for _ in 0..5 {
        one()?;
    }
    let t0 = Instant::now();
    for _ in 0..iters {
        one()?;
    }
    let dt = t0.elapsed().as_secs_f64();
    let mib = (iters * N) as f64 * SIZE as f64 / f64::from(1 << 20);
    println!(
        "RESULT rust batches={iters} MiB/s={:.1} us/call={:.1}",
        mib / dt,
        dt * 1e6 / iters as f64
    );
    Ok(())
}
