//! What a session counts: for status, metrics and reports (docs/design.md 6).

use crate::link::{LinkId, LinkState};
use std::time::Duration;

/// Why an incoming datagram was dropped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DatagramError {
    /// It does not parse.
    #[error("malformed datagram: {0}")]
    Malformed(#[from] crate::wire::WireError),
    /// It belongs to another session.
    #[error("datagram for session {got}, this is session {ours}")]
    WrongSession {
        /// Session id in the datagram.
        got: u32,
        /// This session's id.
        ours: u32,
    },
    /// The client received it on a link other than the one it names, or names no link it has.
    #[error("datagram names {named}, which this end does not have or did not receive it on")]
    UnknownLink {
        /// The link named in the header.
        named: LinkId,
    },
}

/// Why a passenger packet was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TunError {
    /// Larger than the TUN MTU: braid cannot carry it without fragmenting.
    #[error("packet of {len} bytes exceeds the tunnel MTU of {max}")]
    TooLarge {
        /// Its length.
        len: usize,
        /// The largest accepted.
        max: usize,
    },
    /// Empty.
    #[error("empty packet")]
    Empty,
}

/// Session-wide counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionStats {
    /// Passenger packets taken from the TUN side.
    pub tun_in: u64,
    /// Passenger packets refused (too large, empty).
    pub tun_refused: u64,
    /// Passenger packets dropped by active queue management: the uplinks were congested
    /// ([`crate::aqm`]).
    pub aqm_dropped: u64,
    /// Passenger packets delivered to the TUN side.
    pub delivered: u64,
    /// Data packets sent (first transmissions).
    pub data_sent: u64,
    /// Data packets sent again (retransmissions, duplicates, re-sends after a link went down).
    pub data_resent: u64,
    /// Coded packets sent.
    pub coded_sent: u64,
    /// Coded packets that could not be built (a member was no longer stored).
    pub coded_unbuildable: u64,
    /// Feedback packets sent.
    pub feedback_sent: u64,
    /// Probes and probe replies sent.
    pub probes_sent: u64,
    /// Bytes of every datagram sent (braid header and payload).
    pub bytes_sent: u64,
    /// Bytes of data-packet payload sent for the first time.
    pub payload_bytes_sent: u64,
    /// Datagrams received and accepted.
    pub datagrams_received: u64,
    /// Duplicate data packets received.
    pub duplicates: u64,
    /// Packets recovered from coded packets.
    pub recovered: u64,
    /// Datagrams dropped because they did not parse.
    pub malformed: u64,
    /// Datagrams dropped because they named another session.
    pub wrong_session: u64,
    /// Datagrams dropped because they named an unknown link.
    pub unknown_link: u64,
    /// NACKed sequence numbers reported to the peer.
    pub nacks_sent: u64,
}

/// A snapshot of one link for status output.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkStatus {
    /// The link.
    pub id: LinkId,
    /// Its state.
    pub state: LinkState,
    /// RTT from probes.
    pub srtt: Option<Duration>,
    /// Outgoing d + δ relative to the fastest link, µs (the clock offset cancels).
    pub relative_owd_us: Option<i64>,
    /// Loss of the outgoing direction, as the peer measures it.
    pub tx_loss: f64,
    /// Loss of the incoming direction, as measured here.
    pub rx_loss: f64,
    /// Capacity of the outgoing direction used for the queue model, bit/s.
    pub tx_capacity_bps: f64,
    /// Capacity of the incoming direction as estimated here, bit/s.
    pub rx_capacity_bps: f64,
    /// Estimated queue at the outgoing bottleneck.
    pub queue: Duration,
    /// Operator weight.
    pub weight: u32,
    /// Counters.
    pub counters: LinkCounters,
    /// Lifecycle phase (link/lifecycle.rs): like `state`, and tells degraded from active.
    pub phase: crate::link::Phase,
    /// Time spent in each phase so far, and how often each was entered.
    pub time_in: [(crate::link::Phase, Duration, u32); 4],
    /// Its coding budget and backup mode.
    pub metering: crate::link::Metering,
    /// Bytes of data datagrams sent on it (braid header and payload, first sends and resends):
    /// what the coding budget is a fraction of.
    pub data_bytes: u64,
    /// Bytes of coded datagrams sent on it (braid header and payload).
    pub coded_bytes: u64,
    /// Coded datagrams its budget held back.
    pub coded_withheld: u64,
    /// The longest queue the peer has measured at its outgoing bottleneck: how deep that
    /// buffer is at least.
    pub peak_queue: Duration,
}

/// Per-link counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkCounters {
    /// Data packets sent (first transmissions and resends).
    pub data_sent: u64,
    /// Coded packets sent.
    pub coded_sent: u64,
    /// Datagrams sent of any type.
    pub datagrams_sent: u64,
    /// Bytes sent of any type.
    pub bytes_sent: u64,
    /// Datagrams received.
    pub datagrams_received: u64,
    /// Bytes received.
    pub bytes_received: u64,
    /// Times the link went down.
    pub downs: u64,
    /// Times the peer's echoes showed a queue above the model's and corrected it
    /// ([`crate::link::TxLink::check_queue`]).
    pub queue_corrections: u64,
}
