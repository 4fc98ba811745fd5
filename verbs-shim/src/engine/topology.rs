//! [`Topology`]: where the engine's shards and workers sit, and which
//! worker posts or polls which shard (the one place for that index
//! arithmetic; `Shared` holds one).

use super::config::WorkerModel;
use std::ops::Range;

/// Where the engine's shards and workers sit, and which worker posts or
/// polls which shard: the one place for that index arithmetic.
///
/// Device `d` owns shards `d * shards_per_dev ..` (a shard is one CQ and
/// one submission queue) and workers `d * workers_per_dev ..`
/// (`MC_WORKERS_PER_CTX` per device). In the shared model worker `w` posts
/// and polls shard `w`; with a dedicated poller the first worker of
/// device `d`'s block polls every shard of `d` and each of the others
/// posts one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Topology {
    model: WorkerModel,
    devices: usize,
    workers_per_dev: usize,
    /// Shards (CQs, submission queues) per device.
    pub(crate) shards_per_dev: usize,
}

impl Topology {
    /// `devices` devices with `workers_per_dev` workers each.
    pub(crate) fn new(model: WorkerModel, workers_per_dev: u16, devices: usize) -> Self {
        let w = usize::from(workers_per_dev);
        let shards_per_dev = match model {
            WorkerModel::Shared => w,
            WorkerModel::DedicatedPoller => w.saturating_sub(1),
        };
        Self {
            model,
            devices,
            workers_per_dev: w,
            shards_per_dev,
        }
    }

    /// Shards over every device.
    pub(crate) fn shards(&self) -> usize {
        self.devices * self.shards_per_dev
    }

    /// Workers over every device.
    pub(crate) fn workers(&self) -> usize {
        self.devices * self.workers_per_dev
    }

    /// The device of `shard`.
    pub(crate) fn device_of(&self, shard: usize) -> usize {
        shard / self.shards_per_dev
    }

    /// The shards of device `dev`.
    pub(crate) fn shards_of(&self, dev: usize) -> Range<usize> {
        dev * self.shards_per_dev..(dev + 1) * self.shards_per_dev
    }

    /// Device `dev`'s shard number `k` (modulo its shard count).
    pub(crate) fn shard(&self, dev: usize, k: usize) -> usize {
        dev * self.shards_per_dev + k % self.shards_per_dev
    }

    /// The shard worker `w` posts, if it posts.
    pub(crate) fn post_shard(&self, w: usize) -> Option<usize> {
        match self.model {
            WorkerModel::Shared => Some(w),
            WorkerModel::DedicatedPoller => {
                let (d, l) = (w / self.workers_per_dev, w % self.workers_per_dev);
                (l > 0).then(|| d * self.shards_per_dev + l - 1)
            }
        }
    }

    /// The shards whose CQs worker `w` polls (none for a dedicated poster).
    pub(crate) fn poll_shards(&self, w: usize) -> Range<usize> {
        match self.model {
            WorkerModel::Shared => w..w + 1,
            WorkerModel::DedicatedPoller if w % self.workers_per_dev == 0 => {
                self.shards_of(w / self.workers_per_dev)
            }
            WorkerModel::DedicatedPoller => 0..0,
        }
    }

    /// The worker that posts `shard`.
    pub(crate) fn poster_of(&self, shard: usize) -> usize {
        match self.model {
            WorkerModel::Shared => shard,
            WorkerModel::DedicatedPoller => {
                self.device_of(shard) * self.workers_per_dev + 1 + shard % self.shards_per_dev
            }
        }
    }

    /// The worker that polls `shard`'s CQ.
    pub(crate) fn poller_of(&self, shard: usize) -> usize {
        match self.model {
            WorkerModel::Shared => shard,
            WorkerModel::DedicatedPoller => self.device_of(shard) * self.workers_per_dev,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topology_gives_every_shard_one_poster_and_one_poller() {
        for model in [WorkerModel::Shared, WorkerModel::DedicatedPoller] {
            let t = Topology::new(model, 3, 2);
            let mut posted = vec![0; t.shards()];
            let mut polled = vec![0; t.shards()];
            for w in 0..t.workers() {
                if let Some(s) = t.post_shard(w) {
                    posted[s] += 1;
                    assert_eq!(t.poster_of(s), w, "{model:?}: shard {s}");
                }
                for s in t.poll_shards(w) {
                    polled[s] += 1;
                    assert_eq!(t.poller_of(s), w, "{model:?}: shard {s}");
                    assert_eq!(
                        t.device_of(s),
                        w / 3,
                        "{model:?}: a poller stays on its device"
                    );
                }
            }
            assert!(posted.iter().all(|&n| n == 1), "{model:?}: {posted:?}");
            assert!(polled.iter().all(|&n| n == 1), "{model:?}: {polled:?}");
            for d in 0..2 {
                for k in 0..7 {
                    assert!(t.shards_of(d).contains(&t.shard(d, k)));
                }
            }
        }
        assert_eq!(
            Topology::new(WorkerModel::DedicatedPoller, 3, 2).shards(),
            4
        );
        assert_eq!(Topology::new(WorkerModel::Shared, 3, 2).shards(), 6);
    }
}
