//! The sender stack between a queued slice and the token pool: local
//! window, receiver credit, rail selection and congestion control.
//!
//! The simulator's [`Sim`](crate::model::Sim) calls the stack at the same
//! boundaries a real engine does (see `shared/design/slice-lifecycle.md`):
//! `admit` before `Owner::post`, `unwind` when the post is refused,
//! `on_completion` with the record `Owner::complete` handed back, and
//! `on_async_event` / `on_epoch` from the "monitor".

use railyard_core::completion::WcOutcome;
use railyard_core::token::TokenRecord;

use crate::model::{Series, SimConfig};

/// Receiver-credit settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CreditConfig {
    /// Slots granted per lease (RFC 2849's "lease batch").
    pub lease_batch: u32,
}

/// How the sender picks a NIC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RailSetting {
    /// Round robin over usable NICs.
    RoundRobin,
}

/// Congestion-control setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CcSetting {
    /// No controller.
    Off,
}

/// The sender stack's configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StackConfig {
    /// Local dispatch window: WRs posted and not yet completed, per sender.
    pub window_ops: u32,
    /// Receiver credit, if on.
    pub credit: Option<CreditConfig>,
    /// Congestion control.
    pub cc: CcSetting,
    /// Rail selection.
    pub rail: RailSetting,
}

impl Default for StackConfig {
    fn default() -> Self {
        StackConfig {
            window_ops: 2,
            credit: None,
            cc: CcSetting::Off,
            rail: RailSetting::RoundRobin,
        }
    }
}

/// What the stack observed (filled per scenario).
#[derive(Clone, Debug, Default)]
pub struct StackReport {
    /// Free-form `(key, value)` observations, in a stable order.
    pub values: Vec<(String, f64)>,
}

/// Per-run stack state.
pub struct Stack {
    nics: usize,
    rr: Vec<usize>,
}

impl Stack {
    /// Builds the stack for `cfg`.
    pub fn new(cfg: &SimConfig) -> Result<Stack, String> {
        Ok(Stack {
            nics: cfg.net.nics_per_host,
            rr: vec![0; cfg.senders],
        })
    }

    /// The time series the run samples: three from the fabric, then the
    /// stack's own.
    pub fn series_names(&self) -> Vec<Series> {
        let mk = |n: &str, u: &str| Series {
            name: n.into(),
            unit: u.into(),
            points: vec![],
        };
        vec![
            mk("in-flight", "MiB"),
            mk("receiver occupancy", "slots"),
            mk("switch queue (max port)", "MiB"),
            mk("receiver throughput", "GB/s"),
        ]
    }

    /// Admission of one slice of `bytes` to receiver `rx`: picks a usable
    /// NIC and takes the stack's reservations, recorded in the returned
    /// record (`device` set). `None`: blocked, nothing held.
    pub fn admit(
        &mut self,
        sender: u32,
        _rx: u32,
        _bytes: u32,
        usable: &[bool],
        _now: u64,
    ) -> Option<TokenRecord> {
        let s = sender as usize;
        for i in 0..self.nics {
            let k = (self.rr[s] + i) % self.nics;
            if usable[k] {
                self.rr[s] = (k + 1) % self.nics;
                return Some(TokenRecord {
                    device: k as u16,
                    ..TokenRecord::default()
                });
            }
        }
        None
    }

    /// The post was refused after `admit`: give back what `rec` holds.
    pub fn unwind(&mut self, _sender: u32, _rec: &mut TokenRecord, _now: u64) {}

    /// Ownership outcome of a WC status.
    pub fn wc_outcome(&self, status: u16) -> WcOutcome {
        match status {
            0 => WcOutcome::Success,
            5 | 12 | 13 | 20 => WcOutcome::Retryable,
            _ => WcOutcome::Fatal,
        }
    }

    /// A completion: release what `rec` holds, feed the policies.
    pub fn on_completion(&mut self, _sender: u32, _rec: &mut TokenRecord, _status: u16, _now: u64) {
    }

    /// An async event on a sender NIC.
    pub fn on_async_event(&mut self, _sender: u32, _nic: u16, _code: u32, _now: u64) {}

    /// An endpoint of `route` was retired.
    pub fn on_endpoint_retired(&mut self, _sender: u32, _route: u32, _now: u64) {}

    /// An endpoint of `route` was rebuilt (new generation).
    pub fn on_reconnect(&mut self, _sender: u32, _route: u32, _now: u64) {}

    /// Receiver occupancy changed.
    pub fn on_occupancy(&mut self, _rx: u32, _occ: u32, _cap: u32) {}

    /// One control epoch (monitor thread).
    pub fn on_epoch(&mut self, _now: u64) {}

    /// Whether the stack still has timers that matter (probing, cooldown).
    pub fn busy(&self) -> bool {
        false
    }

    /// The stack's series values at `now` (same order as its names).
    pub fn sample(&mut self, _now: u64) -> Vec<f64> {
        vec![]
    }

    /// Resources the stack still holds (must be 0 at the end).
    pub fn held(&self) -> u64 {
        0
    }

    /// Final observations.
    pub fn report(&self, _now: u64) -> StackReport {
        StackReport::default()
    }
}
