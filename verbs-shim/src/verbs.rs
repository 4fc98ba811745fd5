//! Devices, context, protection domain, memory regions, completion queues and
//! RC queue pairs.
//!
//! Ownership mirrors verbs' object tree: every child holds an `Arc` of its
//! parent (MR → PD → context, QP → PD and CQs, CQ → context), so a parent is
//! never destroyed while a child still exists, whatever order handles are
//! dropped in.
//!
//! `unsafe` in this crate is confined to this module. The only promise left
//! to the caller is the one verbs cannot check: memory a posted work request
//! names must stay registered until its completion is polled (or its QP has
//! been moved to the error state and flushed). That is why
//! [`QueuePair::post_write`] and [`QueuePair::post_read`] are `unsafe fn`;
//! everything they can check (QP state, both ranges inside their regions,
//! non-zero length) they check and report as a typed [`VerbsError`].

use crate::error::{check_rc, errno, VerbsError};
use crate::wire::{QpEndpoint, SegmentDescriptor, MAX_24BIT};
use rdma_sys as sys;
use std::alloc::Layout;
use std::ffi::CStr;
use std::mem::MaybeUninit;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

/// `ibv_wc_status` value of a successful completion.
pub const WC_SUCCESS: u32 = 0;
/// `ibv_wc_status` value of a work request flushed by a QP in error state.
pub const WC_WR_FLUSH_ERR: u32 = 5;
/// `ibv_port_state` value of an active port.
pub const PORT_ACTIVE: u32 = 4;

/// A device as `ibv_get_device_list` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Kernel name, e.g. `mlx5_0` or `rxe0`.
    pub name: String,
    /// Node GUID in host order.
    pub guid: u64,
}

/// Owns an `ibv_get_device_list` result and frees it on drop.
struct DeviceList {
    list: NonNull<*mut sys::ibv_device>,
    len: usize,
}

impl DeviceList {
    fn get() -> Result<Self, VerbsError> {
        let mut n: i32 = 0;
        // SAFETY: `n` is a valid out-pointer for the duration of the call.
        let list = unsafe { sys::ibv_get_device_list(&mut n) };
        let Some(list) = NonNull::new(list) else {
            // ENOSYS: the kernel has no RDMA support, which for a caller is
            // the same as "no device".
            let e = errno();
            return Err(
                if e == libc::ENOSYS || e == libc::ENODEV || e == libc::ENOENT {
                    VerbsError::NoDevice
                } else {
                    VerbsError::Os {
                        op: "ibv_get_device_list",
                        errno: e,
                    }
                },
            );
        };
        let len = usize::try_from(n).unwrap_or(0);
        let l = Self { list, len };
        if len == 0 {
            return Err(VerbsError::NoDevice);
        }
        Ok(l)
    }

    fn devices(&self) -> impl Iterator<Item = *mut sys::ibv_device> + '_ {
        // SAFETY: the list holds `len` valid device pointers until freed in drop.
        (0..self.len).map(move |i| unsafe { *self.list.as_ptr().add(i) })
    }

    fn name(dev: *mut sys::ibv_device) -> String {
        // SAFETY: `dev` comes from a live device list; the name is a
        // NUL-terminated string owned by the device.
        let p = unsafe { sys::ibv_get_device_name(dev) };
        if p.is_null() {
            return String::new();
        }
        // SAFETY: non-null, NUL-terminated, valid while the list lives.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

impl Drop for DeviceList {
    fn drop(&mut self) {
        // SAFETY: the list came from ibv_get_device_list and is freed once.
        unsafe { sys::ibv_free_device_list(self.list.as_ptr()) }
    }
}

/// Lists the RDMA devices present. With none, returns
/// [`VerbsError::NoDevice`] ("no RDMA device found"), never panics.
///
/// ```
/// match railyard_verbs::devices() {
///     Ok(devs) => assert!(!devs.is_empty()),
///     Err(e) => assert_eq!(e.to_string(), "no RDMA device found"),
/// }
/// ```
pub fn devices() -> Result<Vec<DeviceInfo>, VerbsError> {
    let list = DeviceList::get()?;
    Ok(list
        .devices()
        .map(|d| DeviceInfo {
            name: DeviceList::name(d),
            // SAFETY: `d` is a live device from the list.
            guid: u64::from_be(unsafe { sys::ibv_get_device_guid(d) }),
        })
        .collect())
}

/// Path MTU of a QP (`ibv_mtu`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mtu {
    /// 256 bytes.
    M256 = 1,
    /// 512 bytes.
    M512 = 2,
    /// 1024 bytes (what rxe offers on a 1500-byte netdev).
    M1024 = 3,
    /// 2048 bytes.
    M2048 = 4,
    /// 4096 bytes.
    M4096 = 5,
}

impl Mtu {
    /// From a byte count (256, 512, 1024, 2048 or 4096).
    pub fn from_bytes(b: u32) -> Result<Self, VerbsError> {
        Ok(match b {
            256 => Self::M256,
            512 => Self::M512,
            1024 => Self::M1024,
            2048 => Self::M2048,
            4096 => Self::M4096,
            _ => {
                return Err(VerbsError::InvalidConfig {
                    what: "MTU",
                    value: u64::from(b),
                    allowed: "256, 512, 1024, 2048 or 4096",
                })
            }
        })
    }

    /// From the raw `ibv_mtu` value.
    pub fn from_raw(v: u32) -> Option<Self> {
        Some(match v {
            1 => Self::M256,
            2 => Self::M512,
            3 => Self::M1024,
            4 => Self::M2048,
            5 => Self::M4096,
            _ => return None,
        })
    }

    /// The MTU in bytes.
    pub fn bytes(self) -> u32 {
        128 << (self as u32)
    }
}

/// What `ibv_query_port` says about a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortInfo {
    /// `ibv_port_state` (4 = [`PORT_ACTIVE`]).
    pub state: u32,
    /// Active MTU, when the provider reports a valid one.
    pub active_mtu: Option<Mtu>,
    /// Largest MTU the port supports.
    pub max_mtu: Option<Mtu>,
    /// Number of GID table entries.
    pub gid_table_len: i32,
    /// LID (InfiniBand only).
    pub lid: u16,
    /// 1 = InfiniBand, 2 = Ethernet (RoCE).
    pub link_layer: u8,
}

/// Device limits a transport sizes its queues from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceCaps {
    /// Largest work queue.
    pub max_qp_wr: u32,
    /// Most scatter/gather entries per work request.
    pub max_sge: u32,
    /// Largest CQ.
    pub max_cqe: u32,
    /// Most outstanding RDMA READs a QP may have as responder.
    pub max_qp_rd_atom: u32,
    /// Most outstanding RDMA READs a QP may initiate.
    pub max_qp_init_rd_atom: u32,
    /// Largest MR.
    pub max_mr_size: u64,
    /// Number of physical ports.
    pub phys_port_cnt: u8,
    /// IEEE OUI of the vendor (`ibv_device_attr.vendor_id`); the software
    /// providers have their own (rxe `0xFFFFFF`, siw `0x626D74`: see
    /// `railyard_core::cc::SoftwareProvider`).
    pub vendor_id: u32,
}

struct CtxInner {
    ctx: NonNull<sys::ibv_context>,
    name: String,
}

// SAFETY: libibverbs contexts are thread-safe (every verb may be called from
// any thread); the pointer is only freed in Drop, which needs sole ownership.
unsafe impl Send for CtxInner {}
// SAFETY: as above; shared use only issues thread-safe verbs.
unsafe impl Sync for CtxInner {}

impl Drop for CtxInner {
    fn drop(&mut self) {
        // SAFETY: opened by ibv_open_device; every child holds an Arc of us,
        // so none is alive any more.
        unsafe { sys::ibv_close_device(self.ctx.as_ptr()) };
    }
}

/// An open device (`ibv_context`).
#[derive(Clone)]
pub struct Context {
    inner: Arc<CtxInner>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("name", &self.inner.name)
            .finish()
    }
}

impl Context {
    /// Opens the named device, or the first one when `name` is `None`.
    pub fn open(name: Option<&str>) -> Result<Self, VerbsError> {
        let list = DeviceList::get()?;
        let dev = match name {
            None => list.devices().next(),
            Some(n) => list.devices().find(|&d| DeviceList::name(d) == n),
        };
        let Some(dev) = dev else {
            return Err(VerbsError::DeviceNotFound {
                name: name.unwrap_or_default().to_owned(),
                available: list.devices().map(DeviceList::name).collect(),
            });
        };
        let dev_name = DeviceList::name(dev);
        // SAFETY: `dev` is live while `list` is; the context stays valid after
        // the list is freed (verbs keeps the device referenced).
        let ctx = unsafe { sys::ibv_open_device(dev) };
        let ctx = NonNull::new(ctx).ok_or(VerbsError::Os {
            op: "ibv_open_device",
            errno: errno(),
        })?;
        Ok(Self {
            inner: Arc::new(CtxInner {
                ctx,
                name: dev_name,
            }),
        })
    }

    /// The device name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Device limits.
    pub fn caps(&self) -> Result<DeviceCaps, VerbsError> {
        // SAFETY: ibv_device_attr is plain C data; all-zero is a valid value.
        let mut a: sys::ibv_device_attr = unsafe { std::mem::zeroed() };
        // SAFETY: live context, valid out-pointer.
        check_rc("ibv_query_device", unsafe {
            sys::ibv_query_device(self.inner.ctx.as_ptr(), &mut a)
        })?;
        let u = |v: i32| u32::try_from(v).unwrap_or(0);
        Ok(DeviceCaps {
            max_qp_wr: u(a.max_qp_wr),
            max_sge: u(a.max_sge),
            max_cqe: u(a.max_cqe),
            max_qp_rd_atom: u(a.max_qp_rd_atom),
            max_qp_init_rd_atom: u(a.max_qp_init_rd_atom),
            max_mr_size: a.max_mr_size,
            phys_port_cnt: a.phys_port_cnt,
            vendor_id: a.vendor_id,
        })
    }

    /// Port attributes (ports are numbered from 1).
    pub fn port(&self, port_num: u8) -> Result<PortInfo, VerbsError> {
        // SAFETY: ibv_port_attr is plain C data; all-zero is a valid value.
        let mut a: sys::ibv_port_attr = unsafe { std::mem::zeroed() };
        // SAFETY: live context, valid out-pointer of the size the call expects.
        let rc = unsafe { sys::___ibv_query_port(self.inner.ctx.as_ptr(), port_num, &mut a) };
        check_rc("ibv_query_port", rc)?;
        Ok(PortInfo {
            state: a.state,
            active_mtu: Mtu::from_raw(a.active_mtu),
            max_mtu: Mtu::from_raw(a.max_mtu),
            gid_table_len: a.gid_tbl_len,
            lid: a.lid,
            link_layer: a.link_layer,
        })
    }

    /// The GID at `index` of `port_num` (raw bytes, network order). On RoCE,
    /// index 1 is usually the IPv4-mapped RoCE v2 GID.
    pub fn gid(&self, port_num: u8, index: u8) -> Result<[u8; 16], VerbsError> {
        let mut g = sys::ibv_gid { raw: [0; 16] };
        // SAFETY: live context, valid out-pointer.
        let rc = unsafe {
            sys::ibv_query_gid(self.inner.ctx.as_ptr(), port_num, i32::from(index), &mut g)
        };
        check_rc("ibv_query_gid", rc)?;
        // SAFETY: both union variants are plain bytes; `raw` covers all 16.
        Ok(unsafe { g.raw })
    }

    /// Allocates a protection domain.
    pub fn alloc_pd(&self) -> Result<ProtectionDomain, VerbsError> {
        // SAFETY: live context.
        let pd = unsafe { sys::ibv_alloc_pd(self.inner.ctx.as_ptr()) };
        let pd = NonNull::new(pd).ok_or(VerbsError::Os {
            op: "ibv_alloc_pd",
            errno: errno(),
        })?;
        Ok(ProtectionDomain {
            inner: Arc::new(PdInner {
                pd,
                _ctx: self.inner.clone(),
            }),
        })
    }

    /// Creates a completion queue with room for at least `depth` entries.
    pub fn create_cq(&self, depth: u32) -> Result<CompletionQueue, VerbsError> {
        let cqe =
            i32::try_from(depth)
                .ok()
                .filter(|&d| d > 0)
                .ok_or(VerbsError::InvalidConfig {
                    what: "CQ depth",
                    value: u64::from(depth),
                    allowed: "1..=i32::MAX",
                })?;
        // SAFETY: live context; no completion channel, no user context.
        let cq = unsafe {
            sys::ibv_create_cq(
                self.inner.ctx.as_ptr(),
                cqe,
                ptr::null_mut(),
                ptr::null_mut(),
                0,
            )
        };
        let cq = NonNull::new(cq).ok_or(VerbsError::Os {
            op: "ibv_create_cq",
            errno: errno(),
        })?;
        Ok(CompletionQueue {
            inner: Arc::new(CqInner {
                cq,
                outstanding: AtomicU64::new(0),
                unexpected: AtomicU64::new(0),
                _ctx: self.inner.clone(),
            }),
        })
    }
}

/// One asynchronous event (`ibv_get_async_event`), reduced to plain
/// numbers and already acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AsyncEvent {
    /// `ibv_event_type` value (see the `EVENT_*` constants).
    pub event_type: u32,
    /// The QP number, for QP-scope events.
    pub qp_num: Option<u32>,
    /// The port, for port-scope events (port error, GID change, ...).
    pub port_num: Option<u8>,
    /// The CQ, for CQ-scope events (`IBV_EVENT_CQ_ERR`): compare with
    /// [`CompletionQueue::id`] to find the QPs that use it.
    pub cq: Option<CqId>,
}

/// The identity of a [`CompletionQueue`] (its `ibv_cq` address), as an
/// async event names it. Only compared, never dereferenced.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CqId(pub usize);

/// `IBV_EVENT_CQ_ERR`.
pub const EVENT_CQ_ERR: u32 = 0;
/// `IBV_EVENT_QP_FATAL`.
pub const EVENT_QP_FATAL: u32 = 1;
/// `IBV_EVENT_QP_REQ_ERR`.
pub const EVENT_QP_REQ_ERR: u32 = 2;
/// `IBV_EVENT_QP_ACCESS_ERR`.
pub const EVENT_QP_ACCESS_ERR: u32 = 3;
/// `IBV_EVENT_DEVICE_FATAL`.
pub const EVENT_DEVICE_FATAL: u32 = 8;
/// `IBV_EVENT_PORT_ACTIVE`.
pub const EVENT_PORT_ACTIVE: u32 = 9;
/// `IBV_EVENT_PORT_ERR`.
pub const EVENT_PORT_ERR: u32 = 10;
/// `IBV_EVENT_QP_LAST_WQE_REACHED`.
pub const EVENT_QP_LAST_WQE_REACHED: u32 = 16;
/// `IBV_EVENT_GID_CHANGE`.
pub const EVENT_GID_CHANGE: u32 = 18;

/// Whether events of this type carry a QP in their element.
fn event_has_qp(t: u32) -> bool {
    matches!(t, 1..=7 | 16)
}

/// Whether events of this type carry a port number in their element.
fn event_has_port(t: u32) -> bool {
    matches!(t, 9..=13 | 17 | 18)
}

impl Context {
    /// Makes the context's async-event fd non-blocking, so that
    /// [`next_async_event`](Self::next_async_event) can wait with a timeout
    /// and an event thread can stop cleanly. Idempotent.
    pub fn set_async_nonblocking(&self) -> Result<(), VerbsError> {
        // SAFETY: live context; `async_fd` is set by ibv_open_device and
        // never changes afterwards.
        let fd = unsafe { (*self.inner.ctx.as_ptr()).async_fd };
        // SAFETY: fcntl on an fd we own through the context; no pointers.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        if flags < 0 {
            return Err(VerbsError::Os {
                op: "fcntl(F_GETFL)",
                errno: errno(),
            });
        }
        // SAFETY: as above.
        if unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
            return Err(VerbsError::Os {
                op: "fcntl(F_SETFL)",
                errno: errno(),
            });
        }
        Ok(())
    }

    /// Waits up to `timeout_ms` for one async event, acknowledges it and
    /// returns it; `Ok(None)` when none arrived. Call
    /// [`set_async_nonblocking`](Self::set_async_nonblocking) first, or a
    /// spurious wakeup may block in `ibv_get_async_event`.
    pub fn next_async_event(&self, timeout_ms: i32) -> Result<Option<AsyncEvent>, VerbsError> {
        // SAFETY: live context; `async_fd` never changes.
        let fd = unsafe { (*self.inner.ctx.as_ptr()).async_fd };
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
        if n < 0 {
            let e = errno();
            if e == libc::EINTR {
                return Ok(None);
            }
            return Err(VerbsError::Os {
                op: "poll",
                errno: e,
            });
        }
        if n == 0 || pfd.revents & libc::POLLIN == 0 {
            return Ok(None);
        }
        let mut ev = MaybeUninit::<sys::ibv_async_event>::zeroed();
        // SAFETY: live context; `ev` has room for one event.
        let rc = unsafe { sys::ibv_get_async_event(self.inner.ctx.as_ptr(), ev.as_mut_ptr()) };
        if rc != 0 {
            let e = errno();
            if e == libc::EAGAIN || e == libc::EWOULDBLOCK || e == libc::EINTR {
                return Ok(None);
            }
            return Err(VerbsError::Os {
                op: "ibv_get_async_event",
                errno: e,
            });
        }
        let p = ev.as_mut_ptr();
        // SAFETY: the call filled the event. The type is read as a plain u32
        // (the Rust enum cannot hold a value a newer kernel might send).
        let event_type = unsafe { ptr::addr_of!((*p).event_type).cast::<u32>().read() };
        let qp_num = if event_has_qp(event_type) {
            // SAFETY: for QP events the element is the affected QP, which
            // stays valid until the event is acknowledged below.
            let qp = unsafe { (*p).element.qp };
            // SAFETY: as above; non-null checked.
            (!qp.is_null()).then(|| unsafe { (*qp).qp_num })
        } else {
            None
        };
        let cq = if event_type == EVENT_CQ_ERR {
            // SAFETY: for CQ events the element is the affected CQ (only its
            // address is kept, as an identity).
            let cq = unsafe { (*p).element.cq };
            (!cq.is_null()).then_some(CqId(cq as usize))
        } else {
            None
        };
        let port_num = if event_has_port(event_type) {
            // SAFETY: for port events the element is the port number.
            u8::try_from(unsafe { (*p).element.port_num }).ok()
        } else {
            None
        };
        // SAFETY: acknowledges the event we got, exactly once.
        unsafe { sys::ibv_ack_async_event(p) };
        Ok(Some(AsyncEvent {
            event_type,
            qp_num,
            port_num,
            cq,
        }))
    }
}

struct PdInner {
    pd: NonNull<sys::ibv_pd>,
    _ctx: Arc<CtxInner>,
}

// SAFETY: a PD is only passed to thread-safe verbs; freed in Drop only.
unsafe impl Send for PdInner {}
// SAFETY: as above.
unsafe impl Sync for PdInner {}

impl Drop for PdInner {
    fn drop(&mut self) {
        // SAFETY: allocated by ibv_alloc_pd; every MR/QP holds an Arc of us.
        unsafe { sys::ibv_dealloc_pd(self.pd.as_ptr()) };
    }
}

/// A protection domain.
#[derive(Clone)]
pub struct ProtectionDomain {
    inner: Arc<PdInner>,
}

/// Access rights of a memory region / QP (`ibv_access_flags`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access(pub u32);

impl Access {
    /// The local NIC may write (required for READ targets and any remote write).
    pub const LOCAL_WRITE: Self = Self(1);
    /// Peers may RDMA WRITE.
    pub const REMOTE_WRITE: Self = Self(2);
    /// Peers may RDMA READ.
    pub const REMOTE_READ: Self = Self(4);
    /// Local write, remote read and remote write.
    pub const ALL_RDMA: Self = Self(1 | 2 | 4);
}

impl std::ops::BitOr for Access {
    type Output = Self;
    fn bitor(self, o: Self) -> Self {
        Self(self.0 | o.0)
    }
}

/// A registered memory region: either a buffer it owns ([`alloc`](Self::alloc):
/// page-aligned, zeroed, freed on drop) or caller memory
/// ([`register`](Self::register): e.g. a KV-cache pool the engine does not own).
///
/// The buffer is never exposed as a Rust reference, because the NIC may
/// write it at any time: it is read and written by copying
/// ([`read_at`](Self::read_at), [`write_at`](Self::write_at)), like memory
/// shared with another process.
pub struct MemoryRegion {
    mr: NonNull<sys::ibv_mr>,
    buf: NonNull<u8>,
    len: usize,
    /// `Some` when we allocated the buffer and must free it.
    owned: Option<Layout>,
    _pd: Arc<PdInner>,
}

// SAFETY: the buffer is owned (or, for `register`, promised valid by the
// caller) and only accessed through raw copies; the MR handle is only used by
// thread-safe verbs and freed in Drop.
unsafe impl Send for MemoryRegion {}
// SAFETY: as above: shared access never creates references into the buffer.
unsafe impl Sync for MemoryRegion {}

impl std::fmt::Debug for MemoryRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryRegion")
            .field("addr", &format_args!("{:#x}", self.addr()))
            .field("len", &self.len())
            .field("lkey", &self.lkey())
            .field("rkey", &self.rkey())
            .finish()
    }
}

impl MemoryRegion {
    /// Allocates `len` zeroed, page-aligned bytes and registers them.
    pub fn alloc(pd: &ProtectionDomain, len: usize, access: Access) -> Result<Self, VerbsError> {
        if len == 0 {
            return Err(VerbsError::ZeroLength);
        }
        let layout = Layout::from_size_align(len, 4096).map_err(|_| VerbsError::InvalidConfig {
            what: "memory region length",
            value: len as u64,
            allowed: "at most isize::MAX rounded to pages",
        })?;
        // SAFETY: layout has non-zero size.
        let buf =
            NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) }).ok_or(VerbsError::Os {
                op: "alloc",
                errno: libc::ENOMEM,
            })?;
        let flags = i32::try_from(access.0).unwrap_or(0);
        // SAFETY: `buf` is `len` bytes we own and keep alive until after
        // ibv_dereg_mr in Drop; the PD is live.
        let mr = unsafe { sys::ibv_reg_mr(pd.inner.pd.as_ptr(), buf.as_ptr().cast(), len, flags) };
        match NonNull::new(mr) {
            Some(mr) => Ok(Self {
                mr,
                buf,
                len,
                owned: Some(layout),
                _pd: pd.inner.clone(),
            }),
            None => {
                let e = errno();
                // SAFETY: allocated above with this layout, never registered.
                unsafe { std::alloc::dealloc(buf.as_ptr(), layout) };
                Err(VerbsError::Os {
                    op: "ibv_reg_mr",
                    errno: e,
                })
            }
        }
    }

    /// Registers `len` bytes of caller memory at `addr`.
    ///
    /// # Safety
    ///
    /// `addr..addr + len` must be valid for reads and writes for as long as
    /// the returned region lives, must not be accessed through Rust
    /// references while the NIC may touch it, and must outlive every posted
    /// work request that names it (see [`QueuePair::post_batch`]).
    pub unsafe fn register(
        pd: &ProtectionDomain,
        addr: *mut u8,
        len: usize,
        access: Access,
    ) -> Result<Self, VerbsError> {
        if len == 0 {
            return Err(VerbsError::ZeroLength);
        }
        let buf = NonNull::new(addr).ok_or(VerbsError::InvalidConfig {
            what: "memory region address",
            value: 0,
            allowed: "non-null",
        })?;
        let flags = i32::try_from(access.0).unwrap_or(0);
        // SAFETY: the caller promises the range is valid while we live; the
        // PD is live.
        let mr = unsafe { sys::ibv_reg_mr(pd.inner.pd.as_ptr(), addr.cast(), len, flags) };
        let mr = NonNull::new(mr).ok_or(VerbsError::Os {
            op: "ibv_reg_mr",
            errno: errno(),
        })?;
        Ok(Self {
            mr,
            buf,
            len,
            owned: None,
            _pd: pd.inner.clone(),
        })
    }

    fn raw(&self) -> &sys::ibv_mr {
        // SAFETY: the MR stays registered for our whole lifetime; verbs never
        // changes these fields after registration.
        unsafe { self.mr.as_ref() }
    }

    /// Address of the first byte (the MR's iova).
    pub fn addr(&self) -> u64 {
        self.buf.as_ptr() as u64
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: a memory region has at least one byte.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Local key.
    pub fn lkey(&self) -> u32 {
        self.raw().lkey
    }

    /// Remote key.
    pub fn rkey(&self) -> u32 {
        self.raw().rkey
    }

    /// The whole region as a peer should see it.
    pub fn descriptor(&self) -> SegmentDescriptor {
        SegmentDescriptor {
            addr: self.addr(),
            len: self.len() as u64,
            rkey: self.rkey(),
        }
    }

    fn range(&self, offset: usize, len: usize) -> Result<(), VerbsError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len() => Ok(()),
            _ => Err(VerbsError::OutOfBounds {
                side: "local",
                offset: offset as u64,
                len: len as u64,
                region_len: self.len() as u64,
            }),
        }
    }

    /// Copies `src` into the region at `offset`.
    pub fn write_at(&self, offset: usize, src: &[u8]) -> Result<(), VerbsError> {
        self.range(offset, src.len())?;
        // SAFETY: range checked; the buffer is owned by us (or promised valid
        // by `register`'s caller) and never referenced, so a raw copy cannot
        // alias a Rust reference.
        unsafe { ptr::copy_nonoverlapping(src.as_ptr(), self.buf.as_ptr().add(offset), src.len()) };
        Ok(())
    }

    /// Copies region bytes at `offset` into `dst`.
    pub fn read_at(&self, offset: usize, dst: &mut [u8]) -> Result<(), VerbsError> {
        self.range(offset, dst.len())?;
        // SAFETY: as in write_at.
        unsafe {
            ptr::copy_nonoverlapping(self.buf.as_ptr().add(offset), dst.as_mut_ptr(), dst.len())
        };
        Ok(())
    }
}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        // SAFETY: registered in alloc/register; deregistered once, before an
        // owned buffer is freed, so the NIC loses access first.
        unsafe { sys::ibv_dereg_mr(self.mr.as_ptr()) };
        if let Some(layout) = self.owned {
            // SAFETY: allocated in alloc with this layout.
            unsafe { std::alloc::dealloc(self.buf.as_ptr(), layout) };
        }
    }
}

/// One polled completion, as plain numbers (values are ibverbs').
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkCompletion {
    /// The wr_id given at post time.
    pub wr_id: u64,
    /// `ibv_wc_status` ([`WC_SUCCESS`] = 0).
    pub status: u32,
    /// `ibv_wc_opcode` (valid only on success).
    pub opcode: u32,
    /// Vendor error syndrome.
    pub vendor_err: u32,
    /// Bytes transferred (READ / receive).
    pub byte_len: u32,
    /// Local QP number.
    pub qp_num: u32,
}

impl WorkCompletion {
    /// True when the work request succeeded.
    pub fn is_success(&self) -> bool {
        self.status == WC_SUCCESS
    }
}

struct CqInner {
    cq: NonNull<sys::ibv_cq>,
    /// Work requests posted to QPs using this CQ as send CQ (signaled or
    /// not) whose completion was not polled yet, nor retired as covered by
    /// a later one ([`CompletionQueue::retire_covered`]).
    outstanding: AtomicU64,
    /// Completions polled while `outstanding` was already zero.
    unexpected: AtomicU64,
    _ctx: Arc<CtxInner>,
}

// SAFETY: ibv_poll_cq and CQ creation/destruction are thread-safe in
// libibverbs; the pointer is freed only in Drop.
unsafe impl Send for CqInner {}
// SAFETY: as above.
unsafe impl Sync for CqInner {}

impl Drop for CqInner {
    fn drop(&mut self) {
        // SAFETY: created by ibv_create_cq; every QP using it holds an Arc.
        unsafe { sys::ibv_destroy_cq(self.cq.as_ptr()) };
    }
}

/// A completion queue.
#[derive(Clone)]
pub struct CompletionQueue {
    inner: Arc<CqInner>,
}

impl CompletionQueue {
    /// This CQ's identity, as [`AsyncEvent::cq`] names it.
    pub fn id(&self) -> CqId {
        CqId(self.inner.cq.as_ptr() as usize)
    }

    /// Polls up to `out.len()` completions; returns how many were written.
    /// Never blocks and never allocates.
    pub fn poll(&self, out: &mut [WorkCompletion]) -> Result<usize, VerbsError> {
        const CHUNK: usize = 32;
        let mut done = 0;
        while done < out.len() {
            let want = (out.len() - done).min(CHUNK);
            let mut wc: [MaybeUninit<sys::ibv_wc>; CHUNK] =
                [const { MaybeUninit::uninit() }; CHUNK];
            // SAFETY: live CQ; `wc` has room for `want` <= CHUNK entries.
            let n = unsafe {
                sys::ibv_poll_cq(self.inner.cq.as_ptr(), want as i32, wc.as_mut_ptr().cast())
            };
            if n < 0 {
                return Err(VerbsError::Os {
                    op: "ibv_poll_cq",
                    errno: errno(),
                });
            }
            let n = n as usize;
            for (slot, w) in out[done..done + n].iter_mut().zip(&wc[..n]) {
                // SAFETY: ibv_poll_cq initialised the first `n` entries.
                let w = unsafe { w.assume_init_ref() };
                *slot = WorkCompletion {
                    wr_id: w.wr_id,
                    status: w.status,
                    opcode: w.opcode,
                    vendor_err: w.vendor_err,
                    byte_len: w.byte_len,
                    qp_num: w.qp_num,
                };
                self.retire_one();
            }
            done += n;
            if n < want {
                break;
            }
        }
        Ok(done)
    }

    fn retire_one(&self) {
        let r = self
            .inner
            .outstanding
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| v.checked_sub(1));
        if r.is_err() {
            self.inner.unexpected.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Work requests posted through this CQ's QPs (signaled or not) that
    /// still occupy their send-queue slot: not polled, and not yet covered
    /// by a later request's polled completion.
    pub fn outstanding(&self) -> u64 {
        self.inner.outstanding.load(Ordering::Acquire)
    }

    /// Retires `n` unsignaled work requests that a polled completion of a
    /// later request on the same QP covered (RC completes a send queue in
    /// order): they leave [`outstanding`](Self::outstanding). Never below
    /// zero (an excess counts as [`unexpected`](Self::unexpected_completions)).
    pub fn retire_covered(&self, n: u64) {
        let r = self
            .inner
            .outstanding
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| v.checked_sub(n));
        if r.is_err() {
            self.inner.unexpected.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Completions that arrived with nothing outstanding (should stay 0; a
    /// non-zero value means completions were posted around this shim).
    pub fn unexpected_completions(&self) -> u64 {
        self.inner.unexpected.load(Ordering::Relaxed)
    }
}

/// Work-queue sizes of a QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpCaps {
    /// Send queue depth.
    pub max_send_wr: u32,
    /// Receive queue depth.
    pub max_recv_wr: u32,
    /// SGEs per send WR.
    pub max_send_sge: u32,
    /// SGEs per receive WR.
    pub max_recv_sge: u32,
    /// Inline data bytes.
    pub max_inline_data: u32,
}

impl Default for QpCaps {
    fn default() -> Self {
        Self {
            max_send_wr: 256,
            max_recv_wr: 16,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        }
    }
}

/// Connection parameters for INIT → RTR → RTS.
///
/// ```
/// use railyard_verbs::{Mtu, QpConfig, VerbsError};
/// let cfg = QpConfig { gid_index: 3, mtu: Mtu::from_bytes(4096)?, timeout: 18, retry_cnt: 5, ..QpConfig::default() };
/// assert!(cfg.validate().is_ok());
/// let bad = QpConfig { retry_cnt: 9, ..cfg };
/// assert_eq!(bad.validate().unwrap_err().to_string(), "invalid retry count 9: allowed 0..=7");
/// # Ok::<(), VerbsError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpConfig {
    /// Port number (from 1).
    pub port_num: u8,
    /// Source GID index (on RoCE v2 with IPv4: usually 1).
    pub gid_index: u8,
    /// Path MTU; must not exceed the port's active MTU.
    pub mtu: Mtu,
    /// Local ACK timeout exponent: 4.096 µs × 2^timeout, 0..=31 (0 = infinite).
    pub timeout: u8,
    /// Transport retries, 0..=7.
    pub retry_cnt: u8,
    /// RNR retries, 0..=7 (7 = infinite).
    pub rnr_retry: u8,
    /// Minimum RNR NAK timer code, 0..=31.
    pub min_rnr_timer: u8,
    /// Outstanding RDMA READs this QP may initiate (≥ 1; ≤ device limit).
    pub max_rd_atomic: u8,
    /// Outstanding RDMA READs this QP accepts as responder (≥ 1; ≤ device limit).
    pub max_dest_rd_atomic: u8,
    /// GRH hop limit (≥ 1).
    pub hop_limit: u8,
    /// GRH traffic class.
    pub traffic_class: u8,
    /// Service level.
    pub service_level: u8,
    /// Remote access this QP grants.
    pub access: Access,
}

impl Default for QpConfig {
    fn default() -> Self {
        Self {
            port_num: 1,
            gid_index: 1,
            mtu: Mtu::M1024,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 12,
            max_rd_atomic: 16,
            max_dest_rd_atomic: 16,
            hop_limit: 64,
            traffic_class: 0,
            service_level: 0,
            access: Access::ALL_RDMA,
        }
    }
}

impl QpConfig {
    /// Checks every field against the range verbs accepts.
    pub fn validate(&self) -> Result<(), VerbsError> {
        let bad = |what, value: u8, allowed| {
            Err(VerbsError::InvalidConfig {
                what,
                value: u64::from(value),
                allowed,
            })
        };
        if self.port_num == 0 {
            return bad("port number", self.port_num, "1..=255");
        }
        if self.timeout > 31 {
            return bad("ACK timeout", self.timeout, "0..=31");
        }
        if self.retry_cnt > 7 {
            return bad("retry count", self.retry_cnt, "0..=7");
        }
        if self.rnr_retry > 7 {
            return bad("RNR retry count", self.rnr_retry, "0..=7");
        }
        if self.min_rnr_timer > 31 {
            return bad("min RNR timer", self.min_rnr_timer, "0..=31");
        }
        if self.max_rd_atomic == 0 {
            return bad("max_rd_atomic", 0, "1..=device max_qp_init_rd_atom");
        }
        if self.max_dest_rd_atomic == 0 {
            return bad("max_dest_rd_atomic", 0, "1..=device max_qp_rd_atom");
        }
        if self.hop_limit == 0 {
            return bad("hop limit", 0, "1..=255");
        }
        if self.service_level > 15 {
            return bad("service level", self.service_level, "0..=15");
        }
        Ok(())
    }
}

/// QP state as this shim drives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum QpState {
    /// Just created.
    Reset = 0,
    /// Initialised.
    Init = 1,
    /// Ready to receive.
    Rtr = 2,
    /// Ready to send.
    Rts = 3,
    /// Send queue drained (only reported by [`QueuePair::query_state`]).
    SqDrain = 4,
    /// Send queue error (only reported by [`QueuePair::query_state`]).
    SqError = 5,
    /// Error: outstanding work requests flush with [`WC_WR_FLUSH_ERR`].
    Error = 6,
}

impl QpState {
    fn name(self) -> &'static str {
        match self {
            Self::Reset => "RESET",
            Self::Init => "INIT",
            Self::Rtr => "RTR",
            Self::Rts => "RTS",
            Self::SqDrain => "SQD",
            Self::SqError => "SQE",
            Self::Error => "ERR",
        }
    }
    fn from_u8(v: u8) -> Self {
        match v {
            0 => Self::Reset,
            1 => Self::Init,
            2 => Self::Rtr,
            3 => Self::Rts,
            4 => Self::SqDrain,
            5 => Self::SqError,
            _ => Self::Error,
        }
    }
}

/// What the peer told us about one of its QPs (from the handshake).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteQp {
    /// Peer QP number and initial PSN.
    pub qp: QpEndpoint,
    /// Peer GID.
    pub gid: [u8; 16],
    /// Peer LID (0 on RoCE).
    pub lid: u16,
}

/// An RC queue pair.
pub struct QueuePair {
    qp: NonNull<sys::ibv_qp>,
    state: AtomicU8,
    caps: QpCaps,
    send_cq: Arc<CqInner>,
    _recv_cq: Arc<CqInner>,
    _pd: Arc<PdInner>,
}

// SAFETY: ibv_post_send / ibv_modify_qp are thread-safe; state changes take
// &mut self; the pointer is freed only in Drop.
unsafe impl Send for QueuePair {}
// SAFETY: shared use only posts (thread-safe) and reads atomics.
unsafe impl Sync for QueuePair {}

impl std::fmt::Debug for QueuePair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueuePair")
            .field("qpn", &self.qpn())
            .field("state", &self.state())
            .finish()
    }
}

/// Which RDMA operation a work request performs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RdmaOp {
    /// RDMA WRITE: local → remote.
    Write,
    /// RDMA READ: remote → local.
    Read,
}

impl QueuePair {
    /// Creates an RC QP in RESET. Only signaled work requests complete
    /// (`sq_sig_all = 0`).
    pub fn create_rc(
        pd: &ProtectionDomain,
        send_cq: &CompletionQueue,
        recv_cq: &CompletionQueue,
        caps: QpCaps,
    ) -> Result<Self, VerbsError> {
        if caps.max_send_wr == 0 {
            return Err(VerbsError::InvalidConfig {
                what: "max_send_wr",
                value: 0,
                allowed: "1..=device max_qp_wr",
            });
        }
        // SAFETY: plain C data; all-zero is valid (null srq/context).
        let mut attr: sys::ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        attr.send_cq = send_cq.inner.cq.as_ptr();
        attr.recv_cq = recv_cq.inner.cq.as_ptr();
        attr.cap = sys::ibv_qp_cap {
            max_send_wr: caps.max_send_wr,
            max_recv_wr: caps.max_recv_wr,
            max_send_sge: caps.max_send_sge,
            max_recv_sge: caps.max_recv_sge,
            max_inline_data: caps.max_inline_data,
        };
        attr.qp_type = sys::ibv_qp_type::IBV_QPT_RC;
        attr.sq_sig_all = 0;
        // SAFETY: live PD and CQs (kept alive by the Arcs stored below).
        let qp = unsafe { sys::ibv_create_qp(pd.inner.pd.as_ptr(), &mut attr) };
        let qp = NonNull::new(qp).ok_or(VerbsError::Os {
            op: "ibv_create_qp",
            errno: errno(),
        })?;
        Ok(Self {
            qp,
            state: AtomicU8::new(QpState::Reset as u8),
            // ibv_create_qp wrote back the sizes actually granted.
            caps: QpCaps {
                max_send_wr: attr.cap.max_send_wr,
                max_recv_wr: attr.cap.max_recv_wr,
                max_send_sge: attr.cap.max_send_sge,
                max_recv_sge: attr.cap.max_recv_sge,
                max_inline_data: attr.cap.max_inline_data,
            },
            send_cq: send_cq.inner.clone(),
            _recv_cq: recv_cq.inner.clone(),
            _pd: pd.inner.clone(),
        })
    }

    /// The QP number.
    pub fn qpn(&self) -> u32 {
        // SAFETY: the QP is live for our lifetime; qp_num never changes.
        unsafe { self.qp.as_ref() }.qp_num
    }

    /// The state this shim last moved the QP to (no syscall). The device
    /// may since have moved the QP to ERR on its own, after an error
    /// completion; [`query_state`](Self::query_state) asks it.
    pub fn state(&self) -> QpState {
        QpState::from_u8(self.state.load(Ordering::Acquire))
    }

    /// The state the device reports (`ibv_query_qp`; a syscall on most
    /// providers, so not for the hot path). Updates [`state`](Self::state).
    pub fn query_state(&self) -> Result<QpState, VerbsError> {
        // SAFETY: plain C data; all-zero is valid.
        let mut a: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut init: sys::ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        // SAFETY: live QP; valid out-pointers.
        let rc = unsafe {
            sys::ibv_query_qp(
                self.qp.as_ptr(),
                &mut a,
                sys::ibv_qp_attr_mask::IBV_QP_STATE.0 as i32,
                &mut init,
            )
        };
        check_rc("ibv_query_qp", rc)?;
        let st = QpState::from_u8(u8::try_from(a.qp_state).unwrap_or(QpState::Error as u8));
        self.state.store(st as u8, Ordering::Release);
        Ok(st)
    }

    fn modify(
        &mut self,
        attr: &mut sys::ibv_qp_attr,
        mask: sys::ibv_qp_attr_mask,
        to: QpState,
    ) -> Result<(), VerbsError> {
        // SAFETY: live QP; `attr` is valid for the fields `mask` names.
        let rc = unsafe { sys::ibv_modify_qp(self.qp.as_ptr(), attr, mask.0 as i32) };
        check_rc("ibv_modify_qp", rc)?;
        let from = QpState::from_u8(self.state.swap(to as u8, Ordering::AcqRel));
        tracing::debug!(target: "railyard::qp", qpn = self.qpn(), from = from.name(),
            to = to.name(), "QP state changed");
        Ok(())
    }

    fn expect(&self, op: &'static str, want: QpState) -> Result<(), VerbsError> {
        let s = self.state();
        if s != want {
            return Err(VerbsError::WrongState {
                op,
                state: s.name(),
            });
        }
        Ok(())
    }

    /// RESET → INIT.
    pub fn to_init(&mut self, cfg: &QpConfig) -> Result<(), VerbsError> {
        cfg.validate()?;
        self.expect("to_init", QpState::Reset)?;
        use sys::ibv_qp_attr_mask as M;
        // SAFETY: plain C data; all-zero is valid.
        let mut a: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = sys::ibv_qp_state::IBV_QPS_INIT;
        a.pkey_index = 0;
        a.port_num = cfg.port_num;
        a.qp_access_flags = cfg.access.0;
        self.modify(
            &mut a,
            M::IBV_QP_STATE | M::IBV_QP_PKEY_INDEX | M::IBV_QP_PORT | M::IBV_QP_ACCESS_FLAGS,
            QpState::Init,
        )
    }

    /// INIT → RTR towards `remote`.
    pub fn to_rtr(&mut self, cfg: &QpConfig, remote: &RemoteQp) -> Result<(), VerbsError> {
        cfg.validate()?;
        self.expect("to_rtr", QpState::Init)?;
        if remote.qp.qpn > MAX_24BIT || remote.qp.psn > MAX_24BIT {
            return Err(VerbsError::InvalidConfig {
                what: "remote qpn/psn",
                value: u64::from(remote.qp.qpn.max(remote.qp.psn)),
                allowed: "< 2^24",
            });
        }
        use sys::ibv_qp_attr_mask as M;
        // SAFETY: plain C data; all-zero is valid.
        let mut a: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = sys::ibv_qp_state::IBV_QPS_RTR;
        a.path_mtu = cfg.mtu as u32;
        a.dest_qp_num = remote.qp.qpn;
        a.rq_psn = remote.qp.psn;
        a.max_dest_rd_atomic = cfg.max_dest_rd_atomic;
        a.min_rnr_timer = cfg.min_rnr_timer;
        a.ah_attr.is_global = 1;
        a.ah_attr.dlid = remote.lid;
        a.ah_attr.sl = cfg.service_level;
        a.ah_attr.port_num = cfg.port_num;
        a.ah_attr.grh.dgid = sys::ibv_gid { raw: remote.gid };
        a.ah_attr.grh.sgid_index = cfg.gid_index;
        a.ah_attr.grh.hop_limit = cfg.hop_limit;
        a.ah_attr.grh.traffic_class = cfg.traffic_class;
        let mask = M::IBV_QP_STATE
            | M::IBV_QP_AV
            | M::IBV_QP_PATH_MTU
            | M::IBV_QP_DEST_QPN
            | M::IBV_QP_RQ_PSN
            | M::IBV_QP_MAX_DEST_RD_ATOMIC
            | M::IBV_QP_MIN_RNR_TIMER;
        self.modify(&mut a, mask, QpState::Rtr)
    }

    /// RTR → RTS, sending from `local_psn`.
    pub fn to_rts(&mut self, cfg: &QpConfig, local_psn: u32) -> Result<(), VerbsError> {
        cfg.validate()?;
        self.expect("to_rts", QpState::Rtr)?;
        if local_psn > MAX_24BIT {
            return Err(VerbsError::InvalidConfig {
                what: "local PSN",
                value: u64::from(local_psn),
                allowed: "< 2^24",
            });
        }
        use sys::ibv_qp_attr_mask as M;
        // SAFETY: plain C data; all-zero is valid.
        let mut a: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = sys::ibv_qp_state::IBV_QPS_RTS;
        a.timeout = cfg.timeout;
        a.retry_cnt = cfg.retry_cnt;
        a.rnr_retry = cfg.rnr_retry;
        a.sq_psn = local_psn;
        a.max_rd_atomic = cfg.max_rd_atomic;
        let mask = M::IBV_QP_STATE
            | M::IBV_QP_TIMEOUT
            | M::IBV_QP_RETRY_CNT
            | M::IBV_QP_RNR_RETRY
            | M::IBV_QP_SQ_PSN
            | M::IBV_QP_MAX_QP_RD_ATOMIC;
        self.modify(&mut a, mask, QpState::Rts)
    }

    /// RESET → INIT → RTR → RTS in one call.
    pub fn connect(
        &mut self,
        cfg: &QpConfig,
        local_psn: u32,
        remote: &RemoteQp,
    ) -> Result<(), VerbsError> {
        self.to_init(cfg)?;
        self.to_rtr(cfg, remote)?;
        self.to_rts(cfg, local_psn)
    }

    /// Any state → ERR: every outstanding work request completes with
    /// [`WC_WR_FLUSH_ERR`], so the CQ can be drained before teardown.
    pub fn to_error(&mut self) -> Result<(), VerbsError> {
        // SAFETY: plain C data; all-zero is valid.
        let mut a: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = sys::ibv_qp_state::IBV_QPS_ERR;
        self.modify(&mut a, sys::ibv_qp_attr_mask::IBV_QP_STATE, QpState::Error)
    }

    /// Any state → ERR through a shared reference, for teardown paths that
    /// only hold `&QueuePair` (an endpoint's QPs are shared with posting
    /// threads). `ibv_modify_qp` is thread-safe; a post racing this call
    /// either fails with a typed error or is flushed with
    /// [`WC_WR_FLUSH_ERR`] like every other outstanding request.
    pub fn to_error_shared(&self) -> Result<(), VerbsError> {
        // SAFETY: plain C data; all-zero is valid.
        let mut a: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = sys::ibv_qp_state::IBV_QPS_ERR;
        // SAFETY: live QP; `a` is valid for the state field the mask names.
        let rc = unsafe {
            sys::ibv_modify_qp(
                self.qp.as_ptr(),
                &mut a,
                sys::ibv_qp_attr_mask::IBV_QP_STATE.0 as i32,
            )
        };
        check_rc("ibv_modify_qp", rc)?;
        let from = QpState::from_u8(self.state.swap(QpState::Error as u8, Ordering::AcqRel));
        tracing::debug!(target: "railyard::qp", qpn = self.qpn(), from = from.name(),
            to = QpState::Error.name(), "QP state changed");
        Ok(())
    }

    /// The work-queue sizes the provider actually granted (at least what
    /// was asked for).
    pub fn caps(&self) -> QpCaps {
        self.caps
    }

    /// Posts one signaled RDMA WRITE of `local[local_off..local_off+len]` to
    /// `remote[remote_off..remote_off+len]`.
    ///
    /// # Safety
    ///
    /// `local` must stay alive (registered) until the completion carrying
    /// `wr_id` has been polled, or until this QP has been moved to ERR and
    /// the completion flushed. The NIC reads it asynchronously.
    pub unsafe fn post_write(
        &self,
        wr_id: u64,
        local: &MemoryRegion,
        local_off: usize,
        len: u32,
        remote: &SegmentDescriptor,
        remote_off: u64,
    ) -> Result<(), VerbsError> {
        let wr = RdmaWr::signaled(
            wr_id,
            RdmaOp::Write,
            local,
            local_off,
            len,
            remote,
            remote_off,
        );
        // SAFETY: forwarded from the caller's promise.
        unsafe { self.post_batch(&[wr]) }.map_err(|e| e.error)
    }

    /// Posts one signaled RDMA READ of `remote[remote_off..remote_off+len]`
    /// into `local[local_off..local_off+len]`.
    ///
    /// # Safety
    ///
    /// As [`post_write`](Self::post_write); here the NIC also *writes* `local`.
    pub unsafe fn post_read(
        &self,
        wr_id: u64,
        local: &MemoryRegion,
        local_off: usize,
        len: u32,
        remote: &SegmentDescriptor,
        remote_off: u64,
    ) -> Result<(), VerbsError> {
        let wr = RdmaWr::signaled(
            wr_id,
            RdmaOp::Read,
            local,
            local_off,
            len,
            remote,
            remote_off,
        );
        // SAFETY: forwarded from the caller's promise.
        unsafe { self.post_batch(&[wr]) }.map_err(|e| e.error)
    }

    /// Posts up to [`MAX_POST_BATCH`] work requests with one `ibv_post_send`
    /// (one doorbell), without allocating.
    ///
    /// Every request is validated first (QP in RTS, non-zero length, both
    /// ranges inside their regions); if any fails, nothing is posted and
    /// `posted` is 0. If the provider refuses part of the chain, `bad_wr` is
    /// mapped back to an index: `wrs[..posted]` are on the wire and will
    /// complete, `wrs[posted..]` were not posted and are the caller's to
    /// release or retry. [`CompletionQueue::outstanding`] counts every
    /// request that was actually posted; an unsignaled one (`signaled:
    /// false`) produces a completion only if it fails (or is flushed), and
    /// otherwise leaves it through [`CompletionQueue::retire_covered`] when
    /// a later signaled request's completion on this QP is polled.
    ///
    /// # Safety
    ///
    /// For every request that was posted: its `local` region must stay alive
    /// until that request's completion (or, for an unsignaled request, the
    /// completion of a later signaled request on this QP) has been polled, or
    /// until the QP has been moved to ERR and flushed.
    pub unsafe fn post_batch(&self, wrs: &[RdmaWr<'_>]) -> Result<(), PostError> {
        let fail = |error| Err(PostError { posted: 0, error });
        if wrs.is_empty() {
            return Ok(());
        }
        if wrs.len() > MAX_POST_BATCH {
            return fail(VerbsError::InvalidConfig {
                what: "post batch size",
                value: wrs.len() as u64,
                allowed: "1..=MAX_POST_BATCH (32)",
            });
        }
        if let Err(e) = self.expect("post", QpState::Rts) {
            return fail(e);
        }
        let mut sges = [sys::ibv_sge {
            addr: 0,
            length: 0,
            lkey: 0,
        }; MAX_POST_BATCH];
        // SAFETY: ibv_send_wr is plain C data (pointers/unions); all-zero is valid.
        let mut chain: [sys::ibv_send_wr; MAX_POST_BATCH] = unsafe { std::mem::zeroed() };
        for (i, w) in wrs.iter().enumerate() {
            if w.len == 0 {
                return fail(VerbsError::ZeroLength);
            }
            if let Err(e) = w.local.range(w.local_off, w.len as usize) {
                return fail(e);
            }
            let Some(raddr) = w.remote.addr_of(w.remote_off, u64::from(w.len)) else {
                return fail(VerbsError::OutOfBounds {
                    side: "remote",
                    offset: w.remote_off,
                    len: u64::from(w.len),
                    region_len: w.remote.len,
                });
            };
            sges[i] = sys::ibv_sge {
                addr: w.local.addr() + w.local_off as u64,
                length: w.len,
                lkey: w.local.lkey(),
            };
            let wr = &mut chain[i];
            wr.wr_id = w.wr_id;
            wr.num_sge = 1;
            wr.opcode = match w.op {
                RdmaOp::Write => sys::ibv_wr_opcode::IBV_WR_RDMA_WRITE,
                RdmaOp::Read => sys::ibv_wr_opcode::IBV_WR_RDMA_READ,
            };
            if w.signaled {
                wr.send_flags = sys::ibv_send_flags::IBV_SEND_SIGNALED.0;
            }
            wr.wr.rdma = sys::rdma_t {
                remote_addr: raddr,
                rkey: w.remote.rkey,
            };
        }
        let n = wrs.len();
        // Link the chain through raw pointers derived once from each array,
        // with no references into them alive afterwards.
        let base = chain.as_mut_ptr();
        let sge_base = sges.as_mut_ptr();
        for i in 0..n {
            // SAFETY: i < n <= MAX_POST_BATCH, so `base.add(i)`,
            // `sge_base.add(i)` and (when i + 1 < n) `base.add(i + 1)` are in
            // bounds of their arrays, which outlive the post below.
            unsafe {
                let wr = base.add(i);
                (*wr).sg_list = sge_base.add(i);
                (*wr).next = if i + 1 < n {
                    base.add(i + 1)
                } else {
                    ptr::null_mut()
                };
            }
        }
        // Count before posting: a completion may be polled by another thread
        // before ibv_post_send returns.
        self.send_cq
            .outstanding
            .fetch_add(n as u64, Ordering::AcqRel);
        let mut bad: *mut sys::ibv_send_wr = ptr::null_mut();
        // SAFETY: live QP in RTS; `chain` and `sges` outlive the call (verbs
        // copies them into the send queue); the local buffers' lifetime is the
        // caller's promise.
        let rc = unsafe { sys::ibv_post_send(self.qp.as_ptr(), base, &mut bad) };
        if rc == 0 {
            return Ok(());
        }
        let error = match check_rc("ibv_post_send", rc) {
            Err(e) => e,
            Ok(()) => VerbsError::Os {
                op: "ibv_post_send",
                errno: libc::EIO,
            },
        };
        // Map bad_wr back to an index. If the provider did not point into our
        // chain, assume nothing was posted (verbs sets it on every failure).
        let at =
            (bad as usize).wrapping_sub(base as usize) / std::mem::size_of::<sys::ibv_send_wr>();
        let posted = if !bad.is_null() && at < n { at } else { 0 };
        let unposted = (n - posted) as u64;
        let _ = self
            .send_cq
            .outstanding
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
                v.checked_sub(unposted)
            });
        Err(PostError { posted, error })
    }
}

/// Most work requests [`QueuePair::post_batch`] takes at once.
pub const MAX_POST_BATCH: usize = 32;

/// One RDMA work request for [`QueuePair::post_batch`].
#[derive(Clone, Copy, Debug)]
pub struct RdmaWr<'a> {
    /// Caller's id, returned in the completion (railyard's core: a token id).
    pub wr_id: u64,
    /// WRITE or READ.
    pub op: RdmaOp,
    /// Local registered memory.
    pub local: &'a MemoryRegion,
    /// Offset in `local`.
    pub local_off: usize,
    /// Bytes to move (> 0).
    pub len: u32,
    /// The peer's segment (from the handshake).
    pub remote: SegmentDescriptor,
    /// Offset in `remote`.
    pub remote_off: u64,
    /// Generate a completion for this request.
    pub signaled: bool,
}

impl<'a> RdmaWr<'a> {
    /// A signaled request moving `len` bytes between
    /// `local[local_off..]` and `remote[remote_off..]`.
    pub fn signaled(
        wr_id: u64,
        op: RdmaOp,
        local: &'a MemoryRegion,
        local_off: usize,
        len: u32,
        remote: &SegmentDescriptor,
        remote_off: u64,
    ) -> Self {
        Self {
            wr_id,
            op,
            local,
            local_off,
            len,
            remote: *remote,
            remote_off,
            signaled: true,
        }
    }
}

/// A partially or wholly refused [`QueuePair::post_batch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostError {
    /// How many leading requests were posted (and will complete).
    pub posted: usize,
    /// Why the rest were not.
    pub error: VerbsError,
}

impl std::fmt::Display for PostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "posted {} work requests, then: {}",
            self.posted, self.error
        )
    }
}

impl std::error::Error for PostError {}

impl Drop for QueuePair {
    fn drop(&mut self) {
        // SAFETY: created by ibv_create_qp, destroyed once; the CQs and PD
        // outlive it through the Arcs we hold.
        unsafe { sys::ibv_destroy_qp(self.qp.as_ptr()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mtu_mapping() {
        for (b, m) in [
            (256, Mtu::M256),
            (512, Mtu::M512),
            (1024, Mtu::M1024),
            (2048, Mtu::M2048),
            (4096, Mtu::M4096),
        ] {
            assert_eq!(Mtu::from_bytes(b).unwrap(), m);
            assert_eq!(m.bytes(), b);
            assert_eq!(Mtu::from_raw(m as u32), Some(m));
        }
        assert!(matches!(
            Mtu::from_bytes(1500),
            Err(VerbsError::InvalidConfig { what: "MTU", .. })
        ));
        assert_eq!(Mtu::from_raw(0), None);
        assert_eq!(Mtu::M1024 as u32, sys::ibv_mtu::IBV_MTU_1024);
    }

    #[test]
    fn config_validation() {
        assert_eq!(QpConfig::default().validate(), Ok(()));
        type Mutate = fn(&mut QpConfig);
        let cases: [(Mutate, &str); 7] = [
            (|c| c.timeout = 32, "ACK timeout"),
            (|c| c.retry_cnt = 8, "retry count"),
            (|c| c.rnr_retry = 8, "RNR retry count"),
            (|c| c.port_num = 0, "port number"),
            (|c| c.max_rd_atomic = 0, "max_rd_atomic"),
            (|c| c.hop_limit = 0, "hop limit"),
            (|c| c.service_level = 16, "service level"),
        ];
        for (mutate, what) in cases {
            let mut c = QpConfig::default();
            mutate(&mut c);
            match c.validate() {
                Err(VerbsError::InvalidConfig { what: w, .. }) => assert_eq!(w, what),
                other => panic!("{what}: {other:?}"),
            }
        }
    }

    #[test]
    fn constants_match_ibverbs() {
        assert_eq!(WC_SUCCESS, sys::ibv_wc_status::IBV_WC_SUCCESS);
        assert_eq!(WC_WR_FLUSH_ERR, sys::ibv_wc_status::IBV_WC_WR_FLUSH_ERR);
        assert_eq!(PORT_ACTIVE, sys::ibv_port_state::IBV_PORT_ACTIVE);
        assert_eq!(
            Access::LOCAL_WRITE.0,
            sys::ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0
        );
        assert_eq!(
            Access::REMOTE_WRITE.0,
            sys::ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0
        );
        assert_eq!(
            Access::REMOTE_READ.0,
            sys::ibv_access_flags::IBV_ACCESS_REMOTE_READ.0
        );
        use sys::ibv_event_type as E;
        assert_eq!(EVENT_CQ_ERR, E::IBV_EVENT_CQ_ERR as u32);
        assert_eq!(EVENT_QP_FATAL, E::IBV_EVENT_QP_FATAL as u32);
        assert_eq!(EVENT_QP_REQ_ERR, E::IBV_EVENT_QP_REQ_ERR as u32);
        assert_eq!(EVENT_QP_ACCESS_ERR, E::IBV_EVENT_QP_ACCESS_ERR as u32);
        assert_eq!(EVENT_DEVICE_FATAL, E::IBV_EVENT_DEVICE_FATAL as u32);
        assert_eq!(EVENT_PORT_ACTIVE, E::IBV_EVENT_PORT_ACTIVE as u32);
        assert_eq!(EVENT_PORT_ERR, E::IBV_EVENT_PORT_ERR as u32);
        assert_eq!(
            EVENT_QP_LAST_WQE_REACHED,
            E::IBV_EVENT_QP_LAST_WQE_REACHED as u32
        );
        assert_eq!(EVENT_GID_CHANGE, E::IBV_EVENT_GID_CHANGE as u32);
        assert!(event_has_qp(E::IBV_EVENT_PATH_MIG_ERR as u32));
        assert!(event_has_port(E::IBV_EVENT_CLIENT_REREGISTER as u32));
        assert!(!event_has_qp(E::IBV_EVENT_DEVICE_FATAL as u32));
        assert_eq!(QpState::Error as u32, sys::ibv_qp_state::IBV_QPS_ERR);
        assert_eq!(QpState::Rts as u32, sys::ibv_qp_state::IBV_QPS_RTS);
        assert_eq!(QpState::SqDrain as u32, sys::ibv_qp_state::IBV_QPS_SQD);
        assert_eq!(QpState::SqError as u32, sys::ibv_qp_state::IBV_QPS_SQE);
    }

    /// On a machine without RDMA (the CI host) discovery must be a typed
    /// error, not a panic; on one with a device it must list it.
    #[test]
    fn discovery_never_panics() {
        match devices() {
            Ok(d) => assert!(!d.is_empty()),
            Err(e) => assert!(
                matches!(e, VerbsError::NoDevice | VerbsError::Os { .. }),
                "{e}"
            ),
        }
        match Context::open(Some("railyard-no-such-device")) {
            Ok(_) => panic!("opened a device that does not exist"),
            Err(VerbsError::NoDevice) | Err(VerbsError::DeviceNotFound { .. }) => {}
            Err(e) => panic!("unexpected error {e}"),
        }
    }
}
