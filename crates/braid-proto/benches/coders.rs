//! Cost of the fountain coder next to XOR over the same packets (issue 6): per block of K
//! 1400-byte packets, one repair symbol per lost packet for a 10 % loss (at least one), encode plus
//! decode in µs, for K = 4 ... 64, and the ratio to XOR (one XOR repair, one packet recovered).
//! `cargo bench -p braid-proto --bench coders`. Wall-clock figures, never asserted.

use braid_proto::recovery::{Decoder, Encoder, FountainDecoder, FountainEncoder, Known, XorDecoder, XorEncoder};
use braid_proto::time::Instant;
use braid_proto::wire::Coverage;
use std::hint::black_box;
use std::time::{Duration, Instant as Wall};

fn packets(k: usize) -> Vec<Vec<u8>> {
    (0..k).map(|i| (0..1400).map(|b| (b * 31 + i * 7) as u8).collect()).collect()
}

/// µs per block: encode `repairs` repair symbols of K packets, lose `repairs` source packets and
/// decode them from the repairs.
fn fountain(k: usize, repairs: usize, iters: u32) -> f64 {
    let pkts = packets(k);
    let members: Vec<(u64, &[u8])> = pkts.iter().enumerate().map(|(i, p)| (i as u64, &p[..])).collect();
    let start = Wall::now();
    for it in 0..iters {
        let base = u64::from(it) * 1000;
        let members: Vec<(u64, &[u8])> = members.iter().map(|(s, p)| (base + s, *p)).collect();
        let mut enc = FountainEncoder::new();
        let mut dec = FountainDecoder::new(16, Duration::from_secs(1));
        let known =
            |s: u64| if s - base < repairs as u64 { Known::Missing } else { Known::Have(&pkts[(s - base) as usize]) };
        let mut out = Vec::new();
        for r in 0..repairs {
            let cov = Coverage { base, span: k as u16, degree: k as u16, seed: r as u16 };
            let (payload, t) = enc.encode(&cov, &members).expect("block encodes");
            dec.handle_coded(Instant::ZERO, &cov, t, &payload, &known, &mut out);
        }
        assert_eq!(out.len(), repairs, "K={k}: decoded");
        black_box(out);
    }
    start.elapsed().as_secs_f64() * 1e6 / f64::from(iters)
}

/// µs per block for XOR: one repair over the K packets, one packet recovered.
fn xor(k: usize, iters: u32) -> f64 {
    let pkts = packets(k);
    let members: Vec<(u64, &[u8])> = pkts.iter().enumerate().map(|(i, p)| (i as u64, &p[..])).collect();
    let cov = Coverage::all(0, k as u16);
    let start = Wall::now();
    for _ in 0..iters {
        let (payload, len) = XorEncoder.encode(&cov, &members).expect("xor encodes");
        let mut dec = XorDecoder::new(16, Duration::from_secs(1));
        let mut out = Vec::new();
        dec.handle_coded(
            Instant::ZERO,
            &cov,
            len,
            &payload,
            &|s| if s == 0 { Known::Missing } else { Known::Have(&pkts[s as usize]) },
            &mut out,
        );
        black_box(out);
    }
    start.elapsed().as_secs_f64() * 1e6 / f64::from(iters)
}

fn main() {
    println!(
        "{:>4} {:>8} {:>16} {:>14} {:>9} {:>16}",
        "K", "repairs", "raptorq µs/blk", "xor µs/blk", "ratio", "raptorq µs/pkt"
    );
    for k in [4usize, 8, 16, 32, 64] {
        let repairs = (k / 10).max(1);
        let iters = 2000 / k as u32 + 20;
        let f = fountain(k, repairs, iters);
        let x = xor(k, iters * 10);
        println!("{k:>4} {repairs:>8} {f:>16.1} {x:>14.1} {:>8.1}x {:>16.2}", f / x, f / k as f64);
    }
}
