//! A walk through RFC 3136 completion ownership with the real core: a slice
//! is posted, retried on another endpoint, and its stale completion arrives
//! late; then the old endpoint is retired, drains and is reclaimed.
//!
//! Run: `cargo run -p railyard-core --example ownership_demo`

use railyard_core::classify::wc;
use railyard_core::completion::{HotPath, PostRequest};
use railyard_core::endpoint::{EndpointConfig, EndpointTable, RetireReason};
use railyard_core::slice::SliceTable;
use railyard_core::token::TokenPool;

fn main() {
    let tokens: TokenPool = TokenPool::new(1024).expect("pool");
    let slices = SliceTable::new(64).expect("slices");
    let eps = EndpointTable::<&'static str>::new(EndpointConfig::default()).expect("endpoints");
    let owner = HotPath::new(&tokens, &slices, &eps);
    let local = eps.register();

    let nic_a = eps.open("mlx5_0 -> peer:mlx5_1").expect("open");
    let nic_b = eps.open("mlx5_2 -> peer:mlx5_3").expect("open");
    let s1 = slices.open(0).expect("slice");
    println!("step                              | result");
    println!("----------------------------------+------------------------------------------");
    let wr1 = owner
        .post(PostRequest::new(s1, nic_a, 0, 65536, 0))
        .expect("post")
        .wr_id;
    println!(
        "post slice 0 attempt {} on A       | wr_id {wr1:#018x}",
        s1.attempt
    );
    let s2 = slices
        .retry(s1, 3)
        .expect("retry")
        .attempt()
        .expect("attempt");
    let wr2 = owner
        .post(PostRequest::new(s2, nic_b, 0, 65536, 10))
        .expect("post")
        .wr_id;
    println!(
        "timeout: retry as attempt {} on B  | wr_id {wr2:#018x}",
        s2.attempt
    );
    let late = owner.complete(wr1, wc::SUCCESS, 0, 0).expect("complete");
    println!("old attempt's WC arrives (success) | {:?}", late.slice);
    println!(
        "same wr_id again                   | {:?}",
        owner.complete(wr1, wc::SUCCESS, 0, 0).unwrap_err()
    );
    let done = owner.complete(wr2, wc::SUCCESS, 0, 0).expect("complete");
    println!("current attempt's WC arrives       | {:?}", done.slice);
    eps.retire(nic_a, RetireReason::CqError, 20)
        .expect("retire");
    let guard = local.pin();
    eps.poll_reclaim(30, &guard, |e| {
        println!("reclaim endpoint A                 | {e:?}")
    })
    .expect("reclaim");
    println!(
        "tokens in use {}, endpoint outstanding {}, QP depth {}",
        tokens.in_use(),
        eps.outstanding_total(),
        eps.qp_depth_total()
    );
    assert_eq!(tokens.in_use(), 0);
}
