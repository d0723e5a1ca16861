//! The crypto layer end to end on a virtual clock: handshake, transport, every rejection reason.

use super::handshake::{COOKIE_REPLY_LEN, HINT_LEN};
use super::*;
use crate::Instant;
use crate::link::LinkId;
use crate::wire::{DataRepr, HEADER_LEN, Header, PacketType};
use std::net::SocketAddr;
use std::time::Duration;

fn key(b: u8) -> StaticSecret {
    StaticSecret::from_bytes([b; 32])
}

fn from() -> SocketAddr {
    "198.51.100.7:40000".parse().unwrap()
}

const WALL: u64 = 1_700_000_000_000_000_000;

struct Pair {
    client: Initiator,
    server: Responder,
    c: SecureChannel,
    s: SecureChannel,
    session: u32,
}

fn server(psk: Option<[u8; 32]>) -> Responder {
    let peers = vec![
        PeerConfig { name: "bus-1".into(), public: key(1).public_key(), psk },
        PeerConfig { name: "bus-2".into(), public: key(2).public_key(), psk: None },
    ];
    Responder::new(key(100), peers, [7; 32])
}

fn handshake(
    client: &mut Initiator,
    server: &mut Responder,
    now: Instant,
    wanted: u32,
    session: u32,
) -> Result<(Established, SessionKeys), Reject> {
    let mut buf = [0u8; 256];
    let n = client.initiate(now, WALL + now.as_micros() * 1000, wanted, LinkId(0), &mut buf).unwrap();
    assert_eq!(n, INITIATION_LEN);
    let mut out = [0u8; 256];
    let pending = match server.handle_initiation(now, from(), &buf[..n], &mut out)? {
        InitiationOutcome::Accepted(p) => p,
        InitiationOutcome::CookieReply(_) => return Err(Reject::RateLimited),
    };
    assert_eq!(server.peer(pending.peer).map(|p| p.name.as_str()), Some("bus-1"));
    let continued = wanted != 0 && wanted == session;
    let (m, skeys) = server.respond(now, pending, session, continued, &mut out).unwrap();
    assert_eq!(m, RESPONSE_LEN);
    match client.handle(now, &out[..m])? {
        InitiatorEvent::Established(e) => Ok((e, skeys)),
        other => panic!("unexpected {other:?}"),
    }
}

fn pair(suite: CipherSuite, psk: Option<[u8; 32]>) -> Pair {
    pair_seeded(suite, psk, 1)
}

fn pair_seeded(suite: CipherSuite, psk: Option<[u8; 32]>, seed: u8) -> Pair {
    let mut client = Initiator::new(key(1), key(100).public_key(), psk, suite, [seed; 32]);
    let mut server = server(psk);
    let now = Instant::from_micros(1_000);
    let (e, skeys) = handshake(&mut client, &mut server, now, 0, 0xcdef).unwrap();
    assert_eq!(e.session, 0xcdef);
    assert!(!e.continued);
    assert_eq!(e.keys.send, skeys.recv);
    assert_eq!(e.keys.recv, skeys.send);
    Pair { c: SecureChannel::new(&e.keys, now), s: SecureChannel::new(&skeys, now), client, server, session: e.session }
}

/// A data datagram of `session` on `link` with per-link sequence number `seq`, sealed by `ch`.
fn sealed(ch: &mut SecureChannel, session: u32, link: u8, seq: u32, payload: &[u8]) -> Vec<u8> {
    let mut buf = vec![0u8; 64 + payload.len()];
    let h = Header { ptype: PacketType::Data, flags: 0, session, link: LinkId(link), link_seq: seq, timestamp: 5 };
    h.emit(&mut buf).unwrap();
    let d = DataRepr { seq, ack: None, payload };
    let n = HEADER_LEN + d.emit(&mut buf[HEADER_LEN..]).unwrap();
    let m = ch.seal(Instant::from_micros(2_000), &mut buf, n).unwrap();
    assert_eq!(m, n + TAG_LEN);
    buf.truncate(m);
    buf
}

fn open(ch: &mut SecureChannel, d: &[u8]) -> Result<Vec<u8>, Reject> {
    let mut out = Vec::new();
    ch.open(Instant::from_micros(2_000), d, &mut out).map(|()| out)
}

#[test]
fn handshake_and_transport_both_suites() {
    for suite in [CipherSuite::ChaCha20Poly1305, CipherSuite::Aes256Gcm] {
        let mut p = pair(suite, Some([42; 32]));
        let d = sealed(&mut p.c, p.session, 0, 1, b"hello");
        assert!(!d.windows(5).any(|w| w == b"hello"), "the body is encrypted");
        let plain = open(&mut p.s, &d).unwrap();
        let (h, body) = Header::parse(&plain).unwrap();
        assert_eq!(h.session, p.session);
        assert_eq!(DataRepr::parse(0, body).unwrap().payload, b"hello");
        let back = sealed(&mut p.s, p.session, 3, 9, b"world");
        assert!(open(&mut p.c, &back).is_ok());
    }
}

#[test]
fn modified_truncated_replayed_wrong_key_and_wrong_session_are_rejected() {
    let mut p = pair(CipherSuite::ChaCha20Poly1305, None);
    let d = sealed(&mut p.c, p.session, 0, 1, b"passenger packet");
    // Every single-bit flip, header (associated data) or body or tag, fails authentication.
    for i in 0..d.len() {
        let mut m = d.clone();
        m[i] ^= 0x10;
        let r = open(&mut p.s, &m);
        // A flip in the sequence number may also land outside the window first.
        assert!(matches!(r, Err(Reject::BadMac) | Err(Reject::Replay)), "byte {i}: {r:?}");
    }
    for n in [0, 5, HEADER_LEN, HEADER_LEN + TAG_LEN - 1] {
        assert_eq!(open(&mut p.s, &d[..n]), Err(Reject::Malformed), "truncated to {n}");
    }
    assert_eq!(open(&mut p.s, &d[..d.len() - 1]), Err(Reject::BadMac), "one byte short");
    assert!(open(&mut p.s, &d).is_ok(), "the original still opens: rejections changed nothing");
    assert_eq!(open(&mut p.s, &d), Err(Reject::Replay));

    // The same session id sealed under another handshake's keys (a wrong key).
    let mut other = pair_seeded(CipherSuite::ChaCha20Poly1305, None, 2);
    let forged = sealed(&mut other.c, p.session, 0, 2, b"forged");
    assert_eq!(open(&mut p.s, &forged), Err(Reject::BadMac));
    // A datagram of another session presented to this one: its header is authenticated too.
    let mut wrong = sealed(&mut p.c, p.session, 0, 3, b"x");
    wrong[1] ^= 1;
    assert_eq!(open(&mut p.s, &wrong), Err(Reject::BadMac));
    assert!(open(&mut p.s, &sealed(&mut p.c, p.session, 0, 4, b"y")).is_ok(), "forgeries did not move the window");
}

/// Found by the `crypto-channel` fuzz target: a datagram refused before decryption (too short,
/// replayed) left the previous datagram's plaintext in the caller's buffer.
#[test]
fn a_refused_datagram_leaves_no_plaintext_behind() {
    let mut p = pair(CipherSuite::ChaCha20Poly1305, None);
    let d = sealed(&mut p.c, p.session, 0, 1, b"secret");
    let now = Instant::from_micros(2_000);
    let mut out = Vec::new();
    assert!(p.s.open(now, &d, &mut out).is_ok());
    assert!(!out.is_empty());
    assert_eq!(p.s.open(now, &d, &mut out), Err(Reject::Replay));
    assert!(out.is_empty(), "replayed");
    assert!(p.s.open(now, &sealed(&mut p.c, p.session, 0, 2, b"x"), &mut out).is_ok());
    assert_eq!(p.s.open(now, &d[..HEADER_LEN], &mut out), Err(Reject::Malformed));
    assert!(out.is_empty(), "truncated");
}

#[test]
fn reordering_within_the_window_is_fine_beyond_it_is_replay() {
    let mut p = pair(CipherSuite::ChaCha20Poly1305, None);
    let old = sealed(&mut p.c, p.session, 1, 10, b"old");
    let late = sealed(&mut p.c, p.session, 1, 11, b"late");
    let mut last = Vec::new();
    for seq in 12..11 + REPLAY_WINDOW as u32 {
        last = sealed(&mut p.c, p.session, 1, seq, b"p");
    }
    assert!(open(&mut p.s, &last).is_ok());
    // `late` is REPLAY_WINDOW - 1 behind the highest: still in; `old` is REPLAY_WINDOW behind: out.
    assert!(open(&mut p.s, &late).is_ok());
    assert_eq!(open(&mut p.s, &old), Err(Reject::Replay));
    // Links have separate counters: link 0 is untouched by link 1's progress.
    assert!(open(&mut p.s, &sealed(&mut p.c, p.session, 0, 10, b"z")).is_ok());
}

#[test]
fn counters_survive_the_24_bit_wrap_and_an_engine_reset() {
    let mut p = pair(CipherSuite::ChaCha20Poly1305, None);
    for seq in (0..3u32 << 24).step_by(1 << 20) {
        let d = sealed(&mut p.c, p.session, 0, seq & 0xff_ffff, b"w");
        assert!(open(&mut p.s, &d).is_ok(), "seq {seq}");
    }
    // The engine reusing a sequence number must not reuse a nonce: the same plaintext sealed
    // twice with the same header differs.
    let a = sealed(&mut p.c, p.session, 2, 5, b"same");
    let b = sealed(&mut p.c, p.session, 2, 5, b"same");
    assert_ne!(a, b);
}

#[test]
fn unlisted_key_cannot_open_a_session() {
    let mut stranger = Initiator::new(key(66), key(100).public_key(), None, CipherSuite::default(), [3; 32]);
    let mut server = server(None);
    let now = Instant::from_micros(5);
    assert_eq!(handshake(&mut stranger, &mut server, now, 0, 1).unwrap_err(), Reject::UnknownKey);
    // A listed vehicle that has the wrong server key fails mac1 (cheaply, before any DH).
    let mut lost = Initiator::new(key(1), key(101).public_key(), None, CipherSuite::default(), [3; 32]);
    assert_eq!(handshake(&mut lost, &mut server, now, 0, 1).unwrap_err(), Reject::BadMac);
    // A wrong pre-shared key: the server cannot tell until the client reads its response.
    let mut c = Initiator::new(key(1), key(100).public_key(), Some([1; 32]), CipherSuite::default(), [3; 32]);
    let mut s = Responder::new(
        key(100),
        vec![PeerConfig { name: "bus-1".into(), public: key(1).public_key(), psk: Some([2; 32]) }],
        [4; 32],
    );
    assert!(matches!(handshake(&mut c, &mut s, now, 0, 1).unwrap_err(), Reject::BadMac));
}

#[test]
fn peers_are_added_and_removed_while_running() {
    let now = Instant::from_micros(5);
    let mut server = server(None);
    let (mut buf, mut out) = ([0u8; 256], [0u8; 256]);
    let accepted =
        |server: &mut Responder, d: &[u8], out: &mut [u8]| match server.handle_initiation(now, from(), d, out) {
            Ok(InitiationOutcome::Accepted(p)) => Ok((p.peer, p.fresh)),
            Ok(InitiationOutcome::CookieReply(_)) => Err(Reject::RateLimited),
            Err(r) => Err(r),
        };
    let mut bus1 = Initiator::new(key(1), key(100).public_key(), None, CipherSuite::default(), [1; 32]);
    let n = bus1.initiate(now, WALL, 0, LinkId(0), &mut buf).unwrap();
    let old = buf;
    assert_eq!(accepted(&mut server, &old[..n], &mut out), Ok((0, true)));
    // bus-1 removed: its initiations are refused as from an unknown key; bus-2 keeps index 1.
    assert_eq!(server.remove_peer(0).map(|p| p.name), Some("bus-1".into()));
    assert_eq!(server.remove_peer(0), None, "removed once");
    let m = bus1.initiate(now, WALL + 1, 0, LinkId(0), &mut buf).unwrap();
    assert_eq!(accepted(&mut server, &buf[..m], &mut out), Err(Reject::UnknownKey));
    assert_eq!(server.peer(1).map(|p| p.name.as_str()), Some("bus-2"));
    // A third vehicle takes the free index; a key already listed is refused.
    let bus3 = PeerConfig { name: "bus-3".into(), public: key(3).public_key(), psk: None };
    assert_eq!(server.add_peer(bus3), Ok(0));
    let dup = PeerConfig { name: "bus-2b".into(), public: key(2).public_key(), psk: None };
    assert_eq!(server.add_peer(dup), Err(DuplicateKey));
    let mut c3 = Initiator::new(key(3), key(100).public_key(), None, CipherSuite::default(), [3; 32]);
    let k = c3.initiate(now, WALL, 0, LinkId(0), &mut buf).unwrap();
    assert_eq!(accepted(&mut server, &buf[..k], &mut out), Ok((0, true)));
    // bus-1 listed again, at a new index: its old initiation replayed is still stale (the
    // timestamps are kept by key), a new one is fresh.
    let again = PeerConfig { name: "bus-1".into(), public: key(1).public_key(), psk: None };
    assert_eq!(server.add_peer(again), Ok(2));
    assert_eq!(server.peers().map(|(i, _)| i).collect::<Vec<_>>(), [0, 1, 2]);
    assert_eq!(accepted(&mut server, &old[..n], &mut out), Ok((2, false)));
    let m = bus1.initiate(now, WALL + 2, 0, LinkId(0), &mut buf).unwrap();
    assert_eq!(accepted(&mut server, &buf[..m], &mut out), Ok((2, true)));
}

#[test]
fn replayed_initiation_is_refused() {
    let mut client = Initiator::new(key(1), key(100).public_key(), None, CipherSuite::default(), [1; 32]);
    let mut server = server(None);
    let now = Instant::from_micros(5);
    let mut buf = [0u8; 256];
    let n = client.initiate(now, WALL, 0, LinkId(0), &mut buf).unwrap();
    let mut out = [0u8; 256];
    assert!(
        matches!(server.handle_initiation(now, from(), &buf[..n], &mut out), Ok(InitiationOutcome::Accepted(p)) if p.fresh)
    );
    // The replay authenticates (it is genuine, only old) but is reported stale: the server answers
    // it only where that cannot disturb a live session (daemon::server).
    assert!(
        matches!(server.handle_initiation(now, from(), &buf[..n], &mut out), Ok(InitiationOutcome::Accepted(p)) if !p.fresh)
    );
    let mut bad = buf;
    bad[40] ^= 1;
    assert!(matches!(server.handle_initiation(now, from(), &bad[..n], &mut out), Err(Reject::BadMac)));
    assert!(matches!(server.handle_initiation(now, from(), &buf[..n - 1], &mut out), Err(Reject::Malformed)));
}

#[test]
fn a_stale_initiation_answered_resets_the_timestamp() {
    // A gateway without a real-time clock: its first run stamped an hour ahead, then it reboots
    // with the right time. The server answers (daemon::server decides when) and accepts it.
    let now = Instant::from_micros(5);
    let mut server = server(None);
    let (mut buf, mut out) = ([0u8; 256], [0u8; 256]);
    let mut ahead = Initiator::new(key(1), key(100).public_key(), None, CipherSuite::default(), [1; 32]);
    let n = ahead.initiate(now, WALL + 3_600_000_000_000, 0, LinkId(0), &mut buf).unwrap();
    assert!(
        matches!(server.handle_initiation(now, from(), &buf[..n], &mut out), Ok(InitiationOutcome::Accepted(p)) if p.fresh)
    );
    let mut rebooted = Initiator::new(key(1), key(100).public_key(), None, CipherSuite::default(), [2; 32]);
    let n = rebooted.initiate(now, WALL, 0, LinkId(0), &mut buf).unwrap();
    let Ok(InitiationOutcome::Accepted(p)) = server.handle_initiation(now, from(), &buf[..n], &mut out) else {
        panic!("a genuine initiation must authenticate");
    };
    assert!(!p.fresh, "an hour behind the last one: stale");
    server.accept_stale(&p);
    let n = rebooted.initiate(now, WALL + 1_000, 0, LinkId(0), &mut buf).unwrap();
    assert!(
        matches!(server.handle_initiation(now, from(), &buf[..n], &mut out), Ok(InitiationOutcome::Accepted(p)) if p.fresh),
        "after the stale one was accepted, the client's next initiation is fresh again"
    );
}

/// A server that screens initiations with a [`Gate`] of its own (where they arrive) and leaves only
/// the Diffie-Hellman to the responder ([`Responder::handle_screened`]) gets what
/// `handle_initiation` gives: a cookie reply under load, then the session for the retry with its
/// cookie; and a forged initiation never reaches the responder.
#[test]
fn a_separate_gate_screens_what_the_responder_then_accepts() {
    let mut client = Initiator::new(key(1), key(100).public_key(), None, CipherSuite::default(), [1; 32]);
    let mut server = server(None);
    let mut gate = Gate::new(&server.public_key(), [9; 32]);
    gate.set_load_threshold(0);
    let now = Instant::from_micros(5_000_000);
    let (mut buf, mut out) = ([0u8; 256], [0u8; 256]);
    let n = client.initiate(now, WALL, 0, LinkId(0), &mut buf).unwrap();
    // mac1 is over the server's key: a gate of another server's key refuses it.
    let mut other = Gate::new(&key(101).public_key(), [9; 32]);
    assert_eq!(other.screen(now, from(), &buf[..n], &mut out), Err(Reject::BadMac));
    let Ok(Screened::CookieReply(m)) = gate.screen(now, from(), &buf[..n], &mut out) else {
        panic!("expected a cookie reply");
    };
    assert!(matches!(client.handle(now, &out[..m]), Ok(InitiatorEvent::CookieStored { link: LinkId(0) })));
    let n = client.initiate(now, WALL + 1, 0, LinkId(0), &mut buf).unwrap();
    assert_eq!(gate.screen(now, from(), &buf[..n], &mut out), Ok(Screened::Pass));
    let p = server.handle_screened(&buf[..n]).expect("the retry with its cookie is accepted");
    assert!(p.fresh);
    let (m, _) = server.respond(now, p, 5, false, &mut out).unwrap();
    assert!(matches!(client.handle(now, &out[..m]), Ok(InitiatorEvent::Established(e)) if e.session == 5));
    // The responder's own gate was never asked: under no load it lets an initiation through.
    let n = client.initiate(now, WALL + 2, 0, LinkId(0), &mut buf).unwrap();
    assert!(matches!(server.handle_initiation(now, from(), &buf[..n], &mut out), Ok(InitiationOutcome::Accepted(_))));
    // A forged initiation (a flipped byte under mac1) stops at the gate.
    let mut forged = buf;
    forged[HEADER_LEN + 3] ^= 1;
    assert_eq!(gate.screen(now, from(), &forged[..n], &mut out), Err(Reject::BadMac));
    assert_eq!(gate.screen(now, from(), &buf[..n - 1], &mut out), Err(Reject::Malformed));
}

#[test]
fn under_load_initiations_need_a_cookie() {
    let mut client = Initiator::new(key(1), key(100).public_key(), None, CipherSuite::default(), [1; 32]);
    let mut server = server(None);
    server.set_load_threshold(0);
    let now = Instant::from_micros(5_000_000);
    let mut buf = [0u8; 256];
    let mut out = [0u8; 256];
    let n = client.initiate(now, WALL, 0, LinkId(0), &mut buf).unwrap();
    let Ok(InitiationOutcome::CookieReply(m)) = server.handle_initiation(now, from(), &buf[..n], &mut out) else {
        panic!("expected a cookie reply");
    };
    assert_eq!(m, COOKIE_REPLY_LEN);
    assert!(matches!(client.handle(now, &out[..m]), Ok(InitiatorEvent::CookieStored { link: LinkId(0) })));
    assert_eq!(client.handle(now, &out[..m]).unwrap_err(), Reject::Replay, "one cookie per initiation");
    let n = client.initiate(now, WALL + 1, 0, LinkId(0), &mut buf).unwrap();
    let Ok(InitiationOutcome::Accepted(p)) = server.handle_initiation(now, from(), &buf[..n], &mut out) else {
        panic!("the cookie should let it through");
    };
    let (m, _) = server.respond(now, p, 77, false, &mut out).unwrap();
    assert!(matches!(client.handle(now, &out[..m]), Ok(InitiatorEvent::Established(e)) if e.session == 77));
    // The cookie is bound to the address: from elsewhere it is a cookie reply again.
    let n = client.initiate(now, WALL + 2, 0, LinkId(0), &mut buf).unwrap();
    let elsewhere: SocketAddr = "198.51.100.8:40000".parse().unwrap();
    assert!(matches!(
        server.handle_initiation(now, elsewhere, &buf[..n], &mut out),
        Ok(InitiationOutcome::CookieReply(_))
    ));
    // Every initiation without mac2 gets its cookie reply (smaller than the initiation, no DH),
    // from one address or from 65,536 (spoofed) ones: no table of sources fills up.
    let replies = (0..1000)
        .filter(|_| {
            matches!(
                server.handle_initiation(now, elsewhere, &buf[..n], &mut out),
                Ok(InitiationOutcome::CookieReply(_))
            )
        })
        .count();
    assert_eq!(replies, 1000);
    for i in 0..65_536u32 {
        let src = SocketAddr::from(([10, (i >> 16) as u8, (i >> 8) as u8, i as u8], 1000));
        let r = server.handle_initiation(now, src, &buf[..n], &mut out);
        assert!(matches!(r, Ok(InitiationOutcome::CookieReply(_))));
    }
    assert_eq!(server.rate_limiter_len(), handshake::RATE_LIMITER_ENTRIES);
    // And a newcomer still joins: a cookie, then an initiation with mac2 goes through.
    let newcomer: SocketAddr = "203.0.113.9:5000".parse().unwrap();
    let n = client.initiate(now, WALL + 3, 0, LinkId(0), &mut buf).unwrap();
    let Ok(InitiationOutcome::CookieReply(m)) = server.handle_initiation(now, newcomer, &buf[..n], &mut out) else {
        panic!("expected a cookie reply");
    };
    assert!(client.handle(now, &out[..m]).is_ok());
    let n = client.initiate(now, WALL + 4, 0, LinkId(0), &mut buf).unwrap();
    assert!(matches!(server.handle_initiation(now, newcomer, &buf[..n], &mut out), Ok(InitiationOutcome::Accepted(_))));
}

#[test]
fn rekey_keeps_traffic_flowing_in_both_directions() {
    let mut p = pair(CipherSuite::ChaCha20Poly1305, None);
    let t = Instant::from_micros(10_000_000);
    let in_flight_up = sealed(&mut p.c, p.session, 0, 1, b"old up");
    let in_flight_down = sealed(&mut p.s, p.session, 0, 1, b"old down");
    let (e, skeys) = handshake(&mut p.client, &mut p.server, t, p.session, p.session).unwrap();
    assert!(e.continued);
    p.c.rekey(&e.keys, t, true);
    p.s.rekey(&skeys, t, false);
    // The server still seals with the old keys until the client uses the new ones.
    let down = sealed(&mut p.s, p.session, 0, 2, b"down, old keys");
    assert!(open(&mut p.c, &down).is_ok(), "previous keys open during the grace period");
    let up = sealed(&mut p.c, p.session, 0, 2, b"up, new keys");
    assert!(open(&mut p.s, &up).is_ok(), "the pending keys open and are confirmed");
    assert!(open(&mut p.s, &in_flight_up).is_ok(), "sealed before the rekey, arriving after");
    assert!(open(&mut p.c, &in_flight_down).is_ok());
    let down = sealed(&mut p.s, p.session, 0, 3, b"down, new keys");
    assert!(open(&mut p.c, &down).is_ok());
    // After the grace period the old keys are gone.
    let late = t + KEY_GRACE + Duration::from_secs(1);
    let mut out = Vec::new();
    let mut c_old =
        SecureChannel::new(&SessionKeys { suite: CipherSuite::ChaCha20Poly1305, send: [9; 32], recv: [8; 32] }, t);
    let old = sealed(&mut c_old, p.session, 5, 1, b"z");
    assert_eq!(p.s.open(late, &old, &mut out), Err(Reject::BadMac));
}

#[test]
fn hints_and_junk_to_the_initiator() {
    let mut client = Initiator::new(key(1), key(100).public_key(), None, CipherSuite::default(), [1; 32]);
    let now = Instant::from_micros(5);
    let mut out = [0u8; 64];
    let n = unknown_session_hint(now, 0x1234, LinkId(1), &mut out).unwrap();
    assert_eq!(n, HINT_LEN);
    assert!(matches!(client.handle(now, &out[..n]), Ok(InitiatorEvent::UnknownSession(0x1234))));
    assert_eq!(client.handle(now, &out[..n - 1]).unwrap_err(), Reject::Malformed);
    // A response without a pending initiation, or forged, is refused.
    let mut fake = [0u8; RESPONSE_LEN];
    Header { ptype: PacketType::Handshake, flags: 1, session: 5, link: LinkId(0), link_seq: 0, timestamp: 0 }
        .emit(&mut fake)
        .unwrap();
    assert_eq!(client.handle(now, &fake).unwrap_err(), Reject::BadMac);
}

#[test]
fn cookies_are_kept_per_uplink() {
    // Two uplinks, two source addresses: each uplink's initiation carries the cookie made for its
    // own address. With one cookie for the client, each retry on the other uplink carried the
    // wrong one and a two-uplink vehicle never joined a server under load.
    let mut client = Initiator::new(key(1), key(100).public_key(), None, CipherSuite::default(), [1; 32]);
    let mut server = server(None);
    server.set_load_threshold(0);
    let now = Instant::from_micros(5_000_000);
    let addr = |l: u8| -> SocketAddr { format!("198.51.100.{}:4000", 10 + l).parse().unwrap() };
    let (mut buf, mut out) = ([0u8; 256], [0u8; 256]);
    let mut wall = WALL;
    for l in [0u8, 1] {
        wall += 1;
        let n = client.initiate(now, wall, 0, LinkId(l), &mut buf).unwrap();
        let Ok(InitiationOutcome::CookieReply(m)) = server.handle_initiation(now, addr(l), &buf[..n], &mut out) else {
            panic!("expected a cookie reply");
        };
        assert!(
            matches!(client.handle(now, &out[..m]), Ok(InitiatorEvent::CookieStored { link }) if link == LinkId(l))
        );
    }
    for l in [0u8, 1] {
        wall += 1;
        let n = client.initiate(now, wall, 0, LinkId(l), &mut buf).unwrap();
        let r = server.handle_initiation(now, addr(l), &buf[..n], &mut out);
        assert!(matches!(r, Ok(InitiationOutcome::Accepted(_))), "uplink {l}: its cookie must let it through");
    }
}

#[test]
fn a_late_response_still_completes_the_handshake() {
    // Round trip longer than the retry interval: the client sent a second initiation before the
    // first response came back. Each response completes (the latest one last).
    let mut client = Initiator::new(key(1), key(100).public_key(), None, CipherSuite::default(), [1; 32]);
    let mut server = server(None);
    let now = Instant::from_micros(5_000_000);
    let mut out = [[0u8; 256]; 2];
    let mut sess = Vec::new();
    for (k, o) in out.iter_mut().enumerate() {
        let mut buf = [0u8; 256];
        let n = client.initiate(now, WALL + k as u64, 0, LinkId(0), &mut buf).unwrap();
        let Ok(InitiationOutcome::Accepted(p)) = server.handle_initiation(now, from(), &buf[..n], o) else {
            panic!("accepted");
        };
        let (_, keys) = server.respond(now, p, 10 + k as u32, false, o).unwrap();
        sess.push(keys);
    }
    let e1 = match client.handle(now, &out[0][..RESPONSE_LEN]) {
        Ok(InitiatorEvent::Established(e)) => e,
        other => panic!("the first response, arriving after the retry, was refused: {other:?}"),
    };
    assert_eq!((e1.session, e1.keys.recv), (10, sess[0].send));
    assert!(client.is_pending(), "the newer initiation still waits");
    let e2 = match client.handle(now, &out[1][..RESPONSE_LEN]) {
        Ok(InitiatorEvent::Established(e)) => e,
        other => panic!("the second response was refused: {other:?}"),
    };
    assert_eq!((e2.session, e2.keys.recv), (11, sess[1].send));
    assert!(!client.is_pending());
    assert_eq!(client.handle(now, &out[0][..RESPONSE_LEN]).unwrap_err(), Reject::Replay);
}

#[test]
fn responder_follows_whichever_rekey_the_initiator_takes() {
    let mut p = pair(CipherSuite::ChaCha20Poly1305, None);
    let t = Instant::from_micros(10_000_000);
    let k = |b: u8| SessionKeys { suite: CipherSuite::ChaCha20Poly1305, send: [b; 32], recv: [b + 1; 32] };
    let mirror = |s: &SessionKeys| SessionKeys { suite: s.suite, send: s.recv, recv: s.send };
    // Two rekey handshakes answered; the client takes the first, then the second.
    p.s.rekey(&k(1), t, false);
    p.s.rekey(&k(3), t, false);
    p.c.rekey(&mirror(&k(1)), t, true);
    assert!(open(&mut p.s, &sealed(&mut p.c, p.session, 0, 10, b"k1")).is_ok(), "first rekey's keys open");
    p.c.rekey(&mirror(&k(3)), t, true);
    assert!(open(&mut p.s, &sealed(&mut p.c, p.session, 0, 11, b"k3")).is_ok(), "second rekey's keys open too");
    assert!(open(&mut p.c, &sealed(&mut p.s, p.session, 0, 12, b"down")).is_ok());
}

#[test]
fn keys_expire_after_reject_after() {
    let mut p = pair(CipherSuite::ChaCha20Poly1305, None);
    let born = Instant::from_micros(1_000);
    let up = sealed(&mut p.c, p.session, 0, 1, b"x");
    let late = born + REJECT_AFTER;
    let mut buf = vec![0u8; 128];
    let h =
        Header { ptype: PacketType::Data, flags: 0, session: p.session, link: LinkId(0), link_seq: 2, timestamp: 5 };
    h.emit(&mut buf).unwrap();
    assert!(p.c.expired(late));
    assert_eq!(p.c.seal(late, &mut buf, 40), Err(SealError::Expired));
    let mut out = Vec::new();
    assert_eq!(p.s.open(late, &up, &mut out), Err(Reject::Expired));
    assert!(p.s.open(born + REJECT_AFTER.saturating_sub(Duration::from_secs(1)), &up, &mut out).is_ok());
}

#[test]
fn low_order_keys_are_known() {
    assert!(PublicKey([0; 32]).is_low_order());
    let mut one = [0u8; 32];
    one[0] = 1;
    assert!(PublicKey(one).is_low_order());
    // p - 1 and p (2^255 - 19), and the same with the ignored top bit set.
    let mut p_minus_1 = [0xff; 32];
    p_minus_1[0] = 0xec;
    p_minus_1[31] = 0x7f;
    assert!(PublicKey(p_minus_1).is_low_order());
    p_minus_1[31] = 0xff;
    assert!(PublicKey(p_minus_1).is_low_order());
    assert!(!key(1).public_key().is_low_order());
    assert!(!key(100).public_key().is_low_order());
}

/// X25519 for an attacker who claims the all-zero static key: its "public key" is zero and every
/// Diffie-Hellman with its static key is zero, which is exactly what the responder computes for
/// a peer listed with the all-zero key.
struct ZeroStaticDh {
    real: Box<dyn snow::types::Dh>,
    zero: bool,
}

impl snow::types::Dh for ZeroStaticDh {
    fn name(&self) -> &'static str {
        self.real.name()
    }
    fn pub_len(&self) -> usize {
        32
    }
    fn priv_len(&self) -> usize {
        32
    }
    fn set(&mut self, privkey: &[u8]) {
        self.zero = privkey.iter().all(|b| *b == 0);
        self.real.set(privkey)
    }
    fn generate(&mut self, rng: &mut dyn snow::types::Random) -> Result<(), snow::Error> {
        self.zero = false;
        self.real.generate(rng)
    }
    fn pubkey(&self) -> &[u8] {
        if self.zero { &[0; 32] } else { self.real.pubkey() }
    }
    fn privkey(&self) -> &[u8] {
        self.real.privkey()
    }
    fn dh(&self, pubkey: &[u8], out: &mut [u8]) -> Result<(), snow::Error> {
        if self.zero {
            out[..32].fill(0);
            Ok(())
        } else {
            self.real.dh(pubkey, out)
        }
    }
}

struct ZeroStaticResolver;

struct TestRng(rand_chacha::ChaCha20Rng);

impl snow::types::Random for TestRng {
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), snow::Error> {
        rand::RngCore::fill_bytes(&mut self.0, dest);
        Ok(())
    }
}

impl snow::resolvers::CryptoResolver for ZeroStaticResolver {
    fn resolve_rng(&self) -> Option<Box<dyn snow::types::Random>> {
        Some(Box::new(TestRng(rand::SeedableRng::from_seed([5; 32]))))
    }
    fn resolve_dh(&self, choice: &snow::params::DHChoice) -> Option<Box<dyn snow::types::Dh>> {
        let real = snow::resolvers::DefaultResolver.resolve_dh(choice)?;
        Some(Box::new(ZeroStaticDh { real, zero: false }))
    }
    fn resolve_hash(&self, choice: &snow::params::HashChoice) -> Option<Box<dyn snow::types::Hash>> {
        snow::resolvers::DefaultResolver.resolve_hash(choice)
    }
    fn resolve_cipher(&self, choice: &snow::params::CipherChoice) -> Option<Box<dyn snow::types::Cipher>> {
        snow::resolvers::DefaultResolver.resolve_cipher(choice)
    }
}

#[test]
fn an_all_zero_diffie_hellman_is_refused() {
    // A server that lists a peer with the all-zero key (the config refuses it; this is the second
    // line of defence): an attacker with no key at all builds a valid-looking initiation, since
    // every DH with that "key" is zero. The handshake must refuse it.
    let mut server = Responder::new(
        key(100),
        vec![PeerConfig { name: "zero".into(), public: PublicKey([0; 32]), psk: None }],
        [7; 32],
    );
    let mut hs = snow::Builder::with_resolver(handshake::NOISE_PARAMS.parse().unwrap(), Box::new(ZeroStaticResolver))
        .local_private_key(&[0; 32])
        .unwrap()
        .remote_public_key(&key(100).public_key().0)
        .unwrap()
        .prologue(b"braid v1 IKpsk2")
        .unwrap()
        .psk(2, &[0; 32])
        .unwrap()
        .build_initiator()
        .unwrap();
    let mut buf = [0u8; INITIATION_LEN];
    Header { ptype: PacketType::Handshake, flags: 0, session: 0, link: LinkId(0), link_seq: 0, timestamp: 0 }
        .emit(&mut buf)
        .unwrap();
    let mut payload = [0u8; 13];
    payload[0] = CipherSuite::default().code();
    payload[5..13].copy_from_slice(&WALL.to_be_bytes());
    let m1 = INITIATION_LEN - 2 * cookie::MAC_LEN;
    hs.write_message(&payload, &mut buf[HEADER_LEN..m1]).unwrap();
    let mac1 = cookie::mac(&cookie::mac1_key(&key(100).public_key()), &buf[..m1]);
    buf[m1..m1 + cookie::MAC_LEN].copy_from_slice(&mac1);
    let mut out = [0u8; 256];
    let r = server.handle_initiation(Instant::from_micros(5), from(), &buf, &mut out);
    assert!(matches!(r, Err(Reject::BadMac)), "an initiation from nobody was accepted for the all-zero key");
}

#[test]
fn public_key_matches_rfc7748() {
    let s = key(1);
    // RFC 7748 6.1 test vector: Alice's private key and public key.
    let alice: [u8; 32] = [
        0x77, 0x07, 0x6d, 0x0a, 0x73, 0x18, 0xa5, 0x7d, 0x3c, 0x16, 0xc1, 0x72, 0x51, 0xb2, 0x66, 0x45, 0xdf, 0x4c,
        0x2f, 0x87, 0xeb, 0xc0, 0x99, 0x2a, 0xb1, 0x77, 0xfb, 0xa5, 0x1d, 0xb9, 0x2c, 0x2a,
    ];
    let alice_pub: [u8; 32] = [
        0x85, 0x20, 0xf0, 0x09, 0x89, 0x30, 0xa7, 0x54, 0x74, 0x8b, 0x7d, 0xdc, 0xb4, 0x3e, 0xf7, 0x5a, 0x0d, 0xbf,
        0x3a, 0x0d, 0x26, 0x38, 0x1a, 0xf4, 0xeb, 0xa4, 0xa9, 0x8e, 0xaa, 0x9b, 0x4e, 0x6a,
    ];
    assert_eq!(StaticSecret::from_bytes(alice).public_key().0, alice_pub);
    assert_ne!(s.public_key(), key(2).public_key());
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 512, ..Default::default() })]

    /// Whatever arrives, nothing panics and nothing is accepted that was not sealed by the peer:
    /// random bytes, and random bytes behind a valid-looking header of every type.
    #[test]
    fn random_input_is_rejected_without_panic(
        bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
        ptype in 1u8..7,
        flags in 0u8..4,
    ) {
        let mut p = pair(CipherSuite::ChaCha20Poly1305, None);
        let mut framed = bytes.clone();
        if framed.len() >= HEADER_LEN {
            framed[0] = (crate::wire::VERSION << 6) | (ptype << 2) | flags;
            framed[1..3].copy_from_slice(&p.session.to_be_bytes()[2..]);
        }
        let mut out = [0u8; 256];
        for d in [&bytes, &framed] {
            proptest::prop_assert!(open(&mut p.s, d).is_err());
            proptest::prop_assert!(open(&mut p.c, d).is_err());
            proptest::prop_assert!(p.client.handle(Instant::from_micros(9), d).map(|e| !matches!(e, InitiatorEvent::Established(_))).unwrap_or(true));
            proptest::prop_assert!(!matches!(
                p.server.handle_initiation(Instant::from_micros(9), from(), d, &mut out),
                Ok(InitiationOutcome::Accepted(_))
            ));
        }
    }
}

/// A load balancer that routes by session id sees, in the clear, which session a rekey or
/// rejoin continues (0 for a new one); mac1 covers the header, so changing it is refused.
#[test]
fn initiation_names_the_session_it_continues_in_the_clear() {
    let server = StaticSecret::from_bytes([7; 32]);
    let mut init =
        Initiator::new(StaticSecret::from_bytes([9; 32]), server.public_key(), None, CipherSuite::default(), [1; 32]);
    let mut out = [0u8; INITIATION_LEN];
    for wanted in [0, 0x1234, Header::MAX_SESSION] {
        init.initiate(Instant::from_micros(0), 1 + u64::from(wanted), wanted, LinkId(0), &mut out).unwrap();
        assert_eq!(Header::parse(&out).unwrap().0.session, wanted);
    }
}
