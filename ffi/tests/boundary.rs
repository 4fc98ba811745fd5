//! Boundary properties checked from Rust: every entry point runs under the
//! panic guard, every status has a name matching the header, and handles
//! stay safe when destroyed concurrently with use.

use std::ffi::CStr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use railyard_ffi::ry_status;
use railyard_ffi::token::{
    ry_token_claim, ry_token_complete, ry_token_pool, ry_token_pool_create, ry_token_pool_destroy,
    ry_token_record,
};

fn status_name(v: i32) -> String {
    // SAFETY: ry_status_name returns a static NUL-terminated string.
    unsafe { CStr::from_ptr(railyard_ffi::ry_status_name(v)) }
        .to_str()
        .unwrap()
        .to_string()
}

fn claim(pool: ry_token_pool, rec: &ry_token_record, wr: &mut u64) -> ry_status {
    // SAFETY: both pointers come from live references.
    unsafe { ry_token_claim(pool, rec, wr) }
}

fn complete(pool: ry_token_pool, wr: u64, out: &mut ry_token_record) -> ry_status {
    // SAFETY: the pointer comes from a live reference.
    unsafe { ry_token_complete(pool, wr, out) }
}

/// Every `extern "C" fn` documents ownership and thread-safety, and its
/// body is one call of an entry-point helper that runs it under the panic
/// guard (`guard(`, or `ret(` / `ret_opt(` inside the `unsafe` block its
/// `// SAFETY:` comment justifies), so no panic can cross the boundary,
/// except the three that cannot panic.
#[test]
fn every_entry_point_runs_under_the_panic_guard() {
    let exempt = ["ry_last_error_message", "ry_status_name", "ry_abi_version"];
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut seen = 0;
    for f in std::fs::read_dir(&src).unwrap() {
        let path = f.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let all: Vec<&str> = text.lines().collect();
        let mut lines = text.lines().enumerate();
        while let Some((at, l)) = lines.next() {
            if l.trim_start().starts_with("#[cfg(test)]") {
                break; // unit tests (their C callbacks are not entry points)
            }
            let Some(rest) = l.split("extern \"C\" fn ").nth(1) else {
                continue;
            };
            let name = rest.split('(').next().unwrap().trim();
            seen += 1;
            // The doc comment (flows into the header) states ownership and
            // thread-safety.
            let doc: String = all[..at]
                .iter()
                .rev()
                .skip_while(|d| d.trim_start().starts_with("#["))
                .take_while(|d| d.trim_start().starts_with("///"))
                .copied()
                .collect();
            for word in ["Ownership", "Thread-safety"] {
                assert!(doc.contains(word), "{name}: doc does not state {word}");
            }
            if exempt.contains(&name) {
                continue;
            }
            // Skip the rest of the signature up to the opening brace.
            let mut sig = l.to_string();
            while !sig.trim_end().ends_with('{') {
                sig = lines.next().expect("signature ends").1.to_string();
            }
            // The first line of code (comments skipped); a bare `unsafe {`
            // opens the block around the helper's call on the next line.
            let mut code = lines
                .by_ref()
                .map(|(_, l)| l.trim())
                .filter(|l| !l.starts_with("//"));
            let mut body = code.next().expect("body").to_string();
            if body == "unsafe {" {
                body = format!("unsafe {{ {}", code.next().expect("body"));
            }
            let call = body.strip_prefix("unsafe { ").unwrap_or(&body);
            assert!(
                ["guard(", "ret(", "ret_opt("]
                    .iter()
                    .any(|h| call.starts_with(h)),
                "{name} in {} does not start with guard(, ret( or ret_opt(: {body}",
                path.display()
            );
        }
    }
    assert!(seen > 60, "found only {seen} entry points");
}

/// Every `RY_STATUS_*` constant of the header has its own name from
/// `ry_status_name`, and nothing else does.
#[test]
fn every_status_has_its_header_name() {
    let header =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("include/railyard.h"))
            .unwrap();
    let mut n = 0;
    for l in header.lines() {
        let l = l.trim();
        let Some(rest) = l.strip_prefix("RY_STATUS_") else {
            continue;
        };
        let (name, value) = rest.split_once(" = ").unwrap();
        let value: i32 = value.trim_end_matches(',').parse().unwrap();
        assert_eq!(status_name(value), format!("RY_STATUS_{name}"));
        n += 1;
    }
    assert!(n > 50, "parsed {n} statuses");
    assert_eq!(status_name(-1000), "RY_STATUS_UNKNOWN");
}

/// One thread claims and completes in a loop while another destroys the
/// pool: the worker sees OK until it sees INVALID_HANDLE, never a crash,
/// and a record is never completed twice.
#[test]
fn destroy_while_in_use_is_safe() {
    for _ in 0..20 {
        let mut pool = ry_token_pool::default();
        // SAFETY: `pool` is a live local.
        let st = unsafe { ry_token_pool_create(64, &mut pool) };
        assert_eq!(st, ry_status::Ok);
        let started = Arc::new(AtomicBool::new(false));
        let s2 = started.clone();
        let worker = std::thread::spawn(move || {
            let rec = ry_token_record {
                bytes: 7,
                ..Default::default()
            };
            let mut ok = 0u64;
            loop {
                let mut wr = 0u64;
                let st = claim(pool, &rec, &mut wr);
                s2.store(true, Ordering::Release);
                if st == ry_status::InvalidHandle {
                    return ok;
                }
                assert_eq!(st, ry_status::Ok);
                let mut back = ry_token_record::default();
                let st = complete(pool, wr, &mut back);
                if st == ry_status::InvalidHandle {
                    return ok;
                }
                assert_eq!(st, ry_status::Ok);
                assert_eq!(back.bytes, 7);
                ok += 1;
            }
        });
        while !started.load(Ordering::Acquire) {
            std::hint::spin_loop();
        }
        assert_eq!(ry_token_pool_destroy(pool), ry_status::Ok);
        let _ = worker.join().expect("worker must not panic");
        assert_eq!(ry_token_pool_destroy(pool), ry_status::InvalidHandle);
    }
}

/// A length no buffer can have is a typed `InvalidArgument`, never the
/// abort of `from_raw_parts`' precondition check (which no panic guard
/// catches). The pointers are dangling but never read: the length is
/// refused first.
#[test]
fn impossible_lengths_are_typed_errors() {
    use railyard_ffi::rail::{ry_device_spec, ry_rail, ry_rail_config, ry_rail_create};
    use railyard_ffi::wire::{ry_wire_decode, ry_wire_encode, ry_wire_message};
    let mut msg = ry_wire_message::default();
    let mut n = 0usize;
    let dangling = std::ptr::NonNull::<u8>::dangling().as_ptr();
    // SAFETY: the length is refused before `buf` is touched; `out` is live.
    let s = unsafe { ry_wire_decode(dangling, usize::MAX, &mut msg) };
    assert_eq!(s, ry_status::InvalidArgument, "{}", status_name(s as i32));
    // SAFETY: as above; `msg` and `n` are live.
    let s = unsafe { ry_wire_encode(&msg, dangling, usize::MAX, &mut n) };
    assert!(
        matches!(s, ry_status::InvalidArgument),
        "{}",
        status_name(s as i32)
    );
    let spec = std::ptr::NonNull::<ry_device_spec>::dangling().as_ptr();
    let cfg = ry_rail_config::default();
    let mut rail = ry_rail::default();
    // SAFETY: as above; `cfg` and `rail` are live.
    let s = unsafe { ry_rail_create(spec, usize::MAX / 2, &cfg, &mut rail) };
    assert_eq!(s, ry_status::InvalidArgument, "{}", status_name(s as i32));
}
