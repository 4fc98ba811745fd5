//! Property: across arbitrary pick / plan / complete / fail / reclaim
//! sequences, every charge is released exactly once, total charged bytes
//! equal total released bytes, and the NIC and peer in-flight counters
//! always equal the bytes of the charges still outstanding.
#![cfg(feature = "alloc")]

use std::collections::HashMap;

use proptest::prelude::*;
use railyard_core::rail::{
    sample_state, DeviceSpec, Outcome, RailCharge, RailConfig, SampleState, Selector, Variant,
};
use railyard_core::token::TokenRecord;

#[derive(Clone, Debug)]
enum Op {
    Pick {
        peer: Option<u8>,
        bytes: u32,
    },
    Plan {
        peer: Option<u8>,
        slices: u8,
        bytes: u32,
    },
    Complete {
        idx: usize,
        latency: u32,
    },
    Fail {
        idx: usize,
    },
    /// Round-trip through a TokenRecord, then release from the record.
    ViaRecord {
        idx: usize,
        success: bool,
    },
    Reclaim,
    Advance {
        dt: u32,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let peer = proptest::option::weighted(0.8, 0u8..6);
    prop_oneof![
        3 => (peer.clone(), 1u32..200_000).prop_map(|(peer, bytes)| Op::Pick { peer, bytes }),
        1 => (peer, 1u8..12, 1u32..100_000).prop_map(|(peer, slices, bytes)| Op::Plan { peer, slices, bytes }),
        2 => (any::<usize>(), 1u32..1_000_000).prop_map(|(idx, latency)| Op::Complete { idx, latency }),
        1 => any::<usize>().prop_map(|idx| Op::Fail { idx }),
        1 => (any::<usize>(), any::<bool>()).prop_map(|(idx, success)| Op::ViaRecord { idx, success }),
        1 => Just(Op::Reclaim),
        1 => (0u32..3_000).prop_map(|dt| Op::Advance { dt }),
    ]
}

fn config() -> impl Strategy<Value = (Vec<DeviceSpec>, RailConfig)> {
    let devices = proptest::collection::vec((1u64..4, 1u16..768), 1..5).prop_map(|v| {
        v.into_iter()
            .map(|(g, t)| DeviceSpec::new(g * 1_000_000_000).with_tier_q8(t))
            .collect()
    });
    let on = if cfg!(feature = "peer-feedback") {
        any::<bool>().boxed()
    } else {
        Just(false).boxed()
    };
    (
        devices,
        on,
        0usize..4,
        0u32..=4,
        0u64..2_000,
        prop_oneof![Just(0u32), Just(2), Just(4)],
    )
        .prop_map(|(devs, on, v, target, idle, probe)| {
            let cfg = RailConfig {
                peer_accounting: on,
                variant: [Variant::V0, Variant::V1, Variant::V2, Variant::V3][v],
                peer_slots: 4,
                history_target: target,
                idle_reclaim_ns: idle,
                probe_interval: probe,
                peer_ttl_ns: 1_000,
                ..RailConfig::default()
            };
            (devs, cfg)
        })
}

struct Model {
    sel: Selector,
    out: Vec<(RailCharge, u64)>,
    nic: Vec<u64>,
    peer: HashMap<(u16, u32), u64>,
    charged: u64,
    released: u64,
}

impl Model {
    fn take(&mut self, c: RailCharge, now: u64) {
        self.nic[usize::from(c.device())] += u64::from(c.bytes());
        if let Some(p) = c.peer() {
            *self.peer.entry((c.device(), p)).or_default() += u64::from(c.bytes());
        }
        self.charged += u64::from(c.bytes());
        self.out.push((c, now));
    }

    fn forget(&mut self, device: u16, peer: Option<u32>, bytes: u32) {
        self.nic[usize::from(device)] -= u64::from(bytes);
        if let Some(p) = peer {
            *self.peer.get_mut(&(device, p)).unwrap() -= u64::from(bytes);
        }
        self.released += u64::from(bytes);
    }

    fn check(&self) -> Result<(), TestCaseError> {
        for (d, &b) in self.nic.iter().enumerate() {
            prop_assert_eq!(self.sel.nic_inflight(d).unwrap(), b, "NIC {}", d);
        }
        for (&(d, p), &b) in &self.peer {
            let live = self.sel.peer_view(usize::from(d), p).map(|v| v.inflight);
            if b > 0 {
                prop_assert_eq!(live, Some(b), "peer {} on {}", p, d);
            } else {
                prop_assert!(live.unwrap_or(0) == 0);
            }
        }
        let c = self.sel.counters();
        prop_assert_eq!((c.nic_accounting_errors, c.peer_accounting_errors), (0, 0));
        prop_assert_eq!(self.charged - self.released, self.nic.iter().sum::<u64>());
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn charges_equal_releases((devs, cfg) in config(), ops in proptest::collection::vec(op(), 1..120)) {
        let sel = Selector::new(&devs, cfg).unwrap();
        let mut m = Model { nic: vec![0; devs.len()], sel, out: Vec::new(), peer: HashMap::new(), charged: 0, released: 0 };
        let mut now: u64 = 1_000_000;
        for op in ops {
            match op {
                Op::Pick { peer, bytes } => {
                    let peer32 = peer.map(u32::from);
                    let argmin = |fb: bool| {
                        let scores: Vec<_> = (0..devs.len()).map(|d| m.sel.score_of(d, peer32, bytes, fb).unwrap()).collect();
                        (0..devs.len()).fold(0, |b, d| if scores[d].better_than(scores[b]) { d } else { b })
                    };
                    let expect = [argmin(false), argmin(true)];
                    let stale = peer32.is_some_and(|p| {
                        (0..devs.len()).any(|d| {
                            sample_state(m.sel.peer_view(d, p).as_ref(), now, cfg.peer_ttl_ns) != SampleState::Fresh
                        })
                    });
                    let expect_fb = m.sel.peer_accounting() && cfg.variant.uses_peer_feedback() && stale;
                    let p = m.sel.pick(peer32, bytes, now);
                    prop_assert_eq!(p.fallback, expect_fb, "whole-set fallback rule");
                    if !p.probe {
                        // The decision is the lowest score under its own
                        // (whole-set) feedback choice.
                        prop_assert_eq!(usize::from(p.charge.device()), expect[usize::from(p.fallback)]);
                    }
                    prop_assert_eq!(p.charge.bytes(), bytes);
                    prop_assert!(p.charge.peer().is_none() || p.charge.peer() == peer.map(u32::from));
                    m.take(p.charge, now);
                }
                Op::Plan { peer, slices, bytes } => {
                    let mut counts = [0u32; 8];
                    m.sel.plan(peer.map(u32::from), u32::from(slices), bytes, now, &mut counts).unwrap();
                    prop_assert_eq!(counts.iter().sum::<u32>(), u32::from(slices));
                    for (d, &n) in counts.iter().enumerate().take(devs.len()) {
                        for i in 0..n {
                            // Actual bytes: the last slice of each device is short.
                            let b = if i + 1 == n { bytes / 2 + 1 } else { bytes };
                            let c = m.sel.charge(d as u16, peer.map(u32::from), b, now).unwrap();
                            m.take(c, now);
                        }
                    }
                }
                Op::Complete { idx, latency } => {
                    if !m.out.is_empty() {
                        let (c, post) = m.out.swap_remove(idx % m.out.len());
                        let (d, p, b) = (c.device(), c.peer(), c.bytes());
                        let done = post + u64::from(latency);
                        now = now.max(done);
                        m.sel.release(c, Outcome::Completed { post_ns: post }, done).unwrap();
                        m.forget(d, p, b);
                    }
                }
                Op::Fail { idx } => {
                    if !m.out.is_empty() {
                        let (c, _) = m.out.swap_remove(idx % m.out.len());
                        let (d, p, b) = (c.device(), c.peer(), c.bytes());
                        m.sel.release(c, Outcome::Failed, now).unwrap();
                        m.forget(d, p, b);
                    }
                }
                Op::ViaRecord { idx, success } => {
                    if !m.out.is_empty() {
                        let (c, post) = m.out.swap_remove(idx % m.out.len());
                        let (d, p, b) = (c.device(), c.peer(), c.bytes());
                        let mut rec = TokenRecord { post_ns: post, ..TokenRecord::default() };
                        c.record_into(&mut rec);
                        m.sel.release_record(&mut rec, success, now).unwrap();
                        // Exactly once: the record no longer holds it.
                        prop_assert!(m.sel.release_record(&mut rec, success, now).is_err());
                        m.forget(d, p, b);
                    }
                }
                Op::Reclaim => {
                    m.sel.reclaim_idle(now);
                }
                Op::Advance { dt } => now += u64::from(dt),
            }
            m.check()?;
        }
        // Drain: everything outstanding is released once; all back to zero.
        while let Some((c, _)) = m.out.pop() {
            let (d, p, b) = (c.device(), c.peer(), c.bytes());
            m.sel.release(c, Outcome::Failed, now).unwrap();
            m.forget(d, p, b);
        }
        m.check()?;
        prop_assert_eq!(m.charged, m.released);
        prop_assert!(m.nic.iter().all(|&b| b == 0));
        prop_assert!(m.peer.values().all(|&b| b == 0));
    }
}
