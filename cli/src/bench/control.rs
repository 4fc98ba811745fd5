//! The control connection between a `railyard bench` client and server:
//! [`Msg`], one JSON object per line. The client sends `hello` (its buffer
//! size and QPs per endpoint), the server answers `ready` (its engine's
//! handshake port) or `error`; at the end the client sends `done` with its
//! report (or `error`), which the server prints too.

use std::io::{BufRead, Read as _, Write};

use serde::{Deserialize, Serialize};

use super::report::Report;
use super::BenchError;

/// The longest control line read (the `done` report of a full `-a` sweep
/// is a few KiB).
const MAX_LINE: u64 = 1 << 20;

/// Messages of the control connection, one JSON object per line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Msg {
    /// Client → server: the memory it needs.
    Hello {
        /// Protocol version (1).
        version: u32,
        /// Bytes to register.
        buffer_bytes: u64,
        /// The client's QPs per endpoint: both ends of an endpoint must
        /// agree, so the server takes the client's.
        qps_per_endpoint: u16,
    },
    /// Server → client: memory registered; the engine's handshake port.
    Ready {
        /// Port of the server engine's handshake listener.
        engine_port: u16,
    },
    /// Either way: why it cannot go on.
    Error {
        /// One line.
        message: String,
    },
    /// Client → server: the run is over.
    Done {
        /// What the client measured.
        report: Box<Report>,
    },
}

/// `m` as it travels, without the newline (also how an unexpected message
/// is named in an error).
pub fn wire(m: &Msg) -> String {
    serde_json::to_string(m).expect("a message serializes")
}

/// Writes `m` as one line.
pub fn send(w: &mut impl Write, m: &Msg) -> Result<(), BenchError> {
    let mut line = wire(m);
    line.push('\n');
    w.write_all(line.as_bytes()).map_err(BenchError::Control)
}

/// Reads one message; `Ok(None)` when the other side closed the
/// connection. A line is read up to [`MAX_LINE`] bytes.
pub fn recv(r: &mut impl BufRead) -> Result<Option<Msg>, BenchError> {
    let mut line = String::new();
    let n = r
        .by_ref()
        .take(MAX_LINE)
        .read_line(&mut line)
        .map_err(BenchError::Control)?;
    if n == 0 {
        return Ok(None);
    }
    serde_json::from_str(&line)
        .map(Some)
        .map_err(BenchError::NotAMessage)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_message_per_line_and_typed_refusals() {
        let mut buf = vec![];
        let hello = Msg::Hello {
            version: 1,
            buffer_bytes: 64 << 20,
            qps_per_endpoint: 2,
        };
        send(&mut buf, &hello).unwrap();
        send(&mut buf, &Msg::Ready { engine_port: 4242 }).unwrap();
        assert_eq!(
            String::from_utf8(buf.clone()).unwrap(),
            "{\"hello\":{\"version\":1,\"buffer_bytes\":67108864,\"qps_per_endpoint\":2}}\n{\"ready\":{\"engine_port\":4242}}\n"
        );
        let mut r = std::io::BufReader::new(&buf[..]);
        assert_eq!(recv(&mut r).unwrap(), Some(hello));
        assert_eq!(
            recv(&mut r).unwrap(),
            Some(Msg::Ready { engine_port: 4242 })
        );
        assert_eq!(recv(&mut r).unwrap(), None);
        let mut r = std::io::BufReader::new(&b"GET / HTTP/1.1\n"[..]);
        let e = recv(&mut r).unwrap_err();
        assert!(matches!(e, BenchError::NotAMessage(_)), "{e:?}");
        assert!(e
            .to_string()
            .starts_with("control connection: not a railyard bench message"));
    }
}
