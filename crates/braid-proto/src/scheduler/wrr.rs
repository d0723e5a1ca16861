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

use super::{LinkView, Scheduler, SchedulerKind};
use crate::link::LinkId;
use crate::time::Instant;
use std::time::Duration;

/// How often `wrr-auto` re-estimates its weights.
pub const AUTO_INTERVAL: Duration = Duration::from_secs(1);
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
        let pick = best.map_or(links[0].id, |(id, _)| id);
        if let Some((_, c)) = self.current.iter_mut().find(|(id, _)| *id == pick) {
            *c -= bytes;
        }
        pick
    }
}

#[cfg(test)]
mod tests {
    use super::super::view;
    use super::*;

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
        // Smooth: never more than two in a row on the heavier link at 2:1.
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
    fn auto_weights_follow_available_bandwidth() {
        // 10 and 5 Mbit/s, equal loss and delay: 2:1.
        let links = [view(0, 10_000, 10e6, 0.0), view(1, 10_000, 5e6, 0.0)];
        let mut s = Wrr::new(true);
        let c = shares(&mut s, &links, 3000);
        assert!((c[0] as f64 / c[1] as f64 - 2.0).abs() < 0.05, "{c:?}");
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
