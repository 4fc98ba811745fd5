//! The per-QP deferral queue: work requests the application posted that
//! railyard holds back (a CC deferral, a full token pool or QP depth), as
//! private copies, in posting order, until they can be posted.
//!
//! A deferral must never be an error the application sees, and the
//! application may reuse its `ibv_send_wr` and `ibv_sge` arrays — and,
//! for `IBV_SEND_INLINE`, the data buffers — as soon as `ibv_post_send`
//! returns. So a held-back request is copied whole: the request, its
//! scatter list and its inline bytes. Storage for `depth` requests is
//! allocated once, when the QP is created, sized by the QP's own
//! capabilities (`max_send_sge`, `max_inline_data`); pushing never
//! allocates, and a full queue is reported so the caller can answer
//! `ENOMEM` with `bad_wr` set, as a full send queue would.

use std::fmt;

use rdma_sys::{ibv_send_flags, ibv_send_wr, ibv_sge};

/// Why a request could not be held back (nothing was queued).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeferError {
    /// Every entry is taken.
    Full,
    /// More scatter entries than the QP's `max_send_sge`.
    TooManySge(i32),
    /// More inline bytes than the QP's `max_inline_data`.
    InlineTooLong(u64),
}

impl fmt::Display for DeferError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeferError::Full => f.write_str("deferral queue full"),
            DeferError::TooManySge(n) => {
                write!(f, "{n} scatter entries: beyond the QP's max_send_sge")
            }
            DeferError::InlineTooLong(n) => {
                write!(f, "{n} inline bytes: beyond the QP's max_inline_data")
            }
        }
    }
}

/// A bounded FIFO of copied send work requests (see the module docs).
pub struct DeferQueue {
    wrs: Box<[ibv_send_wr]>,
    app_ids: Box<[u64]>,
    sges: Box<[ibv_sge]>,
    inline: Box<[u8]>,
    max_sge: usize,
    max_inline: usize,
    head: usize,
    len: usize,
}

// SAFETY: the queue owns its copies; the raw pointers inside them point
// into the queue's own boxed storage (scatter lists, inline bytes) or are
// the application's remote / local addresses, which are plain numbers to
// the queue. It is only ever used under its QP's post lock.
unsafe impl Send for DeferQueue {}

impl fmt::Debug for DeferQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeferQueue")
            .field("capacity", &self.capacity())
            .field("len", &self.len)
            .finish()
    }
}

fn zeroed_wr() -> ibv_send_wr {
    // SAFETY: `ibv_send_wr` is a C struct of integers, raw pointers and
    // unions of those: all-zero bytes are a valid value of it.
    unsafe { std::mem::zeroed() }
}

impl DeferQueue {
    /// Room for `depth` requests of at most `max_sge` scatter entries and
    /// `max_inline` inline bytes each (the QP's capabilities).
    pub fn new(depth: usize, max_sge: usize, max_inline: usize) -> Self {
        let depth = depth.max(1);
        let max_sge = max_sge.max(1);
        Self {
            wrs: (0..depth).map(|_| zeroed_wr()).collect(),
            app_ids: vec![0; depth].into_boxed_slice(),
            sges: vec![
                ibv_sge {
                    addr: 0,
                    length: 0,
                    lkey: 0
                };
                depth * max_sge
            ]
            .into_boxed_slice(),
            inline: vec![0; depth * max_inline].into_boxed_slice(),
            max_sge,
            max_inline,
            head: 0,
            len: 0,
        }
    }

    /// Requests the queue can hold.
    pub fn capacity(&self) -> usize {
        self.wrs.len()
    }

    /// Requests held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn slot(&self, i: usize) -> usize {
        (self.head + i) % self.wrs.len()
    }

    /// Copies `*wr` (request, scatter list, and inline bytes with
    /// `IBV_SEND_INLINE`) to the back of the queue. Its `next` is not
    /// followed: one request per call.
    ///
    /// # Safety
    /// `wr` points to a valid `ibv_send_wr` whose `sg_list` holds
    /// `num_sge` entries, each of whose `[addr, addr + length)` is readable
    /// memory when the request is `IBV_SEND_INLINE` (the verbs contract of
    /// `ibv_post_send`).
    pub unsafe fn push(&mut self, wr: *const ibv_send_wr) -> Result<(), DeferError> {
        if self.len == self.wrs.len() {
            return Err(DeferError::Full);
        }
        // SAFETY: caller contract: `wr` is valid for reads.
        let w = unsafe { &*wr };
        let n = usize::try_from(w.num_sge).map_err(|_| DeferError::TooManySge(w.num_sge))?;
        if n > self.max_sge {
            return Err(DeferError::TooManySge(w.num_sge));
        }
        let src: &[ibv_sge] = if n == 0 || w.sg_list.is_null() {
            &[]
        } else {
            // SAFETY: caller contract: `sg_list` holds `num_sge` entries.
            unsafe { std::slice::from_raw_parts(w.sg_list, n) }
        };
        let inline = w.send_flags & ibv_send_flags::IBV_SEND_INLINE.0 != 0;
        if inline {
            let total: u64 = src.iter().map(|s| u64::from(s.length)).sum();
            if total > self.max_inline as u64 {
                return Err(DeferError::InlineTooLong(total));
            }
        }
        let i = self.slot(self.len);
        let sges = &mut self.sges[i * self.max_sge..(i + 1) * self.max_sge];
        let mut copy_n = n;
        if inline {
            // The application may reuse the buffers once we return: keep
            // the bytes, and point one scatter entry at our copy.
            let buf = &mut self.inline[i * self.max_inline..(i + 1) * self.max_inline];
            let mut at = 0usize;
            for s in src {
                let len = s.length as usize;
                if len > 0 {
                    // SAFETY: caller contract: an inline request's scatter
                    // entries are readable for `length` bytes; the total
                    // fits `buf` (checked above).
                    let bytes = unsafe { std::slice::from_raw_parts(s.addr as *const u8, len) };
                    buf[at..at + len].copy_from_slice(bytes);
                }
                at += len;
            }
            sges[0] = ibv_sge {
                addr: buf.as_ptr() as u64,
                length: at as u32,
                lkey: 0,
            };
            copy_n = usize::from(at > 0);
        } else {
            sges[..n].copy_from_slice(src);
        }
        let sg_list = sges.as_mut_ptr();
        // SAFETY: `wr` is valid for reads (caller contract) and the slot is
        // a valid, exclusively borrowed `ibv_send_wr`; the two never
        // overlap (ours is in our own storage).
        unsafe { std::ptr::copy_nonoverlapping(wr, &mut self.wrs[i], 1) };
        let c = &mut self.wrs[i];
        c.next = std::ptr::null_mut();
        c.sg_list = sg_list;
        c.num_sge = copy_n as i32;
        self.app_ids[i] = w.wr_id;
        self.len += 1;
        Ok(())
    }

    /// The `i`-th request from the front (our copy; its `wr_id` is the
    /// application's until the caller swaps it for a token), or `None`.
    pub fn get_mut(&mut self, i: usize) -> Option<&mut ibv_send_wr> {
        (i < self.len).then(|| {
            let s = self.slot(i);
            &mut self.wrs[s]
        })
    }

    /// The application's `wr_id` of the `i`-th request from the front.
    pub fn app_id(&self, i: usize) -> Option<u64> {
        (i < self.len).then(|| self.app_ids[self.slot(i)])
    }

    /// The bytes the `i`-th request moves (its scatter list's total; at
    /// least 1, as admission counts bytes).
    pub fn bytes(&self, i: usize) -> Option<u32> {
        let w = self.wrs.get(self.slot(i)).filter(|_| i < self.len)?;
        Some(wr_bytes(w))
    }

    /// Drops the `n` front requests (posted, or flushed).
    pub fn pop(&mut self, n: usize) {
        let n = n.min(self.len);
        self.head = (self.head + n) % self.wrs.len();
        self.len -= n;
    }

    /// Links the `n` front requests into one chain (each `next` to the
    /// following one, the last to NULL) and returns its head. Their order
    /// is the posting order.
    pub fn chain(&mut self, n: usize) -> *mut ibv_send_wr {
        let n = n.min(self.len);
        let mut next: *mut ibv_send_wr = std::ptr::null_mut();
        for i in (0..n).rev() {
            let s = self.slot(i);
            self.wrs[s].next = next;
            next = &mut self.wrs[s];
        }
        next
    }

    /// Position from the front of a request of this queue, if `wr` points
    /// at one of the first `n` (a `bad_wr` inside a chain from [`chain`](Self::chain)).
    pub fn position(&self, wr: *const ibv_send_wr, n: usize) -> Option<usize> {
        (0..n.min(self.len)).find(|&i| std::ptr::eq(&self.wrs[self.slot(i)], wr))
    }
}

/// The bytes a request moves, for admission: its scatter list's total, at
/// least 1 (a zero-length WRITE or an atomic still occupies the path).
pub fn wr_bytes(w: &ibv_send_wr) -> u32 {
    let n = usize::try_from(w.num_sge).unwrap_or(0);
    if n == 0 || w.sg_list.is_null() {
        return 1;
    }
    // SAFETY: the verbs contract of a posted request (and of our copies):
    // `sg_list` holds `num_sge` entries.
    let s = unsafe { std::slice::from_raw_parts(w.sg_list, n) };
    let total: u64 = s.iter().map(|x| u64::from(x.length)).sum();
    total.clamp(1, u64::from(u32::MAX)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wr(id: u64, sges: &mut [ibv_sge], flags: u32) -> ibv_send_wr {
        let mut w = zeroed_wr();
        w.wr_id = id;
        w.sg_list = sges.as_mut_ptr();
        w.num_sge = sges.len() as i32;
        w.send_flags = flags;
        w
    }

    #[test]
    fn copies_are_private_and_fifo() {
        let mut q = DeferQueue::new(2, 2, 0);
        let mut s1 = [
            ibv_sge {
                addr: 0x1000,
                length: 100,
                lkey: 7,
            },
            ibv_sge {
                addr: 0x2000,
                length: 28,
                lkey: 7,
            },
        ];
        let mut s2 = [ibv_sge {
            addr: 0x3000,
            length: 4096,
            lkey: 8,
        }];
        let w1 = wr(11, &mut s1, 0);
        let w2 = wr(22, &mut s2, 0);
        // SAFETY: valid requests with valid scatter lists.
        unsafe {
            q.push(&w1).unwrap();
            q.push(&w2).unwrap();
            assert_eq!(q.push(&w1), Err(DeferError::Full));
        }
        // The application scribbles over its arrays: the copies stand.
        s1[0].length = 0;
        s2[0].addr = 0;
        assert_eq!((s1[0].length, s2[0].addr), (0, 0));
        assert_eq!(
            (q.app_id(0), q.app_id(1), q.app_id(2)),
            (Some(11), Some(22), None)
        );
        assert_eq!((q.bytes(0), q.bytes(1)), (Some(128), Some(4096)));
        let head = q.chain(2);
        // SAFETY: the chain points into the queue's own storage.
        unsafe {
            assert_eq!((*head).wr_id, 11);
            assert_eq!((*(*head).next).wr_id, 22);
            assert!((*(*head).next).next.is_null());
            assert_eq!((*(*(*head).next).sg_list).addr, 0x3000);
            assert_eq!(q.position((*head).next, 2), Some(1));
        }
        q.pop(1);
        assert_eq!((q.len(), q.app_id(0)), (1, Some(22)));
        // Wraps around.
        let w3 = wr(33, &mut s2, 0);
        // SAFETY: valid request.
        unsafe { q.push(&w3).unwrap() };
        assert_eq!((q.app_id(0), q.app_id(1)), (Some(22), Some(33)));
    }

    #[test]
    fn inline_bytes_are_copied_and_limits_are_typed() {
        let mut q = DeferQueue::new(4, 2, 16);
        let data = *b"0123456789";
        let mut s = [
            ibv_sge {
                addr: data.as_ptr() as u64,
                length: 6,
                lkey: 0,
            },
            ibv_sge {
                addr: data[6..].as_ptr() as u64,
                length: 4,
                lkey: 0,
            },
        ];
        let inl = ibv_send_flags::IBV_SEND_INLINE.0;
        let w = wr(1, &mut s, inl);
        // SAFETY: valid request; inline buffers readable.
        unsafe { q.push(&w).unwrap() };
        let c = q.get_mut(0).unwrap();
        assert_eq!(c.num_sge, 1);
        // SAFETY: our copy's one scatter entry points at our inline bytes.
        let copied = unsafe {
            let sge = &*c.sg_list;
            std::slice::from_raw_parts(sge.addr as *const u8, sge.length as usize)
        };
        assert_eq!(copied, b"0123456789");
        let mut big = [ibv_sge {
            addr: data.as_ptr() as u64,
            length: 17,
            lkey: 0,
        }];
        let w = wr(2, &mut big, inl);
        // SAFETY: the check fails before any byte is read.
        assert_eq!(unsafe { q.push(&w) }, Err(DeferError::InlineTooLong(17)));
        let mut three = [ibv_sge {
            addr: 0,
            length: 1,
            lkey: 0,
        }; 3];
        let w = wr(3, &mut three, 0);
        // SAFETY: the check fails before the list is read.
        assert_eq!(unsafe { q.push(&w) }, Err(DeferError::TooManySge(3)));
        assert_eq!(q.len(), 1);
    }

    #[test]
    fn bytes_of_an_empty_request_count_one() {
        let mut w = zeroed_wr();
        assert_eq!(wr_bytes(&w), 1);
        let mut s = [ibv_sge {
            addr: 0,
            length: 0,
            lkey: 0,
        }];
        w.sg_list = s.as_mut_ptr();
        w.num_sge = 1;
        assert_eq!(wr_bytes(&w), 1);
    }
}
