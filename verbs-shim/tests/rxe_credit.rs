//! Receiver-advertised credits (RFC 2849) on real verbs: several engines on
//! one device (Soft-RoCE `rxe0` in CI) connected over loopback through the
//! descriptor handshake, whose TCP connection becomes the credit control
//! channel.
//!
//! Covered: default off is unchanged; required against off is refused
//! with a typed error on both sides; optional against off falls back to
//! legacy dispatch with the metric; a receiver with small capacities and
//! two sender engines, a slow consumer, the outstanding-credit invariant
//! sampled throughout and the data read back; a data window held at zero
//! (consumer slots) and reopened through the control channel; a receiver
//! restart (new session, old credit fenced, never reused); duplicated,
//! reordered and delayed control frames; a silent receiver (freshness TTL
//! → Stale) and its recovery. Every test ends with the engines idle and
//! every sender reservation released.
//!
//! Without an RDMA device each test prints a `SKIP` line and passes; with
//! `RAILYARD_REQUIRE_RDMA=1` it fails instead.

use railyard_verbs::engine::{
    BatchId, CreditFaults, CreditPolicy, CreditStats, Engine, EngineConfig, EngineError, LinkPhase,
    Negotiated, Op, PressureSource, Resource, SegmentId, TaskState, Transfer,
};
use railyard_verbs::MemoryRegion;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[macro_use]
mod support;
use support::{assert_idle, pattern, skips_without_device};

const WAIT: Duration = Duration::from_secs(120);
const BYTES: usize = Resource::DataBytes.index();
const REQS: usize = Resource::RequestSlots.index();
const CONS: usize = Resource::ConsumerSlots.index();

fn config(policy: CreditPolicy) -> EngineConfig {
    let mut c = support::env_config();
    c.credit.policy = policy;
    c.credit.refresh = Duration::from_millis(20);
    c.credit.ttl = Duration::from_millis(2000);
    c
}

/// An engine with `cfg`, or None after printing a SKIP line.
fn engine(test: &str, cfg: EngineConfig) -> Option<Engine> {
    match Engine::new(cfg) {
        Ok(e) => Some(e),
        Err(e) if skips_without_device(test, &e) => None,
        Err(e) => panic!("{test}: cannot start the engine: {e}"),
    }
}

fn wait_batch(e: &Engine, batch: BatchId) -> Vec<TaskState> {
    support::wait_batch_for(e, batch, WAIT, Duration::from_millis(1))
}

fn write(mem: &MemoryRegion, off: usize, seg: SegmentId, remote: u64, len: usize) -> Transfer {
    Transfer {
        op: Op::Write,
        local: mem.addr() + off as u64,
        len: len as u64,
        segment: seg,
        remote_offset: remote,
    }
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < WAIT, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The receiver-side accepted segment of the sender whose credit session
/// is active (the receiver's segments in accept order).
fn accepted(r: &Engine, n: usize) -> Vec<SegmentId> {
    wait_for("the receiver's accepted segments", || {
        r.credit_stats()
            .map(|s| s.peers.iter().filter(|p| p.receiver_epoch > 0).count() >= n)
            .unwrap_or(false)
    });
    let s = r.credit_stats().unwrap();
    s.peers
        .iter()
        .filter(|p| p.receiver_epoch > 0)
        .map(|p| SegmentId(p.segment))
        .collect()
}

/// The receiver's allocator conserves capacity and never has more
/// outstanding than capacity.
fn check_receiver(s: &CreditStats, who: &str) {
    for k in [BYTES, REQS, CONS] {
        let m = &s.receiver;
        assert_eq!(
            m.free[k] + m.outstanding[k] + m.fencing[k],
            s.capacity[k],
            "{who}: resource {k} not conserved: {m:?}"
        );
        let sum: u64 = s.peers.iter().map(|p| p.receiver_outstanding[k]).sum();
        assert!(
            sum <= s.capacity[k],
            "{who}: Σ outstanding {sum} > capacity"
        );
    }
    assert_eq!(s.receiver.violations, 0, "{who}: violations: {s:?}");
    assert_eq!(
        s.receiver.protocol_errors, 0,
        "{who}: protocol errors: {s:?}"
    );
}

/// Every sender reservation released, no violation, no malformed frame.
fn check_sender_end(e: &Engine, who: &str) {
    let s = e.credit_stats().expect("credit on");
    assert!(s.sender_idle(), "{who}: sender reservations held: {s:?}");
    assert_eq!(s.sender.violations, 0, "{who}: violations: {s:?}");
    assert_eq!(s.sender.protocol_errors, 0, "{who}: protocol errors: {s:?}");
    assert_eq!(s.malformed, 0, "{who}: malformed frames: {s:?}");
    assert_eq!(s.sender.refused_ops, 0, "{who}: refused ops: {s:?}");
}

#[test]
fn credit_default_off_is_unchanged() {
    let test = "credit_default_off_is_unchanged";
    let Some(a) = engine(test, support::env_config()) else {
        return;
    };
    assert_eq!(a.config().credit.policy, CreditPolicy::Off);
    let b = Engine::new(support::env_config()).unwrap();
    say!("RAN {test} on {}", a.device());
    let am = a.alloc_memory(1 << 20).unwrap();
    let bm = b.alloc_memory(1 << 20).unwrap();
    let seg = a.open_segment(b.listen_addr()).unwrap();
    assert!(a.credit_stats().is_none() && b.credit_stats().is_none());
    assert_eq!(a.segment_credit(seg), None);
    assert!(matches!(
        a.consume(seg, 1),
        Err(EngineError::CreditNotActive(_))
    ));
    let data = pattern(7, 300_000);
    am.write_at(0, &data).unwrap();
    let bt = a.allocate_batch(1).unwrap();
    a.submit(bt, &[write(&am, 0, seg, bm.addr(), data.len())])
        .unwrap();
    assert_eq!(wait_batch(&a, bt), vec![TaskState::Completed]);
    assert_eq!(a.task_backpressure(bt, 0).unwrap(), None);
    let mut got = vec![0u8; data.len()];
    bm.read_at(0, &mut got).unwrap();
    assert!(got == data);
    a.free_batch(bt).unwrap();
    assert_idle(&a, "a", WAIT);
    assert_idle(&b, "b", WAIT);
}

#[test]
fn credit_required_vs_off_is_refused_both_ways() {
    let test = "credit_required_vs_off_is_refused_both_ways";
    let Some(req) = engine(test, config(CreditPolicy::Required)) else {
        return;
    };
    let off = Engine::new(support::env_config()).unwrap();
    say!("RAN {test} on {}", req.device());
    // Required initiator, off target: refused here, before any QP.
    match req.open_segment(off.listen_addr()) {
        Err(EngineError::CreditRefused { ours, theirs, .. }) => {
            assert_eq!((ours, theirs), ("required", "off"));
        }
        other => panic!("expected CreditRefused, got {other:?}"),
    }
    // Off initiator, required target: the off side sees the peer's
    // required capability and refuses too (a clear error, not a hang).
    match off.open_segment(req.listen_addr()) {
        Err(EngineError::CreditRefused { ours, theirs, why }) => {
            assert_eq!((ours, theirs), ("off", "required"));
            assert!(why.contains("requires"), "{why}");
        }
        other => panic!("expected CreditRefused, got {other:?}"),
    }
    wait_for("the target's refusal", || {
        req.credit_stats().unwrap().refused >= 2
    });
    assert!(req.segments().is_empty() && off.segments().is_empty());
    assert_idle(&req, "required", WAIT);
    assert_idle(&off, "off", WAIT);
}

#[test]
fn credit_optional_vs_off_falls_back_with_the_metric() {
    let test = "credit_optional_vs_off_falls_back_with_the_metric";
    let Some(opt) = engine(test, config(CreditPolicy::Optional)) else {
        return;
    };
    let off = Engine::new(support::env_config()).unwrap();
    say!("RAN {test} on {}", opt.device());
    let om = opt.alloc_memory(1 << 20).unwrap();
    let fm = off.alloc_memory(1 << 20).unwrap();
    let seg = opt.open_segment(off.listen_addr()).unwrap();
    assert_eq!(opt.segment_credit(seg), Some(Negotiated::OptionalLegacy));
    let s = opt.credit_stats().unwrap();
    assert_eq!(s.legacy_fallbacks, 1);
    assert_eq!(s.sender.legacy_fallbacks, 1);
    // Legacy: ungated, and it works.
    let data = pattern(3, 200_000);
    om.write_at(0, &data).unwrap();
    let bt = opt.allocate_batch(1).unwrap();
    opt.submit(bt, &[write(&om, 0, seg, fm.addr(), data.len())])
        .unwrap();
    assert_eq!(wait_batch(&opt, bt), vec![TaskState::Completed]);
    let mut got = vec![0u8; data.len()];
    fm.read_at(0, &mut got).unwrap();
    assert!(got == data);
    opt.free_batch(bt).unwrap();
    let s = opt.credit_stats().unwrap();
    assert_eq!(s.peers[0].phase, LinkPhase::Ungated);
    assert_eq!(s.sender.granted, [0; 4]);
    // Optional against optional: active.
    let opt2 = Engine::new(config(CreditPolicy::Optional)).unwrap();
    let seg2 = opt.open_segment(opt2.listen_addr()).unwrap();
    assert_eq!(opt.segment_credit(seg2), Some(Negotiated::Active(1)));
    assert_idle(&opt, "optional", WAIT);
    assert_idle(&off, "off", WAIT);
    check_sender_end(&opt, "optional");
}

/// A receiver with small capacities, two sender engines writing
/// concurrently, a slow consumer returning consumer slots with a delay;
/// the invariants are sampled throughout and every byte is read back.
#[test]
fn credit_two_senders_bounded_by_receiver_capacity() {
    let test = "credit_two_senders_bounded_by_receiver_capacity";
    const CAP_BYTES: u64 = 256 << 10;
    const CAP_REQS: u64 = 6;
    const CAP_CONS: u64 = 10;
    const TASKS: usize = 24;
    const LEN: usize = 48 << 10;
    let mut rc = config(CreditPolicy::Required);
    rc.credit.bytes = CAP_BYTES;
    rc.credit.requests = CAP_REQS;
    rc.credit.consumers = CAP_CONS;
    let Some(r) = engine(test, rc) else {
        return;
    };
    say!("RAN {test} on {}", r.device());
    let rm = r.alloc_memory(2 * TASKS * LEN).unwrap();
    let senders: Vec<Engine> = (0..2)
        .map(|_| Engine::new(config(CreditPolicy::Required)).unwrap())
        .collect();
    let mems: Vec<Arc<MemoryRegion>> = senders
        .iter()
        .map(|s| s.alloc_memory(TASKS * LEN).unwrap())
        .collect();
    let segs: Vec<SegmentId> = senders
        .iter()
        .map(|s| s.open_segment(r.listen_addr()).unwrap())
        .collect();
    for (s, &seg) in senders.iter().zip(&segs) {
        assert_eq!(s.segment_credit(seg), Some(Negotiated::Active(1)));
    }
    let rsegs = accepted(&r, 2);
    let stop = Arc::new(AtomicBool::new(false));
    std::thread::scope(|sc| {
        // The slow consumer: one slot per peer every 3 ms.
        let consumer = sc.spawn(|| {
            let mut n = 0u64;
            while !stop.load(Ordering::Acquire) {
                for &seg in &rsegs {
                    if r.consume(seg, 1).is_ok() {
                        n += 1;
                    }
                }
                std::thread::sleep(Duration::from_millis(3));
            }
            n
        });
        // The sampler: invariants throughout. (Two engines' stats are not
        // one atomic snapshot: a false alarm would need a release by one
        // sender, its usage report, the receiver's regrant and the other
        // sender's apply — three control-thread hops — between two reads.)
        let sampler = sc.spawn(|| {
            let mut samples = 0u64;
            let mut peak = [0u64; 4];
            while !stop.load(Ordering::Acquire) {
                let rs = r.credit_stats().unwrap();
                check_receiver(&rs, "receiver");
                // What the senders may still send + what is in flight,
                // summed over senders, never exceeds the capacity.
                let mut sum = [0u64; 4];
                for s in &senders {
                    let ss = s.credit_stats().unwrap();
                    for p in &ss.peers {
                        for k in [BYTES, REQS] {
                            sum[k] +=
                                p.sender.available[k] + p.sender.consumed[k] - p.sender.released[k];
                        }
                        // Consumer slots: held unused + written and not
                        // yet consumed at the receiver, bounded below.
                        sum[CONS] += p.sender.available[CONS];
                    }
                }
                let unconsumed: u64 = rs.peers.iter().map(|p| p.receiver_consumable).sum();
                sum[CONS] += unconsumed;
                for k in [BYTES, REQS, CONS] {
                    assert!(
                        sum[k] <= rs.capacity[k],
                        "resource {k}: senders hold {} > capacity {}",
                        sum[k],
                        rs.capacity[k]
                    );
                    peak[k] = peak[k].max(sum[k]);
                }
                samples += 1;
                std::thread::sleep(Duration::from_millis(1));
            }
            (samples, peak)
        });
        let writers: Vec<_> = senders
            .iter()
            .zip(&mems)
            .zip(&segs)
            .enumerate()
            .map(|(i, ((s, m), &seg))| {
                let rm = &rm;
                sc.spawn(move || {
                    let mut ts = Vec::new();
                    for t in 0..TASKS {
                        let data = pattern((i * TASKS + t) as u64 + 11, LEN);
                        m.write_at(t * LEN, &data).unwrap();
                        let remote = rm.addr() + ((i * TASKS + t) * LEN) as u64;
                        ts.push(write(m, t * LEN, seg, remote, LEN));
                    }
                    let b = s.allocate_batch(TASKS).unwrap();
                    s.submit(b, &ts).unwrap();
                    let st = wait_batch(s, b);
                    assert!(st.iter().all(|&x| x == TaskState::Completed), "{st:?}");
                    let stalled = (0..TASKS)
                        .filter_map(|t| s.task_backpressure(b, t).unwrap())
                        .collect::<Vec<_>>();
                    for bp in &stalled {
                        assert_eq!(bp.source, PressureSource::ReceiverCredit);
                        assert_eq!(bp.peer, seg.0);
                    }
                    s.free_batch(b).unwrap();
                    stalled.len()
                })
            })
            .collect();
        let stalled: usize = writers.into_iter().map(|w| w.join().unwrap()).sum();
        // Drain the consumer side, then stop the helpers.
        wait_for("every consumer slot returned", || {
            r.credit_stats()
                .unwrap()
                .peers
                .iter()
                .all(|p| p.receiver_consumable == 0)
                && r.credit_stats().unwrap().consumed_slots >= (2 * TASKS) as u64
        });
        stop.store(true, Ordering::Release);
        let consumed = consumer.join().unwrap();
        let (samples, peak) = sampler.join().unwrap();
        say!(
            "{test}: {samples} samples, peak held bytes {} / reqs {} / consumer {}, {stalled} tasks credit-stalled, {consumed} slots consumed",
            peak[BYTES],
            peak[REQS],
            peak[CONS]
        );
        assert!(samples > 10);
        assert_eq!(consumed, (2 * TASKS) as u64, "one consumer slot per slice");
        assert!(stalled > 0, "the small capacity must have stalled someone");
    });
    // No corruption.
    for i in 0..2 {
        for t in 0..TASKS {
            let mut got = vec![0u8; LEN];
            rm.read_at((i * TASKS + t) * LEN, &mut got).unwrap();
            assert!(
                got == pattern((i * TASKS + t) as u64 + 11, LEN),
                "sender {i} task {t}: bytes differ"
            );
        }
    }
    for s in &senders {
        assert!(s.credit_stats().unwrap().sender.updates_applied > 0);
        assert_idle(s, "sender", WAIT);
        check_sender_end(s, "sender");
    }
    check_receiver(&r.credit_stats().unwrap(), "receiver at end");
    assert_idle(&r, "receiver", WAIT);
}

/// The consumer-slot window held at zero stops WRITEs (typed backpressure
/// on the task, READs unaffected); `consume` reopens it through the
/// control channel, which never needs data credit.
#[test]
fn credit_zero_window_is_reopened_by_the_control_path() {
    let test = "credit_zero_window_is_reopened_by_the_control_path";
    let mut rc = config(CreditPolicy::Required);
    rc.credit.consumers = 4;
    let Some(r) = engine(test, rc) else {
        return;
    };
    say!("RAN {test} on {}", r.device());
    let s = Engine::new(config(CreditPolicy::Required)).unwrap();
    let rm = r.alloc_memory(1 << 20).unwrap();
    let sm = s.alloc_memory(1 << 20).unwrap();
    let seg = s.open_segment(r.listen_addr()).unwrap();
    let rseg = accepted(&r, 1)[0];
    sm.write_at(0, &pattern(5, 8 * 4096)).unwrap();
    let ts: Vec<Transfer> = (0..8)
        .map(|i| write(&sm, i * 4096, seg, rm.addr() + (i * 4096) as u64, 4096))
        .collect();
    let b = s.allocate_batch(8).unwrap();
    s.submit(b, &ts).unwrap();
    let done = |s: &Engine| {
        s.batch_status(b)
            .unwrap()
            .iter()
            .filter(|t| t.state == TaskState::Completed)
            .count()
    };
    wait_for("four writes", || done(&s) == 4);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(done(&s), 4, "the window is at zero: nothing more may go");
    let stalled: Vec<_> = (0..8)
        .filter_map(|t| s.task_backpressure(b, t).unwrap())
        .collect();
    assert!(!stalled.is_empty());
    assert!(stalled
        .iter()
        .all(|bp| bp.exhausted.contains(Resource::ConsumerSlots)
            && bp.source == PressureSource::ReceiverCredit
            && bp.retry_after_us > 0));
    // A READ is never gated by the remote ledger.
    let rb = s.allocate_batch(1).unwrap();
    s.submit(
        rb,
        &[Transfer {
            op: Op::Read,
            local: sm.addr() + (512 << 10),
            len: 4096,
            segment: seg,
            remote_offset: rm.addr(),
        }],
    )
    .unwrap();
    assert_eq!(wait_batch(&s, rb), vec![TaskState::Completed]);
    s.free_batch(rb).unwrap();
    // Over-consuming is refused and changes nothing.
    wait_for("usage reported", || {
        r.credit_stats().unwrap().peers[0].receiver_consumable == 4
    });
    assert!(matches!(
        r.consume(rseg, 5),
        Err(EngineError::CreditConsume { .. })
    ));
    let st = s.credit_stats().unwrap();
    assert_eq!(st.peers[0].sender.available[CONS], 0);
    assert!(st.peers[0].stalls > 0);
    // The control path reopens the window.
    r.consume(rseg, 4).unwrap();
    wait_for("all eight writes", || done(&s) == 8);
    wait_for("the rest reported", || {
        r.credit_stats().unwrap().peers[0].receiver_consumable == 4
    });
    r.consume(rseg, 4).unwrap();
    let mut got = vec![0u8; 8 * 4096];
    rm.read_at(0, &mut got).unwrap();
    assert!(got == pattern(5, 8 * 4096));
    s.free_batch(b).unwrap();
    assert_idle(&s, "sender", WAIT);
    check_sender_end(&s, "sender");
    check_receiver(&r.credit_stats().unwrap(), "receiver");
    assert_idle(&r, "receiver", WAIT);
}

/// A receiver restart: new session; the sender's old grants are fenced
/// (an epoch reset, counted), never reused, and the sender recovers after
/// re-negotiating.
#[test]
fn credit_receiver_restart_fences_old_credit() {
    let test = "credit_receiver_restart_fences_old_credit";
    let mut rc = config(CreditPolicy::Required);
    rc.credit.consumers = 64;
    let Some(r) = engine(test, rc.clone()) else {
        return;
    };
    say!("RAN {test} on {}", r.device());
    let addr = r.listen_addr();
    let s = Engine::new(config(CreditPolicy::Required)).unwrap();
    let sm = s.alloc_memory(1 << 20).unwrap();
    let rm = r.alloc_memory(1 << 20).unwrap();
    let seg = s.open_segment(addr).unwrap();
    let go = |remote: u64, seed: u64| {
        sm.write_at(0, &pattern(seed, 100_000)).unwrap();
        let b = s.allocate_batch(1).unwrap();
        s.submit(b, &[write(&sm, 0, seg, remote, 100_000)]).unwrap();
        let st = wait_batch(&s, b);
        s.free_batch(b).unwrap();
        st[0]
    };
    assert_eq!(go(rm.addr(), 1), TaskState::Completed);
    let old = s.credit_stats().unwrap();
    let old_session = r.credit_stats().unwrap().session;
    assert_eq!(old.sender.epoch_resets, 0);
    let old_granted = old.peers[0].sender.granted;
    drop(rm);
    drop(r);
    // The control channel is lost: the link goes Stale.
    wait_for("the sender to see the loss", || {
        let st = s.credit_stats().unwrap();
        st.channels_lost >= 1 && st.peers[0].phase != LinkPhase::Active
    });
    let mut rc2 = rc;
    rc2.listen = addr;
    let r2 = Engine::new(rc2).unwrap();
    let rm2 = r2.alloc_memory(1 << 20).unwrap();
    // Re-negotiate (an automatic reconnect may have raced us to it).
    let t0 = Instant::now();
    while let Err(e) = s.reconnect_segment(seg) {
        assert!(t0.elapsed() < WAIT, "reconnect: {e}");
        std::thread::sleep(Duration::from_millis(50));
    }
    wait_for("the new session's first grant", || {
        s.credit_stats().unwrap().peers[0].phase == LinkPhase::Active
    });
    let new = s.credit_stats().unwrap();
    let new_session = r2.credit_stats().unwrap().session;
    assert!(new_session > old_session, "a restart orders after");
    assert!(new.sender.epoch_resets >= 1, "old credit fenced: {new:?}");
    // Everything granted now is the new receiver's: no old credit reused.
    let g = new.peers[0].sender.granted;
    assert!(
        g[BYTES] <= r2.config().credit.bytes && g[CONS] <= 64,
        "{g:?} vs {old_granted:?}"
    );
    assert_eq!(
        s.segment_regions(seg).unwrap(),
        vec![rm2.descriptor()],
        "fresh descriptors"
    );
    assert_eq!(go(rm2.addr(), 2), TaskState::Completed);
    let mut got = vec![0u8; 100_000];
    rm2.read_at(0, &mut got).unwrap();
    assert!(got == pattern(2, 100_000));
    assert_idle(&s, "sender", WAIT);
    check_sender_end(&s, "sender");
    assert_idle(&r2, "new receiver", WAIT);
}

/// Duplicated, reordered and delayed updates never mint credit nor break
/// the invariant; a silenced receiver makes the link Stale after the TTL
/// (new WRITEs wait) and recovers when updates flow again.
#[test]
fn credit_control_faults_fail_safe() {
    let test = "credit_control_faults_fail_safe";
    let mut rc = config(CreditPolicy::Required);
    rc.credit.bytes = 128 << 10;
    rc.credit.requests = 4;
    rc.credit.consumers = 2047;
    rc.credit.ttl = Duration::from_millis(300);
    let Some(r) = engine(test, rc) else {
        return;
    };
    say!("RAN {test} on {}", r.device());
    let s = Engine::new(config(CreditPolicy::Required)).unwrap();
    let rm = r.alloc_memory(4 << 20).unwrap();
    let sm = s.alloc_memory(4 << 20).unwrap();
    let seg = s.open_segment(r.listen_addr()).unwrap();
    let rseg = accepted(&r, 1)[0];
    r.set_credit_faults(CreditFaults {
        duplicate: true,
        reorder: true,
        delay: Duration::from_millis(15),
        silence: false,
    });
    let data = pattern(9, 2 << 20);
    sm.write_at(0, &data).unwrap();
    let ts: Vec<Transfer> = (0..8)
        .map(|i| {
            let off = i * (256 << 10);
            write(&sm, off, seg, rm.addr() + off as u64, 256 << 10)
        })
        .collect();
    let b = s.allocate_batch(8).unwrap();
    s.submit(b, &ts).unwrap();
    let stop = AtomicBool::new(false);
    std::thread::scope(|sc| {
        sc.spawn(|| {
            while !stop.load(Ordering::Acquire) {
                let can = r.credit_stats().unwrap().peers[0].receiver_consumable;
                if can > 0 {
                    let _ = r.consume(rseg, can);
                }
                let ss = s.credit_stats().unwrap();
                let p = &ss.peers[0];
                let held =
                    p.sender.available[BYTES] + p.sender.consumed[BYTES] - p.sender.released[BYTES];
                assert!(held <= 128 << 10, "held {held}");
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        assert!(wait_batch(&s, b).iter().all(|&x| x == TaskState::Completed));
        stop.store(true, Ordering::Release);
    });
    s.free_batch(b).unwrap();
    let mut got = vec![0u8; data.len()];
    rm.read_at(0, &mut got).unwrap();
    assert!(got == data);
    let st = s.credit_stats().unwrap();
    assert!(st.sender.duplicate_updates > 0, "duplicates seen: {st:?}");
    assert_eq!(st.sender.violations, 0);
    // Silence: the link goes Stale after the TTL and WRITEs wait.
    r.set_credit_faults(CreditFaults {
        silence: true,
        ..CreditFaults::default()
    });
    wait_for("Stale", || {
        s.credit_stats().unwrap().peers[0].phase == LinkPhase::Stale
    });
    let b2 = s.allocate_batch(1).unwrap();
    s.submit(b2, &[write(&sm, 0, seg, rm.addr(), 4096)])
        .unwrap();
    std::thread::sleep(Duration::from_millis(150));
    assert!(
        !s.task_status(b2, 0).unwrap().state.is_terminal(),
        "a Stale link admits no new WRITE"
    );
    assert_eq!(s.task_status(b2, 0).unwrap().transferred_bytes, 0);
    // Updates flow again: fresh, and the WRITE goes.
    r.set_credit_faults(CreditFaults::default());
    assert_eq!(wait_batch(&s, b2), vec![TaskState::Completed]);
    s.free_batch(b2).unwrap();
    wait_for("usage reported", || {
        r.credit_stats().unwrap().peers[0].receiver_consumable > 0
    });
    let can = r.credit_stats().unwrap().peers[0].receiver_consumable;
    r.consume(rseg, can).unwrap();
    assert_idle(&s, "sender", WAIT);
    check_sender_end(&s, "sender");
    check_receiver(&r.credit_stats().unwrap(), "receiver");
    assert_idle(&r, "receiver", WAIT);
}
