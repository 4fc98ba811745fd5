//! The control-message budget: bounded, separate from data credit.
//!
//! Credit, usage, return, heartbeat, reset, cancel and health messages are
//! admitted against this budget only — it never looks at data credit, so a
//! zero data window cannot block the message that reopens it. A share of
//! the slots is *reserved* for the window-reopening kinds
//! ([`ControlKind::reopens_window`]: credit updates, returns, resets), so a
//! flood of usage/health/heartbeat messages cannot starve them either.
//!
//! Single owner (`&mut self`): the control thread. Policy only — the caller
//! sends the bytes.
use core::fmt;

/// A control message kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ControlKind {
    /// Receiver credit update.
    Credit = 0,
    /// Sender usage / demand report.
    Usage = 1,
    /// Explicit return of unused credit.
    Return = 2,
    /// Liveness heartbeat.
    Heartbeat = 3,
    /// Session / epoch reset.
    Reset = 4,
    /// Cancel of queued work.
    Cancel = 5,
    /// Health report.
    Health = 6,
}

/// Number of control kinds.
pub const CONTROL_KINDS: usize = 7;

impl ControlKind {
    /// Whether the message can reopen a closed data window (it may use the
    /// reserved share).
    ///
    /// ```
    /// use railyard_core::credit::ControlKind;
    /// assert!(ControlKind::Credit.reopens_window() && !ControlKind::Usage.reopens_window());
    /// ```
    pub const fn reopens_window(self) -> bool {
        matches!(
            self,
            ControlKind::Credit | ControlKind::Return | ControlKind::Reset
        )
    }
}

/// A held control slot; give it back with [`ControlBudget::complete`] when
/// the message is sent (or dropped by the transport).
#[must_use = "a control permit must be completed"]
#[derive(Debug, PartialEq, Eq)]
pub struct ControlPermit {
    kind: ControlKind,
    reserved: bool,
}

impl ControlPermit {
    /// The message kind.
    ///
    /// ```
    /// use railyard_core::credit::{ControlBudget, ControlKind};
    /// let mut b = ControlBudget::new(2, 0).unwrap();
    /// let p = b.try_acquire(ControlKind::Heartbeat).unwrap();
    /// assert_eq!(p.kind(), ControlKind::Heartbeat);
    /// b.complete(p).unwrap();
    /// ```
    pub fn kind(&self) -> ControlKind {
        self.kind
    }
}

/// Why a control message was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BudgetError {
    /// The kind's share of the budget is full.
    Exhausted(ControlKind),
    /// `reserved > total` or `total == 0`.
    BadConfig,
    /// A permit completed twice or from another budget (refused, counted).
    NotHeld,
}

impl fmt::Display for BudgetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BudgetError::Exhausted(k) => write!(f, "control budget exhausted for {k:?}"),
            BudgetError::BadConfig => {
                f.write_str("control budget: reserved must be <= total, total > 0")
            }
            BudgetError::NotHeld => f.write_str("control permit not held by this budget"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for BudgetError {}

/// Bounded in-flight control messages, with a reserved share for
/// window-reopening kinds.
///
/// ```
/// use railyard_core::credit::{ControlBudget, ControlKind};
/// let mut b = ControlBudget::new(4, 1).unwrap();
/// let usage: Vec<_> = (0..3).map(|_| b.try_acquire(ControlKind::Usage).unwrap()).collect();
/// assert!(b.try_acquire(ControlKind::Health).is_err()); // shared part full
/// let credit = b.try_acquire(ControlKind::Credit).unwrap(); // reserved part
/// b.complete(credit).unwrap();
/// for p in usage { b.complete(p).unwrap(); }
/// ```
#[derive(Clone, Debug)]
pub struct ControlBudget {
    total: u32,
    reserved: u32,
    shared_used: u32,
    reserved_used: u32,
    sent: [u64; CONTROL_KINDS],
    refused: [u64; CONTROL_KINDS],
    bad_completions: u64,
}

impl ControlBudget {
    /// `total` in-flight control messages, `reserved` of them only for
    /// window-reopening kinds.
    ///
    /// ```
    /// use railyard_core::credit::{BudgetError, ControlBudget};
    /// assert!(ControlBudget::new(8, 2).is_ok());
    /// assert_eq!(ControlBudget::new(2, 3).unwrap_err(), BudgetError::BadConfig);
    /// ```
    pub fn new(total: u32, reserved: u32) -> Result<ControlBudget, BudgetError> {
        if total == 0 || reserved > total {
            return Err(BudgetError::BadConfig);
        }
        Ok(ControlBudget {
            total,
            reserved,
            shared_used: 0,
            reserved_used: 0,
            sent: [0; CONTROL_KINDS],
            refused: [0; CONTROL_KINDS],
            bad_completions: 0,
        })
    }

    /// Takes a slot for a `kind` message. Never consults data credit.
    ///
    /// ```
    /// use railyard_core::credit::{BudgetError, ControlBudget, ControlKind};
    /// let mut b = ControlBudget::new(2, 1).unwrap();
    /// let usage = b.try_acquire(ControlKind::Usage).unwrap();
    /// assert_eq!(b.try_acquire(ControlKind::Usage).unwrap_err(), BudgetError::Exhausted(ControlKind::Usage));
    /// let reset = b.try_acquire(ControlKind::Reset).unwrap(); // the reserved share
    /// assert_eq!(b.refused(ControlKind::Usage), 1);
    /// b.complete(usage).unwrap();
    /// b.complete(reset).unwrap();
    /// ```
    pub fn try_acquire(&mut self, kind: ControlKind) -> Result<ControlPermit, BudgetError> {
        let shared = self.total - self.reserved;
        let permit = if self.shared_used < shared {
            self.shared_used += 1;
            ControlPermit {
                kind,
                reserved: false,
            }
        } else if kind.reopens_window() && self.reserved_used < self.reserved {
            self.reserved_used += 1;
            ControlPermit {
                kind,
                reserved: true,
            }
        } else {
            self.refused[kind as usize] += 1;
            return Err(BudgetError::Exhausted(kind));
        };
        self.sent[kind as usize] += 1;
        Ok(permit)
    }

    /// Gives a slot back. Refuses (never underflows) a permit not held.
    ///
    /// ```
    /// use railyard_core::credit::{ControlBudget, ControlKind};
    /// let mut b = ControlBudget::new(1, 0).unwrap();
    /// let p = b.try_acquire(ControlKind::Credit).unwrap();
    /// assert_eq!(b.in_flight(), 1);
    /// b.complete(p).unwrap(); // sent
    /// assert_eq!(b.in_flight(), 0);
    /// ```
    pub fn complete(&mut self, p: ControlPermit) -> Result<(), BudgetError> {
        let used = if p.reserved {
            &mut self.reserved_used
        } else {
            &mut self.shared_used
        };
        match used.checked_sub(1) {
            Some(v) => {
                *used = v;
                Ok(())
            }
            None => {
                self.bad_completions += 1;
                Err(BudgetError::NotHeld)
            }
        }
    }

    /// Slots in use.
    ///
    /// ```
    /// use railyard_core::credit::{ControlBudget, ControlKind};
    /// let mut b = ControlBudget::new(4, 0).unwrap();
    /// let ps: Vec<_> = (0..3).map(|_| b.try_acquire(ControlKind::Health).unwrap()).collect();
    /// assert_eq!(b.in_flight(), 3);
    /// for p in ps { b.complete(p).unwrap(); }
    /// ```
    pub fn in_flight(&self) -> u32 {
        self.shared_used + self.reserved_used
    }

    /// Messages admitted, by kind.
    ///
    /// ```
    /// use railyard_core::credit::{ControlBudget, ControlKind};
    /// let mut b = ControlBudget::new(4, 0).unwrap();
    /// let p = b.try_acquire(ControlKind::Return).unwrap();
    /// b.complete(p).unwrap();
    /// assert_eq!((b.sent(ControlKind::Return), b.sent(ControlKind::Credit)), (1, 0));
    /// ```
    pub fn sent(&self, kind: ControlKind) -> u64 {
        self.sent[kind as usize]
    }

    /// Messages refused, by kind.
    ///
    /// ```
    /// use railyard_core::credit::{ControlBudget, ControlKind};
    /// let mut b = ControlBudget::new(1, 1).unwrap(); // all reserved
    /// assert!(b.try_acquire(ControlKind::Cancel).is_err());
    /// assert_eq!(b.refused(ControlKind::Cancel), 1);
    /// ```
    pub fn refused(&self, kind: ControlKind) -> u64 {
        self.refused[kind as usize]
    }
}
