//! Submit: a batch of transfers becomes queued slices, in four steps that
//! either all happen or leave nothing behind:
//!
//! 1. [`validate`] every transfer (length, local memory, segment, an
//!    active rail, remote region) and pin its memory once per slice; the
//!    pins go back if any later step refuses;
//! 2. reserve its task and slice slots
//!    ([`Tables::reserve`](super::tables::Tables::reserve));
//! 3. [`describe`] each task's slices: full `slice_size` slices and one
//!    tail ([`slice_count`]), in runs of [`SLICES_PER_QP_RUN`] over the
//!    rails [`plan_rails`] picks;
//! 4. [`enqueue`] them: open each slice's first attempt and queue it to
//!    its QP's shard.
//!
//! Also [`cancel_batch`]; allocating and freeing a batch are the
//! [`Tables`](super::tables::Tables)'.

use super::config::slice_count;
use super::connect::reconnect_evicted;
use super::error::EngineError;
use super::memory::{self, MemEntry, SubmitPins};
use super::registry::{RailEntry, SegmentEntry};
use super::shared::Shared;
use super::tables::TaskEntry;
use super::types::{ep_word, BatchId, Op, SegmentId, Transfer, MAX_RAILS, SLICES_PER_QP_RUN};
use railyard_core::endpoint::{EndpointHandle, Phase};
use railyard_core::rail::Selector;
use railyard_core::slice::Outcome;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// One active rail of a transfer's segment.
struct RailChoice {
    dev: u16,
    handle: EndpointHandle,
    shards: Vec<u16>,
    route: u32,
}

/// A segment's active rails as one submit call found them, shared by every
/// transfer of the call to that segment.
struct RailSet {
    seg: u32,
    choices: Vec<RailChoice>,
    /// `(local device, CC route)` of each choice, as [`plan_rails`] takes them.
    keys: Vec<(u16, u32)>,
}

/// A validated transfer: where its bytes are on both sides and the rails
/// it may use.
struct Plan {
    mem: u32,
    local_off: u64,
    region: u32,
    remote_off: u64,
    /// The segment's active rails.
    rails: Rc<RailSet>,
}

/// Submits `transfers` into `batch` (see the module docs); nothing is
/// queued if any step refuses.
pub(crate) fn submit(
    sh: &Shared,
    batch: BatchId,
    transfers: &[Transfer],
) -> Result<(), EngineError> {
    let mut pins = SubmitPins::new(&sh.mem);
    let (plans, evicted) = validate(sh, transfers, &mut pins)?;
    // Segments the endpoint store evicted: reconnect them; their slices
    // wait for it in their queues.
    for seg in evicted {
        reconnect_evicted(sh, seg as usize, true);
    }
    sh.tables.with_batch_mut(batch, |b| {
        if b.tasks.len() + transfers.len() > b.capacity {
            return Err(EngineError::BatchFull {
                capacity: b.capacity,
            });
        }
        let needed: u64 = transfers
            .iter()
            .map(|t| slice_count(t.len, sh.cfg.slice_size))
            .sum();
        // Step 2: a task slot per transfer and a slice slot per slice,
        // all or nothing.
        let (task_ids, slice_ids) = sh.tables.reserve(transfers.len(), needed)?;
        let first = b.tasks.len();
        let now = sh.now();
        let mut next = slice_ids.iter().copied();
        for ((t, p), &task) in transfers.iter().zip(&plans).zip(&task_ids) {
            b.tasks.push(describe(sh, t, p, task, &mut next, now));
        }
        // Open and queue only after every slice is described and the batch
        // holds them (so cancel/timeout scans see them). From here each
        // slice's memory pin is released when the slice settles.
        pins.commit();
        enqueue(sh, &b.tasks[first..]);
        Ok(())
    })
}

/// Step 1: validates every transfer and pins its memory once per slice
/// (under the table lock: the region found is the one pinned). Also
/// returns the evicted segments among the transfers' (to reconnect).
fn validate(
    sh: &Shared,
    transfers: &[Transfer],
    pins: &mut SubmitPins<'_>,
) -> Result<(Vec<Plan>, Vec<u32>), EngineError> {
    let mut plans = Vec::with_capacity(transfers.len());
    let mut evicted = Vec::new();
    let segs = sh
        .registry
        .read_segments()
        .unwrap_or_else(|e| e.into_inner());
    let regions = sh.mem.lock();
    // A batch's transfers mostly go to one segment: its active rails
    // are looked up (and their shard lists copied) once per run of
    // transfers to the same segment, not once per transfer. The lookup
    // is a snapshot either way (a rail may retire right after it).
    let mut last: Option<Rc<RailSet>> = None;
    for t in transfers {
        let p = plan(sh, &segs, &regions, t, &mut last, &mut evicted)?;
        pins.pin(p.mem, slice_count(t.len, sh.cfg.slice_size), t.local, t.len)?;
        plans.push(p);
    }
    Ok((plans, evicted))
}

/// Where one transfer's bytes are (local region, remote region) and
/// which rails of its segment are active. A segment the endpoint store
/// evicted has none: its rails are planned as they were (the attempts
/// wait for the reconnect and move to the new endpoints) and it is added
/// to `evicted`.
fn plan(
    sh: &Shared,
    segs: &[SegmentEntry],
    regions: &[Option<Arc<MemEntry>>],
    t: &Transfer,
    last: &mut Option<Rc<RailSet>>,
    evicted: &mut Vec<u32>,
) -> Result<Plan, EngineError> {
    if t.len == 0 {
        return Err(EngineError::ZeroLength);
    }
    let memory::Located {
        mem,
        offset: local_off,
    } = memory::MemTable::locate(regions, t.local, t.len).ok_or(EngineError::LocalRange {
        addr: t.local,
        len: t.len,
    })?;
    let seg = segs
        .get(t.segment.0 as usize)
        .ok_or(EngineError::NoSuchSegment(t.segment))?;
    let rails = match last {
        Some(set) if set.seg == t.segment.0 => Rc::clone(set),
        _ => {
            // Least recently used first, for the endpoint store's eviction.
            seg.touch(sh.now());
            let choice = |r: &RailEntry| RailChoice {
                dev: r.dev,
                handle: r.handle,
                shards: r.shards.clone(),
                route: r.route,
            };
            let mut choices: Vec<RailChoice> = seg
                .rails
                .iter()
                .filter(
                    |r| matches!(sh.endpoints.state(r.handle), Ok(s) if s.phase == Phase::Active),
                )
                .map(choice)
                .collect();
            if choices.is_empty() {
                if !(seg.evicted && seg.peer.is_some() && !seg.closed) {
                    return Err(EngineError::SegmentClosed(t.segment));
                }
                choices = seg.rails.iter().map(choice).collect();
                evicted.push(t.segment.0);
            }
            let keys = choices.iter().map(|r| (r.dev, r.route)).collect();
            let set = Rc::new(RailSet {
                seg: t.segment.0,
                choices,
                keys,
            });
            *last = Some(Rc::clone(&set));
            set
        }
    };
    // Every rail lists the same regions (the handshake checks it).
    let (region, remote_off) = seg.rails[0]
        .remote
        .iter()
        .enumerate()
        .find_map(|(i, d)| {
            let rend = t.remote_offset.checked_add(t.len)?;
            (t.remote_offset >= d.addr && rend <= d.addr + d.len)
                .then(|| (i as u32, t.remote_offset - d.addr))
        })
        .ok_or(EngineError::RemoteRange {
            addr: t.remote_offset,
            len: t.len,
        })?;
    Ok(Plan {
        mem,
        local_off,
        region,
        remote_off,
        rails,
    })
}

/// Step 3: resets task `task`'s record for transfer `t` and describes
/// its slices (taken from `next`) on the rails the plan picks.
fn describe(
    sh: &Shared,
    t: &Transfer,
    p: &Plan,
    task: u32,
    next: &mut impl Iterator<Item = u32>,
    now: u64,
) -> TaskEntry {
    let ss = u64::from(sh.cfg.slice_size);
    let nqp = u64::from(sh.cfg.qps_per_endpoint);
    let n = slice_count(t.len, sh.cfg.slice_size);
    let deadline = now.saturating_add(sh.cfg.transfer_timeout.as_nanos() as u64);
    sh.tables.tasks[task as usize].reset(n as u32, t.len, deadline);
    let runs = n.div_ceil(SLICES_PER_QP_RUN);
    let run0 = sh.tables.next_runs(runs);
    let run_bytes = t.len.min(ss * SLICES_PER_QP_RUN);
    // One rail: every run on it, no plan and no trace (`plan_rails`
    // answers so too, but with an allocation per transfer).
    let planned = (p.rails.keys.len() > 1).then(|| {
        let (run_rail, trace) = plan_rails(
            &sh.rails,
            &sh.gate,
            t.segment,
            &p.rails.keys,
            runs,
            run_bytes,
            now,
        );
        sh.telemetry.rail_trace.record(trace);
        run_rail
    });
    let mut entry = TaskEntry {
        task,
        slices: Vec::with_capacity(n as usize),
    };
    for i in 0..n {
        let s = next.next().unwrap_or(0);
        let off = i * ss;
        let len = (t.len - off).min(ss) as u32;
        let run = i / SLICES_PER_QP_RUN;
        let pick = planned.as_ref().map_or(0, |r| r[run as usize]);
        let rail = &p.rails.choices[usize::from(pick)];
        let qp = ((run0 + run) % nqp) as u16;
        let shard = rail.shards[usize::from(qp)];
        let m = &sh.tables.meta[s as usize];
        m.task.store(task, Ordering::Relaxed);
        m.mem.store(p.mem, Ordering::Relaxed);
        m.region.store(p.region, Ordering::Relaxed);
        m.op.store(matches!(t.op, Op::Read) as u32, Ordering::Relaxed);
        m.len.store(len, Ordering::Relaxed);
        m.qp.store(u32::from(qp), Ordering::Relaxed);
        m.shard.store(u32::from(shard), Ordering::Relaxed);
        m.dev.store(u32::from(rail.dev), Ordering::Relaxed);
        m.posted.store(0, Ordering::Relaxed);
        m.ep.store(ep_word(rail.handle), Ordering::Relaxed);
        m.segment.store(t.segment.0, Ordering::Relaxed);
        m.route.store(rail.route, Ordering::Relaxed);
        m.local_off.store(p.local_off + off, Ordering::Relaxed);
        m.remote_off.store(p.remote_off + off, Ordering::Relaxed);
        entry.slices.push(s);
    }
    entry
}

/// Step 4: opens each slice's first attempt and queues it.
fn enqueue(sh: &Shared, tasks: &[TaskEntry]) {
    for te in tasks {
        for &s in &te.slices {
            // A freed slot is never Pending, so open cannot refuse; if
            // it did, the slice would never settle: give its pin back.
            match sh.tables.slices.open(s) {
                Ok(r) => sh.requeue(r),
                Err(_) => sh.mem.unpin(
                    sh.tables.meta[s as usize].mem.load(Ordering::Relaxed) as usize,
                    1,
                ),
            }
        }
    }
}

/// Cancels every unsettled slice of `batch`.
pub(crate) fn cancel_batch(sh: &Shared, batch: BatchId) -> Result<(), EngineError> {
    sh.tables.with_batch(batch, |_| Ok(()))?;
    sh.tables
        .settle_where(&sh.mem, Outcome::Canceled, |id, _| id == batch.0, |_| {});
    Ok(())
}

/// Rail selection (RFC 4534) for one transfer to `seg` cut into `runs`
/// runs of [`SLICES_PER_QP_RUN`] slices (`run_bytes` each): returns, for
/// each run, the index into `rails` (the segment's active rails as `(local
/// device, CC route)`).
///
/// [`Selector::plan`] splits the runs over the devices in proportion to
/// their inverse scores (NIC in-flight bytes over the completion EWMA, with
/// periodic probes). Runs planned for a device that is not one of `rails`,
/// or whose device or route the controller has quarantined
/// ([`CcGate::usable`]), go to the best-scoring usable rail. If no rail
/// is usable, the best-scoring rail is used anyway (the gate then says
/// `Avoid` and the task records `PATH_QUARANTINED`). Runs are interleaved
/// over the chosen devices. Nothing is charged here: each slice charges
/// its actual bytes to its device when it is posted. Also returns the
/// plan's trace (`PlanInfo::trace`; `None` without a plan).
pub(crate) fn plan_rails(
    sel: &Selector,
    gate: &impl railyard_core::completion::CcLayer,
    seg: SegmentId,
    rails: &[(u16, u32)],
    runs: u64,
    run_bytes: u64,
    now: u64,
) -> (Vec<u8>, Option<Option<u64>>) {
    let runs_u32 = u32::try_from(runs).unwrap_or(u32::MAX);
    if rails.len() <= 1 || runs_u32 == 0 {
        return (vec![0; runs as usize], None);
    }
    let run_bytes = u32::try_from(run_bytes).unwrap_or(u32::MAX);
    let mut counts = [0u32; MAX_RAILS];
    let ndev = sel.len().min(MAX_RAILS);
    let trace = sel
        .plan(Some(seg.0), runs_u32, run_bytes, now, &mut counts[..ndev])
        .ok()
        .and_then(|i| i.trace);
    // The rail (index into `rails`) that serves each device, if usable.
    let mut usable = [None::<u8>; MAX_RAILS];
    for (i, &(dev, route)) in rails.iter().enumerate() {
        if usize::from(dev) < ndev && gate.usable(dev, route) {
            usable[usize::from(dev)] = Some(i as u8);
        }
    }
    if usable.iter().all(Option::is_none) {
        for (i, &(dev, _)) in rails.iter().enumerate() {
            if usize::from(dev) < ndev {
                usable[usize::from(dev)] = Some(i as u8);
            }
        }
    }
    let score = |d: usize| sel.score_of(d, Some(seg.0), run_bytes, false);
    let Some(best) = (0..ndev).filter(|&d| usable[d].is_some()).reduce(|a, b| {
        if score(b)
            .zip(score(a))
            .is_some_and(|(sb, sa)| sb.better_than(sa))
        {
            b
        } else {
            a
        }
    }) else {
        return (vec![0; runs as usize], trace);
    };
    for d in 0..ndev {
        if usable[d].is_none() {
            counts[best] += std::mem::take(&mut counts[d]);
        }
    }
    let mut out = Vec::with_capacity(runs as usize);
    while out.len() < runs as usize {
        let before = out.len();
        for d in 0..ndev {
            if counts[d] > 0 && out.len() < runs as usize {
                counts[d] -= 1;
                out.push(usable[d].unwrap_or(0));
            }
        }
        if out.len() == before {
            // The plan gave fewer runs than asked (it never does): the
            // rest go to the best rail.
            out.resize(runs as usize, usable[best].unwrap_or(0));
        }
    }
    (out, trace)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{CcConfig, CcGate, CcMode, NOMINAL_RAIL_BPS};
    use railyard_core::rail::{DeviceSpec, RailConfig};
    use railyard_core::token::TokenRecord;

    /// A CC layer that marks some devices unusable (as a quarantine would).
    struct Unusable(&'static [u16]);
    impl railyard_core::completion::CcLayer for Unusable {
        fn usable(&self, device: u16, _route: u32) -> bool {
            !self.0.contains(&device)
        }
        fn acquire(
            &self,
            _rec: &mut TokenRecord,
            _now: u64,
        ) -> Result<(), railyard_core::completion::CcRefusal> {
            Ok(())
        }
        fn release(
            &self,
            _rec: &mut TokenRecord,
            _e: railyard_core::classify::Effect,
        ) -> Result<railyard_core::cc::Settlement, railyard_core::cc::ReleaseError> {
            Ok(railyard_core::cc::Settlement::Current)
        }
    }

    fn selector(n: usize) -> Selector {
        let cfg = RailConfig {
            probe_interval: 0,
            ..RailConfig::default()
        };
        Selector::new(&vec![DeviceSpec::new(NOMINAL_RAIL_BPS); n], cfg).unwrap()
    }

    #[test]
    fn rail_plan_splits_interleaves_and_avoids_unusable_rails() {
        let sel = selector(2);
        let rails = [(0u16, 0u32), (1, 64)];
        let seg = SegmentId(3);
        let run = 8 * 65536;
        // Idle, equal rails: an even split, interleaved.
        let p = plan_rails(&sel, &(), seg, &rails, 16, run, 0).0;
        assert_eq!(p.len(), 16);
        assert_eq!(p.iter().filter(|&&r| r == 1).count(), 8);
        assert_eq!(&p[..4], &[0, 1, 0, 1]);
        // Load on device 0 (charges of posted slices): most runs go to 1.
        let held: Vec<_> = (0..64)
            .map(|_| sel.charge(0, Some(3), 65536, 0).unwrap())
            .collect();
        let p = plan_rails(&sel, &(), seg, &rails, 16, run, 0).0;
        assert!(p.iter().filter(|&&r| r == 1).count() > 8, "{p:?}");
        for c in held {
            sel.release(c, railyard_core::rail::Outcome::Failed, 1)
                .unwrap();
        }
        // An unusable (quarantined) device gets nothing.
        let p = plan_rails(&sel, &Unusable(&[1]), seg, &rails, 16, run, 0).0;
        assert!(p.iter().all(|&r| r == 0), "{p:?}");
        let p = plan_rails(&sel, &Unusable(&[0]), seg, &rails, 16, run, 0).0;
        assert!(p.iter().all(|&r| r == 1), "{p:?}");
        // Every rail unusable: still planned (the gate then avoids).
        let p = plan_rails(&sel, &Unusable(&[0, 1]), seg, &rails, 4, run, 0).0;
        assert_eq!(p.len(), 4);
        // A segment with only device 1 (peer with one NIC... on our rail 1):
        // index 0 of its rails, always.
        let p = plan_rails(&sel, &(), seg, &[(1, 64)], 5, run, 0).0;
        assert_eq!(p, vec![0; 5]);
        // Nothing was charged by planning.
        assert_eq!(
            (sel.nic_inflight(0), sel.nic_inflight(1)),
            (Some(0), Some(0))
        );
    }

    #[cfg(feature = "adaptive-cc")]
    /// With the ledger and trace on, a multi-rail plan returns its sample-age
    /// trace (cold first); a one-rail segment is no decision and has none.
    #[cfg(feature = "peer-feedback")]
    #[test]
    fn rail_plan_returns_the_decision_trace() {
        use railyard_core::rail::Outcome as RailOutcome;
        let cfg = RailConfig {
            peer_accounting: true,
            trace: true,
            probe_interval: 0,
            ..RailConfig::default()
        };
        let sel = Selector::new(&[DeviceSpec::new(NOMINAL_RAIL_BPS); 2], cfg).unwrap();
        let rails = [(0u16, 0u32), (1, 64)];
        let (_, t) = plan_rails(&sel, &(), SegmentId(3), &rails, 4, 1 << 19, 10);
        assert_eq!(t, Some(None), "no samples yet: cold");
        for (d, done) in [(0u16, 1_000u64), (1, 4_000)] {
            let c = sel.charge(d, Some(3), 65536, 0).unwrap();
            sel.release(c, RailOutcome::Completed { post_ns: 0 }, done)
                .unwrap();
        }
        let (_, t) = plan_rails(&sel, &(), SegmentId(3), &rails, 4, 1 << 19, 5_000);
        assert_eq!(t, Some(Some(4_000)), "the oldest candidate sample");
        let (_, t) = plan_rails(&sel, &(), SegmentId(3), &rails[..1], 4, 1 << 19, 5_000);
        assert_eq!(t, None);
    }

    #[test]
    fn rail_plan_avoids_a_cc_quarantined_device() {
        let cfg = CcConfig {
            mode: CcMode::Enforce,
            ..CcConfig::default()
        };
        let gate = CcGate::with_devices(&cfg, 2, 4).unwrap();
        let sel = selector(2);
        let rails = [(0u16, gate.route_index(0, 0)), (1, gate.route_index(1, 0))];
        let p = plan_rails(&sel, &gate, SegmentId(0), &rails, 8, 1 << 19, 0).0;
        assert!(p.contains(&1));
        gate.device_feedback(1, railyard_core::classify::Effect::Quarantine);
        assert!(!gate.usable(1, rails[1].1));
        assert!(gate.usable(0, rails[0].1));
        let p = plan_rails(&sel, &gate, SegmentId(0), &rails, 8, 1 << 19, 0).0;
        assert!(p.iter().all(|&r| r == 0), "{p:?}");
    }
}
