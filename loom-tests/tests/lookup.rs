//! loom models of `railyard_core::lookup::Lookup`: lock-free readers
//! against the one writer that publishes, removes and reuses slots.
#![cfg(railyard_loom)]

use loom::sync::Arc;
use loom::thread;
use railyard_core::lookup::Lookup;

/// A reader looks a key up while the writer publishes it: the reader sees
/// the key absent or with its value, never the slot's previous value.
fn publish_model() {
    loom::model(|| {
        // One slot: the new key lands where the old one was removed, so
        // the slot's stale value is what a broken publication exposes.
        let m = Arc::new(Lookup::new(1).unwrap());
        m.insert(5, 1).unwrap();
        m.remove(5);
        let r = {
            let m = m.clone();
            thread::spawn(move || m.get(7))
        };
        m.insert(7, 2).unwrap();
        let got = r.join().unwrap();
        assert!(got.is_none() || got == Some(2), "reader saw {got:?}");
        assert_eq!(m.get(7), Some(2));
    });
}

#[test]
fn a_published_key_is_never_seen_with_a_stale_value() {
    publish_model();
}

#[cfg(railyard_broken = "lookup_key_first")]
#[test]
#[should_panic]
fn broken_lookup_key_first() {
    publish_model();
}

/// A reader looks key A up while the writer removes A and reuses its slot
/// for B: the reader gets A's value or nothing, never B's.
fn reuse_model() {
    loom::model(|| {
        let m = Arc::new(Lookup::new(1).unwrap());
        m.insert(0xA, 10).unwrap();
        let r = {
            let m = m.clone();
            thread::spawn(move || m.get(0xA))
        };
        m.remove(0xA);
        m.insert(0xB, 20).unwrap();
        let got = r.join().unwrap();
        assert!(got.is_none() || got == Some(10), "key A read as {got:?}");
        assert_eq!(m.get(0xA), None);
        assert_eq!(m.get(0xB), Some(20));
    });
}

#[test]
fn a_reused_slot_never_lends_its_new_value_to_the_old_key() {
    reuse_model();
}

#[cfg(railyard_broken = "lookup_no_recheck")]
#[test]
#[should_panic]
fn broken_lookup_no_recheck() {
    reuse_model();
}
