//! Speed benchmark (not a test): 16-sender scenarios of 1 simulated
//! second through the full stack (real token pool, endpoint table, rail
//! selector, controller). Prints wall time and events per second.
//!
//! `cargo run --release -p railyard-sim --example sim_speed`
use std::time::Instant;

use railyard_core::cc::Mode;
use railyard_sim::model::{Sim, SimConfig};
use railyard_sim::scenario::{cc, incast, Opts};

fn bench(name: &str, cfg: SimConfig) {
    let t = Instant::now();
    let r = Sim::new(cfg).expect("valid").run();
    let wall = t.elapsed().as_secs_f64();
    let ev = r.counters.events;
    println!(
        "{name:<40} {wall:>7.3} s wall  {ev:>9} events  {:>6.2} M events/s  (simulated {:.3} s, leaks clean: {})",
        ev as f64 / wall / 1e6,
        r.end_ns as f64 / 1e9,
        r.leaks.is_clean()
    );
}

fn main() {
    let o = Opts {
        senders: Some(16),
        seed: 1,
        duration_ms: Some(1000),
    };
    bench("incast fixed, 4 MiB WRs", incast::config(16, false, &o));
    bench("incast credit, 4 MiB WRs", incast::config(16, true, &o));
    bench(
        "cc incast enforce, 256 KiB WRs",
        cc::incast_config(&o, cc::cc_config(Mode::Enforce)),
    );
}
