//! The engine's fabric ([`Fabric`]): the opened devices (rails), their
//! shards (a CQ and a submission queue each, laid out by [`Topology`]),
//! the RC QPs an endpoint gets on them, and the worker threads that post
//! and poll them, with the wake-ups that bring an idle worker back (a
//! submit, a completion to poll, a peer's receiver credit).

use super::config::EngineConfig;
use super::error::{ConfigError, EngineError};
use super::topology::Topology;
use crate::wire::SegmentDescriptor;
use crate::{CompletionQueue, Context, CqId, Mtu, ProtectionDomain, QpCaps, QpConfig, QueuePair};
use crossbeam_queue::ArrayQueue;
use railyard_core::slice::SliceRef;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// One opened device: its context, PD and QP parameters. Its shards
/// (CQ + submission queue each) are `dev * shards_per_dev ..`.
pub(crate) struct Dev {
    pub(crate) ctx: Context,
    pub(crate) pd: ProtectionDomain,
    pub(crate) qp_cfg: QpConfig,
    /// `ibv_device_attr.vendor_id` at open.
    pub(crate) vendor_id: u32,
}

/// The engine's per-endpoint resource, held in the core `EndpointTable`
/// and dropped (QPs destroyed) only when crossbeam-epoch reclaims it.
pub(crate) struct EpResource {
    pub(crate) qps: Vec<QueuePair>,
    pub(crate) remote: Vec<SegmentDescriptor>,
}

/// Buckets of [`Fabric::credit_changed`]'s sequence (peer index modulo).
pub(crate) const CREDIT_BUCKETS: usize = 64;

/// The devices, their shards and the workers on them (see the module docs).
pub(crate) struct Fabric {
    /// The devices, in rail order.
    pub(crate) devs: Vec<Dev>,
    /// Where devices, shards and workers sit.
    pub(crate) topo: Topology,
    /// Shard `s`'s CQ (device [`Topology::device_of`]).
    pub(crate) cqs: Vec<CompletionQueue>,
    /// One submission queue per shard.
    pub(crate) queues: Vec<ArrayQueue<SliceRef>>,
    /// The next shard a new QP goes to (round robin per device).
    next_shard: AtomicUsize,
    /// Worker threads, for unparking idle ones.
    threads: OnceLock<Vec<std::thread::Thread>>,
    /// Receiver-credit change sequence per peer bucket
    /// ([`credit_changed`](Self::credit_changed)).
    credit_seq: [AtomicU64; CREDIT_BUCKETS],
}

impl Fabric {
    /// Opens every configured device (`MC_RDMA_DEVICE`, in rail order): its
    /// context, PD and QP parameters (the port's MTU, the device's RDMA
    /// atomics, capped at 16). Returns them with the smallest `max_cqe` of
    /// them (every CQ must hold every token).
    pub(crate) fn open_devices(cfg: &EngineConfig) -> Result<(Vec<Dev>, u32), EngineError> {
        let cap = |v: u32| u8::try_from(v.clamp(1, 16)).unwrap_or(16);
        let mut devs = Vec::new();
        let mut max_cqe = u32::MAX;
        for name in cfg.device_names() {
            let ctx = Context::open(name)?;
            let port = ctx.port(cfg.port)?;
            let caps = ctx.caps()?;
            let qp_cfg = QpConfig {
                port_num: cfg.port,
                gid_index: cfg.gid_index,
                mtu: port.active_mtu.unwrap_or(Mtu::M1024),
                max_rd_atomic: cap(caps.max_qp_init_rd_atom),
                max_dest_rd_atomic: cap(caps.max_qp_rd_atom),
                timeout: cfg.qp_timeout,
                retry_cnt: cfg.qp_retry_cnt,
                ..QpConfig::default()
            };
            qp_cfg.validate()?;
            if cfg.max_wr > caps.max_qp_wr {
                return Err(ConfigError {
                    var: "MC_MAX_WR",
                    value: cfg.max_wr.to_string(),
                    expected: "at most the device's max_qp_wr",
                }
                .into());
            }
            max_cqe = max_cqe.min(caps.max_cqe.max(1));
            let pd = ctx.alloc_pd()?;
            ctx.set_async_nonblocking()?;
            devs.push(Dev {
                ctx,
                pd,
                qp_cfg,
                vendor_id: caps.vendor_id,
            });
        }
        Ok((devs, max_cqe))
    }

    /// The fabric over the opened devices `devs`: `workers` workers per
    /// device in `cfg`'s model, and per shard a CQ of `cqe` entries and a
    /// submission queue of `max_slices`.
    pub(crate) fn new(devs: Vec<Dev>, cfg: &EngineConfig, cqe: u32) -> Result<Self, EngineError> {
        let topo = Topology::new(cfg.worker_model, cfg.workers, devs.len());
        let mut cqs = Vec::with_capacity(topo.shards());
        for d in &devs {
            for _ in 0..topo.shards_per_dev {
                cqs.push(d.ctx.create_cq(cqe)?);
            }
        }
        let shards = cqs.len();
        Ok(Self {
            devs,
            topo,
            cqs,
            queues: (0..shards)
                .map(|_| ArrayQueue::new(cfg.max_slices as usize))
                .collect(),
            next_shard: AtomicUsize::new(0),
            threads: OnceLock::new(),
            credit_seq: std::array::from_fn(|_| AtomicU64::new(0)),
        })
    }

    /// The post shard of worker `w`, if it posts ([`Topology::post_shard`]).
    pub(crate) fn post_shard(&self, w: usize) -> Option<usize> {
        self.topo.post_shard(w)
    }

    /// Records the worker threads (once, when they are started), so that
    /// the wake-ups below can unpark them.
    pub(crate) fn set_workers(&self, threads: Vec<std::thread::Thread>) {
        let _ = self.threads.set(threads);
    }

    fn wake(&self, worker: usize) {
        if let Some(t) = self.threads.get().and_then(|t| t.get(worker)) {
            // Cheap (one atomic swap) unless the worker is parked.
            t.unpark();
        }
    }

    /// Wakes every worker (shutdown: a parked worker sees `stop` now, not
    /// when its park times out).
    pub(crate) fn wake_all(&self) {
        for w in 0..self.topo.workers() {
            self.wake(w);
        }
    }

    /// Wakes the worker that posts `shard`, if it is parked idle.
    pub(crate) fn wake_poster(&self, shard: usize) {
        self.wake(self.topo.poster_of(shard))
    }

    /// Wakes the worker that polls `shard`'s CQ, if it is parked idle.
    pub(crate) fn wake_poller(&self, shard: usize) {
        self.wake(self.topo.poller_of(shard))
    }

    /// Receiver credit for `peer` changed (a grant arrived, a link
    /// opened): slices parked on that peer's credit backpressure
    /// (`park.rs`) are offered again on their worker's next round, and
    /// idle posters are unparked. Call it after the ledger holds the new
    /// credit (the sequence is bumped with `Release` after it).
    pub(crate) fn credit_changed(&self, peer: u32) {
        self.credit_seq[peer as usize % CREDIT_BUCKETS].fetch_add(1, Ordering::Release);
        for s in 0..self.topo.shards() {
            self.wake_poster(s);
        }
    }

    /// The credit sequence of `peer`'s bucket, and the bucket.
    pub(crate) fn credit_seq_of(&self, peer: u32) -> (usize, u64) {
        let b = peer as usize % CREDIT_BUCKETS;
        (b, self.credit_seq(b))
    }

    /// The credit sequence of bucket `b`.
    pub(crate) fn credit_seq(&self, b: usize) -> u64 {
        self.credit_seq[b].load(Ordering::Acquire)
    }

    /// The RC QPs of one endpoint on device `dev`: `n` QPs of `max_wr`
    /// send-queue entries, spread over the device's shards.
    pub(crate) fn new_qps(
        &self,
        dev: usize,
        n: u16,
        max_wr: u32,
    ) -> Result<(Vec<QueuePair>, Vec<u16>), EngineError> {
        let caps = QpCaps {
            max_send_wr: max_wr,
            max_recv_wr: 1,
            ..QpCaps::default()
        };
        let mut qps = Vec::with_capacity(usize::from(n));
        let mut shards = Vec::with_capacity(usize::from(n));
        for _ in 0..n {
            let s = self
                .topo
                .shard(dev, self.next_shard.fetch_add(1, Ordering::Relaxed));
            let cq = &self.cqs[s];
            qps.push(QueuePair::create_rc(&self.devs[dev].pd, cq, cq, caps)?);
            shards.push(s as u16);
        }
        Ok((qps, shards))
    }

    /// The shard of device `dev` whose CQ is `id`, if it is one of ours.
    pub(crate) fn cq_shard(&self, dev: usize, id: CqId) -> Option<usize> {
        self.topo.shards_of(dev).find(|&s| self.cqs[s].id() == id)
    }

    /// Signaled work requests posted and not yet polled, over every CQ.
    pub(crate) fn cq_outstanding(&self) -> u64 {
        self.cqs.iter().map(|c| c.outstanding()).sum()
    }

    /// Slices waiting in the submission queues.
    pub(crate) fn queued(&self) -> usize {
        self.queues.iter().map(|q| q.len()).sum()
    }
}
