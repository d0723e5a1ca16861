//! What `braid status` shows and `/metrics` exports: a snapshot of the daemon, as JSON.

use braid_proto::{LinkId, Session};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// The whole daemon.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DaemonStatus {
    /// "client" or "server".
    pub role: String,
    /// Seconds since start.
    pub uptime_s: f64,
    /// Datagrams dropped before reaching a session: unparsable headers, or a first datagram of an
    /// unknown session that the engine refused (server).
    pub garbage_datagrams: u64,
    /// New sessions refused because `max_sessions` were open (server).
    pub sessions_refused: u64,
    /// Sessions dropped after being idle (server).
    pub sessions_expired: u64,
    /// Passenger packets from the TUN device that no session could take (server: unknown
    /// destination with several sessions open).
    pub unroutable_packets: u64,
    /// Datagrams whose send failed (interface down, no route, keys expired, ...).
    pub send_errors: u64,
    /// Passenger packets out of a vehicle's session that the server dropped, by reason.
    #[serde(default)]
    pub passenger_dropped: PassengerDropped,
    /// Datagrams dropped by the crypto layer, by reason; every dropped datagram is in exactly one
    /// of these or in `garbage_datagrams`.
    pub rejected: Rejected,
    /// Handshakes completed (new sessions and rekeys).
    pub handshakes: u64,
    /// Cookie replies sent instead of handshake responses (server under load).
    pub cookie_replies: u64,
    /// Unknown-session hints sent (server) or received (client).
    pub unknown_session_hints: u64,
    /// Datagrams read on one server worker's socket and handed to their session's worker: 0
    /// while the kernel steers each datagram to its session's socket (server).
    #[serde(default)]
    pub handed_over: u64,
    /// The sessions.
    pub sessions: Vec<SessionStatus>,
}

/// Passenger packets a server dropped on their way out of a session, by reason.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct PassengerDropped {
    /// Source address not in the sending vehicle's `allowed_ips` (spoofed, or a network missing
    /// from the server's configuration).
    pub source_not_allowed: u64,
    /// Not an IPv4 or IPv6 packet.
    pub not_ip: u64,
}

/// Rejected datagrams by reason (`braid_proto::crypto::Reject`).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Rejected {
    /// Failed authentication: modified, forged, wrong key, bad handshake MAC.
    pub bad_mac: u64,
    /// Replayed, or older than the replay window; replayed handshake initiations.
    pub replay: u64,
    /// Sealed datagrams for a session this end does not have.
    pub unknown_session: u64,
    /// Too short, unparsable, or unexpected.
    pub malformed: u64,
    /// Handshake initiations not processed under load (cookie required or over the source's rate).
    pub rate_limited: u64,
    /// Handshakes from keys not listed in the server's `[[peer]]` entries.
    pub unknown_key: u64,
    /// Sealed datagrams under keys older than the limit (180 s): the rekeys failed.
    #[serde(default)]
    pub expired: u64,
}

impl From<braid_proto::crypto::RejectCounts> for Rejected {
    fn from(c: braid_proto::crypto::RejectCounts) -> Self {
        Rejected {
            bad_mac: c.bad_mac,
            replay: c.replay,
            unknown_session: c.unknown_session,
            malformed: c.malformed,
            rate_limited: c.rate_limited,
            unknown_key: c.unknown_key,
            expired: c.expired,
        }
    }
}

/// One session.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SessionStatus {
    /// 16-bit session id.
    pub id: u32,
    /// The vehicle's name from the server's `[[peer]]` list (server), or the server's address
    /// (client).
    pub peer: String,
    /// The transport AEAD.
    pub cipher: String,
    /// Seconds since the session's keys were made (rekeyed every `rekey_s`).
    pub key_age_s: f64,
    /// Passenger packets from this vehicle dropped for a source outside its `allowed_ips`
    /// (server).
    #[serde(default)]
    pub source_not_allowed: u64,
    /// The server's worker that carries this session, for as long as it lives (server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<usize>,
    /// Recovery scheme in force for what this end sends.
    pub recovery: String,
    /// Scheduler in force.
    pub scheduler: String,
    /// Passenger packets taken from the TUN device.
    pub tun_in: u64,
    /// Passenger packets delivered to the TUN device.
    pub delivered: u64,
    /// Passenger packets dropped by active queue management: the uplinks were congested.
    #[serde(default)]
    pub aqm_dropped: u64,
    /// Data packets sent, first transmissions.
    pub data_sent: u64,
    /// Data packets sent again.
    pub data_resent: u64,
    /// Coded packets sent.
    pub coded_sent: u64,
    /// Packets recovered from coded packets (the engine counts them per session, not per link).
    pub recovered: u64,
    /// Malformed datagrams dropped by the session.
    pub malformed: u64,
    /// Datagrams that named an unknown link.
    pub unknown_link: u64,
    /// Bytes sent, all datagrams.
    pub bytes_sent: u64,
    /// Passenger packets delivered after waiting in braid for an earlier one (reordered across
    /// uplinks, or repaired).
    #[serde(default)]
    pub reorder_waited: u64,
    /// Passenger packets whose wait for an earlier one ran out: the gap was skipped, and the
    /// passenger's TCP saw a hole (a loss, or reordering if the packet turned up later).
    #[serde(default)]
    pub reorder_skipped: u64,
    /// Passenger packets delivered after their gap had been skipped (out of order).
    #[serde(default)]
    pub reorder_late: u64,
    /// The uplinks.
    pub uplinks: Vec<UplinkStatus>,
}

/// One uplink of a session.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct UplinkStatus {
    /// Link id on the wire.
    pub id: u8,
    /// Configured name (client), or the name the vehicle reports for it (server; `link<N>` until
    /// it has).
    pub name: String,
    /// Interface (client).
    pub interface: Option<String>,
    /// Whether the client has a socket on it (interface present, up, addressed).
    pub present: bool,
    /// probing, active, degraded or down (link/lifecycle.rs).
    pub state: String,
    /// Smoothed RTT from probes, ms.
    pub rtt_ms: Option<f64>,
    /// Outgoing one-way delay relative to the fastest link, ms (clock offset cancels).
    pub owd_ms: Option<f64>,
    /// Outgoing loss as the peer measures it.
    pub tx_loss: f64,
    /// Incoming loss as measured here.
    pub rx_loss: f64,
    /// Outgoing capacity estimate, kbit/s.
    pub tx_capacity_kbps: f64,
    /// Incoming capacity estimate, kbit/s.
    pub rx_capacity_kbps: f64,
    /// This link's share of the data packets sent.
    pub data_share: f64,
    /// Data packets sent on it.
    pub data_sent: u64,
    /// Coded packets sent on it.
    pub coded_sent: u64,
    /// Datagrams received on it.
    pub datagrams_received: u64,
    /// Bytes sent on it.
    pub bytes_sent: u64,
    /// Bytes received on it.
    pub bytes_received: u64,
    /// Times it went down.
    pub downs: u64,
    /// Times the peer's echoes showed a deeper queue than braid's model, which was corrected.
    #[serde(default)]
    pub queue_corrections: u64,
    /// Scheduler weight.
    pub weight: u32,
    /// Seconds spent in each lifecycle phase (probing, active, degraded, down) so far.
    #[serde(default)]
    pub time_in_s: Vec<(String, f64)>,
    /// Bytes of data datagrams this end sent on it: what its coding budget is a fraction of.
    #[serde(default)]
    pub data_bytes: u64,
    /// Bytes of coded datagrams this end sent on it.
    #[serde(default)]
    pub coded_bytes: u64,
    /// Its coding budget (coded bytes at most this fraction of data bytes); `None`: no bound.
    #[serde(default)]
    pub coding_budget: Option<f64>,
    /// Coded packets its budget held back.
    #[serde(default)]
    pub coded_withheld: u64,
    /// A backup uplink: used only when no other is.
    #[serde(default)]
    pub backup: bool,
    /// With a `monthly_budget`: bytes used this billing period, the allowance, and what it
    /// does to the uplink now (`normal`, `no coding`, `backup`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monthly: Option<MonthlyUsage>,
}

/// An uplink's monthly allowance in `braid status` (client only).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MonthlyUsage {
    /// Bytes both ways this billing period.
    pub used_bytes: u64,
    /// The allowance, bytes.
    pub budget_bytes: u64,
    /// `normal`, `no coding` (90 % used) or `backup` (used up).
    pub stage: String,
}

impl UplinkStatus {
    /// Coded bytes over data bytes sent on it, what its budget bounds (0 before any data).
    pub fn coding_ratio(&self) -> f64 {
        if self.data_bytes == 0 { 0.0 } else { self.coded_bytes as f64 / self.data_bytes as f64 }
    }
}

/// Snapshot of a session; `name_of` names its links.
pub fn session_status(
    s: &Session,
    now: braid_proto::Instant,
    name_of: impl Fn(LinkId) -> (String, Option<String>, bool),
) -> SessionStatus {
    let st = s.stats();
    let ro = s.reorder_stats();
    let links = s.link_status(now);
    let total: u64 = links.iter().map(|l| l.counters.data_sent).sum();
    let uplinks = links
        .iter()
        .map(|l| {
            let (name, interface, present) = name_of(l.id);
            UplinkStatus {
                id: l.id.0,
                name,
                interface,
                present,
                state: l.phase.as_str().to_string(),
                rtt_ms: l.srtt.map(|d| d.as_secs_f64() * 1e3),
                owd_ms: l.relative_owd_us.map(|u| u as f64 / 1e3),
                tx_loss: l.tx_loss,
                rx_loss: l.rx_loss,
                tx_capacity_kbps: l.tx_capacity_bps / 1e3,
                rx_capacity_kbps: l.rx_capacity_bps / 1e3,
                data_share: if total == 0 { 0.0 } else { l.counters.data_sent as f64 / total as f64 },
                data_sent: l.counters.data_sent,
                coded_sent: l.counters.coded_sent,
                datagrams_received: l.counters.datagrams_received,
                bytes_sent: l.counters.bytes_sent,
                bytes_received: l.counters.bytes_received,
                downs: l.counters.downs,
                queue_corrections: l.counters.queue_corrections,
                weight: l.weight,
                time_in_s: l.time_in.iter().map(|(p, d, _)| (p.as_str().to_string(), d.as_secs_f64())).collect(),
                data_bytes: l.data_bytes,
                coded_bytes: l.coded_bytes,
                coding_budget: l.metering.coding_budget,
                coded_withheld: l.coded_withheld,
                backup: l.metering.backup,
                monthly: None,
            }
        })
        .collect();
    SessionStatus {
        id: s.config().session_id,
        peer: String::new(),
        cipher: String::new(),
        key_age_s: 0.0,
        source_not_allowed: 0,
        worker: None,
        recovery: s.config().recovery.to_string(),
        scheduler: s.config().scheduler.to_string(),
        tun_in: st.tun_in,
        delivered: st.delivered,
        aqm_dropped: st.aqm_dropped,
        data_sent: st.data_sent,
        data_resent: st.data_resent,
        coded_sent: st.coded_sent,
        recovered: st.recovered,
        malformed: st.malformed,
        unknown_link: st.unknown_link,
        bytes_sent: st.bytes_sent,
        reorder_waited: ro.waited,
        reorder_skipped: ro.skipped,
        reorder_late: ro.late,
        uplinks,
    }
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.1}"))
}

impl DaemonStatus {
    /// Human-readable rendering for `braid status`.
    pub fn render(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(
            o,
            "braid {} up {:.0} s; garbage datagrams {}, send errors {}, sessions refused {}, expired {}",
            self.role,
            self.uptime_s,
            self.garbage_datagrams,
            self.send_errors,
            self.sessions_refused,
            self.sessions_expired
        );
        let r = &self.rejected;
        let _ = writeln!(
            o,
            "handshakes {}, cookie replies {}; rejected: bad mac {}, replay {}, unknown session {}, malformed {}, rate limited {}, unknown key {}",
            self.handshakes,
            self.cookie_replies,
            r.bad_mac,
            r.replay,
            r.unknown_session,
            r.malformed,
            r.rate_limited,
            r.unknown_key
        );
        for s in &self.sessions {
            let _ = writeln!(
                o,
                "session {:04x} ({}, {}): recovery {}, scheduler {}; in {} out {} aqm-dropped {} data {} resent {} coded {} recovered {} malformed {}",
                s.id,
                s.peer,
                s.cipher,
                s.recovery,
                s.scheduler,
                s.tun_in,
                s.delivered,
                s.aqm_dropped,
                s.data_sent,
                s.data_resent,
                s.coded_sent,
                s.recovered,
                s.malformed
            );
            let _ = writeln!(
                o,
                "  {:<10} {:<8} {:>8} {:>8} {:>7} {:>7} {:>10} {:>10} {:>6} {:>8} {:>6} {:>12} {:>12} {:>6}",
                "uplink",
                "state",
                "rtt ms",
                "owd ms",
                "loss tx",
                "loss rx",
                "cap tx kb",
                "cap rx kb",
                "share",
                "coded",
                "downs",
                "coded/data",
                "budget",
                "held"
            );
            for u in &s.uplinks {
                let _ = writeln!(
                    o,
                    "  {:<10} {:<8} {:>8} {:>8} {:>7.3} {:>7.3} {:>10.0} {:>10.0} {:>6.2} {:>8} {:>6} {:>12.3} {:>12} {:>6}",
                    if u.backup { format!("{} (b)", u.name) } else { u.name.clone() },
                    if u.present { u.state.as_str() } else { "absent" },
                    opt(u.rtt_ms),
                    opt(u.owd_ms),
                    u.tx_loss,
                    u.rx_loss,
                    u.tx_capacity_kbps,
                    u.rx_capacity_kbps,
                    u.data_share,
                    u.coded_sent,
                    u.downs,
                    u.coding_ratio(),
                    u.coding_budget.map_or_else(|| "none".to_string(), |b| format!("{b}")),
                    u.coded_withheld
                );
                if let Some(m) = &u.monthly {
                    let _ = writeln!(
                        o,
                        "  {:<10} this month: {:.2} of {:.2} GB ({:.0} %), {}",
                        "",
                        m.used_bytes as f64 / 1e9,
                        m.budget_bytes as f64 / 1e9,
                        100.0 * m.used_bytes as f64 / m.budget_bytes.max(1) as f64,
                        m.stage
                    );
                }
                if !u.time_in_s.is_empty() {
                    let spells: Vec<String> = u.time_in_s.iter().map(|(p, s)| format!("{p} {s:.1} s")).collect();
                    let _ = writeln!(o, "  {:<10} time in: {}", "", spells.join(", "));
                }
            }
        }
        o
    }
}
