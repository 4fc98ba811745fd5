//! What the two-guest fault examples (`fault_link_down`, `soak`) share,
//! included by each through `#[path]`: the fault configuration, opening
//! the segment to the target's engine, the control channel between the
//! initiator (node 0) and the target (node 1), and `ip link set`.
//!
//! The control channel is one TCP connection per command: the initiator
//! sends one line (`ping`, `exit`, or the example's own), the target
//! answers `ok` when the command asks for it and closes.

use railyard_verbs::engine::{CcMode, Engine, EngineConfig, SegmentId};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// The engine configuration of the fault runs (over the `MC_*`
/// environment): CC enforcing with a threshold of 2 hard errors and a
/// 500 ms cooldown, window changes only from the faults (not from TCG
/// slowness), 2 QPs per endpoint, a 67 ms QP timeout with 2 retries and a
/// 2 s handshake timeout, so a dead peer is noticed within a second.
pub fn fault_config() -> Result<EngineConfig, String> {
    let mut c = EngineConfig::from_env().map_err(|e| e.to_string())?;
    c.cc.mode = CcMode::Enforce;
    c.cc.hard_error_threshold = 2;
    c.cc.cooldown_ms = 500;
    c.cc.target_drain_us = 10_000_000;
    c.cc.high_pressure_epochs = 10_000;
    c.qps_per_endpoint = 2;
    c.qp_timeout = 14; // 67 ms
    c.qp_retry_cnt = 2;
    c.handshake_timeout = Duration::from_secs(2);
    Ok(c)
}

/// Opens a segment to the target's engine at `peer:port`, retrying for
/// 60 s while it starts (`who` prefixes the retry lines).
pub fn open_segment(who: &str, e: &Engine, peer: &str, port: u16) -> Result<SegmentId, String> {
    let t0 = Instant::now();
    loop {
        match e.open_segment((peer, port)) {
            Ok(s) => return Ok(s),
            Err(err) if t0.elapsed() < Duration::from_secs(60) => {
                eprintln!("{who}open_segment: {err}; retrying");
                std::thread::sleep(Duration::from_millis(500));
            }
            Err(err) => return Err(err.to_string()),
        }
    }
}

/// Sends `cmd` to the target's control port `peer:port` (retrying the
/// connection for 60 s; `who` prefixes the retry lines) and waits up to
/// 60 s for its answer or the close.
pub fn send(who: &str, peer: &str, port: u16, cmd: &str) -> Result<(), String> {
    let addr: SocketAddr = format!("{peer}:{port}")
        .parse()
        .map_err(|e| format!("{peer}:{port}: {e}"))?;
    let t0 = Instant::now();
    loop {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(2)) {
            Ok(mut s) => {
                s.write_all(cmd.as_bytes()).map_err(|e| e.to_string())?;
                let _ = s.set_read_timeout(Some(Duration::from_secs(60)));
                let mut b = [0u8; 8];
                let _ = s.read(&mut b);
                return Ok(());
            }
            Err(e) if t0.elapsed() < Duration::from_secs(60) => {
                eprintln!("{who}control {cmd:?}: {e}; retrying");
                std::thread::sleep(Duration::from_millis(500));
            }
            Err(e) => return Err(format!("control {cmd:?}: {e}")),
        }
    }
}

/// Serves control commands on `ctl` (made non-blocking here): each
/// connection's command (one read, 5 s at most, trimmed) goes to `handle`
/// with the connection, until `handle` returns `Ok(false)` (or an error).
/// Bounded: no command for `idle` (a failed initiator never sends `exit`)
/// is an error.
pub fn serve(
    ctl: &TcpListener,
    idle: Duration,
    mut handle: impl FnMut(&str, TcpStream) -> Result<bool, String>,
) -> Result<(), String> {
    ctl.set_nonblocking(true).map_err(|e| e.to_string())?;
    let mut t0 = Instant::now();
    loop {
        if t0.elapsed() > idle {
            return Err(format!("no command for {} s", idle.as_secs()));
        }
        let mut s = match ctl.accept() {
            Ok((s, _)) => s,
            Err(_) => {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
        };
        t0 = Instant::now();
        let _ = s.set_nonblocking(false);
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
        let mut buf = [0u8; 64];
        let n = s.read(&mut buf).unwrap_or(0);
        let cmd = String::from_utf8_lossy(&buf[..n]).trim().to_owned();
        if !handle(&cmd, s)? {
            return Ok(());
        }
    }
}

/// `ip link set <dev> <state>`.
pub fn ip_link(dev: &str, state: &str) -> Result<(), String> {
    let st = std::process::Command::new("ip")
        .args(["link", "set", dev, state])
        .status()
        .map_err(|e| format!("ip: {e}"))?;
    st.success()
        .then_some(())
        .ok_or(format!("ip link set {dev} {state} failed"))
}
