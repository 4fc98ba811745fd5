//! What railyard puts on the network: two codecs on one little-endian cursor.
//!
//! | module | carries | layout |
//! |---|---|---|
//! | [`credit`] | the versioned credit control messages (RFC 2849) | `docs/wire.md`; fixed buffers, never allocates |
//! | [`handshake`] | the endpoint descriptors two engines exchange before their QPs connect (needs `alloc`) | `docs/wire.md`, and the module docs |
//!
//! Both decoders take bytes from a peer: they never panic, bound every
//! count before they read or allocate for it, and are canonical (anything
//! accepted re-encodes byte for byte). Each has a fuzz target
//! (`wire_decode`, `handshake_decode`). They share one bounds-checked
//! reader and writer (`cursor`), and keep their own error types
//! ([`credit::DecodeError`], [`handshake::DecodeError`]): a credit frame
//! and a handshake frame are never confused.

mod cursor;

pub mod credit;
#[cfg(feature = "alloc")]
pub mod handshake;
