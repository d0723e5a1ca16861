//! Truncated sequence numbers on the wire, full 64-bit ones in the engine.
//!
//! Global and per-link sequence numbers travel as their low 24 bits (to fit braid's header into
//! WireGuard's 60-byte budget, docs/design.md 3) and are expanded by the receiver against the largest
//! value it has seen, exactly as QUIC expands packet numbers (RFC 9000, appendix A.3). This is
//! correct as long as reordering stays within 2^23 packets, which the sequencing buffer's bounded
//! hold time guarantees by a wide margin.

/// Bits of a sequence number carried on the wire.
pub const WIRE_SEQ_BITS: u32 = 24;
const WIN: u64 = 1 << WIRE_SEQ_BITS;
const MASK: u64 = WIN - 1;

/// The low 24 bits of `seq`, as sent.
pub fn truncate(seq: u64) -> u32 {
    (seq & MASK) as u32
}

/// Expands a 24-bit `truncated` value to the 64-bit number closest to `expected` (usually one past
/// the largest value received so far).
pub fn expand(expected: u64, truncated: u32) -> u64 {
    expand_bits(expected, u64::from(truncated), WIRE_SEQ_BITS)
}

/// Bits of the cumulative ack a data packet piggybacks (docs/design.md 3): 16, so that a data packet
/// with an ack still fits WireGuard's 60 bytes. Feedback packets carry 24-bit acks.
pub const PIGGYBACK_ACK_BITS: u32 = 16;

/// The low 16 bits of a cumulative ack, as piggybacked on data.
pub fn truncate_ack(ack: u64) -> u16 {
    (ack & ((1 << PIGGYBACK_ACK_BITS) - 1)) as u16
}

/// Expands a piggybacked 16-bit ack against the last ack known, `known`, given that the true value
/// is at most `next_seq` (nothing unsent can be acked). The expansion is unique only while fewer
/// than 2^15 packets are unacked; beyond that (a gigabit stream over a long RTT, or a peer that has
/// sent no data for a long time) the piggybacked ack is ignored, None, and the 24-bit acks of
/// feedback packets, which always come, carry the information instead. The result may be below
/// `known` (a data packet that overtook a later one).
pub fn expand_ack(known: u64, next_seq: u64, truncated: u16) -> Option<u64> {
    let half = 1u64 << (PIGGYBACK_ACK_BITS - 1);
    if next_seq.saturating_sub(known) >= half {
        return None;
    }
    let ack = expand_bits(known, u64::from(truncated), PIGGYBACK_ACK_BITS);
    (ack <= next_seq).then_some(ack)
}

/// The number closest to `expected` whose low `bits` bits are `truncated` (RFC 9000, A.3).
fn expand_bits(expected: u64, truncated: u64, bits: u32) -> u64 {
    let win = 1u64 << bits;
    let (half, mask) = (win / 2, win - 1);
    let candidate = (expected & !mask) | (truncated & mask);
    if candidate + half <= expected && candidate < (1u64 << 62) - win {
        candidate + win
    } else if candidate > expected + half && candidate >= win {
        candidate - win
    } else {
        candidate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HALF_WIN: u64 = WIN / 2;
    use proptest::prelude::*;

    #[test]
    fn expands_across_the_wrap() {
        assert_eq!(expand(WIN - 2, truncate(WIN + 1)), WIN + 1);
        assert_eq!(expand(WIN + 3, truncate(WIN - 5)), WIN - 5);
        assert_eq!(expand(0, 5), 5);
        assert_eq!(expand(10, truncate(3)), 3);
    }

    #[test]
    fn piggybacked_ack_crosses_the_16_bit_wrap_and_refuses_wide_windows() {
        assert_eq!(expand_ack(65_530, 65_600, truncate_ack(65_540)), Some(65_540));
        assert_eq!(expand_ack(65_540, 65_600, truncate_ack(65_530)), Some(65_530));
        // Nothing unsent can be acked.
        assert_eq!(expand_ack(100, 120, truncate_ack(130)), None);
        // 2^15 or more unacked: ambiguous, left to the feedback's 24-bit ack.
        assert_eq!(expand_ack(0, 1 << 15, 5), None);
        assert_eq!(expand_ack(0, (1 << 15) - 1, 5), Some(5));
    }

    proptest! {
        #[test]
        fn expansion_inverts_truncation_near_expected(expected in 0u64..(1u64 << 50), delta in -(HALF_WIN as i64 - 1)..(HALF_WIN as i64)) {
            let actual = expected as i64 + delta;
            prop_assume!(actual >= 0);
            let actual = actual as u64;
            prop_assert_eq!(expand(expected, truncate(actual)), actual);
        }

        #[test]
        fn piggybacked_ack_expands_exactly_or_not_at_all(
            known in 0u64..(1u64 << 40),
            back in 0u64..40_000,
            ahead in 0u64..40_000,
            unsent in 0u64..40_000,
        ) {
            // The true ack is anywhere from `back` below the known one (reordered) to `ahead`
            // above it; the sender has sent `unsent` more than that.
            let actual = known.saturating_sub(back) + if back == 0 { ahead } else { 0 };
            let next_seq = actual.max(known) + unsent;
            match expand_ack(known, next_seq, truncate_ack(actual)) {
                Some(v) => {
                    // Whenever it answers, the answer is right, unless the truth lies more than
                    // 2^15 below `known`, which only a packet reordered by 32k packets can do.
                    if back < 1 << 15 {
                        prop_assert_eq!(v, actual);
                    }
                    prop_assert!(v <= next_seq);
                }
                None => prop_assert!(next_seq - known >= 1 << 15 || back >= 1 << 15),
            }
        }
    }
}
