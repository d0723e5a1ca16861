//! W: the data packets sent since the last cumulative ack (PluriBus 5.1), shared by the schemes
//! that code over it (OEC, RLNC).
//!
//! W is always a contiguous range `[base, base + len)` of first transmissions, because it is
//! purged by a cumulative ack; resends never enter it. It is bounded in length and in age, so a
//! dead reverse path (no acks) cannot make a scheme code over an ever-growing window forever.

use crate::time::Instant;
use std::collections::VecDeque;
use std::time::Duration;

/// The unacknowledged window, with a per-packet value `T` the scheme keeps (e.g. the loss rate of
/// the link the packet went on).
#[derive(Debug, Clone)]
pub(crate) struct UnackedWindow<T> {
    base: u64,
    entries: VecDeque<(Instant, T)>,
    max_len: usize,
    max_age: Duration,
}

impl<T> UnackedWindow<T> {
    /// An empty window holding at most `max_len` packets, none older than `max_age`.
    pub(crate) fn new(max_len: usize, max_age: Duration) -> Self {
        UnackedWindow { base: 0, entries: VecDeque::new(), max_len, max_age }
    }

    /// First sequence number of W.
    pub(crate) fn base(&self) -> u64 {
        self.base
    }

    /// |W|.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether W is empty (nothing to code over).
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether `seq` is in W.
    pub(crate) fn contains(&self, seq: u64) -> bool {
        seq >= self.base && seq < self.base + self.entries.len() as u64
    }

    /// The per-packet values, oldest first.
    pub(crate) fn values(&self) -> impl Iterator<Item = &T> {
        self.entries.iter().map(|(_, v)| v)
    }

    /// Appends `seq`, sent at `now`, if it is the next first transmission; returns false (and
    /// leaves W alone) for anything else, such as a resend.
    pub(crate) fn push(&mut self, now: Instant, seq: u64, value: T) -> bool {
        if self.entries.is_empty() {
            self.base = seq;
        }
        if seq != self.base + self.entries.len() as u64 {
            return false;
        }
        self.entries.push_back((now, value));
        true
    }

    /// Removes everything below `seq` (a cumulative ack).
    pub(crate) fn purge_below(&mut self, seq: u64) {
        while self.base < seq && !self.entries.is_empty() {
            self.entries.pop_front();
            self.base += 1;
        }
        if self.entries.is_empty() {
            self.base = self.base.max(seq);
        }
    }

    /// Removes the oldest packets beyond the age or length bound at `now`; returns whether any left.
    pub(crate) fn expire(&mut self, now: Instant) -> bool {
        let mut purged = false;
        while let Some(&(t, _)) = self.entries.front() {
            if now - t <= self.max_age && self.entries.len() <= self.max_len {
                break;
            }
            self.entries.pop_front();
            self.base += 1;
            purged = true;
        }
        purged
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguous_first_transmissions_purged_by_ack_and_bounds() {
        let mut w: UnackedWindow<()> = UnackedWindow::new(3, Duration::from_secs(1));
        let t = Instant::ZERO;
        assert!(w.push(t, 10, ()) && w.push(t, 11, ()));
        assert!(!w.push(t, 10, ()), "a resend does not enter W");
        assert!(!w.push(t, 13, ()), "W stays contiguous");
        assert!(w.contains(11) && !w.contains(12));
        w.purge_below(11);
        assert_eq!((w.base(), w.len()), (11, 1));
        w.purge_below(20);
        assert_eq!((w.base(), w.len()), (20, 0));
        for s in 20..24 {
            w.push(t, s, ());
        }
        assert!(w.expire(t), "over the length bound");
        assert_eq!((w.base(), w.len()), (21, 3));
        assert!(!w.expire(Instant::from_millis(1000)));
        assert!(w.expire(Instant::from_millis(1001)), "over the age bound");
        assert!(w.is_empty());
    }
}
