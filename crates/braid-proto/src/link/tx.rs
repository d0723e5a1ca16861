//! Sender-side state of one outgoing link direction: queue estimate, reported path properties,
//! liveness (PluriBus 5.2, 5.3; docs/design.md 4 "links that come and go").

use super::{LinkId, track_max, tx_time_us};
use crate::time::Instant;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::Duration;

/// Where a link is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkState {
    /// Not yet confirmed: probes are sent until enough in a row are answered.
    Probing,
    /// In use.
    Active,
    /// Nothing came back for a few round trips; probed until it answers again.
    Down,
}

impl LinkState {
    /// Lower-case name for status output.
    pub fn as_str(self) -> &'static str {
        match self {
            LinkState::Probing => "probing",
            LinkState::Active => "active",
            LinkState::Down => "down",
        }
    }
}

/// Probe replies in a row that bring a link from probing or down to active.
pub const PROBES_TO_ACTIVATE: u32 = 3;

/// Unanswered probes an active link must have sent, besides going unconfirmed for the down
/// timeout, before it is declared down. Silence alone is no proof: when the last packet before an
/// idle spell is lost (one in two in a bus WiMax's bad state, PluriBus Table 1), nothing else is
/// sent that the peer could confirm, and the link used to go down 26 times a minute on the bus.
/// QUIC's probe timeout (RFC 9002 6.2) asks the same question before giving up on a path.
pub const PROBES_BEFORE_DOWN: u32 = 3;

/// A report from the peer proves a link dead when at least this many of our sends on it should
/// have reached the peer before the report left, and none did ([`TxLink::overdue_sends`]), or
/// more on a link that loses more ([`TxLink::overdue_to_prove_silence`]). Eight in a row lost at
/// paper 002's fringe loss of 30 % happens once in 15,000 tries; a dead link collects them within
/// a few milliseconds of data.
pub const OVERDUE_DOWN: u32 = 8;

/// The loss at which [`OVERDUE_DOWN`] sends in a row lost are as unlikely as a dead link needs
/// them to be ([`TxLink::overdue_to_prove_silence`]).
const OVERDUE_DOWN_AT_LOSS: f64 = 0.3;

/// The most loss [`TxLink::overdue_to_prove_silence`] allows for (19 sends in a row at 60 %):
/// a dying link's estimate climbs towards 1 and must not put its silence out of reach.
const OVERDUE_MAX_LOSS: f64 = 0.6;

/// How far apart (the peer's clock) two reports must have left that show a link silent since the
/// same send before it counts as dead ([`TxLink::confirm_silence`]): one silence-report period.
/// A report shows what the peer had handed its session, which can lag what reached its host: a
/// daemon stopped for a while (a loaded machine does that for tens of milliseconds, and more)
/// runs its overdue timers when it goes on, and its first report may leave before its receive
/// tasks have handed over what queued in the kernel meanwhile. The next one, this much later,
/// has it.
pub const SILENCE_CONFIRM: Duration = Duration::from_millis(15);

/// How much later than the queue model predicts a send may reach the peer before a report that
/// has not seen it counts it overdue: the model's errors (receive timestamps clump, capacity
/// estimates lag a changing rate) stay within a few tens of milliseconds between echoes.
pub const OVERDUE_MARGIN: Duration = Duration::from_millis(25);

/// Sends remembered for checking the queue model against the peer's echoes: at 10 Mbit/s about
/// 5 s of full-size datagrams, more than any echo takes to come back.
const SEND_LOG: usize = 4096;

/// How far the queue a datagram actually met may exceed the model's figure for it before the
/// model is corrected: above the few milliseconds by which a host's scheduling jitters receive
/// timestamps, below the 200 ms a modem's buffer holds.
pub const QUEUE_CORRECTION_MIN: Duration = Duration::from_millis(10);
/// The share of a link's deepest measured queue up to which a repair may fill the modelled queue
/// ([`TxLink::brim_room_at`]). The model runs open loop between the peer's echoes and trails a
/// full buffer: in the blackout scenario (seed 22) resends sent at a modelled 110 ms met LTE's
/// full 120 ms buffer and were lost again. Half leaves a full buffer's worth of data ahead of
/// the repair, so the link does not idle while it waits.
pub const BRIM_SHARE: f64 = 0.5;

/// How long a minimum RTT sample stands ([`TxLink::min_rtt`]); BBR's min-RTT filter uses 10 s.
pub const MIN_RTT_WINDOW: Duration = Duration::from_secs(10);

/// A probe round trip counts toward [`TxLink::min_path_rtt`] only when the queue the model
/// predicted for the probe is at most this share of it ([`TxLink::on_path_rtt_sample`]): the
/// sample is then at most this much short of the path's round trip, however wrong the model,
/// which keeps a 60 ms path above `auto`'s 50 ms bound for long paths. Probes on a link busier
/// than that leave the estimate to the reports' round trips ([`TxLink::min_echo_rtt`]).
pub const PATH_RTT_MAX_QUEUE_SHARE: f64 = 1.0 / 8.0;

/// How long the sender sends into a link at a probing gain: two of the receiver's
/// [`super::rx::DELIVERY_WINDOW`]s, so that one of them lies wholly inside the probe.
pub const PROBE_LEN: Duration = Duration::from_millis(200);
/// Between probes of a link whose last probe found nothing more: BBR's ProbeBW cycle probes once in
/// eight round trips; braid's uplinks have round trips of 30-200 ms, and their capacity changes
/// with the vehicle's position on the scale of seconds.
pub const PROBE_PERIOD: Duration = Duration::from_secs(1);
/// A link whose packets met a queue of at least this much lately (the peer's echoes) is not
/// probed: it already carries all the estimate allows, data
/// that the earliest-arrival rule sends beyond that raises the estimate by itself, and the peer
/// measures its capacity from how fast a queue drains (PluriBus 5.2's dispersion). Probing it
/// would only lengthen the queue every passenger waits in.
pub const PROBE_MAX_QUEUE: Duration = Duration::from_millis(5);
/// The queue the peer must have measured on a link to close it to opportunistic coded packets
/// ([`TxLink::coding_closed_until`]). Coded packets are scavenger traffic (RFC 6817's reasoning,
/// as [`TxLink::check_queue`] says), and the queue model they otherwise go by rests on the
/// capacity estimate, which lags a rate that swings: on the bus route's LTE trace OEC filled the
/// modem's 400 kB buffer, and the passengers' own packets were dropped behind coded ones (one
/// lap of bus-route-flows.toml: mean FCT 4.5 s with 4 flows failed; 1.4 s and none with this
/// bound). The bound is a cellular round trip, not less: at 25 ms the coding that repairs a
/// failover's holes on the remaining uplink stopped too (blackout.toml, 8 runs: longest stall
/// 232 ms without the gate and at 80 ms, 510 ms at 25 ms); a bound from each link's measured
/// minimum round trip did as badly, since a busy link is seldom probed and its minimum unknown.
pub const CODING_MAX_QUEUE: Duration = Duration::from_millis(80);
/// The share of a link's capacity estimate that opportunistic coded packets are paced at right
/// after the peer's echoes caught the queue model far behind the real queue
/// ([`TxLink::coding_gain`]).
pub const CODING_GAIN_MIN: f64 = 1.0 / 16.0;
/// How fast the coding gain grows back after a cut, per second: from [`CODING_GAIN_MIN`] to 1 in
/// about three minutes without another miss. A cellular rate that collapsed once collapses again
/// within that on the same roads: the bus route's LTE trace, recorded from a moving car, swings
/// from over 10 Mbit/s to under 1 every 10-30 s. Back to 1 in 10 s (and each miss only halving
/// the gain), one lap of `bus-route-flows.toml` (2 runs) had a mean FCT of 0.625 s; at this rate
/// 0.488 s, with 0.43 % of LTE's packets dropped at its buffer instead of 3 %.
pub const CODING_GAIN_RECOVERY: f64 = 0.005;
/// How long the peer's measurement closes a link to coding: a link it no longer reports on (no
/// data on it) opens again after this.
pub const CODING_ECHO_FRESH: Duration = Duration::from_millis(500);
/// Corrections in a row, each finding a link draining [`QUEUE_CORRECTION_MIN`] faster than the
/// model with no queue of [`PROBE_MAX_QUEUE`] measured, that take a link whose capacity nobody
/// configured back into its startup ([`TxLink::startup_again`]): at a report every 100 ms,
/// about a third of a second of such evidence.
pub const STARTUP_AGAIN: u32 = 3;
/// How soon a probe held back by a queue is tried again.
const PROBE_RETRY: Duration = Duration::from_millis(250);
/// The gain while a link's estimate keeps rising probe after probe (BBR's startup gain, 2/ln 2
/// rounded down to a doubling): from the 1 Mbit/s assumed for an unknown link to 20 Mbit/s in
/// five probes, about a second.
pub const GROWTH_GAIN: f64 = 2.0;
/// The gain of a routine probe (BBR ProbeBW's 5/4): a quarter more, for [`PROBE_LEN`], costs a
/// link that is already full 50 ms of queue.
pub const CRUISE_GAIN: f64 = 1.25;
/// A probe succeeded when the peer's estimate rose by this factor while or shortly after it ran.
const PROBE_SUCCESS: f64 = 1.1;
/// A link whose estimate is below this share of its highest of the last [`PEAK_BUCKET`]s has
/// fell recently and is probed beside its data ([`TxLink::restoring`]).
pub const RESTORE_FELL: f64 = 0.5;
/// A restore whose probes keep raising the estimate goes on, beside the data, up to this share
/// of the recent highest; the ordinary probes take over from there.
pub const RESTORE_UNTIL: f64 = 0.9;
/// The highest estimate is kept over the last one to two of these spans
/// ([`TxLink::recent_peak_bps`]): longer than a modem's rate stays down while a vehicle passes a
/// bad spot (bench-bond's drop case: 10 s). BBR keeps its bandwidth maximum over a few round
/// trips, since it probes all the time (draft-cardwell-iccrg-bbr-congestion-control, 4.5.2.4);
/// this one is only a memory of what the link carried lately, which says a restore probe's
/// doubling may go that far.
pub const PEAK_BUCKET: Duration = Duration::from_secs(15);

/// Where a link's capacity probing is (BBR's ProbeBW up phase, with its startup's doubling while
/// probes keep finding more).
#[derive(Debug, Clone, Copy, PartialEq)]
enum ProbePhase {
    /// Not probing; the next probe is due at `next`.
    Idle { next: Instant },
    /// Sending at `gain` times the estimate until `until`; `base` is the estimate it started from.
    /// `restore`: a restore probe ([`TxLink::restoring`]). `beside`: its coded packets also go
    /// beside the data while the modelled queue is busy ([`TxLink::on_send_spare`]), as a restore
    /// probe's and a growth probe's do ([`TxLink::probes_beside`]).
    Probing { until: Instant, gain: f64, base: f64, restore: bool, beside: bool },
    /// The probe ended; the peer's estimate may still rise until `until` (its measurement window and
    /// report interval, plus a round trip). `restore`: it was a restore probe; `beside`: its coded
    /// packets went beside the data.
    Settling { until: Instant, base: f64, restore: bool, beside: bool },
}

/// One datagram sent: its wire timestamp, when, and the queue the model predicted it would
/// meet, µs, its own transmission included.
#[derive(Debug, Clone, Copy)]
struct Sent {
    wire_ts: u32,
    at: Instant,
    queue_us: f64,
    /// Its link sequence number.
    seq: u64,
}

/// The sender's view of one link.
#[derive(Debug, Clone)]
pub struct TxLink {
    /// The link.
    pub id: LinkId,
    /// Where to send (the server's address on the client; the vehicle's latest address on the
    /// server).
    pub remote: Option<SocketAddr>,
    /// Life-cycle state.
    pub state: LinkState,
    /// Operator weight for weighted schedulers.
    pub weight: u32,
    capacity_bps: f64,
    bootstrap_bps: f64,
    queue_us: f64,
    queue_at: Instant,
    owd_us: Option<u32>,
    loss: f64,
    next_seq: u64,
    /// Smoothed RTT from probes.
    pub srtt: Option<Duration>,
    /// Smallest probe RTT of the last [`MIN_RTT_WINDOW`] (with when it was taken): the path's
    /// round trip without the queue braid's own traffic builds, which inflates `srtt`.
    min_rtt: Option<(Duration, Instant)>,
    /// [`Self::min_path_rtt`] and when it was taken.
    min_path_rtt: Option<(Duration, Instant)>,
    /// [`Self::min_echo_rtt`] and when it was taken.
    min_echo_rtt: Option<(Duration, Instant)>,
    last_send: Option<Instant>,
    first_unconfirmed: Option<Instant>,
    /// [`Self::last_confirmed_send`].
    last_confirmed_send: Option<Instant>,
    unanswered_probes: u32,
    /// The first report that showed the link silent: its send time (the peer's wire clock) and
    /// the newest of our sends it echoed ([`Self::confirm_silence`]).
    silence: Option<(u32, u32)>,
    /// Probe replies in a row while probing or down.
    pub probe_streak: u32,
    /// When the last probe went out.
    pub last_probe: Option<Instant>,
    /// Id of the last probe sent.
    pub probe_id: u32,
    /// When the state last changed.
    pub since: Instant,
    sends: VecDeque<Sent>,
    corrected_at: Option<Instant>,
    probe: ProbePhase,
    /// The last probe raised the estimate: the next one follows at once, at [`GROWTH_GAIN`]. A
    /// probe held back by a queue the peer measured ends it: the data fills the link, and its
    /// delivery rate raises the estimate by itself.
    growing: bool,
    /// The link is in its startup (BBR's Startup, draft-cardwell-iccrg-bbr-congestion-control
    /// 4.3.1): no capacity was configured for it, and its pipe has not yet been found full: the
    /// peer has measured no queue of [`PROBE_MAX_QUEUE`] on it, no probe was ended by a queue
    /// beyond the model's, and none beside the data found nothing more. Until then its estimate
    /// is only what the traffic it happened to carry showed.
    startup: bool,
    /// The last probe that raised the estimate was a restore probe ([`Self::restoring`]).
    restore_grew: bool,
    /// The estimate the peer reported last, bit/s: the highest estimate counts only what two
    /// reports in a row stood at.
    last_reported: f64,
    /// One past the link sequence number of the newest send the peer confirmed: what its loss
    /// estimate has judged (lifecycle.rs's `Evidence`).
    confirmed_seq: u64,
    /// When the link was last found carrying less than we sent into it: the peer's estimate cut
    /// to less than half, or the queue model corrected upward.
    overfilled_at: Option<Instant>,
    /// The highest estimate the peer reported over the last one to two [`PEAK_BUCKET`]s
    /// (current bucket, previous bucket, bucket start).
    peak: (f64, f64, Option<Instant>),
    /// When a restore probe's next coded packet may go beside the data.
    beside_next: Instant,
    /// The queue the newest echoed datagram met, µs (the peer's measurement), and when it came.
    echoed_queue_us: i64,
    echoed_at: Option<Instant>,
    /// How far the queue the newest echoed datagram met was above the model's figure for it, µs
    /// ([`Self::model_behind`]).
    echoed_behind_us: f64,
    /// The longest queue the peer has measured on this link, µs ([`Self::peak_queue`]).
    peak_queue_us: i64,
    /// [`Self::coding_stall_noted`].
    coding_stall_noted: bool,
    /// The coding gain right after its last cut and when that was ([`Self::coding_gain`]).
    coding_cut: Option<(f64, Instant)>,
    /// When the next opportunistic coded packet may go, paced at the coding gain.
    coding_next: Instant,
    /// When the peer last measured this link's queue well short of the model's
    /// ([`Self::check_queue`]): the link drains faster than its estimate.
    drains_faster_at: Option<Instant>,
    /// Corrections in a row that found the link draining faster than the model with no queue
    /// of [`PROBE_MAX_QUEUE`] measured on it ([`STARTUP_AGAIN`]).
    faster_streak: u32,
}

impl TxLink {
    /// A link with a configured capacity bootstrap (bit/s; 0 = unknown), starting in `state`.
    pub fn new(id: LinkId, remote: Option<SocketAddr>, bootstrap_bps: f64, state: LinkState, now: Instant) -> Self {
        TxLink {
            id,
            remote,
            state,
            weight: 1,
            capacity_bps: bootstrap_bps,
            bootstrap_bps,
            queue_us: 0.0,
            queue_at: now,
            owd_us: None,
            loss: 0.0,
            next_seq: 0,
            srtt: None,
            min_rtt: None,
            min_path_rtt: None,
            min_echo_rtt: None,
            last_send: None,
            first_unconfirmed: None,
            last_confirmed_send: None,
            unanswered_probes: 0,
            silence: None,
            probe_streak: 0,
            last_probe: None,
            probe_id: 0,
            since: now,
            sends: VecDeque::new(),
            corrected_at: None,
            probe: ProbePhase::Idle { next: now },
            // A link whose capacity nobody configured starts as BBR does, doubling; one with a
            // configured figure is only checked now and then.
            growing: bootstrap_bps <= 0.0,
            startup: bootstrap_bps <= 0.0,
            restore_grew: false,
            last_reported: 0.0,
            confirmed_seq: 0,
            overfilled_at: None,
            peak: (f64::NEG_INFINITY, f64::NEG_INFINITY, None),
            beside_next: now,
            echoed_queue_us: 0,
            echoed_behind_us: 0.0,
            peak_queue_us: 0,
            echoed_at: None,
            coding_stall_noted: false,
            coding_cut: None,
            coding_next: now,
            drains_faster_at: None,
            faster_streak: 0,
        }
    }

    /// Capacity used for the queue model, bit/s: the peer's estimate, else the bootstrap, else a
    /// conservative 1 Mbit/s.
    pub fn capacity_bps(&self) -> f64 {
        if self.capacity_bps > 0.0 {
            self.capacity_bps
        } else if self.bootstrap_bps > 0.0 {
            self.bootstrap_bps
        } else {
            1e6
        }
    }

    /// Whether a capacity probe is running (the session fills the link with coded packets then,
    /// whatever the recovery scheme). It ends at [`Self::probe_timeout`].
    pub fn is_probing(&self) -> bool {
        matches!(self.probe, ProbePhase::Probing { .. })
    }

    /// When the probe state next changes by itself: a running probe's or settling's end, or the
    /// next probe when `wanted`.
    pub fn probe_timeout(&self, wanted: bool) -> Option<Instant> {
        match self.probe {
            ProbePhase::Idle { next } => (wanted && self.state == LinkState::Active).then_some(next),
            ProbePhase::Probing { until, .. } | ProbePhase::Settling { until, .. } => Some(until),
        }
    }

    /// Advances capacity probing at `now` (BBR's ProbeBW and startup, on the peer's estimate):
    /// while `wanted` (traffic the links may need to carry) and no probe ran for
    /// [`PROBE_PERIOD`], or at once after a probe that raised the estimate, the link is probed for
    /// [`PROBE_LEN`] at [`GROWTH_GAIN`] (estimate rising) or [`CRUISE_GAIN`].
    pub fn handle_probe_timer(&mut self, now: Instant, wanted: bool) {
        let settle = PROBE_LEN + self.srtt.unwrap_or(Duration::from_millis(100)).min(Duration::from_millis(500));
        match self.probe {
            ProbePhase::Probing { until, base, restore, beside, .. } if now >= until => {
                self.probe = ProbePhase::Settling { until: now + settle, base, restore, beside };
            }
            ProbePhase::Settling { until, beside, .. } if now >= until => {
                // Nothing more was found: probe again only after a while, gently. A probe beside
                // the data that found nothing has found the link's capacity (`startup`).
                tracing::debug!(link = %self.id, estimate_kbps = self.capacity_bps() / 1e3, "probe found nothing");
                self.startup &= !beside;
                self.growing = false;
                self.restore_grew = false;
                self.probe = ProbePhase::Idle { next: now + PROBE_PERIOD };
            }
            ProbePhase::Idle { next } if now >= next && wanted && self.state == LinkState::Active => {
                // Judged by the queue the peer measured, not the model's: the earliest-arrival
                // rule fills a link's modelled queue up to the busiest link's, so under a bulk
                // flow every link looks as full as the fullest, and a link faster than its
                // estimate (bench-bond's uplink restored from 2 to 20 Mbit/s) was never probed.
                if self.echo_shows_queue() {
                    tracing::debug!(link = %self.id, queue_us = self.echoed_queue_us, "probe held by queue");
                    // The data filled the link, whose estimate now rises with the data's delivery
                    // rate: growth is over, as at a probe's full pipe (`end_probe_at_full_pipe`).
                    self.growing = false;
                    self.probe = ProbePhase::Idle { next: now + PROBE_RETRY };
                    return;
                }
                let restore = self.restoring();
                let gain = self.probe_gain(restore);
                if restore {
                    tracing::debug!(
                        link = %self.id,
                        estimate_kbps = self.capacity_bps() / 1e3,
                        peak_kbps = self.recent_peak_bps() / 1e3,
                        gain,
                        "restore probe"
                    );
                }
                let beside = self.probes_beside(now, restore, gain, false);
                if beside && !restore {
                    tracing::debug!(link = %self.id, estimate_kbps = self.capacity_bps() / 1e3, "startup probe beside the data");
                } else if !restore {
                    tracing::debug!(link = %self.id, estimate_kbps = self.capacity_bps() / 1e3, gain, "probe");
                }
                self.probe =
                    ProbePhase::Probing { until: now + PROBE_LEN, gain, base: self.capacity_bps(), restore, beside };
                self.beside_next = now;
            }
            _ => {}
        }
    }

    /// The peer's estimate moved to `bps` at `now`: a rise during or just after a probe is its
    /// success, and the next probe follows at once at [`GROWTH_GAIN`].
    fn on_capacity_report(&mut self, now: Instant, bps: f64) {
        match self.probe {
            ProbePhase::Probing { until, base, restore, beside, .. } if bps >= PROBE_SUCCESS * base => {
                tracing::debug!(link = %self.id, base_kbps = base / 1e3, estimate_kbps = bps / 1e3, "probe raised the estimate");
                self.growing = true;
                self.restore_grew = restore;
                // Keep probing from the new estimate, at the growth gain.
                let restore = self.restoring();
                let gain = self.probe_gain(restore);
                let beside = self.probes_beside(now, restore, gain, beside);
                self.probe =
                    ProbePhase::Probing { until: until.max(now + PROBE_LEN), gain, base: bps, restore, beside };
            }
            ProbePhase::Settling { base, restore, .. } if bps >= PROBE_SUCCESS * base => {
                tracing::debug!(link = %self.id, base_kbps = base / 1e3, estimate_kbps = bps / 1e3, "estimate rose after a probe");
                self.growing = true;
                self.restore_grew = restore;
                self.probe = ProbePhase::Idle { next: now };
            }
            _ => {}
        }
    }

    /// The highest capacity estimate the peer reported over the last one to two
    /// [`PEAK_BUCKET`]s, bit/s (0 before any).
    pub fn recent_peak_bps(&self) -> f64 {
        self.peak.0.max(self.peak.1).max(0.0)
    }

    /// Whether this link's capacity is probed beside its data: its measured estimate fell below
    /// [`RESTORE_FELL`] of its recent highest ([`Self::recent_peak_bps`]), or a restore probe
    /// raised it last and it is still below [`RESTORE_UNTIL`] of that. The session also asks
    /// for such a link's probes while the passengers' load is near the estimates, queue or no
    /// queue.
    ///
    /// A passenger that paces at what the tunnel delivers (BBR) sends at the sum of the
    /// estimates; the earliest-arrival rule feeds each link its estimate, so a link whose rate
    /// came back (bench-bond's uplink from 2 to 20 Mbit/s) delivers no more than its old
    /// estimate, builds no queue, and keeps its modelled queue busy, where an ordinary probe's
    /// coded packets cannot go: its estimate stayed low for 4-8 s or for good. A restore probe's
    /// coded packets go beside the data ([`Self::on_send_spare`]): the delivery rate they add
    /// raises the peer's estimate, and they are copies, so they reorder and hold up no data.
    /// Only a link that carried more lately is probed so, and only while the peer measures its
    /// queue at its floor ([`PROBE_MAX_QUEUE`]); the first queue beyond the model's ends the
    /// probe ([`Self::check_queue`]).
    pub fn restoring(&self) -> bool {
        let (c, peak) = (self.capacity_bps(), self.recent_peak_bps());
        self.capacity_bps > 0.0 && (c < RESTORE_FELL * peak || (self.restore_grew && c < RESTORE_UNTIL * peak))
    }

    /// The gain of the next probe: [`GROWTH_GAIN`] while probes keep raising the estimate, else
    /// [`CRUISE_GAIN`] (BBR ProbeBW's up phase, draft-cardwell-iccrg-bbr-congestion-control
    /// 4.3.3.3). A restore probe (`beside`) grows only after a restore probe raised the estimate,
    /// and only while that stays within the link's recent highest, which it carried then: its
    /// packets go into a link that may be full, where a doubling overflows a modem's buffer
    /// before the peer's echo can stop it.
    fn probe_gain(&self, beside: bool) -> f64 {
        let grow = if beside {
            self.restore_grew && self.capacity_bps() * GROWTH_GAIN <= self.recent_peak_bps()
        } else {
            self.growing
        };
        if grow { GROWTH_GAIN } else { CRUISE_GAIN }
    }

    /// Whether a probe's coded packets go beside the data ([`Self::on_send_spare`]): a restore
    /// probe's, and a growth probe's ([`GROWTH_GAIN`]) during the link's startup (`startup`) on a
    /// link the peer measured draining
    /// faster than its estimate within the last [`PROBE_PERIOD`] (its queue
    /// [`QUEUE_CORRECTION_MIN`] short of the model's, [`Self::check_queue`]), or that follows one
    /// that went beside the data (`was_beside`). Inside the modelled queue, a growth probe
    /// only speeds the model's drain, and the earliest-arrival rule then gives the link more data
    /// only if the passengers send more than the other links' estimates take. A passenger that
    /// paces at what the tunnel delivers (BBR) does not: on bench-bond's 20 + 20 Mbit/s, an uplink
    /// left at the 1 Mbit/s assumed for an unknown link while the other was measured first grew by
    /// the passenger's own probes, 10 % a step (the peer's raise rule), and took 4.5 s to reach 20
    /// (a download at 31.5 Mbit/s). Beside the data, the link carries twice its estimate whatever
    /// the passengers send, and the peer's delivery rate doubles the estimate about every 100 ms.
    /// A link that is full stops such a probe at the first queue beyond the model's
    /// ([`Self::check_queue`]), a report (20 ms) and a round trip after it built; a link whose
    /// estimate is right shows no queue short of the model's, and its growth probes stay inside
    /// the model, where a doubling beside the data overfilled a full link's queue (Table II's
    /// 10 Mbit/s paths: 2.3 s of queue, the ARQ re-sending everything).
    ///
    /// Only in startup: later, a link the peer measures draining faster than the model is as
    /// often one the model overfilled (a failover's burst onto the remaining uplink), and doubling
    /// beside its data there overflowed its buffer (blackout.toml, seeds 1-40: the longest stall's
    /// median 224 -> 284 ms, p90 282 -> 405 ms).
    fn probes_beside(&self, now: Instant, restore: bool, gain: f64, was_beside: bool) -> bool {
        let faster = self.drains_faster_at.is_some_and(|t| now.saturating_duration_since(t) <= PROBE_PERIOD);
        restore || (self.startup && gain >= GROWTH_GAIN && (was_beside || faster))
    }

    /// When a beside probe's next coded packet may go beside the data; `None` unless a restore
    /// or growth probe runs ([`Self::probes_beside`]), and while the peer's newest measurement
    /// shows a queue of [`PROBE_MAX_QUEUE`] or more on the link.
    ///
    /// Such packets go whatever the model says, so the model's queue is no bound on them, and
    /// the end at the first queue beyond the model's ([`Self::check_queue`]) misses a model far
    /// too deep: a link still at the 1 Mbit/s assumed for an unknown one, fed a passenger's
    /// burst, was modelled 0.7-1.9 s deep while the peer measured 13-43 ms, and on bench-bond's
    /// 20 + 20 Mbit/s its growth probe went on for another 100 ms at twice the rising estimate,
    /// overflowed the uplinks' 50 ms buffers and cost the passenger's first second a third of its
    /// rate. Paused, not ended: the estimate still grows by the data's delivery rate, and the
    /// probe goes on once the queue has drained.
    pub fn beside_probe_at(&self) -> Option<Instant> {
        (matches!(self.probe, ProbePhase::Probing { beside: true, .. }) && !self.echo_shows_queue())
            .then_some(self.beside_next)
    }

    /// Whether the peer's newest measurement shows a queue of [`PROBE_MAX_QUEUE`] or more on the
    /// link: what holds a probe back, ends startup and pauses a probe beside the data.
    fn echo_shows_queue(&self) -> bool {
        self.echoed_queue_us as f64 >= PROBE_MAX_QUEUE.as_micros() as f64
    }

    /// Whether a restore probe's coded packet may go at `now` whatever the modelled queue.
    pub fn beside_probe_due(&self, now: Instant) -> bool {
        self.beside_probe_at().is_some_and(|t| now >= t)
    }

    /// The configured capacity bootstrap, bit/s.
    pub fn bootstrap_bps(&self) -> f64 {
        self.bootstrap_bps
    }

    /// Estimated time for the bottleneck to drain braid's own packets, at `now` (PluriBus 5.2).
    pub fn queue_delay(&self, now: Instant) -> Duration {
        Duration::from_micros(self.queue_left_us(now) as u64)
    }

    /// What is left of the queue at `now`, µs, fractional: above a few Gbit/s one packet takes
    /// less than a microsecond, and rounding it away made a link look idle after every send.
    fn queue_left_us(&self, now: Instant) -> f64 {
        let elapsed = (now - self.queue_at).as_micros() as f64;
        (self.queue_us - elapsed).max(0.0)
    }

    /// Whether braid's own packets have drained from the bottleneck at `now`: the link has room
    /// for an opportunistic coded packet (PluriBus 4.1). Never true right after a send, whatever
    /// the capacity, so opportunistic sending at one instant always ends.
    pub fn queue_is_empty(&self, now: Instant) -> bool {
        self.queue_left_us(now) <= 0.0
    }

    /// Until when the peer's latest measurement keeps opportunistic coded packets off this link
    /// (a queue of [`CODING_MAX_QUEUE`] or more, measured within [`CODING_ECHO_FRESH`]); `None`
    /// while coding may go.
    pub fn coding_closed_until(&self) -> Option<Instant> {
        let at = self.echoed_at?;
        (self.echoed_queue_us >= CODING_MAX_QUEUE.as_micros() as i64).then_some(at + CODING_ECHO_FRESH)
    }

    /// When this link closes to coded packets, capacity probes included, because what was sent
    /// on it has gone unconfirmed too long: a round trip, the peer's `report_interval` and
    /// [`CODING_MAX_QUEUE`] after the oldest unconfirmed send. `None` while nothing is
    /// unconfirmed. It opens again when a report confirms a later send.
    ///
    /// The peer's measurement ([`Self::coding_closed_until`]) only comes with datagrams that got
    /// through, so it says nothing while a link's rate collapses: on the bus route's LTE trace the
    /// rate fell to nothing for seconds, the last echo went stale, and coded packets went on at
    /// the old estimate until the modem's 400 kB buffer held seconds of them, passengers'
    /// packets dropped behind (one lap of bus-route-flows.toml: 144 MB coded against 20 MB of
    /// data, 22 MB dropped at the buffer). The silence is the measurement: LEDBAT's reasoning
    /// (RFC 6817) for scavenger traffic, from the sender's side, as a congestion window bounds
    /// what a TCP sender puts into a path whose acknowledgements stop.
    pub fn coding_stalls_at(&self, report_interval: Duration) -> Option<Instant> {
        let since = self.first_unconfirmed?;
        let rtt = self.min_echo_rtt().or(self.min_path_rtt()).or(self.srtt).unwrap_or(CODING_ECHO_FRESH);
        Some(since + rtt + report_interval + CODING_MAX_QUEUE)
    }

    /// Whether opportunistic coded packets may go on this link at `now`: by the peer's measured
    /// queue ([`Self::coding_closed_until`]) and by how long sends have gone unconfirmed
    /// ([`Self::coding_stalls_at`]); the model's queue must be empty as well
    /// ([`Self::queue_is_empty`]).
    pub fn coding_open(&self, now: Instant, report_interval: Duration) -> bool {
        self.coding_closed_until().is_none_or(|t| now >= t)
            && !self.coding_stalled(now, report_interval)
            && now >= self.coding_next
    }

    /// The share of the capacity estimate that opportunistic coded packets are paced at, at
    /// `now`: 1 until the peer's echoes show a queue [`CODING_MAX_QUEUE`] or more beyond what the
    /// model predicted outside a capacity probe; such a miss sets it to [`CODING_GAIN_MIN`], and
    /// it grows back by [`CODING_GAIN_RECOVERY`] a second.
    ///
    /// Coded packets fill what the model calls spare at the capacity estimate, and on a link whose
    /// rate collapses within a round trip (a vehicle's LTE modem, whose measured rate went from 13
    /// to 0.2 Mbit/s within two seconds) everything sent at the old estimate before the peer's
    /// echo comes back waits in the modem's buffer, seconds of it, the passengers' packets behind.
    /// The gates on the measured queue and on silence act only after that. A link that has
    /// misled the model this way is filled gently for a while, as LEDBAT (RFC 6817) backs a
    /// scavenger off multiplicatively; a steady link's model is never that far off (errors of a
    /// few milliseconds), and its coding is untouched. Capacity probes are not paced by it: they
    /// are how the estimate follows the rate back up.
    pub fn coding_gain(&self, now: Instant) -> f64 {
        match self.coding_cut {
            None => 1.0,
            Some((gain, at)) => {
                (gain + now.saturating_duration_since(at).as_secs_f64() * CODING_GAIN_RECOVERY).min(1.0)
            }
        }
    }

    /// When the pacing at [`Self::coding_gain`] lets the next opportunistic coded packet go.
    pub fn coding_paced_until(&self) -> Instant {
        self.coding_next
    }

    /// Whether sends have gone unconfirmed past [`Self::coding_stalls_at`] by `now`.
    pub fn coding_stalled(&self, now: Instant, report_interval: Duration) -> bool {
        self.coding_stalls_at(report_interval).is_some_and(|t| now >= t)
    }

    /// Notes at `now` whether the link is [`Self::coding_stalled`], for timers, which have no
    /// clock: a due timer whose link turned out stalled would otherwise fire again at once.
    pub fn note_coding_stall(&mut self, now: Instant, report_interval: Duration) {
        self.coding_stall_noted = self.coding_stalled(now, report_interval);
    }

    /// Whether [`Self::note_coding_stall`] found the link stalled, and no report has confirmed a
    /// send since.
    pub fn coding_stall_noted(&self) -> bool {
        self.coding_stall_noted
    }

    /// When the estimated queue will be (or was) empty: rounded up, so that while
    /// [`Self::queue_is_empty`] is false this is later than `now` (a timer that is due but finds
    /// nothing to do would spin the driver).
    pub fn queue_drained_at(&self) -> Instant {
        self.queue_at + Duration::from_micros(self.queue_us.max(0.0).ceil() as u64)
    }

    /// When a packet of `size` bytes sent on this link would take the modelled queue no further
    /// than [`BRIM_SHARE`] of the deepest queue the peer has measured on it ([`Self::peak_queue`],
    /// a lower bound on its buffer), or than `floor` if that is deeper; `None` when it fits now.
    /// What goes beyond may find the buffer full: a repair sent there is lost again, and the
    /// receiver waits another report's round trip for it.
    pub fn brim_room_at(&self, now: Instant, size: usize, floor: Duration) -> Option<Instant> {
        self.room_at(now, size, self.peak_queue().mul_f64(BRIM_SHARE).max(floor))
    }

    /// When a packet of `size` bytes sent on this link would take the modelled queue no further
    /// than the deepest queue the peer has measured on it ([`Self::peak_queue`], its buffer as
    /// far as braid knows), or than `floor` if that is deeper; `None` when it fits now.
    pub fn buffer_room_at(&self, now: Instant, size: usize, floor: Duration) -> Option<Instant> {
        self.room_at(now, size, self.peak_queue().max(floor))
    }

    /// When a packet of `size` bytes sent on this link would take the modelled queue no further
    /// than `brim`; `None` when it fits now.
    pub fn room_at(&self, now: Instant, size: usize, brim: Duration) -> Option<Instant> {
        let brim = brim.as_micros() as f64;
        let over = self.queue_left_us(now) + tx_time_us(size, self.capacity_bps()) - brim;
        (over > 0.0).then(|| now + Duration::from_micros(over.ceil() as u64))
    }

    /// Serialisation time of `size` bytes at the current capacity.
    pub fn tx_time(&self, size: usize) -> Duration {
        Duration::from_micros(tx_time_us(size, self.capacity_bps()) as u64)
    }

    /// Estimated one-way time for a `size`-byte packet sent now, relative to `reference_owd` (the
    /// owd of some link, to cancel the unknown clock offset): `size/capacity + Q + (d + δ)`
    /// (PluriBus 5.3). µs, may be negative.
    pub fn arrival_us(&self, now: Instant, size: usize, reference_owd: u32) -> i64 {
        self.busy_us(now, size) + self.relative_owd_us(reference_owd)
    }

    /// The part of [`Self::arrival_us`] the link's load makes: `size/capacity + Q`, µs.
    pub fn busy_us(&self, now: Instant, size: usize) -> i64 {
        (self.queue_delay(now) + self.tx_time(size)).as_micros() as i64
    }

    /// The link's empty-queue one-way delay `d + δ` relative to `reference_owd` (another link's,
    /// to cancel the unknown clock offset), µs; 0 while the peer has reported none.
    pub fn relative_owd_us(&self, reference_owd: u32) -> i64 {
        self.owd_us.map_or(0, |o| i64::from(o.wrapping_sub(reference_owd) as i32))
    }

    /// Records a send: `Q <- max(0, Q - elapsed) + size / capacity` (PluriBus 5.2, as meant) and
    /// returns the per-link sequence number to use. Data is modelled at the estimate even while a
    /// capacity probe runs: only the probe's coded packets go at its gain
    /// ([`Self::on_send_spare`]). Modelled at the gain, as BBR paces all of its data, the
    /// earliest-arrival rule moves the passengers' packets onto the probed link, and a link that
    /// is full at its estimate queues them for as long as the peer's next echo takes (up to a
    /// report interval): on bench-bond, with probes so modelled, the steady cases' worst runs
    /// lost 0.5-3 Mbit/s against this, side by side. So a link the rule keeps as full in the
    /// model as the others, fed its estimate by a passenger that paces at the sum of the
    /// estimates (BBR), has no empty modelled queue for the probe's packets, and a low estimate
    /// of it is raised only by what the passenger's own probing adds (docs/bonding.md, "An
    /// uplink's estimate stuck low").
    pub fn on_send(&mut self, now: Instant, size: usize) -> u64 {
        self.on_send_at(now, size, self.capacity_bps(), true)
    }

    /// Records a datagram that only answers the peer (a report or a probe reply in a quiet
    /// session): it takes room in the queue model like any other, but waits for no confirmation,
    /// so it starts no liveness probing.
    pub fn on_send_answer(&mut self, now: Instant, size: usize) -> u64 {
        self.on_send_at(now, size, self.capacity_bps(), false)
    }

    /// Records a coded packet sent into spare capacity: while a capacity probe runs, it takes
    /// `size / (gain x capacity)` of the modelled queue, so the link has room again that much
    /// sooner and the coders fill it at gain times the estimate (BBR's pacing gain). Where the
    /// link is no faster the model is short by what the probe overfilled; the peer's echoes show
    /// that queue ([`Self::check_queue`]), which ends the probe and corrects the model.
    ///
    /// A restore probe's packet sent while the modelled queue is busy ([`Self::restoring`]) goes
    /// beside the data: it takes no room in the model, so the data the earliest-arrival rule
    /// gives the link stays where it was, and such packets are paced at `(gain - 1) x capacity`,
    /// so that with the data the link carries `gain` times its estimate, as BBR's probing pacing
    /// gain does (draft-cardwell-iccrg-bbr-congestion-control 4.3.3.3).
    pub fn on_send_spare(&mut self, now: Instant, size: usize) -> u64 {
        let rate = match self.probe {
            ProbePhase::Probing { gain, beside: true, .. } if !self.queue_is_empty(now) => {
                let extra = self.capacity_bps() * (gain - 1.0);
                self.beside_next = now + Duration::from_micros(tx_time_us(size, extra).ceil() as u64);
                f64::INFINITY
            }
            ProbePhase::Probing { gain, .. } => self.capacity_bps() * gain,
            _ => {
                let paced = tx_time_us(size, self.capacity_bps() * self.coding_gain(now));
                self.coding_next = now + Duration::from_micros(paced.ceil() as u64);
                self.capacity_bps()
            }
        };
        self.on_send_at(now, size, rate, true)
    }

    fn on_send_at(&mut self, now: Instant, size: usize, rate_bps: f64, confirmable: bool) -> u64 {
        self.queue_us = self.queue_left_us(now) + tx_time_us(size, rate_bps);
        self.queue_at = now;
        if self.sends.len() == SEND_LOG {
            self.sends.pop_front();
        }
        self.sends.push_back(Sent {
            wire_ts: now.wire_timestamp(),
            at: now,
            queue_us: self.queue_us,
            seq: self.next_seq,
        });
        self.last_send = Some(now);
        if confirmable && self.first_unconfirmed.is_none() {
            self.first_unconfirmed = Some(now);
        }
        let s = self.next_seq;
        self.next_seq += 1;
        s
    }

    /// Checks the queue model against what the peer measured: the datagram we sent at `echo_ts`
    /// (our wire clock) spent `measured_us` above the link's empty-queue delay (its own
    /// transmission included). When that is more than [`QUEUE_CORRECTION_MIN`] above the queue
    /// the model predicted for it, the model is behind the real bottleneck (a capacity estimate
    /// too high, or traffic braid does not see), and the difference is added to the running
    /// queue. Returns whether it corrected.
    ///
    /// PluriBus 5.2 keeps the queue open loop, from the capacity estimate alone. Opportunistic
    /// coding fills every moment the model calls idle, so an estimate even a few per cent high
    /// builds a real queue that grows until the modem's buffer overflows: on the testbed, where
    /// receive timestamps clump, a 10 Mbit/s path's estimate swung between 9.1 and 13.3 Mbit/s
    /// and braid lost 1-9 % of its packets to that path's buffer. Coded packets are scavenger
    /// traffic, and LEDBAT (RFC 6817) is the answer for that: watch the one-way delay. Each
    /// send is corrected at most once: echoes of datagrams sent before the last correction
    /// carry the error already added.
    ///
    /// A queue more than [`QUEUE_CORRECTION_MIN`] *shorter* than the model's is corrected too:
    /// the link drains faster than its estimate (a modem's rate restored, cross traffic gone).
    /// Left alone, the model kept such a link looking as full as the others under a bulk flow,
    /// the earliest-arrival rule kept feeding it at the old estimate, no capacity probe could
    /// start (the link looked full) and the peer, which only ever saw packets at the old rate,
    /// had nothing faster to measure: bench-bond's 2 Mbit/s uplink restored to 20 took 1.2-3.5 s
    /// to be used again. With the queue the peer measured, the link takes data sooner, delivers
    /// it faster than the estimate, and the peer's delivery rate raises the estimate at once.
    pub fn check_queue(&mut self, now: Instant, echo_ts: u32, measured_us: i64) -> bool {
        let Some(sent) = self.sends.iter().rev().find(|s| s.wire_ts == echo_ts).copied() else { return false };
        self.confirmed_seq = self.confirmed_seq.max(sent.seq + 1);
        self.echoed_queue_us = measured_us;
        self.echoed_behind_us = measured_us as f64 - sent.queue_us;
        self.peak_queue_us = self.peak_queue_us.max(measured_us);
        // A queue on a link the peer has measured: its pipe has been full, and the peer measures
        // its capacity from how fast the queue drains (PluriBus 5.2's dispersion), so startup is
        // over. A passenger's slow start fills every uplink at once; startup probes beside the
        // data are for the uplink it left empty. Before the peer's first estimate the queue
        // says nothing of the pipe: a passenger's opening burst, split by the guess of 1 Mbit/s
        // a link, queues 6-14 ms at a 20 Mbit/s tbf's line rate. Ended by it, an uplink whose
        // twin was measured first got a tenth of the data by the earliest-arrival rule, its
        // estimate rose 10 % a report, and it took 0.5 s to start again (bench-bond 20 + 20, BBR,
        // a download at 35.3 Mbit/s). A slow link's real queue pauses its beside probe
        // ([`Self::beside_probe_at`]) and ends its startup at its first estimate.
        if self.echo_shows_queue() {
            self.startup &= self.capacity_bps <= 0.0;
            self.faster_streak = 0;
        }
        self.echoed_at = Some(now);
        // A probe beside the data stops at the first queue its packets beside the model built: the link
        // has no more room, and the data behind them waits (BBR ends its up phase when the
        // queue grows, draft-cardwell-iccrg-bbr-congestion-control 4.3.3.3).
        if let ProbePhase::Probing { beside: true, .. } = self.probe
            && measured_us as f64 - sent.queue_us > PROBE_MAX_QUEUE.as_micros() as f64
        {
            tracing::debug!(link = %self.id, "probe beside the data ended by queue");
            self.end_probe_at_full_pipe(now);
        }
        if self.corrected_at.is_some_and(|c| sent.at <= c) {
            return false;
        }
        let error = measured_us.max(0) as f64 - sent.queue_us;
        if error.abs() <= QUEUE_CORRECTION_MIN.as_micros() as f64 {
            return false;
        }
        // Traced: a correction upwards on some links and not others sends everything the earliest
        // arrival rule places to the others, the likeliest cause of bench-bond's runs in which
        // one uplink carried twice its rate (a busy host's late receive stamps measure as queue).
        tracing::debug!(link = %self.id, error_ms = error / 1e3, measured_ms = measured_us as f64 / 1e3, "queue model corrected");
        self.queue_us = (self.queue_left_us(now) + error).max(0.0);
        self.queue_at = now;
        self.corrected_at = self.last_send.or(Some(now));
        if error > 0.0 {
            self.overfilled_at = Some(now);
        }
        if error < 0.0 {
            self.drains_faster_at = Some(now);
            if !self.echo_shows_queue() {
                self.faster_streak += 1;
                self.startup_again(now);
            }
            return true;
        }
        self.faster_streak = 0;
        // Caught a cellular round trip or more behind, outside a probe (whose overshoot is
        // its purpose): the estimate cannot be trusted to fill with coded packets.
        if error >= CODING_MAX_QUEUE.as_micros() as f64 && matches!(self.probe, ProbePhase::Idle { .. }) {
            self.coding_cut = Some((CODING_GAIN_MIN, now));
        }
        // A queue beyond the model's while probing: the link has no more to give. Stop at once,
        // before the modem's buffer overflows (BBR leaves startup when the pipe is full).
        if let ProbePhase::Probing { .. } | ProbePhase::Settling { .. } = self.probe {
            tracing::debug!(link = %self.id, error_ms = error / 1e3, "probe ended by queue");
            self.end_probe_at_full_pipe(now);
        }
        true
    }

    /// Takes a link whose capacity nobody configured back into its startup once
    /// [`STARTUP_AGAIN`] corrections in a row found it draining faster than the model, its queue
    /// at the floor ([`PROBE_MAX_QUEUE`]) each time: the queue that ended its startup was not its
    /// pipe's. On a loaded host a daemon's late receive stamps measure as queue: on bench-bond's
    /// 20 + 20 Mbit/s (load 3-5) the peer measured 22 ms on both uplinks in the passenger's first
    /// burst, before any estimate, and one uplink, left at 1-2.7 Mbit/s, then showed its queue
    /// 12 ms short of the model's every 100 ms for seconds while the ordinary probes found
    /// nothing (a download at 21.4 Mbit/s). A link whose pipe is full shows its queue, not
    /// this; one that the model overfilled (a failover's burst) shows a full buffer.
    fn startup_again(&mut self, now: Instant) {
        if self.startup || self.bootstrap_bps > 0.0 || self.faster_streak < STARTUP_AGAIN {
            return;
        }
        tracing::debug!(link = %self.id, estimate_kbps = self.capacity_bps() / 1e3, "startup again");
        self.startup = true;
        self.growing = true;
        self.faster_streak = 0;
        if let ProbePhase::Idle { .. } = self.probe {
            self.probe = ProbePhase::Idle { next: now };
        }
    }

    /// A probe met a queue beyond the model's: the pipe is full, so startup and growth are over,
    /// and the next probe waits [`PROBE_PERIOD`].
    fn end_probe_at_full_pipe(&mut self, now: Instant) {
        self.startup = false;
        self.growing = false;
        self.restore_grew = false;
        self.probe = ProbePhase::Idle { next: now + PROBE_PERIOD };
    }

    /// Applies the peer's report of this link at `now`: capacity (kbit/s, 0 = none), loss, d + δ.
    pub fn on_report(&mut self, now: Instant, capacity_kbps: u32, loss: f64, owd_us: Option<u32>) {
        if capacity_kbps > 0 {
            let (old, new) = (self.capacity_bps(), f64::from(capacity_kbps) * 1000.0);
            if new > old {
                // What waits in the queue drains at the higher rate: without this, a link whose
                // estimate just doubled still looked as full as at the old rate.
                self.queue_us = self.queue_left_us(now) * old / new;
                self.queue_at = now;
            } else if new < old / 2.0 && self.last_reported > 0.0 {
                self.overfilled_at = Some(now);
            }
            self.capacity_bps = new;
            // A single report overshooting (a busy host's receive batching made a 5 Mbit/s
            // uplink's estimate 16 for a moment) is not what the link carried.
            track_max(&mut self.peak, PEAK_BUCKET, now, new.min(self.last_reported));
            self.last_reported = new;
            self.on_capacity_report(now, new);
        }
        self.loss = loss.clamp(0.0, 1.0);
        if owd_us.is_some() {
            self.owd_us = owd_us;
        }
    }

    /// The peer's report echoes the send at `echo_ts` (our wire clock): its loss estimate has
    /// judged everything we sent on the link up to it. [`Self::check_queue`] counts its echo
    /// itself, from the same lookup; this is for a report with no queue to check.
    pub fn on_echo(&mut self, echo_ts: u32) {
        if let Some(sent) = self.sends.iter().rev().find(|s| s.wire_ts == echo_ts) {
            self.confirmed_seq = self.confirmed_seq.max(sent.seq + 1);
        }
    }

    /// Packets the peer's loss estimate has judged, received or found missing: up to the newest
    /// send it echoed.
    pub fn judged(&self) -> u64 {
        self.confirmed_seq
    }

    /// When the link was last found carrying less than we sent into it (its capacity estimate
    /// cut to less than half, or its queue model corrected upward): what it lost until then
    /// overflowed from our own sending.
    pub fn overfilled_at(&self) -> Option<Instant> {
        self.overfilled_at
    }

    /// The peer confirms it received what we sent on this link at `sent_at` (our clock).
    pub fn on_confirmed(&mut self, sent_at: Instant) {
        if self.last_confirmed_send.is_none_or(|c| sent_at > c) {
            self.last_confirmed_send = Some(sent_at);
        }
        if let Some(first) = self.first_unconfirmed
            && sent_at >= first
        {
            // Sends after `sent_at` are still unconfirmed; the newest send time stands for them.
            self.first_unconfirmed = match self.last_send {
                Some(last) if last > sent_at => Some(last),
                _ => None,
            };
            self.unanswered_probes = 0;
            self.coding_stall_noted = false;
        }
    }

    /// How many sends on this link must have reached the peer by now and did not, by the peer's
    /// report: the newest datagram it received on the link is the one we sent at `echo_ts` (our
    /// wire clock), and it has received nothing on the link for `silent_us` since (its clock, a
    /// duration, so no offset). A send `t` after that one, behind a queue `q(t)`, arrives
    /// `t - t_echo + q(t) - q(t_echo)` after it on the peer's clock; if that is more than
    /// [`OVERDUE_MARGIN`] before the report left, it is overdue. Loss alone leaves gaps, not
    /// runs: the newest arrival moves on with every datagram that gets through, so this counts
    /// only what was lost since the last one that did. 0 when the echoed send is no longer
    /// remembered.
    ///
    /// This is what the sender learns of a link that went silent the moment a report comes over
    /// another link, instead of waiting out its own liveness timeout (docs/drive-by.md).
    pub fn overdue_sends(&self, echo_ts: u32, silent_us: u32) -> u32 {
        let Some(pos) = self.sends.iter().rposition(|s| s.wire_ts == echo_ts) else { return 0 };
        let echoed = self.sends[pos];
        let window = f64::from(silent_us) - OVERDUE_MARGIN.as_micros() as f64;
        let mut n = 0;
        for s in self.sends.iter().skip(pos + 1) {
            let after = s.at.saturating_duration_since(echoed.at).as_micros() as f64;
            if after + (s.queue_us - echoed.queue_us).max(0.0) >= window {
                break;
            }
            n += 1;
        }
        n
    }

    /// How many of our sends in a row the peer must have missed to prove the link dead: as many as
    /// make a run of that length as unlikely at the link's reported loss as [`OVERDUE_DOWN`] are at
    /// 30 %, and never fewer. At FMTCP Table II case 4's 50 %, eight in a row come once in 256
    /// tries, and a link drained for its loss sends only a few packets a second: through real
    /// daemons the server took that path down 3 s into the download, and at 75 % loss of its
    /// probes' round trips it was not admitted again for the rest of the minute (9.2 Mbit/s, the
    /// clean path's alone, instead of 12.2). Here that takes 14.
    pub fn overdue_to_prove_silence(&self) -> u32 {
        let p = self.loss.clamp(OVERDUE_DOWN_AT_LOSS, OVERDUE_MAX_LOSS);
        let n = f64::from(OVERDUE_DOWN) * OVERDUE_DOWN_AT_LOSS.ln() / p.ln();
        // Rounded up, less a hair so that 30 % itself gives exactly OVERDUE_DOWN.
        ((n - 1e-9).ceil() as u32).max(OVERDUE_DOWN)
    }

    /// Whether the peer's report that left at `report_ts` (its wire clock), echoing our send at
    /// `echo_ts` as the newest it received on this link, with `overdue` of our later sends
    /// missing by then ([`Self::overdue_sends`]), proves the link dead: at least
    /// [`Self::overdue_to_prove_silence`] missing, in this report and in one that left at least
    /// [`SILENCE_CONFIRM`] earlier and echoed the same send. A report whose echo has moved on says
    /// the link delivered since, and ends the suspicion.
    pub fn confirm_silence(&mut self, report_ts: u32, echo_ts: u32, overdue: u32) -> bool {
        if self.silence.is_some_and(|(_, echo)| echo != echo_ts) {
            self.silence = None;
        }
        if overdue < self.overdue_to_prove_silence() {
            return false;
        }
        match self.silence {
            // Signed: a report overtaken by a later one (over a faster link) is no confirmation.
            Some((first, _)) => i64::from(report_ts.wrapping_sub(first) as i32) >= SILENCE_CONFIRM.as_micros() as i64,
            None => {
                self.silence = Some((report_ts, echo_ts));
                false
            }
        }
    }

    /// Records a liveness probe sent while sends are unconfirmed.
    pub fn on_liveness_probe(&mut self) {
        if self.first_unconfirmed.is_some() {
            self.unanswered_probes = self.unanswered_probes.saturating_add(1);
        }
    }

    /// Probes sent since the oldest unconfirmed send, none of them answered yet.
    pub fn unanswered_probes(&self) -> u32 {
        self.unanswered_probes
    }

    /// The queue the newest datagram the peer echoed met, as the peer measured it (not the
    /// model's figure, which a capacity estimate from a trickle of traffic can make far too long).
    pub fn echoed_queue(&self) -> Duration {
        Duration::from_micros(self.echoed_queue_us.max(0) as u64)
    }

    /// Whether the newest datagram the peer echoed met a queue [`CODING_MAX_QUEUE`] (a cellular
    /// round trip) or more beyond the model's figure for it: the model has this link's packets
    /// leaving far sooner than they do (a rate that collapsed under a full buffer), and a packet
    /// not yet heard of is as likely queued as lost.
    pub fn model_behind(&self) -> bool {
        self.echoed_behind_us >= CODING_MAX_QUEUE.as_micros() as f64
    }

    /// The longest queue the peer has measured on this link: a lower bound on its bottleneck
    /// buffer's depth in time (a flow's slow start fills it to the brim within seconds).
    pub fn peak_queue(&self) -> Duration {
        Duration::from_micros(self.peak_queue_us.max(0) as u64)
    }

    /// Our send time of the newest datagram the peer confirmed on this link.
    pub fn last_confirmed_send(&self) -> Option<Instant> {
        self.last_confirmed_send
    }

    /// Since when sends on this link have gone unconfirmed, if they have.
    pub fn unconfirmed_since(&self) -> Option<Instant> {
        self.first_unconfirmed
    }

    /// Forgets pending confirmations (after a state change).
    pub fn reset_confirmation(&mut self) {
        self.first_unconfirmed = None;
        self.unanswered_probes = 0;
        self.coding_stall_noted = false;
    }

    /// Last time anything was sent on the link.
    pub fn last_send(&self) -> Option<Instant> {
        self.last_send
    }

    /// Peer-reported loss probability.
    pub fn loss(&self) -> f64 {
        self.loss
    }

    /// Peer-reported d + δ (µs, wrapping), if any.
    pub fn owd_us(&self) -> Option<u32> {
        self.owd_us
    }

    /// Smallest probe RTT of the last [`MIN_RTT_WINDOW`].
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt.map(|(rtt, _)| rtt)
    }

    /// Takes a probe RTT sample at `now` into the windowed minimum.
    pub fn on_min_rtt_sample(&mut self, now: Instant, rtt: Duration) {
        take_windowed_min(&mut self.min_rtt, now, rtt);
    }

    /// Smallest probe RTT of the last [`MIN_RTT_WINDOW`] less the queue the queue model had
    /// predicted for each probe: the path's round trip even when every probe met a queue (a
    /// server's links are never idle long enough for a keepalive, so under load all its samples
    /// are queued: 1 ms veths measured 235 ms).
    pub fn min_path_rtt(&self) -> Option<Duration> {
        self.min_path_rtt.map(|(rtt, _)| rtt)
    }

    /// Takes a probe RTT sample for the probe sent at `echo_ts` (our wire clock) into
    /// [`Self::min_path_rtt`]. A probe whose predicted queue is more than
    /// [`PATH_RTT_MAX_QUEUE_SHARE`] of its round trip is left out: the model overestimates a
    /// queue that the modem's buffer has partly dropped, and what the subtraction leaves can be
    /// short by all of the predicted queue. Taken at up to half the round trip, such samples
    /// brought FMTCP Table II case 8's 200 ms path to 22 ms and then 0 on the sending server
    /// within 20 s, and the 60 ms path of `scenarios/testbed-two-modems.toml` to 33 ms for ten
    /// seconds at a time; `auto` then judged the paths short: CoDel went off, a burst of the
    /// passenger's window overflowed the fast modem's buffer, and 15 % of what braid sent there
    /// was dropped (seed 2; the default carried 19.5 Mbit/s over 3 runs, 22.7 with the bound).
    pub fn on_path_rtt_sample(&mut self, now: Instant, echo_ts: u32, rtt: Duration) {
        let queued = self.sends.iter().rev().find(|s| s.wire_ts == echo_ts).map_or(0.0, |s| s.queue_us);
        let queued = Duration::from_micros(queued as u64);
        if queued > rtt.mul_f64(PATH_RTT_MAX_QUEUE_SHARE) {
            return;
        }
        take_windowed_min(&mut self.min_path_rtt, now, rtt.saturating_sub(queued));
    }

    /// Smallest round trip of the last [`MIN_RTT_WINDOW`] from a send on this link to a report
    /// that echoed it, less the time the report waited at the peer: the path's round trip by the
    /// reports, which come every report interval while the link carries anything. Probe round
    /// trips ([`Self::min_path_rtt`]) are few on a busy link, and on the bus route's LTE trace
    /// every one in 10 s met a queue the model did not know of (700 ms against a path's 80).
    pub fn min_echo_rtt(&self) -> Option<Duration> {
        self.min_echo_rtt.map(|(rtt, _)| rtt)
    }

    /// The path's round trip as best known: the smaller of [`Self::min_path_rtt`] and
    /// [`Self::min_echo_rtt`]. Each is a round trip seen (the probe's less the queue the model
    /// predicted for it), and queues only lengthen one, so the smaller is the nearer the path's.
    /// Probes alone go stale on a busy link, which sends none: a drive-by pass's link kept the
    /// 80 ms its probes measured at 1 Mbit/s in the fringe through the production phase's
    /// 29 Mbit/s on a 20 ms path.
    pub fn path_rtt(&self) -> Option<Duration> {
        match (self.min_path_rtt(), self.min_echo_rtt()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Takes a report's round trip for the send it echoed into [`Self::min_echo_rtt`].
    pub fn on_echo_rtt_sample(&mut self, now: Instant, rtt: Duration) {
        take_windowed_min(&mut self.min_echo_rtt, now, rtt);
    }

    /// Takes a probe RTT sample into the smoothed RTT (RFC 6298 gain 1/8).
    pub fn on_rtt_sample(&mut self, rtt: Duration) {
        // Whole microseconds, like every time in the engine, so timers derived from it fire exactly.
        let us = match self.srtt {
            None => rtt.as_micros(),
            Some(s) => (s.as_micros() * 7 + rtt.as_micros()) / 8,
        };
        self.srtt = Some(Duration::from_micros(us as u64));
    }

    /// Moves to `state` at `now`.
    pub fn set_state(&mut self, state: LinkState, now: Instant) {
        if self.state != state {
            self.state = state;
            self.since = now;
            self.probe_streak = 0;
            self.silence = None;
            self.reset_confirmation();
        }
    }
}

/// Takes `sample`, seen at `now`, into a windowed minimum (value, when taken): a smaller sample
/// replaces it, and so does any sample once the minimum is older than [`MIN_RTT_WINDOW`], so a
/// path that got longer is followed.
fn take_windowed_min(min: &mut Option<(Duration, Instant)>, now: Instant, sample: Duration) {
    crate::time::take_windowed(min, now, sample, MIN_RTT_WINDOW, |s, m| s <= m);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The peer's report interval (the session's default).
    const REPORT: Duration = Duration::from_millis(100);

    fn link() -> TxLink {
        TxLink::new(LinkId(0), None, 1e6, LinkState::Active, Instant::ZERO)
    }

    #[test]
    fn queue_grows_by_transmission_time_and_drains_with_time() {
        let mut l = link();
        let t0 = Instant::from_millis(10);
        l.on_send(t0, 1250); // 10 ms at 1 Mbit/s
        l.on_send(t0, 1250);
        assert_eq!(l.queue_delay(t0), Duration::from_millis(20));
        assert_eq!(l.queue_delay(t0 + Duration::from_millis(5)), Duration::from_millis(15));
        assert_eq!(l.queue_delay(t0 + Duration::from_millis(50)), Duration::ZERO);
        // After draining, a new send starts from an empty queue, not a negative one.
        l.on_send(t0 + Duration::from_millis(50), 1250);
        assert_eq!(l.queue_delay(t0 + Duration::from_millis(50)), Duration::from_millis(10));
    }

    #[test]
    fn a_probe_behind_a_modelled_queue_does_not_shorten_the_path_round_trip() {
        // Regression (two modems, 60 and 120 ms round trips): a burst the modem's buffer had
        // partly dropped left the model 27 ms of queue the probe never met, and the probe's
        // 60 ms less that read as a 33 ms path.
        let mut l = link(); // 1 Mbit/s: 1250 bytes take 10 ms
        let t0 = Instant::from_millis(10);
        for _ in 0..3 {
            l.on_send(t0, 1250);
        }
        l.on_path_rtt_sample(t0 + Duration::from_millis(60), t0.wire_timestamp(), Duration::from_millis(60));
        assert_eq!(l.min_path_rtt(), None, "30 ms of predicted queue in a 60 ms round trip");
        // A probe that met little predicted queue is taken, less that queue.
        let t1 = t0 + Duration::from_secs(1);
        l.on_send(t1, 500); // 4 ms
        l.on_path_rtt_sample(t1 + Duration::from_millis(64), t1.wire_timestamp(), Duration::from_millis(64));
        assert_eq!(l.min_path_rtt(), Some(Duration::from_millis(60)));
    }

    #[test]
    fn echoes_of_a_deeper_queue_correct_the_model_once() {
        let mut l = link(); // 1 Mbit/s: 1250 bytes take 10 ms
        let t0 = Instant::from_millis(10);
        for _ in 0..10 {
            l.on_send(t0, 1250);
        }
        let last_ts = t0.wire_timestamp();
        // The model says the tenth packet met 100 ms (its own 10 included). Within the margin
        // of that, nothing moves.
        let later = t0 + Duration::from_millis(40);
        assert!(!l.check_queue(later, last_ts, 105_000));
        assert_eq!(l.queue_delay(later), Duration::from_millis(60));
        // The peer saw it wait 150 ms: the real queue is 50 ms deeper than modelled.
        assert!(l.check_queue(later, last_ts, 150_000));
        assert_eq!(l.queue_delay(later), Duration::from_millis(110));
        // The same error echoed again (a later report, or an older packet) is not added twice.
        assert!(!l.check_queue(later, last_ts, 150_000));
        // A send after the correction may correct again; unknown timestamps never do.
        let t1 = t0 + Duration::from_millis(50);
        l.on_send(t1, 1250);
        assert!(!l.check_queue(t1, 12345, 1_000_000));
        assert!(l.check_queue(t1, t1.wire_timestamp(), 200_000));
    }

    #[test]
    fn a_link_the_model_calls_full_but_the_peer_finds_empty_is_probed() {
        // Regression (bench-bond's drop case): under a bulk flow the earliest-arrival rule keeps
        // every link's modelled queue as long as the busiest one's, so an uplink restored from 2
        // to 20 Mbit/s looked full and was never probed, though its packets met no queue.
        let mut l = TxLink::new(LinkId(0), None, 0.0, LinkState::Active, Instant::ZERO);
        l.handle_probe_timer(Instant::ZERO, true); // the first probe, from the unknown 1 Mbit/s
        let t0 = Instant::from_millis(2000);
        l.handle_probe_timer(t0, true); // ends it
        l.handle_probe_timer(t0 + Duration::from_secs(3), true); // settles: nothing found
        assert!(!l.is_probing());
        let t1 = t0 + Duration::from_secs(5);
        l.on_send(t1, 1000); // 8 ms of queue at 1 Mbit/s
        assert!(!l.check_queue(t1, t1.wire_timestamp(), 0), "within the margin of the model");
        assert!(l.queue_delay(t1) > PROBE_MAX_QUEUE);
        l.handle_probe_timer(t1, true);
        assert!(l.is_probing(), "the peer measured no queue worth the name: probe");
        // A link whose packets did meet a queue is left alone.
        let mut m = TxLink::new(LinkId(1), None, 1e6, LinkState::Active, Instant::ZERO);
        m.on_send(t1, 1250);
        m.check_queue(t1, t1.wire_timestamp(), 6_000);
        m.handle_probe_timer(t1, true);
        assert!(!m.is_probing());
    }

    #[test]
    fn a_probe_held_by_a_queue_ends_the_growth_of_the_next() {
        // A cellular modem back from an outage (lone-uplink.sh, T-Mobile's UMTS drive, 100 kB):
        // its estimate rose with the passengers' own data while a probe settled, which counted
        // as the probe's success, and the next probe doubled an estimate already above the
        // modem's rate: its coded packets filled the buffer, and the passengers' burst behind
        // them was dropped whole.
        let mut l = TxLink::new(LinkId(0), None, 3e6, LinkState::Active, Instant::ZERO);
        l.growing = true;
        assert_eq!(l.probe_gain(false), GROWTH_GAIN);
        // The data meets a queue: the link carries all it can, and the probe waits.
        let t1 = Instant::from_millis(1000);
        l.on_send(t1, 1250);
        l.check_queue(t1, t1.wire_timestamp(), 40_000);
        l.handle_probe_timer(t1, true);
        assert!(!l.is_probing());
        // Once the queue drained, the next probe goes at the cruise gain.
        let t2 = t1 + Duration::from_millis(300);
        l.on_send(t2, 1250);
        l.check_queue(t2, t2.wire_timestamp(), 0);
        l.handle_probe_timer(t2, true);
        assert!(l.is_probing());
        assert_eq!(l.probe_gain(false), CRUISE_GAIN);
    }

    #[test]
    fn a_link_that_hid_a_deep_queue_from_the_model_is_coded_into_gently_for_a_while() {
        let mut l = TxLink::new(LinkId(0), None, 1e6, LinkState::Active, Instant::ZERO);
        let t0 = Instant::from_millis(100);
        // Coded packets into spare capacity are paced at the estimate: 10 ms for 1250 bytes.
        l.on_send_spare(t0, 1250);
        assert_eq!(l.coding_paced_until(), t0 + Duration::from_millis(10));
        // An echo 20 ms beyond the model is corrected but trusted for coding.
        let t1 = t0 + Duration::from_millis(100);
        l.on_send(t1, 1250);
        assert!(l.check_queue(t1 + Duration::from_millis(50), t1.wire_timestamp(), 30_000));
        assert_eq!(l.coding_gain(t1), 1.0);
        // One a cellular round trip beyond it cuts the gain; coding is paced about 16 times slower.
        let t2 = t1 + Duration::from_millis(100);
        l.on_send(t2, 1250);
        assert!(l.check_queue(t2, t2.wire_timestamp(), 10_000 + CODING_MAX_QUEUE.as_micros() as i64));
        assert_eq!(l.coding_gain(t2), CODING_GAIN_MIN);
        let t3 = t2 + Duration::from_secs(1);
        l.on_send_spare(t3, 1250);
        l.on_confirmed(t3); // every send reached the peer: only the pacing holds coding back
        let paced = l.coding_paced_until() - t3;
        let want = 0.010 / (CODING_GAIN_MIN + CODING_GAIN_RECOVERY); // a second of growth back
        assert!((paced.as_secs_f64() - want).abs() < 1e-5, "{paced:?}");
        assert!(!l.coding_open(t3 + Duration::from_millis(100), REPORT));
        assert!(l.coding_open(t3 + paced, REPORT));
        // It grows back with time alone.
        let g = l.coding_gain(t2 + Duration::from_secs(60));
        assert!((g - (CODING_GAIN_MIN + 60.0 * CODING_GAIN_RECOVERY)).abs() < 1e-9, "{g}");
        assert_eq!(l.coding_gain(t2 + Duration::from_secs(1000)), 1.0);
    }

    #[test]
    fn a_link_whose_estimate_fell_is_probed_beside_its_data() {
        // bench-bond's drop case under BBR passengers: an uplink's estimate followed its rate
        // from 20 to 2 Mbit/s, and the data the earliest-arrival rule gives it keeps its modelled
        // queue busy, where an ordinary probe's coded packets cannot go.
        let mut l = TxLink::new(LinkId(0), None, 0.0, LinkState::Active, Instant::ZERO);
        l.on_report(Instant::ZERO, 20_000, 0.0, None);
        l.on_report(Instant::from_millis(100), 20_000, 0.0, None);
        assert!(!l.restoring(), "an estimate at its recent highest");
        let t1 = Instant::from_millis(1000);
        l.on_report(t1, 2_000, 0.0, None);
        l.growing = false;
        assert!(l.restoring(), "2 of the 20 Mbit/s of the last seconds");
        // Data fills the model 10 ms deep.
        for _ in 0..2 {
            l.on_send(t1, 1250);
        }
        assert_eq!(l.queue_delay(t1), Duration::from_millis(10));
        l.handle_probe_timer(t1, true);
        assert!(l.is_probing());
        assert_eq!(l.beside_probe_at(), Some(t1), "its first packet may go at once, queue or no queue");
        // A restore probe's packet takes no room in the model and is paced at a quarter of the
        // estimate (BBR's 5/4 with the data): 1250 bytes at 0.5 Mbit/s, 20 ms.
        l.on_send_spare(t1, 1250);
        assert_eq!(l.queue_delay(t1), Duration::from_millis(10), "data keeps its place");
        assert_eq!(l.beside_probe_at(), Some(t1 + Duration::from_millis(20)));
        assert!(!l.beside_probe_due(t1 + Duration::from_millis(19)));
        // The estimate rises: the probe goes on at the growth gain, which the recent 20 Mbit/s
        // allows, so its packets go at the estimate beside the data. (A first restore probe goes
        // at the cruise gain, whatever raised the estimate before.)
        assert_eq!(l.probe_gain(true), CRUISE_GAIN);
        let t2 = t1 + Duration::from_millis(150);
        l.on_report(t2, 2_500, 0.0, None);
        assert!(l.restoring());
        l.on_send(t2, 1250);
        l.on_send_spare(t2, 1250);
        assert_eq!(l.beside_probe_at(), Some(t2 + Duration::from_millis(4)), "1250 bytes at 2.5 Mbit/s");
        // Near the recent highest the gain is the cruise gain.
        l.on_report(t2, 12_000, 0.0, None);
        assert_eq!(l.probe_gain(true), CRUISE_GAIN, "24 Mbit/s is beyond the recent 20");
        // The first queue beyond the model's ends it: 6 ms measured against a model of 0.
        let t3 = t2 + Duration::from_secs(1);
        let ts = t3.wire_timestamp();
        l.on_send(t3, 100);
        let model = l.queue_delay(t3).as_micros() as i64;
        l.check_queue(t3, ts, model + 6_000);
        assert!(!l.is_probing(), "a queue the probe built ends it");
        assert_eq!(l.beside_probe_at(), None);
        // A link whose estimate stands is probed the ordinary way: its probe's packets fill the
        // modelled queue.
        let mut m = TxLink::new(LinkId(1), None, 0.0, LinkState::Active, Instant::ZERO);
        m.on_report(Instant::ZERO, 20_000, 0.0, None);
        // One report overshooting is not a highest that makes the link look fallen.
        m.on_report(Instant::ZERO, 60_000, 0.0, None);
        m.on_report(Instant::ZERO, 20_000, 0.0, None);
        m.on_send(Instant::ZERO, 1250);
        m.handle_probe_timer(Instant::ZERO, true);
        assert!(m.is_probing() && !m.restoring());
        assert_eq!(m.beside_probe_at(), None);
        m.on_send_spare(Instant::ZERO, 1250);
        assert!(m.queue_delay(Instant::ZERO) > Duration::from_micros(500));
        // The highest estimate is forgotten after one to two buckets: a link that has stayed
        // low that long is left to the ordinary probes.
        let late = t1 + PEAK_BUCKET * 2 + Duration::from_secs(1);
        l.on_report(t1 + PEAK_BUCKET + Duration::from_millis(500), 2_000, 0.0, None);
        l.on_report(late, 2_000, 0.0, None);
        assert!(!l.restoring());
    }

    #[test]
    fn a_startup_probe_beside_the_data_pauses_while_the_peer_measures_a_queue() {
        // bench-bond's 20 + 20 Mbit/s: a passenger's burst into links still at the 1 Mbit/s
        // assumed for an unknown one; the model is far deeper than the real queue.
        let mut l = TxLink::new(LinkId(0), None, 0.0, LinkState::Active, Instant::ZERO);
        let t0 = Instant::from_millis(10);
        for _ in 0..100 {
            l.on_send(t0, 1250);
        }
        assert_eq!(l.queue_delay(t0), Duration::from_secs(1));
        // The peer measures no queue: the link drains faster than the model.
        let t1 = Instant::from_millis(50);
        assert!(l.check_queue(t1, t0.wire_timestamp(), 0));
        l.handle_probe_timer(t1, true);
        assert_eq!(l.beside_probe_at(), Some(t1), "a startup probe goes beside the data");
        l.on_send_spare(t1, 1250);
        // The burst reaches the link's buffer: 20 ms measured, far short of the model's queue,
        // so the end at a queue beyond the model's does not come.
        let t2 = Instant::from_millis(80);
        for _ in 0..50 {
            l.on_send(t2, 1250);
        }
        l.check_queue(t2 + Duration::from_millis(30), t2.wire_timestamp(), 20_000);
        assert!(l.is_probing(), "the estimate may still grow by the data's delivery rate");
        assert_eq!(l.beside_probe_at(), None, "no packet beside the data into a queue");
        assert!(!l.beside_probe_due(t2 + Duration::from_millis(100)));
        // The queue drained: the probe's packets go again.
        let t3 = Instant::from_millis(150);
        l.on_send(t3, 1250);
        l.check_queue(t3 + Duration::from_millis(30), t3.wire_timestamp(), 1_000);
        assert!(l.beside_probe_due(t3 + Duration::from_millis(100)));
    }

    #[test]
    fn a_link_whose_startup_a_host_stall_ended_starts_again_when_it_keeps_draining_faster() {
        // bench-bond on a loaded host: late receive stamps measured 22 ms of queue in the first
        // burst, which ended startup with the estimate still at the assumed 1 Mbit/s.
        let mut l = TxLink::new(LinkId(0), None, 0.0, LinkState::Active, Instant::ZERO);
        let t0 = Instant::from_millis(10);
        l.on_send(t0, 1250);
        l.on_report(t0, 1_000, 0.0, None); // the peer's first estimate, from a starved link
        l.check_queue(t0, t0.wire_timestamp(), 22_000);
        assert!(!l.startup);
        l.growing = false;
        l.probe = ProbePhase::Idle { next: Instant::from_millis(5000) };
        // Then every echo shows the queue at its floor and 10 ms or more short of the model's.
        let round = |l: &mut TxLink, ms: u64, measured_us: i64| {
            let t = Instant::from_millis(ms);
            l.on_send(t, 1250);
            l.on_send(t, 1250);
            l.check_queue(t + Duration::from_millis(5), t.wire_timestamp(), measured_us)
        };
        assert!(round(&mut l, 100, 0) && round(&mut l, 200, 0));
        assert!(!l.startup, "two corrections are not yet evidence");
        // A queue at the floor's edge breaks the run.
        assert!(round(&mut l, 300, 6_000));
        assert!(round(&mut l, 400, 0) && round(&mut l, 500, 0));
        assert!(!l.startup);
        assert!(round(&mut l, 600, 0));
        assert!(l.startup, "three in a row at the floor: startup again");
        assert_eq!(l.probe_timeout(true), Some(Instant::from_millis(605)), "probed at once");
        l.handle_probe_timer(Instant::from_millis(605), true);
        assert!(l.beside_probe_at().is_some(), "at the growth gain, beside the data");
        // A link whose rate was configured is only checked now and then.
        let mut k = TxLink::new(LinkId(1), None, 20e6, LinkState::Active, Instant::ZERO);
        for ms in [100, 200, 300] {
            round(&mut k, ms, 0);
        }
        assert!(!k.startup);
    }

    #[test]
    fn a_queue_before_the_peers_first_estimate_does_not_end_startup() {
        // bench-bond's 20 + 20 Mbit/s: the passenger's opening burst, split by the guess of
        // 1 Mbit/s a link, queued 6-14 ms at the uplinks' line rate before either was measured.
        let mut l = TxLink::new(LinkId(0), None, 0.0, LinkState::Active, Instant::ZERO);
        let t0 = Instant::from_millis(10);
        l.on_send(t0, 1250);
        l.check_queue(t0, t0.wire_timestamp(), 14_000);
        assert!(l.startup, "no estimate yet: a burst's queue, not a full pipe");
        // Once the peer has measured the link, a queue says its pipe is full.
        let t1 = Instant::from_millis(110);
        l.on_report(t1, 20_000, 0.0, None);
        l.on_send(t1, 1250);
        l.check_queue(t1, t1.wire_timestamp(), 14_000);
        assert!(!l.startup);
    }

    #[test]
    fn a_probe_overshooting_its_estimate_does_not_cut_the_coding_gain() {
        let mut l = TxLink::new(LinkId(0), None, 0.0, LinkState::Active, Instant::ZERO);
        l.handle_probe_timer(Instant::ZERO, true);
        assert!(l.is_probing());
        l.on_send_spare(Instant::ZERO, 1250);
        let t = Instant::from_millis(100);
        assert!(l.check_queue(t, Instant::ZERO.wire_timestamp(), 300_000));
        assert!(!l.is_probing(), "the probe ends on the queue");
        assert_eq!(l.coding_gain(t), 1.0);
    }

    #[test]
    fn a_queue_the_peer_measured_closes_the_link_to_coding_until_it_goes_or_grows_stale() {
        let mut l = TxLink::new(LinkId(0), None, 1e6, LinkState::Active, Instant::ZERO);
        let t0 = Instant::from_millis(100);
        assert!(l.coding_open(t0, REPORT), "nothing measured yet");
        l.on_send(t0, 1250);
        l.check_queue(t0 + Duration::from_millis(50), t0.wire_timestamp(), 200_000);
        let t1 = t0 + Duration::from_millis(50);
        assert!(!l.coding_open(t1, REPORT), "a 200 ms queue");
        assert_eq!(l.coding_closed_until(), Some(t1 + CODING_ECHO_FRESH));
        assert!(l.coding_open(t1 + CODING_ECHO_FRESH, REPORT), "a stale measurement");
        // A fresh echo of a short queue opens it at once.
        let t2 = t1 + Duration::from_millis(10);
        l.on_send(t2, 1250);
        l.check_queue(t2, t2.wire_timestamp(), 5_000);
        assert!(l.coding_open(t2, REPORT));
        assert_eq!(l.coding_closed_until(), None);
    }

    #[test]
    fn sends_unconfirmed_past_a_round_trip_a_report_and_a_queue_close_the_link_to_coding() {
        let mut l = TxLink::new(LinkId(0), None, 4e6, LinkState::Active, Instant::ZERO);
        l.on_rtt_sample(Duration::from_millis(80));
        let t0 = Instant::from_millis(1000);
        assert_eq!(l.coding_stalls_at(REPORT), None, "nothing sent");
        l.on_send_spare(t0, 1250);
        let due = t0 + Duration::from_millis(80) + REPORT + CODING_MAX_QUEUE;
        assert_eq!(l.coding_stalls_at(REPORT), Some(due));
        assert!(l.coding_open(due.saturating_sub(Duration::from_millis(1)), REPORT));
        // No report has confirmed it: the link's rate may have collapsed, and its queue no longer
        // drains at the estimate (no echo comes to say so). No more coded packets into it.
        assert!(!l.coding_open(due, REPORT));
        assert!(l.coding_closed_until().is_none(), "the peer measured nothing");
        // A report that confirms the send opens it again.
        l.on_confirmed(t0);
        assert_eq!(l.coding_stalls_at(REPORT), None);
        assert!(l.coding_open(due, REPORT));
    }

    #[test]
    fn echoes_of_a_shorter_queue_correct_the_model_down() {
        // Regression (bench-bond's drop case): an uplink restored from 2 to 20 Mbit/s drained
        // faster than its estimate, but the model kept it as full as the other uplink's standing
        // queue, so it was neither fed nor probed, and 1.2-3.5 s passed before it was used again.
        let mut l = link(); // 1 Mbit/s: 1250 bytes take 10 ms
        let t0 = Instant::from_millis(10);
        for _ in 0..10 {
            l.on_send(t0, 1250);
        }
        let last_ts = t0.wire_timestamp();
        let later = t0 + Duration::from_millis(20);
        // Within the margin, nothing moves.
        assert!(!l.check_queue(later, last_ts, 95_000));
        assert_eq!(l.queue_delay(later), Duration::from_millis(80));
        // The peer saw the tenth packet wait 5 ms where the model said 100: the real queue is
        // 95 ms shorter, so what is left of it is empty.
        assert!(l.check_queue(later, last_ts, 5_000));
        assert!(l.queue_is_empty(later));
        // Echoes of sends before the correction do not correct again.
        assert!(!l.check_queue(later, last_ts, 0));
        // A later send corrects by its own error: modelled at 30 ms, measured at 12.
        let t1 = later + Duration::from_millis(1);
        l.on_send(t1, 1250);
        l.on_send(t1, 1250);
        l.on_send(t1, 1250);
        assert!(l.check_queue(t1, t1.wire_timestamp(), 12_000));
        assert_eq!(l.queue_delay(t1), Duration::from_millis(12));
    }

    #[test]
    fn a_send_fills_the_queue_at_any_capacity() {
        // Regression (braid-fuzz, session-pair): a reported capacity of u32::MAX kbit/s (or any
        // above a few Gbit/s) made one packet's transmission time round to 0 µs, so the link
        // looked idle after every send and opportunistic coding never stopped at that instant.
        let mut l = link();
        l.on_report(Instant::ZERO, u32::MAX, 0.0, None);
        let t0 = Instant::from_millis(10);
        assert!(l.queue_is_empty(t0));
        l.on_send(t0, 100);
        assert!(!l.queue_is_empty(t0));
        assert!(l.queue_drained_at() > t0, "the opportunity timer is in the future");
        assert!(l.queue_is_empty(t0 + Duration::from_micros(1)));
        // Sub-microsecond sends accumulate rather than being rounded away one by one.
        let mut m = link();
        m.on_report(Instant::ZERO, 10_000_000, 0.0, None); // 10 Gbit/s: 1250 bytes take 1 µs
        for _ in 0..10 {
            m.on_send(t0, 625);
        }
        assert_eq!(m.queue_delay(t0), Duration::from_micros(5));
    }

    #[test]
    fn arrival_estimate_adds_queue_transmission_and_relative_delay() {
        let mut a = link();
        let mut b = link();
        a.on_report(Instant::ZERO, 1000, 0.0, Some(u32::MAX - 10_000)); // wraps: must compare as i32
        b.on_report(Instant::ZERO, 1000, 0.0, Some(u32::MAX.wrapping_add(60_000)));
        let now = Instant::from_millis(1);
        assert_eq!(a.arrival_us(now, 1250, u32::MAX - 10_000), 10_000);
        assert_eq!(b.arrival_us(now, 1250, u32::MAX - 10_000), 10_000 + 70_000);
    }

    #[test]
    fn capacity_falls_back_to_bootstrap_then_default() {
        let l = TxLink::new(LinkId(1), None, 0.0, LinkState::Probing, Instant::ZERO);
        assert_eq!(l.capacity_bps(), 1e6);
        let mut l = TxLink::new(LinkId(1), None, 2e5, LinkState::Probing, Instant::ZERO);
        assert_eq!(l.capacity_bps(), 2e5);
        l.on_report(Instant::ZERO, 0, 0.1, None);
        assert_eq!(l.capacity_bps(), 2e5);
        l.on_report(Instant::ZERO, 300, 0.1, None);
        assert_eq!(l.capacity_bps(), 3e5);
    }

    #[test]
    fn confirmation_clears_unconfirmed_sends() {
        let mut l = link();
        l.on_send(Instant::from_millis(1), 100);
        l.on_send(Instant::from_millis(5), 100);
        assert_eq!(l.unconfirmed_since(), Some(Instant::from_millis(1)));
        l.on_confirmed(Instant::from_millis(1));
        assert_eq!(l.unconfirmed_since(), Some(Instant::from_millis(5)));
        l.on_confirmed(Instant::from_millis(5));
        assert_eq!(l.unconfirmed_since(), None);
    }

    #[test]
    fn a_report_of_silence_counts_the_sends_that_should_have_arrived() {
        let mut l = link();
        let t0 = Instant::from_millis(1000);
        // One datagram a millisecond for 100 ms; the peer got the first one only.
        for i in 0..100u64 {
            l.on_send(t0 + Duration::from_millis(i), 100);
        }
        let echo = t0.wire_timestamp();
        assert_eq!(l.overdue_sends(echo, 10_000), 0, "silent for less than the margin");
        // Silent for 60 ms: the sends of the first 35 ms (after the echoed one) should be there.
        let n = l.overdue_sends(echo, 60_000);
        assert!((33..=35).contains(&n), "{n}");
        assert!(n >= OVERDUE_DOWN);
        // A report echoing the newest send has nothing overdue, however long ago it was.
        assert_eq!(l.overdue_sends((t0 + Duration::from_millis(99)).wire_timestamp(), 1_000_000), 0);
        // An echo we no longer remember proves nothing.
        assert_eq!(l.overdue_sends(echo.wrapping_sub(1), 1_000_000), 0);
    }

    #[test]
    fn a_send_behind_a_queue_is_not_overdue_until_the_queue_has_drained() {
        let mut l = link();
        let t0 = Instant::from_millis(1000);
        // A burst of 20 full-size datagrams into the link: each waits behind the others.
        for i in 0..20 {
            l.on_send(t0 + Duration::from_micros(i), 1500);
        }
        let echo = t0.wire_timestamp();
        let per = l.tx_time(1500).as_micros() as u32;
        // The peer got the first: the 19 others are due one transmission time apart.
        let n = l.overdue_sends(echo, per * 10 + OVERDUE_MARGIN.as_micros() as u32);
        assert!((9..=10).contains(&n), "{n} (one every {per} µs)");
    }

    #[test]
    fn probes_count_until_a_confirmation() {
        let mut l = link();
        l.on_liveness_probe();
        assert_eq!(l.unanswered_probes(), 0, "nothing unconfirmed: nothing to count");
        l.on_send(Instant::from_millis(1), 100);
        l.on_liveness_probe();
        l.on_send(Instant::from_millis(20), 40);
        l.on_liveness_probe();
        assert_eq!(l.unanswered_probes(), 2);
        l.on_confirmed(Instant::from_millis(1));
        assert_eq!(l.unanswered_probes(), 0);
        assert_eq!(l.unconfirmed_since(), Some(Instant::from_millis(20)));
    }

    #[test]
    fn silence_is_confirmed_by_a_second_report_with_the_same_echo() {
        let mut l = link();
        let ms = |m: u32| m * 1000;
        assert!(!l.confirm_silence(ms(100), 7, OVERDUE_DOWN), "one report is not enough");
        assert!(!l.confirm_silence(ms(110), 7, OVERDUE_DOWN + 5), "nor one 10 ms later");
        // The echo moved on: the link delivered after all (a stalled peer's backlog).
        assert!(!l.confirm_silence(ms(120), 9, 0));
        assert!(!l.confirm_silence(ms(140), 9, OVERDUE_DOWN), "a new suspicion starts over");
        assert!(!l.confirm_silence(ms(130), 9, OVERDUE_DOWN), "an older report, overtaken");
        assert!(l.confirm_silence(ms(155), 9, OVERDUE_DOWN));
        // Both timestamps wrap.
        let mut l = link();
        assert!(!l.confirm_silence(u32::MAX - ms(5), u32::MAX, OVERDUE_DOWN));
        assert!(l.confirm_silence(ms(10), u32::MAX, OVERDUE_DOWN));
    }

    #[test]
    fn a_lossier_link_needs_a_longer_run_of_missed_sends_to_count_as_silent() {
        let mut l = link();
        let ms = |m: u32| m * 1000;
        assert_eq!(l.overdue_to_prove_silence(), OVERDUE_DOWN, "no loss reported yet");
        l.on_report(Instant::from_millis(1), 10_000, 0.3, None);
        assert_eq!(l.overdue_to_prove_silence(), OVERDUE_DOWN);
        // At 50 %, eight in a row is once in 256 tries; 14 is once in 16,384, as 8 at 30 %.
        l.on_report(Instant::from_millis(2), 10_000, 0.5, None);
        assert_eq!(l.overdue_to_prove_silence(), 14);
        assert!(!l.confirm_silence(ms(100), 7, 13));
        assert!(!l.confirm_silence(ms(120), 7, 13), "13 missed at 50 % prove nothing");
        assert!(!l.confirm_silence(ms(140), 7, 14));
        assert!(l.confirm_silence(ms(160), 7, 14));
        // A dying link's estimate near 1 does not put its silence out of reach.
        l.on_report(Instant::from_millis(3), 10_000, 0.99, None);
        assert_eq!(l.overdue_to_prove_silence(), 19);
    }
}
