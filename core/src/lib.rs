//! # railyard-core
//!
//! The hot path of an RDMA transfer engine, without the verbs.
//!
//! `railyard-core` owns every posted work request between `ibv_post_send` and
//! the completion that retires it. It is `#![no_std]`: with the `alloc`
//! feature, pools and tables are allocated once at construction; after that
//! the hot path never allocates, never locks and never calls the OS. Time is
//! passed in as `now_ns`, so every policy is deterministic and testable.
//!
//! | module | RFC | concept |
//! |---|---|---|
//! | [`token`] | 3136 | wr_id names one posted *attempt* from a fixed pool |
//! | [`slice`](mod@slice) | 3136 | slice attempt identity; exactly one terminal state |
//! | [`endpoint`] | 3136 | endpoint generations and the one retire API |
//! | `completion` | all four | **the one composed hot path**: token + slice + endpoint + CC permit + rail charge + credit, admitted in one fixed order and released once; the one WC → slice mapping applied (needs `alloc`) |
//! | [`cc`] | 4162 | byte-window AIMD admission and path health |
//! | [`classify`] | 4162 | WC status / async event / signal classification |
//! | [`evidence`] | 4162 | per-task anomaly evidence |
//! | [`credit`] | 2849 | receiver-advertised credits |
//! | [`wire`] | 2849 | the wire codecs: credit messages ([`wire::credit`]) and handshake descriptors (`wire::handshake`, needs `alloc`) |
//! | [`rail`] | 4534 | inverse-score NIC selection, per-peer ledger |
//! | `lookup` | 3136 | a verbs object's address or number → the integrator's slot, read lock-free on the hot path (needs `alloc`) |
//! | [`pin`] | — | use count + close bit: memory deregistration vs in-flight posts |
//! | [`time`] | — | nanosecond time passed in by the caller |
//!
//! Core contains no verbs types: WC statuses and event codes are plain
//! numbers with ibverbs' values.
#![no_std]
#![deny(missing_docs)]
// `unsafe` lives in the token pool and the endpoint table's epoch-managed
// resource cell only; each of those modules opts back in.
#![deny(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "alloc")]
extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

pub(crate) mod sync;

pub mod cc;
pub mod classify;
#[cfg(feature = "alloc")]
pub mod completion;
pub mod credit;
pub mod endpoint;
pub mod evidence;
#[cfg(feature = "alloc")]
pub mod lookup;
pub mod pin;
pub mod rail;
pub mod slice;
pub mod time;
pub mod token;
pub mod wire;
