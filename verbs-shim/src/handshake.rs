//! Out-of-band TCP handshake: each side sends its descriptor and receives
//! the peer's, framed as described in [`crate::wire`]: a [`PeerDescriptor`]
//! (one NIC entry per device, what the engine exchanges) or, for a
//! single-NIC peer, an [`EndpointDescriptor`] (a one-NIC frame).
//!
//! The initiator (the side that connects) sends first and then reads; the
//! target (the side that accepts) reads first and then sends, so the exchange
//! never depends on socket buffer sizes. Every read and write has a deadline.
//!
//! Any error (malformed, oversized or unknown-version input, a timeout, the
//! peer closing early) consumes the [`Handshake`] and shuts the socket down,
//! so a misbehaving peer is dropped rather than left half-spoken-to.
//!
//! A listener is served by [`serve`]: each connection gets its own thread
//! and one deadline for all of its reads and writes (a peer that trickles
//! bytes cannot stretch it), at most [`ListenLimits::max_concurrent`] run
//! at once and an excess connection is refused at once ([`Refusal::Busy`]),
//! so a slow or hostile peer holds neither the listener nor more than one
//! handshake slot, and only until its deadline. The target receives and
//! decodes the initiator's descriptor *before* anything is built for it
//! ([`Handshake::receive`], then [`Handshake::reply`]). The codec is
//! `railyard_core::wire::handshake` (fuzzed there).
//!
//! After both QPs are in RTS, [`Handshake::barrier`] lets the two sides agree
//! that neither will post before the other can receive.
//!
//! ```no_run
//! use railyard_verbs::handshake::Handshake;
//! # use railyard_verbs::wire::{EndpointDescriptor, QpEndpoint};
//! # fn local() -> EndpointDescriptor { EndpointDescriptor { gid: [0; 16], lid: 0,
//! #     qps: vec![QpEndpoint { qpn: 1, psn: 2 }], segments: vec![] } }
//! use std::time::Duration;
//! let hs = Handshake::connect("10.0.0.2:18515", Duration::from_secs(5))?;
//! let (peer, mut hs) = hs.exchange_as_initiator(&local())?;
//! // ... move QPs to RTR/RTS with `peer` ...
//! hs.barrier()?;
//! # Ok::<(), railyard_verbs::handshake::HandshakeError>(())
//! ```

use crate::wire::{self, DecodeError, EncodeError, EndpointDescriptor, PeerDescriptor};

/// A descriptor the handshake can carry: [`EndpointDescriptor`] (one NIC)
/// or [`PeerDescriptor`] (one entry per NIC).
pub trait Descriptor: Sized {
    /// The length-prefixed frame.
    fn to_frame(&self) -> Result<Vec<u8>, EncodeError>;
    /// Decodes a payload (after the length prefix).
    fn from_payload(p: &[u8]) -> Result<Self, DecodeError>;
}

impl Descriptor for EndpointDescriptor {
    fn to_frame(&self) -> Result<Vec<u8>, EncodeError> {
        self.encode()
    }
    fn from_payload(p: &[u8]) -> Result<Self, DecodeError> {
        Self::decode_payload(p)
    }
}

impl Descriptor for PeerDescriptor {
    fn to_frame(&self) -> Result<Vec<u8>, EncodeError> {
        self.encode()
    }
    fn from_payload(p: &[u8]) -> Result<Self, DecodeError> {
        Self::decode_payload(p)
    }
}
use std::fmt;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Byte both sides send and expect in [`Handshake::barrier`].
pub const BARRIER_BYTE: u8 = 0xB1;

/// Why a handshake failed. The connection has been dropped in every case.
#[derive(Debug)]
pub enum HandshakeError {
    /// The peer closed the connection before the exchange completed.
    ConnectionClosed {
        /// What we were doing.
        during: &'static str,
    },
    /// A read or write hit its deadline.
    Timeout {
        /// What we were doing.
        during: &'static str,
    },
    /// Any other socket error.
    Io {
        /// What we were doing.
        during: &'static str,
        /// The OS error.
        source: io::Error,
    },
    /// The peer sent bytes that are not a valid descriptor (oversized,
    /// truncated, unknown version, bad magic, out-of-range fields).
    Decode(DecodeError),
    /// Our own descriptor is not encodable.
    Encode(EncodeError),
    /// The peer sent something other than the barrier byte.
    BarrierMismatch(u8),
    /// The peer's descriptor repeats the QPs of a connection already made
    /// (a replayed descriptor; the engine's listener refuses it).
    Replayed,
}

impl fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ConnectionClosed { during } => {
                write!(f, "handshake peer closed the connection while {during}")
            }
            Self::Timeout { during } => write!(f, "handshake timed out while {during}"),
            Self::Io { during, source } => {
                write!(f, "handshake I/O error while {during}: {source}")
            }
            Self::Decode(e) => write!(f, "handshake: peer sent {e}"),
            Self::Encode(e) => write!(f, "handshake: cannot send local descriptor: {e}"),
            Self::Replayed => write!(
                f,
                "handshake: the peer's descriptor repeats an earlier connection's QPs (a replay)"
            ),
            Self::BarrierMismatch(b) => {
                write!(
                    f,
                    "handshake barrier: expected {BARRIER_BYTE:#04x}, got {b:#04x}"
                )
            }
        }
    }
}

impl std::error::Error for HandshakeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io { source, .. } => Some(source),
            Self::Decode(e) => Some(e),
            Self::Encode(e) => Some(e),
            _ => None,
        }
    }
}

/// The stages of fetching the peer's descriptor: up to the barrier nothing
/// either side built is kept (the target records a connection only after
/// it), so a transport failure in one of them can be retried on a new
/// connection ([`HandshakeError::is_descriptor_fetch_transport`]).
const CONNECTING: &str = "connecting";
const CONFIGURING: &str = "configuring the socket";
const SENDING_DESCRIPTOR: &str = "sending the descriptor";
const READING_LENGTH: &str = "reading the descriptor length";
const READING_DESCRIPTOR: &str = "reading the descriptor";

impl HandshakeError {
    /// Whether this is a transport failure (closed, timed out, a socket
    /// error) while connecting or exchanging descriptors: the read-only
    /// descriptor fetch RFC 4162 retries once on a new connection. A
    /// malformed or replayed descriptor, an address that does not resolve
    /// and anything from the barrier on are not.
    ///
    /// ```
    /// use railyard_verbs::handshake::HandshakeError;
    ///
    /// assert!(HandshakeError::ConnectionClosed { during: "reading the descriptor" }
    ///     .is_descriptor_fetch_transport());
    /// assert!(!HandshakeError::ConnectionClosed { during: "waiting for the barrier" }
    ///     .is_descriptor_fetch_transport());
    /// ```
    pub fn is_descriptor_fetch_transport(&self) -> bool {
        let during = match self {
            Self::ConnectionClosed { during } | Self::Timeout { during } => *during,
            Self::Io { during, .. } => *during,
            _ => return false,
        };
        [
            CONNECTING,
            CONFIGURING,
            SENDING_DESCRIPTOR,
            READING_LENGTH,
            READING_DESCRIPTOR,
        ]
        .contains(&during)
    }
}

fn io_err(during: &'static str, e: io::Error) -> HandshakeError {
    match e.kind() {
        io::ErrorKind::UnexpectedEof
        | io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::BrokenPipe => HandshakeError::ConnectionClosed { during },
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => HandshakeError::Timeout { during },
        _ => HandshakeError::Io { during, source: e },
    }
}

/// One side of an out-of-band handshake connection.
#[derive(Debug)]
pub struct Handshake {
    stream: TcpStream,
    /// Bound of every single read and write.
    timeout: Duration,
    /// Bound of everything together ([`Handshake::with_deadline`]): a peer
    /// trickling one byte per `timeout` cannot hold the connection longer.
    deadline: Option<Instant>,
}

impl Handshake {
    /// Connects to a listening target, with `timeout` for the connect and for
    /// every later read and write.
    pub fn connect(addr: impl ToSocketAddrs, timeout: Duration) -> Result<Self, HandshakeError> {
        let mut last = None;
        let addrs = addr
            .to_socket_addrs()
            .map_err(|e| io_err("resolving the peer", e))?;
        for a in addrs {
            match TcpStream::connect_timeout(&a, timeout) {
                Ok(s) => return Self::from_stream(s, timeout),
                Err(e) => last = Some(e),
            }
        }
        Err(io_err(
            CONNECTING,
            last.unwrap_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no address")),
        ))
    }

    /// Accepts one initiator on `listener`. The accept itself blocks; later
    /// reads and writes use `timeout`. (An engine serves its listener with
    /// [`serve`], which bounds concurrent handshakes and their total time.)
    pub fn accept(listener: &TcpListener, timeout: Duration) -> Result<Self, HandshakeError> {
        let (s, _) = listener.accept().map_err(|e| io_err("accepting", e))?;
        Self::from_stream(s, timeout)
    }

    /// Wraps an already-connected stream.
    pub fn from_stream(stream: TcpStream, timeout: Duration) -> Result<Self, HandshakeError> {
        let setup = |s: &TcpStream| -> io::Result<()> {
            s.set_nonblocking(false)?;
            s.set_nodelay(true)?;
            s.set_read_timeout(Some(timeout))?;
            s.set_write_timeout(Some(timeout))
        };
        match setup(&stream) {
            Ok(()) => Ok(Self {
                stream,
                timeout,
                deadline: None,
            }),
            Err(e) => {
                let _ = stream.shutdown(Shutdown::Both);
                Err(io_err(CONFIGURING, e))
            }
        }
    }

    /// Bounds the rest of the exchange, all reads and writes together, by
    /// `at`: past it every read or write is [`HandshakeError::Timeout`].
    pub fn with_deadline(mut self, at: Instant) -> Self {
        self.deadline = Some(at);
        self
    }

    /// Sends `local`, then receives the target's descriptor.
    pub fn exchange_as_initiator<D: Descriptor>(
        mut self,
        local: &D,
    ) -> Result<(D, Self), HandshakeError> {
        let r = self.send(local).and_then(|()| self.recv());
        self.finish(r)
    }

    /// Receives the initiator's descriptor, then sends `local`.
    pub fn exchange_as_target<D: Descriptor>(self, local: &D) -> Result<(D, Self), HandshakeError> {
        let (peer, hs) = self.receive()?;
        Ok((peer, hs.reply(local)?))
    }

    /// The target's first half: receives the initiator's descriptor (so
    /// nothing is built for a peer whose bytes are not one).
    pub fn receive<D: Descriptor>(mut self) -> Result<(D, Self), HandshakeError> {
        let r = self.recv();
        self.finish(r)
    }

    /// The target's second half: sends `local` in answer.
    pub fn reply<D: Descriptor>(mut self, local: &D) -> Result<Self, HandshakeError> {
        let r = self.send(local);
        self.finish(r).map(|((), hs)| hs)
    }

    /// Both sides send one byte and wait for the other's: after it returns,
    /// the peer has reached the same point (e.g. its QPs are in RTS).
    pub fn barrier(&mut self) -> Result<(), HandshakeError> {
        let r = self.barrier_inner();
        if r.is_err() {
            let _ = self.stream.shutdown(Shutdown::Both);
        }
        r
    }

    fn barrier_inner(&mut self) -> Result<(), HandshakeError> {
        self.write_all(&[BARRIER_BYTE], "sending the barrier")?;
        let mut b = [0u8; 1];
        self.read_exact(&mut b, "waiting for the barrier")?;
        if b[0] != BARRIER_BYTE {
            return Err(HandshakeError::BarrierMismatch(b[0]));
        }
        Ok(())
    }

    /// The underlying stream (e.g. to learn the peer address).
    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// Ends the handshake and keeps its connection (the engine's receiver
    /// credit control channel); the stream keeps the handshake's timeouts
    /// until the caller changes them.
    pub fn into_stream(self) -> TcpStream {
        self.stream
    }

    fn finish<D>(self, r: Result<D, HandshakeError>) -> Result<(D, Self), HandshakeError> {
        match r {
            Ok(d) => Ok((d, self)),
            Err(e) => {
                let _ = self.stream.shutdown(Shutdown::Both);
                Err(e)
            }
        }
    }

    /// The bound of the next read or write: the per-operation timeout, cut
    /// to what is left before the deadline.
    fn budget(&self, during: &'static str) -> Result<Duration, HandshakeError> {
        let Some(at) = self.deadline else {
            return Ok(self.timeout);
        };
        match at.checked_duration_since(Instant::now()) {
            Some(left) if !left.is_zero() => Ok(left.min(self.timeout)),
            _ => Err(HandshakeError::Timeout { during }),
        }
    }

    fn read_exact(
        &mut self,
        mut buf: &mut [u8],
        during: &'static str,
    ) -> Result<(), HandshakeError> {
        while !buf.is_empty() {
            let t = self.budget(during)?;
            self.stream
                .set_read_timeout(Some(t))
                .map_err(|e| io_err(during, e))?;
            match self.stream.read(buf) {
                Ok(0) => return Err(HandshakeError::ConnectionClosed { during }),
                Ok(n) => buf = &mut buf[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_err(during, e)),
            }
        }
        Ok(())
    }

    fn write_all(&mut self, mut buf: &[u8], during: &'static str) -> Result<(), HandshakeError> {
        while !buf.is_empty() {
            let t = self.budget(during)?;
            self.stream
                .set_write_timeout(Some(t))
                .map_err(|e| io_err(during, e))?;
            match self.stream.write(buf) {
                Ok(0) => return Err(HandshakeError::ConnectionClosed { during }),
                Ok(n) => buf = &buf[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_err(during, e)),
            }
        }
        Ok(())
    }

    fn send<D: Descriptor>(&mut self, d: &D) -> Result<(), HandshakeError> {
        let frame = d.to_frame().map_err(HandshakeError::Encode)?;
        self.write_all(&frame, SENDING_DESCRIPTOR)
    }

    fn recv<D: Descriptor>(&mut self) -> Result<D, HandshakeError> {
        let mut prefix = [0u8; 4];
        self.read_exact(&mut prefix, READING_LENGTH)?;
        // Bound the length before allocating or waiting for the body.
        let len = wire::check_len(u32::from_le_bytes(prefix)).map_err(HandshakeError::Decode)?;
        let mut body = vec![0u8; len];
        self.read_exact(&mut body, READING_DESCRIPTOR)?;
        D::from_payload(&body).map_err(HandshakeError::Decode)
    }
}

/// One handshake in progress of [`serve`]: freed when its thread ends,
/// even by a panic.
struct Slot<'a>(&'a AtomicUsize);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Limits of a handshake listener ([`serve`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListenLimits {
    /// Handshakes in progress at once; a connection beyond them is
    /// refused at once ([`Refusal::Busy`]), never queued.
    pub max_concurrent: usize,
    /// Each handshake's whole budget, from accept to its last byte
    /// ([`Handshake::with_deadline`]), and the bound of each read/write.
    pub deadline: Duration,
}

/// Why [`serve`] dropped a connection before handing it on. The
/// connection is closed in every case.
#[derive(Debug)]
pub enum Refusal {
    /// `max_concurrent` handshakes were already in progress.
    Busy {
        /// The limit.
        limit: usize,
    },
    /// No thread could be started for the handshake.
    Spawn(io::Error),
    /// The peer's bytes were not a descriptor, it went silent past the
    /// deadline, or it closed the connection.
    Handshake(HandshakeError),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Busy { limit } => {
                write!(
                    f,
                    "handshake refused: {limit} handshakes already in progress"
                )
            }
            Self::Spawn(e) => write!(f, "handshake refused: no thread for it: {e}"),
            Self::Handshake(e) => write!(f, "handshake refused: {e}"),
        }
    }
}

/// Serves `listener` (non-blocking, see below) until `stop` is set:
/// accepts each connection, receives its descriptor on a thread of its own
/// within `limits.deadline`, then calls `on_peer` with it (on that thread,
/// which still holds the deadline for the rest of the exchange). At most
/// `limits.max_concurrent` handshakes run at once; an excess connection is
/// closed and reported as [`Refusal::Busy`]. Every other failure before
/// `on_peer` is reported to `on_refusal` and the connection closed. Returns
/// once `stop` is set and every handshake thread has finished (each is
/// bounded by the deadline).
///
/// The listener should be non-blocking (the loop polls it, and `stop`,
/// every 5 ms); a blocking one is checked for `stop` only between
/// connections.
///
/// ```
/// use railyard_verbs::handshake::{serve, Handshake, ListenLimits, Refusal};
/// use railyard_verbs::wire::{EndpointDescriptor, QpEndpoint};
/// use std::net::TcpListener;
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::time::Duration;
/// let d = |qpn| EndpointDescriptor { gid: [0; 16], lid: 0,
///     qps: vec![QpEndpoint { qpn, psn: 1 }], segments: vec![] };
/// let l = TcpListener::bind("127.0.0.1:0")?;
/// l.set_nonblocking(true)?;
/// let addr = l.local_addr()?;
/// let stop = AtomicBool::new(false);
/// let limits = ListenLimits { max_concurrent: 4, deadline: Duration::from_secs(5) };
/// std::thread::scope(|s| {
///     s.spawn(|| serve(&l, &limits, &stop,
///         |peer: EndpointDescriptor, hs: Handshake| {
///             assert_eq!(peer, d(7));
///             let _ = hs.reply(&d(9));
///         },
///         |r: Refusal| panic!("{r}")));
///     let hs = Handshake::connect(addr, Duration::from_secs(5)).unwrap();
///     let (theirs, _hs) = hs.exchange_as_initiator(&d(7)).unwrap();
///     assert_eq!(theirs, d(9));
///     stop.store(true, Ordering::Release);
/// });
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn serve<D, P, R>(
    listener: &TcpListener,
    limits: &ListenLimits,
    stop: &AtomicBool,
    on_peer: P,
    on_refusal: R,
) where
    D: Descriptor,
    P: Fn(D, Handshake) + Sync,
    R: Fn(Refusal) + Sync,
{
    let active = AtomicUsize::new(0);
    std::thread::scope(|s| {
        while !stop.load(Ordering::Acquire) {
            let (stream, peer) = match listener.accept() {
                Ok(accepted) => accepted,
                Err(_) => {
                    // WouldBlock (nothing pending) or a transient accept
                    // error (EMFILE, ECONNABORTED): poll again shortly.
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                }
            };
            if active.load(Ordering::Acquire) >= limits.max_concurrent {
                let _ = stream.shutdown(Shutdown::Both);
                let r = Refusal::Busy {
                    limit: limits.max_concurrent,
                };
                tracing::warn!(target: "railyard::handshake", %peer, reason = %r,
                    "handshake refused");
                on_refusal(r);
                continue;
            }
            active.fetch_add(1, Ordering::AcqRel);
            let (active, on_peer, on_refusal) = (&active, &on_peer, &on_refusal);
            let spawned = std::thread::Builder::new()
                .name("railyard-hs".into())
                .spawn_scoped(s, move || {
                    let _slot = Slot(active);
                    let deadline = Instant::now() + limits.deadline;
                    let r = Handshake::from_stream(stream, limits.deadline)
                        .and_then(|hs| hs.with_deadline(deadline).receive::<D>());
                    match r {
                        Ok((desc, hs)) => on_peer(desc, hs),
                        Err(e) => {
                            let r = Refusal::Handshake(e);
                            tracing::warn!(target: "railyard::handshake", %peer, reason = %r,
                                "handshake refused");
                            on_refusal(r)
                        }
                    }
                });
            if let Err(e) = spawned {
                // The closure (and the stream in it) was dropped: closed.
                active.fetch_sub(1, Ordering::AcqRel);
                let r = Refusal::Spawn(e);
                tracing::warn!(target: "railyard::handshake", %peer, reason = %r,
                    "handshake refused");
                on_refusal(r);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{QpEndpoint, SegmentDescriptor, MAX_FRAME_LEN};
    use std::thread;

    const T: Duration = Duration::from_secs(5);

    fn desc(qpn: u32) -> EndpointDescriptor {
        EndpointDescriptor {
            gid: [qpn as u8; 16],
            lid: 0,
            qps: vec![QpEndpoint { qpn, psn: qpn + 1 }],
            segments: vec![SegmentDescriptor {
                addr: 4096,
                len: 8192,
                rkey: qpn + 2,
            }],
        }
    }

    fn listener() -> (TcpListener, std::net::SocketAddr) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = l.local_addr().unwrap();
        (l, a)
    }

    /// The peer's socket sees EOF after we dropped the connection.
    fn peer_sees_eof(s: &mut TcpStream) {
        let mut rest = Vec::new();
        s.set_read_timeout(Some(T)).unwrap();
        // read_to_end returns Ok on orderly EOF; a reset is also a drop.
        let _ = s.read_to_end(&mut rest);
    }

    #[test]
    fn exchange_and_barrier() {
        let (l, a) = listener();
        let t = thread::spawn(move || {
            let hs = Handshake::accept(&l, T).unwrap();
            let (peer, mut hs) = hs.exchange_as_target(&desc(20)).unwrap();
            hs.barrier().unwrap();
            peer
        });
        let hs = Handshake::connect(a, T).unwrap();
        let (peer, mut hs) = hs.exchange_as_initiator(&desc(10)).unwrap();
        hs.barrier().unwrap();
        assert_eq!(peer, desc(20));
        assert_eq!(t.join().unwrap(), desc(10));
    }

    #[test]
    fn oversized_input_is_refused_and_connection_dropped() {
        let (l, a) = listener();
        let t = thread::spawn(move || {
            let mut s = TcpStream::connect(a).unwrap();
            s.write_all(&(MAX_FRAME_LEN as u32 + 1).to_le_bytes())
                .unwrap();
            peer_sees_eof(&mut s);
        });
        let hs = Handshake::accept(&l, T).unwrap();
        let e = hs.exchange_as_target(&desc(1)).unwrap_err();
        assert!(
            matches!(e, HandshakeError::Decode(DecodeError::Oversized { .. })),
            "{e}"
        );
        assert!(e.to_string().contains("exceeds"), "{e}");
        t.join().unwrap(); // would hang (until T) if we had kept the socket open
    }

    #[test]
    fn unknown_version_is_refused() {
        let (l, a) = listener();
        let t = thread::spawn(move || {
            let mut s = TcpStream::connect(a).unwrap();
            let mut f = desc(3).encode().unwrap();
            f[8..10].copy_from_slice(&9u16.to_le_bytes());
            s.write_all(&f).unwrap();
            peer_sees_eof(&mut s);
        });
        let hs = Handshake::accept(&l, T).unwrap();
        let e = hs.exchange_as_target(&desc(1)).unwrap_err();
        assert!(
            matches!(
                e,
                HandshakeError::Decode(DecodeError::UnknownVersion {
                    got: 9,
                    supported: 2
                })
            ),
            "{e}"
        );
        t.join().unwrap();
    }

    #[test]
    fn malformed_input_is_refused() {
        let (l, a) = listener();
        let t = thread::spawn(move || {
            let mut s = TcpStream::connect(a).unwrap();
            let mut f = desc(3).encode().unwrap();
            f[4] = b'X';
            s.write_all(&f).unwrap();
            peer_sees_eof(&mut s);
        });
        let hs = Handshake::accept(&l, T).unwrap();
        let e = hs.exchange_as_target(&desc(1)).unwrap_err();
        assert!(
            matches!(e, HandshakeError::Decode(DecodeError::BadMagic(_))),
            "{e}"
        );
        t.join().unwrap();
    }

    #[test]
    fn peer_dropping_mid_frame_is_connection_closed() {
        let (l, a) = listener();
        let t = thread::spawn(move || {
            let mut s = TcpStream::connect(a).unwrap();
            let f = desc(3).encode().unwrap();
            s.write_all(&f[..f.len() / 2]).unwrap();
            // dropped here, mid-frame
        });
        let hs = Handshake::accept(&l, T).unwrap();
        let e = hs.exchange_as_target(&desc(1)).unwrap_err();
        assert!(matches!(e, HandshakeError::ConnectionClosed { .. }), "{e}");
        t.join().unwrap();
    }

    #[test]
    fn peer_dropping_before_reply_is_connection_closed() {
        let (l, a) = listener();
        let t = thread::spawn(move || {
            let hs = Handshake::accept(&l, T).unwrap();
            drop(hs); // target accepts and vanishes without answering
        });
        let hs = Handshake::connect(a, T).unwrap();
        let e = hs.exchange_as_initiator(&desc(1)).unwrap_err();
        assert!(matches!(e, HandshakeError::ConnectionClosed { .. }), "{e}");
        t.join().unwrap();
    }

    #[test]
    fn silent_peer_times_out() {
        let (l, a) = listener();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let t = thread::spawn(move || {
            let _s = TcpStream::connect(a).unwrap();
            let _ = rx.recv(); // hold the socket open, say nothing
        });
        let hs = Handshake::accept(&l, Duration::from_millis(200)).unwrap();
        let e = hs.exchange_as_target(&desc(1)).unwrap_err();
        assert!(matches!(e, HandshakeError::Timeout { .. }), "{e}");
        tx.send(()).unwrap();
        t.join().unwrap();
    }

    #[test]
    fn barrier_mismatch_is_typed() {
        let (l, a) = listener();
        let t = thread::spawn(move || {
            let mut s = TcpStream::connect(a).unwrap();
            s.write_all(&[0x00]).unwrap();
            peer_sees_eof(&mut s);
        });
        let mut hs = Handshake::accept(&l, T).unwrap();
        assert!(matches!(
            hs.barrier(),
            Err(HandshakeError::BarrierMismatch(0))
        ));
        drop(hs);
        t.join().unwrap();
    }

    #[test]
    fn unencodable_local_descriptor_is_typed() {
        let (l, a) = listener();
        let t = thread::spawn(move || {
            let mut s = TcpStream::connect(a).unwrap();
            peer_sees_eof(&mut s);
        });
        let hs = Handshake::accept(&l, T).unwrap();
        let mut d = desc(1);
        d.qps.clear();
        let e = hs.exchange_as_initiator(&d).unwrap_err();
        assert!(
            matches!(e, HandshakeError::Encode(EncodeError::QpCount(0))),
            "{e}"
        );
        t.join().unwrap();
    }
}
