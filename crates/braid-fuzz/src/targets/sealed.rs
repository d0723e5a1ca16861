//! Valid sealed datagrams, changed, reach a live [`SealedSession`](braid_proto::SealedSession)
//! (the daemons' datagram path): none of them opens, and none disturbs the session, so every
//! genuine datagram still opens afterwards, once.
//!
//! Input: a configuration byte (as the session pair's), then operations on the datagrams the client
//! sealed but the server has not received yet; each operation is a tag and a datagram index:
//! - tag `0`: a byte (16-bit position) XORed with a byte;
//! - `1`: truncated to a 16-bit length;
//! - `2`: extended with a chunk;
//! - `3`: a header byte (the associated data) replaced;
//! - `4`: replaced by a chunk (arbitrary bytes);
//! - `5`: the genuine datagram delivered: it opens the first time, is a replay after;
//! - `6`: the tag of another datagram put on it;
//! - `7`: the body of another datagram put under its header.
//!
//! A changed datagram that opens, a genuine one that does not, or a replay that opens panics.

use super::session::Pair;
use super::{Ops, OpsWriter, Target, Verdict};
use braid_proto::crypto::{Reject, TAG_LEN};
use braid_proto::wire::HEADER_LEN;
use braid_proto::{LinkId, SealedDatagramError};
use std::time::Duration;

/// Mutated sealed datagrams against the open path.
pub(super) const MUTATE: Target = Target {
    name: "sealed-mutate",
    about: "SealedSession::handle_datagram: valid sealed datagrams changed never open or disturb the session",
    text: false,
    max_len: 4096,
    run,
    seeds,
};

/// A held datagram: the link it went on, its bytes, whether the server has opened it.
struct Held {
    link: LinkId,
    bytes: Vec<u8>,
    opened: bool,
}

fn seeds() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for config in [0u8, 0x09, 0x52, 0xc7] {
        let mut w = OpsWriter::default();
        w.u8(config);
        for i in 0..8u8 {
            w.u8(i).u8(i);
            match i {
                0 => w.u16(20).u8(0x80),
                1 => w.u16(30),
                2 | 4 => w.chunk(&[0xab; 5]),
                3 => w.u8(4).u8(0xff),
                _ => &mut w,
            };
        }
        w.u8(5).u8(3).u8(5).u8(3);
        out.push(w.0);
    }
    out
}

/// A live sealed pair, and the datagrams the client sealed that the server still has to receive.
fn setup(config: u8) -> (Pair, Vec<Held>) {
    let mut p = Pair::new(config, true);
    let packet = |i: u16| -> Vec<u8> { (0..(60 + i * 97) % 1200).map(|x| (x as u8) ^ (i as u8)).collect() };
    for i in 0..6 {
        let _ = p.client.handle_tun_packet(p.now, &packet(i));
        p.advance(Duration::from_millis(5));
        p.deliver();
    }
    for i in 6..14 {
        let _ = p.client.handle_tun_packet(p.now, &packet(i));
    }
    p.advance(Duration::from_millis(5));
    let held = std::mem::take(&mut p.in_flight)
        .into_iter()
        .filter(|(to_server, ..)| *to_server)
        .map(|(_, link, bytes)| Held { link, bytes, opened: false })
        .collect();
    (p, held)
}

fn run(input: &[u8]) -> Verdict {
    let mut ops = Ops::new(input);
    let (mut p, mut held) = setup(ops.u8());
    if held.is_empty() {
        return Verdict::Rejected;
    }
    let mut tried = false;
    while !ops.done() {
        let tag = ops.u8();
        let i = usize::from(ops.u8()) % held.len();
        let j = (i + 1) % held.len();
        let mut d = held[i].bytes.clone();
        let n = d.len();
        match tag & 7 {
            0 => {
                let at = usize::from(ops.u16()) % n;
                d[at] ^= ops.u8();
            }
            1 => d.truncate(usize::from(ops.u16()) % (n + 1)),
            2 => d.extend_from_slice(ops.chunk()),
            3 => {
                let at = usize::from(ops.u8()) % HEADER_LEN;
                d[at] = ops.u8();
            }
            4 => d = ops.chunk().to_vec(),
            5 => {}
            6 => {
                let other = &held[j].bytes;
                d[n - TAG_LEN..].copy_from_slice(&other[other.len() - TAG_LEN..]);
            }
            _ => {
                let other = &held[j].bytes;
                d.truncate(HEADER_LEN);
                d.extend_from_slice(&other[HEADER_LEN..]);
            }
        }
        tried = true;
        let from = p.client_addrs[usize::from(held[i].link.0) % 2];
        let r = handle(&mut p, from, &d);
        match held.iter_mut().find(|h| h.bytes == d) {
            // Genuine (unchanged, or changed into another genuine datagram).
            Some(h) if h.opened => {
                assert_eq!(r, Err(SealedDatagramError::Rejected(Reject::Replay)), "a replay must not open")
            }
            Some(h) => {
                assert!(!matches!(r, Err(SealedDatagramError::Rejected(_))), "a genuine datagram must open: {r:?}");
                h.opened = true;
            }
            None => assert!(matches!(r, Err(SealedDatagramError::Rejected(_))), "a changed datagram opened: {r:?}"),
        }
    }
    // Nothing forged moved the replay windows or the keys: what was held back still opens.
    for h in held.iter_mut().filter(|h| !h.opened) {
        let from = p.client_addrs[usize::from(h.link.0) % 2];
        let r = handle(&mut p, from, &h.bytes);
        assert!(!matches!(r, Err(SealedDatagramError::Rejected(_))), "a genuine datagram no longer opens: {r:?}");
        h.opened = true;
    }
    Verdict::from_ok(tried)
}

fn handle(p: &mut Pair, from: std::net::SocketAddr, d: &[u8]) -> Result<(), SealedDatagramError> {
    let now = p.now;
    p.server.handle_datagram(now, now, None, from, d)
}
