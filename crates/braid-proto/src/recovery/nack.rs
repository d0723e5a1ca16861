//! Receiver-side hole reporting for `arq`.
//!
//! A hole is reported once it has been missing longer than the links' delay spread (it may just be
//! on a slower link), or at once when every link that carries data has already delivered a later
//! packet (a link delivers in order, so the hole cannot still be on one of them), and reported again
//! every retry interval until it is filled or given up.

use crate::time::Instant;
use std::collections::BTreeMap;
use std::time::Duration;

/// When holes are reported: the first time once missing for `first_delay` (the links' delay
/// spread), again every `retry`, and at most `max` holes per poll (what one feedback carries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NackTiming {
    /// How long a hole may be missing before its first report (unless known lost).
    pub first_delay: Duration,
    /// How long after a report the hole is reported again.
    pub retry: Duration,
    /// The most holes one poll returns.
    pub max: usize,
}

/// Tracks holes and decides when to NACK them.
#[derive(Debug, Clone, Default)]
pub struct NackTracker {
    holes: BTreeMap<u64, (Instant, Option<Instant>)>,
}

impl NackTracker {
    /// Updates the set of holes (sequence numbers missing below the highest received) and returns
    /// those to report at `now`: first after `timing.first_delay`, or at once if below
    /// `lost_below` (known lost), then every `timing.retry`.
    pub fn poll(
        &mut self,
        now: Instant,
        holes: impl Iterator<Item = u64>,
        cum_ack: u64,
        lost_below: u64,
        timing: NackTiming,
    ) -> Vec<u64> {
        let NackTiming { first_delay, retry, max } = timing;
        self.holes = self.holes.split_off(&cum_ack);
        let mut current = BTreeMap::new();
        for h in holes {
            let entry = self.holes.get(&h).copied().unwrap_or((now, None));
            current.insert(h, entry);
        }
        self.holes = current;
        let mut out = Vec::new();
        for (&seq, (seen, last)) in self.holes.iter_mut() {
            if out.len() >= max {
                break;
            }
            let due = match last {
                None => seq < lost_below || now >= *seen + first_delay,
                Some(l) => now >= *l + retry,
            };
            if due {
                *last = Some(now);
                out.push(seq);
            }
        }
        out
    }

    /// When the next NACK may become due.
    pub fn poll_timeout(&self, timing: NackTiming) -> Option<Instant> {
        let NackTiming { first_delay, retry, .. } = timing;
        self.holes
            .values()
            .map(|(seen, last)| match last {
                None => *seen + first_delay,
                Some(l) => *l + retry,
            })
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_for_delay_spread_then_retries() {
        let mut n = NackTracker::default();
        let t = NackTiming { first_delay: Duration::from_millis(10), retry: Duration::from_millis(50), max: 10 };
        assert!(n.poll(Instant::ZERO, [3, 4].into_iter(), 0, 0, t).is_empty());
        assert_eq!(n.poll_timeout(t), Some(Instant::from_millis(10)));
        assert_eq!(n.poll(Instant::from_millis(10), [3, 4].into_iter(), 0, 0, t), vec![3, 4]);
        assert!(n.poll(Instant::from_millis(30), [4].into_iter(), 0, 0, t).is_empty());
        assert_eq!(n.poll(Instant::from_millis(60), [4].into_iter(), 0, 0, t), vec![4]);
    }

    #[test]
    fn a_hole_every_link_has_passed_is_reported_at_once() {
        let mut n = NackTracker::default();
        let t = NackTiming { first_delay: Duration::from_millis(150), retry: Duration::from_millis(300), max: 10 };
        // Every link has delivered something after 3 but not after 4: 3 is lost, 4 may be in flight.
        assert_eq!(n.poll(Instant::ZERO, [3, 4].into_iter(), 0, 4, t), vec![3]);
        assert!(n.poll(Instant::from_millis(1), [3, 4].into_iter(), 0, 4, t).is_empty());
        assert_eq!(n.poll(Instant::from_millis(2), [3, 4].into_iter(), 0, 5, t), vec![4]);
        // A reported hole waits out the retry interval all the same.
        assert!(n.poll(Instant::from_millis(200), [3, 4].into_iter(), 0, 9, t).is_empty());
        assert_eq!(n.poll(Instant::from_millis(300), [3, 4].into_iter(), 0, 9, t), vec![3]);
    }
}
