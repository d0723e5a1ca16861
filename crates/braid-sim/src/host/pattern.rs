//! The deterministic byte pattern a flow carries, so the receiver can check every byte.
//!
//! Byte `o` of flow `f` is byte `o % 8` (little endian) of word `(key(f) ^ o / 8) * GOLDEN`. Both
//! hosts derive it from the flow id alone and any offset can be produced or checked without
//! state. Multiplying by an odd constant is a bijection, so no two words of a flow are equal and
//! a misplaced word is caught; one multiply per 8 bytes keeps the check cheap next to TCP itself
//! (a full mixer per word cost a fifth of a host's time).

use super::FlowId;

/// The golden ratio in 64-bit fixed point: odd, with well-spread bits.
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's output function: a bijective mixer with full avalanche.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The pattern key of a flow: flow ids are small and consecutive, their keys are not.
pub(crate) fn key(flow: FlowId) -> u64 {
    mix(flow.0 ^ 0x6272_6169_6400_0000)
}

/// Pattern word number `index` of the flow keyed `key`.
fn word(key: u64, index: u64) -> u64 {
    (key ^ index).wrapping_mul(GOLDEN)
}

/// Pattern byte at stream offset `offset`.
fn byte_at(key: u64, offset: u64) -> u8 {
    word(key, offset / 8).to_le_bytes()[(offset % 8) as usize]
}

/// Fill `buf` with the pattern bytes at stream offsets `offset..offset + buf.len()`.
pub(crate) fn fill(key: u64, offset: u64, buf: &mut [u8]) {
    // Head: single bytes up to the next word boundary.
    let head = (((8 - offset % 8) % 8) as usize).min(buf.len());
    let (head_buf, rest) = buf.split_at_mut(head);
    for (i, b) in head_buf.iter_mut().enumerate() {
        *b = byte_at(key, offset + i as u64);
    }
    let mut pos = offset + head as u64;
    let mut words = rest.chunks_exact_mut(8);
    for chunk in &mut words {
        chunk.copy_from_slice(&word(key, pos / 8).to_le_bytes());
        pos += 8;
    }
    for (i, b) in words.into_remainder().iter_mut().enumerate() {
        *b = byte_at(key, pos + i as u64);
    }
}

/// The stream offset of the first byte of `buf` that differs from the pattern, if any.
pub(crate) fn first_mismatch(key: u64, offset: u64, buf: &[u8]) -> Option<u64> {
    let head = (((8 - offset % 8) % 8) as usize).min(buf.len());
    let (head_buf, rest) = buf.split_at(head);
    for (i, &b) in head_buf.iter().enumerate() {
        let at = offset + i as u64;
        if b != byte_at(key, at) {
            return Some(at);
        }
    }
    let mut pos = offset + head as u64;
    let mut words = rest.chunks_exact(8);
    for chunk in &mut words {
        let expected = word(key, pos / 8).to_le_bytes();
        if chunk != expected {
            // The first differing byte inside the word.
            let i = chunk.iter().zip(expected).position(|(a, b)| *a != b).unwrap_or(0);
            return Some(pos + i as u64);
        }
        pos += 8;
    }
    for (i, &b) in words.remainder().iter().enumerate() {
        let at = pos + i as u64;
        if b != byte_at(key, at) {
            return Some(at);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn split_fills_match_one_fill(flow in any::<u64>(), offset in 0u64..1 << 40, len in 0usize..200, cut in 0usize..200) {
            let key = key(FlowId(flow));
            let mut whole = vec![0; len];
            fill(key, offset, &mut whole);
            let cut = cut.min(len);
            let mut parts = vec![0; len];
            let (a, b) = parts.split_at_mut(cut);
            fill(key, offset, a);
            fill(key, offset + cut as u64, b);
            prop_assert_eq!(&whole, &parts);
            prop_assert_eq!(first_mismatch(key, offset, &whole), None);
        }

        #[test]
        fn any_flipped_byte_is_found(flow in any::<u64>(), offset in 0u64..1 << 40, len in 1usize..200, at in 0usize..200, flip in 1u8..=255) {
            let key = key(FlowId(flow));
            let mut buf = vec![0; len];
            fill(key, offset, &mut buf);
            let at = at % len;
            buf[at] ^= flip;
            prop_assert_eq!(first_mismatch(key, offset, &buf), Some(offset + at as u64));
        }
    }

    #[test]
    fn flows_differ() {
        let (mut a, mut b) = ([0; 64], [0; 64]);
        fill(key(FlowId(1)), 0, &mut a);
        fill(key(FlowId(2)), 0, &mut b);
        assert_ne!(a, b);
        assert_eq!(first_mismatch(key(FlowId(2)), 0, &a).map(|o| o < 8), Some(true));
    }
}
