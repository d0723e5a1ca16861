//! Coded (repair) packets and the description of what they cover.
//!
//! What a coded packet covers is a window of consecutive global sequence numbers
//! `[base, base + span)` — the sender's W, which is always contiguous because it is purged by a
//! cumulative ack (PluriBus 5.1) — and the subset of it that was combined: `degree` members drawn
//! by a PRNG from `seed`. Carrying the seed instead of a bitmap or coefficient list keeps the header
//! constant at 22 bytes whatever the degree (the same idea as RFC 8681's repair key), so the TUN MTU
//! does not depend on the window size.

use super::{Reader, WireError, Writer};

/// Bytes of coded-specific fields after the common header.
pub(crate) const CODED_FIELDS_LEN: usize = 1 + 3 + 2 + 2 + 2 + 2;

/// Bytes a fountain source symbol adds to a passenger packet: its length, so a recovered packet
/// gets its true length back (`len(2 BE) ‖ packet`, zero-padded to the symbol size).
pub const FOUNTAIN_SYMBOL_PREFIX: usize = 2;

/// Which code produced the repair payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CodeKind {
    /// XOR of the covered packets (OEC, FEC): recovers one missing packet.
    Xor,
    /// A random linear combination over GF(2^8) of the covered packets (`rlnc`, RFC 8681 style):
    /// coefficients come from the coverage (see [`crate::recovery::rlnc_coefficients`]), and any
    /// k such packets recover any k missing members with high probability.
    Rlnc,
    /// A RaptorQ (RFC 6330) repair symbol of one block (FMTCP IV). The coverage's `base`/`span`
    /// is the block, `seed` the repair symbol's index r (its ESI is K + r, K the block's span; RFC
    /// 6330 5.3.4 derives the internal symbol id K' + r from it), the length field the symbol size.
    Fountain,
}

impl CodeKind {
    /// Every code braid knows; the receiver keeps a decoder for each.
    pub const ALL: &'static [CodeKind] = &[CodeKind::Xor, CodeKind::Rlnc, CodeKind::Fountain];

    fn code(self) -> u8 {
        match self {
            CodeKind::Xor => 1,
            CodeKind::Rlnc => 2,
            CodeKind::Fountain => 3,
        }
    }

    fn from_code(c: u8) -> Result<Self, WireError> {
        match c {
            1 => Ok(CodeKind::Xor),
            2 => Ok(CodeKind::Rlnc),
            3 => Ok(CodeKind::Fountain),
            _ => Err(WireError::Invalid { field: "code kind", why: "unknown code" }),
        }
    }
}

/// Which data packets a coded packet combines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Coverage {
    /// First sequence number of the window (64-bit, expanded).
    pub base: u64,
    /// Window length.
    pub span: u16,
    /// How many packets of the window are combined (all of them when `degree >= span`).
    pub degree: u16,
    /// Seed of the member selection.
    pub seed: u16,
}

impl Coverage {
    /// A coverage of every packet in `[base, base + span)`.
    pub fn all(base: u64, span: u16) -> Self {
        Coverage { base, span, degree: span, seed: 0 }
    }

    /// The covered sequence numbers, ascending. Both ends compute the same set from the same fields:
    /// Floyd's sampling driven by SplitMix64 of the seed, both fixed here as part of the wire format.
    pub fn members(&self) -> Vec<u64> {
        let span = u64::from(self.span);
        if self.degree >= self.span {
            return (0..span).map(|i| self.base + i).collect();
        }
        let degree = u64::from(self.degree);
        let mut rng = SplitMix64(u64::from(self.seed) ^ 0x9e37_79b9_7f4a_7c15 ^ (self.base << 16));
        let mut chosen = vec![0u64; span.div_ceil(64) as usize];
        let mut test_and_set = |i: u64| {
            let (w, b) = ((i / 64) as usize, i % 64);
            let was = chosen[w] >> b & 1 == 1;
            chosen[w] |= 1 << b;
            was
        };
        for j in (span - degree)..span {
            let t = rng.below(j + 1);
            if test_and_set(t) {
                test_and_set(j);
            }
        }
        let mut out = Vec::with_capacity(self.degree as usize);
        for (w, word) in chosen.iter().enumerate() {
            let mut bits = *word;
            while bits != 0 {
                let b = u64::from(bits.trailing_zeros());
                out.push(self.base + w as u64 * 64 + b);
                bits &= bits - 1;
            }
        }
        out
    }
}

/// SplitMix64 (Steele, Lea, Flood 2014): tiny, fast, and fixed forever as part of the wire format,
/// so a coverage means the same set in every version of braid (a general-purpose RNG crate makes no
/// such promise). Also draws `rlnc`'s coefficients.
pub(crate) struct SplitMix64(pub(crate) u64);

impl SplitMix64 {
    /// The next 64 random bits.
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0) by Lemire's multiply-shift; the tiny bias is irrelevant here and
    /// keeps the function branch-free and identical on every platform.
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
}

/// A coded packet's body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodedRepr<'a> {
    /// The code.
    pub kind: CodeKind,
    /// Low 24 bits of the window's base sequence number.
    pub base: u32,
    /// Window length.
    pub span: u16,
    /// Members combined.
    pub degree: u16,
    /// Member-selection seed.
    pub seed: u16,
    /// The same combination of the covered packets' lengths, so a recovered packet gets its true
    /// length back: their XOR for [`CodeKind::Xor`]; for [`CodeKind::Rlnc`] the first two coded
    /// symbols of `len (16-bit BE) ‖ packet`, i.e. the GF(2^8) combination of the lengths' high and
    /// low bytes (carrying them here keeps the payload no longer than the longest member, so the
    /// TUN MTU is the same for every code).
    pub len_xor: u16,
    /// The combination of the covered packets, each zero-padded to the longest.
    pub payload: &'a [u8],
}

impl<'a> CodedRepr<'a> {
    /// Parses a coded body.
    pub fn parse(body: &'a [u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(body);
        let kind = CodeKind::from_code(r.u8("code kind")?)?;
        let base = r.u24("coded base")?;
        let span = r.u16("coded span")?;
        let degree = r.u16("coded degree")?;
        let seed = r.u16("coded seed")?;
        let len_xor = r.u16("coded length")?;
        if span == 0 || degree == 0 {
            return Err(WireError::Invalid { field: "coded span", why: "covers nothing" });
        }
        let payload = r.rest();
        if payload.is_empty() {
            return Err(WireError::Invalid { field: "coded payload", why: "empty" });
        }
        Ok(CodedRepr { kind, base, span, degree, seed, len_xor, payload })
    }

    /// Bytes the body takes.
    pub fn len(&self) -> usize {
        CODED_FIELDS_LEN + self.payload.len()
    }

    /// Whether the payload is empty (never true for a parsed body).
    pub fn is_empty(&self) -> bool {
        self.payload.is_empty()
    }

    /// Writes the body, returning the bytes written.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let mut w = Writer::new(buf, self.len())?;
        w.u8(self.kind.code());
        w.u24(self.base & 0x00ff_ffff);
        w.u16(self.span);
        w.u16(self.degree);
        w.u16(self.seed);
        w.u16(self.len_xor);
        w.bytes(self.payload);
        Ok(w.pos)
    }

    /// The coverage, with the base expanded against `expected` (see [`crate::seq::expand`]).
    pub fn coverage(&self, expected: u64) -> Coverage {
        Coverage {
            base: crate::seq::expand(expected, self.base),
            span: self.span,
            degree: self.degree,
            seed: self.seed,
        }
    }
}
