//! Each injected fault alone: the WC statuses it produces come back
//! through `HotPath::complete`, retries go to new attempts, and nothing is
//! leaked.

use railyard_sim::model::{
    Arrivals, Fault, FaultKind, NetConfig, ReceiverConfig, Sim, SimConfig, Stream,
    WC_RETRY_EXC_ERR, WC_SUCCESS, WC_WR_FLUSH_ERR,
};
use railyard_sim::stack::StackConfig;

fn base(fault: FaultKind) -> SimConfig {
    SimConfig {
        net: NetConfig {
            nics_per_host: 2,
            ..NetConfig::default()
        },
        receivers: vec![ReceiverConfig {
            consumer_workers: u32::MAX,
            ..ReceiverConfig::default()
        }],
        streams: vec![Stream {
            rx: 0,
            transfer_bytes: 1 << 20,
            slice_bytes: 128 << 10,
            arrivals: Arrivals::Closed { outstanding: 4 },
            pin_nic: None,
        }],
        stack: StackConfig {
            window_ops: 16,
            ..StackConfig::default()
        },
        duration_ns: 20_000_000,
        faults: vec![Fault {
            at_ns: 5_000_000,
            kind: fault,
        }],
        ..SimConfig::default()
    }
}

#[test]
fn no_fault_no_error() {
    let mut cfg = base(FaultKind::QpError {
        sender: 0,
        nic: 0,
        rx: 0,
    });
    cfg.faults.clear();
    let r = Sim::new(cfg).unwrap().run();
    assert!(r.leaks.is_clean());
    assert_eq!(
        r.counters.wc.iter().sum::<u64>(),
        r.counters.wc[usize::from(WC_SUCCESS)]
    );
    assert_eq!(r.counters.retries, 0);
}

#[test]
fn route_timeout_gives_retry_exceeded_then_flush_and_retries() {
    let r = Sim::new(base(FaultKind::RouteTimeout {
        sender: 0,
        nic: 0,
        rx: 0,
        dur_ns: 5_000_000,
    }))
    .unwrap()
    .run();
    assert!(r.counters.wc[usize::from(WC_RETRY_EXC_ERR)] > 0);
    assert!(r.counters.retries > 0);
    assert!(r.counters.retired > 0);
    assert_eq!(r.transfers_failed, 0, "retries succeed on the other NIC");
    assert!(r.leaks.is_clean(), "{:?}", r.leaks);
}

#[test]
fn qp_error_flushes_and_reconnects_a_new_generation() {
    let r = Sim::new(base(FaultKind::QpError {
        sender: 0,
        nic: 1,
        rx: 0,
    }))
    .unwrap()
    .run();
    assert!(r.counters.wc[usize::from(WC_WR_FLUSH_ERR)] > 0);
    assert_eq!(r.counters.retired, 1);
    assert!(
        r.counters.reclaimed >= 1,
        "the retired endpoint drains and is reclaimed"
    );
    assert!(r.leaks.is_clean(), "{:?}", r.leaks);
}

#[test]
fn port_down_and_device_fatal_leak_nothing() {
    for f in [
        FaultKind::PortDown {
            sender: 0,
            nic: 0,
            dur_ns: 3_000_000,
        },
        FaultKind::DeviceFatal { sender: 0, nic: 1 },
    ] {
        let r = Sim::new(base(f)).unwrap().run();
        assert!(r.counters.wc[usize::from(WC_SUCCESS)] > 0);
        assert!(r.counters.retries > 0, "{f:?}");
        assert_eq!(r.transfers_failed, 0, "{f:?}");
        assert!(r.leaks.is_clean(), "{f:?}: {:?}", r.leaks);
    }
}

#[test]
fn bad_configs_are_refused_with_a_message() {
    let mut cfg = base(FaultKind::DeviceFatal { sender: 0, nic: 0 });
    cfg.streams[0].rx = 5;
    assert!(Sim::new(cfg).is_err());
    let mut cfg = base(FaultKind::DeviceFatal { sender: 0, nic: 0 });
    cfg.senders = 0;
    assert!(Sim::new(cfg).is_err());
}

#[test]
fn faults_with_receiver_credit_return_every_grant() {
    use railyard_sim::stack::CreditConfig;
    for f in [
        FaultKind::RouteTimeout {
            sender: 0,
            nic: 0,
            rx: 0,
            dur_ns: 5_000_000,
        },
        FaultKind::QpError {
            sender: 0,
            nic: 1,
            rx: 0,
        },
        FaultKind::PortDown {
            sender: 0,
            nic: 0,
            dur_ns: 3_000_000,
        },
        FaultKind::DeviceFatal { sender: 0, nic: 1 },
    ] {
        let mut cfg = base(f);
        cfg.receivers[0].slot_capacity = 8;
        cfg.receivers[0].byte_capacity = 8 << 20;
        cfg.stack.credit = Some(CreditConfig { lease_batch: 2 });
        let r = Sim::new(cfg).unwrap().run();
        assert!(r.credit.grants > 0 && r.credit.usage_reports > 0, "{f:?}");
        assert_eq!(r.credit.errors, 0, "{f:?}");
        assert!(r.rx[0].peak_slots <= 8 && r.rx[0].violations == 0, "{f:?}");
        assert!(r.counters.retries > 0, "{f:?}");
        assert!(r.leaks.is_clean(), "{f:?}: {:?}", r.leaks);
    }
}
