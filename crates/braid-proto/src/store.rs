//! A window of recent packets indexed by global sequence number.
//!
//! The sender keeps what it sent (for retransmission and coding), the receiver what it received
//! or recovered (for decoding coded packets). Sequence numbers are nearly contiguous, so a ring
//! indexed by `seq - base` beats a hash map; both ends bound it by count and by age so memory per
//! session stays fixed.

use crate::time::Instant;
use bytes::Bytes;
use std::collections::VecDeque;
use std::time::Duration;

/// One stored packet.
#[derive(Debug, Clone)]
pub struct Stored<M> {
    /// The packet.
    pub packet: Bytes,
    /// When it was stored.
    pub at: Instant,
    /// Caller's metadata (e.g. which link it was sent on).
    pub meta: M,
}

/// Recent packets by sequence number, bounded by count and age.
#[derive(Debug, Clone)]
pub struct PacketStore<M> {
    base: u64,
    slots: VecDeque<Option<Stored<M>>>,
    max_len: usize,
    max_age: Duration,
    len: usize,
}

impl<M> PacketStore<M> {
    /// A store keeping at most `max_len` sequence numbers' worth of slots, none older than `max_age`.
    pub fn new(max_len: usize, max_age: Duration) -> Self {
        PacketStore { base: 0, slots: VecDeque::new(), max_len: max_len.max(1), max_age, len: 0 }
    }

    /// Lowest sequence number the store can still hold.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// Number of packets held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Stores `packet` under `seq`; ignored if `seq` is below the window. Evicts the oldest slots to
    /// keep within bounds.
    pub fn insert(&mut self, now: Instant, seq: u64, packet: Bytes, meta: M) {
        if seq < self.base {
            return;
        }
        if self.slots.is_empty() {
            self.base = seq;
        }
        let idx = (seq - self.base) as usize;
        if idx >= self.max_len {
            // Far ahead: slide the window so `seq` is its last slot.
            self.remove_below(seq + 1 - self.max_len as u64);
        }
        let idx = (seq - self.base) as usize;
        if idx >= self.slots.len() {
            self.slots.resize_with(idx + 1, || None);
        }
        if self.slots[idx].is_none() {
            self.len += 1;
        }
        self.slots[idx] = Some(Stored { packet, at: now, meta });
        self.expire(now);
    }

    /// The packet stored under `seq`.
    pub fn get(&self, seq: u64) -> Option<&Stored<M>> {
        let idx = usize::try_from(seq.checked_sub(self.base)?).ok()?;
        self.slots.get(idx)?.as_ref()
    }

    /// Mutable access to the entry under `seq`.
    pub fn get_mut(&mut self, seq: u64) -> Option<&mut Stored<M>> {
        let idx = usize::try_from(seq.checked_sub(self.base)?).ok()?;
        self.slots.get_mut(idx)?.as_mut()
    }

    /// Whether `seq` is held.
    pub fn contains(&self, seq: u64) -> bool {
        self.get(seq).is_some()
    }

    /// Forgets everything below `seq` and raises the window's base to it.
    pub fn remove_below(&mut self, seq: u64) {
        while self.base < seq {
            match self.slots.pop_front() {
                Some(slot) => {
                    if slot.is_some() {
                        self.len -= 1;
                    }
                    self.base += 1;
                }
                None => {
                    self.base = seq;
                }
            }
        }
    }

    /// Drops entries older than the age bound, from the front.
    fn expire(&mut self, now: Instant) {
        while let Some(front) = self.slots.front() {
            match front {
                Some(s) if now - s.at <= self.max_age => break,
                _ => {
                    if self.slots.pop_front().flatten().is_some() {
                        self.len -= 1;
                    }
                    self.base += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_get_and_bounds() {
        let mut s: PacketStore<u8> = PacketStore::new(4, Duration::from_secs(10));
        let t = Instant::ZERO;
        for i in 10..14 {
            s.insert(t, i, Bytes::from(vec![i as u8]), 0);
        }
        assert_eq!(s.len(), 4);
        assert_eq!(s.get(12).unwrap().packet[0], 12);
        s.insert(t, 15, Bytes::from_static(b"x"), 1);
        // Window of 4 ending at 15: 12..=15.
        assert!(!s.contains(11));
        assert!(s.contains(12) && s.contains(15) && !s.contains(14));
        assert_eq!(s.len(), 3);
        s.insert(t, 5, Bytes::from_static(b"old"), 0);
        assert!(!s.contains(5));
        s.remove_below(14);
        assert_eq!(s.len(), 1);
        assert_eq!(s.base(), 14);
    }

    #[test]
    fn old_entries_expire() {
        let mut s: PacketStore<()> = PacketStore::new(100, Duration::from_millis(100));
        s.insert(Instant::ZERO, 1, Bytes::from_static(b"a"), ());
        s.insert(Instant::from_millis(50), 2, Bytes::from_static(b"b"), ());
        s.insert(Instant::from_millis(120), 3, Bytes::from_static(b"c"), ());
        assert!(!s.contains(1));
        assert!(s.contains(2) && s.contains(3));
        assert_eq!(s.len(), 2);
    }
}
