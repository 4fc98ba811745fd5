//! The WC, async-event and signal classifiers (RFC 4162): total functions
//! over raw ibverbs numbers, returning a `repr(C)` row.

use railyard_core::classify::{classify_event, classify_signal, classify_wc};

use crate::enums::{
    ry_effect, ry_failure_class, ry_failure_scope, ry_object_handling, ry_reason, ry_signal,
    ry_task_state,
};
use crate::error::{ret, RyStatus};
use crate::mirror::CEnum;

/// `ry_wc_classification.reason` / `ry_signal_classification` when the
/// row carries no evidence reason (a success resolves instead).
pub const RY_REASON_NONE: u32 = u32::MAX;

/// The classification of one work completion.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ry_wc_classification {
    /// The raw `ibv_wc.status`.
    pub status: u32,
    /// The raw `ibv_wc.vendor_err` (evidence only; never changes the row).
    pub vendor_err: u32,
    /// Normalized class.
    pub class_: ry_failure_class,
    /// Maximum isolation scope.
    pub scope: ry_failure_scope,
    /// What happens to the current object.
    pub handling: ry_object_handling,
    /// What the controller does (pass it to `ry_cc_release`).
    pub effect: ry_effect,
    /// The task-evidence reason (`ry_reason`), or `RY_REASON_NONE`.
    pub reason: u32,
    /// Whether ibverbs defines `status`.
    pub known: bool,
    /// Whether this completion enters the AIMD hard-error counters.
    pub counts_hard_error: bool,
}

/// The classification of one async event.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ry_event_classification {
    /// The raw `ibv_event_type`.
    pub event: u32,
    /// Normalized class.
    pub class_: ry_failure_class,
    /// Maximum isolation scope.
    pub scope: ry_failure_scope,
    /// What happens to the affected object.
    pub handling: ry_object_handling,
    /// What the controller does (at `scope`, no wider).
    pub effect: ry_effect,
    /// Whether ibverbs defines `event`.
    pub known: bool,
    /// Whether this event enters the AIMD hard-error counters.
    pub counts_hard_error: bool,
}

/// The classification of one non-WC signal.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ry_signal_classification {
    /// The signal.
    pub signal: ry_signal,
    /// Normalized class.
    pub class_: ry_failure_class,
    /// Maximum isolation scope.
    pub scope: ry_failure_scope,
    /// What happens to the current object.
    pub handling: ry_object_handling,
    /// What the controller does.
    pub effect: ry_effect,
    /// The task-evidence reason.
    pub reason: ry_reason,
    /// The task state this signal implies.
    pub task_state: ry_task_state,
    /// Whether this signal enters the AIMD hard-error counters.
    pub counts_hard_error: bool,
}

/// Classifies a work completion (`ibv_wc.status`, `ibv_wc.vendor_err`).
/// Total over all `uint32_t` values: an unknown status is a row with
/// `known = false`, not an error.
///
/// Ownership: writes `*out`. Thread-safety: pure; any thread.
///
/// # Safety
/// `out` is valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ry_classify_wc(
    status: u32,
    vendor_err: u32,
    out: *mut ry_wc_classification,
) -> RyStatus {
    // SAFETY: caller contract: `out` is valid for writes.
    unsafe { ret(out, "out", || Ok((&classify_wc(status, vendor_err)).into())) }
}

impl From<&railyard_core::classify::WcClassification> for ry_wc_classification {
    fn from(c: &railyard_core::classify::WcClassification) -> Self {
        ry_wc_classification {
            status: c.status,
            vendor_err: c.vendor_err,
            class_: c.class.into(),
            scope: c.scope.into(),
            handling: c.handling.into(),
            effect: c.effect.into(),
            reason: c
                .reason()
                .map_or(RY_REASON_NONE, |r| ry_reason::from(r) as u32),
            known: c.known,
            counts_hard_error: c.counts_hard_error(),
        }
    }
}

impl From<&railyard_core::classify::EventClassification> for ry_event_classification {
    fn from(c: &railyard_core::classify::EventClassification) -> Self {
        ry_event_classification {
            event: c.event,
            class_: c.class.into(),
            scope: c.scope.into(),
            handling: c.handling.into(),
            effect: c.effect.into(),
            known: c.known,
            counts_hard_error: c.counts_hard_error(),
        }
    }
}

/// Classifies an async event (`ibv_async_event.event_type`). Total over
/// all `uint32_t` values.
///
/// Ownership: writes `*out`. Thread-safety: pure; any thread.
///
/// # Safety
/// `out` is valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ry_classify_event(
    event_type: u32,
    out: *mut ry_event_classification,
) -> RyStatus {
    // SAFETY: caller contract: `out` is valid for writes.
    unsafe { ret(out, "out", || Ok((&classify_event(event_type)).into())) }
}

/// Classifies a signal (`ry_signal` value). An unknown value is
/// `RY_STATUS_INVALID_ARGUMENT`.
///
/// Ownership: writes `*out`. Thread-safety: pure; any thread.
///
/// # Safety
/// `out` is valid for writes.
#[no_mangle]
pub unsafe extern "C" fn ry_classify_signal(
    signal: u32,
    out: *mut ry_signal_classification,
) -> RyStatus {
    // SAFETY: caller contract: `out` is valid for writes.
    unsafe {
        ret(out, "out", || {
            let c = classify_signal(ry_signal::to_core(signal, "signal")?);
            Ok(ry_signal_classification {
                signal: c.signal.into(),
                class_: c.class.into(),
                scope: c.scope.into(),
                handling: c.handling.into(),
                effect: c.effect.into(),
                reason: c.reason.into(),
                task_state: c.task_state.into(),
                counts_hard_error: c.counts_hard_error(),
            })
        })
    }
}
