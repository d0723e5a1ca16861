//! Receiver-side estimators for one incoming link direction (PluriBus 5.1-5.3).

use super::{bps_to_kbps, track_max, tx_time_us};
use crate::seq;
use crate::time::Instant;
use std::collections::VecDeque;
use std::time::Duration;

/// Loss EWMA gain per packet. PluriBus 5.1 only says "exponential average"; its Fig. 11(b) judges
/// the estimate by how well it predicts the next 20 packets. Wireless loss comes in bursts
/// (Gilbert-Elliott), and OEC's degree must shrink while a burst lasts or every coded packet
/// covers several missing packets and recovers nothing, so the average is short: 1/8.
const LOSS_GAIN: f64 = 1.0 / 8.0;
/// d + δ EWMA gain per qualifying sample (PluriBus 5.3, "running exponential average") when the
/// sample is below the average.
const OWD_GAIN: f64 = 1.0 / 8.0;
/// Gain when the sample is above the average. d + δ is the delay of an *empty* queue; PluriBus
/// filters out queued samples by their spacing, which relies on the capacity estimate, and a
/// stale estimate lets a standing queue leak in. Rising slowly keeps the average at the floor
/// (queues only ever add delay) while still following a genuinely longer path.
const OWD_GAIN_UP: f64 = 1.0 / 64.0;
/// Queued pairs an interval needs before its dispersion rate counts as a capacity sample.
const MIN_BUSY_PAIRS: u32 = 3;
/// Service time those pairs must span, µs: enough that timer granularity cannot dominate.
const MIN_BUSY_US: f64 = 2_000.0;
/// Arrivals stamped within this of a span's first one came with it, as far as the receiver can
/// tell: a host that reads late (a busy machine's softirq, GRO) stamps everything that arrived
/// meanwhile with one time. A rate over the span starts after that clump, as it starts after
/// its first packet alone: the clump's packets arrived at some time before it. Counted in, a
/// stall's backlog that opened an interval added its bits and none of its time, and three such
/// intervals in a row moved the estimate: a 20 Mbit/s link read with a 30 ms stall every 50 ms
/// was estimated at 28.5 Mbit/s (the unit test below). On bench-bond's busy machine a 20 Mbit/s
/// uplink's estimate went to 45 Mbit/s by dispersion for 0.3 s, and the sender filled the
/// model's idle time on it with coded packets where there was none. 100 µs is less than a
/// full-size packet takes at 100 Mbit/s.
const ARRIVAL_CLUMP: Duration = Duration::from_micros(100);
/// The longest capacity measurement interval, PluriBus 5.2's 500 ms: every interval of a link
/// estimated at up to 1.5 Mbit/s ([`CAPACITY_INTERVAL_BITS`] in 500 ms) is this long.
pub const CAPACITY_INTERVAL: Duration = Duration::from_millis(500);
/// What one capacity interval should carry: PluriBus 5.2's 500 ms at 1.5 Mbit/s, the faster
/// direction of the WiMax path it measured (its Fig. 6: 1500 and 200 kbit/s). A rate over an interval is as good as the packets in it, and
/// the estimate moves only after [`CAPACITY_STREAK`] intervals, so a fixed 500 ms made a 10 Mbit/s
/// link follow a change of cross traffic as slowly as a 1 Mbit/s one: 1.5-2 s of sending at the
/// old rate, which under `wrr` overfills the slowed link (NATALIE Fig. 7). Faster links close an
/// interval once this much has had time to drain at the current estimate.
pub const CAPACITY_INTERVAL_BITS: f64 = 750_000.0;
/// The shortest capacity interval, whatever the rate: long enough to hold tens of packets at the
/// rates braid's uplinks have, and to dwarf timer and batching jitter.
pub const MIN_CAPACITY_INTERVAL: Duration = Duration::from_millis(100);
/// Consecutive qualifying intervals on one side of the estimate needed to move it (PluriBus 5.2).
const CAPACITY_STREAK: usize = 3;
/// An interval counts only if the sender sent at least this fraction of the current estimate: OEC
/// sends at the estimated rate (PluriBus 5.2 "our sending rate equals at least our estimated
/// capacity"), so requiring strictly more would make downgrades depend on timer noise.
const CAPACITY_QUALIFY: f64 = 0.97;
/// An interval also counts when the sender outpaced the receiver by this factor: the bottleneck
/// queue grew, so the receive rate is the drain rate (packet-train dispersion). PluriBus 5.2 needs
/// OEC's capacity-filling traffic to downgrade an estimate that is too high; with other schemes
/// (e.g. `wrr` without coding) the sender never reaches the stale estimate, and without this rule
/// the estimate would never come down when cross traffic takes part of a link.
const CAPACITY_OUTPACED: f64 = 1.10;
/// An interval also counts when packets queued at the bottleneck throughout it: a standing queue
/// means the link drained as fast as it could, so the receive rate is its capacity even though,
/// with ACK-clocked senders, send and receive rates are equal. Measured as the mean one-way delay
/// above the empty-queue delay d + δ (PluriBus 5.3), in µs.
const STANDING_QUEUE_US: f64 = 5_000.0;
/// The delay floor for the standing-queue test is the minimum over the last one to two of these
/// spans. An average of d + δ absorbs a queue that never drains; a windowed minimum only does so
/// once the queue has stood for the whole window.
const FLOOR_BUCKET: Duration = Duration::from_secs(5);
/// How fast the empty-queue delay d + δ ([`RxEstimator::owd_us`]) may rise, µs per second, when
/// the windowed minimum of [`FLOOR_BUCKET`]s rises above it; it falls at once.
///
/// A passenger's CUBIC flow keeps a drop-tail buffer much deeper than the path's round trip from
/// ever draining: after a loss it backs off by 30 %, and the queue stays at 70 % of the buffer.
/// Once the empty-queue samples of the flow's start left the window (5-10 s in), the windowed
/// minimum jumped by that standing queue at once: traced on bench-bond's 20 + 5 Mbit/s, the
/// 20 Mbit/s uplink's d + δ rose 44 ms in one report, the sender's echoes then read its full
/// 50 ms queue as 7 ms, the queue model was cut by 50 ms, the backlog braid held for room went
/// into a buffer that had none, and both uplinks overflowed: a 0.1-0.2 s stall about 10 s into
/// every run. LEDBAT keeps its base delay over minutes for the same reason (RFC 6817 3.4.2,
/// BASE_HISTORY). Rising slowly, the estimate still follows a path that got longer (a
/// handover), tens of milliseconds within tens of seconds, and a clock drift (tens of
/// microseconds a second); a standing queue that leaks in moves it no faster, so the sender's
/// model is corrected in steps of [`super::QUEUE_CORRECTION_MIN`], not all at once.
const OWD_FLOOR_RISE_US_PER_S: f64 = 1_000.0;
/// The recent peak one-way delay (queueing included) is the maximum over the last one to two of
/// these spans: long enough to cover one queue's build-up between two reports, short enough that
/// a drained queue stops delaying hole reports within a fifth of a second.
const PEAK_BUCKET: Duration = Duration::from_millis(100);

/// The span over which the receiver measures the rate at which a link delivered, for the lower bound
/// that raises its capacity estimate at once ([`RxEstimator::handle`]): long enough to hold tens of
/// packets at the rates braid's uplinks have and to dwarf the few milliseconds by which a host's
/// receive batching clumps arrivals, short enough that a sender's probe at a higher rate
/// ([`super::TxLink`]'s capacity probing) fills one span within its 200 ms.
pub const DELIVERY_WINDOW: Duration = Duration::from_millis(100);
/// Packets a delivery span needs before its rate counts.
const DELIVERY_MIN_PACKETS: usize = 8;
/// A delivery rate raises the estimate only when it is this much above it: rates measured over
/// 100 ms jitter by a few per cent, and raising on every upward jitter would ratchet the estimate
/// up past the link's capacity.
const DELIVERY_RAISE: f64 = 1.10;
/// The capacity the sender's queue model assumes while the receiver has reported none
/// ([`super::TxLink::capacity_bps`]): what a link must be measured to beat before its first
/// estimate is taken from a receive rate. Before this floor, the trickle of probes and reports an
/// idle link carries became its first estimate (53 kbit/s for a 20 Mbit/s veth), and the
/// earliest-arrival scheduler then never sent it enough to find out more.
pub const UNKNOWN_CAPACITY_BPS: f64 = 1e6;

/// What the receiver learned from one datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxSample {
    /// The expanded per-link sequence number.
    pub link_seq: u64,
    /// Packets this one reveals as lost on the link (sequence gap).
    pub newly_lost: u64,
    /// The revealed loss is congestion: this packet met a queue of at least
    /// [`CONGESTION_QUEUE_MIN`] and near the largest of the last seconds
    /// ([`CONGESTION_QUEUE_SHARE`]) on a link that was losing little ([`CONGESTION_LOSS_MAX`]),
    /// as a drop-tail buffer's overflow does; a wireless loss on an uncrowded link does not.
    pub congested: bool,
}

/// The least queue (µs above the empty-queue delay) at which a loss can count as congestion.
pub const CONGESTION_QUEUE_MIN: f64 = 10_000.0;
/// A loss counts as congestion when the packet revealing it met at least this share of the
/// largest queue of the last 5-10 s, in time or in bytes: a full drop-tail buffer is the largest
/// queue a link shows. A buffer holds bytes, so while the link's rate climbs (a vehicle nearing a
/// WiFi access point) a full buffer drains sooner than it did seconds before, and by delay alone
/// its overflows did not count: on paper 002's pass (`scenarios/drive-by-pass.toml`, Linux's
/// buffers) a 22-packet overflow at 141 ms of queue, against 170 ms two seconds earlier at a
/// lower rate, was repaired into the same full buffer, the repairs were lost again, and the
/// passenger's TCP stalled for a second; counted in bytes too (300.5 kB against 300.6 kB), the
/// default moved 85.0 % of the pass instead of 79.3 % (20 runs). At 3/4, bursty wireless losses behind short flows' queues passed for overflows (PluriBus' bus,
/// 3 runs: mean FCT 0.258 s against 0.247 s at 9/10). The queue in bytes is what the link
/// delivered while the packet waited: taken as its delay times the capacity estimate, which
/// trails a cellular modem's rate by a few intervals, a lone modem's full 100 kB buffer on a
/// drive read as 50-200 kB, most of its overflows passed for wireless losses and were repaired,
/// and the passengers' TCP never backed off (Mahimahi's Verizon LTE drive, 40 ms round trip:
/// 0.79 of plain TCP's goodput over the modem; 0.96 counted from what it delivered).
pub const CONGESTION_QUEUE_SHARE: f64 = 0.9;
/// A loss counts as congestion only on a link whose loss estimate was below this just before: an
/// overflow follows a loss-free stretch in which the queue filled, while a link at the fringe of
/// its range loses at any queue (the drive-by scenario's WiFi: up to 30 %), and those losses are
/// braid's to repair.
pub const CONGESTION_LOSS_MAX: f64 = 0.05;
/// The largest recent queue is the maximum over the last one to two of these spans.
const QUEUE_MAX_BUCKET: Duration = Duration::from_secs(5);

/// Measures one incoming link direction: loss, capacity and one-way delay plus clock offset.
#[derive(Debug, Clone)]
pub struct RxEstimator {
    highest: Option<u64>,
    received: u64,
    lost: u64,
    loss: f64,
    owd_base: Option<u32>,
    owd_avg: f64,
    last_arrival: Option<Instant>,
    last_timestamp: u32,
    capacity_bps: f64,
    /// Windowed minimum of `recv - send` (µs offsets from `owd_base`): current and previous bucket.
    floor: (f64, f64, Option<Instant>),
    /// The floor d + δ is bounded by ([`OWD_FLOOR_RISE_US_PER_S`]): the windowed minimum, risen
    /// to slowly (µs offset from `owd_base`), and when it was last updated.
    owd_floor: Option<(f64, Instant)>,
    /// Windowed maximum of `recv - send` (same offsets): current and previous bucket.
    peak: (f64, f64, Option<Instant>),
    /// Windowed maximum of the queue met (µs above the floor): current and previous bucket.
    queue_max: (f64, f64, Option<Instant>),
    /// The same in bytes: the bytes the link delivered while each packet waited ([`ArrivedBytes`]).
    queue_max_bytes: (f64, f64, Option<Instant>),
    /// The bytes the link delivered over the last [`ARRIVED_SPAN`].
    arrived: ArrivedBytes,
    /// The queue the newest packet met (µs above the floor).
    last_queue_us: f64,
    interval: Interval,
    streak: Vec<f64>,
    streak_above: bool,
    /// Packets received in the last [`DELIVERY_WINDOW`]: arrival, send timestamp, bits.
    delivered: VecDeque<(Instant, u32, u32)>,
    /// Sum of the bits in `delivered`.
    delivered_bits: u64,
    /// When a delivery rate last raised the estimate in the ramp from none ([`RxEstimator::finding`]).
    raised_at: Option<Instant>,
    /// When the capacity estimate was last cut to less than half (lifecycle.rs's `Evidence`).
    cut_at: Option<Instant>,
}

/// Width of [`ArrivedBytes`]' buckets.
const ARRIVED_BUCKET: Duration = Duration::from_millis(10);
/// How far back [`ArrivedBytes`] reaches. A packet that waited longer is counted as having met
/// what the link delivered in this span: a modem's 400 kB buffer at 2 Mbit/s is 1.6 s, and a
/// queue of more than 2 s (the same buffer on a 0.5 Mbit/s EVDO link) is a full buffer whatever
/// its bytes, so every such packet counts as the largest queue.
const ARRIVED_SPAN: Duration = Duration::from_secs(2);

/// The bytes a link delivered over the last [`ARRIVED_SPAN`], in buckets of [`ARRIVED_BUCKET`]
/// (at most about 200 of them per busy link). A FIFO delivers, while a packet waits in it, the
/// bytes that were ahead of it: so the queue a packet met, in bytes, is what arrived over its
/// wait, whatever the link's rate did meanwhile ([`CONGESTION_QUEUE_SHARE`]).
#[derive(Debug, Clone, Default)]
struct ArrivedBytes {
    /// Each bucket's first arrival and the bytes delivered before it, oldest first.
    buckets: VecDeque<(Instant, u64)>,
    /// Bytes delivered in all.
    total: u64,
    /// The newest arrival.
    last: Option<Instant>,
}

impl ArrivedBytes {
    /// Counts `bytes` delivered at `now`.
    fn add(&mut self, now: Instant, bytes: u64) {
        if self.buckets.back().is_none_or(|&(t, _)| now >= t + ARRIVED_BUCKET) {
            self.buckets.push_back((now, self.total));
        }
        self.total += bytes;
        self.last = Some(now);
        while self.buckets.len() > 1 && now.saturating_duration_since(self.buckets[1].0) > ARRIVED_SPAN {
            self.buckets.pop_front();
        }
    }

    /// Bytes delivered after `since`, up to the newest arrival; within the bucket `since` falls
    /// in, its share of the bucket's bytes by time. A bucket's arrivals all came within
    /// [`ARRIVED_BUCKET`] of its first, so a silence after them (a modem's stall) holds none.
    fn since(&self, since: Instant) -> u64 {
        let i = self.buckets.partition_point(|&(t, _)| t < since);
        if i == 0 {
            return self.total - self.buckets.front().map_or(self.total, |b| b.1);
        }
        let (t0, c0) = self.buckets[i - 1];
        let (t1, c1) = self.buckets.get(i).copied().unwrap_or((self.last.unwrap_or(t0), self.total));
        let end = t1.min(t0 + ARRIVED_BUCKET);
        let span = end.saturating_duration_since(t0).as_secs_f64();
        let after = end.saturating_duration_since(since).as_secs_f64();
        let part = if span > 0.0 { (c1 - c0) as f64 * (after / span).min(1.0) } else { 0.0 };
        self.total - c1 + part as u64
    }
}

#[derive(Debug, Clone, Default)]
struct Interval {
    start: Option<Instant>,
    packets: u64,
    bytes: u64,
    lost_packets: u64,
    /// Bytes of the opening clump ([`ARRIVAL_CLUMP`]): they arrived before the span began.
    first_size: u64,
    /// The send timestamp and arrival of the clump's last packet: where the span begins.
    first_send: u32,
    span_start: Instant,
    /// Whether the clump is still open (every packet so far within [`ARRIVAL_CLUMP`]).
    opening: bool,
    last_send: u32,
    last_recv: Instant,
    queue_us_sum: f64,
    /// Bits of packets that waited at the bottleneck behind the previous one, and the arrival
    /// gaps they came with: while a queue stands, the link is busy and those gaps are its service
    /// times (packet-train dispersion), so `busy_bits / busy_us` is its drain rate.
    busy_bits: f64,
    busy_us: f64,
    busy_pairs: u32,
    /// Whether the clump the newest packet arrived in ([`ARRIVAL_CLUMP`]) queued behind the one
    /// before it: its packets' bits count as drained in the gap before it.
    clump_busy: bool,
}

impl RxEstimator {
    /// A new estimator, bootstrapped with the configured capacity (bit/s; 0 if unknown).
    pub fn new(bootstrap_bps: f64) -> Self {
        RxEstimator {
            highest: None,
            received: 0,
            lost: 0,
            loss: 0.0,
            owd_base: None,
            owd_avg: 0.0,
            last_arrival: None,
            last_timestamp: 0,
            capacity_bps: bootstrap_bps.max(0.0),
            floor: (f64::INFINITY, f64::INFINITY, None),
            owd_floor: None,
            peak: (f64::NEG_INFINITY, f64::NEG_INFINITY, None),
            queue_max: (0.0, 0.0, None),
            queue_max_bytes: (0.0, 0.0, None),
            arrived: ArrivedBytes::default(),
            last_queue_us: 0.0,
            interval: Interval::default(),
            streak: Vec::with_capacity(CAPACITY_STREAK),
            streak_above: false,
            delivered: VecDeque::new(),
            delivered_bits: 0,
            raised_at: None,
            cut_at: None,
        }
    }

    /// Accounts for a datagram of `size` bytes (as sent on the wire) that arrived at `now`, carrying
    /// the truncated per-link sequence number and the sender's timestamp.
    pub fn handle(&mut self, now: Instant, wire_link_seq: u32, timestamp: u32, size: usize) -> RxSample {
        let expected = self.highest.map_or(0, |h| h + 1);
        let link_seq = seq::expand(expected, wire_link_seq);
        let loss_before = self.loss;
        let mut newly_lost = 0;
        match self.highest {
            Some(h) if link_seq <= h => {
                // Late (reordered within the link): it was counted lost; undo that.
                if self.lost > 0 {
                    self.lost -= 1;
                }
            }
            _ => {
                let gap = self.highest.map_or(0, |h| link_seq - h - 1);
                // A gap larger than this is a restart of the peer's counters, not a loss burst.
                newly_lost = if gap < 4096 { gap } else { 0 };
                for _ in 0..newly_lost.min(64) {
                    self.loss += LOSS_GAIN * (1.0 - self.loss);
                }
                self.loss -= LOSS_GAIN * self.loss;
                self.lost += newly_lost;
                self.highest = Some(link_seq);
            }
        }
        self.received += 1;
        let queued_us = self.standing_sample(now, timestamp);
        let largest = track_max(&mut self.queue_max, QUEUE_MAX_BUCKET, now, queued_us);
        // In bytes, from what the link delivered while it waited ([`ArrivedBytes`]), not from
        // the capacity estimate, which trails a cellular modem's rate by a few intervals.
        let queued_bytes = self.arrived.since(now.saturating_sub(Duration::from_micros(queued_us as u64))) as f64;
        self.arrived.add(now, size as u64);
        let largest_bytes = track_max(&mut self.queue_max_bytes, QUEUE_MAX_BUCKET, now, queued_bytes);
        self.last_queue_us = queued_us;
        let congested = newly_lost > 0
            && loss_before < CONGESTION_LOSS_MAX
            && queued_us >= CONGESTION_QUEUE_MIN
            && (queued_us >= largest * CONGESTION_QUEUE_SHARE
                || queued_bytes >= largest_bytes * CONGESTION_QUEUE_SHARE);
        self.update_owd(now, timestamp, size);
        self.update_capacity(now, timestamp, size, newly_lost, queued_us);
        self.update_delivery_rate(now, timestamp, size);
        self.last_arrival = Some(now);
        self.last_timestamp = timestamp;
        RxSample { link_seq, newly_lost, congested }
    }

    /// How far this packet's delay is above the recent floor, µs (for the standing-queue test);
    /// also keeps the recent peak delay.
    fn standing_sample(&mut self, now: Instant, timestamp: u32) -> f64 {
        let Some(base) = self.owd_base else { return 0.0 };
        let d = f64::from(now.wire_timestamp().wrapping_sub(timestamp).wrapping_sub(base) as i32);
        let (cur, prev, since) = &mut self.floor;
        match since {
            Some(t) if now < *t + FLOOR_BUCKET => {}
            _ => {
                *prev = *cur;
                *cur = f64::INFINITY;
                *since = Some(now);
            }
        }
        *cur = cur.min(d);
        let windowed = cur.min(*prev);
        let standing = (d - windowed).max(0.0);
        self.owd_floor = Some(match self.owd_floor {
            Some((f, at)) if windowed > f => {
                let rise = now.saturating_duration_since(at).as_secs_f64() * OWD_FLOOR_RISE_US_PER_S;
                (windowed.min(f + rise), now)
            }
            _ => (windowed, now),
        });
        track_max(&mut self.peak, PEAK_BUCKET, now, d);
        standing
    }

    /// The estimate the rules compare against: the current one, or what the sender assumes while
    /// there is none.
    fn reference_bps(&self) -> f64 {
        if self.capacity_bps > 0.0 { self.capacity_bps } else { UNKNOWN_CAPACITY_BPS }
    }

    /// Raises the capacity estimate at once to the rate at which the link delivered over the last
    /// [`DELIVERY_WINDOW`], when that is well above it. A link cannot deliver faster than its
    /// capacity, so that rate (at most the rate the same packets were sent at, which cancels
    /// receive-side clumping) is a lower bound, as BBR's delivery-rate samples are: it needs no
    /// streak of intervals to be trusted. PluriBus 5.2 moves the estimate only after three
    /// intervals in which the sender sent faster than it, and a sender that trusts a low estimate
    /// never does, so an uplink estimated low stayed low (20 + 5 Mbit/s carried 4.95).
    fn update_delivery_rate(&mut self, now: Instant, timestamp: u32, size: usize) {
        let bits = (size as u32).saturating_mul(8);
        self.delivered.push_back((now, timestamp, bits));
        self.delivered_bits += u64::from(bits);
        while let Some(&(t, _, b)) = self.delivered.front() {
            if now - t <= DELIVERY_WINDOW {
                break;
            }
            self.delivered.pop_front();
            self.delivered_bits -= u64::from(b);
        }
        let Some(&(oldest, _, _)) = self.delivered.front() else { return };
        // The span begins with the opening clump's last packet ([`ARRIVAL_CLUMP`]); the clump's
        // bits arrived before it.
        let (mut first_at, mut first_ts, mut clump_bits) = (oldest, 0, 0u64);
        for &(t, ts, b) in &self.delivered {
            if t - oldest > ARRIVAL_CLUMP {
                break;
            }
            (first_at, first_ts) = (t, ts);
            clump_bits += u64::from(b);
        }
        let span_us = (now - first_at).as_micros() as f64;
        if self.delivered.len() < DELIVERY_MIN_PACKETS || span_us < 0.8 * DELIVERY_WINDOW.as_micros() as f64 {
            return;
        }
        let bits = (self.delivered_bits - clump_bits) as f64;
        let recv_bps = bits * 1e6 / span_us;
        // Packets that queued at the bottleneck were sent in a shorter span than they arrived in,
        // and the receive rate is then the link's; otherwise the send rate caps it, which cancels
        // receive-side clumping. (A host that stalls on a busy machine can still squeeze both
        // spans; the estimate that overshoots then comes down by PluriBus 5.2's rules as soon as
        // traffic fills the link.)
        let send_us = f64::from(timestamp.wrapping_sub(first_ts));
        let send_bps = if send_us > 0.0 && send_us < 1e7 { bits * 1e6 / send_us } else { f64::INFINITY };
        let rate = recv_bps.min(send_bps);
        if rate > DELIVERY_RAISE * self.reference_bps() {
            tracing::debug!(
                from_kbps = self.capacity_bps / 1e3,
                to_kbps = rate / 1e3,
                "capacity estimate raised by delivery rate"
            );
            // Only the ramp from no estimate counts as finding the capacity: later raises
            // (a modem's rate restored) leave the report interval alone.
            if self.capacity_bps <= 0.0 || self.ramping(now) {
                self.raised_at = Some(now);
            }
            self.capacity_bps = rate;
            self.streak.clear();
            // The interval under way measured the link at the old estimate's rules.
            self.interval = Interval::default();
        }
    }

    /// PluriBus 5.3: average `recv - send - size/capacity` over packets that likely met an empty
    /// queue, i.e. arrived at least two transmission times after the previous one.
    fn update_owd(&mut self, now: Instant, timestamp: u32, size: usize) {
        let tx = tx_time_us(size, self.capacity_bps);
        let quiet = match self.last_arrival {
            None => true,
            Some(prev) => (now - prev).as_micros() as f64 >= 2.0 * tx,
        };
        if !quiet {
            return;
        }
        let sample = now.wire_timestamp().wrapping_sub(timestamp).wrapping_sub(tx as u32);
        match self.owd_base {
            None => {
                self.owd_base = Some(sample);
                self.owd_avg = 0.0;
            }
            Some(base) => {
                // Average offsets from the first sample, so the u32 wrap never splits the average.
                let off = f64::from(sample.wrapping_sub(base) as i32);
                let gain = if off < self.owd_avg { OWD_GAIN } else { OWD_GAIN_UP };
                self.owd_avg += gain * (off - self.owd_avg);
            }
        }
    }

    /// PluriBus 5.2: compare receive and send rates over intervals (500 ms, shorter on fast links);
    /// intervals where the sender sent at least at the current estimate count, and three in a row
    /// above (below) it move the estimate to their median.
    fn update_capacity(&mut self, now: Instant, timestamp: u32, size: usize, newly_lost: u64, queued_us: f64) {
        let length = self.capacity_interval();
        let iv = &mut self.interval;
        if let Some(start) = iv.start
            && now - start >= length
        {
            let done = std::mem::take(iv);
            self.close_interval(now, &done);
        }
        let iv = &mut self.interval;
        if iv.start.is_none() {
            *iv = Interval {
                start: Some(now),
                packets: 1,
                bytes: size as u64,
                lost_packets: 0,
                first_size: size as u64,
                first_send: timestamp,
                span_start: now,
                opening: true,
                last_send: timestamp,
                last_recv: now,
                queue_us_sum: queued_us,
                ..Interval::default()
            };
            return;
        }
        iv.opening &= newly_lost == 0 && iv.start.is_some_and(|s| now - s <= ARRIVAL_CLUMP);
        if iv.opening {
            // Still the opening clump: the span begins after this packet.
            iv.first_size += size as u64;
            iv.first_send = timestamp;
            iv.span_start = now;
        } else {
            // This packet waited behind the previous one if its delay above the empty-queue floor
            // exceeds the gap since the previous arrival (had it met an idle link, the gap would
            // be at least its own transmission time, which is all the delay it adds). Then the
            // gap is pure service time. A loss in between took service time unseen: skip that
            // pair.
            //
            // Arrivals within [`ARRIVAL_CLUMP`] of the previous one came with it (a shaper's
            // timer let them through together, or the host stamped them together), and the
            // gap before the clump holds the service time of all of them: the clump is judged as
            // one arrival, its bits and gaps counted with that gap or not at all. Judged packet by packet,
            // the near-zero gaps inside a clump always passed for service time and the long gap
            // before it passed only behind a longer queue, so a paced sender's queue of a few
            // milliseconds left mostly the short gaps in, and a 20 Mbit/s uplink released by tbf
            // in clumps was estimated at 23-65 Mbit/s (the unit test below).
            let gap = now - iv.last_recv;
            let gap_us = gap.as_micros() as f64;
            if newly_lost > 0 || gap > ARRIVAL_CLUMP {
                // A new clump: whether it queued behind the last one decides for all of it.
                iv.clump_busy = newly_lost == 0 && queued_us > gap_us;
            }
            if iv.clump_busy {
                iv.busy_bits += size as f64 * 8.0;
                iv.busy_us += gap_us;
                iv.busy_pairs += 1;
            }
        }
        iv.packets += 1;
        iv.bytes += size as u64;
        iv.lost_packets += newly_lost;
        iv.last_send = timestamp;
        iv.last_recv = now;
        iv.queue_us_sum += queued_us;
    }

    /// How long the current capacity interval lasts: [`CAPACITY_INTERVAL`], or on a link whose
    /// estimate is above 1.5 Mbit/s the time it takes to carry [`CAPACITY_INTERVAL_BITS`], but at
    /// least [`MIN_CAPACITY_INTERVAL`].
    fn capacity_interval(&self) -> Duration {
        if self.capacity_bps <= 0.0 {
            return CAPACITY_INTERVAL;
        }
        let s = (CAPACITY_INTERVAL_BITS / self.capacity_bps)
            .clamp(MIN_CAPACITY_INTERVAL.as_secs_f64(), CAPACITY_INTERVAL.as_secs_f64());
        Duration::from_micros((s * 1e6).round() as u64)
    }

    fn close_interval(&mut self, now: Instant, iv: &Interval) {
        if iv.start.is_none() {
            return;
        }
        if iv.packets < 4 {
            return;
        }
        let recv_us = (iv.last_recv - iv.span_start).as_micros() as f64;
        let send_us = f64::from(iv.last_send.wrapping_sub(iv.first_send));
        if recv_us <= 0.0 || send_us > 10.0 * 1e6 {
            return;
        }
        // Capacity is the drain rate, not throughput (PluriBus 5.2): lost packets drained too, so
        // count them at the interval's mean size.
        let mean = iv.bytes as f64 / iv.packets as f64;
        let bits = ((iv.bytes - iv.first_size) as f64 + iv.lost_packets as f64 * mean) * 8.0;
        let recv_bps = bits * 1e6 / recv_us;
        let send_bps = if send_us > 0.0 { bits * 1e6 / send_us } else { f64::INFINITY };
        let standing = iv.queue_us_sum / iv.packets as f64 >= STANDING_QUEUE_US;
        let dispersion = (iv.busy_pairs >= MIN_BUSY_PAIRS && iv.busy_us >= MIN_BUSY_US && iv.busy_bits > 0.0)
            .then(|| iv.busy_bits * 1e6 / iv.busy_us);
        let (sample, kind) = if let Some(d) = dispersion {
            // Queued packets drained at the link's rate (or the share of it left by cross
            // traffic): a measurement either way.
            (d, "dispersion")
        } else {
            let reference = self.reference_bps();
            if send_bps < CAPACITY_QUALIFY * reference && send_bps < CAPACITY_OUTPACED * recv_bps && !standing {
                return;
            }
            // Nothing queued for long enough to measure the drain rate: the receive rate then
            // spans idle gaps between a bursty sender's bursts (TCP's slow start, short flows),
            // so it is only a lower bound on capacity. It may raise the estimate (PluriBus 5.2's
            // upward probing by OEC) but never lower it; before this rule, every burst followed
            // by a pause within one interval pulled the estimate down, to a sixth of the true
            // capacity on the bus scenario without coding.
            if recv_bps <= reference && !standing && send_bps < CAPACITY_OUTPACED * recv_bps {
                return;
            }
            let kind = if standing {
                "standing queue"
            } else if send_bps >= CAPACITY_OUTPACED * recv_bps {
                "outpaced sender"
            } else {
                "receive rate"
            };
            (recv_bps, kind)
        };
        tracing::trace!(
            sample_kbps = sample / 1e3,
            by = kind,
            packets = iv.packets,
            mean_bytes = mean,
            recv_ms = recv_us / 1e3,
            send_ms = send_us / 1e3,
            recv_kbps = recv_bps / 1e3,
            send_kbps = send_bps / 1e3,
            busy_pairs = iv.busy_pairs,
            busy_ms = iv.busy_us / 1e3,
            busy_bytes = iv.busy_bits / 8.0,
            "capacity sample"
        );
        let recv_bps = sample;
        let above = recv_bps > self.capacity_bps;
        if self.streak.is_empty() || above != self.streak_above {
            self.streak.clear();
            self.streak_above = above;
        }
        self.streak.push(recv_bps);
        if self.streak.len() == CAPACITY_STREAK {
            self.streak.sort_by(f64::total_cmp);
            let before = self.capacity_bps;
            self.capacity_bps = self.streak[CAPACITY_STREAK / 2];
            self.streak.clear();
            if self.capacity_bps < before / 2.0 {
                self.cut_at = Some(now);
            }
            // Which test let the last sample count tells an operator why a link's estimate moved.
            tracing::debug!(
                from_kbps = before / 1e3,
                to_kbps = self.capacity_bps / 1e3,
                by = kind,
                "capacity estimate"
            );
        }
    }

    /// Sets the capacity estimate if there is none yet (a bootstrap hint from the peer).
    pub fn bootstrap(&mut self, bps: f64) {
        if self.capacity_bps <= 0.0 && bps > 0.0 {
            self.capacity_bps = bps;
        }
    }

    /// Current loss estimate (probability).
    pub fn loss(&self) -> f64 {
        self.loss
    }

    /// Packets the loss estimate has judged: everything up to the highest link sequence number
    /// received, received or found missing.
    pub fn judged(&self) -> u64 {
        self.highest.map_or(0, |h| h + 1)
    }

    /// When the capacity estimate was last cut to less than half.
    pub fn capacity_cut_at(&self) -> Option<Instant> {
        self.cut_at
    }

    /// Current capacity estimate, bit/s (0 when unknown).
    pub fn capacity_bps(&self) -> f64 {
        self.capacity_bps
    }

    /// Whether the link's capacity is still being found: no estimate yet and the newest packet
    /// met a queue (the sender's [`super::tx::PROBE_MAX_QUEUE`], what its echoes count as one),
    /// or the first estimate still rising ([`Self::ramping`]). The sender's queue model runs on
    /// the estimate, so while it moves the sender needs the peer's figures sooner than the usual
    /// report interval.
    pub fn finding(&self, now: Instant) -> bool {
        (self.capacity_bps <= 0.0 && self.last_queue_us >= super::tx::PROBE_MAX_QUEUE.as_micros() as f64)
            || self.ramping(now)
    }

    /// Whether the ramp of the first estimate goes on: a delivery rate raised it within the last
    /// [`DELIVERY_WINDOW`], each raise of the ramp within that of the one before.
    fn ramping(&self, now: Instant) -> bool {
        self.raised_at.is_some_and(|t| now - t <= DELIVERY_WINDOW)
    }

    /// Capacity estimate in kbit/s for the wire.
    pub fn capacity_kbps(&self) -> u32 {
        bps_to_kbps(self.capacity_bps)
    }

    /// d + δ in µs (wrapping u32), if any packet has been seen: PluriBus 5.3's average over
    /// packets that likely met an empty queue, but never above the smallest `recv - send` of the
    /// last 5-10 s (which includes that packet's own transmission, a fraction of a millisecond). Under a bulk flow a link's queue rarely drains, and samples the spacing test
    /// lets through still carry queueing, which the average's slow rise gathered: on bench-bond's
    /// 20 + 5 Mbit/s the busier uplink's d + δ stood 4-23 ms above the other's, the
    /// earliest-arrival rule then took the other for the slower, and for seconds at a time one
    /// uplink carried everything (18.3 Mbit/s where 23 fit). The windowed minimum is the
    /// empty-queue delay whenever any packet met an empty queue lately, as BBR's min-RTT filter;
    /// when none has for the whole window, the bound rises toward the new minimum only slowly
    /// ([`OWD_FLOOR_RISE_US_PER_S`]), as a queue that never drains is no path getting longer.
    pub fn owd_us(&self) -> Option<u32> {
        let off = match self.owd_floor {
            Some((floor, _)) if floor.is_finite() => self.owd_avg.min(floor),
            _ => self.owd_avg,
        };
        self.owd_base.map(|b| b.wrapping_add(off.round() as i32 as u32))
    }

    /// The highest `recv - send` of the last 100-200 ms in µs (wrapping u32, same clock offset as
    /// [`owd_us`](Self::owd_us)): the empty-queue delay plus whatever queue packets met lately.
    /// Falls back to `owd_us` before the first queued sample.
    pub fn recent_peak_owd_us(&self) -> Option<u32> {
        let base = self.owd_base?;
        let peak = self.peak.0.max(self.peak.1);
        if peak.is_finite() { Some(base.wrapping_add(peak.round() as i32 as u32)) } else { self.owd_us() }
    }

    /// The queue the newest packet met: its delay above the empty-queue delay.
    pub fn last_queue(&self) -> Duration {
        Duration::from_micros(self.last_queue_us.max(0.0) as u64)
    }

    /// Send time and local arrival of the newest datagram, for the echo in feedback.
    pub fn last(&self) -> Option<(u32, Instant)> {
        self.last_arrival.map(|a| (self.last_timestamp, a))
    }

    /// Packets received and packets inferred lost so far.
    pub fn counts(&self) -> (u64, u64) {
        (self.received, self.lost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(clippy::too_many_arguments)] // a test helper: each argument is one property of the path
    /// Feeds packets of `size` bytes leaving the sender every `gap_us` and crossing a bottleneck of
    /// `cap_bps` with a fixed `delay_us`, dropping those for which `drop(i)` is true.
    fn feed(
        est: &mut RxEstimator,
        n: u64,
        size: usize,
        gap_us: u64,
        cap_bps: f64,
        delay_us: u64,
        offset: u32,
        drop: impl Fn(u64) -> bool,
    ) {
        let tx = (size as f64 * 8.0 * 1e6 / cap_bps) as u64;
        let mut link_free = 0u64;
        for i in 0..n {
            let sent = i * gap_us;
            let start = sent.max(link_free);
            link_free = start + tx;
            if drop(i) {
                continue;
            }
            let arrive = Instant::from_micros(link_free + delay_us);
            est.handle(arrive, seq::truncate(i), (sent as u32).wrapping_add(offset), size);
        }
    }

    /// Bursts of `burst` back-to-back packets every `period_us` through a FIFO bottleneck of
    /// `cap_bps` (a TCP sender in slow start, or short flows): the link idles between bursts.
    fn feed_bursts(est: &mut RxEstimator, bursts: u64, burst: u64, period_us: u64, cap_bps: f64) {
        let size = 1400;
        let tx = (size as f64 * 8.0 * 1e6 / cap_bps) as u64;
        let mut link_free = 0u64;
        let mut i = 0;
        for b in 0..bursts {
            for _ in 0..burst {
                let sent = b * period_us;
                let start = sent.max(link_free);
                link_free = start + tx;
                est.handle(Instant::from_micros(link_free + 20_000), seq::truncate(i), sent as u32, size);
                i += 1;
            }
        }
    }

    #[test]
    fn capacity_holds_under_bursts_with_idle_gaps() {
        // 10 packets every 100 ms on 1.5 Mbit/s: each burst drains in 75 ms, then 25 ms idle.
        // Send and receive spans of an interval both include the idle time; only the queued
        // pairs measure the link.
        let mut e = RxEstimator::new(1.5e6);
        feed_bursts(&mut e, 100, 10, 100_000, 1.5e6);
        let c = e.capacity_bps();
        assert!((c - 1.5e6).abs() < 0.05e6, "capacity {c}");
    }

    #[test]
    fn capacity_too_high_comes_down_from_dispersion_of_bursts() {
        let mut e = RxEstimator::new(4e6);
        feed_bursts(&mut e, 100, 10, 100_000, 1.5e6);
        let c = e.capacity_bps();
        assert!((c - 1.5e6).abs() < 0.05e6, "capacity {c}");
    }

    #[test]
    fn capacity_too_low_goes_up_from_dispersion_of_bursts() {
        let mut e = RxEstimator::new(0.3e6);
        feed_bursts(&mut e, 100, 10, 100_000, 1.5e6);
        let c = e.capacity_bps();
        assert!((c - 1.5e6).abs() < 0.05e6, "capacity {c}");
    }

    /// Packets leaving the sender every `gap_us` through a FIFO bottleneck of `cap_bps` that
    /// starts with `queue` packets waiting, received by a host that reads its socket only every
    /// `read_us` (receive batching) and stalls for `stall_us` every 50 ms (a busy machine): each
    /// packet is stamped with the read that took it.
    fn feed_clumped(est: &mut RxEstimator, n: u64, gap_us: u64, cap_bps: f64, queue: u64, read_us: u64, stall_us: u64) {
        let size = 1400;
        let tx = (size as f64 * 8.0 * 1e6 / cap_bps) as u64;
        let mut link_free = 0u64;
        for i in 0..n {
            let sent = (i.saturating_sub(queue)) * gap_us;
            let start = sent.max(link_free);
            link_free = start + tx;
            let real = link_free + 1_000;
            // Every 50 ms the host stalls for `stall_us`: what arrives then is read when it ends.
            let phase = real % 50_000;
            let arrive = if phase < stall_us { real - phase + stall_us } else { real.div_ceil(read_us) * read_us };
            est.handle(Instant::from_micros(arrive), seq::truncate(i), sent as u32, size);
        }
    }

    #[test]
    fn late_reads_do_not_inflate_the_capacity_estimate() {
        // Regression (bench-bond 20 + 5 Mbit/s down on a busy machine, an estimate of 45 Mbit/s
        // for a 20 Mbit/s uplink): an interval that opened with a stall's backlog, stamped with
        // one time, counted its bits and none of its time (22-28.5 Mbit/s here before).
        for (read_us, stall_us) in [(2_000, 0), (500, 10_000), (500, 20_000), (500, 30_000), (2_000, 20_000)] {
            for queue in [1, 2, 4, 8] {
                let mut e = RxEstimator::new(20e6);
                // The sender at the link's rate, as a passenger's BBR paces: a queue of a few
                // packets stands.
                feed_clumped(&mut e, 20_000, 560, 20e6, queue, read_us, stall_us);
                let c = e.capacity_bps();
                assert!(
                    (c - 20e6).abs() < 0.5e6,
                    "read every {read_us} us, stalls of {stall_us} us, queue {queue}: capacity {c}"
                );
            }
        }
    }

    /// A sender pacing at `cap_bps` times a gain that cycles as BBR's does (1.25 for 20 ms, 0.75
    /// for 20 ms, then 1 for 120 ms), through a FIFO bottleneck of `cap_bps`: the queue grows to a
    /// few milliseconds and drains once a cycle. The bottleneck is a token bucket whose timer
    /// fires every `tick_us` (tbf's watchdog, a modem's scheduling interval): what the rate let
    /// through since the last tick leaves together, so arrivals come in clumps a tick apart.
    fn feed_ticked(est: &mut RxEstimator, duration_us: u64, cap_bps: f64, tick_us: u64, jitter: impl Fn(u64) -> u64) {
        let size = 1480;
        let tx = size as f64 * 8.0 * 1e6 / cap_bps;
        let (mut sent, mut link_free, mut i) = (0.0f64, 0.0f64, 0u64);
        while sent < duration_us as f64 {
            let gain = match (sent as u64 / 20_000) % 8 {
                0 => 1.25,
                1 => 0.75,
                _ => 1.0,
            };
            link_free = link_free.max(sent) + tx;
            let tick = (link_free as u64).div_ceil(tick_us) * tick_us;
            let arrive = tick + 1_000 + jitter(i);
            est.handle(Instant::from_micros(arrive), seq::truncate(i), sent as u32, size);
            sent += tx / gain;
            i += 1;
        }
    }

    #[test]
    fn clumped_arrivals_do_not_inflate_the_dispersion_rate() {
        // Regression (bench-bond 20 + 5 Mbit/s on a busy machine, kernel receive timestamps):
        // tbf released the 20 Mbit/s uplink's packets in clumps, and the estimate went to
        // 23-65 Mbit/s by dispersion. A gap inside a clump is nearly zero and always passed for
        // service time behind a queue; the longer gap before the next clump, which holds the
        // clump's service time, passed only while the queue was longer than it, and the few
        // milliseconds a paced sender keeps are not.
        for tick_us in [500, 1_000, 1_500, 2_000] {
            let mut e = RxEstimator::new(20e6);
            feed_ticked(&mut e, 10_000_000, 20e6, tick_us, |i| (i * 7919 % 13) * 5);
            let c = e.capacity_bps();
            assert!((c - 20e6).abs() < 1e6, "timer every {tick_us} us: capacity {c}");
        }
    }

    #[test]
    fn loss_tracks_bernoulli_rate() {
        let mut e = RxEstimator::new(1e6);
        feed(&mut e, 4000, 200, 10_000, 1e6, 20_000, 0, |i| i % 10 == 3);
        assert!((e.loss() - 0.1).abs() < 0.04, "loss {}", e.loss());
        assert_eq!(e.counts(), (3600, 400));
    }

    #[test]
    fn loss_decays_without_losses() {
        let mut e = RxEstimator::new(1e6);
        feed(&mut e, 100, 200, 10_000, 1e6, 0, 0, |i| i < 50 && i % 2 == 0);
        feed(&mut e, 0, 200, 10_000, 1e6, 0, 0, |_| false);
        assert!(e.loss() < 0.3);
    }

    #[test]
    fn owd_includes_clock_offset_and_ignores_queued_packets() {
        let mut e = RxEstimator::new(1e6);
        // Sparse packets: every one meets an empty queue, owd = delay + offset exactly.
        feed(&mut e, 50, 1000, 100_000, 1e6, 30_000, 5_000_000, |_| false);
        let owd = e.owd_us().unwrap();
        // recv - send = delay + tx - offset (the receiver's clock is `offset` behind the sender's).
        let want = 30_000u32.wrapping_sub(5_000_000);
        assert!((owd.wrapping_sub(want) as i32).abs() <= 2, "owd {owd} want {want}");
        // A back-to-back burst queues at the bottleneck; those samples must not raise the estimate.
        let mut e2 = RxEstimator::new(1e6);
        feed(&mut e2, 200, 1000, 1_000, 1e6, 30_000, 0, |_| false);
        let owd2 = e2.owd_us().unwrap() as i32;
        assert!((owd2 - 30_000).abs() <= 2, "burst owd {owd2}");
    }

    #[test]
    fn owd_stays_at_the_floor_under_a_standing_queue() {
        // Regression (bench-bond, 20 + 5 Mbit/s): packets spaced widely enough to pass the
        // empty-queue test still met a standing queue of 20 ms, and the average crept up to it,
        // so the busy uplink looked 4-23 ms slower than it was.
        let mut e = RxEstimator::new(1e6);
        let tx = 8_000u64; // 1000 B at 1 Mbit/s
        let mut t = 0u64;
        // 4.8 s: within the window of the minimum (the average has risen 19 ms by then).
        for i in 0..200u64 {
            let queue = if i < 10 { 0 } else { 20_000 };
            e.handle(Instant::from_micros(t + tx + 30_000 + queue), seq::truncate(i), t as u32, 1000);
            t += 3 * tx;
        }
        // The windowed minimum includes the packet's own transmission time, which the average
        // leaves out: d + δ may read up to one transmission high, never the queue.
        let owd = e.owd_us().unwrap();
        assert!((30_000..=30_000 + tx as u32 + 2).contains(&owd), "owd {owd} µs, the empty-queue delay is 30000");
    }

    #[test]
    fn a_queue_that_never_drains_leaks_into_the_owd_only_slowly() {
        // Regression (bench-bond, 20 + 5 Mbit/s, one CUBIC upload): the passenger keeps the
        // uplink's buffer 44-50 ms full for the whole run. Once the empty-queue samples of its
        // start left the 5-10 s window, d + δ jumped by 44 ms in one report.
        let mut e = RxEstimator::new(1e6);
        let tx = 8_000u64; // 1000 B at 1 Mbit/s
        let delay = 30_000u64;
        let mut t = 0u64;
        let mut i = 0u64;
        let mut send = |e: &mut RxEstimator, t: u64, queue: u64| {
            e.handle(Instant::from_micros(t + tx + delay + queue), seq::truncate(i), t as u32, 1000);
            i += 1;
        };
        for _ in 0..10 {
            send(&mut e, t, 0);
            t += 3 * tx;
        }
        let empty = e.owd_us().unwrap();
        let mut worst = 0u32;
        // 20 s of a queue between 44 and 50 ms, a packet every 24 ms.
        while t < 20_000_000 {
            send(&mut e, t, 44_000 + (t / 24_000) % 7 * 1_000);
            t += 3 * tx;
            let rise = e.owd_us().unwrap().wrapping_sub(empty);
            // By the time a second's rise is allowed, the window has held only queued samples
            // for at most 20 s - 5 s.
            // The average of quiet samples may rise to the windowed minimum, which counts the
            // packet's own transmission (8 ms here), as before.
            let allowed = ((t as f64 / 1e6 - 5.0).max(0.0) * OWD_FLOOR_RISE_US_PER_S) as u32 + tx as u32;
            assert!(rise <= allowed + 1, "d + δ rose {rise} µs by {t} µs; at most {allowed}");
            worst = worst.max(rise);
        }
        assert!(worst > tx as u32, "a queue that stands for 15 s and more does leak in, slowly: {worst} µs");
    }

    #[test]
    fn a_longer_path_is_followed_and_a_shorter_one_at_once() {
        let mut e = RxEstimator::new(1e6);
        let tx = 8_000u64;
        let mut seq = 0u64;
        let mut t = 0u64;
        let mut sparse = |e: &mut RxEstimator, t: &mut u64, delay: u64, n: u32| {
            for _ in 0..n {
                e.handle(Instant::from_micros(*t + tx + delay), seq::truncate(seq), *t as u32, 1000);
                seq += 1;
                *t += 3 * tx;
            }
        };
        let floor = |e: &RxEstimator| e.owd_floor.expect("packets seen").0;
        sparse(&mut e, &mut t, 30_000, 10);
        let short = floor(&e);
        // The path gets 20 ms longer (a handover), every packet still meeting an empty queue:
        // the bound on d + δ follows once the window holds only the longer path, at its pace.
        sparse(&mut e, &mut t, 50_000, 20_000_000 / (3 * tx as u32));
        let risen = floor(&e) - short;
        assert!((5_000.0..=15_000.0).contains(&risen), "{risen} µs of 20000 at 20 s");
        sparse(&mut e, &mut t, 50_000, 20_000_000 / (3 * tx as u32));
        assert_eq!(floor(&e) - short, 20_000.0, "followed within 40 s");
        assert!(e.owd_us().unwrap().wrapping_sub(30_000) <= 20_000 + tx as u32);
        // And 20 ms shorter again: the first packet shows it.
        sparse(&mut e, &mut t, 30_000, 1);
        assert_eq!(floor(&e), short);
        assert!(e.owd_us().unwrap().wrapping_sub(30_000) <= tx as u32);
    }

    #[test]
    fn recent_peak_sees_a_queue_and_forgets_it_once_drained() {
        let mut e = RxEstimator::new(1e6);
        let size = 1000;
        let tx = 8_000u64; // 1000 B at 1 Mbit/s
        let mut t = 0u64;
        let mut seq = 0u64;
        let mut send = |e: &mut RxEstimator, sent: u64, arrive: u64| {
            e.handle(Instant::from_micros(arrive), seq::truncate(seq), sent as u32, size);
            seq += 1;
        };
        // Sparse: every packet meets an empty queue, 30 ms + its transmission time.
        for _ in 0..10 {
            send(&mut e, t, t + tx + 30_000);
            t += 100_000;
        }
        let floor = e.owd_us().unwrap();
        assert_eq!(e.recent_peak_owd_us(), Some(floor + tx as u32));
        // A burst of 20 back-to-back packets sent 1 ms apart: the last waits 19 x 7 ms behind the
        // others.
        let mut free = t;
        for _ in 0..20 {
            free = free.max(t) + tx;
            send(&mut e, t, free + 30_000);
            t += 1_000;
        }
        let queued = e.recent_peak_owd_us().unwrap() - floor;
        assert!((130_000..=150_000).contains(&queued), "peak {queued} µs above the floor");
        assert_eq!(e.owd_us(), Some(floor), "the empty-queue delay ignores queued packets");
        // Sparse again: two buckets later the queue is forgotten.
        t = free + 100_000;
        for _ in 0..3 {
            send(&mut e, t, t + tx + 30_000);
            t += 100_000;
        }
        assert_eq!(e.recent_peak_owd_us(), Some(floor + tx as u32));
    }

    #[test]
    fn overflow_of_a_full_buffer_is_congestion_a_loss_on_an_empty_link_is_not() {
        let mut e = RxEstimator::new(10e6);
        let tx = 800u64; // 1000 B at 10 Mbit/s
        let mut seq = 0u64;
        // Sparse packets meet an empty link; one of them is lost on the air.
        let mut flags = Vec::new();
        for i in 0..20u64 {
            let t = i * 100_000;
            if i != 10 {
                flags.push(
                    e.handle(Instant::from_micros(t + tx + 30_000), seq::truncate(seq), t as u32, 1000).congested,
                );
            }
            seq += 1;
        }
        assert!(!flags.iter().any(|&c| c), "a loss at an empty queue is not congestion");
        assert_eq!(e.counts().1, 1);
        // Then a sender at 1.05x the link into a drop-tail buffer of 50 ms (a TCP flow probing
        // for more): the queue grows to the buffer, which then drops one packet in about twenty.
        let start = 2_100_000u64;
        let mut free = start;
        let (mut congested, mut lost) = (0, 0);
        for i in 0..3000u64 {
            let sent = start + i * 760;
            if free.saturating_sub(sent) > 50_000 {
                lost += 1;
                seq += 1;
                continue;
            }
            free = free.max(sent) + tx;
            let s = e.handle(Instant::from_micros(free + 30_000), seq::truncate(seq), sent as u32, 1000);
            seq += 1;
            congested += if s.congested { s.newly_lost } else { 0 };
            assert!(!s.congested || s.newly_lost > 0);
        }
        assert!(lost > 50, "{lost}");
        assert_eq!(congested, lost, "every overflow is seen as congestion");
    }

    /// A sender 5 % faster than a link feeding `e` through a drop-tail buffer of `buffer` bytes,
    /// 1000-byte packets, for `until` µs of sending; the link runs at `rate_at(t)` bit/s, each
    /// packet served at the rate when its service begins, and the sender paces at the rate when
    /// it sends. Returns the overflows from `judged_from` µs on and how many of them `e` saw as
    /// congestion.
    fn overflows_seen(
        e: &mut RxEstimator,
        buffer: u64,
        until: u64,
        judged_from: u64,
        rate_at: impl Fn(u64) -> f64,
    ) -> (u64, u64) {
        let size = 1000u64;
        let (mut sent, mut free, mut seq) = (0u64, 0u64, 0u64);
        let (mut congested, mut lost) = (0u64, 0u64);
        // Departure time and size of each packet in the buffer.
        let mut backlog: std::collections::VecDeque<(u64, u64)> = std::collections::VecDeque::new();
        while sent < until {
            // Bytes still queued: those whose departure is after `sent`.
            while backlog.front().is_some_and(|&(dep, _)| dep <= sent) {
                backlog.pop_front();
            }
            let queued: u64 = backlog.iter().map(|&(_, b)| b).sum();
            let judged = sent >= judged_from;
            if queued + size > buffer {
                lost += u64::from(judged);
            } else {
                let start = free.max(sent);
                free = start + (size as f64 * 8e6 / rate_at(start)) as u64;
                backlog.push_back((free, size));
                let s = e.handle(Instant::from_micros(free + 30_000), seq::truncate(seq), sent as u32, size as usize);
                congested += if judged && s.congested { s.newly_lost } else { 0 };
            }
            seq += 1;
            sent += (size as f64 * 8e6 / (rate_at(sent) * 1.05)) as u64;
        }
        (lost, congested)
    }

    #[test]
    fn overflow_of_a_full_buffer_is_congestion_while_the_rate_climbs() {
        // A sender 5 % faster than the link into a 50 kB drop-tail buffer; the link runs at 5
        // Mbit/s, then at 10 (a vehicle nearing an access point). The full buffer is 80 ms of
        // queue at first and 40 ms after: by delay alone, under 9/10 of the largest of the last
        // seconds, the overflows at the faster rate passed for wireless losses.
        let mut e = RxEstimator::new(5e6);
        let (lost, congested) =
            overflows_seen(&mut e, 50_000, 6_000_000, 4_500_000, |t| if t < 3_000_000 { 5e6 } else { 10e6 });
        assert!(lost > 50, "{lost}");
        assert_eq!(congested, lost, "every overflow at the faster rate is seen as congestion");
    }

    #[test]
    fn overflow_of_a_full_buffer_is_congestion_while_a_modems_rate_swings() {
        // A 100 kB drop-tail buffer on a link whose rate moves every 300 ms, as a cellular
        // modem's does on a drive, fed 5 % faster than it drains: the full buffer is 67 ms of
        // queue at 12 Mbit/s and 400 ms at 2. The capacity estimate trails each change, so a
        // queue in bytes taken from it read the full buffer as 50-200 kB, and most overflows
        // passed for wireless losses; counted from what the link delivered while each packet
        // waited, every one is the buffer's.
        let mut e = RxEstimator::new(6e6);
        let rates = [6e6, 12e6, 3e6, 9e6, 2e6, 12e6, 5e6, 10e6];
        // 9 s: within two FLOOR_BUCKETs, so the delay floor still holds the first packet's empty
        // queue.
        let (lost, congested) =
            overflows_seen(&mut e, 100_000, 9_000_000, 2_400_000, |t| rates[(t / 300_000) as usize % rates.len()]);
        assert!(lost > 200, "{lost}");
        assert!(congested * 100 >= lost * 95, "{congested} of {lost} overflows seen as congestion");
    }

    #[test]
    fn capacity_moves_down_after_three_fast_intervals() {
        // Estimate 2 Mbit/s, real bottleneck 1 Mbit/s, sender sends at 3 Mbit/s.
        let mut e = RxEstimator::new(2e6);
        feed(&mut e, 1000, 1250, 3_333, 1e6, 10_000, 0, |_| false);
        let c = e.capacity_bps();
        assert!((c - 1e6).abs() < 0.05e6, "capacity {c}");
    }

    #[test]
    fn capacity_counts_lost_packets_as_drained() {
        let mut e = RxEstimator::new(2e6);
        feed(&mut e, 1000, 1250, 3_333, 1e6, 10_000, 0, |i| i % 5 == 0);
        let c = e.capacity_bps();
        assert!((c - 1e6).abs() < 0.08e6, "capacity {c}");
    }

    #[test]
    fn an_idle_links_trickle_is_not_its_capacity() {
        // Regression (bench-bond, 20 + 5 Mbit/s gave 4.95): an uplink with no configured capacity
        // carried only probes and reports (here 100-byte packets every 20 ms, 40 kbit/s) before
        // traffic started, and that trickle became its estimate.
        let mut e = RxEstimator::new(0.0);
        feed(&mut e, 200, 100, 20_000, 20e6, 1_000, 0, |_| false);
        assert_eq!(e.capacity_bps(), 0.0, "a trickle is no measurement of a 20 Mbit/s link");
    }

    #[test]
    fn a_delivery_rate_well_above_the_estimate_raises_it_at_once() {
        // Estimate 1 Mbit/s; the sender probes at 2 Mbit/s for 200 ms through a 20 Mbit/s link:
        // the link delivered 2 Mbit/s, a lower bound on its capacity, taken without three
        // intervals' streak.
        let mut e = RxEstimator::new(1e6);
        feed(&mut e, 36, 1250, 5_000, 20e6, 1_000, 0, |_| false);
        let c = e.capacity_bps();
        assert!((c - 2e6).abs() < 0.1e6, "capacity {c}");
        // Jitter of a few per cent never ratchets it up: 2.1 Mbit/s is within the margin.
        let mut e = RxEstimator::new(2e6);
        feed(&mut e, 100, 1250, 4_760, 20e6, 1_000, 0, |_| false);
        assert_eq!(e.capacity_bps(), 2e6);
    }

    #[test]
    fn capacity_ignores_slow_senders() {
        // Sender at 100 kbit/s on a 1 Mbit/s link: intervals do not qualify, estimate stays put.
        let mut e = RxEstimator::new(1e6);
        feed(&mut e, 300, 1250, 100_000, 1e6, 10_000, 0, |_| false);
        assert_eq!(e.capacity_bps(), 1e6);
    }

    #[test]
    fn capacity_comes_down_when_the_sender_outpaces_the_link_below_the_estimate() {
        // Estimate 10 Mbit/s; cross traffic leaves 3 Mbit/s; we send at 4 Mbit/s (never near the
        // stale estimate, so PluriBus' rule alone would keep 10).
        let mut e = RxEstimator::new(10e6);
        feed(&mut e, 1500, 1250, 2_500, 3e6, 10_000, 0, |_| false);
        let c = e.capacity_bps();
        assert!((c - 3e6).abs() < 0.15e6, "capacity {c}");
    }

    #[test]
    fn capacity_comes_down_under_a_standing_queue_at_equal_send_and_receive_rates() {
        // An ACK-clocked sender: first a burst fills the queue, then it sends exactly at the
        // 3 Mbit/s the link drains, so send rate == receive rate while the queue stands.
        let mut e = RxEstimator::new(10e6);
        feed(&mut e, 40, 1250, 0, 3e6, 10_000, 0, |_| false); // fills a 130 ms queue
        // Steady sending starts right behind the burst, so its 40 packets stay queued ahead.
        let mut link_free = 40 * 3_334u64;
        for i in 40..2000u64 {
            let sent = (i - 40) * 3_334;
            link_free = link_free.max(sent) + 3_334;
            e.handle(Instant::from_micros(link_free + 10_000), seq::truncate(i), sent as u32, 1250);
        }
        let c = e.capacity_bps();
        assert!((c - 3e6).abs() < 0.15e6, "capacity {c}");
    }

    #[test]
    fn capacity_interval_is_pluribus_500_ms_up_to_1_5_mbit_and_shorter_above() {
        assert_eq!(RxEstimator::new(0.0).capacity_interval(), CAPACITY_INTERVAL);
        assert_eq!(RxEstimator::new(200e3).capacity_interval(), CAPACITY_INTERVAL);
        assert_eq!(RxEstimator::new(1.5e6).capacity_interval(), CAPACITY_INTERVAL);
        assert_eq!(RxEstimator::new(3e6).capacity_interval(), Duration::from_millis(250));
        assert_eq!(RxEstimator::new(100e6).capacity_interval(), MIN_CAPACITY_INTERVAL);
    }

    /// Sends 1250-byte packets at `offered_bps` through a FIFO whose rate is `before_bps` until
    /// `change_us`, then `after_bps`; returns when (µs after the change) the estimate first came
    /// within 10 % of `after_bps`, if it did before `end_us`.
    fn follow(
        est: &mut RxEstimator,
        offered_bps: f64,
        before_bps: f64,
        after_bps: f64,
        change_us: u64,
        end_us: u64,
    ) -> Option<u64> {
        let size = 1250;
        let gap = (size as f64 * 8.0 * 1e6 / offered_bps) as u64;
        let mut link_free = 0u64;
        let mut i = 0u64;
        loop {
            let sent = i * gap;
            let start = sent.max(link_free);
            let rate = if start < change_us { before_bps } else { after_bps };
            link_free = start + (size as f64 * 8.0 * 1e6 / rate) as u64;
            let arrive = link_free + 10_000;
            if arrive >= end_us {
                return None;
            }
            est.handle(Instant::from_micros(arrive), seq::truncate(i), sent as u32, size);
            if arrive > change_us && (est.capacity_bps() - after_bps).abs() <= 0.1 * after_bps {
                return Some(arrive - change_us);
            }
            i += 1;
        }
    }

    #[test]
    fn a_fast_link_follows_a_fall_faster_than_pluribus_intervals_allow() {
        // 10 Mbit/s, cross traffic takes 7 of them at 2 s; the sender keeps offering 11 Mbit/s.
        // Three 500 ms intervals, the first of them partly before the fall, take over 1 s.
        let mut e = RxEstimator::new(10e6);
        let after = follow(&mut e, 11e6, 10e6, 3e6, 2_000_000, 6_000_000).expect("estimate followed the fall");
        assert!(after < 600_000, "took {after} µs");
        // A 1.5 Mbit/s link keeps PluriBus' intervals: the same fall, to 0.45 Mbit/s, takes them.
        let mut slow = RxEstimator::new(1.5e6);
        let after = follow(&mut slow, 1.65e6, 1.5e6, 0.45e6, 2_000_000, 8_000_000).expect("estimate followed the fall");
        assert!(after > 1_000_000, "took {after} µs");
    }

    #[test]
    fn capacity_moves_up_when_link_is_faster() {
        let mut e = RxEstimator::new(0.5e6);
        feed(&mut e, 2000, 1250, 1_000, 2e6, 10_000, 0, |_| false);
        let c = e.capacity_bps();
        assert!((c - 2e6).abs() < 0.1e6, "capacity {c}");
    }
}
