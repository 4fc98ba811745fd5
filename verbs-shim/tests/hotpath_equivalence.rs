//! The engine and the simulator run the same composed hot path: one
//! scripted sequence of posts and completions — every WC status ibverbs
//! defines plus unknown ones, stale and duplicate completions, an endpoint
//! retired mid-flight, a full window — driven through the engine's layer
//! set (`engine::CcGate` + the rail selector) and through the simulator's
//! (`sim::stack::Stack`'s controller and selector) gives identical slice
//! outcomes, retries, refusals and releases step by step.
//!
//! No RDMA device is needed: both sides are the core composition over
//! plain tables; only the layer *types* differ, as they do in the real
//! integrators.

use railyard_core::cc::{CcConfig, Mode};
use railyard_core::classify::wc;
use railyard_core::completion::{
    CcLayer, HotPath, Layers, Path, PostRequest, RailLayer, Refusal, SliceEffect,
};
use railyard_core::endpoint::{EndpointConfig, EndpointHandle, EndpointTable, RetireReason};
use railyard_core::rail::{DeviceSpec, RailConfig, Selector};
use railyard_core::slice::{SliceRef, SliceTable};
use railyard_core::token::{TokenPool, WrId};
use railyard_sim::model::{NetConfig, ReceiverConfig, SimConfig};
use railyard_sim::stack::{Stack, StackConfig};
use railyard_verbs::engine::CcGate;

const WINDOW: u64 = 256 * 1024;

fn cc_config() -> CcConfig {
    CcConfig {
        mode: Mode::Enforce,
        min_window_bytes: WINDOW,
        max_window_bytes: WINDOW,
        hard_error_threshold: 1000,
        ..CcConfig::default()
    }
}

/// One step of the script.
#[derive(Clone, Copy, Debug)]
enum Op {
    /// Post slice `s` (its current attempt) on rail `k`.
    Post { s: u32, k: usize },
    /// The `n`-th posted WR completes with `status`.
    Complete { n: usize, status: u32 },
    /// The `n`-th posted WR's completion arrives again.
    Duplicate { n: usize },
    /// Retire rail `k`'s endpoint.
    Retire { k: usize },
    /// Open a new endpoint for rail `k` (the reconnect).
    Reopen { k: usize },
}

/// What one step did, in layer-independent terms.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Seen {
    Posted {
        device: u16,
        holds: u8,
    },
    Refused(String),
    Completed {
        effect: SliceEffect,
        faults: u8,
        drained: bool,
    },
    TokenError(String),
    Retired,
}

/// The tables one integrator owns.
struct Tables {
    tokens: TokenPool,
    slices: SliceTable,
    eps: EndpointTable<()>,
    ep: [EndpointHandle; 2],
}

impl Tables {
    fn new() -> Self {
        let eps = EndpointTable::new(EndpointConfig::default()).unwrap();
        let ep = [eps.open(()).unwrap(), eps.open(()).unwrap()];
        Tables {
            tokens: TokenPool::new(256).unwrap(),
            slices: SliceTable::new(64).unwrap(),
            eps,
            ep,
        }
    }
}

fn script() -> Vec<Op> {
    let mut v = vec![];
    // Every status: post a fresh slice, complete it with the status.
    let statuses: Vec<u32> = (0..=wc::MAX_KNOWN)
        .chain([wc::MAX_KNOWN + 1, 999])
        .collect();
    for (i, &st) in statuses.iter().enumerate() {
        v.push(Op::Post {
            s: i as u32,
            k: i % 2,
        });
        v.push(Op::Complete { n: i, status: st });
    }
    let base = statuses.len();
    // Duplicates of the first three completions.
    for n in 0..3 {
        v.push(Op::Duplicate { n });
    }
    // A window's worth and more on rail 0 (the 5th defers), then a retire
    // mid-flight and the flushes of what was posted.
    for j in 0..5 {
        v.push(Op::Post { s: 40 + j, k: 0 });
    }
    v.push(Op::Retire { k: 0 });
    v.push(Op::Post { s: 50, k: 0 }); // refused: retired endpoint
    v.push(Op::Reopen { k: 0 });
    for n in base..base + 4 {
        v.push(Op::Complete {
            n,
            status: wc::WR_FLUSH_ERR,
        });
    }
    // The retried attempts, now on the new endpoint, and a stale one: the
    // first flushed slice's old WR was already completed; post its retry
    // and complete it, then the old WR id again (stale).
    for j in 0..4 {
        v.push(Op::Post { s: 40 + j, k: 0 });
    }
    for n in base + 4..base + 8 {
        v.push(Op::Complete {
            n,
            status: wc::SUCCESS,
        });
    }
    v.push(Op::Duplicate { n: base });
    v
}

fn run<R: RailLayer, C: CcLayer>(
    t: &Tables,
    rail: R,
    cc: C,
    route_of: impl Fn(usize) -> u32,
    reopen: &mut dyn FnMut(usize) -> EndpointHandle,
) -> Vec<Seen> {
    let owner = HotPath::new(&t.tokens, &t.slices, &t.eps)
        .with_max_retries(3)
        .with_layers(Layers {
            credit: (),
            rail,
            cc,
        });
    let mut ep = t.ep;
    let mut current: Vec<Option<SliceRef>> = vec![None; 64];
    let mut posted: Vec<WrId> = vec![];
    let mut seen = vec![];
    for op in script() {
        match op {
            Op::Post { s, k } => {
                let r = match current[s as usize] {
                    Some(r) => r,
                    None => t.slices.open(s).unwrap(),
                };
                current[s as usize] = Some(r);
                let path = Path {
                    device: k as u16,
                    qp: 0,
                    route: route_of(k),
                    endpoint: ep[k],
                };
                match owner.post(PostRequest::on(r, path, 65536, 1).to_peer(0)) {
                    Ok(p) => {
                        posted.push(p.wr_id);
                        seen.push(Seen::Posted {
                            device: p.path.device,
                            holds: p.holds,
                        });
                    }
                    Err(e) => {
                        let kind = match e {
                            Refusal::Deferred { .. } => "deferred".into(),
                            Refusal::Endpoint { error, .. } => format!("endpoint {error:?}"),
                            other => format!("{other:?}"),
                        };
                        seen.push(Seen::Refused(kind));
                    }
                }
            }
            Op::Complete { n, status } => match owner.complete(posted[n], status, 0x17, 2) {
                Ok(d) => {
                    if let SliceEffect::Retry(next) = d.slice {
                        current[next.index as usize] = Some(next);
                    }
                    seen.push(Seen::Completed {
                        effect: d.slice,
                        faults: d.faults().bits(),
                        drained: d.released.endpoint == Ok(true),
                    });
                }
                Err(e) => seen.push(Seen::TokenError(format!("{e:?}"))),
            },
            Op::Duplicate { n } => match owner.complete(posted[n], wc::SUCCESS, 0, 3) {
                Ok(_) => seen.push(Seen::TokenError("accepted".into())),
                Err(e) => seen.push(Seen::TokenError(format!("{e:?}"))),
            },
            Op::Retire { k } => {
                t.eps.retire(ep[k], RetireReason::CqError, 1).unwrap();
                seen.push(Seen::Retired);
            }
            Op::Reopen { k } => {
                ep[k] = reopen(k);
                seen.push(Seen::Retired);
            }
        }
    }
    assert_eq!(t.tokens.in_use(), 0, "every token came back");
    assert_eq!(t.eps.outstanding_total(), 0);
    seen
}

#[test]
fn engine_and_simulator_compositions_agree_step_by_step() {
    // The engine's layers: its CC gate (2 devices, 4 routes each) and a
    // rail selector.
    let engine_tables = Tables::new();
    let gate = CcGate::with_devices(&cc_config(), 2, 4).unwrap();
    let sel = Selector::new(&[DeviceSpec::new(12_500_000_000); 2], RailConfig::default()).unwrap();
    let mut reopen_e = |_k: usize| engine_tables.eps.open(()).unwrap();
    let engine = run(
        &engine_tables,
        &sel,
        &gate,
        |k| gate.route_index(k as u16, 0),
        &mut reopen_e,
    );
    assert_eq!(gate.stats().in_flight_bytes, 0);
    assert_eq!(gate.stats().admitted, gate.stats().released);

    // The simulator's layers: its stack's controller and selector for one
    // sender with 2 NICs and one receiver.
    let sim_cfg = SimConfig {
        net: NetConfig {
            nics_per_host: 2,
            ..NetConfig::default()
        },
        receivers: vec![ReceiverConfig::default()],
        stack: StackConfig {
            cc: cc_config(),
            ..StackConfig::default()
        },
        ..SimConfig::default()
    };
    let stack = Stack::new(&sim_cfg).unwrap();
    let (cc, rail) = stack.layers(0);
    let sim_tables = Tables::new();
    let mut reopen_s = |_k: usize| sim_tables.eps.open(()).unwrap();
    let sim = run(&sim_tables, rail, cc, |k| k as u32, &mut reopen_s);
    assert_eq!(stack.held(), 0);

    assert_eq!(engine.len(), sim.len());
    for (i, (e, s)) in engine.iter().zip(&sim).enumerate() {
        assert_eq!(e, s, "step {i}: {:?}", script()[i]);
    }
    // The script exercised what it claims to.
    let count = |f: &dyn Fn(&Seen) -> bool| engine.iter().filter(|x| f(x)).count();
    assert!(
        count(&|x| matches!(
            x,
            Seen::Completed {
                effect: SliceEffect::Retry(_),
                ..
            }
        )) > 5
    );
    assert!(
        count(&|x| matches!(
            x,
            Seen::Completed {
                effect: SliceEffect::Settled(_),
                ..
            }
        )) > 5
    );
    assert!(count(&|x| matches!(x, Seen::TokenError(_))) >= 4);
    assert!(count(&|x| matches!(x, Seen::Refused(r) if r == "deferred")) >= 1);
    assert!(count(&|x| matches!(x, Seen::Refused(r) if r.starts_with("endpoint"))) >= 1);
}
