//! The scoring policy: variants, score inputs and the fallback rule.
//!
//! Everything here is pure: plain numbers in, plain numbers out. The
//! [`Selector`](super::Selector) reads its atomics into [`NicView`] and
//! [`PeerView`] snapshots and asks this module what to score with.

use crate::time::{elapsed, Nanos};

/// Which in-flight and bandwidth feedback a peer-accounting selector scores
/// with (RFC 4534 table, row by row).
///
/// | Variant | in-flight used for scoring | bandwidth feedback |
/// |---|---|---|
/// | V0 | zero | nominal link rate |
/// | V1 | NIC total | NIC completion EWMA |
/// | V2 | NIC total | peer completion EWMA |
/// | V3 | peer total | peer completion EWMA |
///
/// All variants share one ledger and charge the same bytes; only the score
/// inputs differ. V2 and V3 fall back to NIC feedback for the whole
/// candidate set when any candidate's peer sample is missing or expired;
/// V3 keeps peer in-flight during that fallback.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Variant {
    /// Zero in-flight, nominal link rate.
    V0,
    /// NIC in-flight, NIC completion EWMA (the default).
    #[default]
    V1,
    /// NIC in-flight, peer completion EWMA.
    V2,
    /// Peer in-flight, peer completion EWMA.
    V3,
}

impl Variant {
    /// Whether this variant scores with peer bandwidth feedback (and so
    /// has a freshness check and a whole-set fallback).
    ///
    /// ```
    /// use railyard_core::rail::Variant;
    /// assert!(Variant::V2.uses_peer_feedback() && !Variant::V1.uses_peer_feedback());
    /// ```
    #[inline]
    pub const fn uses_peer_feedback(self) -> bool {
        matches!(self, Variant::V2 | Variant::V3)
    }

    /// Whether this variant scores with peer in-flight bytes.
    ///
    /// ```
    /// use railyard_core::rail::Variant;
    /// assert!(Variant::V3.uses_peer_inflight() && !Variant::V2.uses_peer_inflight());
    /// ```
    #[inline]
    pub const fn uses_peer_inflight(self) -> bool {
        matches!(self, Variant::V3)
    }
}

/// A snapshot of one device's NIC-scope state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NicView {
    /// Bytes charged to the NIC and not yet released (all peers).
    pub inflight: u64,
    /// NIC completion EWMA, bytes per second (never zero: clamped).
    pub bw: u64,
    /// Nominal link rate, bytes per second.
    pub nominal: u64,
}

/// A snapshot of one (device, peer) ledger entry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PeerView {
    /// Bytes charged to this peer on this device and not yet released.
    pub inflight: u64,
    /// Peer completion EWMA, bytes per second; zero means no sample yet.
    pub bw: u64,
    /// When the last peer sample was taken (caller's clock).
    pub sample_ns: Nanos,
}

/// Freshness of one candidate's peer sample at decision time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SampleState {
    /// A sample no older than the TTL.
    Fresh,
    /// No sample (no entry, or an entry without a completion yet).
    Missing,
    /// A sample older than the TTL.
    Expired,
}

/// Classifies a candidate's peer sample: missing, expired (age > `ttl_ns`)
/// or fresh.
///
/// ```
/// use railyard_core::rail::{sample_state, PeerView, SampleState};
/// let p = PeerView { inflight: 0, bw: 1_000_000, sample_ns: 1_000 };
/// assert_eq!(sample_state(Some(&p), 5_000, 10_000), SampleState::Fresh);
/// assert_eq!(sample_state(Some(&p), 20_000, 10_000), SampleState::Expired);
/// assert_eq!(sample_state(None, 0, 10_000), SampleState::Missing);
/// ```
#[inline]
pub fn sample_state(peer: Option<&PeerView>, now_ns: Nanos, ttl_ns: Nanos) -> SampleState {
    match peer {
        Some(p) if p.bw != 0 => {
            if elapsed(now_ns, p.sample_ns) > ttl_ns {
                SampleState::Expired
            } else {
                SampleState::Fresh
            }
        }
        _ => SampleState::Missing,
    }
}

/// What one candidate is scored with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScoreInput {
    /// In-flight bytes counted ahead of this slice.
    pub inflight: u64,
    /// Bandwidth estimate, bytes per second.
    pub bw: u64,
}

/// The score inputs of `variant` for one candidate.
///
/// `peer` is the candidate's ledger entry for the request's peer (`None` if
/// there is none); `fallback` is the whole-set decision of
/// [`needs_fallback`]. A missing entry counts as zero peer in-flight.
///
/// ```
/// use railyard_core::rail::{score_input, NicView, PeerView, ScoreInput, Variant};
/// let nic = NicView { inflight: 100, bw: 2_000, nominal: 5_000 };
/// let peer = PeerView { inflight: 40, bw: 700, sample_ns: 0 };
/// assert_eq!(score_input(Variant::V0, &nic, Some(&peer), false), ScoreInput { inflight: 0, bw: 5_000 });
/// assert_eq!(score_input(Variant::V3, &nic, Some(&peer), false), ScoreInput { inflight: 40, bw: 700 });
/// // With the whole-set fallback V3 scores with the NIC's bandwidth.
/// assert_eq!(score_input(Variant::V3, &nic, Some(&peer), true).bw, 2_000);
/// ```
#[inline]
pub fn score_input(
    variant: Variant,
    nic: &NicView,
    peer: Option<&PeerView>,
    fallback: bool,
) -> ScoreInput {
    let peer_inflight = peer.map_or(0, |p| p.inflight);
    match variant {
        Variant::V0 => ScoreInput {
            inflight: 0,
            bw: nic.nominal,
        },
        Variant::V1 => ScoreInput {
            inflight: nic.inflight,
            bw: nic.bw,
        },
        Variant::V2 => ScoreInput {
            inflight: nic.inflight,
            bw: if fallback {
                nic.bw
            } else {
                peer.map_or(nic.bw, |p| p.bw)
            },
        },
        Variant::V3 => ScoreInput {
            inflight: peer_inflight,
            bw: if fallback {
                nic.bw
            } else {
                peer.map_or(nic.bw, |p| p.bw)
            },
        },
    }
}

/// The whole-set fallback rule: V2/V3 use NIC feedback for *every*
/// candidate if *any* candidate's peer sample is missing or expired.
///
/// ```
/// use railyard_core::rail::{needs_fallback, SampleState, Variant};
/// let states = [SampleState::Fresh, SampleState::Expired];
/// assert!(needs_fallback(Variant::V2, states)); // one stale candidate: the whole set falls back
/// assert!(!needs_fallback(Variant::V1, states)); // V1 never uses peer samples
/// ```
#[inline]
pub fn needs_fallback(variant: Variant, states: impl IntoIterator<Item = SampleState>) -> bool {
    variant.uses_peer_feedback() && states.into_iter().any(|s| s != SampleState::Fresh)
}

/// A score as an exact fraction `num / den`, compared without division.
///
/// `num = (in-flight + slice bytes) × tier weight (Q8)`, `den = bandwidth`:
/// the time to drain what is queued ahead plus this slice, weighted by
/// NUMA tier. Lower is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Score {
    /// Weighted bytes (saturating).
    pub num: u64,
    /// Bandwidth, bytes per second (at least 1).
    pub den: u64,
}

impl Score {
    /// `(inflight + bytes) / bw × tier_q8 / 256`, as a fraction.
    ///
    /// ```
    /// use railyard_core::rail::{Score, ScoreInput};
    /// let s = Score::new(ScoreInput { inflight: 1000, bw: 0 }, 24, 512);
    /// assert_eq!((s.num, s.den), (1024 * 512, 1)); // bandwidth at least 1
    /// ```
    #[inline]
    pub fn new(input: ScoreInput, bytes: u64, tier_q8: u16) -> Self {
        Score {
            num: input
                .inflight
                .saturating_add(bytes)
                .saturating_mul(u64::from(tier_q8)),
            den: input.bw.max(1),
        }
    }

    /// Strictly lower (better) than `other`; exact, via 128-bit products.
    ///
    /// ```
    /// use railyard_core::rail::{Score, ScoreInput};
    /// let fast = Score::new(ScoreInput { inflight: 0, bw: 2_000 }, 100, 256);
    /// let slow = Score::new(ScoreInput { inflight: 0, bw: 1_000 }, 100, 256);
    /// assert!(fast.better_than(slow) && !slow.better_than(fast) && !fast.better_than(fast));
    /// ```
    #[inline]
    pub fn better_than(self, other: Score) -> bool {
        u128::from(self.num) * u128::from(other.den) < u128::from(other.num) * u128::from(self.den)
    }

    /// Not worse than `other × ratio_q8 / 256` (used to bound probes).
    /// Exact for every input (no overflow).
    ///
    /// ```
    /// use railyard_core::rail::{Score, ScoreInput};
    /// let best = Score::new(ScoreInput { inflight: 0, bw: 1_000 }, 100, 256);
    /// let probe = Score::new(ScoreInput { inflight: 200, bw: 1_000 }, 100, 256); // 3× the best
    /// assert!(probe.within(best, 1024)); // within 4×
    /// assert!(!probe.within(best, 512)); // not within 2×
    /// ```
    #[inline]
    pub fn within(self, other: Score, ratio_q8: u32) -> bool {
        // self.num/self.den <= other.num/other.den * ratio/256, i.e.
        // a * 256 <= b * ratio with a, b < 2^128, i.e. a <= floor(b * ratio / 256),
        // with b = 256q + m: floor(b * ratio / 256) = q * ratio + floor(m * ratio / 256).
        let a = u128::from(self.num) * u128::from(other.den);
        let b = u128::from(other.num) * u128::from(self.den);
        let r = u128::from(ratio_q8);
        // An overflowing right-hand side exceeds every u128 `a`.
        match (b >> 8)
            .checked_mul(r)
            .and_then(|qr| qr.checked_add(((b & 0xff) * r) >> 8))
        {
            Some(rhs) => a <= rhs,
            None => true,
        }
    }

    /// The inverse score in Q32 fixed point, saturating; used to split a
    /// multi-slice request in proportion.
    ///
    /// ```
    /// use railyard_core::rail::{Score, ScoreInput};
    /// let a = Score::new(ScoreInput { inflight: 0, bw: 2_000 }, 100, 256);
    /// let b = Score::new(ScoreInput { inflight: 0, bw: 1_000 }, 100, 256);
    /// assert_eq!(a.inverse_q32(), 2 * b.inverse_q32()); // twice the share
    /// ```
    #[inline]
    pub fn inverse_q32(self) -> u64 {
        let inv = (u128::from(self.den) << 32) / u128::from(self.num.max(1));
        u64::try_from(inv).unwrap_or(u64::MAX)
    }
}

/// One completion's bandwidth sample, bytes per second (`bytes` over
/// `latency_ns`, with a zero latency read as 1 ns).
///
/// ```
/// use railyard_core::rail::bandwidth_sample;
/// assert_eq!(bandwidth_sample(1_000_000, 1_000_000), 1_000_000_000); // 1 MB in 1 ms: 1 GB/s
/// assert_eq!(bandwidth_sample(10, 0), 10_000_000_000); // zero latency read as 1 ns
/// ```
#[inline]
pub fn bandwidth_sample(bytes: u64, latency_ns: Nanos) -> u64 {
    let lat = latency_ns.max(1);
    match bytes.checked_mul(1_000_000_000) {
        // Any u32 slice size fits: stay in 64-bit division.
        Some(n) => n / lat,
        None => {
            u64::try_from(u128::from(bytes) * 1_000_000_000 / u128::from(lat)).unwrap_or(u64::MAX)
        }
    }
}

/// Clamps `bw` to `[nominal × floor_q8 / 256, nominal × ceil_q8 / 256]`,
/// and to at least 1 byte/s. A floor above the ceiling (a config that
/// [`RailConfig::validate`](super::RailConfig::validate) refuses) yields
/// the ceiling.
///
/// ```
/// use railyard_core::rail::clamp_bw;
/// let nominal = 25_600;
/// assert_eq!(clamp_bw(1, nominal, 4, 256), 400); // floor: nominal / 64
/// assert_eq!(clamp_bw(99_999, nominal, 4, 256), nominal); // never above the link rate
/// ```
#[inline]
pub fn clamp_bw(bw: u64, nominal: u64, floor_q8: u32, ceil_q8: u32) -> u64 {
    let scale =
        |q: u32| u64::try_from(u128::from(nominal) * u128::from(q) / 256).unwrap_or(u64::MAX);
    bw.max(scale(floor_q8).max(1)).min(scale(ceil_q8).max(1))
}

/// One EWMA step: `old + (sample − old) × alpha_q16 / 65536`, clamped by
/// [`clamp_bw`] (an `alpha_q16` above 65536 counts as 65536). An `old` of zero (no history) takes the sample directly.
///
/// ```
/// use railyard_core::rail::ewma_step;
/// let nominal = 1_000_000;
/// assert_eq!(ewma_step(0, 500_000, 8192, nominal, 4, 256), 500_000); // no history: the sample
/// let next = ewma_step(800_000, 400_000, 8192, nominal, 4, 256); // alpha 1/8
/// assert_eq!(next, 750_000);
/// ```
#[inline]
pub fn ewma_step(
    old: u64,
    sample: u64,
    alpha_q16: u32,
    nominal: u64,
    floor_q8: u32,
    ceil_q8: u32,
) -> u64 {
    let sample = clamp_bw(sample, nominal, floor_q8, ceil_q8);
    if old == 0 {
        return sample;
    }
    // At most 1.0: `old` moves towards the sample, never past it.
    let a = u128::from(alpha_q16.min(1 << 16));
    let next = if sample >= old {
        u128::from(old) + ((u128::from(sample - old) * a) >> 16)
    } else {
        u128::from(old) - ((u128::from(old - sample) * a) >> 16)
    };
    clamp_bw(
        u64::try_from(next).unwrap_or(u64::MAX),
        nominal,
        floor_q8,
        ceil_q8,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const NIC: NicView = NicView {
        inflight: 1000,
        bw: 50,
        nominal: 100,
    };
    const PEER: PeerView = PeerView {
        inflight: 300,
        bw: 20,
        sample_ns: 5,
    };

    #[test]
    fn each_variant_takes_its_row_of_the_table() {
        let p = Some(&PEER);
        assert_eq!(
            score_input(Variant::V0, &NIC, p, false),
            ScoreInput {
                inflight: 0,
                bw: 100
            }
        );
        assert_eq!(
            score_input(Variant::V1, &NIC, p, false),
            ScoreInput {
                inflight: 1000,
                bw: 50
            }
        );
        assert_eq!(
            score_input(Variant::V2, &NIC, p, false),
            ScoreInput {
                inflight: 1000,
                bw: 20
            }
        );
        assert_eq!(
            score_input(Variant::V3, &NIC, p, false),
            ScoreInput {
                inflight: 300,
                bw: 20
            }
        );
    }

    #[test]
    fn fallback_swaps_only_feedback_and_v3_keeps_peer_inflight() {
        let p = Some(&PEER);
        assert_eq!(
            score_input(Variant::V2, &NIC, p, true),
            ScoreInput {
                inflight: 1000,
                bw: 50
            }
        );
        assert_eq!(
            score_input(Variant::V3, &NIC, p, true),
            ScoreInput {
                inflight: 300,
                bw: 50
            }
        );
        // V0/V1 ignore the fallback flag.
        assert_eq!(
            score_input(Variant::V1, &NIC, p, true),
            ScoreInput {
                inflight: 1000,
                bw: 50
            }
        );
        assert_eq!(
            score_input(Variant::V0, &NIC, p, true),
            ScoreInput {
                inflight: 0,
                bw: 100
            }
        );
        // V3 without an entry: zero peer in-flight on that device.
        assert_eq!(
            score_input(Variant::V3, &NIC, None, true),
            ScoreInput {
                inflight: 0,
                bw: 50
            }
        );
    }

    #[test]
    fn sample_states_and_whole_set_rule() {
        assert_eq!(sample_state(None, 10, 100), SampleState::Missing);
        let no_sample = PeerView { bw: 0, ..PEER };
        assert_eq!(
            sample_state(Some(&no_sample), 10, 100),
            SampleState::Missing
        );
        assert_eq!(sample_state(Some(&PEER), 105, 100), SampleState::Fresh);
        assert_eq!(sample_state(Some(&PEER), 106, 100), SampleState::Expired);
        let fresh = [SampleState::Fresh; 3];
        let one_bad = [SampleState::Fresh, SampleState::Expired, SampleState::Fresh];
        assert!(!needs_fallback(Variant::V2, fresh));
        assert!(needs_fallback(Variant::V2, one_bad));
        assert!(needs_fallback(Variant::V3, [SampleState::Missing]));
        assert!(!needs_fallback(Variant::V1, one_bad));
        assert!(!needs_fallback(Variant::V0, one_bad));
    }

    #[test]
    fn score_compares_exactly_and_weights_tiers() {
        let a = Score::new(
            ScoreInput {
                inflight: 0,
                bw: 100,
            },
            100,
            256,
        ); // 1.0
        let b = Score::new(
            ScoreInput {
                inflight: 100,
                bw: 100,
            },
            100,
            256,
        ); // 2.0
        let c = Score::new(
            ScoreInput {
                inflight: 0,
                bw: 100,
            },
            100,
            512,
        ); // 2.0 via tier
        assert!(a.better_than(b));
        assert!(!b.better_than(c) && !c.better_than(b));
        assert!(b.within(a, 512) && !b.within(a, 511));
        assert_eq!(a.inverse_q32(), 1 << 24); // 1.0 with tier Q8 folded in
        assert_eq!(b.inverse_q32(), 1 << 23);
    }

    #[test]
    fn ewma_moves_by_alpha_and_is_clamped() {
        // alpha = 1/2; nominal 1000, floor 1/4, ceiling 2x.
        assert_eq!(ewma_step(1000, 0, 32768, 1000, 64, 512), 625); // sample clamps to 250
        assert_eq!(ewma_step(1000, 1_000_000, 32768, 1000, 64, 512), 1500);
        assert_eq!(ewma_step(0, 700, 32768, 1000, 64, 512), 700);
        assert_eq!(ewma_step(2000, 2000, 65536, 1000, 64, 256), 1000);
        assert_eq!(bandwidth_sample(1000, 1_000), 1_000_000_000);
        assert_eq!(bandwidth_sample(1, 0), 1_000_000_000);
        assert_eq!(bandwidth_sample(u64::MAX, 1_000_000_000), u64::MAX);
        assert_eq!(bandwidth_sample(1 << 62, 2_000_000_000), 1 << 61);
    }
}
