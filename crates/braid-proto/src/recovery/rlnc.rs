//! The `rlnc` code: sliding-window random linear coding over GF(2^8) in the spirit of RFC 8681
//! (Sliding Window Random Linear Code FEC scheme), encoder and decoder.
//!
//! **Wire format** (fixed; both ends must agree). A coded packet of kind [`CodeKind::Rlnc`] covers
//! the members `m_0 < m_1 < ... < m_{n-1}` its [`Coverage`] names (a dense code, `degree = span`,
//! covers the whole window). Each member `i` is the symbol string `s_i = len_i (16-bit BE) ‖ p_i`
//! zero-padded to the longest member, and the coded packet carries `Σ c_i · s_i` over GF(2^8)
//! ([`super::gf256`], polynomial 0x11d): its first two bytes in the header's length field, the rest
//! as the payload, so the payload is exactly as long as the longest member (as with XOR) and the
//! TUN MTU does not depend on the code. The coefficients `c_i` are drawn by
//! [`rlnc_coefficients`]: the wire's SplitMix64 seeded from the coverage's seed and base, one byte
//! at a time (little-endian within each 64-bit draw), zero bytes skipped, so every coefficient is
//! nonzero (RFC 8681 section 3.6 likewise derives its coefficients from a repair key, with a PRNG
//! of its own, RFC 8682).
//!
//! **Decoding** (RFC 8681 section 3.2 leaves the decoder open; this is the usual on-line Gaussian
//! elimination). Coded packets are reduced by the members the receiver has (`s -= c · s_known`);
//! what is left is an equation over the missing members. Equations are kept in reduced row echelon
//! form, one row per pivot, so every new equation is reduced by the kept rows, checked for
//! innovation on its coefficients alone (a useless coded packet costs no payload work), and then
//! eliminated from the others. Whenever a row has only its pivot left, that packet is recovered:
//! its length comes back from the first two symbols, and the padding past it must be zero (a cheap
//! consistency check against forged or inconsistent equations). Data packets that arrive later
//! reduce the kept rows the same way, so rank can grow from either side.
//!
//! The decoder cannot authenticate what it is given (that is the AEAD's job, docs/design.md 3); it only
//! makes sure forged input never panics and rarely yields a packet: members longer than the
//! payload, out-of-range recovered lengths, non-zero padding and equations that contradict kept
//! ones when fully reduced are counted as discarded. A coded packet whose coefficients are not
//! innovative is counted useless without looking at its payload, so a contradiction it carries
//! goes unnoticed (and harmless).

use super::Known;
use super::codec::{Decoder, DecoderStats, Encoder};
use super::gf256;
use crate::time::Instant;
use crate::wire::{Coverage, SplitMix64};
use std::collections::HashSet;
use std::time::Duration;

/// Most members a coded packet may have for the decoder to look at it; more is forged or from a
/// sender whose window would make decoding too costly (braid's sender caps W at 256).
pub const MAX_MEMBERS: usize = 1024;
/// Most missing packets the decoder solves for at once, over all kept equations. Gaussian
/// elimination is cubic in it; RLNC's sender codes over at most 256 packets, so at most 256 can be
/// missing from one window.
pub const MAX_UNKNOWNS: usize = 256;

/// Salt of the coefficient stream, so it is independent of the member-selection stream that
/// [`Coverage::members`] draws from the same seed.
const COEFF_SALT: u64 = 0x726c_6e63_6f65_6666;

/// The nonzero GF(2^8) coefficients of the `n` members of an `rlnc` coded packet with `coverage`,
/// in ascending member order. Part of the wire format (see the module documentation).
pub fn rlnc_coefficients(coverage: &Coverage, n: usize) -> Vec<u8> {
    let mut rng = SplitMix64(u64::from(coverage.seed) ^ COEFF_SALT ^ (coverage.base << 16));
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        for b in rng.next().to_le_bytes() {
            if b != 0 && out.len() < n {
                out.push(b);
            }
        }
    }
    out
}

/// The RLNC encoder: `Σ c_i · (len_i ‖ p_i)` over the members (module documentation).
#[derive(Debug, Clone, Copy, Default)]
pub struct RlncEncoder;

impl Encoder for RlncEncoder {
    fn encode(&mut self, coverage: &Coverage, members: &[(u64, &[u8])]) -> Option<(Vec<u8>, u16)> {
        let max = members.iter().map(|(_, p)| p.len()).max()?;
        let coefs = rlnc_coefficients(coverage, members.len());
        let mut payload = vec![0u8; max];
        let mut len = [0u8; 2];
        for (&c, (_, p)) in coefs.iter().zip(members) {
            let l = u16::try_from(p.len()).ok()?.to_be_bytes();
            len[0] ^= gf256::mul(c, l[0]);
            len[1] ^= gf256::mul(c, l[1]);
            gf256::mul_add(&mut payload, p, c);
        }
        Some((payload, u16::from_be_bytes(len)))
    }
}

/// A sparse coefficient vector: `(missing sequence number, nonzero coefficient)`, ascending.
type Cols = Vec<(u64, u8)>;

/// One kept equation: `Σ cols · s = data`, with coefficient 1 on `pivot`, and no other row's
/// pivot among its columns (reduced row echelon form).
#[derive(Debug, Clone)]
struct Row {
    /// Missing members and their coefficients, ascending, all nonzero.
    cols: Cols,
    pivot: u64,
    /// `len (BE) ‖ payload`, the combination of the unknowns' symbol strings.
    data: Vec<u8>,
    arrived: Instant,
}

/// The coefficient of `seq` in `cols`.
fn coef(cols: &[(u64, u8)], seq: u64) -> u8 {
    cols.binary_search_by_key(&seq, |&(s, _)| s).map_or(0, |i| cols[i].1)
}

/// `a - c · b` (= `a + c · b` in GF(2^8)) on sparse coefficient vectors, zeros dropped.
fn combine(a: &[(u64, u8)], b: &[(u64, u8)], c: u8) -> Cols {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let next = match (a.get(i), b.get(j)) {
            (Some(&(sa, ca)), Some(&(sb, cb))) if sa == sb => {
                i += 1;
                j += 1;
                (sa, ca ^ gf256::mul(c, cb))
            }
            (Some(&(sa, ca)), Some(&(sb, _))) if sa < sb => {
                i += 1;
                (sa, ca)
            }
            (Some(&x), None) => {
                i += 1;
                x
            }
            (_, Some(&(sb, cb))) => {
                j += 1;
                (sb, gf256::mul(c, cb))
            }
            (None, None) => unreachable!("loop condition"),
        };
        if next.1 != 0 {
            out.push(next);
        }
    }
    out
}

/// `dst ^= c · src`, growing `dst` with zeros (padding) when `src` is longer.
fn mul_add_grow(dst: &mut Vec<u8>, src: &[u8], c: u8) {
    if dst.len() < src.len() {
        dst.resize(src.len(), 0);
    }
    gf256::mul_add(dst, src, c);
}

/// Subtracts `c · (len ‖ packet)` from `data`; false if the packet cannot be a member (longer than
/// the combination, or over 65535 bytes).
fn subtract_packet(data: &mut [u8], packet: &[u8], c: u8) -> bool {
    let Ok(len) = u16::try_from(packet.len()) else { return false };
    if data.len() < 2 + packet.len() {
        return false;
    }
    let l = len.to_be_bytes();
    data[0] ^= gf256::mul(c, l[0]);
    data[1] ^= gf256::mul(c, l[1]);
    gf256::mul_add(&mut data[2..], packet, c);
    true
}

/// On-line Gaussian-elimination decoder for RLNC-coded packets (module documentation).
#[derive(Debug, Clone)]
pub struct RlncDecoder {
    rows: Vec<Row>,
    max_rows: usize,
    max_age: Duration,
    stats: DecoderStats,
}

impl RlncDecoder {
    /// A decoder keeping at most `max_rows` equations (and at most [`MAX_UNKNOWNS`] unknowns), none
    /// longer than `max_age`.
    pub fn new(max_rows: usize, max_age: Duration) -> Self {
        RlncDecoder {
            rows: Vec::new(),
            max_rows: max_rows.clamp(1, MAX_UNKNOWNS),
            max_age,
            stats: DecoderStats::default(),
        }
    }

    /// Equations currently kept.
    pub fn pending(&self) -> usize {
        self.rows.len()
    }

    /// Distinct missing packets the kept equations involve.
    pub fn unknowns(&self) -> usize {
        self.rows.iter().flat_map(|r| r.cols.iter().map(|&(s, _)| s)).collect::<HashSet<_>>().len()
    }

    fn expire(&mut self, now: Instant) {
        let before = self.rows.len();
        let max_age = self.max_age;
        self.rows.retain(|r| now - r.arrived <= max_age);
        self.stats.discarded += (before - self.rows.len()) as u64;
    }

    /// Reduces `cols` by the kept rows (coefficients only); returns the reduced vector and the
    /// `(row index, factor)` steps taken, to be replayed on the payload.
    fn reduce_cols(&self, mut cols: Cols) -> (Cols, Vec<(usize, u8)>) {
        let mut steps = Vec::new();
        for (i, r) in self.rows.iter().enumerate() {
            let c = coef(&cols, r.pivot);
            if c != 0 {
                cols = combine(&cols, &r.cols, c);
                steps.push((i, c));
            }
        }
        (cols, steps)
    }

    /// Adds an equation, reducing it by the kept rows and eliminating its pivot from them. Returns
    /// whether it was innovative (false: redundant, and counted as discarded if inconsistent).
    fn insert(&mut self, cols: Cols, mut data: Vec<u8>, arrived: Instant) -> bool {
        let (mut cols, steps) = self.reduce_cols(cols);
        for (i, c) in steps {
            mul_add_grow(&mut data, &self.rows[i].data, c);
        }
        let Some(&(pivot, pc)) = cols.first() else {
            if data.iter().any(|&b| b != 0) {
                // 0 = nonzero: the equations contradict each other (forged or corrupt input).
                self.stats.discarded += 1;
            }
            return false;
        };
        let inv = gf256::inv(pc).expect("coefficients in cols are nonzero");
        for (_, c) in &mut cols {
            *c = gf256::mul(*c, inv);
        }
        gf256::scale(&mut data, inv);
        for r in &mut self.rows {
            let c = coef(&r.cols, pivot);
            if c != 0 {
                r.cols = combine(&r.cols, &cols, c);
                mul_add_grow(&mut r.data, &data, c);
            }
        }
        self.rows.push(Row { cols, pivot, data, arrived });
        true
    }

    /// Pushes every row left with only its pivot to `out` as a recovered packet; returns how many.
    fn extract_solved(&mut self, out: &mut Vec<(u64, Vec<u8>)>) -> u64 {
        let mut n = 0;
        let mut i = 0;
        while i < self.rows.len() {
            if self.rows[i].cols.len() != 1 {
                i += 1;
                continue;
            }
            let row = self.rows.swap_remove(i);
            match finish(row.data) {
                Some(p) => {
                    out.push((row.pivot, p));
                    n += 1;
                }
                None => self.stats.discarded += 1,
            }
        }
        self.stats.recovered += n;
        n
    }

    /// Evicts the oldest rows until the bounds on rows and unknowns hold.
    fn enforce_bounds(&mut self) {
        while self.rows.len() > self.max_rows || (self.rows.len() > 1 && self.unknowns() > MAX_UNKNOWNS) {
            let Some(oldest) = self.rows.iter().enumerate().min_by_key(|(_, r)| r.arrived).map(|(i, _)| i) else {
                break;
            };
            // Removing a row keeps the rest in reduced row echelon form.
            self.rows.swap_remove(oldest);
            self.stats.discarded += 1;
        }
    }
}

/// The recovered packet from a solved row's `len ‖ payload`, or `None` if the length is out of
/// range or the padding past it is not zero (inconsistent input).
fn finish(mut data: Vec<u8>) -> Option<Vec<u8>> {
    let len = usize::from(u16::from_be_bytes([*data.first()?, *data.get(1)?]));
    if len == 0 || 2 + len > data.len() || data[2 + len..].iter().any(|&b| b != 0) {
        return None;
    }
    data.truncate(2 + len);
    data.drain(..2);
    Some(data)
}

impl Decoder for RlncDecoder {
    fn handle_coded<'k>(
        &mut self,
        now: Instant,
        coverage: &Coverage,
        len_field: u16,
        payload: &[u8],
        known: &dyn Fn(u64) -> Known<'k>,
        out: &mut Vec<(u64, Vec<u8>)>,
    ) {
        self.stats.received += 1;
        self.expire(now);
        if usize::from(coverage.degree.min(coverage.span)) > MAX_MEMBERS {
            self.stats.discarded += 1;
            return;
        }
        let members = coverage.members();
        let coefs = rlnc_coefficients(coverage, members.len());
        let mut have: Vec<(&[u8], u8)> = Vec::new();
        let mut cols: Cols = Vec::new();
        for (&seq, &c) in members.iter().zip(&coefs) {
            match known(seq) {
                Known::Have(p) => {
                    if p.len() > payload.len() {
                        // The payload is as long as its longest member: not a member after all.
                        self.stats.discarded += 1;
                        return;
                    }
                    have.push((p, c));
                }
                Known::Missing => cols.push((seq, c)),
                Known::Forgotten => {
                    self.stats.discarded += 1;
                    return;
                }
            }
        }
        if cols.is_empty() {
            self.stats.useless += 1;
            return;
        }
        if cols.len() > MAX_UNKNOWNS {
            self.stats.discarded += 1;
            return;
        }
        // Innovation test on the coefficients alone: most coded packets sent into spare capacity
        // cover nothing new, and must not cost a pass over every member's bytes.
        let (reduced, steps) = self.reduce_cols(cols.clone());
        if reduced.is_empty() {
            self.stats.useless += 1;
            return;
        }
        let had_rows = !self.rows.is_empty();
        let mut data = Vec::with_capacity(2 + payload.len());
        data.extend_from_slice(&len_field.to_be_bytes());
        data.extend_from_slice(payload);
        for (p, c) in have {
            // Checked above: every member fits in the payload.
            subtract_packet(&mut data, p, c);
        }
        let touched = had_rows && (!steps.is_empty() || self.rows.iter().any(|r| coef(&r.cols, reduced[0].0) != 0));
        if !self.insert(cols, data, now) {
            return;
        }
        let n = self.extract_solved(out);
        if touched {
            self.stats.recovered_later += n;
        }
        if n == 0 {
            self.stats.kept += 1;
        }
        self.enforce_bounds();
    }

    fn handle_packet(&mut self, seq: u64, packet: &[u8], out: &mut Vec<(u64, Vec<u8>)>) {
        if self.rows.iter().all(|r| coef(&r.cols, seq) == 0) {
            return;
        }
        let mut reinsert = Vec::new();
        let mut i = 0;
        while i < self.rows.len() {
            let c = coef(&self.rows[i].cols, seq);
            if c == 0 {
                i += 1;
                continue;
            }
            let r = &mut self.rows[i];
            if !subtract_packet(&mut r.data, packet, c) {
                self.rows.swap_remove(i);
                self.stats.discarded += 1;
                continue;
            }
            r.cols.retain(|&(s, _)| s != seq);
            if r.pivot == seq {
                // The row lost its pivot; its other columns are free, so it re-enters as a new
                // equation (which also re-establishes the echelon form).
                reinsert.push(self.rows.swap_remove(i));
                continue;
            }
            i += 1;
        }
        for r in reinsert {
            self.insert(r.cols, r.data, r.arrived);
        }
        let n = self.extract_solved(out);
        self.stats.recovered_later += n;
    }

    fn stats(&self) -> DecoderStats {
        self.stats
    }
}

#[cfg(test)]
mod tests;
