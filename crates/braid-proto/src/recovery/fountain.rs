//! `fountain`: systematic RaptorQ (RFC 6330) block coding after FMTCP (Cui et al., sections IV-V).
//!
//! Passenger packets are grouped into short blocks of consecutive global sequence numbers: a block
//! closes after [`BLOCK_PACKETS`] packets or [`BLOCK_WAIT`] after its first, whichever is first, so
//! a block never makes anything wait. Source packets go out at once, unchanged (systematic); each is
//! source symbol `len(2 BE) ‖ packet`, zero-padded to the block's symbol size. When a block closes
//! the sender adds `l_b` repair symbols, the least number whose decoding-failure probability by
//! FMTCP's Eq. 4 is at most δ̂ = 5 % ([`repairs_needed`]), with p the mean reported loss of the
//! links the block's packets went on. When the receiver still reports a block's packets missing
//! (NACKs, including the session's tail-loss detection) one more repair symbol per reported packet
//! goes out (FMTCP V-A: "more symbols when the block is not yet complete"), at most once per
//! [`NACK_GUARD`] per packet.
//!
//! On the wire ([`CodeKind::Fountain`]) the coverage's `base`/`span` is the block, `seed` the repair
//! index r (ESI = K + r), the length field the symbol size. The receiver's [`FountainDecoder`]
//! collects source packets and repair symbols per block and decodes once it has K symbols.

use super::codec::{Decoder, DecoderStats, Encoder};
use super::{Known, RecoveryKind, RecoverySender, Repair};
use crate::link::LinkId;
use crate::time::Instant;
use crate::wire::{CodeKind, Coverage, FOUNTAIN_SYMBOL_PREFIX};
use raptorq::{EncodingPacket, ObjectTransmissionInformation, PayloadId, SourceBlockDecoder, SourceBlockEncoder};
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// Packets per block (K). Short blocks keep the block delay small (FMTCP IV-B sets the block
/// smaller than the window "to achieve the minimum transferring delay").
pub const BLOCK_PACKETS: u16 = 16;
/// A block closes this long after its first packet even if not full, so repair never waits long.
pub const BLOCK_WAIT: Duration = Duration::from_millis(5);
/// FMTCP's δ̂: the largest acceptable decoding-failure probability of a block (FMTCP V-A, VI).
pub const MAX_FAILURE: f64 = 0.05;
/// Reports of the same missing packet closer together than this add no further repair.
pub const NACK_GUARD: Duration = Duration::from_millis(20);
/// Largest block the decoder accepts (forged coverages beyond it are dropped).
pub const MAX_BLOCK: u16 = 256;
/// Blocks the sender remembers for NACK-driven repair; older ones are forgotten.
const MAX_BLOCKS: usize = 4096;

/// FMTCP Eq. 4: the probability that a block of `w` symbols sent with `l` extra symbols cannot be
/// decoded, i.e. that more than `l` of the `w + l` symbols are lost, each independently with
/// probability `p`: δ(l) = Σ_{j>l} C(w+l, j) p^j (1-p)^{w+l-j}.
pub fn failure_probability(w: u32, l: u32, p: f64) -> f64 {
    let p = p.clamp(0.0, 1.0);
    if p <= 0.0 {
        return 0.0;
    }
    if p >= 1.0 {
        return 1.0;
    }
    let n = w + l;
    // Binomial pmf by the recurrence pmf(j+1) = pmf(j) (n-j)/(j+1) p/(1-p), summed up to l; the
    // tail is 1 minus that (accurate enough at the 5 % threshold where it is used).
    let ratio = p / (1.0 - p);
    let mut pmf = (1.0 - p).powi(n as i32);
    let mut cdf = pmf;
    for j in 0..l {
        pmf *= f64::from(n - j) / f64::from(j + 1) * ratio;
        cdf += pmf;
    }
    (1.0 - cdf).max(0.0)
}

/// FMTCP's l_b*: the least number of extra symbols l for a block of `w` symbols over a loss
/// probability `p` such that [`failure_probability`] ≤ `target` (Eq. 4 and the text after it),
/// capped at `4 w` (a link losing nearly everything should not be fed unbounded repair).
pub fn repairs_needed(w: u32, p: f64, target: f64) -> u32 {
    let cap = 4 * w.max(1);
    (0..=cap).find(|&l| failure_probability(w, l, p) <= target).unwrap_or(cap)
}

#[derive(Debug, Clone, Copy)]
struct OpenBlock {
    base: u64,
    count: u16,
    first_sent: Instant,
    loss_sum: f64,
}

#[derive(Debug, Clone, Copy)]
struct SentBlock {
    base: u64,
    span: u16,
    repairs: u16,
}

/// The sender side of `fountain`.
#[derive(Debug, Clone)]
pub struct Fountain {
    open: Option<OpenBlock>,
    blocks: VecDeque<SentBlock>,
    pending: VecDeque<Coverage>,
    last_nack: BTreeMap<u64, Instant>,
    cum_ack: u64,
}

impl Default for Fountain {
    fn default() -> Self {
        Self::new()
    }
}

impl Fountain {
    /// A fountain sender with FMTCP's δ̂ = 5 % and blocks of [`BLOCK_PACKETS`].
    pub fn new() -> Self {
        Fountain {
            open: None,
            blocks: VecDeque::new(),
            pending: VecDeque::new(),
            last_nack: BTreeMap::new(),
            cum_ack: 0,
        }
    }

    /// Closes the open block: its l_b repair symbols (Eq. 4) are queued.
    fn close(&mut self) {
        let Some(b) = self.open.take() else { return };
        let p = b.loss_sum / f64::from(b.count.max(1));
        let l = repairs_needed(u32::from(b.count), p, MAX_FAILURE) as u16;
        let mut block = SentBlock { base: b.base, span: b.count, repairs: 0 };
        for _ in 0..l {
            self.pending.push_back(repair(&mut block));
        }
        self.blocks.push_back(block);
        if self.blocks.len() > MAX_BLOCKS {
            self.blocks.pop_front();
        }
    }

    fn close_if_stale(&mut self, now: Instant) {
        if self.open.is_some_and(|b| now - b.first_sent >= BLOCK_WAIT) {
            self.close();
        }
    }
}

/// The coverage of `block`'s next repair symbol.
fn repair(block: &mut SentBlock) -> Coverage {
    let c = Coverage { base: block.base, span: block.span, degree: block.span, seed: block.repairs };
    block.repairs = block.repairs.saturating_add(1);
    c
}

impl RecoverySender for Fountain {
    fn kind(&self) -> RecoveryKind {
        RecoveryKind::Fountain
    }

    /// Holes reported by the receiver are what asks for more repair of an incomplete block.
    fn wants_nacks(&self) -> bool {
        true
    }

    fn on_data_sent(&mut self, now: Instant, seq: u64, _link: LinkId, loss: f64) {
        self.close_if_stale(now);
        if self.open.is_some_and(|b| b.base + u64::from(b.count) != seq) {
            self.close();
        }
        let b = self.open.get_or_insert(OpenBlock { base: seq, count: 0, first_sent: now, loss_sum: 0.0 });
        b.count += 1;
        b.loss_sum += loss.clamp(0.0, 1.0);
        if b.count >= BLOCK_PACKETS {
            self.close();
        }
    }

    fn on_ack(&mut self, _now: Instant, cum_ack: u64) {
        self.cum_ack = self.cum_ack.max(cum_ack);
        let ack = self.cum_ack;
        while self.blocks.front().is_some_and(|b| b.base + u64::from(b.span) <= ack) {
            self.blocks.pop_front();
        }
        self.pending.retain(|c| c.base + u64::from(c.span) > ack);
        self.last_nack = self.last_nack.split_off(&ack);
        if self.open.is_some_and(|b| b.base < ack) {
            // The session gave up what this block covers (store bound): start afresh.
            self.open = None;
        }
    }

    /// One more repair symbol of the block holding `seq` (FMTCP V-A: symbols are added until the
    /// block is δ̂-complete; a report of a missing packet says it is not).
    fn on_nack(&mut self, now: Instant, seq: u64) {
        if seq < self.cum_ack {
            return;
        }
        if let Some(&t) = self.last_nack.get(&seq)
            && now - t < NACK_GUARD
        {
            return;
        }
        self.close_if_stale(now);
        if self.open.is_some_and(|b| seq >= b.base) {
            // Tail of the newest block: close it now so its repair goes out.
            self.close();
        }
        let i = self.blocks.partition_point(|b| b.base + u64::from(b.span) <= seq);
        let Some(block) = self.blocks.get_mut(i).filter(|b| b.base <= seq) else { return };
        if block.repairs >= 4 * block.span {
            return;
        }
        self.last_nack.insert(seq, now);
        let c = repair(block);
        self.pending.push_back(c);
    }

    fn poll_repair(&mut self, now: Instant) -> Option<Repair> {
        self.close_if_stale(now);
        self.pending.pop_front().map(|coverage| Repair::Code { kind: CodeKind::Fountain, coverage })
    }

    fn oldest_needed(&self) -> Option<u64> {
        let blocks = self.blocks.front().map(|b| b.base);
        let pending = self.pending.iter().map(|c| c.base).min();
        let open = self.open.map(|b| b.base);
        [blocks, pending, open].into_iter().flatten().min()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.open.map(|b| b.first_sent + BLOCK_WAIT)
    }
}

/// The block's source data: every member as `len(2 BE) ‖ packet`, zero-padded to `t` bytes.
fn source_block(members: &[(u64, &[u8])], t: usize) -> Vec<u8> {
    let mut data = vec![0u8; members.len() * t];
    for (i, (_, p)) in members.iter().enumerate() {
        write_symbol(&mut data[i * t..(i + 1) * t], p);
    }
    data
}

/// Writes `len(2 BE) ‖ packet` at the start of a zeroed symbol (the caller checked that it fits).
fn write_symbol(symbol: &mut [u8], packet: &[u8]) {
    symbol[..2].copy_from_slice(&(packet.len() as u16).to_be_bytes());
    symbol[2..2 + packet.len()].copy_from_slice(packet);
}

fn oti(k: u16, t: u16) -> ObjectTransmissionInformation {
    ObjectTransmissionInformation::new(u64::from(k) * u64::from(t), t, 1, 1, 1)
}

/// The RaptorQ repair-symbol encoder. The intermediate symbols of the last block are kept, so
/// several repair symbols of one block cost one precode solve.
#[derive(Default)]
pub struct FountainEncoder {
    cached: Option<((u64, u16, u16), SourceBlockEncoder)>,
}

impl FountainEncoder {
    /// A fresh encoder.
    pub fn new() -> Self {
        Self::default()
    }
}

impl std::fmt::Debug for FountainEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FountainEncoder").field("cached_block", &self.cached.as_ref().map(|(k, _)| *k)).finish()
    }
}

impl Encoder for FountainEncoder {
    fn encode(&mut self, coverage: &Coverage, members: &[(u64, &[u8])]) -> Option<(Vec<u8>, u16)> {
        let k = coverage.span;
        if k == 0 || k > MAX_BLOCK || members.len() != usize::from(k) {
            return None;
        }
        let max = members.iter().map(|(_, p)| p.len()).max()?;
        let t = u16::try_from(max + FOUNTAIN_SYMBOL_PREFIX).ok()?;
        let key = (coverage.base, k, t);
        if self.cached.as_ref().is_none_or(|(c, _)| *c != key) {
            let data = source_block(members, usize::from(t));
            self.cached = Some((key, SourceBlockEncoder::new(0, &oti(k, t), &data)));
        }
        let (_, enc) = self.cached.as_ref()?;
        let pkt = enc.repair_packets(u32::from(coverage.seed), 1).pop()?;
        Some((pkt.split().1, t))
    }
}

#[derive(Debug)]
struct RxBlock {
    span: u16,
    t: u16,
    /// Source symbols by index, repair symbols by ESI.
    symbols: BTreeMap<u32, Vec<u8>>,
    sources: u16,
    arrived: Instant,
    done: bool,
}

/// The receiver side: per block, collects source packets and repair symbols and decodes with
/// RaptorQ once K symbols are there. Bounded in blocks and age; forged input is counted and dropped.
#[derive(Debug)]
pub struct FountainDecoder {
    blocks: BTreeMap<u64, RxBlock>,
    max_blocks: usize,
    max_age: Duration,
    stats: DecoderStats,
}

impl FountainDecoder {
    /// A decoder keeping at most `max_blocks` incomplete blocks, none longer than `max_age`.
    pub fn new(max_blocks: usize, max_age: Duration) -> Self {
        FountainDecoder { blocks: BTreeMap::new(), max_blocks: max_blocks.max(1), max_age, stats: Default::default() }
    }

    /// Blocks currently kept.
    pub fn pending(&self) -> usize {
        self.blocks.len()
    }

    fn expire(&mut self, now: Instant) {
        let max_age = self.max_age;
        let mut dropped = 0;
        self.blocks.retain(|_, b| {
            let keep = now - b.arrived <= max_age;
            if !keep && !b.done {
                dropped += 1;
            }
            keep
        });
        self.stats.discarded += dropped;
    }

    /// Decodes block `base` if it has enough symbols; recovered packets go to `out`.
    fn try_decode(&mut self, base: u64, later: bool, out: &mut Vec<(u64, Vec<u8>)>) {
        let Some(b) = self.blocks.get_mut(&base) else { return };
        if b.done || b.symbols.len() < usize::from(b.span) {
            return;
        }
        let (k, t) = (b.span, b.t);
        let mut dec = SourceBlockDecoder::new(0, &oti(k, t), u64::from(k) * u64::from(t));
        let packets = b.symbols.iter().map(|(&esi, d)| EncodingPacket::new(PayloadId::new(0, esi), d.clone()));
        let Some(data) = dec.decode(packets) else { return };
        let t = usize::from(t);
        let mut bad = false;
        let mut recovered = Vec::new();
        for i in 0..u32::from(k) {
            if b.symbols.contains_key(&i) {
                continue;
            }
            let Some(s) = data.get(i as usize * t..(i as usize + 1) * t) else { break };
            let len = usize::from(u16::from_be_bytes([s[0], s[1]]));
            if len == 0 || len + FOUNTAIN_SYMBOL_PREFIX > t {
                // Inconsistent symbols (forged or corrupt): nothing from this block is trusted,
                // not even the packets decoded before this one.
                bad = true;
                break;
            }
            recovered.push((base + u64::from(i), s[2..2 + len].to_vec()));
        }
        if bad {
            self.stats.discarded += 1;
        } else {
            let n = recovered.len() as u64;
            self.stats.recovered += n;
            if later {
                self.stats.recovered_later += n;
            }
            out.extend(recovered);
        }
        b.done = true;
        b.symbols.clear();
    }
}

/// The source symbol of `packet` in a block of symbol size `t`, if it fits.
fn source_symbol(packet: &[u8], t: u16) -> Option<Vec<u8>> {
    let t = usize::from(t);
    if packet.is_empty() || packet.len() + FOUNTAIN_SYMBOL_PREFIX > t {
        return None;
    }
    let mut s = vec![0u8; t];
    write_symbol(&mut s, packet);
    Some(s)
}

impl Decoder for FountainDecoder {
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
        let (k, t) = (coverage.span, len_field);
        if k == 0 || k > MAX_BLOCK || usize::from(t) <= FOUNTAIN_SYMBOL_PREFIX || payload.len() != usize::from(t) {
            self.stats.discarded += 1;
            return;
        }
        // The raptorq crate numbers repair symbols from K (its ESIs count the K' - K padding
        // symbols out; RFC 6330 5.3.4 numbers the ISI from K').
        let esi = u32::from(k) + u32::from(coverage.seed);
        let base = coverage.base;
        if let Some(b) = self.blocks.get(&base) {
            if b.span != k || b.t != t {
                self.stats.discarded += 1;
                return;
            }
            if b.done {
                self.stats.useless += 1;
                return;
            }
        } else {
            // A block newly heard of: gather what the receiver already has of it.
            let mut symbols = BTreeMap::new();
            let mut missing = 0;
            for i in 0..k {
                match known(base + u64::from(i)) {
                    Known::Have(p) => match source_symbol(p, t) {
                        Some(s) => {
                            symbols.insert(u32::from(i), s);
                        }
                        None => {
                            self.stats.discarded += 1;
                            return;
                        }
                    },
                    Known::Missing => missing += 1,
                    // Delivered and forgotten: not a symbol we can use, but more repair still can.
                    Known::Forgotten => {}
                }
            }
            if missing == 0 {
                self.stats.useless += 1;
                return;
            }
            if self.blocks.len() >= self.max_blocks
                && let Some((&oldest, _)) = self.blocks.iter().next()
            {
                if !self.blocks[&oldest].done {
                    self.stats.discarded += 1;
                }
                self.blocks.remove(&oldest);
            }
            let sources = symbols.len() as u16;
            self.blocks.insert(base, RxBlock { span: k, t, symbols, sources, arrived: now, done: false });
        }
        let Some(b) = self.blocks.get_mut(&base) else { return };
        if b.symbols.insert(esi, payload.to_vec()).is_some() {
            self.stats.useless += 1;
            return;
        }
        self.try_decode(base, false, out);
        if self.blocks.get(&base).is_some_and(|b| !b.done) {
            self.stats.kept += 1;
        }
    }

    fn handle_packet(&mut self, seq: u64, packet: &[u8], out: &mut Vec<(u64, Vec<u8>)>) {
        let Some((&base, b)) = self.blocks.range_mut(..=seq).next_back() else { return };
        if b.done || seq >= base + u64::from(b.span) {
            return;
        }
        let i = (seq - base) as u32;
        if b.symbols.contains_key(&i) {
            return;
        }
        let Some(s) = source_symbol(packet, b.t) else {
            // Longer than the block's symbols: the block's coded packets were inconsistent.
            b.done = true;
            b.symbols.clear();
            self.stats.discarded += 1;
            return;
        };
        b.symbols.insert(i, s);
        b.sources += 1;
        if b.sources >= b.span {
            b.done = true;
            b.symbols.clear();
            return;
        }
        self.try_decode(base, true, out);
    }

    fn stats(&self) -> DecoderStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    #[test]
    fn eq4_matches_fmtcp_figures() {
        // FMTCP VI-A: with δ̂ = 5 %, l_b* = 1 for loss 1 % to 5 % and 2 for 10 % (their window;
        // ŵ = 6 reproduces all three).
        assert_eq!(repairs_needed(6, 0.01, MAX_FAILURE), 1);
        assert_eq!(repairs_needed(6, 0.05, MAX_FAILURE), 1);
        assert_eq!(repairs_needed(6, 0.10, MAX_FAILURE), 2);
        // Our blocks: nothing on a clean link, one at 2 %, more as loss grows.
        assert_eq!(repairs_needed(16, 0.001, MAX_FAILURE), 0);
        assert_eq!(repairs_needed(16, 0.02, MAX_FAILURE), 1);
        assert!(repairs_needed(16, 0.2, MAX_FAILURE) > repairs_needed(16, 0.05, MAX_FAILURE));
        assert_eq!(repairs_needed(16, 1.0, MAX_FAILURE), 64);
        // δ(0) is the chance that anything at all is lost.
        assert!((failure_probability(16, 0, 0.02) - (1.0 - 0.98f64.powi(16))).abs() < 1e-12);
    }

    #[test]
    fn sender_closes_blocks_and_adds_repair() {
        let mut f = Fountain::new();
        let t = Instant::from_millis(1);
        for s in 0..16 {
            f.on_data_sent(t, s, LinkId(0), 0.02);
        }
        let r: Vec<_> = std::iter::from_fn(|| f.poll_repair(t)).collect();
        assert_eq!(
            r,
            vec![Repair::Code {
                kind: CodeKind::Fountain,
                coverage: Coverage { base: 0, span: 16, degree: 16, seed: 0 }
            }]
        );
        // A short block closes after BLOCK_WAIT.
        for s in 16..20 {
            f.on_data_sent(t, s, LinkId(0), 0.3);
        }
        assert_eq!(f.poll_repair(t), None);
        assert_eq!(f.poll_timeout(), Some(t + BLOCK_WAIT));
        let later = t + BLOCK_WAIT;
        let n = std::iter::from_fn(|| f.poll_repair(later)).count();
        assert_eq!(n as u32, repairs_needed(4, 0.3, MAX_FAILURE));
        // A NACK adds one more repair of its block, guarded.
        f.on_nack(later, 3);
        f.on_nack(later, 3);
        assert_eq!(
            f.poll_repair(later),
            Some(Repair::Code {
                kind: CodeKind::Fountain,
                coverage: Coverage { base: 0, span: 16, degree: 16, seed: 1 }
            })
        );
        assert_eq!(f.poll_repair(later), None);
        f.on_ack(later, 16);
        f.on_nack(later, 3);
        assert_eq!(f.poll_repair(later), None);
        assert_eq!(f.oldest_needed(), Some(16));
    }

    fn packets(k: u64, seed: u64) -> Vec<Vec<u8>> {
        (0..k).map(|i| (0..(1 + (i * 131 + seed * 17) % 1400)).map(|b| (b ^ i ^ seed) as u8).collect()).collect()
    }

    /// Encodes `r` repair symbols of a block and feeds the decoder the survivors.
    fn run(k: u16, pkts: &[Vec<u8>], lost_src: &[bool], lost_rep: &[bool]) -> Vec<(u64, Vec<u8>)> {
        let base = 1000u64;
        let members: Vec<(u64, &[u8])> = pkts.iter().enumerate().map(|(i, p)| (base + i as u64, &p[..])).collect();
        let mut enc = FountainEncoder::new();
        let mut dec = FountainDecoder::new(64, Duration::from_secs(1));
        let have: HashMap<u64, Vec<u8>> =
            members.iter().enumerate().filter(|(i, _)| !lost_src[*i]).map(|(_, (s, p))| (*s, p.to_vec())).collect();
        let known = |s: u64| match have.get(&s) {
            Some(p) => Known::Have(p),
            None => Known::Missing,
        };
        let mut out = Vec::new();
        for (r, lost) in lost_rep.iter().enumerate() {
            let cov = Coverage { base, span: k, degree: k, seed: r as u16 };
            let (payload, t) = enc.encode(&cov, &members).unwrap();
            if !lost {
                dec.handle_coded(Instant::ZERO, &cov, t, &payload, &known, &mut out);
            }
        }
        out.sort();
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// Whatever is lost, with at least K + 2 symbols received (RaptorQ's failure probability
        /// is below 1e-6 there) what is recovered is exactly what was lost.
        #[test]
        fn any_loss_with_enough_symbols_decodes_exactly(
            k in 1u16..40, seed in 0u64..1000, loss_bits in any::<u64>(), extra in 2usize..6,
        ) {
            let pkts = packets(u64::from(k), seed);
            let lost_src: Vec<bool> = (0..k).map(|i| loss_bits >> (i % 64) & 1 == 1).collect();
            let n_lost = lost_src.iter().filter(|l| **l).count();
            let lost_rep = vec![false; n_lost + extra];
            let out = run(k, &pkts, &lost_src, &lost_rep);
            let want: Vec<(u64, Vec<u8>)> = (0..k as usize).filter(|&i| lost_src[i]).map(|i| (1000 + i as u64, pkts[i].clone())).collect();
            prop_assert_eq!(out, want);
        }

        /// Forged coded packets never panic and never produce a packet.
        #[test]
        fn forged_input_never_panics(span in 0u16..400, t in 0u16..3000, seed in any::<u16>(), len in 0usize..3000, fill in any::<u8>()) {
            let mut dec = FountainDecoder::new(4, Duration::from_secs(1));
            let mut out = Vec::new();
            let cov = Coverage { base: 5, span, degree: span, seed };
            let payload = vec![fill; len];
            for _ in 0..3 {
                dec.handle_coded(Instant::ZERO, &cov, t, &payload, &|s| if s % 2 == 0 { Known::Missing } else { Known::Have(&[1, 2, 3]) }, &mut out);
            }
            dec.handle_packet(6, &[9; 2000], &mut out);
            for (s, p) in &out {
                prop_assert!(*s >= 5 && !p.is_empty());
            }
        }
    }

    #[test]
    fn an_inconsistent_block_yields_nothing() {
        // Source symbol 0 is well-formed, symbol 1 claims length 0: the repair symbols are
        // consistent with each other but not with braid's symbol format, so neither packet may
        // come out (symbol 0 used to, as it was decoded before the check failed on symbol 1).
        let (k, t) = (2u16, 4u16);
        let enc = SourceBlockEncoder::new(0, &oti(k, t), &[0, 1, 0xaa, 0, 0, 0, 0, 0]);
        let mut dec = FountainDecoder::new(4, Duration::from_secs(1));
        let mut out = Vec::new();
        for (r, pkt) in enc.repair_packets(0, 4).into_iter().enumerate() {
            let cov = Coverage { base: 100, span: k, degree: k, seed: r as u16 };
            dec.handle_coded(Instant::ZERO, &cov, t, &pkt.split().1, &|_| Known::Missing, &mut out);
        }
        assert!(out.is_empty(), "{out:?}");
        assert_eq!((dec.stats().recovered, dec.stats().discarded), (0, 1));
    }

    #[test]
    fn late_source_packet_completes_a_kept_block() {
        let k = 8u16;
        let pkts = packets(u64::from(k), 3);
        let members: Vec<(u64, &[u8])> = pkts.iter().enumerate().map(|(i, p)| (i as u64, &p[..])).collect();
        let mut enc = FountainEncoder::new();
        let mut dec = FountainDecoder::new(8, Duration::from_secs(1));
        // Packets 0..5 arrive; 5, 6, 7 are missing; two repair symbols arrive first.
        let known = |s: u64| if s < 5 { Known::Have(&pkts[s as usize][..]) } else { Known::Missing };
        let mut out = Vec::new();
        for r in 0..2 {
            let cov = Coverage { base: 0, span: k, degree: k, seed: r };
            let (p, t) = enc.encode(&cov, &members).unwrap();
            dec.handle_coded(Instant::ZERO, &cov, t, &p, &known, &mut out);
        }
        assert!(out.is_empty());
        dec.handle_packet(6, &pkts[6], &mut out);
        out.sort();
        // RaptorQ decodes with K symbols with high probability; with K + 1 almost surely.
        if out.is_empty() {
            let cov = Coverage { base: 0, span: k, degree: k, seed: 2 };
            let (p, t) = enc.encode(&cov, &members).unwrap();
            dec.handle_coded(Instant::ZERO, &cov, t, &p, &known, &mut out);
        }
        assert_eq!(out, vec![(5, pkts[5].clone()), (7, pkts[7].clone())]);
    }
}
