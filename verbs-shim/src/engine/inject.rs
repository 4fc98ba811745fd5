//! Fault injection for the real-verbs fault matrix (issue #7): hooks that
//! make the engine produce real verbs errors on Soft-RoCE. Compiled only
//! with the `fault-injection` feature; without it every check below is a
//! constant and the hooks do not exist. Not for production.
//!
//! | hook | what the NIC then does |
//! |---|---|
//! | [`Engine::fault_corrupt_rkey`] | posts on the segment's *current endpoint* carry a wrong rkey → `REM_ACCESS_ERR`; a reconnect (fresh descriptors) is the metadata refresh |
//! | [`Engine::fault_bad_lkey`] | posts use an lkey of the same buffer registered in *another* PD → `LOC_PROT_ERR` |
//! | [`Engine::fault_qps_to_error`] | the segment's QPs move to ERR behind the engine's back → a `WR_FLUSH_ERR` burst |
//! | [`Engine::fault_pause_polling`] | no CQ is polled (a poller stall) until resumed |
//! | [`Engine::fault_async_event`] | **scripted**: runs the engine's async-event handling on a synthetic event (for events Soft-RoCE cannot raise) |

use super::cc_gate::CcGate;
use super::control::handle_async_event;
use super::error::EngineError;
use super::fault::TraceEvent;
use super::types::{ep_word, SegmentId};
use super::Engine;
use crate::MemoryRegion;
use railyard_core::endpoint::EndpointHandle;
use std::sync::atomic::Ordering;

impl Engine {
    /// Installs a hook called right after the congestion controller
    /// processed a completion, a control epoch, event / timeout feedback or
    /// a reconnect's new generation, with the controller to read state from
    /// (the fault matrix traces every route's path through the state
    /// machine with it). One hook per engine; a second install is refused
    /// (`false`).
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// use railyard_verbs::engine::TraceEvent;
    /// let installed = engine.fault_trace_cc(|gate, ev| {
    ///     if let TraceEvent::Feedback(route, effect) = ev {
    ///         println!("feedback {effect:?} on {route:?}: {} epochs", gate.epochs());
    ///     }
    /// });
    /// assert!(installed);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn fault_trace_cc(&self, f: impl Fn(&CcGate, TraceEvent) + Send + Sync + 'static) -> bool {
        self.shared.fault.trace.set(Box::new(f)).is_ok()
    }

    /// Every admission on local `device` is avoided (`PATH_QUARANTINED`)
    /// while the planner still finds it usable, as a quarantine racing the
    /// planner would; `None` turns it off.
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// engine.fault_avoid_device(Some(1)); // admissions on device 1 are avoided
    /// // ... transfers fail over to device 0 ...
    /// engine.fault_avoid_device(None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn fault_avoid_device(&self, device: Option<u16>) {
        self.shared.gate.fault_avoid_device(device);
    }

    fn fault_handle(&self, seg: SegmentId) -> Result<EndpointHandle, EngineError> {
        Ok(self.segment_info(seg)?.endpoint)
    }

    /// Posts on `seg`'s current endpoint carry a corrupted rkey (the
    /// peer answers `REM_ACCESS_ERR`). The corruption belongs to that
    /// endpoint: a reconnect fetches fresh descriptors and so refreshes it.
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// # let seg = engine.open_segment("10.0.0.2:18515")?;
    /// engine.fault_corrupt_rkey(seg)?; // posts now fail with REM_ACCESS_ERR
    /// // ... a transfer fails ...
    /// engine.fault_restore_rkey();
    /// engine.reconnect_segment(seg)?; // fresh descriptors
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn fault_corrupt_rkey(&self, seg: SegmentId) -> Result<(), EngineError> {
        let h = self.fault_handle(seg)?;
        let enc = ep_word(h) + 1;
        self.shared.fault.bad_rkey_ep.store(enc, Ordering::Release);
        Ok(())
    }

    /// Undoes [`fault_corrupt_rkey`](Self::fault_corrupt_rkey).
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// # let seg = engine.open_segment("10.0.0.2:18515")?;
    /// engine.fault_corrupt_rkey(seg)?;
    /// engine.fault_restore_rkey(); // posts carry the peer's rkey again
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn fault_restore_rkey(&self) {
        self.shared.fault.bad_rkey_ep.store(0, Ordering::Release);
    }

    /// While `on`, every post uses the lkey of its buffer registered in a
    /// second protection domain (the NIC answers `LOC_PROT_ERR`; rxe answers
    /// `LOC_QP_OP_ERR`). Applies to posts on device 0. The
    /// foreign registrations are made on first use, for every region
    /// registered so far (by slot), and live as long as the engine; from
    /// then on `deregister_memory` is refused.
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// engine.fault_bad_lkey(true)?; // posts on device 0 now fail (LOC_PROT_ERR)
    /// // ... a transfer fails ...
    /// engine.fault_bad_lkey(false)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[allow(unsafe_code)]
    pub fn fault_bad_lkey(&self, on: bool) -> Result<(), EngineError> {
        let f = &self.shared.fault;
        if on && f.foreign.get().is_none() {
            let pd = self.shared.fabric.devs[0].ctx.alloc_pd()?;
            let mut v = Vec::new();
            for m in self.shared.mem.regions_first() {
                let Some(m) = m else {
                    v.push(None);
                    continue;
                };
                // SAFETY: once foreign registrations exist,
                // `deregister_memory` refuses, so the engine's regions live
                // until the engine is dropped; this registration is dropped
                // with it (after every QP was flushed), and the NIC only
                // reads/writes the same bytes the engine's own registration
                // covers.
                let mr = unsafe {
                    MemoryRegion::register(
                        &pd,
                        m.addr() as *mut u8,
                        m.len(),
                        crate::Access::ALL_RDMA,
                    )
                }?;
                v.push(Some(mr));
            }
            let _ = f.foreign.set((pd, v));
        }
        f.bad_lkey.store(on, Ordering::Release);
        Ok(())
    }

    /// Moves the QPs of `seg`'s first rail to ERR without telling the engine (as a QP
    /// error nobody reported would): posted work flushes.
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// # let seg = engine.open_segment("10.0.0.2:18515")?;
    /// let qps = engine.fault_qps_to_error(seg)?; // posted work flushes (WR_FLUSH_ERR)
    /// assert_eq!(qps, usize::from(engine.config().qps_per_endpoint));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn fault_qps_to_error(&self, seg: SegmentId) -> Result<usize, EngineError> {
        let h = self.fault_handle(seg)?;
        let local = self.shared.endpoints.register();
        let guard = local.pin();
        let res = self
            .shared
            .endpoints
            .resource(h, &guard)
            .map_err(EngineError::Endpoint)?;
        let mut n = 0;
        for qp in &res.qps {
            qp.to_error_shared()?;
            n += 1;
        }
        Ok(n)
    }

    /// Pauses (`true`) or resumes CQ polling in every worker: a poller
    /// stall. Posting continues.
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// engine.fault_pause_polling(true); // a poller stall: completions wait
    /// std::thread::sleep(std::time::Duration::from_millis(1500));
    /// engine.fault_pause_polling(false);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn fault_pause_polling(&self, paused: bool) {
        self.shared
            .fault
            .polling_paused
            .store(paused, Ordering::Release);
        if !paused {
            for s in 0..self.shared.fabric.cqs.len() {
                self.shared.fabric.wake_poller(s);
            }
        }
    }

    /// **Scripted, not a real event**: runs the engine's async-event
    /// handling (classification, controller feedback, retire at the
    /// classified scope) on a synthetic `event_type` of device 0, for the
    /// first QP of `seg`'s first rail if given. For rows of the RFC 4162 event table Soft-RoCE cannot
    /// raise.
    ///
    /// ```no_run
    /// # use railyard_verbs::engine::{Engine, EngineConfig};
    /// # let engine = Engine::new(EngineConfig::from_env()?)?;
    /// # let seg = engine.open_segment("10.0.0.2:18515")?;
    /// use railyard_core::classify::event;
    /// // As if the NIC reported the segment's QP fatal: its endpoint retires
    /// // and the engine reconnects the segment once on its own.
    /// engine.fault_async_event(event::QP_FATAL, Some(seg))?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn fault_async_event(
        &self,
        event_type: u32,
        seg: Option<SegmentId>,
    ) -> Result<(), EngineError> {
        let qpn = match seg {
            Some(s) => Some(self.shared.registry.first_qpn(s)?),
            None => None,
        };
        // Device 0; a scripted event carries no CQ.
        handle_async_event(&self.shared, 0, event_type, qpn, None);
        Ok(())
    }
}
