//! loom models of `railyard_core::pin::Pins`: memory deregistration (close)
//! racing posts that pin the region.
#![cfg(railyard_loom)]

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;
use railyard_core::pin::{PinError, Pins};

/// Stands in for the registered memory: a post reads it while pinned, the
/// deregistration frees (writes) it after a successful close. loom flags
/// any overlap.
struct Region(UnsafeCell<u32>);
// SAFETY: access is what the model checks; loom's cell reports any race.
unsafe impl Sync for Region {}

/// Two posters pin and use the region while a deregistration closes it:
/// the region is never freed while a pinned post uses it, a pin after the
/// close is refused, and the count ends at zero.
fn close_vs_pin_model() {
    loom::model(|| {
        let pins = Arc::new(Pins::new());
        let mem = Arc::new(Region(UnsafeCell::new(7)));
        let posters: Vec<_> = (0..2)
            .map(|_| {
                let (p, m) = (pins.clone(), mem.clone());
                thread::spawn(move || match p.try_pin(1) {
                    Ok(()) => {
                        // SAFETY: model access; loom checks exclusivity.
                        let v = m.0.with(|v| unsafe { *v });
                        assert_eq!(v, 7, "a pinned post saw freed memory");
                        p.unpin(1).unwrap();
                    }
                    Err(e) => assert_eq!(e, PinError::Closed),
                })
            })
            .collect();
        match pins.try_close() {
            Ok(()) => {
                // SAFETY: model access; loom checks exclusivity.
                mem.0.with_mut(|v| unsafe { *v = 0 });
                assert_eq!(pins.try_pin(1), Err(PinError::Closed));
            }
            Err(PinError::Busy(n)) => assert!((1..=2).contains(&n), "busy with {n}"),
            Err(e) => panic!("unexpected {e:?}"),
        }
        for t in posters {
            t.join().unwrap();
        }
        assert_eq!(pins.pins(), 0);
    });
}

#[test]
fn close_never_frees_memory_a_pinned_post_uses() {
    close_vs_pin_model();
}

#[cfg(railyard_broken = "pins_check_then_close")]
#[test]
#[should_panic]
fn broken_pins_check_then_close() {
    close_vs_pin_model();
}
