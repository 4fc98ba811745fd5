//! Endpoint generations and the unified retire API (RFC 3136).

/// A generation-checked reference to an endpoint: never a pointer.
///
/// A slot is reused only with a new generation, so a handle held by an old
/// completion can never act on the endpoint that replaced it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct EndpointHandle {
    /// Slot in the endpoint table.
    pub slot: u32,
    /// Generation of the slot when the handle was issued.
    pub generation: u32,
}
