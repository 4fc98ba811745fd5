//! libibverbs' own entry points, found behind this library with
//! `dlvsym(RTLD_NEXT, name, "IBVERBS_1.1")`.
//!
//! The version matters: libibverbs also exports `IBVERBS_1.0` compat
//! symbols with the old structure layouts, and an unversioned lookup can
//! land on one of them (a crash on the first call). Every hooked function
//! is called only through these pointers: a direct call from this library
//! would bind to its own export and recurse.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::OnceLock;

use rdma_sys::{
    ibv_async_event, ibv_comp_channel, ibv_context, ibv_cq, ibv_device, ibv_pd, ibv_qp,
    ibv_qp_attr, ibv_qp_init_attr,
};

pub(crate) type OpenDevice = unsafe extern "C" fn(*mut ibv_device) -> *mut ibv_context;
pub(crate) type CloseDevice = unsafe extern "C" fn(*mut ibv_context) -> c_int;
pub(crate) type CreateQp = unsafe extern "C" fn(*mut ibv_pd, *mut ibv_qp_init_attr) -> *mut ibv_qp;
pub(crate) type ModifyQp = unsafe extern "C" fn(*mut ibv_qp, *mut ibv_qp_attr, c_int) -> c_int;
pub(crate) type DestroyQp = unsafe extern "C" fn(*mut ibv_qp) -> c_int;
pub(crate) type CreateCq = unsafe extern "C" fn(
    *mut ibv_context,
    c_int,
    *mut c_void,
    *mut ibv_comp_channel,
    c_int,
) -> *mut ibv_cq;
pub(crate) type DestroyCq = unsafe extern "C" fn(*mut ibv_cq) -> c_int;
pub(crate) type GetAsyncEvent =
    unsafe extern "C" fn(*mut ibv_context, *mut ibv_async_event) -> c_int;

/// The real entry points (each `None` if libibverbs lacks it: the hook then
/// fails the call with `ENOSYS` instead of crashing).
pub(crate) struct Real {
    pub open_device: Option<OpenDevice>,
    pub close_device: Option<CloseDevice>,
    pub create_qp: Option<CreateQp>,
    pub modify_qp: Option<ModifyQp>,
    pub destroy_qp: Option<DestroyQp>,
    pub create_cq: Option<CreateCq>,
    pub destroy_cq: Option<DestroyCq>,
    pub get_async_event: Option<GetAsyncEvent>,
}

const VERSION: &CStr = c"IBVERBS_1.1";

fn find(name: &CStr) -> *mut c_void {
    // SAFETY: both strings are NUL-terminated and live for the call;
    // dlvsym only reads them.
    unsafe {
        libc::dlvsym(
            libc::RTLD_NEXT,
            name.as_ptr() as *const c_char,
            VERSION.as_ptr() as *const c_char,
        )
    }
}

macro_rules! entry {
    ($name:literal, $ty:ty) => {{
        let p = find($name);
        if p.is_null() {
            None
        } else {
            // SAFETY: libibverbs exports this symbol at IBVERBS_1.1 with
            // exactly this C signature (infiniband/verbs.h).
            Some(unsafe { std::mem::transmute::<*mut c_void, $ty>(p) })
        }
    }};
}

/// The real entry points, looked up once.
pub(crate) fn real() -> &'static Real {
    static REAL: OnceLock<Real> = OnceLock::new();
    REAL.get_or_init(|| Real {
        open_device: entry!(c"ibv_open_device", OpenDevice),
        close_device: entry!(c"ibv_close_device", CloseDevice),
        create_qp: entry!(c"ibv_create_qp", CreateQp),
        modify_qp: entry!(c"ibv_modify_qp", ModifyQp),
        destroy_qp: entry!(c"ibv_destroy_qp", DestroyQp),
        create_cq: entry!(c"ibv_create_cq", CreateCq),
        destroy_cq: entry!(c"ibv_destroy_cq", DestroyCq),
        get_async_event: entry!(c"ibv_get_async_event", GetAsyncEvent),
    })
}
