//! `railyard bench`: an RDMA WRITE/READ bandwidth and latency benchmark over the
//! railyard engine that speaks perftest's flags (`ib_write_bw -d rxe0 -x 1
//! -s 64K -D 5 HOST`) and Mooncake `transfer_engine_bench`'s
//! (`--threads`, `--batch_size`, `--block_size`, `--operation`,
//! `--device_name`, `--segment_id`, `--buffer_size`).
//!
//! Like perftest, one side is the server (no peer given) and one the
//! client; they meet on a TCP control connection (`-p`, default 18515):
//! the client says how much memory it needs, the server registers it and
//! answers with its engine's handshake port, the client opens the segment
//! and runs, and at the end sends its report, which both sides print.
//!
//! The client runs `--threads` submitter threads; each keeps `--depth`
//! batches of `--batch_size` transfers of `--size` bytes in flight over
//! its own part of the buffer (slots wrap when the part is smaller than
//! depth × batch × size; `--verify` needs them not to), for `--duration`
//! seconds or `--iters` transfers per thread. The report has perftest's
//! columns (`#bytes #iterations BW peak BW average MsgRate`), the batch
//! latency p50/p99/p99.9 (HDR histogram, nearest rank: the same
//! definition as the simulator's `report::percentile`) and the process's
//! CPU seconds (user + system, getrusage), also as `--json`.
//!
//! `--lat` is perftest's latency test (`ib_write_lat` / `ib_read_lat`):
//! one thread, one transfer in flight, `-n` round trips per size (1000 by
//! default), each timed from submit until its completion is seen (the
//! submitter sleeps in `Engine::wait_batch`; `--wait poll` busy-polls
//! `Engine::batch_done` instead, as perftest spins on its CQ). The table is
//! perftest's (`t_min t_max
//! t_typical t_avg 99% 99.9%`, µs) with the CPU µs per transfer.
//!
//! Without the `verbs` feature only the argument checks run (and the
//! tests of the report); the run itself says the build has no RDMA.
//!
//! The module reads top-down: [`args`] the flags and the checks that make
//! a client's [`Plan`]; [`report`] what is measured and printed;
//! [`control`] the messages of the control connection; `run` the server
//! and the client themselves (with the `verbs` feature); [`error`] the
//! typed [`BenchError`] every step returns.
#![cfg_attr(not(feature = "verbs"), allow(dead_code))]

use std::process::ExitCode;

pub mod args;
pub mod control;
pub mod error;
pub mod report;
#[cfg(feature = "verbs")]
mod run;

pub use args::{BenchArgs, Plan};
pub use error::BenchError;

/// Entry point of `railyard bench`.
pub fn main(a: BenchArgs) -> ExitCode {
    match a.plan().and_then(|plan| start(&a, plan)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => e.exit(),
    }
}

/// Runs the server (no plan) or the client.
#[cfg(feature = "verbs")]
fn start(a: &BenchArgs, plan: Option<Plan>) -> Result<(), BenchError> {
    match plan {
        None => run::server(a),
        Some(p) => run::client(a, &p),
    }
}

/// Without the `verbs` feature there is nothing to run.
#[cfg(not(feature = "verbs"))]
fn start(_: &BenchArgs, _: Option<Plan>) -> Result<(), BenchError> {
    Err(BenchError::NoRdma)
}
