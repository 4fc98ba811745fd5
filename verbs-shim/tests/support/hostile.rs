//! Hostile handshake peers on loopback TCP, and the process-wide resource
//! counts that prove nothing leaked (shared by `tests/hostile_peers.rs`,
//! which drives `handshake::serve` on the host, and `tests/rxe_hostile.rs`,
//! which drives a real engine's listener).

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Open file descriptors of this process.
pub fn fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

/// What each open file descriptor is (for a leak report).
pub fn fd_targets() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| {
                    let t = std::fs::read_link(e.path()).unwrap_or_default();
                    format!("{}->{}", e.file_name().to_string_lossy(), t.display())
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Threads of this process.
pub fn tasks() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count())
}

/// (fds, threads), once they are back at `baseline` or `within` passed
/// (an exited thread leaves /proc a moment after its join returns).
pub fn settle(baseline: (usize, usize), within: Duration) -> (usize, usize) {
    let end = Instant::now() + within;
    loop {
        let now = (fds(), tasks());
        if now == baseline || Instant::now() >= end {
            return now;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Connects to `addr` (loopback) with a short connect timeout.
pub fn dial(addr: SocketAddr) -> TcpStream {
    TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect to the listener")
}

/// Whether the other side closed (EOF or reset) within `within`, reading
/// and discarding anything it sends first. `false`: still open.
pub fn dropped(s: &mut TcpStream, within: Duration) -> bool {
    let end = Instant::now() + within;
    let mut buf = [0u8; 4096];
    loop {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        let _ = s.set_read_timeout(Some(left));
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return false
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return true, // reset
        }
    }
}

/// Sends `bytes`, half-closes (no more data), and asserts the listener
/// closed the connection within `within`.
pub fn send_and_hang_up(addr: SocketAddr, bytes: &[u8], within: Duration) {
    let mut s = dial(addr);
    // A refused peer may be reset mid-write: that is a drop too.
    let _ = s.write_all(bytes);
    let _ = s.shutdown(Shutdown::Write);
    assert!(
        dropped(&mut s, within),
        "connection not closed within {within:?}"
    );
}

/// Sends `bytes` and stays silent with the connection open.
pub fn send_and_hold(addr: SocketAddr, bytes: &[u8]) -> TcpStream {
    let mut s = dial(addr);
    s.write_all(bytes).expect("write to the listener");
    s
}

/// Reads one length-prefixed descriptor frame (the listener's reply).
pub fn read_frame(s: &mut TcpStream, within: Duration) -> std::io::Result<Vec<u8>> {
    s.set_read_timeout(Some(within))?;
    let mut prefix = [0u8; 4];
    s.read_exact(&mut prefix)?;
    let mut body = vec![0u8; u32::from_le_bytes(prefix) as usize];
    s.read_exact(&mut body)?;
    let mut frame = prefix.to_vec();
    frame.extend_from_slice(&body);
    Ok(frame)
}

/// Bytes that are not a descriptor frame, each refused on its first four
/// bytes or its first field: an HTTP request (its "GET " read as a length
/// is oversized), 0xff (a u32::MAX length), a plausible length followed by
/// noise (bad magic), and zeros (an empty payload: truncated).
pub fn garbage() -> Vec<Vec<u8>> {
    let mut noise = 24u32.to_le_bytes().to_vec();
    noise.extend(super::pattern(7, 24));
    vec![
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
        vec![0xff; 64],
        noise,
        vec![0; 64],
    ]
}
