//! Instructions per receiver-credit dispatch — `try_reserve` + `commit` +
//! `release` of a direct WRITE charge (DATA_BYTES + REQUEST_SLOTS +
//! CONSUMER_SLOTS) on one entry, one thread, the control half refilling the
//! cumulative grant every 1024 ops (drain + update) — for callgrind, where
//! counts are repeatable on a noisy host. `ci/icount.sh` runs it.
//!
//! Args: `<iterations>`.

use std::hint::black_box;

use railyard_core::credit::{
    Charge, CreditUpdate, LedgerConfig, ReleaseOutcome, SenderLedger, SessionId, Totals,
};

const RX: SessionId = SessionId::new(1, 42);
const CHARGE: Charge = Charge::direct_write(4096);
const REFILL_EVERY: u64 = 1024;

fn main() {
    let iters: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let (ledger, mut ctl) = SenderLedger::new(LedgerConfig {
        max_peers: 1,
        max_classes: 1,
        window: [u32::MAX as u64, 2047, 0, 2047],
    })
    .unwrap();
    ctl.bind(&ledger, 0, RX, 1).unwrap();
    let e = ledger.entry(0, 0).unwrap();
    let mut granted = 0u64;
    let mut seq = 0u64;
    let mut refill = |ctl: &mut railyard_core::credit::SenderControl| {
        granted += REFILL_EVERY;
        seq += 1;
        ctl.usage(&ledger, 0, 0, Charge::ZERO).unwrap();
        let g = Charge([granted * CHARGE.0[0], granted, 0, granted]);
        let u = CreditUpdate {
            receiver_session: RX,
            epoch: 1,
            sequence: seq,
            grants: Totals::from_charge(&g),
            ..Default::default()
        };
        ctl.apply_update(&ledger, 0, &u, 0).unwrap();
    };
    refill(&mut ctl);
    let mut released = 0u64;
    for i in 0..iters {
        let c = ledger
            .try_reserve(black_box(e), black_box(&CHARGE))
            .unwrap()
            .commit()
            .unwrap();
        if black_box(ledger.release(c)) == Ok(ReleaseOutcome::Released) {
            released += 1;
        }
        if (i + 1) % REFILL_EVERY == 0 {
            refill(&mut ctl);
        }
    }
    println!("{iters} dispatches, {released} released");
}
