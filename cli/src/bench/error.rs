//! [`BenchError`]: every way `railyard bench` stops short, typed. Its
//! `Display` is the one line the command prints (and, on the control
//! connection, the `error` message the other side prints), so each
//! variant carries what that line names; [`BenchError::exit`] prints it
//! and picks the exit code.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use super::args::{fmt_size, MAX_TASKS};

/// Why `railyard bench` could not run or did not finish.
///
/// The usage errors ([`is_usage`](Self::is_usage)) are the flags'
/// cross-checks ([`BenchArgs::plan`](super::BenchArgs::plan)); the others
/// come from the control connection, the engine or the run. A cause (an
/// I/O or engine error) is part of the message, not a separate
/// [`source`](std::error::Error::source).
#[derive(Debug)]
pub enum BenchError {
    /// PEER was given but is blank.
    EmptyPeer,
    /// `--threads` × `--depth` × `--batch_size` is more than the engine
    /// tracks ([`MAX_TASKS`]).
    TooManyInFlight {
        /// `--threads`.
        threads: u64,
        /// `--depth`.
        depth: u64,
        /// `--batch_size`.
        batch: u64,
    },
    /// One thread's part of `--buffer_size` holds no transfer of the
    /// largest size.
    BufferTooSmall {
        /// `--buffer_size`, bytes.
        buffer: u64,
        /// `--threads`.
        threads: u64,
        /// Each thread's part, bytes.
        per_thread: u64,
        /// The largest transfer, bytes.
        size: u64,
    },
    /// `--verify` needs every transfer in flight in its own slot.
    VerifyDoesNotFit {
        /// threads × depth × batch × size, bytes.
        needed: u64,
        /// `--buffer_size`, bytes.
        buffer: u64,
    },
    /// This build has no RDMA support (the `verbs` feature is off).
    #[cfg(not(feature = "verbs"))]
    NoRdma,

    /// The server could not listen on its control address.
    Listen {
        /// The control address.
        addr: SocketAddr,
        /// Why.
        source: io::Error,
    },
    /// The server's `accept` failed.
    Accept {
        /// The control address.
        addr: SocketAddr,
        /// Why.
        source: io::Error,
    },
    /// PEER does not resolve.
    Resolve {
        /// PEER as given (`HOST:PORT`).
        peer: String,
        /// Why.
        source: io::Error,
    },
    /// PEER resolves to no address.
    NoAddress {
        /// PEER as given (`HOST:PORT`).
        peer: String,
    },
    /// The server does not answer on its control port.
    Unreachable {
        /// PEER as given (`HOST:PORT`).
        peer: String,
        /// Why.
        source: io::Error,
    },
    /// A socket operation on the control connection (clone, address,
    /// timeout) failed.
    Socket(io::Error),
    /// Reading or writing the control connection failed.
    Control(io::Error),
    /// A control line that is not a [`Msg`](super::control::Msg).
    NotAMessage(serde_json::Error),
    /// The server's first message from a client was not a valid `hello`.
    UnexpectedFirst {
        /// The client.
        from: SocketAddr,
        /// The message, as it travelled.
        message: String,
    },
    /// The server got a message other than `done` or `error` at the end.
    UnexpectedMessage {
        /// The client.
        from: SocketAddr,
        /// The message, as it travelled.
        message: String,
    },
    /// The client got an answer other than `ready` or `error`.
    UnexpectedAnswer {
        /// The message, as it travelled.
        message: String,
    },
    /// The client closed the control connection before it said anything.
    ClosedAtOnce {
        /// The client.
        from: SocketAddr,
    },
    /// The client closed the control connection before `done`.
    ClientGone {
        /// The client.
        from: SocketAddr,
    },
    /// The server was closed before it answered.
    ServerClosed,
    /// The client reported an error.
    ClientFailed(String),
    /// The server refused (its `error` message).
    ServerRefused(String),
    /// The server's `-q` differs from the client's QPs per endpoint.
    QpMismatch {
        /// The server's `-q`.
        server: u64,
        /// The client's QPs per endpoint.
        client: u16,
    },
    /// The server's engine did not start.
    ServerEngine(Box<BenchError>),
    /// The server could not register the memory the client asked for.
    #[cfg(feature = "verbs")]
    ServerMemory {
        /// Bytes asked for.
        bytes: u64,
        /// Why.
        source: railyard_verbs::engine::EngineError,
    },
    /// The client could not register its buffer.
    #[cfg(feature = "verbs")]
    LocalMemory {
        /// Bytes.
        bytes: u64,
        /// Why.
        source: railyard_verbs::engine::EngineError,
    },
    /// The client could not open the server's segment.
    #[cfg(feature = "verbs")]
    OpenSegment(railyard_verbs::engine::EngineError),
    /// The server's segment exports no memory.
    NoRemoteMemory,
    /// The server's segment exports less than the client's buffer.
    RemoteTooSmall {
        /// Bytes exported.
        exported: u64,
        /// Bytes needed.
        needed: u64,
    },
    /// `--metrics FILE` could not be written.
    Metrics {
        /// FILE.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The engine's configuration (`MC_*`) was refused.
    #[cfg(feature = "verbs")]
    Config(railyard_verbs::engine::ConfigError),
    /// An engine call failed.
    #[cfg(feature = "verbs")]
    Engine(railyard_verbs::engine::EngineError),
    /// Reading or writing registered memory failed.
    #[cfg(feature = "verbs")]
    Memory(railyard_verbs::VerbsError),
    /// After the run the engine still held resources.
    NotIdle {
        /// Tokens in use.
        tokens: u64,
        /// Endpoint posts outstanding.
        endpoint_posts: u64,
        /// QP depth in use.
        qp_depth: u64,
        /// CQ entries outstanding.
        cq: u64,
    },
    /// A batch did not finish within the wait.
    BatchTimeout,
    /// A transfer ended in another state than completed.
    TransferFailed {
        /// `failed`, `timed out`, `was canceled` or `did not complete`.
        how: &'static str,
        /// Bytes moved.
        moved: u64,
        /// Bytes of the transfer.
        total: u64,
    },
    /// `--verify` found a block that differs.
    VerifyFailed {
        /// Block length, bytes.
        len: u64,
        /// Offset in the buffer.
        offset: u64,
    },
    /// This thread stopped because another one failed.
    OtherThreadFailed,
    /// A submitter thread panicked.
    ThreadPanicked,
    /// Merging the threads' latency histograms failed.
    Histogram(hdrhistogram::errors::AdditionError),
}

impl BenchError {
    /// Whether the flags are at fault (exit 2, with a pointer to
    /// `railyard bench --help`).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            BenchError::EmptyPeer
                | BenchError::TooManyInFlight { .. }
                | BenchError::BufferTooSmall { .. }
                | BenchError::VerifyDoesNotFit { .. }
        )
    }

    /// Prints the error as one line on stderr and returns the exit code:
    /// a usage error (or a build without RDMA) exits 2, a failed run 1.
    pub fn exit(&self) -> ExitCode {
        if self.is_usage() {
            eprintln!("railyard: error: {self}; see 'railyard bench --help'");
            ExitCode::from(crate::error::USAGE)
        } else {
            #[cfg(not(feature = "verbs"))]
            if let BenchError::NoRdma = self {
                eprintln!("railyard: error: {self}");
                return ExitCode::from(crate::error::USAGE);
            }
            eprintln!("railyard bench: error: {self}");
            ExitCode::FAILURE
        }
    }
}

impl fmt::Display for BenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use BenchError as E;
        match self {
            E::EmptyPeer => f.write_str("PEER is empty: give the server as HOST or HOST:PORT"),
            E::TooManyInFlight {
                threads,
                depth,
                batch,
            } => write!(
                f,
                "out of range: --threads {threads} x --depth {depth} x --batch_size {batch} = {} transfers in flight, the engine tracks at most {MAX_TASKS}",
                threads * depth * batch
            ),
            E::BufferTooSmall {
                buffer,
                threads,
                per_thread,
                size,
            } => write!(
                f,
                "out of range: --buffer_size {} split over {threads} threads leaves {} each, less than one {} transfer",
                fmt_size(*buffer),
                fmt_size(*per_thread),
                fmt_size(*size)
            ),
            E::VerifyDoesNotFit { needed, buffer } => write!(
                f,
                "out of range: --verify needs --threads x --depth x --batch_size x --size = {} within --buffer_size {} (no slot may be reused while in flight)",
                fmt_size(*needed),
                fmt_size(*buffer)
            ),
            #[cfg(not(feature = "verbs"))]
            E::NoRdma => f.write_str(
                "this build has no RDMA support; rebuild with \
                 `cargo build --release -p railyard-cli --features verbs` (needs libibverbs)",
            ),
            E::Listen { addr, source } => write!(f, "cannot listen on {addr}: {source}"),
            E::Accept { addr, source } => write!(f, "accept on {addr}: {source}"),
            E::Resolve { peer, source } => write!(f, "PEER {peer}: {source}"),
            E::NoAddress { peer } => write!(f, "PEER {peer}: no address"),
            E::Unreachable { peer, source } => {
                write!(f, "cannot reach the server at {peer}: {source}")
            }
            E::Socket(e) => write!(f, "{e}"),
            E::Control(e) => write!(f, "control connection: {e}"),
            E::NotAMessage(e) => {
                write!(f, "control connection: not a railyard bench message ({e})")
            }
            E::UnexpectedFirst { from, message } => {
                write!(f, "unexpected first message from {from}: {message}")
            }
            E::UnexpectedMessage { from, message } => {
                write!(f, "unexpected message from {from}: {message}")
            }
            E::UnexpectedAnswer { message } => {
                write!(f, "unexpected answer from the server: {message}")
            }
            E::ClosedAtOnce { from } => write!(f, "{from} closed the control connection at once"),
            E::ClientGone { from } => {
                write!(f, "the client {from} went away before it finished")
            }
            E::ServerClosed => f.write_str("the server closed the control connection"),
            E::ClientFailed(m) => write!(f, "the client failed: {m}"),
            E::ServerRefused(m) => write!(f, "the server: {m}"),
            E::QpMismatch { server, client } => write!(
                f,
                "QPs per endpoint: the server was started with -q {server}, the client uses {client}; both ends must agree"
            ),
            E::ServerEngine(e) => write!(f, "the server's engine: {e}"),
            #[cfg(feature = "verbs")]
            E::ServerMemory { bytes, source } => {
                write!(f, "the server cannot register {bytes} bytes: {source}")
            }
            #[cfg(feature = "verbs")]
            E::LocalMemory { bytes, source } => {
                write!(f, "registering {bytes} local bytes: {source}")
            }
            #[cfg(feature = "verbs")]
            E::OpenSegment(e) => write!(f, "opening the server's segment: {e}"),
            E::NoRemoteMemory => f.write_str("the server exported no memory"),
            E::RemoteTooSmall { exported, needed } => {
                write!(f, "the server exported {exported} bytes, {needed} needed")
            }
            E::Metrics { path, source } => write!(f, "--metrics {}: {source}", path.display()),
            #[cfg(feature = "verbs")]
            E::Config(e) => write!(f, "{e}"),
            #[cfg(feature = "verbs")]
            E::Engine(e) => write!(f, "{e}"),
            #[cfg(feature = "verbs")]
            E::Memory(e) => write!(f, "{e}"),
            E::NotIdle {
                tokens,
                endpoint_posts,
                qp_depth,
                cq,
            } => write!(
                f,
                "the engine did not go idle within 10 s: {tokens} tokens in use, {endpoint_posts} endpoint posts, QP depth {qp_depth}, {cq} CQ entries outstanding"
            ),
            E::BatchTimeout => f.write_str("a batch did not finish within 60 s"),
            E::TransferFailed { how, moved, total } => {
                write!(f, "a transfer {how} ({moved} of {total} bytes moved)")
            }
            E::VerifyFailed { len, offset } => {
                write!(f, "verify failed: block of {len} B at offset {offset} differs")
            }
            E::OtherThreadFailed => f.write_str("another thread failed"),
            E::ThreadPanicked => f.write_str("a thread panicked"),
            E::Histogram(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for BenchError {}

#[cfg(feature = "verbs")]
impl From<railyard_verbs::engine::EngineError> for BenchError {
    fn from(e: railyard_verbs::engine::EngineError) -> Self {
        BenchError::Engine(e)
    }
}

#[cfg(feature = "verbs")]
impl From<railyard_verbs::engine::ConfigError> for BenchError {
    fn from(e: railyard_verbs::engine::ConfigError) -> Self {
        BenchError::Config(e)
    }
}

#[cfg(feature = "verbs")]
impl From<railyard_verbs::VerbsError> for BenchError {
    fn from(e: railyard_verbs::VerbsError) -> Self {
        BenchError::Memory(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines the command printed before the error was typed.
    #[test]
    fn messages_are_the_commands_lines() {
        let e = BenchError::TooManyInFlight {
            threads: 64,
            depth: 64,
            batch: 32,
        };
        assert_eq!(
            e.to_string(),
            "out of range: --threads 64 x --depth 64 x --batch_size 32 = 131072 transfers in flight, the engine tracks at most 16384"
        );
        assert!(e.is_usage());
        let e = BenchError::BufferTooSmall {
            buffer: 1 << 20,
            threads: 64,
            per_thread: 16 << 10,
            size: 64 << 10,
        };
        assert_eq!(
            e.to_string(),
            "out of range: --buffer_size 1 MiB split over 64 threads leaves 16 KiB each, less than one 64 KiB transfer"
        );
        let e = BenchError::ServerEngine(Box::new(BenchError::NoRemoteMemory));
        assert_eq!(
            e.to_string(),
            "the server's engine: the server exported no memory"
        );
        assert!(!e.is_usage());
        let e = BenchError::TransferFailed {
            how: "timed out",
            moved: 4096,
            total: 65536,
        };
        assert_eq!(
            e.to_string(),
            "a transfer timed out (4096 of 65536 bytes moved)"
        );
        #[cfg(not(feature = "verbs"))]
        {
            assert!(!BenchError::NoRdma.is_usage());
            assert!(BenchError::NoRdma.to_string().contains("--features verbs"));
        }
    }
}
