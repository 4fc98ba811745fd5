//! Helpers shared by the real-verbs engine test binaries (each declares
//! `#[macro_use] mod support;` and uses a subset, hence the `dead_code`
//! allowance).
#![allow(dead_code)]

pub mod hostile;
pub mod netdev;
pub mod tracer;

use railyard_verbs::engine::{
    BatchId, CcMode, Engine, EngineConfig, EngineError, EngineStats, TaskState,
};
use railyard_verbs::VerbsError;
use std::time::{Duration, Instant};

/// One line to stderr, unbuffered and unmixed with the test harness.
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($t)*);
    }};
}

/// A reproducible byte pattern (xorshift) for read-back checks.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// The engine configuration of the device tests: `MC_*` from the
/// environment, the CC controller in enforce mode unless
/// `MC_ADAPTIVE_CC_MODE` says otherwise, and `RAILYARD_RDMA_DEVICE` /
/// `RAILYARD_GID_INDEX` if set.
pub fn env_config() -> EngineConfig {
    let mut c = EngineConfig::from_env().expect("MC_* variables must be valid");
    if std::env::var_os("MC_ADAPTIVE_CC_MODE").is_none() {
        c.cc.mode = CcMode::Enforce;
    }
    if let Ok(d) = std::env::var("RAILYARD_RDMA_DEVICE") {
        c.device = Some(d);
    }
    if let Ok(g) = std::env::var("RAILYARD_GID_INDEX") {
        c.gid_index = g.parse().expect("RAILYARD_GID_INDEX must be 0..=255");
    }
    c
}

/// Whether `test` should skip because `e` says there is no RDMA device
/// (and `RAILYARD_REQUIRE_RDMA=1` is not set); prints the `SKIP` line.
pub fn skips_without_device(test: &str, e: &EngineError) -> bool {
    let skip = matches!(e, EngineError::Verbs(VerbsError::NoDevice))
        && std::env::var("RAILYARD_REQUIRE_RDMA").as_deref() != Ok("1");
    if skip {
        say!(
            "SKIP {test}: no RDMA device found (run through ci/rxe.sh, or set \
             RAILYARD_REQUIRE_RDMA=1 to fail instead of skipping)"
        );
    }
    skip
}

/// Waits until `e` is idle, then asserts every gauge is back to zero:
/// tokens, endpoint outstanding posts, QP depth, CQ outstanding, open
/// slices, memory pins, refused completions, and the post gate's in-flight bytes and
/// permits (every admitted permit released, no refusal). Returns the stats
/// for the caller's own checks.
pub fn assert_idle(e: &Engine, who: &str, wait: Duration) -> EngineStats {
    assert!(e.wait_idle(wait), "{who}: never went idle: {:?}", e.stats());
    let s = e.stats();
    assert_eq!(s.tokens_in_use, 0, "{who}: tokens leaked: {s:?}");
    assert_eq!(
        s.endpoint_outstanding, 0,
        "{who}: endpoint outstanding: {s:?}"
    );
    assert_eq!(s.qp_depth, 0, "{who}: QP depth: {s:?}");
    assert_eq!(s.cq_outstanding, 0, "{who}: CQ outstanding: {s:?}");
    assert_eq!(s.slices_pending, 0, "{who}: slices pending: {s:?}");
    assert_eq!(s.mem_pins, 0, "{who}: memory pins leaked: {s:?}");
    assert_eq!(
        s.bad_completions, 0,
        "{who}: refused (double) completions: {s:?}"
    );
    let g = s.gate;
    assert_eq!(g.in_flight_bytes, 0, "{who}: CC in-flight bytes: {g:?}");
    assert_eq!(g.admitted, g.released, "{who}: CC permits: {g:?}");
    assert_eq!(g.release_errors, 0, "{who}: CC release refused: {g:?}");
    assert_eq!(g.acquire_errors, 0, "{who}: CC acquire errors: {g:?}");
    s
}

/// Waits until every task of `batch` is terminal and returns their states;
/// panics after `within`. Between polls it sleeps `pause`, or yields the
/// thread when `pause` is zero.
pub fn wait_batch_for(
    e: &Engine,
    batch: BatchId,
    within: Duration,
    pause: Duration,
) -> Vec<TaskState> {
    let t0 = Instant::now();
    loop {
        // `batch_done` (the cheap check) must agree with the statuses read
        // around it: never done while a status read after it is open, and
        // done at the latest one poll after every status is terminal.
        let done = e.batch_done(batch).unwrap();
        let st = e.batch_status(batch).unwrap();
        let terminal = st.iter().all(|s| s.state.is_terminal());
        if done {
            assert!(terminal, "batch_done while a task is open: {st:?}");
            return st.iter().map(|s| s.state).collect();
        }
        assert!(t0.elapsed() < within, "batch did not finish: {st:?}");
        if pause.is_zero() {
            std::thread::yield_now();
        } else {
            std::thread::sleep(pause);
        }
    }
}
