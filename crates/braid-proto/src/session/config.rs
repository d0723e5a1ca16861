//! Session configuration.

use crate::aqm::AqmConfig;
use crate::link::{LinkId, Metering};
use crate::recovery::RecoveryKind;
use crate::scheduler::SchedulerKind;
use std::net::SocketAddr;
use std::time::Duration;

/// Which end of the tunnel a session is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The vehicle gateway (PluriBus' VanProxy): owns the uplinks, knows the server's address.
    Client,
    /// The server on the wired Internet (LanProxy): learns links and addresses from the client.
    Server,
}

/// How long the sequencing buffer holds out-of-order packets (PluriBus 5.4).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HoldConfig {
    /// A fixed hold time; `None` derives it from the links' delay spread.
    pub fixed: Option<Duration>,
    /// Added to the delay spread: room for jitter and for a coded packet to follow.
    pub margin: Duration,
    /// Lower bound of the derived hold.
    pub min: Duration,
    /// Upper bound of the derived hold.
    pub max: Duration,
}

impl Default for HoldConfig {
    fn default() -> Self {
        HoldConfig {
            fixed: None,
            margin: Duration::from_millis(40),
            min: Duration::from_millis(40),
            max: Duration::from_millis(1000),
        }
    }
}

/// Session-wide settings.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// Client or server.
    pub role: Role,
    /// Session id (16 bits, [`crate::wire::Header::MAX_SESSION`]; higher bits are dropped with a
    /// warning when the session is made).
    pub session_id: u32,
    /// Loss-recovery scheme for what this end sends.
    pub recovery: RecoveryKind,
    /// Scheduler for what this end sends.
    pub scheduler: SchedulerKind,
    /// Seed of every random choice the session makes.
    pub seed: u64,
    /// Sequencing-buffer hold.
    pub hold: HoldConfig,
    /// Largest passenger packet accepted (the TUN MTU).
    pub max_packet: usize,
    /// A standalone ack goes out when one has been pending this long with no data to carry it.
    pub ack_delay: Duration,
    /// Link reports (estimates, echoes) go out at least this often while traffic arrives.
    pub report_interval: Duration,
    /// Probe period while a link is probing.
    pub probe_interval: Duration,
    /// Probe period while a link is down.
    pub down_probe_interval: Duration,
    /// An active link idle this long is probed, so its liveness and RTT stay known.
    pub keepalive: Duration,
    /// Least time without confirmation before an active link is declared down.
    pub min_down_timeout: Duration,
    /// Sent packets kept for retransmission and coding: at most this many...
    pub store_packets: usize,
    /// ...and none older than this.
    pub store_age: Duration,
    /// Active queue management of passengers' packets at this end's ingress.
    pub aqm: AqmConfig,
    /// Admission, degradation and the wait for an admitted link (link/lifecycle.rs).
    pub lifecycle: crate::link::LifecycleConfig,
    /// Location awareness (location.rs, paper 002 section 8); off by default.
    pub location: crate::location::LocationConfig,
}

impl SessionConfig {
    /// Defaults for `role`.
    pub fn new(role: Role) -> Self {
        SessionConfig {
            role,
            session_id: 1,
            recovery: RecoveryKind::Auto,
            scheduler: SchedulerKind::MinDelay,
            seed: 0,
            hold: HoldConfig::default(),
            max_packet: 1432,
            ack_delay: Duration::from_millis(20),
            report_interval: Duration::from_millis(100),
            probe_interval: Duration::from_millis(100),
            down_probe_interval: Duration::from_millis(250),
            keepalive: Duration::from_secs(1),
            min_down_timeout: Duration::from_millis(400),
            store_packets: 8192,
            store_age: Duration::from_secs(3),
            aqm: AqmConfig::default(),
            lifecycle: crate::link::LifecycleConfig::default(),
            location: crate::location::LocationConfig::default(),
        }
    }
}

/// One uplink as configured.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkConfig {
    /// Its id.
    pub id: LinkId,
    /// Where to send on it (the server's address, on the client).
    pub remote: Option<SocketAddr>,
    /// Expected capacity of this end's sending direction, bit/s (0 = unknown).
    pub tx_bps: f64,
    /// Expected capacity of this end's receiving direction, bit/s (0 = unknown).
    pub rx_bps: f64,
    /// Operator weight.
    pub weight: u32,
    /// What coding may spend on it and whether it is a backup ([`Metering`]); applies
    /// to what this end sends.
    pub metering: Metering,
    /// This end's name for the link, sent to the peer in probes (the client's `[[uplink]]`
    /// name), so that the server names it alike in its status and metrics.
    pub name: Option<crate::wire::LinkName>,
}

impl LinkConfig {
    /// A link with capacity bootstraps in bit/s.
    pub fn new(id: LinkId, remote: Option<SocketAddr>, tx_bps: f64, rx_bps: f64) -> Self {
        LinkConfig { id, remote, tx_bps, rx_bps, weight: 1, metering: Metering::default(), name: None }
    }
}
