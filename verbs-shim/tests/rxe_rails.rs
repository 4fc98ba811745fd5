//! Real-verbs test of the engine on two devices (rails): two engines in
//! one guest, each opening the same two devices (Soft-RoCE `rxe0` and
//! `rxe1` in CI, `scripts/rxe-vm --rxe-devs 2`). Rail `i` connects local
//! device `i` to the peer's NIC `i`; two rxe devices do not talk to each
//! other, but each loops back to itself, so both rails work inside one
//! guest.
//!
//! The devices come from `RAILYARD_RDMA_DEVICES` (comma-separated), else
//! from the guest's `RXE_VM_DEVICES`, else from every device found. With
//! fewer than two devices the test prints `SKIP` and passes, unless
//! `RAILYARD_REQUIRE_RAILS=1` (then it fails); `ci/rxe.sh` runs it in a
//! two-device guest with that set. `RAILYARD_RAIL_PEER_ACCOUNTING=1` (with
//! the `peer-feedback` feature) switches the RFC 4534 peer ledger on.

use railyard_verbs::engine::{
    CcMode, Engine, EngineConfig, EngineStats, Op, TaskState, Transfer, MAX_RAILS,
};
use std::time::{Duration, Instant};

#[macro_use]
mod support;
use support::{assert_idle, pattern};

const WAIT: Duration = Duration::from_secs(180);

fn rail_devices() -> Vec<String> {
    let from = |v: &str| {
        std::env::var(v).ok().map(|s| {
            s.split(',')
                .map(|d| d.trim().to_owned())
                .filter(|d| !d.is_empty())
                .collect::<Vec<_>>()
        })
    };
    from("RAILYARD_RDMA_DEVICES")
        .or_else(|| from("RXE_VM_DEVICES"))
        .unwrap_or_else(|| {
            railyard_verbs::devices()
                .map(|v| v.into_iter().map(|d| d.name).collect())
                .unwrap_or_default()
        })
}

fn config(devices: &[String]) -> EngineConfig {
    let mut c = EngineConfig::from_env().expect("MC_* variables must be valid");
    if std::env::var_os("MC_ADAPTIVE_CC_MODE").is_none() {
        c.cc.mode = CcMode::Enforce;
    }
    if let Ok(g) = std::env::var("RAILYARD_GID_INDEX") {
        c.gid_index = g.parse().expect("RAILYARD_GID_INDEX must be 0..=255");
    }
    c.device = None;
    c.devices = devices.to_vec();
    // The RFC 4534 peer ledger (needs the `peer-feedback` feature): charges
    // then also hold `HOLDS_RAIL_PEER_CHARGE`, released with the NIC side.
    c.rail.peer_accounting = std::env::var("RAILYARD_RAIL_PEER_ACCOUNTING").as_deref() == Ok("1");
    c
}

fn assert_quiescent(e: &Engine, who: &str) -> EngineStats {
    let s = assert_idle(e, who, WAIT);
    assert_eq!(
        s.rail_charged_bytes, [0; MAX_RAILS],
        "{who}: rail charges: {s:?}"
    );
    assert_eq!(
        s.rail_accounting_errors, 0,
        "{who}: rail releases refused: {s:?}"
    );
    s
}

fn wait_all(e: &Engine, b: railyard_verbs::engine::BatchId) -> Vec<TaskState> {
    let t0 = Instant::now();
    loop {
        let st = e.batch_status(b).unwrap();
        if st.iter().all(|s| s.state.is_terminal()) {
            return st.iter().map(|s| s.state).collect();
        }
        assert!(t0.elapsed() < WAIT, "batch did not finish: {st:?}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Runs `t` alone in a batch on `e`; it must complete (`tag` names it in
/// the failure message).
fn run_completed(e: &Engine, t: Transfer, tag: &str) {
    let batch = e.allocate_batch(1).unwrap();
    e.submit(batch, &[t]).unwrap();
    assert_eq!(wait_all(e, batch), [TaskState::Completed], "{tag}");
    e.free_batch(batch).unwrap();
}

/// Two devices, or `None` after printing a SKIP line (a failure with
/// `RAILYARD_REQUIRE_RAILS=1`).
fn two_devices_or_skip(test: &str) -> Option<Vec<String>> {
    let devices = rail_devices();
    if devices.len() < 2 {
        let require = std::env::var("RAILYARD_REQUIRE_RAILS").as_deref() == Ok("1");
        assert!(
            !require,
            "{test}: RAILYARD_REQUIRE_RAILS=1 but only {devices:?} found"
        );
        say!(
            "SKIP {test}: needs two RDMA devices, found {devices:?} (run through ci/rxe.sh, \
             scripts/rxe-vm --rxe-devs 2, or set RAILYARD_REQUIRE_RAILS=1 to fail instead)"
        );
        return None;
    }
    Some(devices[..2].to_vec())
}

/// A two-device engine and a one-device peer: only rail 0 (local device 0
/// ↔ peer NIC 0) is connected, on both sides, and carries everything.
#[test]
fn engine_rails_fewer_peer_nics_use_the_matched_rail_only() {
    const TEST: &str = "engine_rails_fewer_peer_nics_use_the_matched_rail_only";
    let Some(devices) = two_devices_or_skip(TEST) else {
        return;
    };
    let a = Engine::new(config(&devices)).expect("initiator on two devices");
    let b = Engine::new(config(&devices[..1])).expect("target on one device");
    const LEN: usize = 2 << 20;
    let a_mem = a.alloc_memory(2 * LEN).unwrap();
    let b_mem = b.alloc_memory(LEN).unwrap();
    let seg = a.open_segment(b.listen_addr()).expect("open_segment");
    assert_eq!(a.segment_rails(seg).unwrap(), 1);
    // The target records its side right after the handshake's barrier.
    let t0 = Instant::now();
    while b.segments().is_empty() && t0.elapsed() < WAIT {
        std::thread::sleep(Duration::from_millis(2));
    }
    let peer_seg = *b.segments().last().expect("the target knows the segment");
    assert_eq!(b.segment_rails(peer_seg).unwrap(), 1);
    say!("RAN {TEST} on {:?} → {:?}", a.devices(), b.devices());
    let data = pattern(7, LEN);
    a_mem.write_at(0, &data).unwrap();
    for (op, local) in [(Op::Write, 0u64), (Op::Read, LEN as u64)] {
        let t = Transfer {
            op,
            local: a_mem.addr() + local,
            len: LEN as u64,
            segment: seg,
            remote_offset: b_mem.addr(),
        };
        run_completed(&a, t, "");
    }
    let mut got = vec![0u8; LEN];
    a_mem.read_at(LEN, &mut got).unwrap();
    assert!(got == data, "read back different bytes");
    let s = assert_quiescent(&a, "initiator");
    assert_quiescent(&b, "target");
    assert_eq!(s.rail_slices_posted[1], 0, "{s:?}");
    assert_eq!(s.rail_slices_posted[0], s.posts, "{s:?}");
}

#[test]
fn engine_two_rails_carry_slices_and_release_every_charge() {
    const TEST: &str = "engine_two_rails_carry_slices_and_release_every_charge";
    let Some(devices) = two_devices_or_skip(TEST) else {
        return;
    };
    let devices = &devices[..];
    let a = Engine::new(config(devices)).expect("initiator on two devices");
    let b = Engine::new(config(devices)).expect("target on two devices");
    assert_eq!(a.devices(), devices);
    const N: usize = 12;
    const LEN: usize = 1 << 20; // 16 slices of 64 KiB: 2 runs of 8
    let a_mem = a.alloc_memory(2 * N * LEN).unwrap();
    let b_mem = b.alloc_memory(N * LEN).unwrap();
    let seg = a.open_segment(b.listen_addr()).expect("open_segment");
    assert_eq!(a.segment_rails(seg).unwrap(), 2);
    say!(
        "RAN {TEST} on {:?} ({:?}, {} workers/device, {} QPs/ep, slice {} B, CC {:?}, peer ledger {})",
        a.devices(),
        a.config().worker_model,
        a.config().workers,
        a.config().qps_per_endpoint,
        a.config().slice_size,
        a.config().cc.mode,
        a.config().rail.peer_accounting
    );
    // Unaligned lengths and offsets included: transfer i is LEN - 3*i bytes
    // at local offset 7*i.
    let lens: Vec<usize> = (0..N).map(|i| LEN - 3 * i).collect();
    let data = pattern(42, N * LEN);
    for (i, &len) in lens.iter().enumerate() {
        let off = i * LEN;
        a_mem.write_at(off + 7 * i, &data[off..off + len]).unwrap();
    }
    // WRITE everything in one batch.
    let batch = a.allocate_batch(N).unwrap();
    let ts: Vec<Transfer> = lens
        .iter()
        .enumerate()
        .map(|(i, &len)| Transfer {
            op: Op::Write,
            local: a_mem.addr() + (i * LEN + 7 * i) as u64,
            len: len as u64,
            segment: seg,
            remote_offset: b_mem.addr() + (i * LEN) as u64,
        })
        .collect();
    a.submit(batch, &ts).unwrap();
    let st = wait_all(&a, batch);
    assert!(st.iter().all(|s| *s == TaskState::Completed), "{st:?}");
    a.free_batch(batch).unwrap();
    let mid = assert_quiescent(&a, "initiator after WRITE");
    assert!(
        mid.rail_slices_posted[0] > 0 && mid.rail_slices_posted[1] > 0,
        "both rails must carry slices: {:?}",
        mid.rail_slices_posted
    );
    // READ it all back into the second half and compare.
    let batch = a.allocate_batch(N).unwrap();
    let back = N * LEN;
    let rs: Vec<Transfer> = lens
        .iter()
        .enumerate()
        .map(|(i, &len)| Transfer {
            op: Op::Read,
            local: a_mem.addr() + (back + i * LEN) as u64,
            len: len as u64,
            segment: seg,
            remote_offset: b_mem.addr() + (i * LEN) as u64,
        })
        .collect();
    a.submit(batch, &rs).unwrap();
    let st = wait_all(&a, batch);
    assert!(st.iter().all(|s| *s == TaskState::Completed), "{st:?}");
    a.free_batch(batch).unwrap();
    for (i, &len) in lens.iter().enumerate() {
        let mut got = vec![0u8; len];
        a_mem.read_at(back + i * LEN, &mut got).unwrap();
        assert!(
            got == data[i * LEN..i * LEN + len],
            "transfer {i} ({len} B) read back different bytes"
        );
    }
    let s = assert_quiescent(&a, "initiator");
    assert_quiescent(&b, "target");
    let total: u64 = s.rail_slices_posted.iter().sum();
    assert_eq!(total, s.posts, "{s:?}");
    assert!(
        s.rail_slices_posted[0] >= total / 8 && s.rail_slices_posted[1] >= total / 8,
        "rail split too lopsided: {:?}",
        s.rail_slices_posted
    );
    say!(
        "{TEST}: slices posted per rail {:?}, CC admitted/released {}/{}",
        &s.rail_slices_posted[..2],
        s.gate.admitted,
        s.gate.released
    );
}

/// Reconnecting a two-rail segment replaces the endpoint of every rail and
/// moves every rail's route to a new generation; both rails then carry
/// traffic again and everything is released.
#[test]
fn engine_two_rails_reconnect_replaces_every_rail() {
    const TEST: &str = "engine_two_rails_reconnect_replaces_every_rail";
    let Some(devices) = two_devices_or_skip(TEST) else {
        return;
    };
    let devices = &devices[..];
    let a = Engine::new(config(devices)).expect("initiator on two devices");
    let b = Engine::new(config(devices)).expect("target on two devices");
    const LEN: usize = 2 << 20; // 32 slices: 4 runs of 8
    let a_mem = a.alloc_memory(2 * LEN).unwrap();
    let b_mem = b.alloc_memory(LEN).unwrap();
    let seg = a.open_segment(b.listen_addr()).expect("open_segment");
    assert_eq!(a.segment_rails(seg).unwrap(), 2);
    say!(
        "RAN {TEST} on {:?} ({:?}, CC {:?})",
        a.devices(),
        a.config().worker_model,
        a.config().cc.mode
    );
    let run = |op, local: usize, tag: &str| {
        let t = Transfer {
            op,
            local: a_mem.addr() + local as u64,
            len: LEN as u64,
            segment: seg,
            remote_offset: b_mem.addr(),
        };
        run_completed(&a, t, tag);
    };
    let data = pattern(9, LEN);
    a_mem.write_at(0, &data).unwrap();
    run(Op::Write, 0, "WRITE before the reconnect");
    let before: Vec<_> = (0..2)
        .map(|r| a.segment_rail_info(seg, r).unwrap())
        .collect();
    let gens: Vec<u32> = (0..2)
        .map(|r| {
            a.rail_route_snapshot(seg, r)
                .unwrap()
                .map_or(0, |s| s.generation)
        })
        .collect();
    let posted_before = assert_quiescent(&a, "initiator before the reconnect").rail_slices_posted;
    a.reconnect_segment(seg).expect("reconnect");
    for r in 0..2u16 {
        let now = a.segment_rail_info(seg, r).unwrap();
        let old = before[usize::from(r)];
        assert_eq!(now.device, r);
        assert_eq!(now.rails, 2);
        assert!(now.active, "rail {r}: new endpoint not active: {now:?}");
        assert_ne!(
            now.endpoint, old.endpoint,
            "rail {r}: endpoint not replaced"
        );
        assert_eq!(now.reconnects, 1, "{now:?}");
        assert_eq!(now.route, old.route, "rail {r}: the route domain must stay");
        if let Some(s) = a.rail_route_snapshot(seg, r).unwrap() {
            assert!(
                s.generation > gens[usize::from(r)],
                "rail {r}: route generation {} not advanced from {}",
                s.generation,
                gens[usize::from(r)]
            );
        }
    }
    run(Op::Read, LEN, "READ after the reconnect");
    let mut got = vec![0u8; LEN];
    a_mem.read_at(LEN, &mut got).unwrap();
    assert!(got == data, "read back different bytes after the reconnect");
    let s = assert_quiescent(&a, "initiator");
    assert_quiescent(&b, "target");
    for r in 0..2 {
        assert!(
            s.rail_slices_posted[r] > posted_before[r],
            "rail {r} carried nothing after the reconnect: {:?} → {:?}",
            posted_before,
            s.rail_slices_posted
        );
    }
    say!(
        "{TEST}: endpoints {:?} → {:?}, slices per rail {:?} → {:?}",
        before.iter().map(|i| i.endpoint).collect::<Vec<_>>(),
        (0..2)
            .map(|r| a.segment_rail_info(seg, r).unwrap().endpoint)
            .collect::<Vec<_>>(),
        &posted_before[..2],
        &s.rail_slices_posted[..2]
    );
}

/// `Avoid` on one rail moves the slice to the other rail (RFC 4162: "use
/// the existing alternate rail"): everything completes on rail 0.
#[test]
fn engine_rails_avoided_rail_moves_slices_to_the_other() {
    const TEST: &str = "engine_rails_avoided_rail_moves_slices_to_the_other";
    let Some(devices) = two_devices_or_skip(TEST) else {
        return;
    };
    let a = Engine::new(config(&devices)).expect("initiator on two devices");
    // Every admission on device 1 is avoided (as a quarantine racing the
    // planner would) while the planner still finds it usable.
    a.fault_avoid_device(Some(1));
    let b = Engine::new(config(&devices)).expect("target on two devices");
    const LEN: usize = 2 << 20;
    let a_mem = a.alloc_memory(2 * LEN).unwrap();
    let b_mem = b.alloc_memory(LEN).unwrap();
    let seg = a.open_segment(b.listen_addr()).expect("open_segment");
    assert_eq!(a.segment_rails(seg).unwrap(), 2);
    say!("RAN {TEST} on {:?}", a.devices());
    let data = pattern(9, LEN);
    a_mem.write_at(0, &data).unwrap();
    for (op, local) in [(Op::Write, 0u64), (Op::Read, LEN as u64)] {
        let t = Transfer {
            op,
            local: a_mem.addr() + local,
            len: LEN as u64,
            segment: seg,
            remote_offset: b_mem.addr(),
        };
        run_completed(&a, t, "");
    }
    let mut got = vec![0u8; LEN];
    a_mem.read_at(LEN, &mut got).unwrap();
    assert!(got == data, "read back different bytes");
    let s = assert_quiescent(&a, "initiator");
    assert_quiescent(&b, "target");
    assert!(
        s.rail_moves > 0 && s.avoids > 0,
        "nothing was planned on rail 1: {s:?}"
    );
    assert_eq!(s.rail_slices_posted[1], 0, "{s:?}");
    assert_eq!(s.rail_slices_posted[0], s.posts, "{s:?}");
    say!("{TEST}: avoids {}, slices moved {}", s.avoids, s.rail_moves);
}
