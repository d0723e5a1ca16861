//! `single`: everything on one link, the best one, as a vehicle with one modem in use does today.
//! The best link is the one of the highest operator weight, and among those the one with the most
//! loss-free capacity; the choice sticks until that link stops being usable or a link of higher
//! weight becomes usable, so it does not flap with estimate noise but an operator's preferred
//! uplink (a depot's WiFi over a metered modem) takes over as soon as it is there.

use super::{LinkView, Scheduler, SchedulerKind};
use crate::link::LinkId;
use crate::time::Instant;

/// The best single link.
#[derive(Debug, Default, Clone, Copy)]
pub struct Single {
    current: Option<LinkId>,
}

impl Scheduler for Single {
    fn kind(&self) -> SchedulerKind {
        SchedulerKind::Single
    }

    fn pick(&mut self, _now: Instant, _size: usize, links: &[LinkView]) -> LinkId {
        let top = links.iter().map(|l| l.weight).max().unwrap_or(0);
        if let Some(c) = self.current
            && links.iter().any(|l| l.id == c && l.weight == top)
        {
            return c;
        }
        let best = links
            .iter()
            .filter(|l| l.weight == top)
            .max_by(|a, b| {
                (a.capacity_bps * (1.0 - a.loss)).total_cmp(&(b.capacity_bps * (1.0 - b.loss))).then(b.id.cmp(&a.id))
            })
            .map_or(LinkId(0), |l| l.id);
        self.current = Some(best);
        best
    }
}

#[cfg(test)]
mod tests {
    use super::super::view;
    use super::*;

    #[test]
    fn sticks_to_best_until_it_disappears() {
        let mut s = Single::default();
        let links = [view(0, 0, 1.5e6, 0.05), view(1, 0, 1e6, 0.01)];
        assert_eq!(s.pick(Instant::ZERO, 100, &links), LinkId(0));
        let worse = [view(0, 0, 0.5e6, 0.05), view(1, 0, 1e6, 0.01)];
        assert_eq!(s.pick(Instant::ZERO, 100, &worse), LinkId(0), "sticky");
        assert_eq!(s.pick(Instant::ZERO, 100, &worse[1..]), LinkId(1));
    }

    #[test]
    fn the_highest_weight_wins_and_takes_over_when_it_returns() {
        let mut s = Single::default();
        let mut wifi = view(1, 0, 0.5e6, 0.05);
        wifi.weight = 3;
        let lte = view(0, 0, 1e6, 0.01);
        assert_eq!(s.pick(Instant::ZERO, 100, &[lte, wifi]), LinkId(1), "weight before capacity");
        assert_eq!(s.pick(Instant::ZERO, 100, &[lte]), LinkId(0), "the other link while it is gone");
        assert_eq!(s.pick(Instant::ZERO, 100, &[lte, wifi]), LinkId(1), "back as soon as it returns");
    }
}
