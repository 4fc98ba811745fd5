//! Speed benchmark (not a test): a 16-sender incast of 1 simulated second
//! through the full stack. Prints wall time and events per second.
//!
//! `cargo run --release -p railyard-sim --example sim_speed [-- credit|fixed]`
use std::time::Instant;

use railyard_sim::model::Sim;
use railyard_sim::scenario::{incast, Opts};

fn main() {
    let credit = std::env::args().nth(1).as_deref() != Some("fixed");
    let o = Opts {
        senders: Some(16),
        seed: 1,
        duration_ms: Some(1000),
    };
    let cfg = incast::config(16, credit, &o);
    let t = Instant::now();
    let r = Sim::new(cfg).expect("valid").run();
    let wall = t.elapsed().as_secs_f64();
    let ev = r.counters.events;
    println!(
        "16 senders, 1 simulated second ({}): {wall:.3} s wall, {ev} events, {:.2} M events/s, simulated end {:.3} s, leaks clean: {}",
        if credit { "credit" } else { "fixed" },
        ev as f64 / wall / 1e6,
        r.end_ns as f64 / 1e9,
        r.leaks.is_clean()
    );
}
