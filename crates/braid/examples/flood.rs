//! A handshake flooder for the DoS test (`scripts/flood-test.sh`): sends forged handshake
//! initiations to a braid server as fast as asked.
//!
//! Each initiation has the right length, a valid `mac1` (the attacker knows the server's public
//! key, which is public) and a fresh random ephemeral key, so it passes every cheap check and, on
//! a server not under load, costs it a Diffie-Hellman before Noise decryption fails. The template
//! comes from a real initiation by an unlisted key. SOCKETS source ports share the load (16 by
//! default), as several attackers behind one address would.
//!
//! ```text
//! cargo run --release -p braid --example flood -- SERVER:PORT SERVER_PUBKEY COUNT RATE_PPS [SOCKETS]
//! ```

use braid_proto::crypto::{CipherSuite, INITIATION_LEN, Initiator, PublicKey, StaticSecret};
use braid_proto::{Instant, LinkId};
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

const HEADER_LEN: usize = braid_proto::wire::HEADER_LEN;
const MAC_LEN: usize = 16;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 5 {
        eprintln!("usage: flood SERVER:PORT SERVER_PUBKEY COUNT RATE_PPS [SOCKETS]");
        std::process::exit(2);
    }
    let dst: SocketAddr = args[1].parse()?;
    let key = base64_decode(&args[2]).ok_or("server public key: not 32 bytes of base64")?;
    let server = PublicKey(key);
    let count: u64 = args[3].parse()?;
    let rate: u64 = args[4].parse()?;
    let nsock: usize = args.get(5).map_or(Ok(16), |s| s.parse())?;

    let mut seed = [0u8; 32];
    for (i, b) in seed.iter_mut().enumerate() {
        *b = (std::process::id() as u8).wrapping_mul(31).wrapping_add(i as u8);
    }
    let stranger = StaticSecret::from_bytes(seed);
    let mut init = Initiator::new(stranger, server, None, CipherSuite::default(), seed);
    let mut template = [0u8; INITIATION_LEN];
    init.initiate(Instant::from_micros(0), 1, 0, LinkId(0), &mut template)?;

    // mac1 key: SHA-256("mac1----" || server public key), as braid_proto::crypto::cookie.
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    ctx.update(b"mac1----");
    ctx.update(&server.0);
    let mac1_key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, ctx.finish().as_ref());
    let m1 = INITIATION_LEN - 2 * MAC_LEN;

    let socks: Vec<UdpSocket> = (0..nsock).map(|_| UdpSocket::bind("0.0.0.0:0")).collect::<Result<_, _>>()?;
    let mut rng = seed;
    let start = std::time::Instant::now();
    let mut sent = 0u64;
    let mut errors = 0u64;
    let mut pkt = template;
    while sent < count {
        // Pace: as many as the rate allows by now, in bursts of at most 64.
        let due = (start.elapsed().as_secs_f64() * rate as f64) as u64;
        if due <= sent {
            std::thread::sleep(Duration::from_micros(200));
            continue;
        }
        for _ in 0..(due - sent).min(64).min(count - sent) {
            // A fresh "ephemeral key": 32 pseudo-random bytes (xorshift on the seed).
            for chunk in pkt[HEADER_LEN..HEADER_LEN + 32].chunks_mut(8) {
                let mut x = u64::from_le_bytes(rng[..8].try_into().unwrap_or_default());
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                rng[..8].copy_from_slice(&x.to_le_bytes());
                chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
            }
            let tag = ring::hmac::sign(&mac1_key, &pkt[..m1]);
            pkt[m1..m1 + MAC_LEN].copy_from_slice(&tag.as_ref()[..MAC_LEN]);
            if socks[(sent as usize) % socks.len()].send_to(&pkt, dst).is_err() {
                errors += 1;
            }
            sent += 1;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!("sent {sent} forged initiations in {secs:.2} s ({:.0}/s), {errors} send errors", sent as f64 / secs);
    Ok(())
}

fn base64_decode(s: &str) -> Option<[u8; 32]> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(s.trim()).ok()?.try_into().ok()
}
