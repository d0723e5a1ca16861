//! Anti-replay window, RFC 6479 ("IPsec Anti-Replay Algorithm without Bit Shifting").
//!
//! A ring of 64-bit blocks; a counter's bit is `counter mod (64 * BLOCKS)`. Moving the window
//! forward zeroes the blocks it passes instead of shifting the whole bitmap (RFC 6479 section 2),
//! and one block is kept as slack so the window is always at least [`REPLAY_WINDOW`] wide.
//! Checking and updating are separate so that only authenticated datagrams move the window: a
//! forger cannot push it forward and make genuine packets look old.

/// Blocks of 64 bits in the ring.
const BLOCKS: usize = 64;
const BLOCK_BITS: u64 = 64;
const RING_BITS: u64 = BLOCKS as u64 * BLOCK_BITS;

/// Packets behind the highest one received that are still accepted (once each): 4,032. braid
/// sends on several uplinks whose delays differ, but the counter is per link, so this only has
/// to absorb one uplink's own reordering; it is twice the 2,048 that WireGuard uses for a whole
/// tunnel.
pub const REPLAY_WINDOW: u64 = RING_BITS - BLOCK_BITS;

/// Why [`ReplayWindow::check`] refused a counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    /// This counter was received before.
    #[error("duplicate")]
    Duplicate,
    /// The counter is more than [`REPLAY_WINDOW`] behind the highest received.
    #[error("too old")]
    TooOld,
}

/// Which counters of one sender have been received.
#[derive(Clone)]
pub struct ReplayWindow {
    highest: u64,
    bitmap: [u64; BLOCKS],
}

impl Default for ReplayWindow {
    fn default() -> Self {
        Self::new()
    }
}

impl ReplayWindow {
    /// An empty window: every counter is new.
    pub fn new() -> Self {
        ReplayWindow { highest: 0, bitmap: [0; BLOCKS] }
    }

    /// The highest counter received (0 before any).
    pub fn highest(&self) -> u64 {
        self.highest
    }

    fn position(counter: u64) -> (usize, u64) {
        let block = ((counter / BLOCK_BITS) % BLOCKS as u64) as usize;
        (block, 1u64 << (counter % BLOCK_BITS))
    }

    /// Whether `counter` would be accepted; changes nothing.
    pub fn check(&self, counter: u64) -> Result<(), ReplayError> {
        if counter > self.highest {
            return Ok(());
        }
        // `highest - counter`, not `counter + REPLAY_WINDOW`: the sum overflows for counters
        // within REPLAY_WINDOW of u64::MAX (a panic in debug builds, a wrong "too old" in release).
        if self.highest - counter >= REPLAY_WINDOW {
            return Err(ReplayError::TooOld);
        }
        let (block, bit) = Self::position(counter);
        if self.bitmap[block] & bit != 0 { Err(ReplayError::Duplicate) } else { Ok(()) }
    }

    /// Records `counter` as received. Call only after [`check`](Self::check) passed and the datagram
    /// authenticated.
    pub fn update(&mut self, counter: u64) {
        if counter > self.highest {
            let current = self.highest / BLOCK_BITS;
            let new = counter / BLOCK_BITS;
            let clear = (new - current).min(BLOCKS as u64);
            for i in 1..=clear {
                self.bitmap[((current + i) % BLOCKS as u64) as usize] = 0;
            }
            self.highest = counter;
        }
        let (block, bit) = Self::position(counter);
        self.bitmap[block] |= bit;
    }

    /// [`check`](Self::check) then [`update`](Self::update).
    pub fn check_and_update(&mut self, counter: u64) -> Result<(), ReplayError> {
        self.check(counter)?;
        self.update(counter);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn duplicates_and_old_counters_are_refused() {
        let mut w = ReplayWindow::new();
        assert_eq!(w.check_and_update(0), Ok(()));
        assert_eq!(w.check_and_update(0), Err(ReplayError::Duplicate));
        assert_eq!(w.check_and_update(10), Ok(()));
        assert_eq!(w.check_and_update(5), Ok(()), "reordered within the window");
        assert_eq!(w.check_and_update(5), Err(ReplayError::Duplicate));
        assert_eq!(w.check_and_update(10_000), Ok(()));
        assert_eq!(w.check(10_000 - REPLAY_WINDOW), Err(ReplayError::TooOld));
        assert_eq!(w.check(10_000 - REPLAY_WINDOW + 1), Ok(()), "the oldest counter still in the window");
        assert_eq!(w.check_and_update(9_000), Ok(()));
        assert_eq!(w.check(9_000), Err(ReplayError::Duplicate));
    }

    #[test]
    fn a_jump_clears_the_bits_it_passes() {
        let mut w = ReplayWindow::new();
        for c in 0..100 {
            w.update(c);
        }
        // Counter c + RING_BITS maps to the same bit as c: it must not look like a duplicate.
        assert_eq!(w.check_and_update(50 + RING_BITS), Ok(()));
        assert_eq!(w.check(51 + RING_BITS), Ok(()));
        assert_eq!(w.check(50), Err(ReplayError::TooOld));
    }

    /// Found by the `crypto-replay` fuzz target: counters at the top of the u64 range.
    #[test]
    fn counters_near_u64_max_do_not_overflow() {
        let mut w = ReplayWindow::new();
        assert_eq!(w.check_and_update(u64::MAX - 5), Ok(()));
        assert_eq!(w.check(u64::MAX - 10), Ok(()));
        assert_eq!(w.check_and_update(u64::MAX - 5), Err(ReplayError::Duplicate));
        assert_eq!(w.check_and_update(u64::MAX), Ok(()));
        assert_eq!(w.check(u64::MAX - REPLAY_WINDOW), Err(ReplayError::TooOld));
        assert_eq!(w.check(u64::MAX - REPLAY_WINDOW + 1), Ok(()));
    }

    proptest! {
        /// Against a reference (a set of everything seen): accepts exactly the counters never seen
        /// and within the window.
        #[test]
        fn matches_a_reference(steps in proptest::collection::vec(0u64..12_000, 1..600)) {
            let mut w = ReplayWindow::new();
            let mut seen = std::collections::BTreeSet::new();
            let mut highest = 0u64;
            for c in steps {
                let fresh = !seen.contains(&c) && (c > highest || c + REPLAY_WINDOW > highest);
                prop_assert_eq!(w.check(c).is_ok(), fresh, "counter {} highest {}", c, highest);
                if fresh {
                    w.update(c);
                    seen.insert(c);
                    highest = highest.max(c);
                }
            }
        }
    }
}
