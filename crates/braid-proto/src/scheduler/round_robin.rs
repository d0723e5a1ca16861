//! `round-robin`: links in turn, blind to their delay and capacity (TEQL). A baseline: with links of
//! unequal delay it reorders heavily (PluriBus 2.1). A link of operator weight `w` takes `w` packets
//! in a row per turn (counted in packets; `wrr` counts bytes and interleaves).

use super::{LinkView, Scheduler, SchedulerKind};
use crate::link::LinkId;
use crate::time::Instant;

/// Links in turn.
#[derive(Debug, Default, Clone, Copy)]
pub struct RoundRobin {
    last: Option<LinkId>,
    /// Packets the last link has taken in its current turn.
    taken: u32,
}

impl Scheduler for RoundRobin {
    fn kind(&self) -> SchedulerKind {
        SchedulerKind::RoundRobin
    }

    fn pick(&mut self, _now: Instant, _size: usize, links: &[LinkView]) -> LinkId {
        // The same link again until it has taken its weight's worth of packets in this turn.
        if let Some(last) = self.last
            && links.iter().any(|l| l.id == last && self.taken < l.weight)
        {
            self.taken += 1;
            return last;
        }
        // The next id after the last one used, wrapping; robust to links coming and going.
        let next = match self.last {
            Some(last) => links.iter().map(|l| l.id).filter(|&id| id > last).min(),
            None => None,
        }
        .or_else(|| links.iter().map(|l| l.id).min())
        .unwrap_or(LinkId(0));
        self.last = Some(next);
        self.taken = 1;
        next
    }
}

#[cfg(test)]
mod tests {
    use super::super::view;
    use super::*;

    #[test]
    fn cycles_through_links() {
        let mut s = RoundRobin::default();
        let links = [view(0, 0, 1e6, 0.0), view(2, 99_999, 1e5, 0.5), view(5, 0, 1e6, 0.0)];
        let got: Vec<u8> = (0..5).map(|_| s.pick(Instant::ZERO, 1, &links).0).collect();
        assert_eq!(got, vec![0, 2, 5, 0, 2]);
    }

    #[test]
    fn a_weight_is_that_many_packets_per_turn() {
        let mut s = RoundRobin::default();
        let mut links = [view(0, 0, 1e6, 0.0), view(1, 0, 1e6, 0.0)];
        links[0].weight = 3;
        let got: Vec<u8> = (0..8).map(|_| s.pick(Instant::ZERO, 1, &links).0).collect();
        assert_eq!(got, vec![0, 0, 0, 1, 0, 0, 0, 1]);
    }
}
