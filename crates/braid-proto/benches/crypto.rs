//! Cost of sealing and opening a 1400-byte datagram (ChaCha20-Poly1305 and AES-256-GCM, `ring`)
//! next to a plain copy of the same bytes in the same run, in MB/s and ns per datagram. These
//! machines are shared and noisy: the ratio is what carries from one run to another.
//!
//! `cargo bench -p braid-proto --bench crypto`

use braid_proto::Instant;
use braid_proto::LinkId;
use braid_proto::crypto::{CipherSuite, SecureChannel, SessionKeys, TAG_LEN};
use braid_proto::wire::{HEADER_LEN, Header, LINK_SEQ_OFFSET, PacketType};
use std::hint::black_box;
use std::time::{Duration, Instant as WallClock};

const LEN: usize = 1400;

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

fn main() {
    let min = Duration::from_millis(700);
    let mut plain = vec![0x5au8; LEN + TAG_LEN];
    Header { ptype: PacketType::Data, flags: 0, session: 1, link: LinkId(0), link_seq: 0, timestamp: 0 }
        .emit(&mut plain)
        .unwrap_or_default();
    let mut copy_dst = vec![0u8; LEN];
    let copy = time(min, || {
        copy_dst.copy_from_slice(black_box(&plain[..LEN]));
        black_box(&copy_dst);
    });
    println!("{:<22} {:>9.0} MB/s {:>7.0} ns/datagram", "copy (baseline)", LEN as f64 / copy / 1e6, copy * 1e9);
    for suite in [CipherSuite::ChaCha20Poly1305, CipherSuite::Aes256Gcm] {
        let k = SessionKeys { suite, send: [1; 32], recv: [2; 32] };
        let back = SessionKeys { suite, send: [2; 32], recv: [1; 32] };
        let now = Instant::from_micros(0);
        let (mut tx, mut rx) = (SecureChannel::new(&k, now), SecureChannel::new(&back, now));
        let mut buf = plain.clone();
        let mut seq = 0u32;
        let seal = time(min, || {
            seq = (seq + 1) & 0xff_ffff;
            buf[LINK_SEQ_OFFSET..LINK_SEQ_OFFSET + 3].copy_from_slice(&seq.to_be_bytes()[1..]);
            black_box(tx.seal(now, &mut buf, LEN).ok());
        });
        // Open a fresh sealed datagram each time (the replay window refuses repeats).
        let mut out = Vec::with_capacity(LEN + TAG_LEN);
        let mut sealed = plain.clone();
        let mut seq2 = 0u32;
        let seal_open = time(min, || {
            seq2 = (seq2 + 1) & 0xff_ffff;
            sealed[..LEN].copy_from_slice(&plain[..LEN]);
            sealed[LINK_SEQ_OFFSET..LINK_SEQ_OFFSET + 3].copy_from_slice(&seq2.to_be_bytes()[1..]);
            let n = rx_seal(&mut tx, &mut sealed);
            black_box(rx.open(now, &sealed[..n], &mut out).is_ok());
        });
        let open = (seal_open - seal).max(0.0);
        for (what, t) in [("seal", seal), ("open", open)] {
            println!(
                "{:<22} {:>9.0} MB/s {:>7.0} ns/datagram  {:>5.1}x a copy",
                format!("{suite} {what}"),
                LEN as f64 / t / 1e6,
                t * 1e9,
                t / copy
            );
        }
    }
    let _ = HEADER_LEN;
}

fn rx_seal(tx: &mut SecureChannel, buf: &mut [u8]) -> usize {
    tx.seal(Instant::from_micros(0), buf, LEN).unwrap_or(0)
}
