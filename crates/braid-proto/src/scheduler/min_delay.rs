//! `min-delay`: each packet on the link whose estimated arrival `size/capacity + Q + (d + δ)` is
//! earliest (PluriBus 4.3, 5.3; Chebrolu and Rao's delay-based striping). It fills the fastest link
//! until its queue makes it as slow as the next one, generalising round robin to links of unequal
//! delay and capacity while keeping reordering small.

use super::{LinkView, Scheduler, SchedulerKind};
use crate::link::LinkId;
use crate::time::Instant;

/// Earliest estimated arrival.
#[derive(Debug, Default, Clone, Copy)]
pub struct MinDelay;

impl Scheduler for MinDelay {
    fn kind(&self) -> SchedulerKind {
        SchedulerKind::MinDelay
    }

    fn pick(&mut self, _now: Instant, _size: usize, links: &[LinkView]) -> LinkId {
        // Ties go to the lower link id, so the choice is deterministic.
        links.iter().min_by_key(|l| (l.arrival_us, l.id)).map_or(LinkId(0), |l| l.id)
    }
}

#[cfg(test)]
mod tests {
    use super::super::view;
    use super::*;

    #[test]
    fn picks_earliest_arrival() {
        let mut s = MinDelay;
        let links = [view(0, 20_000, 1e6, 0.0), view(1, 5_000, 1e6, 0.0), view(2, 5_000, 1e6, 0.0)];
        assert_eq!(s.pick(Instant::ZERO, 1000, &links), LinkId(1));
    }
}
