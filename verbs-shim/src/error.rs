//! The shim's error type.

use std::fmt;

/// Why a verbs call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerbsError {
    /// No RDMA device is present (or the kernel has no RDMA support).
    NoDevice,
    /// Devices exist, but none has this name.
    DeviceNotFound {
        /// The name asked for.
        name: String,
        /// The names that exist.
        available: Vec<String>,
    },
    /// A verbs call failed with an errno.
    Os {
        /// The verbs function.
        op: &'static str,
        /// `errno` as the call reported it.
        errno: i32,
    },
    /// A configuration value is outside what verbs allows.
    InvalidConfig {
        /// Which setting.
        what: &'static str,
        /// The value given.
        value: u64,
        /// The allowed range, for the message.
        allowed: &'static str,
    },
    /// A local or remote range does not lie inside its memory region.
    OutOfBounds {
        /// `"local"` or `"remote"`.
        side: &'static str,
        /// Offset asked for.
        offset: u64,
        /// Length asked for.
        len: u64,
        /// Size of the region.
        region_len: u64,
    },
    /// A zero-length buffer or transfer.
    ZeroLength,
    /// The QP is not in the state this operation needs.
    WrongState {
        /// The operation.
        op: &'static str,
        /// The state the QP is in.
        state: &'static str,
    },
}

impl fmt::Display for VerbsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoDevice => f.write_str("no RDMA device found"),
            Self::DeviceNotFound { name, available } => {
                write!(
                    f,
                    "RDMA device {name:?} not found (available: {})",
                    available.join(", ")
                )
            }
            Self::Os { op, errno } => {
                write!(
                    f,
                    "{op} failed: {} (errno {errno})",
                    std::io::Error::from_raw_os_error(*errno)
                )
            }
            Self::InvalidConfig {
                what,
                value,
                allowed,
            } => {
                write!(f, "invalid {what} {value}: allowed {allowed}")
            }
            Self::OutOfBounds {
                side,
                offset,
                len,
                region_len,
            } => write!(
                f,
                "{side} range {offset}+{len} exceeds its {region_len}-byte memory region"
            ),
            Self::ZeroLength => f.write_str("zero-length buffer or transfer"),
            Self::WrongState { op, state } => write!(f, "{op} is not allowed in QP state {state}"),
        }
    }
}

impl std::error::Error for VerbsError {}

/// The calling thread's `errno`, or `EIO` when the library left it unset.
pub(crate) fn errno() -> i32 {
    match std::io::Error::last_os_error().raw_os_error() {
        Some(0) | None => libc::EIO,
        Some(e) => e,
    }
}

/// Maps a verbs return code (0 or a positive errno; some providers return -1
/// and set `errno`) to a result.
pub(crate) fn check_rc(op: &'static str, rc: i32) -> Result<(), VerbsError> {
    match rc {
        0 => Ok(()),
        r if r > 0 => Err(VerbsError::Os { op, errno: r }),
        _ => Err(VerbsError::Os { op, errno: errno() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_device_message() {
        assert_eq!(VerbsError::NoDevice.to_string(), "no RDMA device found");
    }

    #[test]
    fn rc_mapping() {
        assert_eq!(check_rc("x", 0), Ok(()));
        assert_eq!(
            check_rc("x", libc::EINVAL),
            Err(VerbsError::Os {
                op: "x",
                errno: libc::EINVAL
            })
        );
        assert!(matches!(
            check_rc("x", -1),
            Err(VerbsError::Os { op: "x", .. })
        ));
        let e = VerbsError::Os {
            op: "ibv_modify_qp",
            errno: libc::EINVAL,
        }
        .to_string();
        assert!(e.starts_with("ibv_modify_qp failed: "), "{e}");
    }
}
