//! The XOR decoder (receiver side of `oec` and `fec`).
//!
//! A coded packet is reduced by XOR-ing out every covered packet the receiver already has; with one
//! covered packet left missing, that packet is recovered. PluriBus 4.2 discards coded packets that
//! cannot be used at once; braid keeps them (bounded in number and age) and peels them as later
//! arrivals and recoveries reduce them, so a coded packet that arrives before a data packet it
//! needs is not wasted (docs/design.md 4).

use super::codec::{Decoder, DecoderStats, Encoder};
use crate::time::Instant;
use crate::wire::Coverage;
use std::collections::HashMap;
use std::time::Duration;

/// XORs `src` into `dst`, which must be at least as long.
pub fn xor_into(dst: &mut [u8], src: &[u8]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d ^= s;
    }
}

/// The XOR encoder: the XOR of the members, each zero-padded to the longest, and the XOR of their
/// lengths so a recovered packet gets its true length back.
#[derive(Debug, Clone, Copy, Default)]
pub struct XorEncoder;

impl Encoder for XorEncoder {
    fn encode(&mut self, _coverage: &Coverage, members: &[(u64, &[u8])]) -> Option<(Vec<u8>, u16)> {
        let max = members.iter().map(|(_, p)| p.len()).max()?;
        let mut payload = vec![0u8; max];
        let mut len_xor = 0u16;
        for (_, p) in members {
            xor_into(&mut payload, p);
            len_xor ^= p.len() as u16;
        }
        Some((payload, len_xor))
    }
}

#[derive(Debug, Clone)]
struct Pending {
    missing: Vec<u64>,
    payload: Vec<u8>,
    len_xor: u16,
    arrived: Instant,
}

/// What the decoder knows about a covered sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Known<'a> {
    /// The receiver has the packet.
    Have(&'a [u8]),
    /// The receiver does not have it and may still use it.
    Missing,
    /// Delivered long ago and forgotten: the coded packet cannot be reduced.
    Forgotten,
}

/// Peeling decoder for XOR-coded packets.
#[derive(Debug, Clone)]
pub struct XorDecoder {
    pending: HashMap<u64, Pending>,
    waiting: HashMap<u64, Vec<u64>>,
    next_id: u64,
    max_pending: usize,
    max_age: Duration,
    stats: DecoderStats,
}

impl XorDecoder {
    /// A decoder keeping at most `max_pending` coded packets, none longer than `max_age`.
    pub fn new(max_pending: usize, max_age: Duration) -> Self {
        XorDecoder {
            pending: HashMap::new(),
            waiting: HashMap::new(),
            next_id: 0,
            max_pending,
            max_age,
            stats: DecoderStats::default(),
        }
    }

    /// Coded packets currently kept.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    fn remove(&mut self, id: u64) -> Option<Pending> {
        let p = self.pending.remove(&id)?;
        for s in &p.missing {
            if let Some(v) = self.waiting.get_mut(s) {
                v.retain(|&x| x != id);
                if v.is_empty() {
                    self.waiting.remove(s);
                }
            }
        }
        Some(p)
    }

    fn evict_oldest(&mut self) {
        if let Some((&id, _)) = self.pending.iter().min_by_key(|(id, p)| (p.arrived, **id)) {
            self.remove(id);
            self.stats.discarded += 1;
        }
    }

    fn expire(&mut self, now: Instant) {
        let old: Vec<u64> =
            self.pending.iter().filter(|(_, p)| now - p.arrived > self.max_age).map(|(&id, _)| id).collect();
        for id in old {
            self.remove(id);
            self.stats.discarded += 1;
        }
    }
}

impl Decoder for XorDecoder {
    /// Takes a coded packet. `known(seq)` says what the receiver has. Recovered packets are pushed
    /// to `out` as `(seq, packet)`; the caller must feed each back through [`Self::handle_packet`]
    /// (after storing it) so kept coded packets can be peeled further.
    fn handle_coded<'k>(
        &mut self,
        now: Instant,
        coverage: &Coverage,
        len_xor: u16,
        payload: &[u8],
        known: &dyn Fn(u64) -> Known<'k>,
        out: &mut Vec<(u64, Vec<u8>)>,
    ) {
        self.stats.received += 1;
        self.expire(now);
        let mut buf = payload.to_vec();
        let mut len = len_xor;
        let mut missing = Vec::new();
        for seq in coverage.members() {
            match known(seq) {
                Known::Have(p) => {
                    if p.len() > buf.len() {
                        // The coded payload is as long as its longest member; a longer packet
                        // means it is not a member after all (forged or corrupt): drop it.
                        self.stats.discarded += 1;
                        return;
                    }
                    xor_into(&mut buf, p);
                    len ^= p.len() as u16;
                }
                Known::Missing => missing.push(seq),
                Known::Forgotten => {
                    self.stats.discarded += 1;
                    return;
                }
            }
        }
        match missing.len() {
            0 => self.stats.useless += 1,
            1 => {
                if let Some(p) = finish(buf, len) {
                    self.stats.recovered += 1;
                    out.push((missing[0], p));
                } else {
                    self.stats.discarded += 1;
                }
            }
            _ => {
                if self.pending.len() >= self.max_pending {
                    self.evict_oldest();
                }
                let id = self.next_id;
                self.next_id += 1;
                for &s in &missing {
                    self.waiting.entry(s).or_default().push(id);
                }
                self.pending.insert(id, Pending { missing, payload: buf, len_xor: len, arrived: now });
                self.stats.kept += 1;
            }
        }
    }

    /// A packet arrived or was recovered: reduce every kept coded packet that waits for it.
    fn handle_packet(&mut self, seq: u64, packet: &[u8], out: &mut Vec<(u64, Vec<u8>)>) {
        let Some(ids) = self.waiting.remove(&seq) else { return };
        for id in ids {
            let Some(p) = self.pending.get_mut(&id) else { continue };
            if packet.len() > p.payload.len() {
                self.remove(id);
                self.stats.discarded += 1;
                continue;
            }
            xor_into(&mut p.payload, packet);
            p.len_xor ^= packet.len() as u16;
            p.missing.retain(|&s| s != seq);
            match p.missing.len() {
                0 => {
                    self.remove(id);
                }
                1 => {
                    let last = p.missing[0];
                    if let Some(done) = self.remove(id) {
                        match finish(done.payload, done.len_xor) {
                            Some(pkt) => {
                                self.stats.recovered += 1;
                                self.stats.recovered_later += 1;
                                out.push((last, pkt));
                            }
                            None => self.stats.discarded += 1,
                        }
                    }
                }
                _ => {}
            }
        }
    }

    fn stats(&self) -> DecoderStats {
        self.stats
    }
}

/// The recovered packet: the reduced payload cut to the recovered length.
fn finish(mut buf: Vec<u8>, len: u16) -> Option<Vec<u8>> {
    let len = usize::from(len);
    if len == 0 || len > buf.len() {
        return None;
    }
    buf.truncate(len);
    Some(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap as Map;

    /// Builds the coded payload and length field the sender would send.
    fn encode(packets: &Map<u64, Vec<u8>>, cov: &Coverage) -> (Vec<u8>, u16) {
        let members: Vec<(u64, &[u8])> = cov.members().into_iter().map(|s| (s, &packets[&s][..])).collect();
        XorEncoder.encode(cov, &members).unwrap()
    }

    fn pkts(n: u64) -> Map<u64, Vec<u8>> {
        (0..n).map(|i| (i, (0..(10 + i * 7) as u8).map(|b| b ^ i as u8).collect())).collect()
    }

    #[test]
    fn recovers_one_missing_packet_with_its_length() {
        let p = pkts(4);
        let cov = Coverage::all(0, 4);
        let (payload, len) = encode(&p, &cov);
        let mut d = XorDecoder::new(16, Duration::from_secs(1));
        let mut out = Vec::new();
        d.handle_coded(
            Instant::ZERO,
            &cov,
            len,
            &payload,
            &|s| if s == 2 { Known::Missing } else { Known::Have(&p[&s]) },
            &mut out,
        );
        assert_eq!(out, vec![(2, p[&2].clone())]);
    }

    #[test]
    fn keeps_coded_packet_and_peels_when_more_arrives() {
        let p = pkts(6);
        let a = Coverage::all(0, 3); // 0,1,2
        let b = Coverage::all(2, 2); // 2,3
        let (pa, la) = encode(&p, &a);
        let (pb, lb) = encode(&p, &b);
        let mut d = XorDecoder::new(16, Duration::from_secs(1));
        let mut out = Vec::new();
        // Have only 0. Missing 1, 2, 3.
        let known = |s: u64| if s == 0 { Known::Have(&p[&0]) } else { Known::Missing };
        d.handle_coded(Instant::ZERO, &a, la, &pa, &known, &mut out);
        d.handle_coded(Instant::ZERO, &b, lb, &pb, &known, &mut out);
        assert!(out.is_empty());
        assert_eq!(d.pending(), 2);
        // Packet 3 arrives: b yields 2, which fed back lets a yield 1.
        d.handle_packet(3, &p[&3], &mut out);
        assert_eq!(out, vec![(2, p[&2].clone())]);
        let (s, pkt) = out.pop().unwrap();
        d.handle_packet(s, &pkt, &mut out);
        assert_eq!(out, vec![(1, p[&1].clone())]);
        assert_eq!(d.pending(), 0);
        assert_eq!(d.stats().recovered_later, 2);
    }

    #[test]
    fn useless_forgotten_and_forged_are_dropped() {
        let p = pkts(3);
        let cov = Coverage::all(0, 3);
        let (payload, len) = encode(&p, &cov);
        let mut d = XorDecoder::new(16, Duration::from_secs(1));
        let mut out = Vec::new();
        d.handle_coded(Instant::ZERO, &cov, len, &payload, &|s| Known::Have(&p[&s]), &mut out);
        d.handle_coded(Instant::ZERO, &cov, len, &payload, &|_| Known::Forgotten, &mut out);
        d.handle_coded(Instant::ZERO, &cov, len, &payload[..5], &|s| Known::Have(&p[&s]), &mut out);
        // A wrong length field must not produce a packet longer than the payload.
        d.handle_coded(
            Instant::ZERO,
            &cov,
            0xffff,
            &payload,
            &|s| if s == 0 { Known::Missing } else { Known::Have(&p[&s]) },
            &mut out,
        );
        assert!(out.is_empty());
        assert_eq!(d.stats().useless, 1);
        assert_eq!(d.stats().discarded, 3);
    }

    #[test]
    fn kept_packets_are_bounded_and_expire() {
        let p = pkts(3);
        let cov = Coverage::all(0, 3);
        let (payload, len) = encode(&p, &cov);
        let mut d = XorDecoder::new(2, Duration::from_millis(100));
        let mut out = Vec::new();
        for i in 0..5 {
            d.handle_coded(Instant::from_millis(i), &cov, len, &payload, &|_| Known::Missing, &mut out);
        }
        assert_eq!(d.pending(), 2);
        d.handle_coded(Instant::from_millis(500), &cov, len, &payload, &|s| Known::Have(&p[&s]), &mut out);
        assert_eq!(d.pending(), 0);
    }
}
