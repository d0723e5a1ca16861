//! A braid session: one vehicle's tunnel, at either end (docs/design.md 2).
//!
//! The session is a sans-IO state machine in the style of quinn-proto: the driver feeds it
//! passenger packets ([`Session::handle_tun_packet`]), datagrams from the uplinks
//! ([`Session::handle_datagram`]) and timeouts ([`Session::handle_timeout`]), and drains what it
//! wants sent ([`Session::poll_transmit`]), delivered ([`Session::poll_deliver`]) and reported
//! ([`Session::poll_event`]). Time always comes in as an argument.

mod config;
mod position;
mod recv;
mod sealed;
mod send;
mod stats;

pub use config::{HoldConfig, LinkConfig, Role, SessionConfig};
pub use sealed::{SealedDatagramError, SealedSession};
pub use stats::{DatagramError, LinkCounters, LinkStatus, SessionStats, TunError};

use crate::aqm::Codel;
use crate::link::{
    BACKUP_KEEPALIVE, CodingMeter, LinkId, LinkState, Metering, PROBES_BEFORE_DOWN, RxEstimator, TxLink,
};
use crate::recovery::{self, Decoder, DecoderStats, Encoder, NackTracker, RecoveryKind, RecoverySender};
use crate::reorder::ReorderBuffer;
use crate::scheduler::{self, Scheduler, SchedulerKind};
use crate::store::PacketStore;
use crate::time::Instant;
use crate::wire::CodeKind;
use bytes::Bytes;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

/// A link counts toward the receive-side delay spread while it has carried data (or repair)
/// within this long of the newest such arrival on any link, and its recent peak delay counts
/// while it has received anything within this long of the freshest link (after that its queue
/// is judged drained).
/// How many reports in a row may answer nothing but the peer's reports (a session's first
/// moments, or after its last passenger packet): at the default report interval about a second
/// of them, then an idle session's links carry only keepalive probes and their answers.
pub(crate) const IDLE_REPORTS: u32 = 10;
const DATA_RECENT: Duration = Duration::from_secs(1);
/// Reports of one link's silence ([`LinkSlot::silence_report_due`]): the last covers 105 ms,
/// after which the links' own liveness checks take over.
const SILENCE_REPORTS: u32 = 6;
/// Links are probed for capacity until this long after new data last met a queue: a probe once
/// the load has gone only delays what is left (a repair behind 200 ms of probe packets).
const PROBE_WANTED_FOR: Duration = Duration::from_millis(300);
/// Links are probed only while the passengers' data rate is at least this share of the sum of
/// the usable links' capacity estimates: below it, no estimate holds any traffic back, and a
/// probe only puts a queue in front of the passengers' packets. A TCP flow's first bursts meet a
/// queue in the model, and a growth probe at twice a right estimate then queued a whole round
/// trip on a 200 ms path (FMTCP Table II's ideal link: 198 ms), which the passenger's HyStart took
/// for a full pipe: slow start ended at a tenth of the path's BDP and CUBIC took 10 s to fill it.
const PROBE_LOAD_SHARE: f64 = 0.5;
/// The time constant of the passengers' data rate ([`Session::data_rate_bps`]): a few of the
/// uplinks' round trips, so a flow's slow-start bursts are averaged out.
pub(crate) const LOAD_RATE_WINDOW: Duration = Duration::from_millis(250);
/// Under `auto`, the load counts as bulk once new data has met queues this long without a pause.
const AUTO_AQM_BULK: Duration = Duration::from_secs(2);
/// Under `auto`, a bulk load stays bulk through pauses in its queue up to this long (and
/// [`AUTO_AQM_HOLD_RTTS`] of the uplinks' smallest round trip).
const AUTO_AQM_HOLD: Duration = Duration::from_secs(1);
/// How long the largest hold the peer reported stands in CoDel's round trip
/// ([`Session::aqm_round_trip`]): longer than a CUBIC cycle, about 9 s for the 1 MB windows of
/// FMTCP Table II's 200 ms paths (`K = cbrt(W · 0.3 / 0.4)`), so that a second without a hole
/// between two holes does not lower the target the next hole's burst meets.
const PEER_HOLD_WINDOW: Duration = Duration::from_secs(20);
/// [`AUTO_AQM_HOLD`] in round trips: a passenger's loss recovery on a long path leaves the
/// uplinks' queues empty for a round trip or two.
const AUTO_AQM_HOLD_RTTS: u32 = 4;
/// Under `auto`, CoDel runs only on uplinks whose smallest round trip is at least this.
const AUTO_AQM_MIN_RTT: Duration = Duration::from_millis(50);
/// Under `auto`, CoDel does not run while every usable uplink has shown a buffer at least this
/// many of its round trips deep ([`crate::link::TxLink::peak_queue`]).
const AUTO_AQM_DEEP_BUFFER_RTTS: u32 = 4;
/// Congestion-loss ranges kept at most ([`Session::note_congestion_loss`]).
const CONGESTION_RANGES: usize = 32;
/// At most this long for the peer to decode a reported hole before its repair goes
/// ([`Session::repair_wait`]), besides its ack delay.
const REPAIR_WAIT_DECODE_MAX: Duration = Duration::from_millis(50);
/// A range between two data packets on one link longer than this is not taken for a
/// congestion loss's (a link idle for a while, or counters restarted).
const CONGESTION_RANGE_MAX: u64 = 1024;
/// [`crate::link::CONGESTION_QUEUE_MIN`] as a duration: a packet that met this much queue met a
/// full (or filling) bottleneck buffer.
const CONGESTION_QUEUE: Duration = Duration::from_micros(crate::link::CONGESTION_QUEUE_MIN as u64);

/// The session's timers (docs/design.md 2; quinn-proto `connection/timer.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timer {
    /// Data, resends or NACKs are waiting to go out.
    Pending,
    /// A held out-of-order packet's hold time expires.
    Hold,
    /// A pending ack must go out on its own.
    Ack,
    /// Link reports are due.
    Report,
    /// A hole is due to be NACKed.
    Nack,
    /// A probe or probe reply is due on a link.
    Probe(LinkId),
    /// An active link has gone unconfirmed long enough to be declared down.
    LinkDown(LinkId),
    /// An idle active link is due a keepalive probe.
    Keepalive(LinkId),
    /// A link's estimated queue empties: room for an opportunistic coded packet.
    Opportunity(LinkId),
    /// A link's capacity probe starts, ends or settles ([`crate::link::TxLink::handle_probe_timer`]).
    CapacityProbe(LinkId),
    /// The loss-recovery scheme has something time-driven to do (a fountain block closes).
    Recovery,
}

/// A passenger packet leaving the tunnel, for the TUN device.
pub type Packet = Bytes;

/// A datagram the session wants sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// The uplink to send it on.
    pub link: LinkId,
    /// Where to send it; `None` when the server has not yet learned the link's address.
    pub destination: Option<SocketAddr>,
    /// Its length in the caller's buffer.
    pub len: usize,
    /// What it is.
    pub kind: TransmitKind,
}

/// What a transmitted datagram carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransmitKind {
    /// A passenger packet, first transmission. `predicted_owd_us` is the session's estimate of its
    /// one-way delay including the unknown clock offset, d + δ + Q + size/capacity (PluriBus 5.3),
    /// so a simulator that knows the offset can measure the estimation error.
    Data {
        /// Global sequence number.
        seq: u64,
        /// Predicted delay incl. clock offset, µs, wrapping.
        predicted_owd_us: Option<u32>,
    },
    /// A passenger packet sent again.
    Resend {
        /// Global sequence number.
        seq: u64,
    },
    /// A coded packet.
    Coded,
    /// Feedback.
    Feedback,
    /// A probe or probe reply.
    Probe,
}

/// Something the driver may want to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A link became usable.
    LinkUp(LinkId),
    /// A link stopped answering; its unacknowledged packets were re-sent on the others.
    LinkDown(LinkId),
    /// The server saw a link for the first time, or a link's address changed.
    LinkAddress(LinkId, SocketAddr),
    /// The peer closed the session.
    Closed,
}

/// What an active link with unconfirmed sends waits for next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Liveness {
    /// Send a liveness probe at this time.
    ProbeAt(Instant),
    /// Declare the link down at this time unless something is confirmed first.
    DownAt(Instant),
}

/// Liveness of an active link (docs/design.md 4, links that come and go): once its sends have gone
/// unconfirmed for a quarter of `timeout`, probes go out a quarter of `timeout` apart; the link is
/// down when its sends have been unconfirmed for `timeout`, [`PROBES_BEFORE_DOWN`] probes went
/// unanswered and the last of them had a round trip to come back. A real outage is still noticed
/// after about `timeout`; a lost last packet before an idle spell no longer takes the link down.
///
/// Nor does a link the peer's datagrams still arrive on go down: its `timeout` runs from the
/// newest arrival as well, and probes keep going meanwhile, each another chance of a
/// confirmation (QUIC restarts its idle timer on every packet received from the peer, RFC 9000
/// 10.1). On a lossy lone link, four round trips in a row lost are no rarity (PluriBus Fig. 10's
/// sweep at its 70 % point, one link losing 35 % each way: 0.58^4, 11 %), and the link
/// taken down there is readmitted only after four probe replies in a row (link/lifecycle.rs),
/// which at that loss took up to 90 s while the client held every passenger packet for
/// [`crate::link::LifecycleConfig::wait_for_link`]. A dead link is silent both ways and still
/// goes down after `timeout`.
fn liveness(s: &LinkSlot, timeout: Duration) -> Option<Liveness> {
    let u = s.tx.unconfirmed_since()?;
    let spacing = timeout / (PROBES_BEFORE_DOWN + 1);
    let last_probe = s.tx.last_probe.filter(|&p| p >= u);
    let next_probe = last_probe.map_or(u + spacing, |p| p + spacing);
    if s.tx.unanswered_probes() < PROBES_BEFORE_DOWN {
        return Some(Liveness::ProbeAt(next_probe));
    }
    let rtt = s.tx.srtt.unwrap_or(Duration::from_millis(200)).min(timeout);
    let heard = s.rx.last().map_or(u, |(_, at)| at.max(u));
    let down = (heard + timeout).max(last_probe.map_or(u, |p| p + rtt));
    Some(if next_probe < down { Liveness::ProbeAt(next_probe) } else { Liveness::DownAt(down) })
}

/// Everything the session knows about one link, both directions.
#[derive(Debug, Clone)]
pub(crate) struct LinkSlot {
    pub(crate) tx: TxLink,
    pub(crate) rx: RxEstimator,
    /// Probe replies owed on this link: (probe id, its timestamp, when it arrived).
    pub(crate) replies: VecDeque<(u32, u32, Instant)>,
    /// A probe should go out.
    pub(crate) probe_due: bool,
    pub(crate) counters: LinkCounters,
    /// When the last passenger packet arrived on this link: only links the peer sends data on
    /// can make an in-order packet trail behind a later one.
    pub(crate) last_data: Option<Instant>,
    /// When the last coded packet arrived on this link: links carrying repair decide how long a
    /// hole may wait for it.
    pub(crate) last_coded: Option<Instant>,
    /// The highest passenger sequence number that arrived on this link. A link delivers in the
    /// order it was given packets, and the peer numbers packets as it sends them, so a hole
    /// below it was not sent on this link, or was lost on it.
    pub(crate) highest_data: Option<u64>,
    /// Probing, active, degraded, down, and the time spent in each (link/lifecycle.rs).
    pub(crate) life: crate::link::Lifecycle,
    /// What coding has spent on this link against its budget.
    pub(crate) meter: CodingMeter,
    /// A backup link: used only when no non-backup link is ([`Session::usable_slots`]).
    pub(crate) backup: bool,
    /// This end's own metering of the link ([`Session::set_link_metering`]); `meter` and
    /// `backup` are it tightened by `peer_request`.
    pub(crate) own_metering: Metering,
    /// What the peer asked of this end's sends on the link, from its named probe requests.
    pub(crate) peer_request: crate::wire::LinkRequest,
    /// What this end asks of the peer's sends on the link ([`Session::set_link_request`]).
    pub(crate) request: crate::wire::LinkRequest,
    /// Probe requests still to carry the name and `request` after `request` changed.
    pub(crate) announce: u8,
    /// This end's name for the link, sent in probe requests.
    pub(crate) name: Option<crate::wire::LinkName>,
    /// The peer's name for the link, from its probe requests.
    pub(crate) peer_name: Option<crate::wire::LinkName>,
    /// How many times the peer has been told (in a feedback over another link) that this link
    /// went silent while it carried data; cleared by the next arrival on it
    /// ([`LinkSlot::silence_report_due`]).
    pub(crate) silence_reports: u32,
    /// What the location map expects of this link where the vehicle is (position.rs); all false
    /// unless location awareness is on.
    pub(crate) expect: crate::location::Expectation,
}

impl LinkSlot {
    /// A link new to the session, in `tx`'s state (probing: a probe is due at once).
    pub(crate) fn new(
        tx: TxLink,
        rx: RxEstimator,
        metering: Metering,
        name: Option<crate::wire::LinkName>,
        now: Instant,
    ) -> LinkSlot {
        let active = tx.state == LinkState::Active;
        LinkSlot {
            tx,
            rx,
            replies: VecDeque::new(),
            probe_due: !active,
            counters: LinkCounters::default(),
            last_data: None,
            last_coded: None,
            highest_data: None,
            life: crate::link::Lifecycle::new(
                if active { crate::link::Phase::Active } else { crate::link::Phase::Probing },
                now,
            ),
            meter: CodingMeter::new(metering.coding_budget),
            backup: metering.backup,
            own_metering: metering,
            peer_request: crate::wire::LinkRequest::default(),
            request: crate::wire::LinkRequest::default(),
            announce: 0,
            name,
            peer_name: None,
            silence_reports: 0,
            expect: crate::location::Expectation::default(),
        }
    }

    /// Sets `meter` and `backup` from this end's metering tightened by the peer's request: no
    /// coding, or backup, if either says so.
    pub(crate) fn apply_metering(&mut self) {
        let m = self.own_metering.tightened_by(self.peer_request);
        self.meter.set_budget(m.coding_budget);
        self.backup = m.backup;
    }

    /// When the next report of this link's silence is due, if one is: [`send::RX_SILENCE`] after
    /// its last arrival, then every half of that, [`SILENCE_REPORTS`] in all. The first report
    /// shows the peer only the sends of its first few milliseconds of silence, too few to take the
    /// link down when it carried a burst and then nothing ([`crate::link::TxLink::overdue_sends`]
    /// counts the sends the report's silence covers); each later one covers more, so the
    /// passengers' packets lost in it move to another link within a few round trips even when
    /// nothing else makes this end report.
    pub(crate) fn silence_report_due(&self) -> Option<Instant> {
        (self.silence_reports < SILENCE_REPORTS)
            .then(|| self.silent_since())
            .flatten()
            .map(|at| at + send::RX_SILENCE * (2 + self.silence_reports) / 2)
    }

    /// When the last datagram arrived on this link, if it was carrying data or coded packets then
    /// (one came within [`send::RX_SILENCE`] of it): a link that goes quiet from there went silent
    /// mid-stream, where one that only carries probes and feedback is quiet by nature.
    ///
    /// Coded packets count: a link the peer fills with them (spare capacity in the direction of
    /// a download's acks) is as busy as one carrying data. Counting data alone, a blackout that
    /// began while the passengers' acks had paused (their download stalled on a hole) left the
    /// link full of coded packets looking quiet by nature: the end receiving the acks never
    /// reported it, and the other end sent its acks into it until its liveness timeout (seed 1 of
    /// scenarios/blackout.toml: 448 ms without data, two passenger TCP timeouts).
    pub(crate) fn silent_since(&self) -> Option<Instant> {
        let (_, at) = self.rx.last()?;
        let carried = self.last_data.max(self.last_coded)?;
        (at.saturating_duration_since(carried) <= send::RX_SILENCE).then_some(at)
    }
}

/// How long a probe may take before it counts as unanswered: three smoothed round trips, at least
/// 300 ms (the first probes have no RTT yet).
/// Whether data arrived on the link within the last [`DATA_RECENT`]: it carries the passengers'
/// load now, by the peer's split.
fn carries_data(s: &LinkSlot, now: Instant) -> bool {
    s.last_data.is_some_and(|at| now < at + DATA_RECENT)
}

pub(crate) fn probe_timeout(s: &LinkSlot) -> Duration {
    (s.tx.srtt.unwrap_or(Duration::from_millis(100)) * 3).max(Duration::from_millis(300))
}

/// Metadata of a sent data packet.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SentMeta {
    pub(crate) link: LinkId,
    /// When it should leave the link's queue, by the queue model at the time it was sent.
    pub(crate) dequeued_at: Instant,
    /// When it was last re-sent: a hole report sent before the resend could have arrived says
    /// nothing new about it.
    pub(crate) resent_at: Option<Instant>,
}

/// One end of a braid tunnel.
#[derive(Debug)]
pub struct Session {
    cfg: SessionConfig,
    links: Vec<LinkSlot>,
    // Sender side.
    next_seq: u64,
    sent: PacketStore<SentMeta>,
    /// Passenger packets waiting for a link, with when they came in; numbered when they leave,
    /// so a packet the AQM drops leaves no hole.
    pending_data: PendingData,
    /// With the AQM on, new data waits in `pending_data` until then: the link that delivers it
    /// first has a full queue ([`crate::aqm::AqmConfig::link_queue_limit`]).
    data_wait_until: Option<Instant>,
    codel: Codel,
    /// When new data last met a queue on its link: links are probed for capacity while the load
    /// may need more than their estimates.
    last_loaded: Option<Instant>,
    /// The passengers' new data sent, bit/s, averaged over about [`LOAD_RATE_WINDOW`], and when
    /// it was last updated: a link is probed only while this is a good share of what the links
    /// are estimated to carry ([`PROBE_LOAD_SHARE`]).
    data_rate: (f64, Option<Instant>),
    /// When new data last met a queue on its link, kept through pauses (unlike `last_loaded`):
    /// the end of a bulk spell ([`Session::bulk_hold`]).
    last_queue_met: Option<Instant>,
    /// When new data last went while the load was near the estimates
    /// ([`Session::load_near_estimates`]), queue or no queue: a link whose estimate fell is
    /// probed for a moment after ([`crate::link::TxLink::restoring`]).
    last_near: Option<Instant>,
    /// Since when new data has met queues with no pause longer than [`Session::bulk_hold`]: the
    /// load is bulk once this is [`AUTO_AQM_BULK`] old.
    loaded_since: Option<Instant>,
    /// The sequence number the next capacity-probe copy repeats (see `send.rs`).
    probe_cursor: u64,
    resends: VecDeque<(u64, Option<LinkId>)>,
    /// Reported holes whose repair waits for the peer's decoder ([`Session::repair_wait`]): when
    /// each goes to the recovery scheme, oldest first.
    waiting_repairs: VecDeque<(Instant, u64)>,
    /// Until when the first of `resends` waits for room in its link's buffer
    /// ([`Session::resend_brim_wait`]); `None` while nothing waits for that.
    resend_wait_until: Option<Instant>,
    recovery: Box<dyn RecoverySender>,
    encoders: Vec<(CodeKind, Box<dyn Encoder>)>,
    scheduler: Box<dyn Scheduler>,
    peer_cum_ack: u64,
    // Receiver side.
    reorder: ReorderBuffer,
    received: PacketStore<()>,
    decoders: Vec<(CodeKind, Box<dyn Decoder>)>,
    nack: NackTracker,
    pending_nacks: Vec<u64>,
    /// [`Session::known_lost_below`] when holes were last offered to `nack`: a data packet that
    /// raises it has revealed a loss to report now.
    nack_checked_below: u64,
    /// Ranges of sequence numbers in which a link revealed a congestion loss
    /// ([`Session::release_congestion_holes`]).
    congestion_holes: VecDeque<(u64, u64)>,
    peer_wants_nacks: bool,
    highest_rx: Option<u64>,
    ack_pending_since: Option<Instant>,
    /// A link revealed new losses: its loss estimate changed and the sender should hear soon.
    loss_news_since: Option<Instant>,
    rx_since_report: bool,
    last_report: Instant,
    /// The sequencing buffer's recent mean hold, reported to the peer.
    recent_hold: crate::reorder::RecentHold,
    /// The largest recent mean hold of our packets in the peer's sequencing buffer that its
    /// reports gave over the last [`PEER_HOLD_WINDOW`] (and when): part of the passengers' round
    /// trip that CoDel's target follows ([`Session::aqm_round_trip`]).
    peer_hold: Option<(Duration, Instant)>,
    /// Reports sent since the last data or coded packet arrived: a report that only answers the
    /// peer's report is sent at most [`IDLE_REPORTS`] times in a row ([`Session::handle_datagram`]).
    idle_reports: u32,
    /// Metering set for links by id, kept for links not yet known ([`Session::set_link_metering`]).
    metering: Vec<(LinkId, Metering)>,
    // Driver-facing.
    events: VecDeque<Event>,
    stats: SessionStats,
    closed: bool,
    /// No link is admitted yet and passengers' packets wait for one ([`Session::usable_slots`]).
    waiting_for_link: bool,
    /// Where each link has been good (location.rs); learned only with location awareness on.
    map: crate::location::QualityMap,
}

impl Session {
    /// A session with the given links (the client's uplinks; the server usually starts with none
    /// and learns them). Client links start probing; server links start active because they are
    /// created by traffic that just arrived on them.
    pub fn new(mut cfg: SessionConfig, links: &[LinkConfig], now: Instant) -> Self {
        if cfg.session_id > crate::wire::Header::MAX_SESSION {
            tracing::warn!(
                id = cfg.session_id,
                "session id wider than the header's 16 bits; its high bits are dropped"
            );
            cfg.session_id &= crate::wire::Header::MAX_SESSION;
        }
        let mut s = Session {
            recovery: recovery::build(cfg.recovery, cfg.seed ^ 0x6f65_6300),
            scheduler: scheduler::build(cfg.scheduler),
            sent: PacketStore::new(cfg.store_packets, cfg.store_age),
            received: PacketStore::new(cfg.store_packets, cfg.store_age),
            reorder: ReorderBuffer::new(cfg.store_packets),
            decoders: CodeKind::ALL
                .iter()
                .map(|&k| (k, recovery::codec::decoder(k, 512, Duration::from_secs(1))))
                .collect(),
            encoders: CodeKind::ALL.iter().map(|&k| (k, recovery::codec::encoder(k))).collect(),
            cfg,
            links: Vec::new(),
            next_seq: 0,
            pending_data: PendingData::default(),
            data_wait_until: None,
            codel: Codel::default(),
            last_loaded: None,
            data_rate: (0.0, None),
            last_queue_met: None,
            last_near: None,
            loaded_since: None,
            probe_cursor: 0,
            resends: VecDeque::new(),
            waiting_repairs: VecDeque::new(),
            resend_wait_until: None,
            peer_cum_ack: 0,
            nack: NackTracker::default(),
            pending_nacks: Vec::new(),
            nack_checked_below: 0,
            congestion_holes: VecDeque::new(),
            peer_wants_nacks: false,
            highest_rx: None,
            ack_pending_since: None,
            loss_news_since: None,
            rx_since_report: false,
            last_report: now,
            recent_hold: crate::reorder::RecentHold::default(),
            peer_hold: None,
            idle_reports: 0,
            metering: Vec::new(),
            events: VecDeque::new(),
            stats: SessionStats::default(),
            closed: false,
            waiting_for_link: false,
            map: crate::location::QualityMap::new(),
        };
        for l in links {
            s.add_link(now, l);
        }
        s
    }

    /// The configuration in force.
    pub fn config(&self) -> &SessionConfig {
        &self.cfg
    }

    /// Adds an uplink at run time. Replaces the link's address and bootstraps if it exists.
    pub fn add_link(&mut self, now: Instant, l: &LinkConfig) {
        if let Some(slot) = self.slot_mut(l.id) {
            slot.tx.remote = l.remote;
            slot.tx.weight = l.weight;
            slot.own_metering = l.metering;
            slot.apply_metering();
            slot.name = l.name;
            return;
        }
        let state = match self.cfg.role {
            Role::Client => LinkState::Probing,
            Role::Server => LinkState::Active,
        };
        let mut tx = TxLink::new(l.id, l.remote, l.tx_bps, state, now);
        tx.weight = l.weight;
        self.links.push(LinkSlot::new(tx, RxEstimator::new(l.rx_bps), l.metering, l.name, now));
        self.links.sort_by_key(|s| s.tx.id);
    }

    /// Removes an uplink at run time; its unacknowledged packets are re-sent on the others.
    pub fn remove_link(&mut self, now: Instant, id: LinkId) {
        self.resend_unacked_from(now, id);
        self.links.retain(|s| s.tx.id != id);
    }

    /// The driver saw the uplink's interface appear or get an address: probe it now rather than at
    /// the down-probe period, so it is admitted within a few round trips (link/lifecycle.rs).
    pub fn handle_link_present(&mut self, now: Instant, id: LinkId) {
        if let Some(s) = self.slot_mut(id)
            && s.tx.state != LinkState::Active
        {
            s.tx.set_state(LinkState::Probing, now);
            s.life.enter(crate::link::Phase::Probing, now);
            s.probe_due = true;
        }
    }

    /// The driver saw the uplink's interface vanish or lose its address: it is down now, without
    /// waiting out its silence, and what it had in flight goes out on the others at once.
    pub fn handle_link_gone(&mut self, now: Instant, id: LinkId) {
        self.declare_down(now, id);
    }

    /// Takes link `id` down at `now` (nothing if it is down already or unknown): it is probed
    /// until it answers again, and what it had in flight goes out on the others at once.
    pub(crate) fn declare_down(&mut self, now: Instant, id: LinkId) {
        let Some(s) = self.slot_mut(id) else { return };
        if s.tx.state == LinkState::Down {
            return;
        }
        s.tx.set_state(LinkState::Down, now);
        s.life.enter(crate::link::Phase::Down, now);
        s.counters.downs += 1;
        s.probe_due = true;
        tracing::debug!(link = %id, "link down");
        self.events.push_back(Event::LinkDown(id));
        self.resend_unacked_from(now, id);
    }

    /// Sets an uplink's address (the vehicle's modem reconnected with a new one, on the client:
    /// the server's address for that uplink).
    pub fn set_link_remote(&mut self, id: LinkId, remote: SocketAddr) {
        if let Some(s) = self.slot_mut(id) {
            s.tx.remote = Some(remote);
        }
    }

    /// Sets an uplink's weight for weighted schedulers, without disturbing traffic.
    pub fn set_link_weight(&mut self, id: LinkId, weight: u32) -> bool {
        match self.slot_mut(id) {
            Some(s) => {
                s.tx.weight = weight;
                true
            }
            None => false,
        }
    }

    /// Sets how an uplink is metered (coding budget, backup) for what this end sends, without
    /// disturbing traffic: the bytes counted so far stay. A link this end does not know yet (the
    /// server learns links from traffic) gets it when it appears; the return says whether it was
    /// known.
    pub fn set_link_metering(&mut self, id: LinkId, metering: Metering) -> bool {
        self.metering.retain(|(l, _)| *l != id);
        self.metering.push((id, metering));
        match self.slot_mut(id) {
            Some(s) => {
                s.own_metering = metering;
                s.apply_metering();
                true
            }
            None => false,
        }
    }

    /// Asks the peer to meter its sends on link `id` (no coding, or backup only), on top of its
    /// own metering: a vehicle's monthly allowance bounds what the server sends on the uplink
    /// too. Carried in the link's named probe requests (a link without a name cannot carry it):
    /// at once and on the next two probes after a change, and on every probe that carries the
    /// name after that. False if the link is unknown.
    pub fn set_link_request(&mut self, id: LinkId, request: crate::wire::LinkRequest) -> bool {
        match self.slot_mut(id) {
            Some(s) => {
                if s.request != request {
                    s.request = request;
                    s.announce = 3;
                    s.probe_due = true;
                }
                true
            }
            None => false,
        }
    }

    /// Switches the loss-recovery scheme for what this end sends. The receiver side decodes every
    /// scheme at all times, so nothing in flight is lost by switching.
    pub fn set_recovery(&mut self, kind: RecoveryKind) {
        self.recovery = recovery::build(kind, self.cfg.seed ^ 0x6f65_6301 ^ self.next_seq);
        self.recovery.on_ack(Instant::ZERO, self.peer_cum_ack);
        self.cfg.recovery = kind;
    }

    /// Turns braid's ingress AQM on or off ([`crate::aqm`]); CoDel starts afresh either way.
    pub fn set_aqm(&mut self, enabled: bool) {
        if self.cfg.aqm.enabled != enabled {
            self.cfg.aqm.enabled = enabled;
            self.codel = Codel::default();
        }
    }

    /// Switches the scheduler.
    pub fn set_scheduler(&mut self, kind: SchedulerKind) {
        self.scheduler = scheduler::build(kind);
        self.cfg.scheduler = kind;
    }

    /// Takes a passenger packet from the TUN side to carry to the other end.
    pub fn handle_tun_packet(&mut self, now: Instant, packet: &[u8]) -> Result<(), TunError> {
        if packet.is_empty() {
            self.stats.tun_refused += 1;
            return Err(TunError::Empty);
        }
        if packet.len() > self.cfg.max_packet {
            self.stats.tun_refused += 1;
            return Err(TunError::TooLarge { len: packet.len(), max: self.cfg.max_packet });
        }
        self.stats.tun_in += 1;
        self.pending_data.push_back(now, Bytes::copy_from_slice(packet));
        self.update_waiting_for_link(now);
        Ok(())
    }

    /// The next passenger packet for the TUN side, in order except where the hold expired.
    pub fn poll_deliver(&mut self) -> Option<Packet> {
        let d = self.reorder.poll()?;
        self.stats.delivered += 1;
        Some(d.packet)
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Counters.
    pub fn stats(&self) -> SessionStats {
        self.stats
    }

    /// The peer's cumulative ack as last heard, and how many packets this end has sent.
    #[cfg(test)]
    pub(crate) fn acked_and_sent(&self) -> (u64, u64) {
        (self.peer_cum_ack, self.next_seq)
    }

    /// Sequencing-buffer counters.
    pub fn reorder_stats(&self) -> crate::reorder::ReorderStats {
        self.reorder.stats()
    }

    /// Decoder counters, summed over every code.
    pub fn decoder_stats(&self) -> DecoderStats {
        let mut total = DecoderStats::default();
        for (_, d) in &self.decoders {
            total += d.stats();
        }
        total
    }

    /// Whether the peer closed the session.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// The peer's name for link `id`, once a probe carried it (a client's `[[uplink]]` name, on
    /// the server).
    pub fn peer_link_name(&self, id: LinkId) -> Option<&str> {
        self.slot(id).and_then(|s| s.peer_name.as_ref()).map(|n| n.as_str())
    }

    /// Ids of the links the session knows.
    pub fn link_ids(&self) -> Vec<LinkId> {
        self.links.iter().map(|s| s.tx.id).collect()
    }

    /// Status of every link.
    pub fn link_status(&self, now: Instant) -> Vec<LinkStatus> {
        let reference = self.reference_owd();
        self.links
            .iter()
            .map(|s| LinkStatus {
                id: s.tx.id,
                state: s.tx.state,
                srtt: s.tx.srtt,
                relative_owd_us: s.tx.owd_us().map(|o| i64::from(o.wrapping_sub(reference) as i32)),
                tx_loss: s.tx.loss(),
                rx_loss: s.rx.loss(),
                tx_capacity_bps: s.tx.capacity_bps(),
                rx_capacity_bps: s.rx.capacity_bps(),
                queue: s.tx.queue_delay(now),
                weight: s.tx.weight,
                counters: s.counters,
                phase: s.life.phase(),
                time_in: s.life.time_in(now),
                metering: Metering { coding_budget: s.meter.budget(), backup: s.backup },
                data_bytes: s.meter.data_bytes(),
                coded_bytes: s.meter.coded_bytes(),
                coded_withheld: s.meter.withheld(),
                peak_queue: s.tx.peak_queue(),
            })
            .collect()
    }

    /// When the driver must next call [`Session::handle_timeout`] (and then drain
    /// [`Session::poll_transmit`]): the earliest of [`Session::timers`].
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers().into_iter().map(|(_, t)| t).min()
    }

    /// Every armed timer and when it fires (quinn-proto's timer table). `Instant::ZERO` means
    /// "now": there is something to send.
    pub fn timers(&self) -> Vec<(Timer, Instant)> {
        let mut out = Vec::new();
        let can_send = self.usable_slots().next().is_some();
        if can_send && !self.pending_nacks.is_empty() {
            out.push((Timer::Pending, Instant::ZERO));
        } else if can_send && !self.resends.is_empty() {
            // Resends (and the new data behind them) wait for room in a link's queue.
            let room = self.usable_slots().any(|s| s.tx.echoed_queue() <= send::RESEND_QUEUE_CAP / 2);
            let at = if room { Instant::ZERO } else { self.resend_room_at().unwrap_or(Instant::ZERO) };
            let at = at.max(self.resend_wait_until.unwrap_or(Instant::ZERO));
            out.push((Timer::Pending, at));
        } else if can_send && !self.pending_data.is_empty() {
            out.push((Timer::Pending, self.data_wait_until.unwrap_or(Instant::ZERO)));
        } else if self.waiting_for_link
            && let Some(t) = self.pending_data.oldest()
        {
            // The wait for an admitted link ends: send on whatever link there is.
            out.push((Timer::Pending, t + self.cfg.lifecycle.wait_for_link));
        }
        if let Some(d) = self.reorder.poll_timeout() {
            out.push((Timer::Hold, d));
        }
        if let Some(s) = self.ack_pending_since.filter(|_| can_send) {
            out.push((Timer::Ack, s + self.cfg.ack_delay));
        }
        if let Some(s) = self.loss_news_since.filter(|_| can_send) {
            out.push((Timer::Report, s + self.cfg.ack_delay));
        }
        if self.rx_since_report && can_send {
            out.push((Timer::Report, self.next_report_at()));
        }
        if can_send {
            for s in &self.links {
                if let Some(at) = s.silence_report_due() {
                    out.push((Timer::Report, at));
                }
            }
        }
        if self.peer_wants_nacks {
            if self.reorder.has_hole_in(self.nack_checked_below, self.known_lost_below()) {
                // A packet on every data-carrying link has passed a hole: report it now.
                out.push((Timer::Nack, Instant::ZERO));
            } else if let Some(n) = self.nack.poll_timeout(self.nack_timing()) {
                out.push((Timer::Nack, n));
            }
        }
        let down_timeout = self.down_timeout();
        for s in &self.links {
            let id = s.tx.id;
            if s.tx.remote.is_some() && (!s.replies.is_empty() || s.probe_due) {
                out.push((Timer::Probe(id), Instant::ZERO));
            }
            match s.tx.state {
                LinkState::Active => {
                    match liveness(s, down_timeout(s)) {
                        Some(Liveness::ProbeAt(t)) => out.push((Timer::Probe(id), t)),
                        Some(Liveness::DownAt(t)) => out.push((Timer::LinkDown(id), t)),
                        None => {}
                    }
                    let idle_since =
                        s.tx.last_send().unwrap_or(s.tx.since).max(s.tx.last_probe.unwrap_or(Instant::ZERO));
                    out.push((Timer::Keepalive(id), idle_since + self.keepalive(s)));
                }
                LinkState::Probing => {
                    out.push((Timer::Probe(id), s.tx.last_probe.map_or(Instant::ZERO, |p| p + self.cfg.probe_interval)))
                }
                LinkState::Down => out.push((
                    Timer::Probe(id),
                    s.tx.last_probe.map_or(Instant::ZERO, |p| p + self.cfg.down_probe_interval),
                )),
            }
        }
        if let Some(t) = self.recovery.poll_timeout().filter(|_| can_send) {
            out.push((Timer::Recovery, t));
        }
        if let Some(&(t, _)) = self.waiting_repairs.front() {
            out.push((Timer::Recovery, t));
        }
        let (wanted, near) = (self.probing_wanted(), self.last_near.is_some());
        let opportunistic = self.recovery.wants_opportunity();
        let material = self.probe_material();
        // A link whose coding budget is spent gets no opportunity until data refills it; with
        // one, the drained queue would call for a coded packet that never goes.
        let max = self.min_transmit_buffer();
        let quiet = self.quiet_lone_link();
        for s in self.usable_slots() {
            let codes = quiet != Some(s.tx.id);
            if let Some(t) = s.tx.probe_timeout((wanted || (near && s.tx.restoring())) && codes) {
                out.push((Timer::CapacityProbe(s.tx.id), t));
            }
            // A probing link is filled with coded packets whatever the scheme.
            if codes && (opportunistic || (material && s.tx.is_probing())) && s.meter.allows(max) {
                // A link the peer measured a queue on opens to coding again when that
                // measurement goes stale (or a fresh one arrives with a datagram).
                let closed = s.tx.coding_closed_until().filter(|_| !s.tx.is_probing());
                // One whose sends have gone unconfirmed too long waits for a report, an input.
                if !s.tx.coding_stall_noted() {
                    let paced = Some(s.tx.coding_paced_until()).filter(|_| !s.tx.is_probing());
                    let at =
                        s.tx.queue_drained_at()
                            .max(closed.unwrap_or(Instant::ZERO))
                            .max(paced.unwrap_or(Instant::ZERO));
                    // A restore probe's packets also go beside a busy modelled queue.
                    let at = s.tx.beside_probe_at().map_or(at, |b| at.min(b));
                    out.push((Timer::Opportunity(s.tx.id), at));
                }
            }
        }
        out
    }

    /// Handles whatever timers have expired by `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.reorder.handle_timeout(now);
        while let Some(&(at, seq)) = self.waiting_repairs.front() {
            if now < at {
                break;
            }
            self.waiting_repairs.pop_front();
            // Not decoded: resent on the link that loses least among the others. On the lossy
            // link itself a lost resend is reported again only after the peer's retry interval
            // (a resend that left later than the report's round trip crosses the first retry),
            // which with the wait outlasted the peer's hold: FMTCP Table II case 3 seed 1 gave
            // four holes up and stalled a second (13.3 Mbit/s; 14.6 resent elsewhere).
            let lost_on = self.sent.get(seq).map(|st| st.meta.link);
            let other = self
                .usable_slots()
                .filter(|s| Some(s.tx.id) != lost_on)
                .min_by(|a, b| a.tx.loss().total_cmp(&b.tx.loss()))
                .map(|s| s.tx.id);
            match other {
                Some(link) => self.resends.push_back((seq, Some(link))),
                None => self.recovery.on_nack(now, seq),
            }
        }
        // A link that carried data has gone silent: tell the peer now, over another link, so
        // that it stops sending into it ([`crate::link::TxLink::overdue_sends`]) even when nothing
        // else arrives here to acknowledge.
        let mut silent = false;
        for s in &mut self.links {
            if s.silence_report_due().is_some_and(|at| now >= at) {
                s.silence_reports += 1;
                silent = true;
            }
        }
        // Only when another link can carry the news: over the silent link itself it says nothing
        // new, and on a lone drive-by link in its fringe the extra reports cost passengers'
        // throughput (pass share 0.64 against 0.70 under auto, 10 runs).
        let heard = |s: &LinkSlot| s.silent_since().is_none_or(|at| now < at + send::RX_SILENCE);
        if silent && self.usable_slots().any(heard) {
            self.loss_news_since = Some(now.saturating_sub(self.cfg.ack_delay));
        }
        self.check_links(now);
        let report_interval = self.cfg.report_interval;
        for s in &mut self.links {
            s.tx.note_coding_stall(now, report_interval);
        }
        self.advance_probes(now);
        self.update_waiting_for_link(now);
        self.release_congestion_holes(now);
        if self.peer_wants_nacks {
            let holes: Vec<u64> = self.reorder.holes().take(4096).collect();
            let lost_below = self.known_lost_below();
            self.nack_checked_below = lost_below;
            let due =
                self.nack.poll(now, holes.into_iter(), self.reorder.next_expected(), lost_below, self.nack_timing());
            for s in due {
                if !self.pending_nacks.contains(&s) {
                    self.pending_nacks.push(s);
                }
            }
        }
    }

    /// Whether CoDel judges new data now: always with `aqm` on; under [`RecoveryKind::Auto`] while
    /// the load is bulk (new data has met queues for [`AUTO_AQM_BULK`], with no pause longer than
    /// [`Session::bulk_hold`]) on uplinks whose smallest
    /// round trip is at least [`AUTO_AQM_MIN_RTT`]. Long paths are where a bulk flow's window
    /// outgrows a modem's buffer and loses a burst at once (FMTCP Table II's 200 ms paths: 12.0
    /// Mbit/s without CoDel, 14.6 with); on short ones the buffers hold the window, and CoDel's
    /// drops only cost (bench-bond, 20 + 5 Mbit/s at a round trip under a millisecond: 22.0
    /// Mbit/s without, 11.4-14.8 with); short flows (PluriBus' bus) never make the load bulk.
    pub(crate) fn aqm_active(&self, now: Instant) -> bool {
        if self.cfg.aqm.enabled {
            return true;
        }
        if self.cfg.recovery != RecoveryKind::Auto {
            return false;
        }
        self.load_is_bulk(now)
            && self.usable_slots().filter_map(|s| s.tx.path_rtt()).min().is_some_and(|r| r >= AUTO_AQM_MIN_RTT)
            && !self.buffers_deep()
    }

    /// Whether the load is bulk: new data has met queues for [`AUTO_AQM_BULK`], with no pause
    /// longer than [`Session::bulk_hold`].
    pub(crate) fn load_is_bulk(&self, now: Instant) -> bool {
        self.loaded_since.is_some_and(|t| now.saturating_duration_since(t) >= AUTO_AQM_BULK)
    }

    /// Whether every usable uplink's buffer has been seen to hold [`AUTO_AQM_DEEP_BUFFER_RTTS`]
    /// of its round trips. There a bulk flow's window fits in the buffer with room to spare: a
    /// CUBIC back-off leaves the uplink busy, and an overflow costs a few packets, not a burst.
    /// CoDel's drops, judged against a round trip a fraction of that queue, then only cost: on a
    /// cellular modem whose rate follows a drive (an LTE trace with a 400 kB buffer, 80 ms round
    /// trip) every dip in the rate was a standing queue to CoDel, and the default carried 3.18
    /// Mbit/s against 3.55 without it. Modem buffers of about one round trip (FMTCP Table II's
    /// 200 ms paths, the two modems) and the far ideal link's 2.5 keep CoDel.
    fn buffers_deep(&self) -> bool {
        let mut usable = self.usable_slots().peekable();
        usable.peek().is_some()
            && usable.all(|s| s.tx.path_rtt().is_some_and(|rtt| s.tx.peak_queue() >= rtt * AUTO_AQM_DEEP_BUFFER_RTTS))
    }

    /// How long new data may meet no queue before a bulk load counts as gone: [`AUTO_AQM_HOLD`],
    /// or [`AUTO_AQM_HOLD_RTTS`] of the uplinks' smallest round trip if longer. A bulk flow's
    /// queue empties for a while after each of its losses (CUBIC's back-off, a round trip of fast
    /// recovery); ended after [`PROBE_WANTED_FOR`] as probing's spell is, CoDel went off in those
    /// pauses, came back only 2 s later, and meanwhile the window overflowed the modems' buffers
    /// in bursts (FMTCP Table II case 1, seed 2: 11.6 Mbit/s against 15.0-15.1 for seeds 1 and
    /// 3, whose spell never broke after the start).
    fn bulk_hold(&self) -> Duration {
        let rtt = self.usable_slots().filter_map(|s| s.tx.path_rtt()).min().unwrap_or(Duration::ZERO);
        AUTO_AQM_HOLD.max(rtt * AUTO_AQM_HOLD_RTTS)
    }

    /// Whether a congestion loss on an uplink goes to the passengers' transport at once
    /// ([`Session::release_congestion_holes`]), under `auto` without `aqm = true`:
    ///
    /// - On round trips shorter than [`AUTO_AQM_MIN_RTT`], where braid's AQM does not run, so
    ///   that the only congestion signal a passenger gets is the modem buffer's overflow. A lone
    ///   uplink there too: a passenger whose window is larger than the uplink's buffer (Linux
    ///   autotunes its buffers to 4-6 MB) overflows it whatever its rate does, and repaired, the
    ///   overflows never told its TCP to back off: the buffer stayed full, every further overflow
    ///   was re-sent into it, and a WiFi pass's falling rate was spent on resends (paper 002's
    ///   pass, `drive-by-pass.toml` with its 4 MiB buffers, 10 runs: 70.8 % of the pass
    ///   repaired, 78.2 % released with a full buffer judged by delay alone, 85.3 % with bytes
    ///   too (`CONGESTION_QUEUE_SHARE` in `link/rx.rs`); on the testbed 54-75 % repaired, 76-80 %
    ///   released by delay, 86.3 % with bytes). With windows smaller than the buffer (256 kB,
    ///   the simulator's default hosts) nothing overflows from the load, and releasing costs 1 %
    ///   of the pass (87.9 % against 89.0 %, 4 runs, by delay; with bytes too 85.9 %, 20 runs,
    ///   against 87.3 % by delay).
    /// - On longer paths while data arrives on one uplink only (counted here, at the receiving
    ///   end, from the data that came in the last [`DATA_RECENT`]: the peer's split decides
    ///   which links carry it): there is no split for an overflow to correct, so it is the
    ///   passengers' own congestion, and braid's CoDel, which judges the queue its model
    ///   predicts, does not see a modem whose rate falls under the estimate. A lone cellular
    ///   modem with a 100 kB buffer (Mahimahi's drives, 80 ms round trip) carried 0.80-0.90 of
    ///   plain TCP's goodput over it with its overflows repaired (Verizon LTE, AT&T LTE, T-Mobile
    ///   UMTS), 0.96-1.02 released. With two uplinks carrying data and CoDel running, releasing
    ///   as well halved the passengers' windows twice for one queue (FMTCP Fig. 11's paths, 200
    ///   ms: 8.8 Mbit/s against 14.2).
    pub(crate) fn releases_congestion_losses(&self, now: Instant) -> bool {
        if self.cfg.recovery != RecoveryKind::Auto || self.cfg.aqm.enabled {
            return false;
        }
        let carrying = self.links.iter().filter(|s| carries_data(s, now)).count();
        carrying <= 1 || self.usable_slots().filter_map(|s| s.tx.path_rtt()).min().is_none_or(|r| r < AUTO_AQM_MIN_RTT)
    }

    /// Whether every other link that carries data has a queue too (the newest packet on it met
    /// at least [`crate::link::CONGESTION_QUEUE_MIN`]), so that a loss at `link`'s full buffer is
    /// the passengers' load exceeding the uplinks together. While another uplink still has room,
    /// the overflow is braid's split (an estimate still too low, early in a transfer): repaired,
    /// and the split moves; given up, TCP cut its window while capacity stood idle (20 + 20
    /// Mbit/s: 28 Mbit/s for the first 5 s of a run).
    pub(crate) fn all_links_queued(&self, now: Instant, link: LinkId) -> bool {
        self.links
            .iter()
            .filter(|s| s.tx.id != link && s.tx.state != LinkState::Down && carries_data(s, now))
            .all(|s| s.rx.last_queue() >= CONGESTION_QUEUE)
    }

    /// Notes that the data packets after `from` and before `to` include one that link
    /// congestion dropped (an uplink's buffer overflowed: [`crate::link::RxSample::congested`]).
    pub(crate) fn note_congestion_loss(&mut self, now: Instant, from: u64, to: u64) {
        if to <= from || to - from > CONGESTION_RANGE_MAX || !self.releases_congestion_losses(now) {
            return;
        }
        if self.congestion_holes.len() >= CONGESTION_RANGES {
            self.congestion_holes.pop_front();
        }
        self.congestion_holes.push_back((from, to));
    }

    /// Gives up at once, rather than repair, the holes known lost (every data-carrying link has
    /// delivered a later packet) in a range where a link's buffer overflowed.
    ///
    /// Repairing congestion losses hides congestion from the passengers' TCP: with a resend or
    /// coded packet for every drop it never backs off, the buffers stay full and keep dropping,
    /// and sooner or later more holes than repairs can fill wait out their hold at once, and
    /// TCP meets a burst of losses after a stall instead of one loss early (bench-bond, 20 + 5
    /// Mbit/s, 50 ms tbf queues: a worst run of 8.5 Mbit/s against a median of 21.5). Given up
    /// here, the packets behind a dropped one reach the passenger at once, its duplicate
    /// acknowledgements come within a round trip, and it halves its window as on a single path.
    /// A wireless loss on a link without a full queue is still repaired.
    pub(crate) fn release_congestion_holes(&mut self, now: Instant) {
        if self.congestion_holes.is_empty() {
            return;
        }
        let below = self.known_lost_below();
        let next = self.reorder.next_expected();
        for &(from, to) in &self.congestion_holes {
            for s in from.max(next)..to.min(below) {
                self.reorder.abandon(now, s);
            }
        }
        let next = self.reorder.next_expected();
        self.congestion_holes.retain(|&(_, to)| to > below && to > next);
    }

    /// Counts `bits` of new passenger data sent at `now` into [`Session::data_rate_bps`].
    pub(crate) fn note_data_rate(&mut self, now: Instant, bits: f64) {
        self.data_rate = (self.data_rate_bps(now) + bits / LOAD_RATE_WINDOW.as_secs_f64(), Some(now));
    }

    /// The passengers' new data sent, bit/s: an exponential average over [`LOAD_RATE_WINDOW`].
    pub(crate) fn data_rate_bps(&self, now: Instant) -> f64 {
        let (rate, at) = self.data_rate;
        let Some(at) = at else { return 0.0 };
        let age = now.saturating_duration_since(at).as_secs_f64();
        rate * (-age / LOAD_RATE_WINDOW.as_secs_f64()).exp()
    }

    /// Whether the passengers' data rate is a good share of what the usable links are estimated
    /// to carry ([`PROBE_LOAD_SHARE`]): only then can an estimate be what holds them back.
    pub(crate) fn load_near_estimates(&self, now: Instant) -> bool {
        let estimated: f64 = self.usable_slots().map(|s| s.tx.capacity_bps()).sum();
        self.data_rate_bps(now) >= PROBE_LOAD_SHARE * estimated
    }

    /// Whether the links' capacity should be probed: in the last moments, new data met a queue on
    /// the link that delivered it first while the load was near the estimates
    /// ([`Session::load_near_estimates`]), or waited in braid for one. A tunnel whose load fits the
    /// estimates sends nothing for it (a metered uplink pays for probes, and a probe's queue
    /// delays everyone's packets).
    pub(crate) fn probing_wanted(&self) -> bool {
        self.last_loaded.is_some() || self.data_wait_until.is_some()
    }

    /// Moves every usable link's capacity probing on ([`crate::link::TxLink::handle_probe_timer`]).
    pub(crate) fn advance_probes(&mut self, now: Instant) {
        // Data held in braid for a full link is load too (with CoDel on, it may wait longer
        // than the pause that ends a bulk spell).
        if self.data_wait_until.is_some() {
            self.last_loaded = Some(now);
            self.last_queue_met = Some(now);
        }
        if self.last_loaded.is_some_and(|t| now.saturating_duration_since(t) > PROBE_WANTED_FOR) {
            self.last_loaded = None;
        }
        if self.last_queue_met.is_some_and(|t| now.saturating_duration_since(t) > self.bulk_hold()) {
            self.last_queue_met = None;
            self.loaded_since = None;
        }
        if self.last_near.is_some_and(|t| now.saturating_duration_since(t) > PROBE_WANTED_FOR) {
            self.last_near = None;
        }
        let (wanted, near) = (self.probing_wanted(), self.last_near.is_some());
        let quiet = self.quiet_lone_link();
        for s in &mut self.links {
            if s.tx.remote.is_some() {
                let restoring = s.tx.restoring();
                let wanted = (wanted || (near && restoring)) && quiet != Some(s.tx.id);
                s.tx.handle_probe_timer(now, wanted);
            }
        }
    }

    /// The link that carries the session alone, if the recovery scheme has no use for coded
    /// packets on it ([`RecoverySender::codes_on_lone_link`], `auto`'s module docs): it then gets
    /// none, capacity probes included. Its estimate splits nothing, and the queue model it feeds
    /// then drives no coding; a probe's packets only queue ahead of the passengers'. On the bus
    /// route's LTE modem alone (bus-route-lte-only.toml) a probe whose rise came from a clump of
    /// deliveries after a stall went on at twice the new estimate, 37 Mbit/s, and overflowed the
    /// modem's buffer (at 323 s and 923 s: 189 and 190 coded packets and 48 and 49 of the
    /// passengers' dropped).
    pub(crate) fn quiet_lone_link(&self) -> Option<LinkId> {
        let mut usable = self.usable_slots();
        let lone = usable.next().map(|s| s.tx.id).filter(|_| usable.next().is_none())?;
        (!self.recovery.codes_on_lone_link(lone)).then_some(lone)
    }

    /// The lifecycle thresholds in force for `link`: the configured ones, but under
    /// [`RecoveryKind::Auto`] with two or more links a link whose losses `auto` codes for ahead of
    /// reports, or whose typical loss says it will again ([`RecoverySender::keeps_lossy_link`]),
    /// is degraded (drained) only above [`crate::recovery::AUTO_DEGRADE_LOSS`] and active again below
    /// [`crate::recovery::AUTO_RECOVER_LOSS`]. At the configured 25 % a steady 20 %-loss path's
    /// noisy estimate crossed the threshold every few seconds and the link was drained until it
    /// fell below 10 % (FMTCP Table II case 3: 40 changes of phase in a 60 s run), and a 50 % one
    /// (case 4) carried no data at all, though its capacity x (1 - loss) is a third of the sum.
    /// Under a bulk load a link not measured yet counts as coded for, so that it carries the data
    /// its loss is measured on (case 4's 50 % path was otherwise drained at once for good); under
    /// a lighter load it does not (coded packets ahead of reports go only under a bulk load), and
    /// the bus's short flows run as with the configured thresholds. A link `auto`
    /// does not code for keeps the configured thresholds: on case 2's 5 % path, whose estimate
    /// passes 25 % only in bursts of overflows, draining it for a moment cost less than keeping
    /// it (16.5 and 15.4 Mbit/s with the raised thresholds for every link, 17.0 and 16.1 with the
    /// configured ones, seeds 1 and 2). A lone link keeps the configured thresholds
    /// too: it is never drained, and degraded it is probed more often, which kept PluriBus Fig.
    /// 10's sweep (one 1.5 Mbit/s link, 35 % bursty loss) at 0.79 s mean FCT; with the thresholds
    /// raised there, 3.1-7.5 s (2 runs).
    ///
    /// `raised`: the session runs `auto` over two or more links and `auto` keeps this link
    /// (or, not having measured it yet, the load is bulk).
    fn lifecycle(base: crate::link::LifecycleConfig, raised: bool) -> crate::link::LifecycleConfig {
        let mut c = base;
        if raised {
            c.degrade_loss = c.degrade_loss.max(crate::recovery::AUTO_DEGRADE_LOSS);
            c.recover_loss = c.recover_loss.max(crate::recovery::AUTO_RECOVER_LOSS);
        }
        c
    }

    /// Probing, keepalive and failure detection for every link (docs/design.md 4, links that come and
    /// go): an active link whose sends go unconfirmed for a few round trips is down.
    fn check_links(&mut self, now: Instant) {
        let down_timeout = self.down_timeout();
        let periods = KeepalivePeriods::of(&self.cfg);
        let keepalive = |s: &LinkSlot| periods.of_link(s);
        // Worked out once per check, not per link, and without collecting: this runs on every
        // timer of every session.
        let auto_over_many = self.cfg.recovery == RecoveryKind::Auto && self.links.len() > 1;
        let bulk = self.load_is_bulk(now);
        // Whether a link's loss spike may be its overflow though no queue showed: only where the
        // other healthy links could not carry its traffic ([`crate::link::Evidence::dominant`]).
        let healthy = |s: &LinkSlot| s.tx.state == LinkState::Active && s.life.phase() != crate::link::Phase::Degraded;
        let healthy_bps: f64 = self.links.iter().filter(|s| healthy(s)).map(|s| s.tx.capacity_bps()).sum();
        let mut went_down = Vec::new();
        for s in &mut self.links {
            match s.tx.state {
                LinkState::Active => {
                    match liveness(s, down_timeout(s)) {
                        Some(Liveness::DownAt(t)) if now >= t => {
                            went_down.push(s.tx.id);
                            continue;
                        }
                        Some(Liveness::ProbeAt(t)) if now >= t => s.probe_due = true,
                        _ => {}
                    }
                    let idle_since =
                        s.tx.last_send().unwrap_or(s.tx.since).max(s.tx.last_probe.unwrap_or(Instant::ZERO));
                    if now >= idle_since + keepalive(s) {
                        s.probe_due = true;
                    }
                    let raised = auto_over_many && self.recovery.keeps_lossy_link(s.tx.id).unwrap_or(bulk);
                    let lifecycle = Self::lifecycle(self.cfg.lifecycle, raised);
                    // Whether the packets that showed the larger of the two directions' losses
                    // met a queue at the link's bottleneck (the peer's echo of what we sent, or
                    // what we received): there a drop-tail buffer's overflow explains a spike.
                    let tx_lossier = s.tx.loss() >= s.rx.loss();
                    let queued = if tx_lossier {
                        s.tx.echoed_queue() >= CONGESTION_QUEUE
                    } else {
                        s.rx.last_queue() >= CONGESTION_QUEUE
                    };
                    let loss = s.tx.loss().max(s.rx.loss());
                    let ev = crate::link::Evidence {
                        judged: [s.tx.judged(), s.rx.judged()],
                        lossier: usize::from(!tx_lossier),
                        overfilled_at: if tx_lossier { s.tx.overfilled_at() } else { s.rx.capacity_cut_at() },
                        dominant: {
                            let own = s.tx.capacity_bps();
                            let others = healthy_bps - if healthy(s) { own } else { 0.0 };
                            others < 0.5 * own
                        },
                    };
                    if let Some(next) = s.life.judge(loss, queued, ev, now, &lifecycle) {
                        tracing::debug!(
                            link = %s.tx.id,
                            phase = next.as_str(),
                            tx_loss = s.tx.loss(),
                            rx_loss = s.rx.loss(),
                            queued,
                            "link quality changed"
                        );
                        s.life.enter(next, now);
                    }
                }
                LinkState::Probing => {
                    if s.tx.last_probe.is_none_or(|p| now >= p + self.cfg.probe_interval) {
                        s.probe_due = true;
                    }
                }
                LinkState::Down => {
                    // Where the map expects the link back soon, probe it as a probing link is.
                    let period =
                        if s.expect.good_soon { self.cfg.probe_interval } else { self.cfg.down_probe_interval };
                    if s.tx.last_probe.is_none_or(|p| now >= p + period) {
                        s.probe_due = true;
                    }
                }
            }
        }
        for id in went_down {
            self.declare_down(now, id);
        }
    }

    /// How long an active link may go unconfirmed (and [`PROBES_BEFORE_DOWN`] probes unanswered,
    /// see [`liveness`]): a few RTTs plus the peer's report period, so an outage is noticed in
    /// well under a second, not tens of seconds.
    fn down_timeout(&self) -> impl Fn(&LinkSlot) -> Duration + use<> {
        let min = self.cfg.min_down_timeout;
        let report = self.cfg.report_interval;
        move |s: &LinkSlot| {
            let rtt = s.tx.srtt.unwrap_or(Duration::from_millis(200));
            (rtt * 3 + report * 2).clamp(min, Duration::from_secs(3))
        }
    }

    /// Re-sends packets that went out on `id` and are not yet acknowledged, on the other links.
    /// Those sent before the newest send the peer confirmed on `id` got there (a link delivers
    /// in order; one lost on the way was reported missing like any other): with a slower link
    /// beside it, the cumulative ack trails the fast link by the slower one's delay, and
    /// re-sending all of that only queued the packets that matter behind copies. Those sent at
    /// the confirmed send's very instant are re-sent: a driver sends a burst with one `now`, and
    /// the confirmation names a time, not which of the burst arrived. Taken as confirmed, a
    /// burst's lost tail waited for the passengers' own retransmissions (`scenarios/blackout.toml`,
    /// seed 1: a 301 ms stall and a passenger TCP timeout; 20 seeds, longest stall 213 ms instead
    /// of 301).
    fn resend_unacked_from(&mut self, _now: Instant, id: LinkId) {
        let from = self.peer_cum_ack.max(self.sent.base());
        let confirmed = self.slot(id).and_then(|s| s.tx.last_confirmed_send());
        let mut n = 0;
        for seq in from..self.next_seq {
            if let Some(st) = self.sent.get(seq)
                && st.meta.link == id
                && confirmed.is_none_or(|c| st.meta.resent_at.unwrap_or(st.at) >= c)
            {
                self.resends.push_back((seq, None));
                n += 1;
                if n >= 1024 {
                    break;
                }
            }
        }
    }

    /// How link `id` is metered when it appears ([`Session::set_link_metering`]).
    pub(crate) fn metering_of(&self, id: LinkId) -> Metering {
        self.metering.iter().find(|(l, _)| *l == id).map_or_else(Metering::default, |(_, m)| *m)
    }

    /// Link `id`'s slot, if the session has that link.
    pub(crate) fn slot(&self, id: LinkId) -> Option<&LinkSlot> {
        self.links.iter().find(|s| s.tx.id == id)
    }

    pub(crate) fn slot_mut(&mut self, id: LinkId) -> Option<&mut LinkSlot> {
        self.links.iter_mut().find(|s| s.tx.id == id)
    }

    /// Links data may use: active ones; failing that, probing ones; failing that, any with an
    /// address. Passengers' packets are never dropped for want of a perfect link.
    ///
    /// Among active links, degraded ones (link/lifecycle.rs) carry nothing new while a healthy one
    /// exists: a better link is taken up before a worse one is let go. While no link is admitted,
    /// passengers' packets wait (up to [`crate::link::LifecycleConfig::wait_for_link`]) for one.
    ///
    /// Backup links only when none of them is a non-backup link: a backup carries nothing else
    /// (data, repair, feedback) while another link can.
    pub(crate) fn usable_slots(&self) -> impl Iterator<Item = &LinkSlot> {
        let has = |st: LinkState| self.links.iter().any(|s| s.tx.state == st && s.tx.remote.is_some());
        // A link the location map expects to fade soon is drained as a degraded one is.
        let drained = |s: &LinkSlot| s.life.phase() == crate::link::Phase::Degraded || s.expect.fades_soon;
        let healthy =
            self.links.iter().any(|s| s.tx.state == LinkState::Active && s.tx.remote.is_some() && !drained(s));
        let want = if has(LinkState::Active) || self.waiting_for_link {
            Some(LinkState::Active)
        } else if has(LinkState::Probing) {
            Some(LinkState::Probing)
        } else {
            None
        };
        let candidate = move |s: &LinkSlot| s.tx.remote.is_some() && want.is_none_or(|w| s.tx.state == w);
        let primary = self.links.iter().any(|s| candidate(s) && !s.backup);
        self.links.iter().filter(move |s| candidate(s) && !(primary && s.backup) && !(healthy && drained(s)))
    }

    /// How long an active link may sit idle before a keepalive probe: longer for a backup, which
    /// is probed only so that its state is known ([`BACKUP_KEEPALIVE`]).
    fn keepalive(&self, s: &LinkSlot) -> Duration {
        KeepalivePeriods::of(&self.cfg).of_link(s)
    }

    /// Whether passengers' packets should wait for a link to be admitted at `now`: this is the
    /// client, no link is active, some link may still come up, and the oldest waiting packet has
    /// not waited [`crate::link::LifecycleConfig::wait_for_link`].
    pub(crate) fn update_waiting_for_link(&mut self, now: Instant) {
        let wait = self.cfg.lifecycle.wait_for_link;
        self.waiting_for_link = !wait.is_zero()
            && self.cfg.role == Role::Client
            && !self.links.iter().any(|s| s.tx.state == LinkState::Active && s.tx.remote.is_some())
            && self.links.iter().any(|s| s.tx.remote.is_some())
            && self.pending_data.oldest().is_none_or(|t| now < t + wait);
    }

    /// The d + δ all relative delays are measured against: the smallest known.
    pub(crate) fn reference_owd(&self) -> u32 {
        let known: Vec<u32> = self.links.iter().filter_map(|s| s.tx.owd_us()).collect();
        let Some(&first) = known.first() else { return 0 };
        known.iter().copied().min_by_key(|o| o.wrapping_sub(first) as i32).unwrap_or(first)
    }

    /// Sequencing-buffer hold: how long an in-order packet may trail a later one, queues
    /// included, plus a margin, bounded (PluriBus 5.4 used a fixed 50 ms; braid derives it). With
    /// ARQ, a retransmission must fit in as well. Counting only the empty-queue delay spread
    /// released packets that a standing queue had delayed as late: NATALIE Fig. 7, wrr-auto, late
    /// 0.36 % -> 0.07 % and goodput 11.0 -> 11.1 Mbit/s with the queues counted.
    pub(crate) fn hold_time(&self) -> Duration {
        if let Some(f) = self.cfg.hold.fixed {
            return f;
        }
        let h = self.cfg.hold;
        let mut hold = self.rx_queue_spread(true) + h.margin;
        if self.peer_wants_nacks {
            // Room for a resend and one retry: a hole waits for the report, a round trip, and, if
            // the report or the resend was lost (2 % each on FMTCP Table II's second path), a
            // second round trip. Filled holes go out at once, so a longer hold costs only holes
            // nothing will fill; with a repairing peer those are rare.
            hold += self.nack_first_delay() + self.min_rtt() * 2 + h.margin;
        }
        hold.clamp(h.min, h.max.max(h.min))
    }

    /// How long the repair of a reported hole waits, if at all: a hole in the data a link carried
    /// with coded packets owed to it ahead of reports ([`RecoverySender::codes_for_link`]; a
    /// link losing 15 % or more under `auto`) is usually decoded from the coded packets that
    /// follow it a few packets later, but the peer reports it as soon as a later packet on that
    /// link shows it lost, before they arrive. Resent at once, it arrived as a duplicate a round
    /// trip later: FMTCP Table II case 3 (seed 2) resent 4,902 packets, and 4,935 full-size
    /// data packets reached the client twice, a megabit a second of the full links. The repair
    /// waits for the peer's acknowledgement of the decoded hole (its ack delay, after a quarter
    /// of the round trip for the decoding, at most 50 ms), which drops it
    /// ([`Session::on_ack`]); a hole still missing by then is resent as before. Only a first
    /// transmission's hole waits: one whose resend was lost is repaired at once.
    pub(crate) fn repair_wait(&self, seq: u64) -> Option<Duration> {
        let meta = &self.sent.get(seq)?.meta;
        if meta.resent_at.is_some() || self.recovery.codes_for_link(meta.link) != Some(true) {
            return None;
        }
        Some(self.cfg.ack_delay + (self.min_rtt() / 4).min(REPAIR_WAIT_DECODE_MAX))
    }

    fn min_rtt(&self) -> Duration {
        self.links.iter().filter_map(|s| s.tx.srtt).min().unwrap_or(Duration::from_millis(100))
    }

    /// How long an in-order packet may trail a later one *now* (with `repair`: or its repair
    /// follow it): the slowest link's recent peak delay, queueing included, minus the fastest
    /// link's empty-queue delay. The empty-queue delays alone (PluriBus 5.3's d + δ) see only
    /// propagation, so with a queue on one link and none on the other (FMTCP Table II: equal
    /// 100 ms paths, 250 kB modem buffers) every packet queued behind another looked lost, and
    /// `arq` resent 40 % of a bulk flow. A link silent for a second longer than the freshest one is
    /// judged by its empty-queue delay: its queue has drained.
    ///
    /// Only links that carry what a hole waits for count: data, and with `repair` coded packets
    /// too. A link that carried only probes (FMTCP Table II case 8: a 500 ms path beside a 100 ms
    /// one that `min-delay` fills alone) stretched every hole report and hold by its 400 ms lead,
    /// and `arq`'s resends came after the passenger's TCP had stalled (1.4 Mbit/s against 5.2 once
    /// it no longer counted). A link idle for [`DATA_RECENT`] counts again from its next packet;
    /// before any has arrived, every link counts.
    fn rx_queue_spread(&self, repair: bool) -> Duration {
        let freshest = self.links.iter().filter_map(|s| s.rx.last()).map(|(_, at)| at).max();
        let carried = |s: &LinkSlot| if repair { s.last_data.max(s.last_coded) } else { s.last_data };
        let newest = self.links.iter().filter_map(carried).max();
        let counts = |s: &LinkSlot| match (carried(s), newest) {
            (Some(at), Some(n)) => at + DATA_RECENT >= n,
            (None, Some(_)) => false,
            (_, None) => true,
        };
        let mut slowest: Option<u32> = None;
        let mut fastest: Option<u32> = None;
        // Offsets are wrapping u32s that share one clock offset; compare them as signed
        // differences from the first, as `reference_owd` does.
        let later = |a: u32, b: u32| (a.wrapping_sub(b) as i32) > 0;
        for s in self.links.iter().filter(|s| s.tx.state != LinkState::Down && counts(s)) {
            let Some(floor) = s.rx.owd_us() else { continue };
            let recent = match (s.rx.last(), freshest) {
                (Some((_, at)), Some(f)) if at + DATA_RECENT >= f => s.rx.recent_peak_owd_us(),
                _ => None,
            }
            .filter(|&p| later(p, floor))
            .unwrap_or(floor);
            if slowest.is_none_or(|m| later(recent, m)) {
                slowest = Some(recent);
            }
            if fastest.is_none_or(|m| later(m, floor)) {
                fastest = Some(floor);
            }
        }
        match (slowest, fastest) {
            (Some(a), Some(b)) => {
                Duration::from_micros(i64::from(a.wrapping_sub(b) as i32).clamp(0, 10_000_000) as u64)
            }
            _ => Duration::ZERO,
        }
    }

    /// Holes below this are lost: every link that may carry data has delivered a later packet,
    /// and links deliver in order. Waiting out the delay spread instead (`nack_first_delay`) cost
    /// every hole on FMTCP Table II case 3 up to the 150 ms a modem queue may hold before it was
    /// even reported. A link the peer has not sent data on within [`DATA_RECENT`] may have some in
    /// flight the receiver cannot know of (FMTCP Table II case 8: `min-delay` turns to the 500 ms
    /// path after a second on the 100 ms one, and counting only the busy link reported every
    /// such packet lost while it was still on its way), so then nothing is known lost and holes
    /// wait out the delay spread.
    fn known_lost_below(&self) -> u64 {
        let Some(newest) = self.links.iter().filter_map(|s| s.last_data).max() else { return 0 };
        let mut below = u64::MAX;
        for s in self.links.iter().filter(|s| s.tx.state != LinkState::Down) {
            match (s.last_data, s.highest_data) {
                (Some(at), Some(h)) if at + DATA_RECENT >= newest => below = below.min(h),
                _ => return 0,
            }
        }
        below
    }

    /// When a hole is first reported: once every packet sent before the one that revealed it
    /// could have arrived, on whichever link it took.
    fn nack_first_delay(&self) -> Duration {
        self.rx_queue_spread(false) + Duration::from_millis(5)
    }

    fn nack_retry(&self) -> Duration {
        self.nack_first_delay() + self.min_rtt() + Duration::from_millis(10)
    }

    /// The hole tracker's timing now, and one feedback's worth of holes per poll.
    fn nack_timing(&self) -> recovery::NackTiming {
        recovery::NackTiming {
            first_delay: self.nack_first_delay(),
            retry: self.nack_retry(),
            max: crate::wire::FeedbackRepr::MAX_NACKS,
        }
    }
}

/// Passenger packets waiting in braid for a link, oldest first, with the bytes they hold: the
/// backlog a full link would still have to carry ([`Session::pick_data_link`]).
#[derive(Debug, Default)]
struct PendingData {
    packets: VecDeque<(Instant, Bytes)>,
    bytes: usize,
}

impl PendingData {
    fn push_back(&mut self, arrived: Instant, packet: Bytes) {
        self.bytes += packet.len();
        self.packets.push_back((arrived, packet));
    }

    /// Puts a packet just taken back at the head, where it was.
    fn push_front(&mut self, arrived: Instant, packet: Bytes) {
        self.bytes += packet.len();
        self.packets.push_front((arrived, packet));
    }

    fn pop_front(&mut self) -> Option<(Instant, Bytes)> {
        let (arrived, packet) = self.packets.pop_front()?;
        self.bytes -= packet.len();
        Some((arrived, packet))
    }

    fn is_empty(&self) -> bool {
        self.packets.is_empty()
    }

    /// When the oldest waiting packet came in.
    fn oldest(&self) -> Option<Instant> {
        self.packets.front().map(|(t, _)| *t)
    }

    fn bytes(&self) -> usize {
        self.bytes
    }
}

/// How long an active link may sit idle before a keepalive probe: longer for a backup, which is
/// probed only so that its state is known ([`BACKUP_KEEPALIVE`]); as often as a probing link for a
/// degraded one. A degraded link carries nothing new, so its loss estimate moves only with the
/// probes it carries: at one a second, an uplink whose rate fell from 20 to 2 Mbit/s (a burst of
/// drops at its buffer, then nothing wrong with it) stayed unused for 8 s of bench-bond's 10 s at
/// 2 Mbit/s; at the probing period it is judged again within about a second.
#[derive(Debug, Clone, Copy)]
struct KeepalivePeriods {
    base: Duration,
    backup: Duration,
    degraded: Duration,
}

impl KeepalivePeriods {
    fn of(cfg: &SessionConfig) -> Self {
        KeepalivePeriods {
            base: cfg.keepalive,
            backup: cfg.keepalive.max(BACKUP_KEEPALIVE),
            degraded: cfg.probe_interval.min(cfg.keepalive),
        }
    }

    fn of_link(&self, s: &LinkSlot) -> Duration {
        if s.life.phase() == crate::link::Phase::Degraded {
            self.degraded
        } else if s.backup {
            self.backup
        } else {
            self.base
        }
    }
}
