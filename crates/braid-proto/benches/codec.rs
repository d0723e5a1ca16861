//! Coding throughput: RLNC (GF(2^8)) next to XOR in the same run, for windows of 16, 64 and 256
//! packets of 1400 bytes. These machines are shared and noisy: the ratio is what carries from one
//! run to another.
//!
//! - encode: one coded packet over the whole window; MB/s of window (member) bytes consumed;
//! - decode, 1 lost: one coded packet over the window, one member missing (the case XOR handles):
//!   the decoder reduces by the other members and recovers it; MB/s of window bytes;
//! - decode, n/8 lost (RLNC only; XOR cannot): n/8 members missing, n/8 coded packets, Gaussian
//!   elimination; MB/s of window bytes over all coded packets, and recovered packets per second.
//!
//! `cargo bench -p braid-proto --bench codec`

use braid_proto::Instant;
use braid_proto::recovery::{Decoder, Encoder, Known, RlncDecoder, RlncEncoder, XorDecoder, XorEncoder};
use braid_proto::wire::Coverage;
use std::hint::black_box;
use std::time::{Duration, Instant as WallClock};

const LEN: usize = 1400;

/// Runs `f` repeatedly for at least `min` and returns the mean seconds per call.
fn time(min: Duration, mut f: impl FnMut()) -> f64 {
    f();
    let t0 = WallClock::now();
    let mut n = 0u64;
    while t0.elapsed() < min {
        f();
        n += 1;
    }
    t0.elapsed().as_secs_f64() / n as f64
}

fn window(n: u64) -> Vec<(u64, Vec<u8>)> {
    (0..n).map(|s| (s, (0..LEN).map(|i| (s as usize * 131 + i * 7) as u8).collect())).collect()
}

fn encode(enc: &mut dyn Encoder, cov: &Coverage, pk: &[(u64, Vec<u8>)]) -> (Vec<u8>, u16) {
    let members: Vec<(u64, &[u8])> = pk.iter().map(|(s, p)| (*s, &p[..])).collect();
    enc.encode(cov, &members).expect("non-empty window")
}

/// Seconds to decode one coded packet over the window with member `lost` missing.
fn decode_one(dec: &mut dyn Decoder, cov: &Coverage, coded: &(Vec<u8>, u16), pk: &[(u64, Vec<u8>)], lost: u64) {
    let mut out = Vec::new();
    dec.handle_coded(
        Instant::ZERO,
        cov,
        coded.1,
        &coded.0,
        &|s| if s == lost { Known::Missing } else { Known::Have(&pk[s as usize].1) },
        &mut out,
    );
    assert_eq!(out.len(), 1, "recovered");
    black_box(out);
}

fn main() {
    let min = Duration::from_millis(400);
    println!(
        "{:>6}  {:>12} {:>12} {:>6}  {:>12} {:>12} {:>6}  {:>16} {:>12}",
        "window",
        "xor enc MB/s",
        "rlnc enc",
        "ratio",
        "xor dec MB/s",
        "rlnc dec",
        "ratio",
        "rlnc n/8 lost MB/s",
        "recovered/s"
    );
    for n in [16u64, 64, 256] {
        let pk = window(n);
        let bytes = (n as usize * LEN) as f64;
        let cov = Coverage::all(0, n as u16);
        let mb = |secs: f64| bytes / secs / 1e6;

        let xe = time(min, || {
            black_box(encode(&mut XorEncoder, &cov, &pk));
        });
        let re = time(min, || {
            black_box(encode(&mut RlncEncoder, &cov, &pk));
        });

        let xc = encode(&mut XorEncoder, &cov, &pk);
        let rc = encode(&mut RlncEncoder, &cov, &pk);
        let xd = time(min, || decode_one(&mut XorDecoder::new(16, Duration::from_secs(1)), &cov, &xc, &pk, n / 2));
        let rd = time(min, || decode_one(&mut RlncDecoder::new(16, Duration::from_secs(1)), &cov, &rc, &pk, n / 2));

        // n/8 missing, n/8 coded packets with different seeds: solved together.
        let k = (n / 8).max(1);
        let lost: Vec<u64> = (0..k).map(|i| i * 8 + 3).collect();
        let coded: Vec<(Coverage, (Vec<u8>, u16))> = (0..k as u16)
            .map(|seed| {
                let c = Coverage { seed, ..cov };
                (c, encode(&mut RlncEncoder, &c, &pk))
            })
            .collect();
        let rk = time(min, || {
            let mut d = RlncDecoder::new(512, Duration::from_secs(1));
            let mut out: Vec<(u64, Vec<u8>)> = Vec::new();
            for (c, (payload, len)) in &coded {
                // As the session does: a recovered packet is known from then on.
                let mut new = Vec::new();
                d.handle_coded(
                    Instant::ZERO,
                    c,
                    *len,
                    payload,
                    &|s| match out.iter().find(|(r, _)| *r == s) {
                        Some((_, p)) => Known::Have(p),
                        None if lost.contains(&s) => Known::Missing,
                        None => Known::Have(&pk[s as usize].1),
                    },
                    &mut new,
                );
                out.extend(new);
            }
            assert_eq!(out.len(), k as usize, "all recovered");
            black_box(out);
        });
        println!(
            "{n:>6}  {:>12.0} {:>12.0} {:>6.2}  {:>12.0} {:>12.0} {:>6.2}  {:>16.0} {:>12.0}",
            mb(xe),
            mb(re),
            xe / re,
            mb(xd),
            mb(rd),
            xd / rd,
            bytes * k as f64 / rk / 1e6,
            k as f64 / rk,
        );
    }
    println!("(ratio = rlnc throughput / xor throughput; MB/s of window bytes the coder reads)");
}
