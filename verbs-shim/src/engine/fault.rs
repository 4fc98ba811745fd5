//! Fault-injection state (issue #7): what the hooks of `inject.rs` set and
//! the workers, the monitor and the controller read on their paths.
//! Compiled to nothing without the `fault-injection` feature: every check
//! below is then a constant. Not for production.

use super::cc_gate::CcGate;
use super::error::EngineError;
use crate::wire::SegmentDescriptor;
use crate::MemoryRegion;
use railyard_core::endpoint::EndpointHandle;
#[cfg(feature = "fault-injection")]
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// What the CC trace hook
/// ([`Engine::fault_trace_cc`](super::Engine::fault_trace_cc)) sees, right after
/// the controller processed it (fault-injection builds only; without the
/// feature the calls compile away).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceEvent {
    /// A completion with this WC status went through the composed hot path.
    Completion(u32),
    /// A control epoch ran with this poller status.
    Epoch(railyard_core::cc::PollerStatus),
    /// Async-event or timeout feedback: route (`None`: the device) and effect.
    Feedback(Option<u32>, railyard_core::classify::Effect),
    /// A reconnect moved this route to a new generation.
    NewGeneration(u32),
}

/// The trace hook's type.
#[cfg(feature = "fault-injection")]
pub(crate) type TraceHook = Box<dyn Fn(&CcGate, TraceEvent) + Send + Sync>;

/// Fault state shared with the workers (empty without the feature).
#[derive(Default)]
pub(crate) struct FaultState {
    /// The CC trace hook, if a test installed one.
    #[cfg(feature = "fault-injection")]
    pub(crate) trace: std::sync::OnceLock<TraceHook>,
    #[cfg(feature = "fault-injection")]
    pub(crate) polling_paused: AtomicBool,
    /// Endpoint (encoded + 1) whose posts carry a corrupted rkey; 0 = none.
    #[cfg(feature = "fault-injection")]
    pub(crate) bad_rkey_ep: AtomicU64,
    #[cfg(feature = "fault-injection")]
    pub(crate) bad_lkey: AtomicBool,
    /// The engine's regions registered again in another PD (wrong lkeys).
    #[cfg(feature = "fault-injection")]
    pub(crate) foreign: std::sync::OnceLock<(crate::ProtectionDomain, Vec<Option<MemoryRegion>>)>,
}

impl FaultState {
    /// Calls the CC trace hook, if one is installed (never without the
    /// feature: the call compiles away).
    #[inline(always)]
    pub(crate) fn trace(&self, _cc: &CcGate, _ev: TraceEvent) {
        #[cfg(feature = "fault-injection")]
        if let Some(f) = self.trace.get() {
            f(_cc, _ev);
        }
    }

    /// Whether CQ polling is paused.
    #[inline(always)]
    pub(crate) fn polling_paused(&self) -> bool {
        #[cfg(feature = "fault-injection")]
        return self.polling_paused.load(Ordering::Acquire);
        #[cfg(not(feature = "fault-injection"))]
        false
    }

    /// Whether a region may be deregistered: not once `fault_bad_lkey`
    /// registered every region in another PD too (always without the
    /// feature).
    #[inline(always)]
    pub(crate) fn deregistration(&self) -> Result<(), EngineError> {
        #[cfg(feature = "fault-injection")]
        if self.foreign.get().is_some() {
            return Err(EngineError::Unsupported(
                "deregistering memory after fault_bad_lkey (its foreign registrations cover every region)",
            ));
        }
        Ok(())
    }

    /// The remote descriptor a post on endpoint `h` uses.
    #[inline(always)]
    pub(crate) fn remote(&self, _h: EndpointHandle, d: SegmentDescriptor) -> SegmentDescriptor {
        #[cfg(feature = "fault-injection")]
        {
            let enc = super::types::ep_word(_h) + 1;
            if self.bad_rkey_ep.load(Ordering::Acquire) == enc {
                return SegmentDescriptor {
                    rkey: d.rkey ^ 0x5a5a_0000,
                    ..d
                };
            }
        }
        d
    }

    /// The local region a post from engine region `_idx` on device `_dev`
    /// uses (the wrong-lkey fault applies to device 0).
    #[inline(always)]
    pub(crate) fn local<'a>(
        &'a self,
        _idx: usize,
        _dev: usize,
        mr: &'a MemoryRegion,
    ) -> &'a MemoryRegion {
        #[cfg(feature = "fault-injection")]
        if _dev == 0 && self.bad_lkey.load(Ordering::Acquire) {
            if let Some(m) = self
                .foreign
                .get()
                .and_then(|(_, v)| v.get(_idx))
                .and_then(Option::as_ref)
            {
                return m;
            }
        }
        mr
    }
}
