//! The coded-packet decoders (`braid_proto::recovery`: XOR, RLNC, RaptorQ fountain) fed arbitrary
//! coded packets in wire format, interleaved with arriving data packets, time and forgetting, the
//! way the session drives them (recovered packets are fed back so kept equations peel further).
//!
//! Input: a program of operations read by [`super::Ops`]:
//! - `0`: a coded body (16-bit length, then [`CodedRepr`] bytes) reaches the decoder;
//! - `1`: data packet (16-bit seq, then 16-bit length and bytes) arrives;
//! - `2`: time advances by a 16-bit number of milliseconds;
//! - `3`: packets below a 16-bit seq are forgotten (delivered long ago).
//!
//! Properties checked: recovered packets are non-empty and inside a window some coded packet
//! covered; peeling terminates.

use super::{Ops, OpsWriter, Target, Verdict};
use braid_proto::Instant;
use braid_proto::recovery::{Known, codec};
use braid_proto::wire::{CodeKind, CodedRepr, Coverage};
use std::collections::HashMap;
use std::time::Duration;

/// The XOR decoder (oec, fec).
pub(super) const XOR: Target = Target {
    name: "decode-xor",
    about: "XorDecoder fed coded packets, data arrivals, time and forgetting",
    text: false,
    max_len: 8192,
    run: |d| run(CodeKind::Xor, d),
    seeds: || seeds(CodeKind::Xor),
};

/// The GF(2^8) RLNC decoder.
pub(super) const RLNC: Target = Target {
    name: "decode-rlnc",
    about: "RlncDecoder (Gaussian elimination) fed coded packets, data arrivals, time and forgetting",
    text: false,
    max_len: 8192,
    run: |d| run(CodeKind::Rlnc, d),
    seeds: || seeds(CodeKind::Rlnc),
};

/// The RaptorQ fountain decoder.
pub(super) const FOUNTAIN: Target = Target {
    name: "decode-fountain",
    about: "FountainDecoder (RaptorQ blocks) fed repair symbols, data arrivals, time and forgetting",
    text: false,
    max_len: 16384,
    run: |d| run(CodeKind::Fountain, d),
    seeds: || seeds(CodeKind::Fountain),
};

/// Most peeling steps one input may cause; each recovery is fed back once, so a decoder that
/// keeps producing packets past this is looping.
const MAX_PEEL: usize = 1 << 16;

fn run(kind: CodeKind, input: &[u8]) -> Verdict {
    let mut ops = Ops::new(input);
    // Small bounds, so eviction paths run too.
    let max_pending = 1 + usize::from(ops.u8() % 16);
    let mut dec = codec::decoder(kind, max_pending, Duration::from_millis(200));
    let mut have: HashMap<u64, Vec<u8>> = HashMap::new();
    let mut forgotten_below = 0u64;
    let mut now = Instant::ZERO;
    let mut expected = 0u64;
    let mut windows: Vec<(u64, u64)> = Vec::new();
    let mut accepted = false;
    let mut out = Vec::new();
    while !ops.done() {
        match ops.u8() % 4 {
            0 => {
                let Ok(c) = CodedRepr::parse(ops.chunk()) else { continue };
                accepted = true;
                let cov: Coverage = c.coverage(expected);
                windows.push((cov.base, cov.base + u64::from(cov.span)));
                let known = |s: u64| match have.get(&s) {
                    _ if s < forgotten_below => Known::Forgotten,
                    Some(p) => Known::Have(p),
                    None => Known::Missing,
                };
                dec.handle_coded(now, &cov, c.len_xor, c.payload, &known, &mut out);
            }
            1 => {
                let seq = u64::from(ops.u16());
                let p = ops.chunk();
                if p.is_empty() || have.contains_key(&seq) {
                    continue;
                }
                expected = expected.max(seq + 1);
                have.insert(seq, p.to_vec());
                dec.handle_packet(seq, p, &mut out);
            }
            2 => now += Duration::from_millis(u64::from(ops.u16())),
            _ => forgotten_below = u64::from(ops.u16()),
        }
        let mut steps = 0;
        while let Some((seq, p)) = out.pop() {
            steps += 1;
            assert!(steps < MAX_PEEL, "peeling does not terminate");
            assert!(!p.is_empty(), "recovered an empty packet");
            assert!(windows.iter().any(|&(a, b)| seq >= a && seq < b), "recovered {seq} outside every coverage");
            if have.contains_key(&seq) {
                continue;
            }
            expected = expected.max(seq + 1);
            dec.handle_packet(seq, &p, &mut out);
            have.insert(seq, p);
        }
    }
    Verdict::from_ok(accepted)
}

/// Honest runs: packets of varied lengths, some lost, coded packets from the real encoder over
/// windows the real senders would pick, in wire format.
fn seeds(kind: CodeKind) -> Vec<Vec<u8>> {
    let packet = |s: u64| -> Vec<u8> { (0..(1 + (s * 97) % 700)).map(|i| (i as u8) ^ (s as u8)).collect() };
    let mut out = Vec::new();
    for (variant, (n, lost_every)) in [(8u64, 3u64), (16, 4), (24, 5), (40, 2)].into_iter().enumerate() {
        let mut w = OpsWriter::default();
        w.u8(variant as u8 * 5);
        let mut enc = codec::encoder(kind);
        let window = match kind {
            CodeKind::Fountain => 16,
            _ => 8,
        };
        for s in 0..n {
            if s % lost_every != 1 {
                w.u8(1).u16(s as u16).chunk(&packet(s));
            }
            if (s + 1) % window == 0 || s + 1 == n {
                let base = s + 1 - ((s % window) + 1);
                let span = (s + 1 - base) as u16;
                for r in 0..3u16 {
                    let cov = match kind {
                        CodeKind::Xor if r > 0 => Coverage { base, span, degree: span.div_ceil(2), seed: r },
                        CodeKind::Fountain => Coverage { base, span, degree: span, seed: r },
                        _ => Coverage { base, span, degree: span, seed: r },
                    };
                    let members: Vec<(u64, Vec<u8>)> = cov.members().into_iter().map(|m| (m, packet(m))).collect();
                    let refs: Vec<(u64, &[u8])> = members.iter().map(|(m, p)| (*m, &p[..])).collect();
                    let Some((payload, len_field)) = enc.encode(&cov, &refs) else { continue };
                    let c = CodedRepr {
                        kind,
                        base: (cov.base & 0xff_ffff) as u32,
                        span: cov.span,
                        degree: cov.degree,
                        seed: cov.seed,
                        len_xor: len_field,
                        payload: &payload,
                    };
                    let mut body = vec![0u8; c.len()];
                    c.emit(&mut body).expect("sized");
                    w.u8(0).chunk(&body);
                }
                w.u8(2).u16(3);
            }
        }
        // Late arrivals of some lost packets, and forgetting.
        w.u8(1).u16(1).chunk(&packet(1));
        w.u8(2).u16(300).u8(3).u16(4);
        out.push(w.0);
    }
    out
}
