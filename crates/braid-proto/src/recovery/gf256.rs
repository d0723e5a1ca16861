//! Arithmetic in GF(2^8), the field of the `rlnc` code (RFC 8681 section 3.3 and RFC 8682's
//! coefficients live in the same field).
//!
//! Elements are bytes; addition is XOR; multiplication is modulo the primitive polynomial
//! x^8 + x^4 + x^3 + x^2 + 1 (0x11d, the one of RFC 5510 Reed-Solomon and of RFC 8681's GF(2^8)
//! variant), with 2 a generator. Fixed as part of the wire format: both ends must agree.
//!
//! The hot loop is [`mul_add`] (`dst ^= c · src`), which encoding and decoding spend almost all of
//! their time in. It looks up one row of a full 64 KiB product table per call, so the per-byte work
//! is a single load and XOR (no log/exp branch on zero), and processes 8 bytes per step so the XOR
//! into `dst` is one 64-bit operation. `unsafe` is forbidden in this workspace, so no SIMD shuffle
//! intrinsics; `benches/codec.rs` measures what this reaches against plain XOR.

/// The field's primitive polynomial, x^8 + x^4 + x^3 + x^2 + 1.
pub const POLY: u16 = 0x11d;

/// `EXP[i] = 2^i` for `i` in `0..510` (doubled so `EXP[log a + log b]` needs no reduction mod 255).
const EXP: [u8; 510] = {
    let mut t = [0u8; 510];
    let mut x: u16 = 1;
    let mut i = 0;
    while i < 510 {
        t[i] = x as u8;
        x <<= 1;
        if x & 0x100 != 0 {
            x ^= POLY;
        }
        i += 1;
    }
    t
};

/// `LOG[a]` for `a != 0`; `LOG[0]` is unused.
const LOG: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 255 {
        t[EXP[i] as usize] = i as u8;
        i += 1;
    }
    t
};

/// `MUL[a][b] = a · b`: 64 KiB, built at compile time.
static MUL: [[u8; 256]; 256] = {
    let mut t = [[0u8; 256]; 256];
    let mut a = 1;
    while a < 256 {
        let mut b = 1;
        while b < 256 {
            t[a][b] = EXP[LOG[a] as usize + LOG[b] as usize];
            b += 1;
        }
        a += 1;
    }
    t
};

/// `a · b`.
#[inline]
pub fn mul(a: u8, b: u8) -> u8 {
    MUL[usize::from(a)][usize::from(b)]
}

/// The multiplicative inverse of `a`; `None` for 0.
#[inline]
pub fn inv(a: u8) -> Option<u8> {
    (a != 0).then(|| EXP[255 - usize::from(LOG[usize::from(a)])])
}

/// `dst ^= src` over the common prefix.
#[inline]
pub fn add_into(dst: &mut [u8], src: &[u8]) {
    let n = dst.len().min(src.len());
    let (d8, dt) = dst[..n].split_at_mut(n - n % 8);
    let (s8, st) = src[..n].split_at(n - n % 8);
    for (d, s) in d8.chunks_exact_mut(8).zip(s8.chunks_exact(8)) {
        let x = u64::from_ne_bytes(d.try_into().expect("chunk of 8"))
            ^ u64::from_ne_bytes(s.try_into().expect("chunk of 8"));
        d.copy_from_slice(&x.to_ne_bytes());
    }
    for (d, s) in dt.iter_mut().zip(st) {
        *d ^= s;
    }
}

/// `dst ^= c · src` over the common prefix: the inner loop of RLNC encoding and decoding.
#[inline]
pub fn mul_add(dst: &mut [u8], src: &[u8], c: u8) {
    match c {
        0 => {}
        1 => add_into(dst, src),
        _ => {
            let row = &MUL[usize::from(c)];
            let n = dst.len().min(src.len());
            let (d8, dt) = dst[..n].split_at_mut(n - n % 8);
            let (s8, st) = src[..n].split_at(n - n % 8);
            for (d, s) in d8.chunks_exact_mut(8).zip(s8.chunks_exact(8)) {
                let p = [
                    row[usize::from(s[0])],
                    row[usize::from(s[1])],
                    row[usize::from(s[2])],
                    row[usize::from(s[3])],
                    row[usize::from(s[4])],
                    row[usize::from(s[5])],
                    row[usize::from(s[6])],
                    row[usize::from(s[7])],
                ];
                let x = u64::from_ne_bytes(d.try_into().expect("chunk of 8")) ^ u64::from_ne_bytes(p);
                d.copy_from_slice(&x.to_ne_bytes());
            }
            for (d, s) in dt.iter_mut().zip(st) {
                *d ^= row[usize::from(*s)];
            }
        }
    }
}

/// `dst = c · dst`.
#[inline]
pub fn scale(dst: &mut [u8], c: u8) {
    if c == 1 {
        return;
    }
    let row = &MUL[usize::from(c)];
    for d in dst {
        *d = row[usize::from(*d)];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Carry-less multiply and reduce, bit by bit: the definition, to check the tables against.
    fn slow_mul(mut a: u8, mut b: u8) -> u8 {
        let mut p = 0u8;
        while b != 0 {
            if b & 1 != 0 {
                p ^= a;
            }
            let hi = a & 0x80 != 0;
            a <<= 1;
            if hi {
                a ^= (POLY & 0xff) as u8;
            }
            b >>= 1;
        }
        p
    }

    #[test]
    fn tables_match_the_definition() {
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                assert_eq!(mul(a, b), slow_mul(a, b), "{a} * {b}");
            }
        }
    }

    #[test]
    fn inverses_and_generator() {
        assert_eq!(inv(0), None);
        for a in 1..=255u8 {
            assert_eq!(mul(a, inv(a).unwrap()), 1, "a = {a}");
        }
        // 2 generates the multiplicative group: all 255 powers are distinct.
        let mut seen = [false; 256];
        for &e in &EXP[..255] {
            assert!(!seen[usize::from(e)]);
            seen[usize::from(e)] = true;
        }
    }

    #[test]
    fn mul_add_matches_bytewise_for_every_length_and_coefficient() {
        let src: Vec<u8> = (0..37u32).map(|i| (i * 73 + 11) as u8).collect();
        for c in [0u8, 1, 2, 0x53, 0xff] {
            for n in [0, 1, 7, 8, 9, 16, 37] {
                let mut dst: Vec<u8> = (0..n as u32).map(|i| (i * 31) as u8).collect();
                let want: Vec<u8> = dst.iter().zip(&src).map(|(d, s)| d ^ slow_mul(c, *s)).collect();
                mul_add(&mut dst, &src, c);
                assert_eq!(dst, want, "c={c} n={n}");
            }
        }
        let mut d = vec![1u8, 2, 3];
        scale(&mut d, 3);
        assert_eq!(d, vec![slow_mul(3, 1), slow_mul(3, 2), slow_mul(3, 3)]);
    }
}
