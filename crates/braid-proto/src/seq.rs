//! Truncated sequence numbers on the wire, full 64-bit ones in the engine.
//!
//! Global and per-link sequence numbers travel as their low 24 bits (to fit braid's header into
//! WireGuard's 60-byte budget, DESIGN.md 3) and are expanded by the receiver against the largest
//! value it has seen, exactly as QUIC expands packet numbers (RFC 9000, appendix A.3). This is
//! correct as long as reordering stays within 2^23 packets, which the sequencing buffer's bounded
//! hold time guarantees by a wide margin.

/// Bits of a sequence number carried on the wire.
pub const WIRE_SEQ_BITS: u32 = 24;
const WIN: u64 = 1 << WIRE_SEQ_BITS;
const HALF_WIN: u64 = WIN / 2;
const MASK: u64 = WIN - 1;

/// The low 24 bits of `seq`, as sent.
pub fn truncate(seq: u64) -> u32 {
    (seq & MASK) as u32
}

/// Expands a 24-bit `truncated` value to the 64-bit number closest to `expected` (usually one past
/// the largest value received so far).
pub fn expand(expected: u64, truncated: u32) -> u64 {
    let truncated = u64::from(truncated) & MASK;
    let candidate = (expected & !MASK) | truncated;
    if candidate + HALF_WIN <= expected && candidate < (1u64 << 62) - WIN {
        candidate + WIN
    } else if candidate > expected + HALF_WIN && candidate >= WIN {
        candidate - WIN
    } else {
        candidate
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn expands_across_the_wrap() {
        assert_eq!(expand(WIN - 2, truncate(WIN + 1)), WIN + 1);
        assert_eq!(expand(WIN + 3, truncate(WIN - 5)), WIN - 5);
        assert_eq!(expand(0, 5), 5);
        assert_eq!(expand(10, truncate(3)), 3);
    }

    proptest! {
        #[test]
        fn expansion_inverts_truncation_near_expected(expected in 0u64..(1u64 << 50), delta in -(HALF_WIN as i64 - 1)..(HALF_WIN as i64)) {
            let actual = expected as i64 + delta;
            prop_assume!(actual >= 0);
            let actual = actual as u64;
            prop_assert_eq!(expand(expected, truncate(actual)), actual);
        }
    }
}
