//! The handshake listener (`handshake::serve`, what an engine's listener
//! runs) under hostile peers, on loopback TCP, on the host (no RDMA device
//! needed): garbage bytes, every truncation of a valid frame, oversized
//! declared lengths, a valid prefix then silence, a peer that trickles one
//! byte at a time, a peer that disconnects mid-handshake, and many
//! concurrent connections. Each gets a typed error and a closed
//! connection, a slow peer never holds the listener (an honest peer is
//! served meanwhile), an excess connection is refused at once, and
//! afterwards the process has the file descriptors and threads it started
//! with. (The same against a real engine, with replayed descriptors and
//! leaked endpoints: `tests/rxe_hostile.rs`.)
//!
//! One test on purpose: the fd and thread counts are process-wide.

use railyard_verbs::handshake::{serve, Handshake, HandshakeError, ListenLimits, Refusal};
use railyard_verbs::wire::{
    DecodeError, EndpointDescriptor, PeerDescriptor, QpEndpoint, SegmentDescriptor, MAX_FRAME_LEN,
};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[macro_use]
mod support;
use support::hostile::*;

/// How one connection ended, as the listener reported it.
#[derive(Debug)]
enum Ended {
    Refused(Refusal),
    /// `on_peer` ran: reply + barrier.
    Finished(Result<PeerDescriptor, HandshakeError>),
}

fn desc(qpn: u32) -> PeerDescriptor {
    EndpointDescriptor {
        gid: [qpn as u8; 16],
        lid: 0,
        qps: vec![QpEndpoint { qpn, psn: 7 }],
        segments: vec![SegmentDescriptor {
            addr: 4096,
            len: 8192,
            rkey: 3,
        }],
    }
    .into()
}

/// A listener served by `serve` with `limits` while `body` runs; the
/// connections' outcomes in order. `serve` must return once stopped.
fn with_listener(limits: ListenLimits, body: impl FnOnce(SocketAddr, &Log)) -> Vec<Ended> {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    let addr = l.local_addr().unwrap();
    let stop = AtomicBool::new(false);
    let log = Log(Mutex::new(Vec::new()));
    std::thread::scope(|s| {
        let served = s.spawn(|| {
            serve(
                &l,
                &limits,
                &stop,
                |_peer: PeerDescriptor, hs: Handshake| {
                    let r = hs.reply(&desc(99)).and_then(|mut hs| hs.barrier());
                    log.push(Ended::Finished(r.map(|()| _peer)));
                },
                |r| log.push(Ended::Refused(r)),
            )
        });
        body(addr, &log);
        stop.store(true, Ordering::Release);
        served.join().expect("serve returns once stopped");
    });
    log.0.into_inner().unwrap()
}

struct Log(Mutex<Vec<Ended>>);

impl Log {
    fn push(&self, e: Ended) {
        self.0.lock().unwrap().push(e);
    }
    fn len(&self) -> usize {
        self.0.lock().unwrap().len()
    }
    /// Waits until `n` connections ended.
    fn wait_for(&self, n: usize, within: Duration) {
        let end = Instant::now() + within;
        while self.len() < n {
            assert!(
                Instant::now() < end,
                "only {} of {n} connections ended",
                self.len()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// An honest initiator: exchanges descriptors and passes the barrier.
fn honest(addr: SocketAddr) {
    let hs = Handshake::connect(addr, Duration::from_secs(5)).unwrap();
    let (theirs, mut hs) = hs.exchange_as_initiator(&desc(5)).unwrap();
    assert_eq!(theirs, desc(99));
    hs.barrier().unwrap();
}

const T: Duration = Duration::from_secs(5);

fn limits(max_concurrent: usize, deadline_ms: u64) -> ListenLimits {
    ListenLimits {
        max_concurrent,
        deadline: Duration::from_millis(deadline_ms),
    }
}

fn garbage_is_malformed() {
    let g = garbage();
    let n = g.len();
    let ended = with_listener(limits(4, 10_000), |addr, log| {
        for (i, bytes) in g.iter().enumerate() {
            // The connection stays open on our side: the listener must drop it.
            let mut s = send_and_hold(addr, bytes);
            assert!(dropped(&mut s, T), "garbage {i} not dropped");
            log.wait_for(i + 1, T);
        }
    });
    assert_eq!(ended.len(), n);
    for (i, e) in ended.iter().enumerate() {
        let Ended::Refused(Refusal::Handshake(HandshakeError::Decode(d))) = e else {
            panic!("garbage {i}: {e:?}");
        };
        let want_oversized = i < 2;
        assert_eq!(
            matches!(d, DecodeError::Oversized { .. }),
            want_oversized,
            "{i}: {d}"
        );
        say!("hostile: garbage {i} -> {d}");
    }
}

fn every_truncation_is_connection_closed() {
    let frame = desc(1).encode().unwrap();
    let ended = with_listener(limits(4, 10_000), |addr, log| {
        for cut in 0..frame.len() {
            send_and_hang_up(addr, &frame[..cut], T);
            log.wait_for(cut + 1, T);
        }
    });
    assert_eq!(ended.len(), frame.len());
    for (cut, e) in ended.iter().enumerate() {
        assert!(
            matches!(
                e,
                Ended::Refused(Refusal::Handshake(HandshakeError::ConnectionClosed { .. }))
            ),
            "cut {cut}: {e:?}"
        );
    }
    say!("hostile: {} truncations -> connection closed", frame.len());
}

fn oversized_lengths_are_refused_before_the_body() {
    let lens = [MAX_FRAME_LEN as u32 + 1, u32::MAX];
    let ended = with_listener(limits(4, 10_000), |addr, log| {
        for (i, len) in lens.iter().enumerate() {
            let t0 = Instant::now();
            // Only the prefix: a listener that waited for the body would
            // hold this open until its 10 s deadline.
            let mut s = send_and_hold(addr, &len.to_le_bytes());
            assert!(
                dropped(&mut s, Duration::from_secs(5)),
                "length {len} not dropped"
            );
            log.wait_for(i + 1, T);
            say!("hostile: length {len} refused in {:?}", t0.elapsed());
        }
    });
    for e in &ended {
        assert!(
            matches!(
                e,
                Ended::Refused(Refusal::Handshake(HandshakeError::Decode(
                    DecodeError::Oversized { .. }
                )))
            ),
            "{e:?}"
        );
    }
}

fn silent_and_trickling_peers_time_out_without_holding_the_listener() {
    let deadline = Duration::from_millis(600);
    let frame = desc(2).encode().unwrap();
    let ended = with_listener(limits(4, 600), |addr, log| {
        // A valid prefix, then silence.
        let t0 = Instant::now();
        let mut silent = send_and_hold(addr, &frame[..frame.len() / 2]);
        // A peer trickling one byte every 100 ms would never hit a
        // per-read timeout; the deadline covers the whole exchange.
        let trickle = std::thread::spawn(move || {
            let mut s = dial(addr);
            let t0 = Instant::now();
            for b in &frame {
                use std::io::Write as _;
                if s.write_all(&[*b]).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let closed = dropped(&mut s, T);
            (closed, t0.elapsed())
        });
        // Meanwhile an honest peer is served at once.
        honest(addr);
        assert!(dropped(&mut silent, T), "silent peer never dropped");
        let held = t0.elapsed();
        assert!(held >= deadline, "dropped before the deadline: {held:?}");
        let (closed, took) = trickle.join().unwrap();
        assert!(closed, "trickling peer not dropped");
        // 64 bytes at 100 ms would take 6.4 s.
        assert!(
            took < Duration::from_secs(4),
            "trickling peer held {took:?}"
        );
        log.wait_for(3, T);
        say!("hostile: silent peer dropped after {held:?}, trickling peer after {took:?}");
    });
    let timeouts = ended
        .iter()
        .filter(|e| {
            matches!(
                e,
                Ended::Refused(Refusal::Handshake(HandshakeError::Timeout { .. }))
            )
        })
        .count();
    let served = ended
        .iter()
        .filter(|e| matches!(e, Ended::Finished(Ok(d)) if *d == desc(5)))
        .count();
    assert_eq!((timeouts, served, ended.len()), (2, 1, 3), "{ended:?}");
}

fn peer_vanishing_mid_handshake_is_connection_closed() {
    let frame = desc(3).encode().unwrap();
    let ended = with_listener(limits(4, 10_000), |addr, log| {
        // Sends its descriptor, reads the reply, and leaves before the barrier.
        let mut s = send_and_hold(addr, &frame);
        let reply = read_frame(&mut s, T).unwrap();
        assert_eq!(PeerDescriptor::decode_frame(&reply), Ok(desc(99)));
        drop(s);
        log.wait_for(1, T);
        // Sends its descriptor and leaves at once.
        send_and_hang_up(addr, &frame, T);
        log.wait_for(2, T);
    });
    for e in &ended {
        assert!(
            matches!(
                e,
                Ended::Finished(Err(HandshakeError::ConnectionClosed { .. }))
            ),
            "{e:?}"
        );
    }
    say!(
        "hostile: {} mid-handshake disconnects -> connection closed",
        ended.len()
    );
}

fn excess_connections_are_refused_not_queued() {
    const SLOTS: usize = 3;
    const EXCESS: usize = 12;
    let ended = with_listener(limits(SLOTS, 10_000), |addr, log| {
        let mut holders: Vec<_> = (0..SLOTS).map(|_| send_and_hold(addr, &[1])).collect();
        // Let the listener take all of them (it polls every 5 ms).
        std::thread::sleep(Duration::from_secs(1));
        assert_eq!(log.len(), 0, "a holder ended early");
        let t0 = Instant::now();
        for i in 0..EXCESS {
            let mut s = dial(addr);
            assert!(dropped(&mut s, T), "excess connection {i} not refused");
        }
        let took = t0.elapsed();
        log.wait_for(EXCESS, T);
        // Refused at once: nowhere near the 10 s deadline of the holders.
        assert!(
            took < Duration::from_secs(5),
            "{EXCESS} refusals took {took:?}"
        );
        say!("hostile: {EXCESS} excess connections refused in {took:?}");
        // The holders leave; their slots free up for an honest peer.
        for h in holders.drain(..) {
            drop(h);
        }
        log.wait_for(EXCESS + SLOTS, T);
        honest(addr);
        log.wait_for(EXCESS + SLOTS + 1, T);
    });
    let busy = ended
        .iter()
        .filter(|e| matches!(e, Ended::Refused(Refusal::Busy { limit: SLOTS })))
        .count();
    let closed = ended
        .iter()
        .filter(|e| {
            matches!(
                e,
                Ended::Refused(Refusal::Handshake(HandshakeError::ConnectionClosed { .. }))
            )
        })
        .count();
    assert_eq!(
        (busy, closed, ended.len()),
        (EXCESS, SLOTS, EXCESS + SLOTS + 1),
        "{ended:?}"
    );
    assert!(matches!(ended.last(), Some(Ended::Finished(Ok(_)))));
}

#[test]
fn hostile_peers_get_typed_errors_and_leak_nothing() {
    let before = (fds(), tasks());
    let t0 = Instant::now();
    garbage_is_malformed();
    every_truncation_is_connection_closed();
    oversized_lengths_are_refused_before_the_body();
    silent_and_trickling_peers_time_out_without_holding_the_listener();
    peer_vanishing_mid_handshake_is_connection_closed();
    excess_connections_are_refused_not_queued();
    let after = settle(before, Duration::from_secs(5));
    assert_eq!(after, before, "(fds, threads) before and after");
    say!(
        "hostile: all scenarios in {:?}; fds {} and threads {} as before",
        t0.elapsed(),
        after.0,
        after.1
    );
}
