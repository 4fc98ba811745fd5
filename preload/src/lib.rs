//! # railyard-preload
//!
//! railyard under an RDMA program nobody recompiled: `LD_PRELOAD` this
//! library (`librailyard_preload.so`) and every work request the program
//! posts goes through railyard's **composed hot path**
//! (`railyard_core::completion`, the same one the engine uses): completion
//! ownership (RFC 3136) and shared congestion control (RFC 4162), for a
//! binary as its publisher shipped it.
//!
//! ```sh
//! LD_PRELOAD=target/release/librailyard_preload.so MC_ADAPTIVE_CC_MODE=enforce \
//!     MC_RAILYARD_STATS=stats.json transfer_engine_bench --mode=initiator ...
//! ```
//!
//! ## How it sees every post and every poll
//!
//! `ibv_post_send` and `ibv_poll_cq` are inline functions in
//! `<infiniband/verbs.h>`: they call `qp->context->ops.post_send` and
//! `cq->context->ops.poll_cq`. The context comes from the exported
//! `ibv_open_device`, which this library interposes: after libibverbs
//! opened the device, the context's two entries are replaced with
//! railyard's, which call the provider's own. The other hooks are the
//! exported QP / CQ / async-event entry points (`ibv_create_qp`,
//! `ibv_modify_qp`, `ibv_destroy_qp`, `ibv_create_cq`, `ibv_destroy_cq`,
//! `ibv_get_async_event`, `ibv_close_device`). Each reaches libibverbs
//! through `dlvsym(RTLD_NEXT, name, "IBVERBS_1.1")` (see the `real` module).
//!
//! What each event does is in [`state`]'s table. In short: a QP is an
//! endpoint from RTS to error / reset / destroy; `wr_id` becomes a token
//! on the way down (XOR-masked with a per-process key) and the
//! application's own `wr_id` comes back in every completion it polls; its
//! chain is posted as it built it and left exactly as it gave it (a
//! `bad_wr` points into its own chain); unsignaled work requests are
//! completed, in order, by the next completion of their send queue; a
//! request CC defers is never an error: it and every later request of its
//! QP are copied into a bounded per-QP queue ([`defer`]) and posted in
//! order as permits free (from the program's own post and poll calls, and
//! from the preload's monitor thread, which also runs the CC epoch and
//! endpoint reclaim). Only a full queue answers `ENOMEM` with `bad_wr`
//! set, as a full send queue would.
//!
//! ## What it does not cover
//!
//! QPs and CQs of the extended API (`ibv_create_qp_ex` beyond a plain PD,
//! `ibv_create_cq_ex`, `ibv_wr_*` posting) and `mlx5dv_create_qp` QPs are
//! passed through untouched, with one warning naming them, and counted.
//! QPs that are not RC are passed through. Receives are not touched (a
//! receive completion keeps the `wr_id` the provider gave it).
//!
//! ## Cost
//!
//! Instructions per work request (its post and its completion), callgrind,
//! against the provider alone (`examples/icount.rs`, `ci/icount.sh`; the
//! host tests' in-memory provider, so only the preload's own work is
//! counted), 2026-12-03: provider 204, preload with CC off 1259, with CC
//! enforce 1436. Of the ~1055 the preload adds with CC off, ~400 are the
//! composed hot path itself (slice, endpoint, token; see
//! `railyard_core::completion`), the rest the QP and CQ lookups, the post
//! and poll locks, one clock read per call, the post-order record and the
//! application's `wr_id` kept and restored. A 64 KiB request on Soft-RoCE
//! costs the provider and kernel tens of microseconds.
//!
//! Configuration: [`config`]. Counters: [`stats`] (`MC_RAILYARD_STATS=FILE`:
//! JSON at exit and on `SIGUSR1`). Nothing is logged per work request, and a
//! Rust panic never unwinds into the program: it is caught at the hook,
//! counted, and the call fails as the provider's would.

pub mod config;
pub mod defer;
#[doc(hidden)]
pub mod fake;
mod real;
pub mod state;
pub mod stats;

use std::ffi::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use rdma_sys::{
    ibv_async_event, ibv_comp_channel, ibv_context, ibv_cq, ibv_cq_ex, ibv_cq_init_attr_ex,
    ibv_device, ibv_device_attr, ibv_pd, ibv_qp, ibv_qp_attr, ibv_qp_attr_mask, ibv_qp_init_attr,
    ibv_qp_init_attr_ex, ibv_qp_state, ibv_qp_type, ibv_send_wr, ibv_wc, verbs_context,
};

use crate::config::{LogLevel, PreloadConfig};
use crate::state::{State, Warn};

static STATE: OnceLock<Option<State>> = OnceLock::new();
static DEVICES: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
static DUMP: AtomicBool = AtomicBool::new(false);

/// Runs `f`, catching a panic: counted, and `fallback` returned instead.
fn boundary<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(_) => {
            if let Some(Some(s)) = STATE.get() {
                s.count_panic();
            }
            fallback
        }
    }
}

fn set_errno(e: c_int) {
    // SAFETY: errno is this thread's.
    unsafe { *libc::__errno_location() = e };
}

/// The names of the machine's RDMA devices, in `ibv_get_device_list`
/// order: a device's index is its CC device domain.
fn device_names() -> &'static [Vec<u8>] {
    DEVICES.get_or_init(|| {
        let mut n = 0;
        // SAFETY: libibverbs' own function (not hooked); the list is freed
        // below after the names are copied.
        let list = unsafe { rdma_sys::ibv_get_device_list(&mut n) };
        if list.is_null() {
            return Vec::new();
        }
        let names = (0..n.max(0) as usize)
            .map(|i| {
                // SAFETY: the list holds `n` valid device pointers.
                let d = unsafe { *list.add(i) };
                name_of(d)
            })
            .collect();
        // SAFETY: the list came from ibv_get_device_list.
        unsafe { rdma_sys::ibv_free_device_list(list) };
        names
    })
}

fn name_of(d: *mut ibv_device) -> Vec<u8> {
    if d.is_null() {
        return Vec::new();
    }
    // SAFETY: `d` is a valid device; its name is a NUL-terminated string
    // owned by libibverbs for the device's lifetime.
    let p = unsafe { rdma_sys::ibv_get_device_name(d) };
    if p.is_null() {
        return Vec::new();
    }
    // SAFETY: as above.
    unsafe { std::ffi::CStr::from_ptr(p) }.to_bytes().to_vec()
}

/// The process's state, built at the first device open (`None`: a refused
/// configuration; then nothing is changed anywhere).
fn state() -> Option<&'static State> {
    STATE.get_or_init(init).as_ref()
}

fn init() -> Option<State> {
    let cfg = match PreloadConfig::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("railyard-preload: {e}; railyard stays out of the way (nothing is changed)");
            return None;
        }
    };
    let devices = device_names().len().clamp(1, 64) as u16;
    let st = match State::new(cfg, devices) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("railyard-preload: cannot start ({e}); railyard stays out of the way");
            return None;
        }
    };
    st.log(
        LogLevel::Info,
        format_args!(
            "on: CC {}, {} devices, {} tokens, {} QPs of depth {}",
            st.cfg.cc.mode.as_str(),
            devices,
            st.cfg.tokens,
            st.cfg.qps,
            st.cfg.qp_depth
        ),
    );
    let _ = std::thread::Builder::new()
        .name("railyard-monitor".into())
        .spawn(monitor);
    if st.cfg.stats.is_some() {
        // SAFETY: registering a plain extern "C" function.
        unsafe { libc::atexit(at_exit) };
        install_sigusr1();
    }
    Some(st)
}

/// The monitor thread: CC epochs, endpoint reclaim, held-back work, and
/// the stats file on `SIGUSR1`, every 5 ms.
fn monitor() {
    let Some(st) = state() else { return };
    let mut polls = 0;
    loop {
        std::thread::sleep(Duration::from_millis(5));
        polls = boundary(polls, || st.tick(polls));
        if DUMP.swap(false, Ordering::Relaxed) {
            boundary((), || write_stats(st));
        }
    }
}

fn write_stats(st: &State) {
    let Some(path) = st.cfg.stats.as_ref() else {
        return;
    };
    let s = st.stats();
    let Ok(json) = serde_json::to_string_pretty(&s) else {
        return;
    };
    let tmp = path.with_extension("tmp");
    if std::fs::write(&tmp, json + "\n")
        .and_then(|_| std::fs::rename(&tmp, path))
        .is_err()
    {
        st.log(
            LogLevel::Warn,
            format_args!("cannot write MC_RAILYARD_STATS={}", path.display()),
        );
    }
}

extern "C" fn at_exit() {
    boundary((), || {
        if let Some(Some(st)) = STATE.get() {
            write_stats(st);
        }
    });
}

static mut OLD_USR1: Option<libc::sigaction> = None;

extern "C" fn on_usr1(sig: c_int, info: *mut libc::siginfo_t, uctx: *mut c_void) {
    DUMP.store(true, Ordering::Relaxed);
    // SAFETY: written once before the handler was installed, never after.
    let old = unsafe { *std::ptr::addr_of!(OLD_USR1) };
    if let Some(old) = old {
        let h = old.sa_sigaction;
        if h != libc::SIG_DFL && h != libc::SIG_IGN {
            if old.sa_flags & libc::SA_SIGINFO != 0 {
                // SAFETY: the previous handler, called as it asked to be.
                let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) =
                    unsafe { std::mem::transmute(h) };
                f(sig, info, uctx);
            } else {
                // SAFETY: as above.
                let f: extern "C" fn(c_int) = unsafe { std::mem::transmute(h) };
                f(sig);
            }
        }
    }
}

fn install_sigusr1() {
    // SAFETY: a zeroed sigaction is valid; we fill handler and flags, save
    // the old action first, and the handler only stores an atomic (and
    // chains to the program's own handler, if it had one).
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGUSR1, std::ptr::null(), &mut old) != 0 {
            return;
        }
        *std::ptr::addr_of_mut!(OLD_USR1) = Some(old);
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_usr1 as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut());
    }
}

// ---- the context's data-path entries ----

unsafe extern "C" fn hook_post_send(
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad: *mut *mut ibv_send_wr,
) -> c_int {
    boundary(libc::EIO, || {
        let Some(Some(st)) = STATE.get() else {
            return libc::EINVAL;
        };
        // SAFETY: the verbs contract: `qp` is a live QP of a context whose
        // ops we wrapped.
        let ctx = unsafe { (*qp).context } as usize;
        let Some(real) = st.ctx_index(ctx).and_then(|i| st.post_send_of(i)) else {
            return libc::EINVAL;
        };
        // SAFETY: the caller's verbs contract, forwarded; `real` is the
        // provider's post_send of this context.
        unsafe { st.post(real, qp, wr, bad) }
    })
}

unsafe extern "C" fn hook_poll_cq(cq: *mut ibv_cq, n: c_int, wc: *mut ibv_wc) -> c_int {
    boundary(-1, || {
        let Some(Some(st)) = STATE.get() else {
            return -1;
        };
        // SAFETY: the verbs contract: `cq` is a live CQ of a context whose
        // ops we wrapped.
        let ctx = unsafe { (*cq).context } as usize;
        let Some(ci) = st.ctx_index(ctx) else {
            return -1;
        };
        let Some(real) = st.poll_cq_of(ci) else {
            return -1;
        };
        // SAFETY: the caller's verbs contract, forwarded; `real` is the
        // provider's poll_cq of this context.
        unsafe { st.poll(real, ci, cq, n, wc) }
    })
}

/// The `verbs_context` around `ctx`, if the provider has one.
///
/// # Safety
/// `ctx` is a live context.
unsafe fn verbs_ctx(ctx: *mut ibv_context) -> Option<*mut verbs_context> {
    // SAFETY: caller contract.
    if unsafe { (*ctx).abi_compat } as usize != u32::MAX as usize {
        return None;
    }
    let off = std::mem::offset_of!(verbs_context, context);
    Some((ctx as *mut u8).wrapping_sub(off) as *mut verbs_context)
}

/// The provider's own extended-API constructor of context `ctx` (`pick`
/// chooses which), for a passthrough hook; `None` with errno set.
fn ext_entry(
    ctx: *mut ibv_context,
    pick: fn(&state::CtxSlot) -> usize,
) -> Option<(&'static State, usize)> {
    let found = STATE.get().and_then(Option::as_ref).and_then(|st| {
        let orig = pick(&st.ctxs[st.ctx_index(ctx as usize)?]);
        (orig != 0).then_some((st, orig))
    });
    if found.is_none() {
        set_errno(libc::EOPNOTSUPP);
    }
    found
}

/// Counts and names (once) an object of the extended API, passed through.
fn passed_through(st: &State, what: Warn, msg: std::fmt::Arguments<'_>) {
    boundary((), || {
        st.count_ext(what);
        st.warn_once(what, msg);
    });
}

unsafe extern "C" fn hook_create_qp_ex(
    ctx: *mut ibv_context,
    attr: *mut ibv_qp_init_attr_ex,
) -> *mut ibv_qp {
    let Some((st, orig)) = ext_entry(ctx, |c| c.create_qp_ex.load(Ordering::Relaxed)) else {
        return std::ptr::null_mut();
    };
    type F = unsafe extern "C" fn(*mut ibv_context, *mut ibv_qp_init_attr_ex) -> *mut ibv_qp;
    // SAFETY: stored from the provider's own create_qp_ex of this context.
    let f: F = unsafe { std::mem::transmute::<usize, F>(orig) };
    // SAFETY: the caller's verbs contract, forwarded.
    let qp = unsafe { f(ctx, attr) };
    if !qp.is_null() {
        passed_through(st, Warn::Ext, format_args!("a QP of the extended API (ibv_create_qp_ex) is passed through untouched (counted: qps_ext)"));
    }
    qp
}

unsafe extern "C" fn hook_create_cq_ex(
    ctx: *mut ibv_context,
    attr: *mut ibv_cq_init_attr_ex,
) -> *mut ibv_cq_ex {
    let Some((st, orig)) = ext_entry(ctx, |c| c.create_cq_ex.load(Ordering::Relaxed)) else {
        return std::ptr::null_mut();
    };
    type F = unsafe extern "C" fn(*mut ibv_context, *mut ibv_cq_init_attr_ex) -> *mut ibv_cq_ex;
    // SAFETY: stored from the provider's own create_cq_ex of this context.
    let f: F = unsafe { std::mem::transmute::<usize, F>(orig) };
    // SAFETY: the caller's verbs contract, forwarded.
    let cq = unsafe { f(ctx, attr) };
    if !cq.is_null() {
        passed_through(st, Warn::ExtCq, format_args!("a CQ of the extended API (ibv_create_cq_ex) is passed through untouched (counted: cqs_ext)"));
    }
    cq
}

/// Wraps a freshly opened context's data-path entries.
///
/// # Safety
/// `ctx` is a context libibverbs just opened on `device`, not yet handed
/// to the program.
unsafe fn wrap_context(ctx: *mut ibv_context, device: *mut ibv_device) {
    let Some(st) = state() else { return };
    let name = name_of(device);
    let dev = device_names().iter().position(|n| *n == name).unwrap_or(0) as u16;
    // SAFETY: a zeroed device attribute struct is valid to be written.
    let mut attr: ibv_device_attr = unsafe { std::mem::zeroed() };
    // SAFETY: libibverbs' own query (not hooked) on a live context.
    let vendor = if unsafe { rdma_sys::ibv_query_device(ctx, &mut attr) } == 0 {
        attr.vendor_id
    } else {
        0
    };
    // SAFETY: `ctx` is live and not yet shared (caller contract).
    let ops = unsafe { &mut (*ctx).ops };
    let (Some(post), Some(poll)) = (ops.post_send, ops.poll_cq) else {
        return;
    };
    let Some(i) = st.add_context(ctx as usize, dev, post, poll, vendor) else {
        st.log(
            LogLevel::Warn,
            format_args!(
                "more than {} device contexts: this one is not managed",
                state::MAX_CONTEXTS
            ),
        );
        return;
    };
    ops.post_send = Some(hook_post_send);
    ops.poll_cq = Some(hook_poll_cq);
    // SAFETY: as above; the extended entries live in the verbs_context
    // around `ctx` when its size covers them.
    if let Some(vc) = unsafe { verbs_ctx(ctx) } {
        // SAFETY: `vc` is the provider's verbs_context of `ctx`.
        let vcr = unsafe { &mut *vc };
        let covers = |off: usize| vcr.sz >= std::mem::size_of::<verbs_context>() - off;
        if covers(std::mem::offset_of!(verbs_context, create_qp_ex)) {
            if let Some(f) = vcr.create_qp_ex {
                st.ctxs[i].create_qp_ex.store(f as usize, Ordering::Relaxed);
                vcr.create_qp_ex = Some(hook_create_qp_ex);
            }
        }
        if covers(std::mem::offset_of!(verbs_context, create_cq_ex)) {
            if let Some(f) = vcr.create_cq_ex {
                st.ctxs[i].create_cq_ex.store(f as usize, Ordering::Relaxed);
                vcr.create_cq_ex = Some(hook_create_cq_ex);
            }
        }
    }
}

// ---- the exported entry points ----

/// `ibv_open_device`: libibverbs' own, then the context's `post_send` and
/// `poll_cq` wrapped (see the crate docs).
///
/// # Safety
/// The verbs contract of `ibv_open_device`.
#[no_mangle]
pub unsafe extern "C" fn ibv_open_device(device: *mut ibv_device) -> *mut ibv_context {
    let Some(open) = real::real().open_device else {
        set_errno(libc::ENOSYS);
        return std::ptr::null_mut();
    };
    // SAFETY: the caller's verbs contract, forwarded.
    let ctx = unsafe { open(device) };
    if !ctx.is_null() {
        // SAFETY: just opened, not yet returned to the program.
        boundary((), || unsafe { wrap_context(ctx, device) });
    }
    ctx
}

/// `ibv_close_device`: the context forgotten, then libibverbs' own.
///
/// # Safety
/// The verbs contract of `ibv_close_device`.
#[no_mangle]
pub unsafe extern "C" fn ibv_close_device(ctx: *mut ibv_context) -> c_int {
    let Some(close) = real::real().close_device else {
        return libc::ENOSYS;
    };
    if let Some(Some(st)) = STATE.get() {
        boundary((), || st.remove_context(ctx as usize));
    }
    // SAFETY: the caller's verbs contract, forwarded.
    unsafe { close(ctx) }
}

/// `ibv_create_qp`: libibverbs' own; an RC QP becomes a managed slot.
///
/// # Safety
/// The verbs contract of `ibv_create_qp`.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_qp(
    pd: *mut ibv_pd,
    attr: *mut ibv_qp_init_attr,
) -> *mut ibv_qp {
    let Some(create) = real::real().create_qp else {
        set_errno(libc::ENOSYS);
        return std::ptr::null_mut();
    };
    // SAFETY: the caller's verbs contract, forwarded.
    let qp = unsafe { create(pd, attr) };
    if qp.is_null() || attr.is_null() {
        return qp;
    }
    if let Some(Some(st)) = STATE.get() {
        boundary((), || {
            // SAFETY: a live QP just created, and its init attributes (the
            // provider wrote the granted capabilities back into `cap`).
            let (q, a) = unsafe { (&*qp, &*attr) };
            st.add_qp(
                qp as usize,
                q.context as usize,
                q.qp_num,
                q.send_cq as usize,
                q.qp_type == ibv_qp_type::IBV_QPT_RC,
                (a.cap.max_send_wr, a.cap.max_send_sge, a.cap.max_inline_data),
            );
        });
    }
    qp
}

/// `ibv_modify_qp`: libibverbs' own, then the state change: RTR names the
/// route, RTS opens the endpoint, ERR / SQE retire it, RESET flushes it.
///
/// # Safety
/// The verbs contract of `ibv_modify_qp`.
#[no_mangle]
pub unsafe extern "C" fn ibv_modify_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    mask: c_int,
) -> c_int {
    let Some(modify) = real::real().modify_qp else {
        return libc::ENOSYS;
    };
    // SAFETY: the caller's verbs contract, forwarded.
    let rc = unsafe { modify(qp, attr, mask) };
    if rc != 0 || attr.is_null() || mask as u32 & ibv_qp_attr_mask::IBV_QP_STATE.0 == 0 {
        return rc;
    }
    if let Some(Some(st)) = STATE.get() {
        boundary((), || {
            // SAFETY: the caller's attributes, valid for reads.
            let a = unsafe { &*attr };
            let q = qp as usize;
            match a.qp_state {
                ibv_qp_state::IBV_QPS_RTR if mask as u32 & ibv_qp_attr_mask::IBV_QP_AV.0 != 0 => {
                    let ah = &a.ah_attr;
                    let remote = if ah.is_global != 0 {
                        // SAFETY: a GID is 16 plain bytes in either view.
                        unsafe { ah.grh.dgid.raw }
                    } else {
                        let mut k = [0u8; 16];
                        k[..2].copy_from_slice(&ah.dlid.to_be_bytes());
                        k
                    };
                    st.qp_rtr(q, remote);
                }
                ibv_qp_state::IBV_QPS_RTS => st.qp_rts(q),
                ibv_qp_state::IBV_QPS_ERR | ibv_qp_state::IBV_QPS_SQE => st.qp_error(q),
                ibv_qp_state::IBV_QPS_RESET => st.qp_reset(q),
                _ => {}
            }
        });
    }
    rc
}

/// `ibv_destroy_qp`: nothing posts to the QP from here on, then
/// libibverbs' own; its outstanding tokens complete as flushed.
///
/// # Safety
/// The verbs contract of `ibv_destroy_qp`.
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int {
    let Some(destroy) = real::real().destroy_qp else {
        return libc::ENOSYS;
    };
    let st = STATE.get().and_then(Option::as_ref);
    let closing = st.and_then(|st| boundary(None, || st.qp_closing(qp as usize)));
    // SAFETY: the caller's verbs contract, forwarded.
    let rc = unsafe { destroy(qp) };
    if let (Some(st), Some(c)) = (st, closing) {
        boundary((), || {
            if rc == 0 {
                st.qp_destroyed(c);
            } else {
                st.qp_close_aborted(qp as usize, c);
            }
        });
    }
    rc
}

/// `ibv_create_cq`: libibverbs' own; the CQ gets its own poll lock.
///
/// # Safety
/// The verbs contract of `ibv_create_cq`.
#[no_mangle]
pub unsafe extern "C" fn ibv_create_cq(
    ctx: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ibv_cq {
    let Some(create) = real::real().create_cq else {
        set_errno(libc::ENOSYS);
        return std::ptr::null_mut();
    };
    // SAFETY: the caller's verbs contract, forwarded.
    let cq = unsafe { create(ctx, cqe, cq_context, channel, comp_vector) };
    if !cq.is_null() {
        if let Some(Some(st)) = STATE.get() {
            boundary((), || st.add_cq(cq as usize));
        }
    }
    cq
}

/// `ibv_destroy_cq`: forgotten first, then libibverbs' own.
///
/// # Safety
/// The verbs contract of `ibv_destroy_cq`.
#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int {
    let Some(destroy) = real::real().destroy_cq else {
        return libc::ENOSYS;
    };
    let st = STATE.get().and_then(Option::as_ref);
    let slot = st.and_then(|st| boundary(None, || st.remove_cq(cq as usize)));
    // SAFETY: the caller's verbs contract, forwarded.
    let rc = unsafe { destroy(cq) };
    if let (Some(st), Some(i), true) = (st, slot, rc != 0) {
        boundary((), || st.cq_close_aborted(cq as usize, i));
    }
    rc
}

/// `ibv_get_async_event`: libibverbs' own, then the event classified in
/// core and applied at its scope (CC feedback, endpoints retired); the
/// program gets the event unchanged.
///
/// # Safety
/// The verbs contract of `ibv_get_async_event`.
#[no_mangle]
pub unsafe extern "C" fn ibv_get_async_event(
    ctx: *mut ibv_context,
    ev: *mut ibv_async_event,
) -> c_int {
    let Some(get) = real::real().get_async_event else {
        return -1;
    };
    // SAFETY: the caller's verbs contract, forwarded.
    let rc = unsafe { get(ctx, ev) };
    if rc != 0 || ev.is_null() {
        return rc;
    }
    if let Some(Some(st)) = STATE.get() {
        boundary((), || {
            let Some(ci) = st.ctx_index(ctx as usize) else {
                return;
            };
            // SAFETY: libibverbs filled the event; which union member is
            // valid follows from its type (verbs.h).
            let (t, qp, cq) = unsafe {
                let e = &*ev;
                let t = e.event_type as u32;
                let qp = matches!(t, 1..=7 | 16).then(|| e.element.qp as usize);
                let cq = (t == 0).then_some(e.element.cq as usize);
                (t, qp, cq)
            };
            st.on_event(ci, t, qp, cq);
        });
    }
    rc
}

/// `mlx5dv_create_qp` (for programs linked against libmlx5): the
/// provider's own, passed through untouched, with one warning, counted.
///
/// # Safety
/// The contract of `mlx5dv_create_qp`.
#[no_mangle]
pub unsafe extern "C" fn mlx5dv_create_qp(
    ctx: *mut ibv_context,
    attr: *mut ibv_qp_init_attr_ex,
    mlx5_attr: *mut c_void,
) -> *mut ibv_qp {
    // SAFETY: a NUL-terminated name; the symbol, if present, is libmlx5's
    // with exactly this C signature.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, c"mlx5dv_create_qp".as_ptr()) };
    if p.is_null() {
        set_errno(libc::EOPNOTSUPP);
        return std::ptr::null_mut();
    }
    type F = unsafe extern "C" fn(
        *mut ibv_context,
        *mut ibv_qp_init_attr_ex,
        *mut c_void,
    ) -> *mut ibv_qp;
    // SAFETY: as above.
    let f: F = unsafe { std::mem::transmute::<*mut c_void, F>(p) };
    // SAFETY: the caller's contract, forwarded.
    let qp = unsafe { f(ctx, attr, mlx5_attr) };
    if !qp.is_null() {
        if let Some(Some(st)) = STATE.get() {
            passed_through(
                st,
                Warn::Mlx5dv,
                format_args!("an mlx5dv QP is passed through untouched (counted: qps_mlx5dv)"),
            );
        }
    }
    qp
}

#[cfg(test)]
mod tests;
