//! The completion-ownership protocol (RFC 3136), composed from
//! [`token`](crate::token), [`slice`](crate::slice) and
//! [`endpoint`](crate::endpoint).
//!
//! [`Owner`] is the glue every engine needs and the RFC's four completion
//! rules in one place, so the verbs shim, the simulator and the tests all run
//! the same code:
//!
//! 1. release the resources the posted attempt owned (token, endpoint
//!    outstanding count, QP depth) — always, exactly once;
//! 2. check whether the token's attempt is still the slice's current one;
//! 3. mutate slice status, retry count or retry only if it is;
//! 4. otherwise treat the completion as a resource-release event only.
//!
//! The returned [`TokenRecord`] names the other resources the attempt held
//! (CC permit, rail charge, credit), for the caller to release from the
//! record alone.
//!
//! ```
//! use railyard_core::completion::{Owner, PostRequest, SliceEffect, WcOutcome};
//! use railyard_core::endpoint::{EndpointConfig, EndpointTable};
//! use railyard_core::slice::SliceTable;
//! use railyard_core::token::TokenPool;
//!
//! let tokens: TokenPool = TokenPool::new(8).unwrap();
//! let slices = SliceTable::new(8).unwrap();
//! let eps = EndpointTable::new(EndpointConfig::default()).unwrap();
//! let owner = Owner::new(&tokens, &slices, &eps);
//!
//! let ep = eps.open(()).unwrap();
//! let s = slices.open(0).unwrap();
//! let wr = owner.post(PostRequest::new(s, ep, 0, 4096, 0)).unwrap();
//! let done = owner.complete(wr, WcOutcome::Success).unwrap();
//! assert_eq!(done.slice, SliceEffect::Settled(railyard_core::slice::SliceState::Succeeded));
//! assert_eq!(tokens.in_use(), 0);
//! ```

use core::fmt;

use crate::endpoint::{EndpointError, EndpointHandle, EndpointTable};
use crate::slice::{Outcome, Retry, SliceError, SliceRef, SliceState, SliceTable};
use crate::token::{TokenError, TokenPool, TokenRecord, WrId};

/// What to post: the current attempt of a slice on one QP of an endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PostRequest {
    /// The record to store in the token; `slice`, `endpoint`, `qp`, `bytes`
    /// and `post_ns` must be set, the rest as the caller's layers require.
    pub record: TokenRecord,
}

impl PostRequest {
    /// A request with the ownership fields set and nothing else held.
    pub fn new(slice: SliceRef, endpoint: EndpointHandle, qp: u16, bytes: u32, now: u64) -> Self {
        Self {
            record: TokenRecord {
                slice,
                endpoint,
                qp,
                bytes,
                post_ns: now,
                ..TokenRecord::default()
            },
        }
    }
}

/// How the work completion ended, reduced to what ownership needs. The
/// classifier (`classify`) decides which WC statuses are retryable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WcOutcome {
    /// `IBV_WC_SUCCESS`.
    Success,
    /// An error after which the slice may be retried (within its budget).
    Retryable,
    /// An error that fails the slice.
    Fatal,
}

/// What a completion did to its slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SliceEffect {
    /// The current attempt settled the slice in this terminal state.
    Settled(SliceState),
    /// The current attempt failed and a new attempt was started: re-enqueue
    /// the slice with this reference.
    Retry(SliceRef),
    /// The completion belonged to a stale attempt (or the slice was already
    /// terminal): it released its own resources and changed nothing else.
    StaleReleaseOnly,
}

/// The result of processing one completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completed {
    /// The record the token owned: release its CC permit, rail charge and
    /// credit (per `holds`) exactly once.
    pub record: TokenRecord,
    /// What happened to the slice.
    pub slice: SliceEffect,
    /// The endpoint release: `Ok(true)` when this completion drained a
    /// retired endpoint (run reclaim), `Ok(false)` otherwise, and
    /// `Err(StaleGeneration)` when the endpoint had been abandoned and
    /// reclaimed, so nothing else was touched. `Ok(false)` too when the
    /// record held no endpoint admission.
    pub endpoint: Result<bool, EndpointError>,
}

/// Why a post was refused. Nothing is held after a refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PostError {
    /// The slice attempt is not current (or the slice is terminal).
    Slice(SliceError),
    /// The endpoint refused admission (retired, stale, QP full, ...).
    Endpoint(EndpointError),
    /// No token available: backpressure.
    Token(TokenError),
}

impl fmt::Display for PostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PostError::Slice(e) => write!(f, "post refused by slice: {e}"),
            PostError::Endpoint(e) => write!(f, "post refused by endpoint: {e}"),
            PostError::Token(e) => write!(f, "post refused by token pool: {e}"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for PostError {}

/// Borrowed handles on the three ownership tables. Cheap to copy; share one
/// per worker.
pub struct Owner<'a, R: Send + Sync + 'static = ()> {
    tokens: &'a TokenPool,
    slices: &'a SliceTable,
    endpoints: &'a EndpointTable<R>,
    max_retries: u16,
}

impl<R: Send + Sync + 'static> Clone for Owner<'_, R> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<R: Send + Sync + 'static> Copy for Owner<'_, R> {}

impl<R: Send + Sync + 'static> fmt::Debug for Owner<'_, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Owner")
            .field("max_retries", &self.max_retries)
            .finish()
    }
}

/// Default retry budget per slice.
pub const DEFAULT_MAX_RETRIES: u16 = 8;

impl<'a, R: Send + Sync + 'static> Owner<'a, R> {
    /// Composes the three tables, with [`DEFAULT_MAX_RETRIES`].
    pub fn new(
        tokens: &'a TokenPool,
        slices: &'a SliceTable,
        endpoints: &'a EndpointTable<R>,
    ) -> Self {
        Self {
            tokens,
            slices,
            endpoints,
            max_retries: DEFAULT_MAX_RETRIES,
        }
    }

    /// Sets the retry budget per slice.
    pub fn with_max_retries(mut self, max_retries: u16) -> Self {
        self.max_retries = max_retries;
        self
    }

    /// Admits and tokenizes one post: the slice attempt must be current, the
    /// endpoint must admit it (generation, phase, QP depth), and a token must
    /// be free. On any refusal, whatever was taken is given back. Returns
    /// the `wr_id` to post with.
    #[inline]
    pub fn post(&self, req: PostRequest) -> Result<WrId, PostError> {
        let rec = req.record;
        if !self.slices.is_current(rec.slice) {
            return Err(PostError::Slice(
                match self.slices.status(rec.slice.index) {
                    Err(e) => e,
                    Ok(s) if s.attempt != rec.slice.attempt => SliceError::StaleAttempt,
                    Ok(_) => SliceError::AlreadyTerminal,
                },
            ));
        }
        self.endpoints
            .admit_post(rec.endpoint, rec.qp)
            .map_err(PostError::Endpoint)?;
        let mut rec = rec;
        rec.holds |= TokenRecord::HOLDS_OUTSTANDING;
        match self.tokens.claim(rec) {
            Ok(wr) => Ok(wr),
            Err(e) => {
                // Give the admission back; it cannot fail for a post we just
                // admitted unless the endpoint was abandoned meanwhile.
                let _ = self.endpoints.release_post(rec.endpoint, rec.qp);
                Err(PostError::Token(e))
            }
        }
    }

    /// Releases work that was tokenized but never reached the NIC (the
    /// `bad_wr` tail of a partially posted chain): the token and the
    /// endpoint admission are released; the slice is untouched and its
    /// attempt stays current, to be re-queued. Returns the record so the
    /// caller returns only the unposted CC/rail/credit reservations.
    pub fn unposted(&self, wr_id: WrId) -> Result<TokenRecord, TokenError> {
        let rec = self.tokens.complete(wr_id)?;
        // We admitted it moments ago, so only an abandoned endpoint can
        // refuse, and then there is nothing left to release.
        let _ = self.release_endpoint(&rec);
        Ok(rec)
    }

    /// Processes one polled completion: releases what the attempt owned,
    /// then mutates the slice only if the attempt is current.
    ///
    /// A duplicate, stale, forged or out-of-range `wr_id` gets the token
    /// pool's typed error and changes nothing.
    #[inline]
    pub fn complete(&self, wr_id: WrId, outcome: WcOutcome) -> Result<Completed, TokenError> {
        let record = self.tokens.complete(wr_id)?;
        let endpoint = self.release_endpoint(&record);
        let r = record.slice;
        let settled = match outcome {
            WcOutcome::Success => self
                .slices
                .settle(r, Outcome::Success)
                .map(SliceEffect::Settled),
            WcOutcome::Fatal => self
                .slices
                .settle(r, Outcome::Failure)
                .map(SliceEffect::Settled),
            WcOutcome::Retryable => self.slices.retry(r, self.max_retries).map(|x| match x {
                Retry::NewAttempt(n) => SliceEffect::Retry(n),
                Retry::Exhausted => SliceEffect::Settled(SliceState::Failed),
            }),
        };
        Ok(Completed {
            record,
            slice: settled.unwrap_or(SliceEffect::StaleReleaseOnly),
            endpoint,
        })
    }

    fn release_endpoint(&self, rec: &TokenRecord) -> Result<bool, EndpointError> {
        if rec.holds & TokenRecord::HOLDS_OUTSTANDING == 0 {
            return Ok(false);
        }
        self.endpoints.release_post(rec.endpoint, rec.qp)
    }
}
