//! The hot path never allocates: a counting global allocator watches
//! claim/complete, slice transitions, endpoint admission/release and the
//! composed post/complete protocol, after construction.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use railyard_core::classify::wc;
use railyard_core::completion::{HotPath, PostRequest};
use railyard_core::endpoint::{EndpointConfig, EndpointTable};
use railyard_core::slice::{Outcome, SliceTable};
use railyard_core::token::{TokenPool, TokenRecord};

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator unchanged; only counts calls
// (in a thread-local, so the test harness's other threads do not count).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn allocs() -> u64 {
    ALLOCS.with(|c| c.get())
}

#[test]
fn counting_allocator_sees_allocations() {
    // The counter works: a Vec allocates.
    let before = allocs();
    let v: Vec<u64> = Vec::with_capacity(8);
    assert!(allocs() > before);
    drop(v);
}

#[test]
fn claim_and_complete_never_allocate() {
    let pool: TokenPool = TokenPool::new(64).unwrap();
    let rec = TokenRecord {
        bytes: 65536,
        ..TokenRecord::default()
    };
    let before = allocs();
    for _ in 0..10_000 {
        let a = pool.claim(rec).unwrap();
        let b = pool.claim(rec).unwrap();
        pool.complete(a).unwrap();
        pool.complete(b).unwrap();
        // Error paths too.
        assert!(pool.complete(b).is_err());
    }
    let mut held = [0u64; 64];
    for h in held.iter_mut() {
        *h = pool.claim(rec).unwrap();
    }
    assert!(pool.claim(rec).is_err());
    for h in held {
        pool.complete(h).unwrap();
    }
    assert_eq!(allocs(), before, "claim/complete allocated");
}

#[test]
fn post_and_complete_protocol_never_allocates() {
    let tokens: TokenPool = TokenPool::new(64).unwrap();
    let slices = SliceTable::new(64).unwrap();
    let eps = EndpointTable::<()>::new(EndpointConfig::default()).unwrap();
    let ep = eps.open(()).unwrap();
    let owner = HotPath::new(&tokens, &slices, &eps);
    let before = allocs();
    for i in 0..10_000u32 {
        let s = slices.open(i % 64).unwrap();
        let wr = owner
            .post(PostRequest::new(s, ep, 0, 4096, 0))
            .unwrap()
            .wr_id;
        let d = owner.complete(wr, wc::WR_FLUSH_ERR, 0, 0).unwrap();
        let s2 = match d.slice {
            railyard_core::completion::SliceEffect::Retry(s2) => s2,
            other => panic!("{other:?}"),
        };
        let wr = owner
            .post(PostRequest::new(s2, ep, 1, 4096, 0))
            .unwrap()
            .wr_id;
        owner.unposted(wr, 0).map(|(r, _)| r).unwrap();
        slices.settle(s2, Outcome::Canceled).unwrap();
    }
    assert_eq!(allocs(), before, "post/complete allocated");
}

#[test]
fn post_and_complete_through_token_caches_never_allocate() {
    // Small caches over a small pool: refills, batch flushes to the depot,
    // starvation and the flush it asks for all happen in the loop.
    let tokens: TokenPool = TokenPool::new(16).unwrap();
    let slices = SliceTable::new(64).unwrap();
    let eps = EndpointTable::<()>::new(EndpointConfig::default()).unwrap();
    let ep = eps.open(()).unwrap();
    let owner = HotPath::new(&tokens, &slices, &eps);
    let mut poster = owner.token_cache::<4>();
    let mut poller = owner.token_cache::<4>();
    let mut live = [0u64; 16];
    let before = allocs();
    for round in 0..500u32 {
        let mut n = 0;
        for i in 0..16u32 {
            let s = slices.open((round * 16 + i) % 64).unwrap();
            match owner.post_via(&mut poster, PostRequest::new(s, ep, 0, 4096, 0)) {
                Ok(p) => {
                    live[n] = p.wr_id;
                    n += 1;
                }
                Err(_) => {
                    slices.settle(s, Outcome::Canceled).unwrap();
                }
            }
        }
        for &wr in &live[..n] {
            owner
                .complete_via(&mut poller, wr, wc::SUCCESS, 0, 1)
                .unwrap();
        }
        poller.idle(round % 7 == 0);
        poster.idle(false);
    }
    assert_eq!(allocs(), before, "post/complete through caches allocated");
    assert_eq!(tokens.in_use(), 0);
}

#[test]
fn composed_hot_path_with_every_layer_never_allocates() {
    use railyard_core::cc::{CcConfig, Controller, Mode};
    use railyard_core::completion::{CreditDemand, Layers, Path, Refusal};
    use railyard_core::credit::{
        Charge, CreditUpdate, LedgerConfig, SenderLedger, SessionId, Totals,
    };
    use railyard_core::rail::{DeviceSpec, RailConfig, Selector};

    let tokens: TokenPool = TokenPool::new(64).unwrap();
    let slices = SliceTable::new(64).unwrap();
    let eps = EndpointTable::<()>::new(EndpointConfig::default()).unwrap();
    let cfg = CcConfig {
        mode: Mode::Enforce,
        ..CcConfig::default()
    };
    let (cc, _m) = Controller::new(&cfg, 2, &[0, 1]).unwrap();
    let rails = Selector::new(
        &[DeviceSpec::new(100_000_000_000); 2],
        RailConfig::default(),
    )
    .unwrap();
    let (ledger, mut ctl) = SenderLedger::new(LedgerConfig::default()).unwrap();
    ctl.bind(&ledger, 0, SessionId(1), 1).unwrap();
    let u = CreditUpdate {
        receiver_session: SessionId(1),
        epoch: 1,
        sequence: 1,
        grants: Totals::all([1 << 30, 1024, 0, 1024]),
        ..Default::default()
    };
    ctl.apply_update(&ledger, 0, &u, 0).unwrap();
    let paths = [0u16, 1].map(|d| Path {
        device: d,
        qp: 0,
        route: u32::from(d),
        endpoint: eps.open(()).unwrap(),
    });
    let demand = CreditDemand {
        entry: ledger.entry(0, 0).unwrap(),
        charge: Charge::direct_write(4096),
    };
    let owner = HotPath::new(&tokens, &slices, &eps).with_layers(Layers {
        credit: &ledger,
        rail: &rails,
        cc: &cc,
    });
    let before = allocs();
    // Two credit-gated posts per round; the ledger's window tracks 63
    // consumer slots at a time and credit comes back only through the
    // control thread (not the hot path), so 30 rounds.
    for i in 0..30u32 {
        let s = slices.open(i % 64).unwrap();
        let p = owner
            .post(
                PostRequest::pick(s, &paths, 4096, u64::from(i))
                    .to_peer(0)
                    .with_credit(demand),
            )
            .unwrap();
        let d = owner
            .complete(p.wr_id, wc::WR_FLUSH_ERR, 0, u64::from(i) + 1)
            .unwrap();
        let s2 = match d.slice {
            railyard_core::completion::SliceEffect::Retry(s2) => s2,
            other => panic!("{other:?}"),
        };
        let p = owner
            .post(PostRequest::on(s2, paths[1], 4096, 0).with_credit(demand))
            .unwrap();
        owner.unposted(p.wr_id, 0).unwrap();
        let p = owner.post(PostRequest::on(s2, paths[0], 4096, 0)).unwrap();
        owner.complete(p.wr_id, wc::SUCCESS, 0, 9).unwrap();
        // A refusal path too.
        assert!(matches!(
            owner.post(PostRequest::on(s2, paths[0], 4096, 0)),
            Err(Refusal::Slice(_))
        ));
    }
    assert_eq!(allocs(), before, "the composed hot path allocated");
    // (The ledger's usage reports are the control thread's, not measured.)
    let _ = &mut ctl;
}
