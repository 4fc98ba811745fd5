//! Instructions per work request (post + its completion) through the
//! preload against the provider alone, for callgrind. The provider is the
//! fake one of the host tests (an RC send queue in memory), so what is
//! counted is the preload's own work: lookups, the post lock, admission
//! through the composed hot path, the token swap, the post-order record and
//! the completion's release.
//!
//! ```sh
//! cargo build --release -p railyard-preload --example icount
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!   target/release/examples/icount preload-enforce 200000
//! ```
//!
//! (Collected refs at N minus refs at 0) / N = instructions per request;
//! `ci/icount.sh` does that for every arm: `provider`, `preload-off`,
//! `preload-enforce`.
use railyard_preload::config::PreloadConfig;
use railyard_preload::fake::{chain, enforce, fake_poll, fake_post, rig_with, NIC};

fn main() {
    let mut args = std::env::args().skip(1);
    let arm = args.next().unwrap_or_else(|| "preload-off".into());
    let n: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let cfg = match arm.as_str() {
        "provider" | "preload-off" => PreloadConfig::default(),
        "preload-enforce" => enforce(1 << 30),
        other => {
            eprintln!("unknown arm {other}: provider | preload-off | preload-enforce");
            std::process::exit(2);
        }
    };
    let mut r = rig_with(cfg);
    NIC.with(|nic| nic.borrow_mut().record = false);
    let mut c = chain(1, 1, 65536, |_| true);
    // SAFETY: zeroed C data.
    let mut wc: rdma_sys::ibv_wc = unsafe { std::mem::zeroed() };
    for _ in 0..n {
        if arm == "provider" {
            let mut bad = std::ptr::null_mut();
            // SAFETY: the fake provider over the rig's QP and CQ, a valid
            // one-request chain and one completion's room.
            unsafe {
                fake_post(&mut *r.qp, c.wrs.as_mut_ptr(), &mut bad);
                fake_poll(&mut *r.cq, 1, &mut wc);
            }
            std::hint::black_box(wc.wr_id);
        } else {
            let mut bad = std::ptr::null_mut();
            // SAFETY: as above, through the preload's post and poll paths.
            let (rc, k) = unsafe {
                (
                    r.st.post(fake_post, &mut *r.qp, c.wrs.as_mut_ptr(), &mut bad),
                    r.st.poll(fake_poll, r.ci, &mut *r.cq, 1, &mut wc),
                )
            };
            assert!(rc == 0 && k == 1 && wc.wr_id == 1);
        }
    }
    if arm != "provider" {
        r.drained();
    }
}
