//! A real engine's handshake listener under hostile peers, on loopback TCP
//! (needs an RDMA device to construct the engine: Soft-RoCE in CI through
//! `ci/rxe.sh`; without one it prints `SKIP`). An honest engine A connects
//! to the target B through a recording proxy, so the test holds a real
//! descriptor; then B gets garbage, every truncation of that descriptor,
//! oversized lengths, a valid prefix then silence (while A connects again,
//! served at once), a fresh descriptor whose sender leaves before the
//! barrier (B built QPs for it), a replay of A's old descriptor, and more
//! connections than `max_handshakes`. Every connection ends in exactly one
//! typed outcome of `EngineStats::handshakes`, is closed, and afterwards B
//! has exactly the endpoints of the honest segments, every gauge at zero,
//! and the process the file descriptors and threads it had before.
//! (The listener alone, on the host: `tests/hostile_peers.rs`.)

use railyard_verbs::engine::{Engine, EngineConfig, HandshakeStats};
use railyard_verbs::wire::PeerDescriptor;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[macro_use]
mod support;
use support::hostile::*;
use support::{assert_idle, skips_without_device};

const T: Duration = Duration::from_secs(30);
const HANDSHAKE: Duration = Duration::from_secs(3);
const SLOTS: u16 = 2;

fn config() -> EngineConfig {
    support::env_config()
}

/// Forwards one connection to `target` both ways and returns what the
/// client sent (the initiator's descriptor frame, then its barrier byte).
fn recording_proxy(target: SocketAddr) -> (SocketAddr, JoinHandle<Vec<u8>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let h = std::thread::spawn(move || {
        let (mut client, _) = l.accept().unwrap();
        let mut server = TcpStream::connect(target).unwrap();
        let (mut c2, mut s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
        let back = std::thread::spawn(move || {
            let _ = std::io::copy(&mut s2, &mut c2);
            let _ = c2.shutdown(Shutdown::Write);
        });
        let mut sent = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = client.read(&mut buf) {
            if n == 0 || server.write_all(&buf[..n]).is_err() {
                break;
            }
            sent.extend_from_slice(&buf[..n]);
        }
        let _ = server.shutdown(Shutdown::Write);
        back.join().unwrap();
        sent
    });
    (addr, h)
}

/// Waits until B's listener has counted `want` (it counts once the
/// connection's thread is done with it).
fn wait_counts(b: &Engine, want: HandshakeStats) {
    let end = Instant::now() + T;
    while b.stats().handshakes != want {
        assert!(
            Instant::now() < end,
            "handshake counts {:?}, want {want:?}",
            b.stats().handshakes
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn hostile_peers_against_the_engine_listener() {
    let test = "hostile_peers_against_the_engine_listener";
    let mut bcfg = config();
    bcfg.handshake_timeout = HANDSHAKE;
    bcfg.max_handshakes = SLOTS;
    let b = match Engine::new(bcfg) {
        Ok(b) => b,
        Err(e) if skips_without_device(test, &e) => return,
        Err(e) => panic!("{test}: cannot start the engine: {e}"),
    };
    let a = Engine::new(config()).expect("engine A");
    let _a_mem = a.alloc_memory(1 << 16).expect("alloc A");
    let _b_mem = b.alloc_memory(1 << 16).expect("alloc B");
    say!(
        "RAN {test} on {} ({:?})",
        b.device(),
        b.config().worker_model
    );

    // An honest segment through the recording proxy: A's real descriptor.
    let (proxy, recorded) = recording_proxy(b.listen_addr());
    a.open_segment(proxy)
        .expect("honest open_segment through the proxy");
    let sent = recorded.join().unwrap();
    let len = u32::from_le_bytes(sent[..4].try_into().unwrap()) as usize;
    let frame = sent[..4 + len].to_vec();
    let old = PeerDescriptor::decode_frame(&frame).expect("A sent a descriptor");
    let mut want = HandshakeStats {
        accepted: 1,
        ..HandshakeStats::default()
    };
    wait_counts(&b, want);
    assert_eq!(b.stats().endpoints_live, 1);
    let baseline = (fds(), tasks());
    let fds_before = fd_targets();
    let t0 = Instant::now();

    // Garbage and oversized lengths: dropped on the first field.
    for g in garbage() {
        let mut s = send_and_hold(b.listen_addr(), &g);
        assert!(dropped(&mut s, T), "garbage not dropped");
        drop(s);
        want.malformed += 1;
        wait_counts(&b, want);
    }
    // Every truncation of A's descriptor, then hang up.
    for cut in 0..frame.len() {
        send_and_hang_up(b.listen_addr(), &frame[..cut], T);
        want.closed += 1;
        wait_counts(&b, want);
    }
    say!("hostile: garbage and {} truncations refused", frame.len());

    // A valid prefix, then silence: timed out, while A is served at once.
    let t_silent = Instant::now();
    let mut silent = send_and_hold(b.listen_addr(), &frame[..frame.len() / 2]);
    a.open_segment(b.listen_addr())
        .expect("an honest peer while another is silent");
    want.accepted += 1;
    assert!(dropped(&mut silent, T), "silent peer never dropped");
    drop(silent);
    let held = t_silent.elapsed();
    assert!(held >= HANDSHAKE, "silent peer dropped after {held:?}");
    want.timed_out += 1;
    wait_counts(&b, want);
    say!("hostile: silent peer dropped after {held:?}");

    // A fresh descriptor (new QP numbers and PSNs) whose sender reads the
    // reply and leaves before the barrier: B built and connected QPs for
    // it, and must destroy them without opening an endpoint.
    let mut fresh = old.clone();
    for (i, q) in fresh
        .nics
        .iter_mut()
        .flat_map(|n| n.qps.iter_mut())
        .enumerate()
    {
        q.qpn = 0x00AB_0000 + i as u32;
        q.psn = (q.psn + 1) & 0xFF_FFFF;
    }
    let mut s = send_and_hold(b.listen_addr(), &fresh.encode().unwrap());
    let reply = read_frame(&mut s, T).expect("B replies to a valid descriptor");
    PeerDescriptor::decode_frame(&reply).expect("B's reply is a descriptor");
    drop(s);
    want.closed += 1;
    wait_counts(&b, want);

    // A replay of A's old descriptor: refused before anything is built,
    // without a reply.
    let mut s = send_and_hold(b.listen_addr(), &frame);
    assert!(dropped(&mut s, T), "replay not dropped");
    drop(s);
    want.replayed += 1;
    wait_counts(&b, want);
    say!("hostile: fresh-then-vanish and replay refused");

    // More connections than max_handshakes: the excess is refused at once.
    let holders: Vec<_> = (0..SLOTS)
        .map(|_| send_and_hold(b.listen_addr(), &[1]))
        .collect();
    // Let the listener take both (it polls every 5 ms).
    std::thread::sleep(Duration::from_secs(1));
    let t_busy = Instant::now();
    for i in 0..8 {
        let mut s = dial(b.listen_addr());
        assert!(dropped(&mut s, T), "excess connection {i} not refused");
    }
    let took = t_busy.elapsed();
    assert!(took < HANDSHAKE, "8 refusals took {took:?}");
    want.busy += 8;
    wait_counts(&b, want);
    drop(holders);
    want.closed += u64::from(SLOTS);
    wait_counts(&b, want);
    say!("hostile: 8 excess connections refused in {took:?}");

    // Nothing leaked: B has the endpoints of the two honest segments, every
    // gauge is zero, and the process has its fds and threads back.
    let s = assert_idle(&b, "B", T);
    assert_eq!(s.endpoints_live, 2, "B endpoints: {s:?}");
    assert_eq!(a.stats().endpoints_live, 2);
    let after = settle(baseline, Duration::from_secs(10));
    assert_eq!(
        after,
        baseline,
        "(fds, threads) before and after; fds before {fds_before:?}, after {:?}",
        fd_targets()
    );
    say!(
        "hostile: {:?} in {:?}; fds {} and threads {} as before",
        b.stats().handshakes,
        t0.elapsed(),
        after.0,
        after.1
    );
}
