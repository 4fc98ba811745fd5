//! Slice attempt identity (RFC 3136).

/// Names one attempt of one slice: the slice's slot in its table and the
/// attempt id that was current when the work was posted.
///
/// A completion carrying a `SliceRef` may mutate the slice only while
/// `attempt` is still the slice's current attempt.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SliceRef {
    /// Slot of the slice in its [`SliceTable`](crate::slice).
    pub index: u32,
    /// Attempt id at post time.
    pub attempt: u32,
}
