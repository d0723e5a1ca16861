//! One direction of an emulated uplink, sans-IO: a FIFO bottleneck (constant rate or mahimahi
//! trace) behind a drop-tail queue, then a loss process and outages, then propagation delay.
//!
//! [`LinkModel`] never reads a clock: every call takes `now` as a [`braid_proto::Instant`], and
//! [`LinkModel::poll_timeout`] says when to call again (quinn-proto's shape). The
//! simulator passes virtual time; the testbed emulator will pass real time. The payload type `P`
//! is opaque to the model, which only needs each packet's size.
//!
//! # Semantics (the contract)
//!
//! * **Bottleneck.** Packets are served one at a time in arrival order. A packet *starts
//!   service* (it is "in service") at `max(arrival, departure of the previous packet)`.
//!   - Constant rate `r` kbit/s: it leaves `size * 8 / r` seconds after it starts. Back-to-back
//!     packets at one rate are timed from the start of their busy run, so they leave exactly
//!     `size * 8 / r` apart with no rounding drift; each departure is rounded *up* to the
//!     microsecond (a packet never leaves before its last bit is sent).
//!   - Trace (mahimahi): each trace line is one 1500-byte opportunity at that millisecond. An
//!     opportunity carries bytes of the head packet, then of the next ones; a packet larger than
//!     what is left of an opportunity continues in the next opportunities and leaves at the one
//!     that carries its last byte. What an opportunity does not use is lost once the queue is
//!     empty (mm-link). An opportunity at time `T` can carry a packet that arrived at or before
//!     `T` (mm-link's millisecond clock excludes same-millisecond arrivals; at microsecond
//!     resolution we include the exact instant). The trace repeats with its period; its time 0 is
//!     the model's `Instant::ZERO`, the start of the run.
//!   - Rate 0 (a constant or scheduled 0, or a trace with no opportunities): the head packet waits
//!     until the schedule raises the rate, then starts at that moment; if nothing ever raises it,
//!     the packet and everything behind it stay in the model forever (they are never reported,
//!     see [`LinkModel::packets_in_link`]) and the queue fills and drops.
//! * **Queue.** Drop-tail: a packet that would have to wait is refused when the bytes already
//!   waiting plus its own exceed `queue_bytes`. The packet in service does not count, so a packet
//!   reaching an idle link is always accepted, and `queue_bytes = 0` means "one packet in
//!   service, nothing waiting". On a trace link the head packet is in service while it waits for
//!   its opportunity.
//! * **Loss**, decided as the packet leaves the bottleneck (it has consumed capacity): the random
//!   loss process draws first (see [`LossProcess::lost`] for the Gilbert-Elliott order), then a
//!   departure inside an [`Outage`](super::Outage) `[at, at + duration)` is lost to the outage
//!   whatever the draw said. Drawing even during outages keeps the random stream aligned, so
//!   adding an outage does not change the fate of packets outside it.
//! * **Propagation delay** is added at departure; a delivery is never earlier than the previous
//!   delivery, so a delay that drops never lets a packet overtake an earlier one.
//! * **Schedule** ([`Schedule::at`](super::Schedule::at) semantics, resolved to the microsecond):
//!   its rate is read when a packet starts service and holds for that whole packet (a scheduled
//!   rate replaces a trace; a packet already being carried by a trace finishes on the trace); its
//!   delay and loss (Bernoulli, replacing the spec's process, whose Gilbert chain is then frozen)
//!   are read when the packet leaves the bottleneck.
//! * **Time** never goes backwards: a `now` earlier than one already seen is taken as the latest.
//! * All randomness comes from one ChaCha8 stream seeded by `seed`: the same spec, seed and calls
//!   give the same results on every platform.
//!
//! # Cost
//!
//! A packet's whole fate is computed when it is accepted (FIFO makes it depend only on packets
//! before it), so every call is O(1) amortised, plus O(log n) to find the next trace opportunity
//! after the link was idle. The only allocations are the growth of three `VecDeque`s.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use braid_proto::Instant;
use braid_proto::time::duration_micros;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::loss::LossProcess;
use super::spec::{LinkDirSpec, RateSpec, Schedule, TRACE_OPPORTUNITY_BYTES, Trace};

#[cfg(test)]
mod tests;

/// Width of the window over which [`LinkModel::true_rate_kbps`] averages a trace's capacity.
pub const TRACE_RATE_WINDOW: Duration = Duration::from_secs(1);

/// The outcome of [`LinkModel::enqueue`].
#[must_use = "a dropped packet is handed back and must be accounted for"]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Enqueue<P> {
    /// Accepted; it will come out of [`LinkModel::poll_deliver`] as delivered or lost.
    Queued,
    /// Refused by the drop-tail queue (congestion loss); the packet is handed back.
    Dropped(P),
}

/// Why a packet that left the bottleneck never arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LossCause {
    /// The random loss process (Bernoulli, Gilbert-Elliott or the schedule's loss).
    Random,
    /// It left the bottleneck during an outage.
    Outage,
}

/// A packet coming out of the link, from [`LinkModel::poll_deliver`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery<P> {
    /// It reached the far end at `at`.
    Delivered {
        /// Arrival time at the far end (may be earlier than the `now` it was polled at).
        at: Instant,
        /// The packet.
        packet: P,
    },
    /// It left the bottleneck at `at` and was lost there.
    Lost {
        /// When it left the bottleneck.
        at: Instant,
        /// What lost it.
        cause: LossCause,
        /// The packet, handed back so that the caller can count or recycle it.
        packet: P,
    },
}

impl<P> Delivery<P> {
    /// When it happened: arrival at the far end, or the loss.
    pub fn at(&self) -> Instant {
        match self {
            Delivery::Delivered { at, .. } | Delivery::Lost { at, .. } => *at,
        }
    }
}

/// Counters of one link direction. They count what has happened up to the latest `now` given to
/// [`LinkModel::enqueue`] or [`LinkModel::poll_deliver`], and losses and deliveries only once
/// `poll_deliver` has reported them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkModelStats {
    /// Packets offered to `enqueue`.
    pub offered_packets: u64,
    /// Bytes offered to `enqueue`.
    pub offered_bytes: u64,
    /// Packets refused by the drop-tail queue.
    pub queue_drops: u64,
    /// Packets lost by the random loss process.
    pub random_losses: u64,
    /// Packets lost to outages.
    pub outage_losses: u64,
    /// Packets delivered to the far end.
    pub delivered_packets: u64,
    /// Bytes delivered to the far end.
    pub delivered_bytes: u64,
    /// Time during which a packet was in service (serialising, waiting for a trace opportunity or
    /// for a zero rate to rise) and has since left. `busy / elapsed` is the bottleneck's
    /// utilisation.
    pub busy: Duration,
}

/// One direction of an emulated link; see the [module docs](self) for the exact semantics.
#[derive(Debug)]
pub struct LinkModel<P> {
    /// The spec's own capacity, used when the schedule sets no rate.
    base: Capacity,
    /// The spec's propagation delay, µs.
    delay_us: u64,
    queue_bytes: usize,
    loss: LossProcess,
    rng: ChaCha8Rng,
    schedule: Timeline,
    outages: Outages,

    /// The latest `now` seen.
    clock: Instant,
    /// When the bottleneck is free: departure of the last accepted packet (`MAX`: never).
    free_at: Instant,
    /// The constant-rate busy run the last packet belonged to, if any.
    run: Option<Run>,
    /// The latest delivery time handed out, to keep deliveries FIFO.
    last_delivery: Instant,

    /// Accepted packets that have not left the bottleneck by `clock`, in FIFO order.
    bottleneck: VecDeque<Slot>,
    /// How many of `bottleneck`'s leading slots have started service by `clock`.
    started: usize,
    /// Bytes of the slots that have not started (u128: a sum of `usize` sizes cannot overflow).
    waiting_bytes: u128,

    /// Packets that will be delivered, by non-decreasing delivery time.
    arrivals: VecDeque<Pending<P>>,
    /// Packets that will be lost, by non-decreasing departure time.
    losses: VecDeque<Pending<P>>,
    stats: LinkModelStats,
}

/// Bottleneck bookkeeping for the queue length and busy time.
#[derive(Debug, Clone, Copy)]
struct Slot {
    start: Instant,
    departure: Instant,
    size: usize,
}

/// A packet whose fate is decided, waiting for its time to be reported.
#[derive(Debug)]
struct Pending<P> {
    at: Instant,
    size: usize,
    /// Only meaningful in `losses`.
    cause: LossCause,
    packet: P,
}

/// Back-to-back packets served at one constant rate, timed from the run's start so that rounding
/// to microseconds does not accumulate.
#[derive(Debug, Clone, Copy)]
struct Run {
    begin: Instant,
    rate_kbps: f64,
    bits: u64,
}

#[derive(Debug)]
enum Capacity {
    /// kbit/s, sanitised: 0 for anything not positive.
    Constant(f64),
    Trace(TraceCursor),
}

impl<P> LinkModel<P> {
    /// A link direction behaving as `spec`, with every random draw taken from a stream seeded by
    /// `seed`. Never panics: a NaN or negative rate is 0, an unsorted hand-built trace is sorted,
    /// an empty one has no capacity, delays and times saturate at `Instant::MAX` ("never").
    pub fn new(spec: &LinkDirSpec, seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let loss = LossProcess::new(&spec.loss, &mut rng);
        let base = match &spec.rate {
            RateSpec::Constant { kbps } => Capacity::Constant(sanitize_rate(*kbps)),
            RateSpec::Trace(trace) => match TraceCursor::new(trace) {
                Some(cursor) => Capacity::Trace(cursor),
                None => Capacity::Constant(0.0),
            },
        };
        LinkModel {
            base,
            delay_us: duration_micros(spec.delay),
            queue_bytes: spec.queue_bytes,
            loss,
            rng,
            schedule: Timeline::new(spec.schedule.as_deref()),
            outages: Outages::new(&spec.outages),
            clock: Instant::ZERO,
            free_at: Instant::ZERO,
            run: None,
            last_delivery: Instant::ZERO,
            bottleneck: VecDeque::new(),
            started: 0,
            waiting_bytes: 0,
            arrivals: VecDeque::new(),
            losses: VecDeque::new(),
            stats: LinkModelStats::default(),
        }
    }

    /// Offers a packet of `size` bytes at `now`. It is refused ([`Enqueue::Dropped`]) when it
    /// would have to wait and the waiting bytes plus `size` would exceed the spec's
    /// `queue_bytes`; otherwise its fate is sealed and it comes out of [`Self::poll_deliver`].
    pub fn enqueue(&mut self, now: Instant, size: usize, packet: P) -> Enqueue<P> {
        let now = self.advance(now);
        self.stats.offered_packets += 1;
        self.stats.offered_bytes = self.stats.offered_bytes.saturating_add(size as u64);

        let start = now.max(self.free_at);
        let waits = start > now;
        if waits && self.waiting_bytes + size as u128 > self.queue_bytes as u128 {
            self.stats.queue_drops += 1;
            return Enqueue::Dropped(packet);
        }

        let departure = self.serve(now, start, size);
        self.free_at = departure;
        self.bottleneck.push_back(Slot { start, departure, size });
        if waits {
            self.waiting_bytes += size as u128;
        } else {
            // Every earlier slot started no later than this one, so all are counted already.
            self.started += 1;
        }

        if departure == Instant::MAX {
            // Stuck behind a zero rate that never rises: no fate to draw, never reported.
            self.arrivals.push_back(Pending { at: Instant::MAX, size, cause: LossCause::Random, packet });
            return Enqueue::Queued;
        }
        let row = self.schedule.current(departure);
        let lost = match row.and_then(|r| r.loss) {
            Some(p) => self.rng.random::<f64>() < p,
            None => self.loss.lost(&mut self.rng),
        };
        let cause = if self.outages.contains(departure) {
            Some(LossCause::Outage)
        } else if lost {
            Some(LossCause::Random)
        } else {
            None
        };
        if let Some(cause) = cause {
            self.losses.push_back(Pending { at: departure, size, cause, packet });
        } else {
            let delay = row.and_then(|r| r.delay_us).unwrap_or(self.delay_us);
            let at = Instant::from_micros(departure.as_micros().saturating_add(delay)).max(self.last_delivery);
            self.last_delivery = at;
            self.arrivals.push_back(Pending { at, size, cause: LossCause::Random, packet });
        }
        Enqueue::Queued
    }

    /// The earliest time at which [`Self::poll_deliver`] will have something to report (a delivery
    /// or a loss), or `None` if nothing is pending that will ever come out.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let next = |q: &VecDeque<Pending<P>>| q.front().map(|p| p.at).filter(|&t| t != Instant::MAX);
        match (next(&self.arrivals), next(&self.losses)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The next packet that reached the far end, or was lost, at or before `now`, in time order
    /// (deliveries in FIFO order); `None` when there is nothing more up to `now`. Call it until
    /// it returns `None`.
    pub fn poll_deliver(&mut self, now: Instant) -> Option<Delivery<P>> {
        let now = self.advance(now);
        let due = |q: &VecDeque<Pending<P>>| q.front().map(|p| p.at).filter(|&t| t <= now && t != Instant::MAX);
        let take_loss = match (due(&self.arrivals), due(&self.losses)) {
            (None, None) => return None,
            (Some(a), Some(l)) => l < a,
            (a, _) => a.is_none(),
        };
        if take_loss {
            let p = self.losses.pop_front()?;
            match p.cause {
                LossCause::Random => self.stats.random_losses += 1,
                LossCause::Outage => self.stats.outage_losses += 1,
            }
            Some(Delivery::Lost { at: p.at, cause: p.cause, packet: p.packet })
        } else {
            let p = self.arrivals.pop_front()?;
            self.stats.delivered_packets += 1;
            self.stats.delivered_bytes = self.stats.delivered_bytes.saturating_add(p.size as u64);
            Some(Delivery::Delivered { at: p.at, packet: p.packet })
        }
    }

    /// The counters; see [`LinkModelStats`] for when they are updated.
    pub fn stats(&self) -> &LinkModelStats {
        &self.stats
    }

    /// Bytes waiting in the queue at `now` (not counting the packet in service): what drop-tail
    /// compares with `queue_bytes`. A `now` before the latest seen counts as the latest.
    pub fn queued_bytes(&self, now: Instant) -> usize {
        let now = now.max(self.clock);
        let just_started: u128 = self
            .bottleneck
            .range(self.started..)
            .take_while(|s| s.start <= now && s.start != Instant::MAX)
            .map(|s| s.size as u128)
            .sum();
        usize::try_from(self.waiting_bytes - just_started).unwrap_or(usize::MAX)
    }

    /// Packets accepted and not yet reported by [`Self::poll_deliver`] (queued, in service or
    /// propagating), including any stuck behind a rate that never rises. With the counters,
    /// `offered = delivered + random + outage losses + drops + packets_in_link`.
    pub fn packets_in_link(&self) -> usize {
        self.arrivals.len() + self.losses.len()
    }

    /// The capacity in force at `now`, kbit/s: the schedule's rate if it sets one, else the
    /// constant rate, else the trace's capacity averaged over [`TRACE_RATE_WINDOW`] centred on
    /// `now` (or starting at 0 near the start). This is the ground truth for "estimated vs true
    /// capacity" reports; it does not change the model's state.
    pub fn true_rate_kbps(&self, now: Instant) -> f64 {
        if let Some(rate) = self.schedule.at(now).and_then(|r| r.rate_kbps) {
            return rate;
        }
        match &self.base {
            Capacity::Constant(kbps) => *kbps,
            Capacity::Trace(cursor) => {
                let window_ms = TRACE_RATE_WINDOW.as_millis() as u64;
                let from = (now.as_micros() / 1000).saturating_sub(window_ms / 2);
                let count =
                    cursor.count_before(from.saturating_add(window_ms)).saturating_sub(cursor.count_before(from));
                (count as f64) * (TRACE_OPPORTUNITY_BYTES * 8) as f64 / window_ms as f64
            }
        }
    }

    /// Moves the clock to `now` (never backwards) and retires what has started or left by then.
    fn advance(&mut self, now: Instant) -> Instant {
        let now = now.max(self.clock);
        self.clock = now;
        while let Some(slot) = self.bottleneck.get(self.started)
            && slot.start <= now
            && slot.start != Instant::MAX
        {
            self.waiting_bytes -= slot.size as u128;
            self.started += 1;
        }
        while let Some(slot) = self.bottleneck.front()
            && slot.departure <= now
            && slot.departure != Instant::MAX
        {
            // A slot that has left has started (start <= departure <= now), so `started >= 1`.
            self.stats.busy = self.stats.busy.saturating_add(slot.departure - slot.start);
            self.bottleneck.pop_front();
            self.started -= 1;
        }
        now
    }

    /// Serves a packet of `size` bytes that arrived at `arrival` and starts service at `start`;
    /// returns its departure from the bottleneck (`MAX`: never).
    fn serve(&mut self, arrival: Instant, start: Instant, size: usize) -> Instant {
        if start == Instant::MAX {
            return Instant::MAX;
        }
        let scheduled = self.schedule.current(start).and_then(|r| r.rate_kbps);
        let rate = match (scheduled, &mut self.base) {
            (Some(rate), _) => rate,
            (None, Capacity::Constant(rate)) => *rate,
            (None, Capacity::Trace(cursor)) => {
                self.run = None;
                return cursor.carry(start, size);
            }
        };
        self.serve_constant(arrival, start, rate, size)
    }

    fn serve_constant(&mut self, arrival: Instant, start: Instant, rate_kbps: f64, size: usize) -> Instant {
        let (begin, rate_kbps) = if rate_kbps > 0.0 {
            (start, rate_kbps)
        } else {
            match self.schedule.next_raise(start) {
                Some(raise) => raise,
                None => return Instant::MAX,
            }
        };
        // A trace's unused credit is gone once another mode has served a packet.
        if let Capacity::Trace(cursor) = &mut self.base {
            cursor.credit_at = None;
        }
        let bits = (size as u64).saturating_mul(8);
        // Continue the busy run only if this packet was already waiting when the previous one
        // left (no idle gap, no stall) and the rate is the same.
        let run = match &mut self.run {
            Some(run) if run.rate_kbps == rate_kbps && begin == self.free_at && arrival < self.free_at => {
                run.bits = run.bits.saturating_add(bits);
                *run
            }
            _ => *self.run.insert(Run { begin, rate_kbps, bits }),
        };
        // bits / kbps = ms; *1000 = µs. An infinite rate gives 0, a tiny one saturates to "never".
        let micros = (run.bits as f64 * 1000.0 / run.rate_kbps).ceil();
        Instant::from_micros(run.begin.as_micros().saturating_add(micros as u64))
    }
}

/// 0 for rates that cannot serve anything (NaN, negative, zero).
fn sanitize_rate(kbps: f64) -> f64 {
    if kbps > 0.0 { kbps } else { 0.0 }
}

/// Position in a repeating mahimahi trace, and the unused credit of the last opportunity.
#[derive(Debug)]
struct TraceCursor {
    trace: Arc<Trace>,
    period_ms: u64,
    /// Completed repetitions before the next unused opportunity.
    lap: u64,
    /// Index of the next unused opportunity in `trace.opportunities_ms`.
    idx: usize,
    /// Bytes left in the opportunity at `credit_at`, usable by a packet already in service then.
    credit: usize,
    credit_at: Option<Instant>,
}

impl TraceCursor {
    /// `None` for a trace without opportunities (no capacity). A hand-built trace that is out of
    /// order, or whose period is shorter than its last timestamp, is repaired rather than trusted.
    fn new(trace: &Arc<Trace>) -> Option<Self> {
        let trace = if trace.opportunities_ms.is_sorted() {
            Arc::clone(trace)
        } else {
            let mut sorted = (**trace).clone();
            sorted.opportunities_ms.sort_unstable();
            Arc::new(sorted)
        };
        let last = *trace.opportunities_ms.last()?;
        let period_ms = trace.period_ms.max(last).max(1);
        Some(TraceCursor { trace, period_ms, lap: 0, idx: 0, credit: 0, credit_at: None })
    }

    fn len(&self) -> u64 {
        self.trace.opportunities_ms.len() as u64
    }

    fn time(&self, lap: u64, idx: usize) -> Instant {
        let ms = lap.saturating_mul(self.period_ms).saturating_add(self.trace.opportunities_ms[idx]);
        Instant::from_micros(ms.saturating_mul(1000))
    }

    /// Moves the cursor to the first unused opportunity at or after `t` and returns its time.
    fn seek(&mut self, t: Instant) -> Instant {
        let here = self.time(self.lap, self.idx);
        if here >= t {
            return here;
        }
        let opps = &self.trace.opportunities_ms;
        let target_ms = t.as_micros().div_ceil(1000);
        // Start one lap early: the previous lap's entries equal to the period fall on this lap's
        // first millisecond. Never move backwards.
        let mut lap = (target_ms / self.period_ms).saturating_sub(1).max(self.lap);
        loop {
            let base = lap.saturating_mul(self.period_ms);
            let mut i = if base >= target_ms { 0 } else { opps.partition_point(|&o| o < target_ms - base) };
            if lap == self.lap {
                i = i.max(self.idx);
            }
            if i < opps.len() {
                self.lap = lap;
                self.idx = i;
                return self.time(lap, i);
            }
            // Terminates: once `base >= target_ms`, index 0 qualifies (the trace is non-empty).
            lap = lap.saturating_add(1);
        }
    }

    /// Skips `n` opportunities.
    fn skip(&mut self, n: u64) {
        let abs = (self.idx as u64).saturating_add(n);
        self.lap = self.lap.saturating_add(abs / self.len());
        self.idx = (abs % self.len()) as usize;
    }

    /// Carries a packet of `size` bytes in service from `start`; returns the time of the
    /// opportunity that carries its last byte. O(1) in the packet size.
    fn carry(&mut self, start: Instant, size: usize) -> Instant {
        let mut remaining = size;
        if let Some(at) = self.credit_at
            && at >= start
        {
            let take = remaining.min(self.credit);
            self.credit -= take;
            remaining -= take;
            if remaining == 0 {
                return at;
            }
        }
        self.seek(start);
        // Opportunities needed (a 0-byte packet still rides one), all consecutive: the packet
        // is at the head and takes every opportunity until it is done.
        let needed = remaining.div_ceil(TRACE_OPPORTUNITY_BYTES).max(1);
        self.skip(needed as u64 - 1);
        let last = self.time(self.lap, self.idx);
        self.skip(1);
        self.credit = (TRACE_OPPORTUNITY_BYTES - remaining % TRACE_OPPORTUNITY_BYTES) % TRACE_OPPORTUNITY_BYTES;
        if remaining == 0 {
            self.credit = TRACE_OPPORTUNITY_BYTES;
        }
        self.credit_at = Some(last);
        last
    }

    /// Opportunities at times before `ms` in the repeating trace.
    fn count_before(&self, ms: u64) -> u64 {
        let opps = &self.trace.opportunities_ms;
        let (lap, rem) = (ms / self.period_ms, ms % self.period_ms);
        let mut count = lap.saturating_mul(self.len()).saturating_add(opps.partition_point(|&o| o < rem) as u64);
        if lap > 0 {
            // Entries of the previous lap at or past `period + rem` land at or after `ms`.
            let late = opps.partition_point(|&o| o < self.period_ms.saturating_add(rem)) as u64;
            count = count.saturating_sub(self.len() - late);
        }
        count
    }
}

/// A schedule compiled for lookups by time: each row carries every field in force from its time
/// on (the cumulative form of [`Schedule::at`]), sanitised.
#[derive(Debug, Default)]
struct Timeline {
    rows: Vec<TimelineRow>,
    /// Rows at or before the latest time looked up with `current` (queries are monotone).
    cursor: usize,
}

#[derive(Debug, Clone, Copy)]
struct TimelineRow {
    at: Instant,
    delay_us: Option<u64>,
    loss: Option<f64>,
    rate_kbps: Option<f64>,
}

impl Timeline {
    fn new(schedule: Option<&Schedule>) -> Self {
        // Sort by the resolved instant (stable, so equal times keep file order): a hand-built
        // schedule may be out of order or hold a NaN time, which resolves to 0.
        let mut input: Vec<_> =
            schedule.map(|s| s.rows.iter().map(|r| (Instant::from_secs_f64(r.t_s), *r)).collect()).unwrap_or_default();
        input.sort_by_key(|(at, _)| *at);
        let mut rows: Vec<TimelineRow> = Vec::with_capacity(input.len());
        let mut state = TimelineRow { at: Instant::ZERO, delay_us: None, loss: None, rate_kbps: None };
        for (at, r) in input {
            state.at = at;
            // `as` saturates and maps NaN to 0, so any float becomes a valid delay.
            state.delay_us = r.delay_ms.map(|ms| (ms * 1000.0).round() as u64).or(state.delay_us);
            state.loss = r.loss.or(state.loss);
            state.rate_kbps = r.rate_kbps.map(sanitize_rate).or(state.rate_kbps);
            rows.push(state);
        }
        Timeline { rows, cursor: 0 }
    }

    /// The row in force at `t`, for `t` no earlier than the previous call's.
    fn current(&mut self, t: Instant) -> Option<TimelineRow> {
        while self.rows.get(self.cursor).is_some_and(|r| r.at <= t) {
            self.cursor += 1;
        }
        self.cursor.checked_sub(1).map(|i| self.rows[i])
    }

    /// The row in force at any `t` (binary search; does not move the cursor).
    fn at(&self, t: Instant) -> Option<TimelineRow> {
        self.rows.partition_point(|r| r.at <= t).checked_sub(1).map(|i| self.rows[i])
    }

    /// The first time after `t` (the latest `current` query) at which the scheduled rate becomes
    /// positive, with that rate.
    fn next_raise(&self, t: Instant) -> Option<(Instant, f64)> {
        self.rows[self.cursor..]
            .iter()
            .filter(|r| r.at > t)
            .find_map(|r| r.rate_kbps.filter(|&k| k > 0.0).map(|k| (r.at, k)))
    }
}

/// Outage windows as sorted, merged `[start, end)` intervals, walked with a cursor because the
/// departure times asked about never decrease.
#[derive(Debug, Default)]
struct Outages {
    windows: Vec<(Instant, Instant)>,
    cursor: usize,
}

impl Outages {
    fn new(outages: &[super::Outage]) -> Self {
        let mut raw: Vec<(Instant, Instant)> = outages
            .iter()
            .map(|o| (Instant::ZERO + o.at, Instant::ZERO + o.at + o.duration))
            .filter(|(s, e)| s < e)
            .collect();
        raw.sort();
        let mut windows: Vec<(Instant, Instant)> = Vec::with_capacity(raw.len());
        for (s, e) in raw {
            match windows.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => windows.push((s, e)),
            }
        }
        Outages { windows, cursor: 0 }
    }

    /// Whether `t` (no earlier than the previous query) falls in an outage.
    fn contains(&mut self, t: Instant) -> bool {
        while self.windows.get(self.cursor).is_some_and(|w| w.1 <= t) {
            self.cursor += 1;
        }
        self.windows.get(self.cursor).is_some_and(|w| w.0 <= t)
    }
}
