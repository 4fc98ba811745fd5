//! Arbitrary sequences of claim / complete / retry / retire / reclaim through
//! the real ownership protocol, checked after every step against a shadow
//! model: every live wr_id completes exactly once with its own record, any
//! other wr_id is refused without effect, counters match the shadow and
//! never go negative, and no slice reaches two terminal states.
#![no_main]

use std::collections::HashMap;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use railyard_core::classify::wc;
use railyard_core::completion::{HotPath, PostRequest, SliceEffect};
use railyard_core::endpoint::{
    EndpointConfig, EndpointHandle, EndpointTable, ReclaimEvent, RetireReason,
};
use railyard_core::slice::{Outcome, SliceState, SliceTable};
use railyard_core::token::{TokenPool, TokenRecord, WrId};

const SLICES: u32 = 8;
const TIMEOUT: u64 = 100;

#[derive(Arbitrary, Debug)]
enum Op {
    OpenEndpoint,
    OpenSlice(u8),
    Post { slice: u8, ep: u8, qp: u8 },
    Complete { pick: u8, outcome: u8 },
    CompleteRaw(u64),
    Unposted(u8),
    Retry(u8),
    Handoff(u8),
    Settle { slice: u8, outcome: u8 },
    Retire { ep: u8, reason: u8 },
    Reclaim { advance: u8 },
}

fn outcome(b: u8) -> u32 {
    match b % 3 {
        0 => wc::SUCCESS,
        1 => wc::WR_FLUSH_ERR,
        _ => wc::LOC_LEN_ERR,
    }
}

fn reason(b: u8) -> RetireReason {
    RetireReason::ALL[b as usize % RetireReason::ALL.len()]
}

fuzz_target!(|ops: Vec<Op>| {
    let tokens: TokenPool = TokenPool::new(16).unwrap();
    let slices = SliceTable::new(SLICES as usize).unwrap();
    let eps = EndpointTable::<()>::new(EndpointConfig {
        capacity: 3,
        qps_per_endpoint: 2,
        max_wr_per_qp: 4,
        drain_timeout_ns: TIMEOUT,
    })
    .unwrap();
    let local = eps.register();
    let owner = HotPath::new(&tokens, &slices, &eps).with_max_retries(2);

    // Shadow model.
    let mut live: Vec<(WrId, TokenRecord)> = Vec::new();
    let mut dead: Vec<WrId> = Vec::new();
    let mut handles: Vec<EndpointHandle> = Vec::new();
    let mut abandoned: Vec<EndpointHandle> = Vec::new();
    let mut terminal: HashMap<(u32, u32), SliceState> = HashMap::new();
    let mut now = 0u64;

    for op in ops.into_iter().take(256) {
        match op {
            Op::OpenEndpoint => {
                if let Ok(h) = eps.open(()) {
                    handles.push(h);
                }
            }
            Op::OpenSlice(i) => {
                let _ = slices.open(u32::from(i) % SLICES);
            }
            Op::Post { slice, ep, qp } => {
                let idx = u32::from(slice) % SLICES;
                let Ok(st) = slices.status(idx) else { continue };
                let Some(&h) = handles.get(ep as usize % handles.len().max(1)) else {
                    continue;
                };
                let r = railyard_core::slice::SliceRef {
                    index: idx,
                    attempt: st.attempt,
                };
                let before = tokens.in_use();
                match owner.post(PostRequest::new(r, h, u16::from(qp % 3), 64, now)) {
                    Ok(p) => {
                        // What the token must hand back: the request's path
                        // and the outstanding post, no policy holds.
                        let rec = TokenRecord {
                            slice: r,
                            endpoint: h,
                            post_ns: now,
                            bytes: 64,
                            qp: u16::from(qp % 3),
                            holds: TokenRecord::HOLDS_OUTSTANDING,
                            ..TokenRecord::default()
                        };
                        assert_eq!(p.holds, rec.holds, "post reported other holds");
                        live.push((p.wr_id, rec));
                    }
                    Err(_) => assert_eq!(tokens.in_use(), before, "refused post held a token"),
                }
            }
            Op::Complete { pick, outcome: o } => {
                if live.is_empty() {
                    continue;
                }
                let (wr, rec) = live.swap_remove(pick as usize % live.len());
                let before = slices.status(rec.slice.index).unwrap();
                let d = owner
                    .complete(wr, outcome(o), 0, 0)
                    .expect("live wr completes");
                assert_eq!(
                    d.record, rec,
                    "completion returned another attempt's record"
                );
                dead.push(wr);
                match d.slice {
                    SliceEffect::Settled(s) => {
                        assert!(s.is_terminal());
                        let key = (rec.slice.index, rec.slice.attempt);
                        assert!(terminal.insert(key, s).is_none(), "two terminal states");
                        assert_eq!(before.attempt, rec.slice.attempt);
                    }
                    SliceEffect::Retry(n) => {
                        assert_eq!(before.attempt, rec.slice.attempt, "stale attempt retried");
                        assert_ne!(n.attempt, rec.slice.attempt);
                    }
                    SliceEffect::StaleReleaseOnly => {
                        assert_eq!(
                            slices.status(rec.slice.index).unwrap(),
                            before,
                            "stale completion mutated the slice"
                        );
                    }
                }
            }
            Op::CompleteRaw(wr) => {
                if live.iter().any(|(w, _)| *w == wr) {
                    continue;
                }
                let before = (tokens.in_use(), eps.outstanding_total());
                assert!(owner.complete(wr, wc::SUCCESS, 0, 0).is_err());
                assert_eq!((tokens.in_use(), eps.outstanding_total()), before);
            }
            Op::Unposted(pick) => {
                if live.is_empty() {
                    continue;
                }
                let (wr, rec) = live.swap_remove(pick as usize % live.len());
                assert_eq!(owner.unposted(wr, 0).map(|(r, _)| r), Ok(rec));
                dead.push(wr);
            }
            Op::Retry(i) | Op::Handoff(i) => {
                let idx = u32::from(i) % SLICES;
                let st = slices.status(idx).unwrap();
                let r = railyard_core::slice::SliceRef {
                    index: idx,
                    attempt: st.attempt,
                };
                let res = if matches!(op, Op::Retry(_)) {
                    slices.retry(r, 2).map(|_| ())
                } else {
                    slices.handoff(r).map(|_| ())
                };
                if res.is_ok() {
                    let now_st = slices.status(idx).unwrap();
                    if now_st.state == SliceState::Failed {
                        assert!(terminal
                            .insert((idx, st.attempt), SliceState::Failed)
                            .is_none());
                    }
                }
            }
            Op::Settle { slice, outcome: o } => {
                let idx = u32::from(slice) % SLICES;
                let st = slices.status(idx).unwrap();
                let r = railyard_core::slice::SliceRef {
                    index: idx,
                    attempt: st.attempt,
                };
                let out = [
                    Outcome::Success,
                    Outcome::Failure,
                    Outcome::Canceled,
                    Outcome::TimedOut,
                ][o as usize % 4];
                if let Ok(s) = slices.settle(r, out) {
                    assert!(
                        terminal.insert((idx, st.attempt), s).is_none(),
                        "two terminal states"
                    );
                }
            }
            Op::Retire { ep, reason: r } => {
                if let Some(&h) = handles.get(ep as usize % handles.len().max(1)) {
                    let _ = eps.retire(h, reason(r), now);
                    assert!(owner
                        .post(PostRequest::new(Default::default(), h, 0, 1, now))
                        .is_err());
                }
            }
            Op::Reclaim { advance } => {
                now += u64::from(advance);
                let g = local.pin();
                eps.poll_reclaim(now, &g, |e| match e {
                    ReclaimEvent::Reclaimed { handle, .. } => {
                        assert!(
                            !live.iter().any(|(_, r)| r.endpoint == handle),
                            "reclaimed with work posted"
                        );
                        handles.retain(|h| *h != handle);
                    }
                    ReclaimEvent::Abandoned {
                        handle,
                        outstanding,
                    } => {
                        let n = live.iter().filter(|(_, r)| r.endpoint == handle).count();
                        assert_eq!(n as u32, outstanding);
                        handles.retain(|h| *h != handle);
                        abandoned.push(handle);
                    }
                    ReclaimEvent::ForceFlush { .. } => {}
                })
                .unwrap();
            }
        }
        // Invariants after every step.
        assert_eq!(tokens.in_use(), live.len(), "token count diverged");
        let counted = live
            .iter()
            .filter(|(_, r)| !abandoned.contains(&r.endpoint))
            .count() as u64;
        assert_eq!(
            eps.outstanding_total(),
            counted,
            "endpoint outstanding diverged"
        );
        assert_eq!(eps.qp_depth_total(), counted, "QP depth diverged");
        for &wr in dead.iter().rev().take(4) {
            assert!(!tokens.is_live(wr) || live.iter().any(|(w, _)| *w == wr));
        }
    }
    // Drain: everything completes, nothing leaks.
    for (wr, rec) in live.drain(..) {
        assert_eq!(
            owner.complete(wr, wc::LOC_LEN_ERR, 0, 0).map(|d| d.record),
            Ok(rec)
        );
    }
    assert_eq!(tokens.in_use(), 0);
    assert_eq!(eps.outstanding_total(), 0);
    assert_eq!(eps.qp_depth_total(), 0);
});
