//! Receiver-side hole reporting for `arq`.
//!
//! A hole is reported once it has been missing longer than the links' delay spread (it may just be
//! on a slower link), and reported again every retry interval until it is filled or given up.

use crate::time::Instant;
use std::collections::BTreeMap;
use std::time::Duration;

/// Tracks holes and decides when to NACK them.
#[derive(Debug, Clone, Default)]
pub struct NackTracker {
    holes: BTreeMap<u64, (Instant, Option<Instant>)>,
}

impl NackTracker {
    /// Updates the set of holes (sequence numbers missing below the highest received) and returns
    /// those to report at `now`: first after `first_delay`, then every `retry`.
    pub fn poll(
        &mut self,
        now: Instant,
        holes: impl Iterator<Item = u64>,
        cum_ack: u64,
        first_delay: Duration,
        retry: Duration,
        max: usize,
    ) -> Vec<u64> {
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
                None => now >= *seen + first_delay,
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
    pub fn poll_timeout(&self, first_delay: Duration, retry: Duration) -> Option<Instant> {
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
        let (d, r) = (Duration::from_millis(10), Duration::from_millis(50));
        assert!(n.poll(Instant::ZERO, [3, 4].into_iter(), 0, d, r, 10).is_empty());
        assert_eq!(n.poll_timeout(d, r), Some(Instant::from_millis(10)));
        assert_eq!(n.poll(Instant::from_millis(10), [3, 4].into_iter(), 0, d, r, 10), vec![3, 4]);
        assert!(n.poll(Instant::from_millis(30), [4].into_iter(), 0, d, r, 10).is_empty());
        assert_eq!(n.poll(Instant::from_millis(60), [4].into_iter(), 0, d, r, 10), vec![4]);
    }
}
