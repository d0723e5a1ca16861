//! braid-proto: braid's sans-IO engine.
//!
//! Wire format, sessions, per-link estimators, schedulers, loss-recovery coders and the sequencing
//! buffer. Nothing here reads a clock, touches a socket or draws OS randomness (docs/design.md 2): the
//! daemon drives it with real sockets and time, the simulator with virtual ones.

// Public items' docs cite the private constants and helpers that set their behaviour, for the
// contributor who tunes them: `cargo doc --document-private-items` resolves those links.
#![allow(rustdoc::private_intra_doc_links)]

pub mod aqm;
pub mod crypto;
pub mod link;
pub mod location;
pub mod recovery;
pub mod reorder;
pub mod scheduler;
pub mod scheme;
pub mod seq;
pub mod session;
pub mod store;
pub mod time;
pub mod wire;

pub use link::{LinkId, LinkState, Metering};
pub use recovery::RecoveryKind;
pub use scheduler::SchedulerKind;
pub use session::{
    Event, LinkConfig, Packet, Role, SealedDatagramError, SealedSession, Session, SessionConfig, Timer, Transmit,
    TransmitKind,
};
pub use time::Instant;

#[cfg(test)]
mod tests;
