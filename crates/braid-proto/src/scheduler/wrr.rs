//! `wrr`: weighted round robin over the uplinks (NATALIE II, V).
//!
//! Smooth weighted round robin counted in bytes: every packet adds its size to the links' credits
//! in proportion to their weights, the link with the most credit takes it and pays its size. Each
//! link's share of the *bytes* is its share of the weights, and packets of a flow interleave at
//! that ratio instead of arriving in runs. Weights come from the operator
//! ([`crate::Session::set_link_weight`], `braid set weight`) and take effect on the next packet
//! with no reset of the credits, which is what NATALIE's run-time weights are for: no disruption to
//! TCP connections in flight.
//!
//! `wrr-auto` sets the weights itself every [`AUTO_INTERVAL`] from each link's measured available
//! bandwidth (the peer's capacity estimate times one minus the loss rate), following NATALIE's rule
//! of thumb (section IV-B): weights proportional to bandwidth while the links' loss and delay are
//! alike; the larger the disparity, the more the best link is favoured; past a limit, the worse
//! links get nothing.
//!
//! Packets that reach the scheduler together (a TCP sender releases two or three segments per
//! ack) go to one link as a train of up to [`TRAIN_MAX`]. The receiver's capacity estimator
//! (PluriBus 5.2, `link/rx.rs`) measures a link's drain rate from packets that waited behind the
//! previous one; PluriBus relies on "the burstiness of data traffic" to create such trains. Split
//! round robin across links, the bursts never queued on any link, so a link carrying exactly its
//! weight's share showed no more than that share: when cross traffic left an under-weighted link,
//! its estimate (and so its weight) stayed where it was (NATALIE Fig. 7: 2.2 Mbit/s on a free
//! 10 Mbit/s link for the last 10 s of the run). A train's length is bounded and its bytes are
//! charged to the link's credit, so the shares stay the weights'.

use super::{LinkView, Scheduler, SchedulerKind};
use crate::link::LinkId;
use crate::time::Instant;
use std::time::Duration;

/// How often `wrr-auto` re-reads the links' estimates into weights. The estimates themselves are
/// filtered (PluriBus 5.2: three intervals in a row) and reported every 100 ms, so re-reading them
/// more often than NATALIE's "every interval" of about a second only cuts the lag after a change.
pub const AUTO_INTERVAL: Duration = Duration::from_millis(250);
/// Packets picked within this time of the previous one belong to the same burst of the sender
/// and stay on its link: a burst of the passenger's TCP reaches braid within microseconds.
pub const TRAIN_GAP: Duration = Duration::from_micros(100);
/// Longest train. Three same-burst packets give the receiver's dispersion estimator a queued
/// pair even at equal sizes (the second packet's delay above the floor equals its gap, the third's
/// exceeds it); longer trains would only add queueing delay on the slower links.
pub const TRAIN_MAX: u32 = 3;
/// Loss disparity (absolute, against the least lossy link) below which a link keeps its full share.
const LOSS_DISPARITY_OK: f64 = 0.01;
/// Loss disparity at and beyond which a link gets no data (NATALIE: "avoid using multiple links").
const LOSS_DISPARITY_MAX: f64 = 0.10;
/// One-way delay disparity below which a link keeps its full share.
const DELAY_DISPARITY_OK_US: f64 = 50_000.0;
/// One-way delay disparity at and beyond which a link gets no data.
const DELAY_DISPARITY_MAX_US: f64 = 300_000.0;

/// Weighted round robin.
#[derive(Debug, Clone, Default)]
pub struct Wrr {
    auto: bool,
    /// Byte credit per link (sums to zero over the links seen).
    current: Vec<(LinkId, f64)>,
    auto_weights: Vec<(LinkId, f64)>,
    last_auto: Option<Instant>,
    /// The train being sent: its link, when its last packet was picked, and its length so far.
    train: Option<(LinkId, Instant, u32)>,
}

impl Wrr {
    /// Operator weights (`auto` false) or NATALIE auto-weighting (`auto` true).
    pub fn new(auto: bool) -> Self {
        Wrr { auto, ..Wrr::default() }
    }

    /// The weights `wrr-auto` last computed.
    pub fn auto_weights(&self) -> &[(LinkId, f64)] {
        &self.auto_weights
    }

    fn weight(&self, l: &LinkView) -> f64 {
        if self.auto {
            self.auto_weights.iter().find(|(id, _)| *id == l.id).map_or(0.0, |(_, w)| *w)
        } else {
            f64::from(l.weight)
        }
    }

    /// The link whose train this packet continues, if any.
    fn train_link(&self, now: Instant, links: &[LinkView]) -> Option<LinkId> {
        let (link, at, len) = self.train?;
        let usable = links.iter().any(|l| l.id == link && self.weight(l) > 0.0);
        (usable && len < TRAIN_MAX && now <= at + TRAIN_GAP).then_some(link)
    }
}

/// 1 below `ok`, 0 at and above `max`, linear in between.
fn taper(x: f64, ok: f64, max: f64) -> f64 {
    if x <= ok {
        1.0
    } else if x >= max {
        0.0
    } else {
        (max - x) / (max - ok)
    }
}

/// NATALIE's rule of thumb as weights: available bandwidth, tapered by loss and delay disparity;
/// the link with the most available bandwidth always keeps its share.
pub fn natalie_weights(links: &[LinkView]) -> Vec<(LinkId, f64)> {
    let bw = |l: &LinkView| l.capacity_bps * (1.0 - l.loss).max(0.0);
    let best = links.iter().max_by(|a, b| bw(a).total_cmp(&bw(b)).then(b.id.cmp(&a.id))).map(|l| l.id);
    let min_loss = links.iter().map(|l| l.loss).fold(f64::INFINITY, f64::min);
    let min_delay = links.iter().map(|l| l.arrival_us).min().unwrap_or(0);
    links
        .iter()
        .map(|l| {
            let factor = if Some(l.id) == best {
                1.0
            } else {
                taper(l.loss - min_loss, LOSS_DISPARITY_OK, LOSS_DISPARITY_MAX)
                    * taper((l.arrival_us - min_delay) as f64, DELAY_DISPARITY_OK_US, DELAY_DISPARITY_MAX_US)
            };
            (l.id, bw(l) * factor)
        })
        .collect()
}

impl Scheduler for Wrr {
    fn kind(&self) -> SchedulerKind {
        SchedulerKind::Wrr { auto: self.auto }
    }

    fn pick(&mut self, now: Instant, size: usize, links: &[LinkView]) -> LinkId {
        if self.auto && self.last_auto.is_none_or(|t| now >= t + AUTO_INTERVAL) {
            self.auto_weights = natalie_weights(links);
            self.last_auto = Some(now);
        }
        let total: f64 = links.iter().map(|l| self.weight(l)).sum();
        if total <= 0.0 {
            // Every weight zero (or a link appeared since the last estimate): fall back to the
            // earliest arrival rather than stop.
            return links.iter().min_by_key(|l| (l.arrival_us, l.id)).map_or(LinkId(0), |l| l.id);
        }
        // Credits in bytes, not packets: TCP's segments are not all full-sized (a window update
        // releases what it releases), and counting packets gave one link of two equal ones about 10 %
        // more bytes, a standing queue and reordering beyond the sequencing hold. Striping has to
        // count bytes to split them as the weights say (NATALIE's reference [12], Adiseshu et al.:
        // surplus round robin).
        let bytes = size.max(1) as f64;
        let train = self.train_link(now, links);
        let mut best: Option<(LinkId, f64)> = None;
        for l in links {
            let w = self.weight(l);
            let cur = match self.current.iter_mut().find(|(id, _)| *id == l.id) {
                Some((_, c)) => c,
                None => {
                    self.current.push((l.id, 0.0));
                    &mut self.current.last_mut().expect("just pushed").1
                }
            };
            *cur += bytes * w / total;
            if w > 0.0 && best.is_none_or(|(_, b)| *cur > b) {
                best = Some((l.id, *cur));
            }
        }
        let pick = train.or(best.map(|(id, _)| id)).unwrap_or(links[0].id);
        if let Some((_, c)) = self.current.iter_mut().find(|(id, _)| *id == pick) {
            *c -= bytes;
        }
        let len = if train.is_some() { self.train.map_or(1, |(_, _, n)| n + 1) } else { 1 };
        self.train = Some((pick, now, len));
        pick
    }
}

#[cfg(test)]
mod tests {
    use super::super::view;
    use super::*;
    use crate::link::RxEstimator;
    use crate::seq;

    /// Picks `n` packets of `size` bytes, one every millisecond (no two in one burst).
    fn shares_sized(s: &mut Wrr, links: &[LinkView], n: usize, size: impl Fn(usize) -> usize) -> Vec<usize> {
        let mut bytes = vec![0; links.len()];
        for i in 0..n {
            let sz = size(i);
            let id = s.pick(Instant::from_millis(i as u64), sz, links);
            bytes[links.iter().position(|l| l.id == id).unwrap()] += sz;
        }
        bytes
    }

    /// Packets picked per link, one 1000-byte packet every millisecond.
    fn shares(s: &mut Wrr, links: &[LinkView], n: usize) -> Vec<usize> {
        shares_sized(s, links, n, |_| 1000).into_iter().map(|b| b / 1000).collect()
    }

    #[test]
    fn operator_weights_set_the_shares_and_interleave() {
        let mut links = [view(0, 0, 1e6, 0.0), view(1, 0, 1e6, 0.0)];
        links[0].weight = 100;
        links[1].weight = 50;
        let mut s = Wrr::new(false);
        assert_eq!(shares(&mut s, &links, 300), vec![200, 100]);
        // Smooth: never more than two in a row on the heavier link at 2:1 (packets 1 ms apart,
        // so none of them continues a train).
        let seq: Vec<u8> = (0..12).map(|i| s.pick(Instant::from_millis(1000 + i), 1000, &links).0).collect();
        assert!(!seq.windows(3).any(|w| w.iter().all(|&x| x == 0)), "{seq:?}");
    }

    #[test]
    fn weights_change_at_run_time_without_reset() {
        let mut links = [view(0, 0, 1e6, 0.0), view(1, 0, 1e6, 0.0)];
        let mut s = Wrr::new(false);
        assert_eq!(shares(&mut s, &links, 100), vec![50, 50]);
        links[1].weight = 3;
        assert_eq!(shares(&mut s, &links, 400), vec![100, 300]);
        links[1].weight = 0;
        assert_eq!(shares(&mut s, &links, 50), vec![50, 0]);
    }

    #[test]
    fn equal_weights_split_bytes_equally_when_sizes_alternate() {
        // Full segments and small ones in turn, as a window-limited TCP sender releases them.
        // Counting packets sent every large one to link 0 and every small one to link 1.
        let links = [view(0, 0, 1e6, 0.0), view(1, 0, 1e6, 0.0)];
        let mut s = Wrr::new(false);
        let b = shares_sized(&mut s, &links, 1000, |i| if i % 2 == 0 { 1400 } else { 400 });
        let ratio = b[0] as f64 / b[1] as f64;
        assert!((ratio - 1.0).abs() < 0.01, "{b:?}");
        // And 3:1 weights give 3:1 of the bytes.
        let mut links = links;
        links[0].weight = 3;
        let b = shares_sized(&mut Wrr::new(false), &links, 1000, |i| if i % 2 == 0 { 1400 } else { 400 });
        assert!((b[0] as f64 / b[1] as f64 - 3.0).abs() < 0.03, "{b:?}");
    }

    #[test]
    fn a_burst_goes_to_one_link_as_a_train_and_shares_still_hold() {
        // 1:4 weights; TCP releases three segments per ack, every 2 ms.
        let mut links = [view(0, 0, 1e6, 0.0), view(1, 0, 1e6, 0.0)];
        links[1].weight = 4;
        let mut s = Wrr::new(false);
        let mut bytes = [0usize; 2];
        let mut on_link0_trains = 0;
        for burst in 0..1000u64 {
            let at = Instant::from_millis(2 * burst);
            let picks: Vec<u8> = (0..3).map(|_| s.pick(at, 1000, &links).0).collect();
            // Every packet of a burst took the link of its first.
            assert!(picks.iter().all(|&p| p == picks[0]), "burst {burst}: {picks:?}");
            bytes[picks[0] as usize] += 3000;
            on_link0_trains += usize::from(picks[0] == 0);
        }
        // The under-weighted link gets trains too, and the byte shares are still 1:4.
        assert!(on_link0_trains > 150, "{on_link0_trains}");
        assert!((bytes[1] as f64 / bytes[0] as f64 - 4.0).abs() < 0.1, "{bytes:?}");
    }

    #[test]
    fn a_long_burst_is_cut_into_trains() {
        let links = [view(0, 0, 1e6, 0.0), view(1, 0, 1e6, 0.0)];
        let mut s = Wrr::new(false);
        let seq: Vec<u8> = (0..12).map(|_| s.pick(Instant::from_millis(10_000), 1000, &links).0).collect();
        let runs: Vec<usize> = seq.chunk_by(|a, b| a == b).map(<[u8]>::len).collect();
        assert_eq!(runs, vec![TRAIN_MAX as usize; 4], "{seq:?}");
    }

    /// Closed-loop model of NATALIE Fig. 7's last phase: link 0's cross traffic leaves at 2 s
    /// (2 -> 10 Mbit/s), link 1 stays at 10 Mbit/s. The sender is ACK-clocked like TCP: it sends
    /// as fast as the bottleneck link allows at the current split (`min_i C_i / share_i`), `burst`
    /// 1250-byte packets at a time. Each link is a FIFO with 10 ms of delay, measured by its own
    /// receiver-side estimator. Returns link 0's estimate and weight at 2 s + `after_us`.
    fn freed_link(burst: u64, after_us: u64) -> (f64, f64) {
        const SIZE: usize = 1250;
        let true_bps = |i: usize, t: u64| if i == 0 && t < 2_000_000 { 2e6 } else { 10e6 };
        let mut est = [RxEstimator::new(2e6), RxEstimator::new(10e6)];
        let mut free = [0u64; 2];
        let mut sent = [0u64; 2];
        let mut s = Wrr::new(true);
        let mut t = 0u64;
        while t < 2_000_000 + after_us {
            let links = [view(0, 0, est[0].capacity_bps(), 0.0), view(1, 0, est[1].capacity_bps(), 0.0)];
            let sum: f64 = links.iter().map(|l| l.capacity_bps).sum();
            let rate = (0..2).map(|i| true_bps(i, t) * sum / links[i].capacity_bps).fold(f64::INFINITY, f64::min);
            for _ in 0..burst {
                let i = s.pick(Instant::from_micros(t), SIZE, &links).0 as usize;
                let start = t.max(free[i]);
                free[i] = start + (SIZE as f64 * 8.0 * 1e6 / true_bps(i, start)) as u64;
                est[i].handle(Instant::from_micros(free[i] + 10_000), seq::truncate(sent[i]), t as u32, SIZE);
                sent[i] += 1;
            }
            t += (burst as f64 * SIZE as f64 * 8.0 * 1e6 / rate) as u64;
        }
        (est[0].capacity_bps(), s.auto_weights()[0].1)
    }

    #[test]
    fn an_under_weighted_link_gains_weight_soon_after_its_cross_traffic_leaves() {
        // TCP's bursts of three become trains; the freed link's trains queue behind each other at
        // 10 Mbit/s, and within 2 s its estimate and weight are the link's new rate.
        let (cap, weight) = freed_link(3, 2_000_000);
        assert!(cap > 9e6, "estimate {cap}");
        assert!(weight > 9e6, "weight {weight}");
        // A sender without bursts gives no trains: the link carries exactly its old share, never
        // queues, and nothing shows that it could carry more (the failure this scheduler fixes).
        let (cap, weight) = freed_link(1, 6_000_000);
        assert!(cap < 3e6 && weight < 3e6, "estimate {cap}, weight {weight}");
    }

    #[test]
    fn a_train_never_continues_on_a_link_whose_weight_became_zero() {
        let mut links = [view(0, 0, 1e6, 0.0), view(1, 0, 1e6, 0.0)];
        let mut s = Wrr::new(false);
        let first = s.pick(Instant::ZERO, 1000, &links);
        links[first.0 as usize].weight = 0;
        assert_ne!(s.pick(Instant::ZERO, 1000, &links), first);
    }

    #[test]
    fn auto_weights_follow_available_bandwidth() {
        // 10 and 5 Mbit/s, equal loss and delay: 2:1.
        let links = [view(0, 10_000, 10e6, 0.0), view(1, 10_000, 5e6, 0.0)];
        let mut s = Wrr::new(true);
        let c = shares(&mut s, &links, 3000);
        assert!((c[0] as f64 / c[1] as f64 - 2.0).abs() < 0.05, "{c:?}");
    }

    #[test]
    fn auto_weights_follow_a_changed_estimate_within_300_ms() {
        let mut links = [view(0, 0, 2e6, 0.0), view(1, 0, 9e6, 0.0)];
        let mut s = Wrr::new(true);
        s.pick(Instant::ZERO, 1000, &links);
        assert!((s.auto_weights()[0].1 - 2e6).abs() < 1.0);
        // The peer reports a higher estimate; 300 ms later the weight is the new estimate.
        links[0].capacity_bps = 10e6;
        for ms in 1..=300 {
            s.pick(Instant::from_millis(ms), 1000, &links);
        }
        assert!((s.auto_weights()[0].1 - 10e6).abs() < 1.0, "{:?}", s.auto_weights());
    }

    #[test]
    fn natalie_rule_of_thumb_on_disparity() {
        // Small loss disparity: proportional to bandwidth.
        let w = natalie_weights(&[view(0, 0, 10e6, 0.0), view(1, 0, 10e6, 0.005)]);
        assert!((w[1].1 / w[0].1 - 0.995).abs() < 1e-9);
        // Growing disparity: the best link is overweighted.
        let w = natalie_weights(&[view(0, 0, 10e6, 0.0), view(1, 0, 10e6, 0.05)]);
        assert!(w[1].1 / w[0].1 < 0.6 && w[1].1 > 0.0, "{w:?}");
        // Past the limit: the worse link gets nothing, the best keeps everything.
        let w = natalie_weights(&[view(0, 0, 10e6, 0.0), view(1, 0, 10e6, 0.2)]);
        assert_eq!(w[1].1, 0.0);
        assert!(w[0].1 > 0.0);
        // Huge delay disparity: also none.
        let w = natalie_weights(&[view(0, 0, 10e6, 0.0), view(1, 400_000, 10e6, 0.0)]);
        assert_eq!(w[1].1, 0.0);
        // The lossy link keeps traffic when it is the best one (higher bandwidth after loss).
        let w = natalie_weights(&[view(0, 0, 2e6, 0.0), view(1, 0, 10e6, 0.05)]);
        assert!(w[1].1 > 0.0 && w[0].1 > 0.0);
    }
}
