//! braid-proto: braid's sans-IO engine.
//!
//! Wire format, sessions, per-link estimators, schedulers, loss-recovery coders and the sequencing
//! buffer. Nothing here reads a clock, touches a socket or draws OS randomness (DESIGN.md 2): the
//! daemon drives it with real sockets and time, the simulator with virtual ones.

pub mod time;

pub use time::Instant;
