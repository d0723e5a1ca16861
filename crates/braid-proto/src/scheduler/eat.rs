//! `eat`: each packet on the link with the earliest *expected* arrival time, losses and
//! retransmission timeouts included (FMTCP V-B, Eq. 8-10, Algorithm 1's "argmin EAT").
//!
//! FMTCP's expected delivery time of a packet on subflow f is
//! `EDT_f = p_f RTO_f / (1 - p_f) + DT_f` (Eq. 8): the delivery time plus, for each of the expected
//! `p/(1-p)` losses, one retransmission timeout. Its expected arrival time (Eq. 10) adds `RT_f`,
//! the wait until f may send (its congestion window is full), to EDT_f. In braid the link's arrival
//! estimate `size/capacity + Q + (d + δ)` (PluriBus 5.3, [`LinkView::arrival_us`]) already holds
//! both the delivery time and the wait for braid's own queue on the link to drain, so here
//! `EAT_f = p_f RTO_f / (1 - p_f) + arrival_f`, which is Eq. 10's "full" case when Q > 0 and its
//! "not full" case when Q = 0. RTO_f is RFC 6298's `srtt + 4 rttvar` with rttvar taken as srtt/4,
//! i.e. `2 srtt`; before any RTT sample, RFC 6298's initial 1 s.

use super::{LinkView, Scheduler, SchedulerKind};
use crate::link::LinkId;
use crate::time::Instant;

/// RTO before any RTT sample, µs (RFC 6298 2.1).
const INITIAL_RTO_US: f64 = 1_000_000.0;
/// Loss estimates are capped here so a link reported as losing everything still gets a finite EAT.
const MAX_LOSS: f64 = 0.99;

/// FMTCP Eq. 8: expected delivery time, µs relative to the arrival estimates' reference.
pub fn expected_delivery_us(link: &LinkView) -> f64 {
    let p = link.loss.clamp(0.0, MAX_LOSS);
    let rto = link.srtt_us.map_or(INITIAL_RTO_US, |s| 2.0 * f64::from(s));
    p * rto / (1.0 - p) + link.arrival_us as f64
}

/// Earliest expected arrival, losses included.
#[derive(Debug, Default, Clone, Copy)]
pub struct Eat;

impl Scheduler for Eat {
    fn kind(&self) -> SchedulerKind {
        SchedulerKind::Eat
    }

    fn pick(&mut self, _now: Instant, _size: usize, links: &[LinkView]) -> LinkId {
        // Ties go to the lower link id, so the choice is deterministic.
        links
            .iter()
            .min_by(|a, b| expected_delivery_us(a).total_cmp(&expected_delivery_us(b)).then(a.id.cmp(&b.id)))
            .map_or(LinkId(0), |l| l.id)
    }
}

#[cfg(test)]
mod tests {
    use super::super::view;
    use super::*;

    fn with_srtt(mut v: LinkView, srtt_us: u32) -> LinkView {
        v.srtt_us = Some(srtt_us);
        v
    }

    #[test]
    fn equal_links_fall_back_to_earliest_arrival() {
        let links = [with_srtt(view(0, 20_000, 1e7, 0.01), 200_000), with_srtt(view(1, 5_000, 1e7, 0.01), 200_000)];
        assert_eq!(Eat.pick(Instant::ZERO, 1000, &links), LinkId(1));
    }

    #[test]
    fn a_lossy_link_pays_its_expected_timeouts() {
        // Link 1 arrives 10 ms earlier but loses 20 %: 0.2 * 400 ms / 0.8 = 100 ms expected extra.
        let a = with_srtt(view(0, 10_000, 1e7, 0.001), 200_000);
        let b = with_srtt(view(1, 0, 1e7, 0.2), 200_000);
        assert!((expected_delivery_us(&b) - 100_000.0).abs() < 1.0);
        assert_eq!(Eat.pick(Instant::ZERO, 1000, &[a, b]), LinkId(0));
        // Once link 0's queue is 150 ms deep, the lossy link is the earlier one after all.
        let a = with_srtt(view(0, 150_000, 1e7, 0.001), 200_000);
        assert_eq!(Eat.pick(Instant::ZERO, 1000, &[a, b]), LinkId(1));
        // MinDelay would have taken the lossy link at once.
        let a = with_srtt(view(0, 10_000, 1e7, 0.001), 200_000);
        assert_eq!(super::super::MinDelay.pick(Instant::ZERO, 1000, &[a, b]), LinkId(1));
    }

    #[test]
    fn unknown_rtt_uses_the_initial_rto_and_total_loss_stays_finite() {
        let a = view(0, 0, 1e7, 0.5);
        assert!((expected_delivery_us(&a) - INITIAL_RTO_US).abs() < 1.0);
        let b = view(1, 0, 1e7, 1.0);
        assert!(expected_delivery_us(&b).is_finite());
        assert_eq!(Eat.pick(Instant::ZERO, 1000, &[b, a]), LinkId(0));
    }
}
