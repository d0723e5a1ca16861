//! The `[[scheme]]` entries of a scenario: which loss recovery and scheduler braid runs, or which
//! real-testbed peer is compared against (docs/design.md 4, 5, 7). braid's schemes are written and
//! parsed as everywhere else ([`braid_proto::scheme`]).

pub use braid_proto::{RecoveryKind, SchedulerKind};
use std::time::Duration;

names! {
    /// A contender run on the real testbed instead of braid (docs/design.md 7).
    Peer {
        /// Plain kernel TCP on the best uplink.
        Plain = "plain",
        /// Kernel Multipath TCP.
        Mptcp = "mptcp",
        /// kcptun (ARQ plus Reed-Solomon FEC).
        Kcptun = "kcptun",
    }
}

/// What a scheme runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SchemeKind {
    /// braid itself, with this recovery and scheduler.
    Braid {
        /// Loss recovery.
        recovery: RecoveryKind,
        /// Link scheduler.
        scheduler: SchedulerKind,
    },
    /// A real-testbed contender (parsed here, run by the testbed).
    Peer(Peer),
}

/// One `[[scheme]]`: everything that distinguishes one contender from another. New options go here.
#[derive(Debug, Clone, PartialEq)]
pub struct SchemeSpec {
    /// Unique name, used in reports.
    pub name: String,
    /// braid with a recovery and scheduler, or a peer.
    pub kind: SchemeKind,
    /// kcptun's redundancy in percent (`fec_percent`, peer `kcptun` only; braid's schemes carry
    /// theirs in the name, `fec:10`).
    pub fec_percent: Option<f64>,
    /// Fixed per-link weights for the `wrr` scheduler (required there, one per `[[link]]`).
    pub weights: Option<Vec<f64>>,
    /// Override of the sequencing buffer's hold time (braid schemes only; default derived from the
    /// links' delay spread, docs/design.md 4).
    pub hold: Option<Duration>,
    /// CoDel on the predicted uplink queue at braid's ingress (`aqm = true`; braid schemes only,
    /// off by default; braid_proto::aqm): for bulk flows over long fat uplinks.
    pub aqm: bool,
    /// Location awareness (`location = true`; braid schemes only, off by default;
    /// braid_proto::location): the client is told the vehicle's position and learns where each
    /// link is good.
    pub location: bool,
}

impl SchemeSpec {
    /// The default scheduler when a braid scheme names none.
    pub const DEFAULT_SCHEDULER: SchedulerKind = SchedulerKind::MinDelay;
}
