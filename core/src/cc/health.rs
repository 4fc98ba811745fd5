//! The path health state machine, as pure functions over a packed word.
//!
//! ```text
//! HEALTHY --sustained pressure with success--> CONGESTED --healthy epochs--> HEALTHY
//!    |                                             |
//!    +--a few timeouts or hard errors------------> SUSPECT
//!                                                     +--success----> HEALTHY/CONGESTED
//!                                                     +--threshold--> QUARANTINED
//!                                                                          | cooldown expires
//!                                                                          v
//!                                                                      PROBING
//!                                                                success /   \ failure
//!                                                               HEALTHY       QUARANTINED
//! ```
//!
//! [`step`] performs exactly one arrow (or nothing); the controller applies
//! it with a CAS on the domain's [`HealthWord`], so concurrent feedback can
//! never take an arrow that is not in the diagram. Immediately fatal evidence
//! (CQ / port / device fatal) goes HEALTHY → SUSPECT (errors saturated to
//! the threshold) → QUARANTINED: two real arrows, never a shortcut.

/// The five internal path states.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Health {
    /// Normal admission; calm epochs grow the window.
    Healthy = 0,
    /// Succeeding but pressured: the window shrinks, no failover.
    Congested = 1,
    /// Timeouts / hard errors below the threshold: the window stops growing.
    Suspect = 2,
    /// Threshold reached, fatal scope event, or failed probe: new posts are avoided.
    Quarantined = 3,
    /// After cooldown, on a new generation: only the bounded probe window is admitted.
    Probing = 4,
}

impl Health {
    /// Decodes the low three bits; invalid codes (impossible by
    /// construction) decode as `Quarantined` (fail closed).
    ///
    /// ```
    /// use railyard_core::cc::Health;
    /// assert_eq!(Health::from_bits(4), Health::Probing);
    /// assert_eq!(Health::from_bits(7), Health::Quarantined); // invalid: fail closed
    /// ```
    #[inline]
    pub const fn from_bits(b: u64) -> Self {
        match b & 0x7 {
            0 => Health::Healthy,
            1 => Health::Congested,
            2 => Health::Suspect,
            4 => Health::Probing,
            _ => Health::Quarantined,
        }
    }
}

/// Whether the diagram has the arrow `from → to` (`from == to` is "no move"
/// and also allowed).
///
/// ```
/// use railyard_core::cc::health::arrow_exists;
/// use railyard_core::cc::Health;
/// assert!(arrow_exists(Health::Quarantined, Health::Probing));
/// assert!(!arrow_exists(Health::Quarantined, Health::Healthy)); // only through a probe
/// ```
pub const fn arrow_exists(from: Health, to: Health) -> bool {
    use Health::*;
    matches!(
        (from, to),
        (Healthy, Healthy)
            | (Congested, Congested)
            | (Suspect, Suspect)
            | (Quarantined, Quarantined)
            | (Probing, Probing)
            | (Healthy, Congested)
            | (Congested, Healthy)
            | (Healthy, Suspect)
            | (Congested, Suspect)
            | (Suspect, Healthy)
            | (Suspect, Congested)
            | (Suspect, Quarantined)
            | (Quarantined, Probing)
            | (Probing, Healthy)
            | (Probing, Quarantined)
    )
}

/// The packed health word of one domain (one atomic `u64`):
/// bits 0..3 state, bit 3 pressured hint, bits 8..24 error count,
/// bits 24..32 quarantine sequence, bits 32..64 generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HealthWord(pub u64);

impl HealthWord {
    const PRESSURED: u64 = 1 << 3;

    /// A fresh HEALTHY word at generation `generation`.
    ///
    /// ```
    /// use railyard_core::cc::health::HealthWord;
    /// use railyard_core::cc::Health;
    /// let w = HealthWord::new(3);
    /// assert_eq!((w.health(), w.generation(), w.errors(), w.pressured()), (Health::Healthy, 3, 0, false));
    /// ```
    #[inline]
    pub const fn new(generation: u32) -> Self {
        Self((generation as u64) << 32)
    }

    /// The state.
    ///
    /// ```
    /// use railyard_core::cc::health::{step, Event, HealthWord};
    /// use railyard_core::cc::Health;
    /// let w = step(HealthWord::new(0), Event::HardError, 3).unwrap();
    /// assert_eq!(w.health(), Health::Suspect);
    /// ```
    #[inline]
    pub const fn health(self) -> Health {
        Health::from_bits(self.0)
    }

    /// The generation.
    ///
    /// ```
    /// use railyard_core::cc::health::{step, Event, HealthWord};
    /// use railyard_core::cc::Health;
    /// let w = step(HealthWord::new(5), Event::NewGeneration, 3).unwrap();
    /// assert_eq!((w.generation(), w.health()), (6, Health::Healthy)); // state kept
    /// ```
    #[inline]
    pub const fn generation(self) -> u32 {
        (self.0 >> 32) as u32
    }

    /// Hard errors counted on the way to quarantine.
    ///
    /// ```
    /// use railyard_core::cc::health::{step, Event, HealthWord};
    /// use railyard_core::cc::Health;
    /// let w = step(HealthWord::new(0), Event::HardError, 3).unwrap();
    /// let w = step(w, Event::HardError, 3).unwrap();
    /// assert_eq!(w.errors(), 2);
    /// ```
    #[inline]
    pub const fn errors(self) -> u16 {
        (self.0 >> 8) as u16
    }

    /// Quarantine entry sequence (increments on every entry to QUARANTINED).
    ///
    /// ```
    /// use railyard_core::cc::health::{step, Event, HealthWord};
    /// use railyard_core::cc::Health;
    /// let w = step(HealthWord::new(0), Event::Fatal, 1).unwrap(); // SUSPECT at the threshold
    /// let q = step(w, Event::Fatal, 1).unwrap();
    /// assert_eq!((q.health(), q.quarantine_seq()), (Health::Quarantined, w.quarantine_seq() + 1));
    /// ```
    #[inline]
    pub const fn quarantine_seq(self) -> u8 {
        (self.0 >> 24) as u8
    }

    /// Whether the monitor currently sees sustained pressure.
    ///
    /// ```
    /// use railyard_core::cc::health::{step, Event, HealthWord};
    /// use railyard_core::cc::Health;
    /// let w = step(HealthWord::new(0), Event::Pressure(true), 3).unwrap();
    /// assert!(w.pressured() && w.health() == Health::Congested);
    /// ```
    #[inline]
    pub const fn pressured(self) -> bool {
        self.0 & Self::PRESSURED != 0
    }

    #[inline]
    const fn with(self, h: Health, errors: u16) -> Self {
        Self((self.0 & !0x00ff_ff07) | h as u64 | ((errors as u64) << 8))
    }

    #[inline]
    const fn with_generation(self, g: u32) -> Self {
        Self((self.0 & 0xffff_ffff) | ((g as u64) << 32))
    }

    #[inline]
    const fn with_pressured(self, p: bool) -> Self {
        if p {
            Self(self.0 | Self::PRESSURED)
        } else {
            Self(self.0 & !Self::PRESSURED)
        }
    }

    #[inline]
    const fn enter_quarantine(self) -> Self {
        let seq = self.quarantine_seq().wrapping_add(1) as u64;
        Self((self.with(Health::Quarantined, 0).0 & !(0xff << 24)) | (seq << 24))
    }
}

/// An input to the state machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Event {
    /// A success on the current generation.
    Success,
    /// One hard error / route timeout on the current generation.
    HardError,
    /// Immediately fatal evidence for this domain (CQ / port / device fatal).
    Fatal,
    /// The monitor's sustained-pressure verdict (`true` = pressured).
    Pressure(bool),
    /// The quarantine cooldown expired: probe on a new generation.
    CooldownExpired,
    /// The transport rebuilt the path: a new generation, state kept.
    NewGeneration,
}

/// One step of the state machine: the next word, or `None` if `event`
/// changes nothing in this state. Every `Some` result is one arrow of the
/// diagram (or a same-state update of counters / generation).
///
/// ```
/// use railyard_core::cc::health::{step, Event, HealthWord};
/// use railyard_core::cc::Health;
/// let mut w = HealthWord::new(0);
/// for _ in 0..3 {
///     w = step(w, Event::HardError, 3).unwrap(); // threshold 3
/// }
/// assert_eq!(w.health(), Health::Quarantined);
/// assert_eq!(step(w, Event::HardError, 3), None); // nothing more to do
/// let p = step(w, Event::CooldownExpired, 3).unwrap();
/// assert_eq!((p.health(), p.generation()), (Health::Probing, 1));
/// assert_eq!(step(p, Event::Success, 3).unwrap().health(), Health::Healthy);
/// ```
pub const fn step(w: HealthWord, event: Event, threshold: u16) -> Option<HealthWord> {
    use Health::*;
    let h = w.health();
    match event {
        Event::Success => match h {
            Suspect => Some(w.with(if w.pressured() { Congested } else { Healthy }, 0)),
            Probing => Some(w.with(Healthy, 0)),
            _ => None,
        },
        Event::HardError => match h {
            Healthy | Congested => Some(w.with(Suspect, w.errors().saturating_add(1))),
            Suspect => {
                let e = w.errors().saturating_add(1);
                if e >= threshold {
                    Some(w.enter_quarantine())
                } else {
                    Some(w.with(Suspect, e))
                }
            }
            Probing => Some(w.enter_quarantine()),
            Quarantined => None,
        },
        Event::Fatal => match h {
            Healthy | Congested => Some(w.with(Suspect, threshold)),
            Suspect | Probing => Some(w.enter_quarantine()),
            Quarantined => None,
        },
        Event::Pressure(p) => {
            let next = match (h, p) {
                (Healthy, true) => w.with(Congested, w.errors()),
                (Congested, false) => w.with(Healthy, w.errors()),
                _ => w,
            }
            .with_pressured(p);
            if next.0 == w.0 {
                None
            } else {
                Some(next)
            }
        }
        Event::CooldownExpired => match h {
            Quarantined => Some(
                w.with(Probing, 0)
                    .with_generation(w.generation().wrapping_add(1)),
            ),
            _ => None,
        },
        Event::NewGeneration => Some(w.with_generation(w.generation().wrapping_add(1))),
    }
}

/// Whether `step` must be applied again for the same fatal evidence (a
/// SUSPECT word whose errors reached the threshold escalates to QUARANTINED).
///
/// ```
/// use railyard_core::cc::health::{step, Event, HealthWord};
/// use railyard_core::cc::Health;
/// use railyard_core::cc::health::needs_escalation;
/// // Fatal evidence on a HEALTHY domain lands in SUSPECT at the threshold...
/// let w = step(HealthWord::new(0), Event::Fatal, 3).unwrap();
/// assert!(needs_escalation(w, 3));
/// // ... and one more step takes it to QUARANTINED.
/// assert_eq!(step(w, Event::Fatal, 3).unwrap().health(), Health::Quarantined);
/// ```
#[inline]
pub const fn needs_escalation(w: HealthWord, threshold: u16) -> bool {
    matches!(w.health(), Health::Suspect) && w.errors() >= threshold
}
