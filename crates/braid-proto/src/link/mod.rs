//! Uplinks: identity, state, and the per-link estimators of PluriBus 5.2 and 5.3.
//!
//! Each direction of each link is measured by its receiver ([`RxEstimator`]: loss, capacity,
//! one-way delay plus clock offset) and reported to its sender, which keeps the running queue
//! estimate and the arrival-time prediction ([`TxLink`]).

pub mod lifecycle;
mod meter;
mod rx;
mod tx;

pub use lifecycle::{Evidence, Lifecycle, LifecycleConfig, Phase};
pub use meter::{BACKUP_KEEPALIVE, CODING_CREDIT_CAP, CodingMeter, Metering, MeteringError};
pub use rx::{CONGESTION_QUEUE_MIN, RxEstimator, RxSample};
pub use tx::{
    BRIM_SHARE, LinkState, OVERDUE_DOWN, OVERDUE_MARGIN, PROBES_BEFORE_DOWN, PROBES_TO_ACTIVATE, SILENCE_CONFIRM,
    TxLink,
};

use crate::time::Instant;
use std::fmt;
use std::time::Duration;

/// Identifies one of a vehicle's uplinks within a session (carried in every datagram).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct LinkId(pub u8);

impl fmt::Display for LinkId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "link{}", self.0)
    }
}

/// Bytes of outer IPv4 and UDP header around every sealed datagram.
pub const IP_UDP_OVERHEAD: usize = 28;

/// Bytes the air adds to each of the engine's datagrams: the AEAD tag it is sealed with
/// ([`crate::SealedSession`]) and the outer IPv4 and UDP headers. The bottleneck carries them too,
/// so the capacity estimator and the schedulers' transmission times count them.
pub const OUTER_OVERHEAD: usize = crate::crypto::TAG_LEN + IP_UDP_OVERHEAD;

/// Bits per second to kbit/s, rounded, for reports on the wire.
pub(crate) fn bps_to_kbps(bps: f64) -> u32 {
    (bps / 1000.0).round().clamp(0.0, f64::from(u32::MAX)) as u32
}

/// Time to put `bytes` on a link of `bps` bits per second, in µs (0 when the rate is unknown).
pub(crate) fn tx_time_us(bytes: usize, bps: f64) -> f64 {
    if bps > 0.0 { bytes as f64 * 8.0 * 1e6 / bps } else { 0.0 }
}

/// Keeps in `max` (current bucket, previous bucket, bucket start) the largest `value` of the last
/// one to two `bucket`s, `value` included, and returns it.
pub(crate) fn track_max(max: &mut (f64, f64, Option<Instant>), bucket: Duration, now: Instant, value: f64) -> f64 {
    let (cur, prev, since) = max;
    match since {
        Some(t) if now < *t + bucket => {}
        _ => {
            *prev = *cur;
            *cur = f64::NEG_INFINITY;
            *since = Some(now);
        }
    }
    *cur = cur.max(value);
    cur.max(*prev)
}
