//! The crypto layer's decoders (`braid_proto::crypto`): the responder fed handshake initiations,
//! the initiator fed responses, cookie replies and hints, a keyed channel fed sealed datagrams,
//! and the replay window against a reference model.
//!
//! Every target builds its keys and generators from fixed seeds, so a run replays exactly. Each
//! also checks that nothing forged authenticates: what a decoder accepts must be byte-identical
//! (in the authenticated part) to a message the genuine peer made, and accepted once at most.

use super::{Ops, OpsWriter, Target, Verdict};
use braid_proto::crypto::PublicKey;
use braid_proto::crypto::replay::ReplayError;
use braid_proto::crypto::{
    CipherSuite, INITIATION_LEN, InitiationOutcome, Initiator, InitiatorEvent, MAX_PENDING, PeerConfig, REPLAY_WINDOW,
    RESPONSE_LEN, ReplayWindow, Responder, SecureChannel, SessionKeys, StaticSecret, TAG_LEN,
};
use braid_proto::wire::{DataRepr, HEADER_LEN, Header, PacketType};
use braid_proto::{Instant, LinkId};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

/// The responder.
pub(super) const RESPONDER: Target = Target {
    name: "crypto-responder",
    about: "Responder::handle_initiation: arbitrary and mutated initiations, real clients, load and cookies",
    text: false,
    max_len: 4096,
    run: run_responder,
    seeds: responder_seeds,
};

/// The initiator.
pub(super) const INITIATOR: Target = Target {
    name: "crypto-initiator",
    about: "Initiator::handle with a pending initiation: responses, cookie replies, hints",
    text: false,
    max_len: 4096,
    run: run_initiator,
    seeds: initiator_seeds,
};

/// The transport channel.
pub(super) const CHANNEL: Target = Target {
    name: "crypto-channel",
    about: "SecureChannel::open: arbitrary and mutated sealed datagrams, rekeys, time",
    text: false,
    max_len: 1 << 14,
    run: run_channel,
    seeds: channel_seeds,
};

/// The replay window.
pub(super) const REPLAY: Target = Target {
    name: "crypto-replay",
    about: "ReplayWindow check/update over the whole u64 range against a reference set",
    text: false,
    max_len: 4096,
    run: run_replay,
    seeds: replay_seeds,
};

fn key(b: u8) -> StaticSecret {
    StaticSecret::from_bytes([b; 32])
}

const SERVER_KEY: u8 = 100;
const PSK: [u8; 32] = [42; 32];
const WALL: u64 = 1_700_000_000_000_000_000;
const T0: Instant = Instant::from_micros(3_000_000);

fn addr(i: u8) -> SocketAddr {
    SocketAddr::from(([198, 51, 100, 1 + (i & 3)], 40_000))
}

/// The public keys of bus-1, bus-2 and the server, computed once (a scalar multiplication each).
fn public(i: usize) -> PublicKey {
    static P: OnceLock<[PublicKey; 3]> = OnceLock::new();
    P.get_or_init(|| [key(1).public_key(), key(2).public_key(), key(SERVER_KEY).public_key()])[i]
}

fn responder() -> Responder {
    let peers = vec![
        PeerConfig { name: "bus-1".into(), public: public(0), psk: Some(PSK) },
        PeerConfig { name: "bus-2".into(), public: public(1), psk: None },
    ];
    Responder::new(key(SERVER_KEY), peers, [7; 32])
}

/// Client `i` (0: bus-1 with a pre-shared key, ChaCha; 1: bus-2 without, AES).
fn client(i: usize) -> Initiator {
    let (k, psk, suite) =
        if i == 0 { (1, Some(PSK), CipherSuite::ChaCha20Poly1305) } else { (2, None, CipherSuite::Aes256Gcm) };
    Initiator::new(key(k), public(2), psk, suite, [10 + k; 32])
}

/// The part of an initiation `mac1` covers (everything but `mac2`, which is only checked under
/// load): identical bytes there are the same initiation.
const INIT_AUTH: usize = INITIATION_LEN - 16;
/// The same for a response (the initiator never checks a response's `mac2`).
const RESP_AUTH: usize = RESPONSE_LEN - 16;

// ---------------------------------------------------------------------------------------------
// crypto-responder
//
// Input: a configuration byte (0: default load threshold, else threshold = byte - 1), then a
// program read by [`Ops`]; the low two bits of each tag pick the operation:
// - `0`: a datagram (16-bit length, bytes) arrives from source address `tag >> 2 & 3`;
// - `1`: real client `tag >> 2 & 1` initiates (wall clock ever increasing) from address
//   `tag >> 3 & 3`; a cookie reply goes back to it, an accepted initiation is answered and the
//   response must establish the client with the server's keys;
// - `2`: time advances by a 16-bit number of ms, times 1000 if `tag >> 2 & 1` (cookie secrets age);
// - `3`: the load threshold becomes the next byte.
// Literal initiations (op 0) that the seeds carry come from the same clients, made at seed time
// against an identical responder fed the same program, so they (and their mac2) are valid.

/// Initiations the real clients make, by their authenticated prefix: (client, timestamp).
struct Genuine {
    inits: HashMap<Vec<u8>, (usize, u64)>,
}

struct ResponderWorld {
    server: Responder,
    clients: [Option<(Initiator, u64)>; 2],
    now: Instant,
    genuine: HashMap<Vec<u8>, (usize, u64)>,
    last_ts: [u64; 2],
    accepted: bool,
    session: u32,
}

impl ResponderWorld {
    fn new(config: u8) -> Self {
        let mut server = responder();
        if config != 0 {
            server.set_load_threshold(u32::from(config - 1));
        }
        ResponderWorld {
            server,
            clients: [None, None],
            now: T0,
            genuine: HashMap::new(),
            last_ts: [0; 2],
            accepted: false,
            session: 1,
        }
    }

    /// Delivers an initiation; checks what is accepted. Returns the server's reply if any.
    fn deliver(&mut self, from: u8, d: &[u8], known: &HashMap<Vec<u8>, (usize, u64)>) -> Option<Vec<u8>> {
        let mut out = [0u8; 256];
        match self.server.handle_initiation(self.now, addr(from), d, &mut out) {
            Ok(InitiationOutcome::CookieReply(n)) => Some(out[..n].to_vec()),
            Ok(InitiationOutcome::Accepted(p)) => {
                let prefix = &d[..INIT_AUTH];
                let Some(&(c, ts)) = self.genuine.get(prefix).or_else(|| known.get(prefix)) else {
                    panic!("a forged initiation was accepted: {d:02x?}");
                };
                assert_eq!(p.peer, c, "accepted as the wrong peer");
                // A stale one authenticates but is marked so; the daemon answers it only where
                // that cannot disturb a live session, so here it gets no response.
                assert_eq!(p.fresh, ts > self.last_ts[c], "initiation with timestamp {ts} after {}", self.last_ts[c]);
                if !p.fresh {
                    return None;
                }
                self.last_ts[c] = ts;
                self.accepted = true;
                self.session = self.session % 0xfff0 + 1;
                let (m, _) = self.server.respond(self.now, p, self.session, false, &mut out).expect("buffer fits");
                Some(out[..m].to_vec())
            }
            Err(_) => None,
        }
    }

    /// Real client `i` initiates from `from`; returns its initiation.
    fn client_initiates(&mut self, i: usize, from: u8, known: &HashMap<Vec<u8>, (usize, u64)>) -> Vec<u8> {
        let (c, wall) = self.clients[i].get_or_insert_with(|| (client(i), WALL + 1_000_000 * i as u64));
        *wall += 1_000;
        let ts = *wall;
        let mut buf = [0u8; INITIATION_LEN];
        c.initiate(self.now, ts, 0, LinkId(from), &mut buf).expect("buffer fits");
        self.genuine.insert(buf[..INIT_AUTH].to_vec(), (i, ts));
        let reply = self.deliver(from, &buf, known);
        let Some(reply) = reply else { return buf.to_vec() };
        let Some((c, _)) = self.clients[i].as_mut() else { return buf.to_vec() };
        match c.handle(self.now, &reply) {
            Ok(InitiatorEvent::Established(e)) => {
                assert_eq!(e.session, self.session, "established on another session than the server named");
            }
            Ok(InitiatorEvent::CookieStored { .. }) => {}
            other => panic!("the genuine reply to a genuine initiation was refused: {other:?}"),
        }
        buf.to_vec()
    }
}

fn run_responder(input: &[u8]) -> Verdict {
    let mut ops = Ops::new(input);
    let known = &genuine_inits().inits;
    let mut w = ResponderWorld::new(ops.u8());
    while !ops.done() {
        let tag = ops.u8();
        match tag & 3 {
            0 => {
                let d = ops.chunk();
                w.deliver((tag >> 2) & 3, d, known);
            }
            1 => {
                w.client_initiates(usize::from((tag >> 2) & 1), (tag >> 3) & 3, known);
            }
            2 => {
                let ms = u64::from(ops.u16()) * if (tag >> 2) & 1 == 1 { 1000 } else { 1 };
                w.now += Duration::from_millis(ms);
            }
            _ => w.server.set_load_threshold(u32::from(ops.u8())),
        }
    }
    Verdict::from_ok(w.accepted)
}

/// Seed programs, and the initiations the seeds carry literally.
fn responder_programs() -> (Vec<Vec<u8>>, Genuine) {
    let empty = HashMap::new();
    let mut all = HashMap::new();
    let mut programs = Vec::new();
    // (config, steps): a step is (op, client or threshold, address, literal?).
    type Step = (u8, usize, u8, bool);
    let scenarios: [(u8, &[Step]); 5] = [
        // Not under load: each client once, literally, then a replay of the first.
        (0, &[(1, 0, 0, true), (1, 1, 1, true), (9, 0, 0, true), (1, 0, 2, false)]),
        // Always under load: cookie reply, then the same client with mac2, literally.
        (1, &[(1, 0, 0, false), (1, 0, 0, true), (1, 1, 1, false), (1, 1, 1, true)]),
        // Threshold 1: the second initiation in a second needs a cookie.
        (2, &[(1, 0, 0, true), (1, 1, 0, true), (1, 1, 0, true), (2, 0, 0, false), (1, 0, 3, true)]),
        // Load comes and goes.
        (
            0,
            &[(1, 0, 0, true), (3, 0, 0, false), (1, 1, 1, true), (1, 1, 1, true), (3, 200, 0, false), (1, 0, 1, true)],
        ),
        // A cookie that ages out (secrets rotate after 2 minutes).
        (1, &[(1, 0, 2, false), (1, 0, 2, true), (4, 0, 0, false), (1, 0, 2, true), (1, 0, 2, true)]),
    ];
    for (config, steps) in scenarios {
        let mut w = ResponderWorld::new(config);
        let mut p = OpsWriter::default();
        p.u8(config);
        let mut last: Option<(u8, Vec<u8>)> = None;
        for &(op, who, from, literal) in steps {
            match op {
                1 => {
                    // Made and delivered by the real client: recorded as a literal datagram or as
                    // the "client initiates" operation, the responder sees the same bytes.
                    let d = w.client_initiates(who, from, &empty);
                    if literal {
                        p.u8(from << 2).chunk(&d);
                    } else {
                        p.u8(1 | ((who as u8) << 2) | (from << 3));
                    }
                    last = Some((from, d));
                }
                9 => {
                    let (from, d) = last.clone().expect("a previous initiation");
                    w.deliver(from, &d, &empty);
                    p.u8(from << 2).chunk(&d);
                }
                2 => {
                    w.now += Duration::from_millis(1_500);
                    p.u8(2).u16(1_500);
                }
                4 => {
                    w.now += Duration::from_secs(130);
                    p.u8(2 | 4).u16(130);
                }
                _ => {
                    w.server.set_load_threshold(who as u32);
                    p.u8(3).u8(who as u8);
                }
            }
        }
        all.extend(w.genuine);
        programs.push(p.0);
    }
    (programs, Genuine { inits: all })
}

fn genuine_inits() -> &'static Genuine {
    static G: OnceLock<Genuine> = OnceLock::new();
    G.get_or_init(|| responder_programs().1)
}

fn responder_seeds() -> Vec<Vec<u8>> {
    responder_programs().0
}

// ---------------------------------------------------------------------------------------------
// crypto-initiator
//
// Input: a configuration byte (bit 0: which client), then a program read by [`Ops`]; the client
// has initiated once before it starts. The low two bits of each tag pick the operation:
// - `0`, `3`: a datagram (16-bit length, bytes) reaches the client;
// - `1`: the client initiates again (its k-th initiation; a new pending handshake);
// - `2`: time advances by a 16-bit number of ms, times 1000 if `tag >> 2 & 1`.
// What the genuine server answers to the k-th initiation of each client is computed once (the
// client is deterministic), so a response can only establish the client if its authenticated
// part is the genuine answer to the pending initiation, and only once.

/// Initiations per client the genuine answers are computed for.
const ANSWERED: usize = 4;

/// A genuine response's authenticated prefix, the session it names and the client's keys.
type Answer = (Vec<u8>, u32, SessionKeys);

struct Answers {
    /// Per client, per initiation: the responses' authenticated prefixes with their session and
    /// the client's keys, and the cookie replies' bodies.
    responses: [Vec<Vec<Answer>>; 2],
    cookies: [Vec<Vec<Vec<u8>>>; 2],
    /// Per client: seed datagrams (responses, cookie replies) in initiation order.
    literal: [Vec<Vec<Vec<u8>>>; 2],
}

fn init_wall(k: usize) -> u64 {
    WALL + 1_000 * k as u64
}

fn answers() -> &'static Answers {
    static A: OnceLock<Answers> = OnceLock::new();
    A.get_or_init(|| {
        let mut a = Answers {
            responses: [Vec::new(), Vec::new()],
            cookies: [Vec::new(), Vec::new()],
            literal: [Vec::new(), Vec::new()],
        };
        for ci in 0..2 {
            let mut c = client(ci);
            let mut server = responder();
            let mut loaded = responder();
            loaded.set_load_threshold(0);
            for k in 0..ANSWERED {
                let mut init = [0u8; INITIATION_LEN];
                c.initiate(T0, init_wall(k), 0, LinkId(0), &mut init).expect("fits");
                let mut out = [0u8; 256];
                let mut responses = Vec::new();
                let mut literal = Vec::new();
                if let Ok(InitiationOutcome::CookieReply(n)) = loaded.handle_initiation(T0, addr(0), &init, &mut out) {
                    a.cookies[ci].push(vec![out[HEADER_LEN..n].to_vec()]);
                    literal.push(out[..n].to_vec());
                } else {
                    a.cookies[ci].push(Vec::new());
                }
                let Ok(InitiationOutcome::Accepted(p)) = server.handle_initiation(T0, addr(0), &init, &mut out) else {
                    panic!("the genuine server refused a genuine initiation");
                };
                let session = 0x10 + k as u32;
                let (m, keys) = server.respond(T0, p, session, false, &mut out).expect("fits");
                let mine = SessionKeys { suite: keys.suite, send: keys.recv, recv: keys.send };
                responses.push((out[..RESP_AUTH].to_vec(), session, mine));
                literal.push(out[..m].to_vec());
                a.responses[ci].push(responses);
                a.literal[ci].push(literal);
            }
        }
        a
    })
}

fn run_initiator(input: &[u8]) -> Verdict {
    let a = answers();
    let mut ops = Ops::new(input);
    let ci = usize::from(ops.u8() & 1);
    let mut c = client(ci);
    let mut now = T0;
    let mut k = 0usize;
    let mut buf = [0u8; INITIATION_LEN];
    c.initiate(now, init_wall(k), 0, LinkId(0), &mut buf).expect("fits");
    let mut established_k: HashSet<usize> = HashSet::new();
    let mut accepted = false;
    while !ops.done() {
        let tag = ops.u8();
        match tag & 3 {
            1 => {
                k += 1;
                c.initiate(now, init_wall(k), 0, LinkId(0), &mut buf).expect("fits");
            }
            2 => {
                let ms = u64::from(ops.u16()) * if (tag >> 2) & 1 == 1 { 1000 } else { 1 };
                now += Duration::from_millis(ms);
            }
            _ => {
                let d = ops.chunk();
                let pending = c.is_pending();
                match c.handle(now, d) {
                    Ok(InitiatorEvent::Established(e)) => {
                        assert!(pending, "established without a pending initiation");
                        // Any of the initiations still pending (up to MAX_PENDING) may be answered.
                        let window = k.saturating_sub(MAX_PENDING - 1)..=k;
                        let genuine = window.clone().find_map(|j| {
                            a.responses[ci]
                                .get(j)
                                .and_then(|rs| rs.iter().find(|r| r.0 == d[..RESP_AUTH]))
                                .map(|r| (j, r))
                        });
                        let Some((j, (_, session, keys))) = genuine else {
                            panic!("a forged response established one of initiations {window:?}: {d:02x?}");
                        };
                        assert!(established_k.insert(j), "initiation {j} established twice");
                        assert!(
                            established_k.iter().all(|&x| x <= j),
                            "an older initiation established after a newer one"
                        );
                        assert_eq!(e.session, *session);
                        assert_eq!((e.keys.send, e.keys.recv), (keys.send, keys.recv), "keys differ from the server's");
                        assert_eq!(c.is_pending(), j < k, "newer initiations stay pending, older ones go");
                        accepted = true;
                    }
                    Ok(InitiatorEvent::CookieStored { .. }) => {
                        assert!(pending, "cookie stored without a pending initiation");
                        let window = k.saturating_sub(MAX_PENDING - 1)..=k;
                        let ok = window.clone().any(|j| {
                            a.cookies[ci].get(j).is_some_and(|cs| cs.iter().any(|b| b[..] == d[HEADER_LEN..]))
                        });
                        assert!(ok, "a forged cookie reply was stored for one of initiations {window:?}: {d:02x?}");
                        accepted = true;
                    }
                    Ok(InitiatorEvent::UnknownSession(s)) => {
                        let (h, _) = Header::parse(d).expect("the hint parsed");
                        assert_eq!(s, h.session, "hint names another session than its header");
                        accepted = true;
                    }
                    Err(_) => {}
                }
            }
        }
    }
    Verdict::from_ok(accepted)
}

fn initiator_seeds() -> Vec<Vec<u8>> {
    let a = answers();
    let mut out = Vec::new();
    let mut hint = [0u8; 12];
    braid_proto::crypto::unknown_session_hint(T0, 0x1234, LinkId(1), &mut hint).expect("fits");
    for ci in 0..2u8 {
        let lit = &a.literal[usize::from(ci)];
        // Each initiation: its cookie reply, its response, the response again (a replay); then a
        // new initiation fed the previous answer, and a hint.
        let mut w = answer_each_initiation(ci, lit, true);
        w.u8(1).u8(0).chunk(lit[0].last().expect("a response")).u8(3).chunk(&hint);
        out.push(w.0);
        // Only the response to the first, after time passes; and the hint alone.
        let mut w = OpsWriter::default();
        w.u8(ci).u8(2).u16(500).u8(0).chunk(lit[0].last().expect("a response")).u8(0).chunk(&hint);
        out.push(w.0);
        // The responses in order, one initiation each.
        out.push(answer_each_initiation(ci, lit, false).0);
    }
    out
}

/// A crypto-initiator program for client `ci` that walks through its initiations in order: before
/// each but the first (which the client makes before the program starts) an op 1 makes the next,
/// then each of the genuine server's datagrams to it in `lit` (its cookie reply if any, then its
/// response) arrives as an op 0. With `replay`, the response arrives a second time right after.
fn answer_each_initiation(ci: u8, lit: &[Vec<Vec<u8>>], replay: bool) -> OpsWriter {
    let mut w = OpsWriter::default();
    w.u8(ci);
    for (k, datagrams) in lit.iter().enumerate() {
        if k > 0 {
            w.u8(1);
        }
        for d in datagrams {
            w.u8(0).chunk(d);
        }
        if replay {
            w.u8(0).chunk(datagrams.last().expect("a response"));
        }
    }
    w
}

// ---------------------------------------------------------------------------------------------
// crypto-channel
//
// Input: a configuration byte (bit 0: suite), then a program read by [`Ops`]; the low two bits of
// each tag pick the operation:
// - `0`, `3`: a datagram (16-bit length, bytes) reaches the server's channel;
// - `1`: the server installs the rekey's keys (as the responder: pending until used);
// - `2`: time advances by a 16-bit number of ms, times 1000 if `tag >> 2 & 1` (grace expires).
// The genuine datagrams are sealed once by the client's channel (both key epochs, several links,
// reordered sequence numbers, a 24-bit wrap); whatever opens must be one of them, with its
// plaintext, and each opens once at most.

struct Sealed {
    /// Per suite: sealed datagram -> plaintext.
    genuine: [HashMap<Vec<u8>, Vec<u8>>; 2],
    /// Per suite: the sealed datagrams in the order made.
    order: [Vec<Vec<u8>>; 2],
    /// Per suite: how many of `order` were sealed under the first keys.
    first_epoch: [usize; 2],
    keys: [(SessionKeys, SessionKeys); 2],
}

fn suite_keys(suite: CipherSuite, epoch: u8) -> (SessionKeys, SessionKeys) {
    // Keys a handshake would derive; the channel only needs them to be the two ends' mirror image.
    let a = [epoch.wrapping_mul(31) ^ 0x5a; 32];
    let b = [epoch.wrapping_mul(17) ^ 0xa5; 32];
    (SessionKeys { suite, send: a, recv: b }, SessionKeys { suite, send: b, recv: a })
}

const CHANNEL_SESSION: u32 = 0xabcd;

fn sealed() -> &'static Sealed {
    static S: OnceLock<Sealed> = OnceLock::new();
    S.get_or_init(|| {
        let suites = [CipherSuite::ChaCha20Poly1305, CipherSuite::Aes256Gcm];
        let mut s = Sealed {
            genuine: [HashMap::new(), HashMap::new()],
            order: [Vec::new(), Vec::new()],
            first_epoch: [0; 2],
            keys: [suite_keys(suites[0], 1), suite_keys(suites[1], 1)],
        };
        for (i, suite) in suites.into_iter().enumerate() {
            let (client_keys, _) = suite_keys(suite, 1);
            let (client_next, _) = suite_keys(suite, 2);
            let mut c = SecureChannel::new(&client_keys, T0);
            let plan: &[(u8, u32)] =
                &[(0, 1), (0, 2), (1, 7), (0, 3), (2, 0xff_fffe), (2, 0xff_ffff), (2, 0), (2, 1), (0, 2), (1, 8)];
            for (j, &(link, seq)) in plan.iter().chain(plan).enumerate() {
                if j == plan.len() {
                    s.first_epoch[i] = s.order[i].len();
                    c.rekey(&client_next, T0, true);
                }
                let payload: Vec<u8> = (0..(j * 37) % 200).map(|x| (x ^ j) as u8).collect();
                let mut buf = vec![0u8; 64 + payload.len()];
                let h = Header {
                    ptype: PacketType::Data,
                    flags: 0,
                    session: CHANNEL_SESSION,
                    link: LinkId(link),
                    link_seq: seq,
                    timestamp: j as u32,
                };
                h.emit(&mut buf).expect("fits");
                let n = HEADER_LEN
                    + DataRepr { seq, ack: None, payload: &payload }.emit(&mut buf[HEADER_LEN..]).expect("fits");
                let plain = buf[..n].to_vec();
                let m = c.seal(T0, &mut buf, n).expect("fits");
                assert_eq!(m, n + TAG_LEN);
                buf.truncate(m);
                s.genuine[i].insert(buf.clone(), plain);
                s.order[i].push(buf);
            }
        }
        s
    })
}

fn run_channel(input: &[u8]) -> Verdict {
    let s = sealed();
    let mut ops = Ops::new(input);
    let i = usize::from(ops.u8() & 1);
    let suite = s.keys[i].0.suite;
    let mut ch = SecureChannel::new(&s.keys[i].1, T0);
    let mut now = T0;
    let mut opened: HashSet<&[u8]> = HashSet::new();
    let mut out = Vec::new();
    let mut accepted = false;
    while !ops.done() {
        let tag = ops.u8();
        match tag & 3 {
            1 => ch.rekey(&suite_keys(suite, 2).1, now, false),
            2 => {
                let ms = u64::from(ops.u16()) * if (tag >> 2) & 1 == 1 { 1000 } else { 1 };
                now += Duration::from_millis(ms);
            }
            _ => {
                let d = ops.chunk();
                if ch.open(now, d, &mut out).is_ok() {
                    let Some((sealed, plain)) = s.genuine[i].get_key_value(d) else {
                        panic!("a datagram nobody sealed opened: {d:02x?}");
                    };
                    assert_eq!(&out, plain, "opened to another plaintext than was sealed");
                    assert!(opened.insert(sealed), "a genuine datagram opened twice: {d:02x?}");
                    accepted = true;
                } else {
                    assert!(out.is_empty(), "a refused datagram left plaintext behind");
                }
            }
        }
    }
    Verdict::from_ok(accepted)
}

fn channel_seeds() -> Vec<Vec<u8>> {
    let s = sealed();
    let mut out = Vec::new();
    for i in 0..2u8 {
        let order = &s.order[usize::from(i)];
        let first = s.first_epoch[usize::from(i)];
        // In order, then everything again (replays), with the rekey in the middle.
        let mut w = OpsWriter::default();
        w.u8(i);
        for (j, d) in order.iter().enumerate() {
            if j == first {
                w.u8(1);
            }
            w.u8(0).chunk(d);
        }
        for d in order {
            w.u8(0).chunk(d);
        }
        out.push(w.0);
        // Reversed, with time passing beyond the grace period after the rekey.
        let mut w = OpsWriter::default();
        w.u8(i).u8(1);
        for d in order.iter().rev() {
            w.u8(0).chunk(d);
            w.u8(2).u16(100);
        }
        w.u8(2 | 4).u16(40);
        for d in &order[..first] {
            w.u8(0).chunk(d);
        }
        out.push(w.0);
        // Only the first epoch, one copy each.
        let mut w = OpsWriter::default();
        w.u8(i);
        for d in &order[..first] {
            w.u8(0).chunk(d);
        }
        out.push(w.0);
    }
    out
}

// ---------------------------------------------------------------------------------------------
// crypto-replay
//
// Input: a program of counters, each a tag then operands; the low two bits of the tag pick how
// the counter is made: `0`: highest + 16-bit step; `1`: highest - 16-bit distance; `2`: a whole
// 64-bit counter; `3`: highest - REPLAY_WINDOW + 8-bit offset. Bit 2 of the tag: only check,
// else check and (if fresh) update. The window must agree with a set of everything recorded.

fn run_replay(input: &[u8]) -> Verdict {
    let mut ops = Ops::new(input);
    let mut w = ReplayWindow::new();
    let mut seen: BTreeSet<u64> = BTreeSet::new();
    let mut highest = 0u64;
    let mut accepted = false;
    while !ops.done() {
        let tag = ops.u8();
        let c = match tag & 3 {
            0 => highest.saturating_add(u64::from(ops.u16())),
            1 => highest.saturating_sub(u64::from(ops.u16())),
            2 => u64::from_be_bytes(std::array::from_fn(|_| ops.u8())),
            _ => highest.saturating_sub(REPLAY_WINDOW).saturating_add(u64::from(ops.u8())),
        };
        let expected = if c > highest {
            Ok(())
        } else if highest - c >= REPLAY_WINDOW {
            Err(ReplayError::TooOld)
        } else if seen.contains(&c) {
            Err(ReplayError::Duplicate)
        } else {
            Ok(())
        };
        assert_eq!(w.check(c), expected, "counter {c}, highest {highest}");
        if expected.is_ok() && (tag >> 2) & 1 == 0 {
            w.update(c);
            seen.insert(c);
            highest = highest.max(c);
            // Keep the reference small: what is below the window can never be fresh again.
            let floor = highest.saturating_sub(REPLAY_WINDOW);
            seen = seen.split_off(&floor);
            accepted = true;
        }
        assert_eq!(w.highest(), highest);
    }
    Verdict::from_ok(accepted)
}

fn replay_seeds() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    // Steady, reordered, duplicated.
    let mut w = OpsWriter::default();
    for _ in 0..50 {
        w.u8(0).u16(1).u8(1).u16(3).u8(4).u16(0);
    }
    out.push(w.0);
    // Jumps across the ring, the window's edge, and the top of the counter space.
    let mut w = OpsWriter::default();
    w.u8(0).u16(5000).u8(3).u8(0).u8(3).u8(1).u8(0).u16(60_000).u8(1).u16(4031).u8(1).u16(4032);
    w.u8(2);
    w.0.extend_from_slice(&(u64::MAX - 10).to_be_bytes());
    w.u8(1).u16(5).u8(0).u16(7).u8(1).u16(2);
    out.push(w.0);
    let mut w = OpsWriter::default();
    w.u8(2);
    w.0.extend_from_slice(&(1u64 << 40).to_be_bytes());
    w.u8(1).u16(64).u8(1).u16(4095).u8(0).u16(4096).u8(3).u8(200);
    out.push(w.0);
    out
}
