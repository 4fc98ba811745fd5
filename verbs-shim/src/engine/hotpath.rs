//! The engine's composed hot path ([`EngineHotPath`]): core's
//! `railyard_core::completion::HotPath` over the engine's tables and layers
//! (receiver credit, the rail selector, the CC gate), plus the one hold of
//! a posted work request that core does not know: the pin on the memory
//! region it is posted from (`memory.rs`). The pin is taken right before
//! the post and given back wherever the token ends (a refused post, the
//! unposted tail of a `bad_wr` chain, a completion of any status), in the
//! same call that releases the token's other holds: nothing outside this
//! file pins or unpins a posted request's memory.

use super::cc_gate::CcGate;
use super::fabric::EpResource;
use super::memory::MemTable;
use railyard_core::completion::{
    Completed, HotPath, Layers, PostRequest, Posted, Refusal, TokenSource,
};
use railyard_core::credit::SenderLedger;
use railyard_core::evidence::Observation;
use railyard_core::rail::Selector;
use railyard_core::token::{TokenCache, TokenError, TokenRecord, WrId};

/// Free tokens a worker's cache holds at most ([`EngineHotPath::worker_tokens`]).
pub(crate) const TOKEN_CACHE: usize = 32;

/// A worker thread's token source for the hot path: its own cache over the
/// engine's pool, or `None` (the pool directly) when the pool is too small
/// to spare [`TOKEN_CACHE`] free tokens per worker.
pub(crate) type WorkerTokens<'a> = Option<TokenCache<'a, TokenRecord, TOKEN_CACHE>>;

/// Core's composed hot path over the engine's tables and layers.
pub(crate) type CoreHotPath<'a> =
    HotPath<'a, EpResource, Layers<Option<&'a SenderLedger>, &'a Selector, &'a CcGate>>;

/// What completed a token: its own CQE, or a later request's CQE on the
/// same QP (with that CQE's status) that covers it.
#[derive(Clone, Copy)]
pub(crate) enum Cqe {
    Own { status: u32, vendor_err: u32 },
    Covered(u32),
}

/// The engine's composed hot path (see the module docs). Cheap to copy;
/// each worker holds one.
#[derive(Clone, Copy)]
pub(crate) struct EngineHotPath<'a> {
    core: CoreHotPath<'a>,
    mem: &'a MemTable,
}

impl<'a> EngineHotPath<'a> {
    /// `core` with the memory pins of `mem`.
    #[inline(always)]
    pub(crate) fn new(core: CoreHotPath<'a>, mem: &'a MemTable) -> Self {
        Self { core, mem }
    }

    /// A worker thread's token cache for the `*_via` calls: posts claim
    /// from it, completions (whichever thread polls) return to it, and it
    /// moves tokens to and from the pool in batches. `None` (the pool
    /// directly) unless the pool can spare 2 × [`TOKEN_CACHE`] tokens for
    /// each of the `workers`, so caches never hide more than half of it. A
    /// claim that starves while other caches hold free tokens is refused
    /// `Exhausted` (the slice parks on the release stamp) and asks every
    /// cache for its tokens: a busy worker answers in its next claim or
    /// completion, an idle one in its idle round
    /// ([`TokenCache::idle`](railyard_core::token::TokenCache::idle)),
    /// which moves the stamp; a sleeping worker's cache is empty. Dropped
    /// (and so flushed) when the worker exits.
    pub(crate) fn worker_tokens(&self, workers: usize) -> WorkerTokens<'a> {
        let spare = 2 * TOKEN_CACHE * workers;
        (self.core.tokens().capacity() >= spare).then(|| self.core.token_cache())
    }

    /// Pins memory region `mem` for one post, before its token is claimed.
    /// False if the region's slot is closed (a stale queued reference whose
    /// region was deregistered): nothing is held then.
    #[inline(always)]
    pub(crate) fn pin(&self, mem: u32) -> bool {
        self.mem.pin_post(mem as usize)
    }

    /// `HotPath::post_via` for a request whose region `mem` the caller
    /// [`pin`](Self::pin)ned: the token holds the pin until it ends; a
    /// refusal gives it back with everything else.
    #[inline(always)]
    pub(crate) fn post_via<T: TokenSource>(
        &self,
        tokens: &mut T,
        req: PostRequest<'_>,
        mem: u32,
    ) -> Result<Posted, Refusal> {
        match self.core.post_via(tokens, req) {
            Ok(p) => {
                self.mem.token_holds(p.wr_id, mem);
                Ok(p)
            }
            Err(e) => {
                self.mem.unpin(mem as usize, 1);
                Err(e)
            }
        }
    }

    /// `HotPath::unposted_via`: releases a token of a chain's unposted tail,
    /// its memory pin with its other holds. False for a token that was not
    /// live (nothing changed).
    #[inline(always)]
    pub(crate) fn unposted_via<T: TokenSource>(
        &self,
        tokens: &mut T,
        wr_id: WrId,
        now: u64,
    ) -> bool {
        // Read while the token is live: afterwards its slot may belong to
        // another post.
        let pinned = self.mem.token_region(wr_id);
        let live = self.core.unposted_via(tokens, wr_id, now).is_ok();
        if let (true, Some(m)) = (live, pinned) {
            self.mem.unpin(m, 1);
        }
        live
    }

    /// `HotPath::complete_via` (its own CQE) or `complete_covered_via` (a
    /// later CQE that covers it): the token's every hold released, its
    /// memory pin included, the WC classified once and the slice settled
    /// or retried in core. A duplicate or stale `wr_id` is refused and
    /// changes nothing.
    #[inline(always)]
    pub(crate) fn complete_via<T: TokenSource>(
        &self,
        tokens: &mut T,
        wr_id: WrId,
        cqe: Cqe,
        now: u64,
    ) -> Result<Completed, TokenError> {
        // The region this token pinned, read while the token is still live
        // (after `complete` its slot may belong to another post).
        let pinned = self.mem.token_region(wr_id);
        let done = match cqe {
            Cqe::Own { status, vendor_err } => self
                .core
                .complete_via(tokens, wr_id, status, vendor_err, now)?,
            Cqe::Covered(status) => self.core.complete_covered_via(tokens, wr_id, status, now)?,
        };
        if let Some(m) = pinned {
            self.mem.unpin(m, 1);
        }
        Ok(done)
    }

    /// `HotPath::refusal_observation`: the evidence of a refusal, if it is a
    /// task anomaly.
    #[inline]
    pub(crate) fn refusal_observation(&self, refusal: &Refusal, now: u64) -> Option<Observation> {
        self.core.refusal_observation(refusal, now)
    }

    /// `HotPath::completion_observation`: the evidence of an error
    /// completion (`None` for a success).
    #[inline]
    pub(crate) fn completion_observation(&self, done: &Completed, now: u64) -> Option<Observation> {
        self.core.completion_observation(done, now)
    }
}
