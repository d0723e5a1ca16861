//! The sequencing buffer (PluriBus 5.4): in-order packets go to the TUN device at once; out-of-order
//! ones wait until the gap is filled (by arrival or recovery) or until their hold time expires, at
//! which point the gap is skipped. A skipped packet that turns up later is still delivered (late)
//! rather than thrown away: the passenger's TCP can use it. Nothing is ever delivered twice.

use crate::time::Instant;
use bytes::Bytes;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

/// A packet leaving the buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivered {
    /// Its global sequence number.
    pub seq: u64,
    /// The passenger packet.
    pub packet: Bytes,
    /// True if it arrived after the buffer had given up waiting for it (out of order).
    pub late: bool,
}

/// What happened to an inserted packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Insert {
    /// New; delivered now or held.
    Accepted,
    /// Already delivered or held: dropped.
    Duplicate,
}

/// Counters for reports (docs/design.md 6: reordering, hold time).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ReorderStats {
    /// Delivered without waiting.
    pub in_order: u64,
    /// Delivered after waiting for a gap to fill.
    pub waited: u64,
    /// Total time packets waited, µs.
    pub wait_us: u64,
    /// Delivered after their gap had been skipped.
    pub late: u64,
    /// Sequence numbers skipped when a hold expired or the hole was given up
    /// ([`ReorderBuffer::abandon`]).
    pub skipped: u64,
    /// Of those, the holes given up at once as congestion losses.
    pub abandoned: u64,
    /// Duplicates dropped.
    pub duplicates: u64,
}

#[derive(Debug, Clone)]
struct Held {
    packet: Bytes,
    arrived: Instant,
    deadline: Instant,
}

/// The sequencing buffer.
#[derive(Debug, Clone)]
pub struct ReorderBuffer {
    next: u64,
    held: BTreeMap<u64, Held>,
    deadlines: BTreeSet<(Instant, u64)>,
    skipped: BTreeSet<u64>,
    /// Holes above the next expected number that are given up: skipped as soon as everything
    /// before them has gone out.
    abandoned: BTreeSet<u64>,
    ready: VecDeque<Delivered>,
    max_held: usize,
    stats: ReorderStats,
}

/// Skipped sequence numbers remembered for late delivery (older ones are forgotten).
const SKIPPED_MEMORY: u64 = 1 << 16;

impl ReorderBuffer {
    /// An empty buffer expecting sequence number 0, holding at most `max_held` packets.
    pub fn new(max_held: usize) -> Self {
        ReorderBuffer {
            next: 0,
            held: BTreeMap::new(),
            deadlines: BTreeSet::new(),
            skipped: BTreeSet::new(),
            abandoned: BTreeSet::new(),
            ready: VecDeque::new(),
            max_held: max_held.max(1),
            stats: ReorderStats::default(),
        }
    }

    /// The next sequence number expected in order: everything below it was delivered or skipped.
    /// This is the cumulative ack.
    pub fn next_expected(&self) -> u64 {
        self.next
    }

    /// Whether `seq` was already delivered or is held (a copy would be a duplicate).
    pub fn has(&self, seq: u64) -> bool {
        (seq < self.next && !self.skipped.contains(&seq)) || self.held.contains_key(&seq)
    }

    /// Whether `seq` was skipped and not yet delivered late.
    pub fn is_skipped(&self, seq: u64) -> bool {
        self.skipped.contains(&seq)
    }

    /// Sequence numbers not yet received between the cumulative ack and the highest held packet.
    pub fn holes(&self) -> impl Iterator<Item = u64> + '_ {
        self.holes_in(0, u64::MAX)
    }

    /// Whether a hole lies in `lo..hi`. Costs the distance from `lo` (or the first hole) to the
    /// first hole found, so checking only what a new packet has passed stays cheap.
    pub fn has_hole_in(&self, lo: u64, hi: u64) -> bool {
        self.holes_in(lo, hi).next().is_some()
    }

    /// The holes in `lo..hi`, lowest first.
    fn holes_in(&self, lo: u64, hi: u64) -> impl Iterator<Item = u64> + '_ {
        let end = self.held.keys().next_back().copied().unwrap_or(self.next).min(hi);
        (lo.max(self.next)..end).filter(|s| !self.held.contains_key(s) && !self.abandoned.contains(s))
    }

    /// Gives up hole `seq` now: nothing is waited for it once everything before it has gone out
    /// (at once if it is the next expected number), and it is no longer among
    /// [`ReorderBuffer::holes`]. For a loss the passenger's transport should see as soon as
    /// possible (a congestion drop: its sender must back off). If it turns up later it is
    /// delivered late, as any skipped packet. No effect on a number already delivered or held.
    pub fn abandon(&mut self, now: Instant, seq: u64) {
        if seq < self.next || self.held.contains_key(&seq) || !self.abandoned.insert(seq) {
            return;
        }
        self.stats.abandoned += 1;
        self.release_consecutive(now);
    }

    /// Offers packet `seq` arriving at `now`; if it cannot go out yet it waits at most `hold`.
    pub fn insert(&mut self, now: Instant, seq: u64, packet: Bytes, hold: Duration) -> Insert {
        if self.has(seq) {
            self.stats.duplicates += 1;
            return Insert::Duplicate;
        }
        if seq < self.next {
            // A skipped packet turning up: late, but still useful to the passenger.
            self.skipped.remove(&seq);
            self.stats.late += 1;
            self.ready.push_back(Delivered { seq, packet, late: true });
            return Insert::Accepted;
        }
        if seq == self.next {
            self.stats.in_order += 1;
            self.ready.push_back(Delivered { seq, packet, late: false });
            self.next += 1;
            self.release_consecutive(now);
            return Insert::Accepted;
        }
        self.abandoned.remove(&seq);
        let deadline = now + hold;
        self.deadlines.insert((deadline, seq));
        self.held.insert(seq, Held { packet, arrived: now, deadline });
        if self.held.len() > self.max_held {
            // Memory bound: give up on the oldest gap rather than grow.
            if let Some((&first, _)) = self.held.iter().next() {
                self.skip_to(now, first);
            }
        }
        Insert::Accepted
    }

    fn release_consecutive(&mut self, now: Instant) {
        loop {
            if let Some(h) = self.held.remove(&self.next) {
                self.deadlines.remove(&(h.deadline, self.next));
                self.stats.waited += 1;
                self.stats.wait_us += (now - h.arrived).as_micros() as u64;
                self.ready.push_back(Delivered { seq: self.next, packet: h.packet, late: false });
            } else if self.abandoned.remove(&self.next) {
                self.skipped.insert(self.next);
                self.stats.skipped += 1;
            } else {
                break;
            }
            self.next += 1;
        }
    }

    /// Skips every missing sequence number below `seq` and releases what follows in order.
    ///
    /// Work is bounded by the packets held and [`SKIPPED_MEMORY`], not by the gap: a forged or
    /// corrupt sequence number can open a gap of 2^23 (the wire's expansion window), and walking it
    /// one number at a time cost a second of CPU per datagram (found by `braid-fuzz`).
    fn skip_to(&mut self, now: Instant, seq: u64) {
        // Only the last SKIPPED_MEMORY numbers below `seq` can survive the pruning below.
        let remember_from = seq.saturating_sub(SKIPPED_MEMORY);
        while self.next < seq {
            let run_end = self.held.range(self.next..seq).next().map_or(seq, |(&s, _)| s);
            for s in self.next.max(remember_from)..run_end {
                self.skipped.insert(s);
            }
            self.stats.skipped += run_end - self.next;
            self.next = run_end;
            self.release_consecutive(now);
        }
        self.release_consecutive(now);
        self.abandoned = self.abandoned.split_off(&self.next);
        let floor = self.next.saturating_sub(SKIPPED_MEMORY);
        while let Some(&s) = self.skipped.first() {
            if s >= floor {
                break;
            }
            self.skipped.pop_first();
        }
    }

    /// Releases packets whose hold time has expired by `now`, skipping the gaps before them.
    pub fn handle_timeout(&mut self, now: Instant) {
        while let Some(&(deadline, seq)) = self.deadlines.first() {
            if deadline > now {
                break;
            }
            self.deadlines.pop_first();
            if self.held.contains_key(&seq) {
                self.skip_to(now, seq);
            }
        }
    }

    /// When the earliest held packet's hold expires.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.deadlines.first().map(|&(d, _)| d)
    }

    /// The next packet for the TUN device.
    pub fn poll(&mut self) -> Option<Delivered> {
        self.ready.pop_front()
    }

    /// Packets currently held.
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Counters.
    pub fn stats(&self) -> ReorderStats {
        self.stats
    }
}

/// The buffer's recent mean hold per delivered packet, for the peer's reports
/// ([`crate::wire::FeedbackRepr::hold_ms`]): each report folds in the mean over the packets
/// delivered since the previous one (those delivered at once count as 0) with weight
/// [`RecentHold::WEIGHT`], so at one report per 100 ms it follows the last second or so.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RecentHold {
    mean_us: f64,
    delivered: u64,
    wait_us: u64,
}

impl RecentHold {
    /// Weight of the newest report's mean.
    pub const WEIGHT: f64 = 1.0 / 8.0;

    /// Folds in what `stats` counted since the last call and returns the recent mean hold.
    /// A report with nothing delivered since leaves it as it was.
    pub fn update(&mut self, stats: &ReorderStats) -> Duration {
        let delivered = stats.in_order + stats.waited;
        if delivered > self.delivered {
            let mean = stats.wait_us.saturating_sub(self.wait_us) as f64 / (delivered - self.delivered) as f64;
            self.mean_us += (mean - self.mean_us) * Self::WEIGHT;
            self.delivered = delivered;
            self.wait_us = stats.wait_us;
        }
        Duration::from_micros(self.mean_us.round() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOLD: Duration = Duration::from_millis(50);

    fn p(i: u64) -> Bytes {
        Bytes::from(i.to_be_bytes().to_vec())
    }

    fn drain(b: &mut ReorderBuffer) -> Vec<(u64, bool)> {
        std::iter::from_fn(|| b.poll()).map(|d| (d.seq, d.late)).collect()
    }

    #[test]
    fn in_order_goes_straight_through() {
        let mut b = ReorderBuffer::new(100);
        for i in 0..3 {
            b.insert(Instant::ZERO, i, p(i), HOLD);
        }
        assert_eq!(drain(&mut b), vec![(0, false), (1, false), (2, false)]);
        assert_eq!(b.poll_timeout(), None);
    }

    #[test]
    fn gap_filled_before_hold_expires() {
        let mut b = ReorderBuffer::new(100);
        b.insert(Instant::ZERO, 0, p(0), HOLD);
        b.insert(Instant::ZERO, 2, p(2), HOLD);
        b.insert(Instant::ZERO, 3, p(3), HOLD);
        assert_eq!(drain(&mut b), vec![(0, false)]);
        assert_eq!(b.holes().collect::<Vec<_>>(), vec![1]);
        assert!(b.has_hole_in(0, 2) && b.has_hole_in(1, 9));
        assert!(!b.has_hole_in(0, 1) && !b.has_hole_in(2, 9));
        b.insert(Instant::from_millis(10), 1, p(1), HOLD);
        assert_eq!(drain(&mut b), vec![(1, false), (2, false), (3, false)]);
        assert_eq!(b.stats().waited, 2);
        assert_eq!(b.stats().wait_us, 20_000);
    }

    #[test]
    fn hold_expiry_skips_and_late_arrival_is_delivered_once() {
        let mut b = ReorderBuffer::new(100);
        b.insert(Instant::ZERO, 1, p(1), HOLD);
        assert_eq!(b.poll_timeout(), Some(Instant::from_millis(50)));
        b.handle_timeout(Instant::from_millis(49));
        assert!(drain(&mut b).is_empty());
        b.handle_timeout(Instant::from_millis(50));
        assert_eq!(drain(&mut b), vec![(1, false)]);
        assert_eq!(b.next_expected(), 2);
        assert!(b.is_skipped(0));
        assert_eq!(b.insert(Instant::from_millis(60), 0, p(0), HOLD), Insert::Accepted);
        assert_eq!(drain(&mut b), vec![(0, true)]);
        assert_eq!(b.insert(Instant::from_millis(61), 0, p(0), HOLD), Insert::Duplicate);
        assert_eq!(b.insert(Instant::from_millis(61), 1, p(1), HOLD), Insert::Duplicate);
    }

    #[test]
    fn huge_gap_is_skipped_without_walking_it() {
        // Regression (braid-fuzz, session-pair): a forged sequence number far ahead made the
        // expiry walk the gap one number at a time. 2^40 would never finish that way.
        let mut b = ReorderBuffer::new(100);
        b.insert(Instant::ZERO, 0, p(0), HOLD);
        b.insert(Instant::ZERO, 5, p(5), HOLD);
        let far = 1u64 << 40;
        b.insert(Instant::ZERO, far, p(9), HOLD);
        b.handle_timeout(Instant::from_millis(50));
        assert_eq!(drain(&mut b), vec![(0, false), (5, false), (far, false)]);
        assert_eq!(b.next_expected(), far + 1);
        assert_eq!(b.stats().skipped, far - 2);
        // Recent skipped numbers are still remembered for late delivery; old ones are forgotten.
        assert!(b.is_skipped(far - 1) && b.is_skipped(far + 1 - SKIPPED_MEMORY));
        assert!(!b.is_skipped(3) && !b.is_skipped(far - SKIPPED_MEMORY));
        assert_eq!(b.insert(Instant::from_millis(60), far - 1, p(1), HOLD), Insert::Accepted);
        assert_eq!(drain(&mut b), vec![(far - 1, true)]);
    }

    #[test]
    fn abandoned_hole_is_skipped_once_everything_before_it_is_out() {
        let mut b = ReorderBuffer::new(100);
        b.insert(Instant::ZERO, 0, p(0), HOLD);
        for i in [3, 4] {
            b.insert(Instant::ZERO, i, p(i), HOLD);
        }
        assert_eq!(drain(&mut b), vec![(0, false)]);
        // 2 is given up, 1 still awaited: nothing moves, and only 1 is a hole to report.
        b.abandon(Instant::from_millis(1), 2);
        assert!(drain(&mut b).is_empty());
        assert_eq!(b.holes().collect::<Vec<_>>(), vec![1]);
        b.insert(Instant::from_millis(2), 1, p(1), HOLD);
        assert_eq!(drain(&mut b), vec![(1, false), (3, false), (4, false)]);
        assert_eq!((b.stats().skipped, b.stats().abandoned), (1, 1));
        // The next expected number goes at once; a late copy is still delivered, once.
        b.insert(Instant::from_millis(3), 6, p(6), HOLD);
        b.abandon(Instant::from_millis(3), 5);
        assert_eq!(drain(&mut b), vec![(6, false)]);
        b.insert(Instant::from_millis(4), 5, p(5), HOLD);
        b.insert(Instant::from_millis(4), 2, p(2), HOLD);
        assert_eq!(drain(&mut b), vec![(5, true), (2, true)]);
        assert_eq!(b.insert(Instant::from_millis(5), 5, p(5), HOLD), Insert::Duplicate);
        // Delivered or held numbers are not given up.
        b.insert(Instant::from_millis(6), 9, p(9), HOLD);
        b.abandon(Instant::from_millis(6), 9);
        b.abandon(Instant::from_millis(6), 4);
        assert_eq!(b.stats().abandoned, 2);
        assert_eq!(b.holes().collect::<Vec<_>>(), vec![7, 8]);
    }

    #[test]
    fn memory_bound_forces_progress() {
        let mut b = ReorderBuffer::new(3);
        for i in 1..=4 {
            b.insert(Instant::ZERO, i * 2, p(i), HOLD);
        }
        assert!(b.held() <= 3);
        assert_eq!(drain(&mut b), vec![(2, false)]);
    }

    #[test]
    fn recent_hold_counts_packets_delivered_at_once_and_follows_the_newest_reports() {
        let mut h = RecentHold::default();
        // 30 packets at once and 10 held 40 ms each: a mean of 10 ms, an eighth of it folded in.
        let mut st = ReorderStats { in_order: 30, waited: 10, wait_us: 400_000, ..Default::default() };
        assert_eq!(h.update(&st), Duration::from_micros(1250));
        // Nothing delivered since: unchanged.
        assert_eq!(h.update(&st), Duration::from_micros(1250));
        // Every packet held 80 ms from now on: the mean approaches 80 ms and never passes it.
        let mut last = Duration::ZERO;
        for _ in 0..40 {
            st.waited += 10;
            st.wait_us += 800_000;
            let m = h.update(&st);
            assert!(m > last && m <= Duration::from_millis(80), "{m:?} after {last:?}");
            last = m;
        }
        assert!(last > Duration::from_millis(79), "{last:?}");
    }
}
