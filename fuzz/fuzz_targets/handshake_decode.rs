//! Handshake descriptor decode from what a peer sends: never panics, never
//! allocates more than the bytes it was given can justify (a hostile count
//! does not buy a large allocation), and anything accepted re-encodes byte
//! for byte.
//!
//! The first input byte picks the mode: raw bytes as a frame, or a valid
//! descriptor built from the input, encoded, then mutated by a few byte
//! flips (so the fuzzer reaches the deep paths past the magic and the
//! counts without a seed corpus).
#![no_main]
use arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use railyard_core::wire::handshake::{
    check_len, frame_len, CreditCapability, EndpointDescriptor, PeerDescriptor, QpEndpoint,
    SegmentDescriptor, MAX_24BIT, MAX_FRAME_LEN,
};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// Heap bytes a decode may allocate per input byte. Every allocation is
/// made only after the counts were checked against the bytes present: per
/// 4-byte rkey the decoder builds a 24-byte `SegmentDescriptor` (ratio 6);
/// regions (16 → 16), QPs (8 → 8) and NIC entries (>= 28 bytes → one
/// `EndpointDescriptor`, 72) stay below that.
const ALLOC_PER_INPUT_BYTE: usize = 6;

struct Counting;

thread_local! {
    static BYTES: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator unchanged; only adds up the
// requested sizes (in a thread-local).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = BYTES.try_with(|c| c.set(c.get() + layout.size()));
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = BYTES.try_with(|c| c.set(c.get() + new_size));
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static A: Counting = Counting;

/// Runs `f` and returns its result with the heap bytes it requested.
fn counted<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = BYTES.with(|c| c.get());
    let r = f();
    (r, BYTES.with(|c| c.get()) - before)
}

fn check(frame: &[u8]) {
    let bound = ALLOC_PER_INPUT_BYTE * frame.len().min(4 + MAX_FRAME_LEN);
    let (peer, used) = counted(|| PeerDescriptor::decode_frame(frame));
    assert!(
        used <= bound,
        "{used} heap bytes for a {}-byte frame",
        frame.len()
    );
    let (one, used) = counted(|| EndpointDescriptor::decode_frame(frame));
    assert!(
        used <= bound,
        "{used} heap bytes for a {}-byte frame",
        frame.len()
    );
    if let Ok(p) = &peer {
        // Accepted: the prefix was in bounds and re-encoding is exact.
        assert_eq!(frame_len(frame).ok(), Some(frame.len() - 4));
        assert_eq!(p.payload_len(), frame.len() - 4);
        assert_eq!(p.encode().expect("accepted re-encodes"), frame);
    }
    match (&one, &peer) {
        (Ok(d), Ok(p)) => {
            assert_eq!(d.encode().expect("accepted re-encodes"), frame);
            assert_eq!(p.nics.len(), 1);
            assert_eq!(&p.nics[0], d);
        }
        (Ok(_), Err(e)) => panic!("one-NIC decode accepted what the frame decode refused: {e}"),
        _ => {}
    }
    if let Some(prefix) = frame.get(..4) {
        // The streaming path (the handshake reads the prefix, bounds it,
        // then reads exactly that many bytes) agrees with the frame decode.
        let len = u32::from_le_bytes(prefix.try_into().expect("4 bytes"));
        if let (Ok(n), Some(body)) = (check_len(len), frame.get(4..)) {
            if body.len() == n {
                let (p2, used) = counted(|| PeerDescriptor::decode_payload(body));
                assert!(used <= bound);
                assert_eq!(p2, peer);
            }
        }
    }
}

/// A descriptor the encoder accepts, with small counts: 1..=3 NICs, the
/// same 0..=4 regions each with its own rkeys, 1..=4 QPs per NIC.
fn descriptor(u: &mut Unstructured<'_>) -> Result<PeerDescriptor> {
    let n_nics = u.int_in_range(1..=3)?;
    let n_seg = u.int_in_range(0..=4)?;
    let mut regions = Vec::with_capacity(n_seg);
    for _ in 0..n_seg {
        let addr = u.int_in_range(0..=u64::MAX - 1)?;
        let len = u.int_in_range(1..=u64::MAX - addr)?;
        regions.push((addr, len));
    }
    let mut nics = Vec::with_capacity(n_nics);
    for _ in 0..n_nics {
        let n_qps = u.int_in_range(1..=4)?;
        let mut qps = Vec::with_capacity(n_qps);
        for _ in 0..n_qps {
            qps.push(QpEndpoint {
                qpn: u.int_in_range(0..=MAX_24BIT)?,
                psn: u.int_in_range(0..=MAX_24BIT)?,
            });
        }
        let mut segments = Vec::with_capacity(n_seg);
        for &(addr, len) in &regions {
            segments.push(SegmentDescriptor {
                addr,
                len,
                rkey: u.arbitrary()?,
            });
        }
        nics.push(EndpointDescriptor {
            gid: u.arbitrary()?,
            lid: u.arbitrary()?,
            qps,
            segments,
        });
    }
    let replaces = if u.arbitrary()? {
        Some(u.int_in_range(0..=MAX_24BIT)?)
    } else {
        None
    };
    let credit = if u.arbitrary()? {
        let min_version = u.int_in_range(1..=u16::MAX)?;
        Some(CreditCapability {
            min_version,
            max_version: u.int_in_range(min_version..=u16::MAX)?,
            required: u.arbitrary()?,
        })
    } else {
        None
    };
    Ok(PeerDescriptor {
        nics,
        replaces,
        credit,
    })
}

fn structured(data: &[u8]) -> Result<()> {
    let mut u = Unstructured::new(data);
    let d = descriptor(&mut u)?;
    let mut frame = d.encode().expect("a valid descriptor encodes");
    assert_eq!(PeerDescriptor::decode_frame(&frame).as_ref(), Ok(&d));
    // Up to four byte flips, then maybe a cut or an extension.
    for _ in 0..u.int_in_range(0..=4)? {
        let at = u.choose_index(frame.len())?;
        frame[at] ^= u.int_in_range(1..=255)?;
    }
    match u.int_in_range(0..=2)? {
        0 => frame.truncate(u.choose_index(frame.len() + 1)?),
        1 => {
            let n = u.int_in_range(1..=8)?;
            frame.extend_from_slice(u.bytes(n)?);
        }
        _ => {}
    }
    check(&frame);
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    match data.split_first() {
        Some((&mode, rest)) if mode & 1 == 1 => {
            let _ = structured(rest);
        }
        Some((_, rest)) => check(rest),
        None => check(data),
    }
});
