//! The `[[scheme]]` entries of a scenario: which loss recovery and scheduler braid runs, or which
//! real-testbed peer is compared against (DESIGN.md 4, 5, 7).

use std::time::Duration;

names! {
    /// A loss-recovery scheme (DESIGN.md 4).
    Recovery {
        /// No recovery beyond end-to-end TCP.
        None = "none",
        /// The receiver reports holes; the sender retransmits on the fastest link.
        Arq = "arq",
        /// One XOR packet per `100 / K` data packets (Maelstrom-style); needs `fec_percent`.
        Fec = "fec",
        /// Fixed-rate Reed-Solomon; needs `fec_percent`.
        Rs = "rs",
        /// Every packet on every link.
        Dup = "dup",
        /// Opportunistic erasure coding (PluriBus 4).
        Oec = "oec",
        /// RaptorQ blocks with FMTCP's repair allocation.
        Fountain = "fountain",
        /// Sliding-window random linear code over GF(2^8).
        Rlnc = "rlnc",
        /// braid's general setting, adapting to what it measures (`braid_proto::recovery::Auto`);
        /// what a `[[scheme]]` with only a `name` runs.
        Auto = "auto",
    }
}

names! {
    /// A link scheduler (DESIGN.md 4).
    SchedulerKind {
        /// Earliest estimated arrival (PluriBus 4.3).
        MinDelay = "min-delay",
        /// Weighted round robin (NATALIE); uses `weights`.
        Wrr = "wrr",
        /// FMTCP's expected arrival time.
        Eat = "eat",
        /// Plain round robin (TEQL).
        RoundRobin = "round-robin",
        /// The best link only.
        Single = "single",
        /// Every link.
        Dup = "dup",
    }
}

names! {
    /// A contender run on the real testbed instead of braid (DESIGN.md 7).
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemeKind {
    /// braid itself, with this recovery and scheduler.
    Braid {
        /// Loss recovery.
        recovery: Recovery,
        /// Link scheduler.
        scheduler: SchedulerKind,
    },
    /// A real-testbed contender (parsed here, run by the testbed).
    Peer(Peer),
}

/// Per-link scheduler weights (`weights = [..]` or `weights = "auto"`).
#[derive(Debug, Clone, PartialEq)]
pub enum Weights {
    /// From each link's measured available bandwidth (NATALIE).
    Auto,
    /// One non-negative weight per link, in `[[link]]` order; not all zero.
    Fixed(Vec<f64>),
}

/// One `[[scheme]]`: everything that distinguishes one contender from another. New options go here.
#[derive(Debug, Clone, PartialEq)]
pub struct SchemeSpec {
    /// Unique name, used in reports.
    pub name: String,
    /// braid with a recovery and scheduler, or a peer.
    pub kind: SchemeKind,
    /// Redundancy K in percent for `fec` and `rs` (required there, 0 < K <= 1000) and `kcptun`
    /// (optional there); for `rlnc` (optional, 0 < K <= 100) the coded packets it sends ahead of
    /// any report per 100 data packets (`rlnc:<K>`); absent otherwise.
    pub fec_percent: Option<f64>,
    /// Scheduler weights; only with the `wrr` scheduler, which defaults to [`Weights::Auto`].
    pub weights: Option<Weights>,
    /// Override of the sequencing buffer's hold time (braid schemes only; default derived from the
    /// links' delay spread, DESIGN.md 4).
    pub hold: Option<Duration>,
    /// CoDel on the predicted uplink queue at braid's ingress (`aqm = true`; braid schemes only,
    /// off by default; braid_proto::aqm): for bulk flows over long fat uplinks.
    pub aqm: bool,
}

impl SchemeSpec {
    /// The default scheduler when a braid scheme names none.
    pub const DEFAULT_SCHEDULER: SchedulerKind = SchedulerKind::MinDelay;
}
