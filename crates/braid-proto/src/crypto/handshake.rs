//! The Noise `IKpsk2` handshake (Noise spec rev. 34, 7.5 and 9.4), as WireGuard 5.4 does it, over
//! the `snow` crate.
//!
//! ```text
//! initiation (client -> server), 152 bytes:
//!   clear header (type Handshake, flags 0, session 0, seq = tag) | noise msg 1 (e, es, s, ss) | mac1 | mac2
//!   msg 1 payload (encrypted): cipher suite u8, session wanted u32 (0 = new), timestamp u64
//! response (server -> client), 95 bytes:
//!   clear header (flags 1, session = the session id, seq = tag) | noise msg 2 (e, ee, se, psk) | mac1 | mac2
//!   msg 2 payload (encrypted): u32 = continued flag (bit 24) | session id (bits 0-23)
//! cookie reply (server -> client), 55 bytes: header (flags 2, seq = tag) | nonce | sealed cookie
//! unknown-session hint (server -> client), 11 bytes: header (flags 3, session = the unknown id)
//! ```
//!
//! The tag is a 24-bit number the client picks per initiation, in the header's per-link sequence
//! field (handshakes have no other use for it); the server's answers echo it, so the client knows
//! which of its pending initiations ([`MAX_PENDING`]) a response or cookie reply answers, as
//! WireGuard's sender index does. mac1 covers it; a forged tag only points a response at another
//! initiation, whose Noise state then refuses it.
//!
//! The client names in its initiation the session it wants to continue (a rekey) or 0; the server
//! continues it when that session exists and belongs to the same static key, and otherwise opens a
//! new one and names its id in the response, so the session id, like the keys, comes out of an
//! authenticated exchange. The timestamp (nanoseconds of wall-clock time, WireGuard's TAI64N,
//! 5.1) normally grows from one accepted initiation of a peer to the next, so a recorded
//! initiation cannot be replayed to reset a session; the [`Responder`] reports a stale one
//! instead of refusing it, and the server answers it only where that cannot hurt (see
//! [`PendingResponse::fresh`]). `mac1`/`mac2` are in [`super::cookie`].
//!
//! snow needs randomness for the ephemeral keys; it gets a ChaCha20 stream seeded from the
//! [`Initiator`]'s or [`Responder`]'s own seeded generator, never from the OS (docs/design.md 2).

use super::aead::CipherSuite;
use super::channel::SessionKeys;
use super::cookie::{self, COOKIE_REPLY_BODY_LEN, CookieChecker, CookieJar, MAC_LEN, RateLimiter};
use super::{KEY_LEN, PublicKey, Reject, StaticSecret, TAG_LEN};
use crate::Instant;
use crate::link::LinkId;
use crate::wire::{HEADER_LEN, Header, PacketType, WireError};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use snow::resolvers::{CryptoResolver, DefaultResolver};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

/// The Noise protocol name: the same choices as WireGuard.
pub const NOISE_PARAMS: &str = "Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s";
/// Bound into the handshake hash, so a braid handshake cannot be mistaken for another protocol's.
const PROLOGUE: &[u8] = b"braid v1 IKpsk2";

const PAYLOAD1_LEN: usize = 1 + 4 + 8;
const NOISE1_LEN: usize = KEY_LEN + (KEY_LEN + TAG_LEN) + (PAYLOAD1_LEN + TAG_LEN);
const PAYLOAD2_LEN: usize = 4;
const NOISE2_LEN: usize = KEY_LEN + (PAYLOAD2_LEN + TAG_LEN);
/// Bytes of an initiation datagram.
pub const INITIATION_LEN: usize = HEADER_LEN + NOISE1_LEN + 2 * MAC_LEN;
/// Bytes of a response datagram.
pub const RESPONSE_LEN: usize = HEADER_LEN + NOISE2_LEN + 2 * MAC_LEN;
/// Bytes of a cookie reply datagram.
pub const COOKIE_REPLY_LEN: usize = HEADER_LEN + COOKIE_REPLY_BODY_LEN;
/// Bytes of an unknown-session hint.
pub const HINT_LEN: usize = HEADER_LEN;

/// Initiations per second above which the server considers itself under load and asks for
/// cookies.
pub const DEFAULT_LOAD_THRESHOLD: u32 = 64;
/// Most source addresses the per-source rate limiter tracks.
pub const RATE_LIMITER_ENTRIES: usize = 4096;

/// Which handshake message a [`PacketType::Handshake`] datagram carries (its header flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandshakeKind {
    /// Noise message 1, client to server.
    Initiation,
    /// Noise message 2, server to client.
    Response,
    /// An encrypted cookie for `mac2`, server to client.
    CookieReply,
    /// "I have no session with this id", server to client, unauthenticated: the client starts a
    /// handshake (which is all a forged hint can make it do).
    UnknownSession,
}

impl HandshakeKind {
    /// The kind from the header flags, checking the body's length.
    pub fn parse(flags: u8, body: &[u8]) -> Result<Self, WireError> {
        let (kind, len) = match flags {
            0 => (HandshakeKind::Initiation, INITIATION_LEN),
            1 => (HandshakeKind::Response, RESPONSE_LEN),
            2 => (HandshakeKind::CookieReply, COOKIE_REPLY_LEN),
            _ => (HandshakeKind::UnknownSession, HINT_LEN),
        };
        if body.len() + HEADER_LEN != len {
            return Err(WireError::Invalid { field: "handshake", why: "wrong length for its kind" });
        }
        Ok(kind)
    }

    fn flags(self) -> u8 {
        match self {
            HandshakeKind::Initiation => 0,
            HandshakeKind::Response => 1,
            HandshakeKind::CookieReply => 2,
            HandshakeKind::UnknownSession => 3,
        }
    }

    /// Parses a whole datagram's header and kind.
    pub fn of(datagram: &[u8]) -> Result<(Header, Self), WireError> {
        let (h, body) = Header::parse(datagram)?;
        if h.ptype != PacketType::Handshake {
            return Err(WireError::Invalid { field: "packet type", why: "not a handshake" });
        }
        Ok((h, Self::parse(h.flags, body)?))
    }
}

/// Why a handshake message could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandshakeError {
    /// The output buffer is too small.
    #[error("buffer too small: need {0} bytes")]
    BufferTooSmall(usize),
    /// snow refused (a bug or a bad key, never network input).
    #[error("noise: {0}")]
    Noise(String),
}

impl From<snow::Error> for HandshakeError {
    fn from(e: snow::Error) -> Self {
        HandshakeError::Noise(e.to_string())
    }
}

/// Writes a handshake header; `tag` goes in the per-link sequence field, unused otherwise by
/// handshakes: the initiation's tag, which the server's answers echo.
fn header(kind: HandshakeKind, session: u32, link: LinkId, tag: u32, now: Instant, out: &mut [u8]) {
    let h = Header {
        ptype: PacketType::Handshake,
        flags: kind.flags(),
        session: session & Header::MAX_SESSION,
        link,
        link_seq: tag & TAG_MASK,
        timestamp: now.wire_timestamp(),
    };
    // Callers check that `out` holds the whole message, so the header fits.
    let _ = h.emit(out);
}

/// Bits of an initiation's tag (the header's 24-bit per-link sequence field).
const TAG_MASK: u32 = 0x00ff_ffff;

/// X25519 through snow's default implementation, refusing an all-zero result. A peer's static or
/// ephemeral key of small order makes the shared secret zero, known to everybody; Noise leaves the
/// check to the implementation (spec rev. 34, 12.1 allows it), WireGuard makes it in
/// `curve25519()` (5.4.2: "returns zero if the result is the identity"), and so does braid: the
/// handshake fails instead of deriving keys from a public value.
struct CheckedDh(Box<dyn snow::types::Dh>);

impl snow::types::Dh for CheckedDh {
    fn name(&self) -> &'static str {
        self.0.name()
    }
    fn pub_len(&self) -> usize {
        self.0.pub_len()
    }
    fn priv_len(&self) -> usize {
        self.0.priv_len()
    }
    fn set(&mut self, privkey: &[u8]) {
        self.0.set(privkey)
    }
    fn generate(&mut self, rng: &mut dyn snow::types::Random) -> Result<(), snow::Error> {
        self.0.generate(rng)
    }
    fn pubkey(&self) -> &[u8] {
        self.0.pubkey()
    }
    fn privkey(&self) -> &[u8] {
        self.0.privkey()
    }
    fn dh(&self, pubkey: &[u8], out: &mut [u8]) -> Result<(), snow::Error> {
        self.0.dh(pubkey, out)?;
        let n = self.0.dh_len().min(out.len());
        // Constant time: the result is secret when it is not zero.
        if out[..n].iter().fold(0u8, |acc, b| acc | b) == 0 {
            return Err(snow::Error::Dh);
        }
        Ok(())
    }
    fn dh_len(&self) -> usize {
        self.0.dh_len()
    }
}

/// snow's default primitives with a seeded random stream instead of the OS's.
struct SeededResolver {
    seed: [u8; 32],
}

struct SeededRng(ChaCha20Rng);

impl snow::types::Random for SeededRng {
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), snow::Error> {
        self.0.fill_bytes(dest);
        Ok(())
    }
}

impl CryptoResolver for SeededResolver {
    fn resolve_rng(&self) -> Option<Box<dyn snow::types::Random>> {
        Some(Box::new(SeededRng(ChaCha20Rng::from_seed(self.seed))))
    }
    fn resolve_dh(&self, choice: &snow::params::DHChoice) -> Option<Box<dyn snow::types::Dh>> {
        DefaultResolver.resolve_dh(choice).map(|d| Box::new(CheckedDh(d)) as Box<dyn snow::types::Dh>)
    }
    fn resolve_hash(&self, choice: &snow::params::HashChoice) -> Option<Box<dyn snow::types::Hash>> {
        DefaultResolver.resolve_hash(choice)
    }
    fn resolve_cipher(&self, choice: &snow::params::CipherChoice) -> Option<Box<dyn snow::types::Cipher>> {
        DefaultResolver.resolve_cipher(choice)
    }
}

fn builder(rng: &mut ChaCha20Rng) -> snow::Builder<'static> {
    let mut seed = [0u8; 32];
    rng.fill_bytes(&mut seed);
    // NOISE_PARAMS is a valid constant name; parsing it cannot fail.
    let params = NOISE_PARAMS.parse().expect("valid Noise parameters");
    snow::Builder::with_resolver(params, Box::new(SeededResolver { seed }))
}

/// The keys and session id of a finished handshake, client side.
#[derive(Debug, Clone)]
pub struct Established {
    /// The session id the server named.
    pub session: u32,
    /// Whether it is the session the client asked to continue (a rekey) rather than a new one.
    pub continued: bool,
    /// The transport keys.
    pub keys: SessionKeys,
}

/// What a handshake datagram did to an [`Initiator`].
#[derive(Debug, Clone)]
pub enum InitiatorEvent {
    /// The handshake finished.
    Established(Established),
    /// A cookie was stored for the uplink `link` (the one the answered initiation went on): the
    /// server is under load and the next initiation on that uplink carries `mac2`. The client
    /// may retry on that uplink at once (once per initiation: [`Initiator::handle`] reports a
    /// second cookie for the same initiation as an error).
    CookieStored {
        /// The uplink whose cookie it is.
        link: LinkId,
    },
    /// The server says it has no session with this id.
    UnknownSession(u32),
}

/// Most initiations awaiting their response at once. A retry does not forget the initiations
/// before it, so a response that comes back after the next retry left (a round trip longer than
/// the retry interval: bufferbloated cellular, satellite) still completes the handshake; the
/// response names which initiation it answers by the tag echoed in its header.
pub const MAX_PENDING: usize = 4;

struct PendingInitiation {
    hs: Box<snow::HandshakeState>,
    mac1: [u8; MAC_LEN],
    wanted: u32,
    /// Echoed in the header of the server's answers: which initiation they answer.
    tag: u32,
    /// The uplink it went on: a cookie reply to it is that uplink's cookie.
    link: LinkId,
    /// A cookie reply to it was taken already.
    cookie_taken: bool,
}

/// The client's side of the handshake.
pub struct Initiator {
    secret: StaticSecret,
    server: PublicKey,
    psk: [u8; KEY_LEN],
    suite: CipherSuite,
    server_mac1: [u8; KEY_LEN],
    own_mac1: [u8; KEY_LEN],
    /// One cookie per uplink: the server binds a cookie to the source address it sees, which
    /// differs per uplink (WireGuard has one source address and one cookie per peer).
    jars: HashMap<LinkId, CookieJar>,
    rng: ChaCha20Rng,
    /// Oldest first, at most [`MAX_PENDING`].
    pending: Vec<PendingInitiation>,
    last_timestamp: u64,
    next_tag: u32,
}

impl Initiator {
    /// A client with its static key, the server's public key, the optional pre-shared key (all
    /// zeros without one, as WireGuard), the AEAD it asks for and a secret random seed.
    pub fn new(
        secret: StaticSecret,
        server: PublicKey,
        psk: Option<[u8; KEY_LEN]>,
        suite: CipherSuite,
        seed: [u8; 32],
    ) -> Self {
        let own = secret.public_key();
        let mut rng = ChaCha20Rng::from_seed(seed);
        // Random start: answers meant for a previous run of this client match nothing.
        let next_tag = rng.next_u32() & TAG_MASK;
        Initiator {
            secret,
            server,
            psk: psk.unwrap_or_default(),
            suite,
            server_mac1: cookie::mac1_key(&server),
            own_mac1: cookie::mac1_key(&own),
            jars: HashMap::new(),
            rng,
            pending: Vec::new(),
            last_timestamp: 0,
            next_tag,
        }
    }

    /// Whether an initiation awaits its response.
    pub fn is_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Forgets every pending initiation (e.g. when a new session was set up by other means).
    pub fn clear_pending(&mut self) {
        self.pending.clear();
    }

    /// The last timestamp sent (nanoseconds): a client without a real-time clock may store it and
    /// pass it to [`Initiator::set_last_timestamp`] after a restart.
    pub fn last_timestamp(&self) -> u64 {
        self.last_timestamp
    }

    /// Timestamps of later initiations are above `ts` whatever the wall clock says.
    pub fn set_last_timestamp(&mut self, ts: u64) {
        self.last_timestamp = self.last_timestamp.max(ts);
    }

    /// Writes an initiation into `out` and returns its length ([`INITIATION_LEN`]). `wanted` is
    /// the session to continue (0: a new one); `wall_ns` is wall-clock time in nanoseconds (made
    /// strictly increasing here); `link` the uplink it goes on (its cookie is used). Earlier
    /// initiations stay pending, up to [`MAX_PENDING`] (the oldest is forgotten beyond).
    pub fn initiate(
        &mut self,
        now: Instant,
        wall_ns: u64,
        wanted: u32,
        link: LinkId,
        out: &mut [u8],
    ) -> Result<usize, HandshakeError> {
        if out.len() < INITIATION_LEN {
            return Err(HandshakeError::BufferTooSmall(INITIATION_LEN));
        }
        let ts = wall_ns.max(self.last_timestamp + 1);
        self.last_timestamp = ts;
        let mut hs = builder(&mut self.rng)
            .local_private_key(&self.secret.0)?
            .remote_public_key(&self.server.0)?
            .prologue(PROLOGUE)?
            .psk(2, &self.psk)?
            .build_initiator()?;
        let mut payload = [0u8; PAYLOAD1_LEN];
        payload[0] = self.suite.code();
        payload[1..5].copy_from_slice(&wanted.to_be_bytes());
        payload[5..13].copy_from_slice(&ts.to_be_bytes());
        let tag = self.next_tag;
        self.next_tag = (self.next_tag + 1) & TAG_MASK;
        // The session it continues, in the clear too (it is on every datagram of that session
        // anyway): a load balancer in front of several servers routes a rekey or a rejoin by it
        // to the server that holds the session; 0 (a new session) may go to any.
        header(HandshakeKind::Initiation, wanted, link, tag, now, out);
        let n = hs.write_message(&payload, &mut out[HEADER_LEN..HEADER_LEN + NOISE1_LEN])?;
        debug_assert_eq!(n, NOISE1_LEN);
        let m1 = HEADER_LEN + NOISE1_LEN;
        let mac1 = cookie::mac(&self.server_mac1, &out[..m1]);
        out[m1..m1 + MAC_LEN].copy_from_slice(&mac1);
        let mac2 = self.jars.get(&link).map_or([0; MAC_LEN], |j| j.mac2(now, &out[..m1 + MAC_LEN]));
        out[m1 + MAC_LEN..INITIATION_LEN].copy_from_slice(&mac2);
        if self.pending.len() >= MAX_PENDING {
            self.pending.remove(0);
        }
        self.pending.push(PendingInitiation { hs: Box::new(hs), mac1, wanted, tag, link, cookie_taken: false });
        Ok(INITIATION_LEN)
    }

    /// Takes a handshake datagram from the server: a response, a cookie reply or a hint.
    pub fn handle(&mut self, now: Instant, datagram: &[u8]) -> Result<InitiatorEvent, Reject> {
        let (h, kind) = HandshakeKind::of(datagram).map_err(|_| Reject::Malformed)?;
        match kind {
            HandshakeKind::Initiation => Err(Reject::Malformed),
            HandshakeKind::UnknownSession => Ok(InitiatorEvent::UnknownSession(h.session)),
            HandshakeKind::CookieReply => {
                let p = self.pending.iter_mut().find(|p| p.tag == h.link_seq).ok_or(Reject::Replay)?;
                if p.cookie_taken {
                    return Err(Reject::Replay);
                }
                let jar = self.jars.entry(p.link).or_insert_with(|| CookieJar::new(&self.server));
                if jar.handle_reply(now, &p.mac1, &datagram[HEADER_LEN..]) {
                    p.cookie_taken = true;
                    Ok(InitiatorEvent::CookieStored { link: p.link })
                } else {
                    Err(Reject::BadMac)
                }
            }
            HandshakeKind::Response => {
                let m1 = HEADER_LEN + NOISE2_LEN;
                if !cookie::mac1_ok(&self.own_mac1, &datagram[..m1], &datagram[m1..m1 + MAC_LEN]) {
                    return Err(Reject::BadMac);
                }
                // The initiation it answers; one not (or no longer) pending: a duplicate or stale.
                let Some(i) = self.pending.iter().position(|p| p.tag == h.link_seq) else { return Err(Reject::Replay) };
                // snow cannot roll back a failed read, so a response that passes mac1 (which
                // needs the client's public key) but not Noise ends that initiation only; the
                // others stay pending and the client retries on its timer.
                let mut p = self.pending.remove(i);
                let mut payload = [0u8; 64];
                let n = p.hs.read_message(&datagram[HEADER_LEN..m1], &mut payload).map_err(|_| Reject::BadMac)?;
                if n != PAYLOAD2_LEN {
                    return Err(Reject::Malformed);
                }
                let word = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]);
                let session = word & Header::MAX_SESSION;
                if session == 0 || word >> 25 != 0 || session != h.session {
                    return Err(Reject::Malformed);
                }
                // Older initiations are answered by this one (the server takes initiations in
                // timestamp order and refuses older ones after a newer); newer ones stay
                // pending: if their response comes, the server has moved to it, and so will
                // the client.
                self.pending.drain(..i);
                let (send, recv) = p.hs.dangerously_get_raw_split();
                let continued = word >> 24 == 1 && p.wanted == session;
                Ok(InitiatorEvent::Established(Established {
                    session,
                    continued,
                    keys: SessionKeys { suite: self.suite, send, recv },
                }))
            }
        }
    }
}

/// [`Responder::add_peer`] was given a key another vehicle has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the same public key as another peer")]
pub struct DuplicateKey;

/// A vehicle the server accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerConfig {
    /// Its name in status and logs.
    pub name: String,
    /// Its static public key.
    pub public: PublicKey,
    /// Its pre-shared key, if any.
    pub psk: Option<[u8; KEY_LEN]>,
}

/// An initiation that authenticated: the server decides the session id, then calls
/// [`Responder::respond`].
pub struct PendingResponse {
    hs: Box<snow::HandshakeState>,
    /// Index of the peer in the responder's list.
    pub peer: usize,
    /// The session the client asks to continue (0: a new one).
    pub wanted: u32,
    /// The AEAD the client asked for.
    pub suite: CipherSuite,
    /// The link the initiation came on (the response goes back on it).
    pub link: LinkId,
    /// The initiation's tag, echoed in the response.
    tag: u32,
    /// The initiation's timestamp.
    pub timestamp: u64,
    /// The peer's static key (its timestamps are remembered by key, across removals).
    public: PublicKey,
    /// Whether the timestamp is newer than any accepted from this peer before. A stale one is
    /// a replay, or a client whose clock went back (a gateway without a real-time clock after a
    /// reboot); the server decides ([`Responder::accept_stale`]): the static key has proved
    /// itself (Noise decrypted under `ss`), but a replay proves that too.
    pub fresh: bool,
}

/// What [`Responder::handle_initiation`] did with an initiation it did not reject.
pub enum InitiationOutcome {
    /// It authenticated: answer with [`Responder::respond`].
    Accepted(PendingResponse),
    /// The server is under load and the initiation had no valid `mac2`: a cookie reply of this
    /// many bytes is in the output buffer (send it; the initiation itself counts as rate limited).
    /// Every such initiation with a valid `mac1` gets one, as in WireGuard: a reply is smaller
    /// than its trigger and costs no Diffie-Hellman, and limiting replies by source address is
    /// what let spoofed sources lock genuine ones out. Only initiations with a valid `mac2` (whose
    /// sender receives at its address) go through the per-source rate limit.
    CookieReply(usize),
}

/// What a [`Gate`] made of an initiation it did not reject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Screened {
    /// It may cost a Diffie-Hellman: hand it to [`Responder::handle_screened`].
    Pass,
    /// Under load without a valid `mac2`: a cookie reply of this many bytes is in the output
    /// buffer ([`InitiationOutcome::CookieReply`] says why every such initiation gets one).
    CookieReply(usize),
}

/// The checks an initiation passes before any Diffie-Hellman (WireGuard 5.3): its length,
/// `mac1` (one keyed hash, so only senders who know the server's public key get further), then
/// under load `mac2` (a cookie proving the sender receives at its address) or a cookie reply,
/// and the per-source rate limit. All of it costs a few hashes and at most one small AEAD seal,
/// so a server runs it where initiations arrive, at the ordinary priority, and only what passes
/// queues for the Diffie-Hellman: a flood of forged initiations is answered there with cookie
/// replies and never waits ahead of a vehicle's retry with its cookie. [`Responder`] holds one
/// for [`Responder::handle_initiation`], which does both parts in turn.
pub struct Gate {
    mac1_key: [u8; KEY_LEN],
    checker: CookieChecker,
    limiter: RateLimiter,
    rng: ChaCha20Rng,
    load_threshold: u32,
    window_start: Instant,
    window_count: u32,
    previous_count: u32,
}

impl Gate {
    /// A gate for the server whose public key is `public`, with a secret random seed (for the
    /// cookie secret and the cookie replies' nonces).
    pub fn new(public: &PublicKey, seed: [u8; 32]) -> Self {
        Gate {
            mac1_key: cookie::mac1_key(public),
            checker: CookieChecker::new(public),
            limiter: RateLimiter::new(RATE_LIMITER_ENTRIES),
            rng: ChaCha20Rng::from_seed(seed),
            load_threshold: DEFAULT_LOAD_THRESHOLD,
            window_start: Instant::from_micros(0),
            window_count: 0,
            previous_count: 0,
        }
    }

    /// Sets the initiations per second above which cookies are required (0: always).
    pub fn set_load_threshold(&mut self, per_second: u32) {
        self.load_threshold = per_second;
    }

    /// Buckets of the rate limiter ([`RATE_LIMITER_ENTRIES`], fixed).
    pub fn rate_limiter_len(&self) -> usize {
        self.limiter.len()
    }

    /// Counts an initiation in one-second windows; under load when this or the last window went
    /// over the threshold (WireGuard decides on its handshake queue's length, 5.3).
    fn under_load(&mut self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.window_start);
        if elapsed >= Duration::from_secs(1) {
            self.previous_count = if elapsed >= Duration::from_secs(2) { 0 } else { self.window_count };
            self.window_count = 0;
            self.window_start = now;
        }
        self.window_count = self.window_count.saturating_add(1);
        self.window_count > self.load_threshold || self.previous_count > self.load_threshold
    }

    /// Screens an initiation from `from` (the type's docs). `out` receives a cookie reply when
    /// one is due (at least [`COOKIE_REPLY_LEN`] bytes; a shorter `out` rejects the initiation
    /// as rate limited instead).
    pub fn screen(
        &mut self,
        now: Instant,
        from: SocketAddr,
        datagram: &[u8],
        out: &mut [u8],
    ) -> Result<Screened, Reject> {
        let (h, kind) = HandshakeKind::of(datagram).map_err(|_| Reject::Malformed)?;
        if kind != HandshakeKind::Initiation {
            return Err(Reject::Malformed);
        }
        let m1 = HEADER_LEN + NOISE1_LEN;
        let (mac1, mac2) = (&datagram[m1..m1 + MAC_LEN], &datagram[m1 + MAC_LEN..INITIATION_LEN]);
        if !cookie::mac1_ok(&self.mac1_key, &datagram[..m1], mac1) {
            return Err(Reject::BadMac);
        }
        if self.under_load(now) {
            let rng = &mut self.rng;
            let mut fresh = || {
                let mut s = [0u8; KEY_LEN];
                rng.fill_bytes(&mut s);
                s
            };
            if !self.checker.mac2_ok(now, from, &datagram[..m1 + MAC_LEN], mac2, &mut fresh) {
                if out.len() < COOKIE_REPLY_LEN {
                    return Err(Reject::RateLimited);
                }
                let mut nonce = [0u8; cookie::COOKIE_NONCE_LEN];
                self.rng.fill_bytes(&mut nonce);
                header(HandshakeKind::CookieReply, 0, h.link, h.link_seq, now, out);
                let body: &mut [u8; COOKIE_REPLY_BODY_LEN] =
                    (&mut out[HEADER_LEN..COOKIE_REPLY_LEN]).try_into().map_err(|_| Reject::Malformed)?;
                let rng = &mut self.rng;
                self.checker.reply(now, from, mac1, nonce, body, || {
                    let mut s = [0u8; KEY_LEN];
                    rng.fill_bytes(&mut s);
                    s
                });
                return Ok(Screened::CookieReply(COOKIE_REPLY_LEN));
            }
            if !self.limiter.allow(now, from.ip()) {
                return Err(Reject::RateLimited);
            }
        }
        Ok(Screened::Pass)
    }
}

/// The server's side of the handshake.
pub struct Responder {
    secret: StaticSecret,
    /// The accepted vehicles by index; a removed one leaves a hole (`None`), so the indices of
    /// the others, which the server's tables hold, stay valid. A new vehicle takes a hole first.
    peers: Vec<Option<PeerConfig>>,
    by_key: HashMap<PublicKey, usize>,
    /// The newest initiation timestamp accepted, by key. Kept when a vehicle is removed, so a
    /// vehicle removed and added again (a changed pre-shared key) is not open to replays of its
    /// old initiations; one entry per key ever listed.
    last_timestamp: HashMap<PublicKey, u64>,
    peer_mac1: Vec<[u8; KEY_LEN]>,
    /// The cheap checks before Diffie-Hellman, for [`Responder::handle_initiation`].
    gate: Gate,
    rng: ChaCha20Rng,
}

impl Responder {
    /// A server with its static key, the vehicles it accepts and a secret random seed.
    pub fn new(secret: StaticSecret, peers: Vec<PeerConfig>, seed: [u8; 32]) -> Self {
        let public = secret.public_key();
        let by_key = peers.iter().enumerate().map(|(i, p)| (p.public, i)).collect();
        let mut rng = ChaCha20Rng::from_seed(seed);
        let mut gate_seed = [0u8; 32];
        rng.fill_bytes(&mut gate_seed);
        Responder {
            peer_mac1: peers.iter().map(|p| cookie::mac1_key(&p.public)).collect(),
            last_timestamp: HashMap::new(),
            by_key,
            peers: peers.into_iter().map(Some).collect(),
            gate: Gate::new(&public, gate_seed),
            secret,
            rng,
        }
    }

    /// The server's public key, which a [`Gate`] for it is made from.
    pub fn public_key(&self) -> PublicKey {
        self.secret.public_key()
    }

    /// Sets the initiations per second above which [`Responder::handle_initiation`] requires
    /// cookies (0: always).
    pub fn set_load_threshold(&mut self, per_second: u32) {
        self.gate.set_load_threshold(per_second);
    }

    /// The accepted vehicle at index `i` (`None`: never used, or removed).
    pub fn peer(&self, i: usize) -> Option<&PeerConfig> {
        self.peers.get(i).and_then(Option::as_ref)
    }

    /// The accepted vehicles with their indices.
    pub fn peers(&self) -> impl Iterator<Item = (usize, &PeerConfig)> {
        self.peers.iter().enumerate().filter_map(|(i, p)| p.as_ref().map(|p| (i, p)))
    }

    /// Room for peer indices: every index a peer has is below this.
    pub fn peer_slots(&self) -> usize {
        self.peers.len()
    }

    /// Accepts a new vehicle while running and returns its index (a removed vehicle's, if one
    /// is free, else the next). A key already listed is refused: a key names one vehicle.
    pub fn add_peer(&mut self, p: PeerConfig) -> Result<usize, DuplicateKey> {
        if self.by_key.contains_key(&p.public) {
            return Err(DuplicateKey);
        }
        let mac1 = cookie::mac1_key(&p.public);
        let public = p.public;
        let i = match self.peers.iter().position(Option::is_none) {
            Some(i) => {
                self.peers[i] = Some(p);
                self.peer_mac1[i] = mac1;
                i
            }
            None => {
                self.peers.push(Some(p));
                self.peer_mac1.push(mac1);
                self.peers.len() - 1
            }
        };
        self.by_key.insert(public, i);
        Ok(i)
    }

    /// Stops accepting the vehicle at index `i`: its initiations are refused from now on
    /// ([`Reject::UnknownKey`]). The other vehicles' indices do not change.
    pub fn remove_peer(&mut self, i: usize) -> Option<PeerConfig> {
        let p = self.peers.get_mut(i)?.take()?;
        self.by_key.remove(&p.public);
        Some(p)
    }

    /// Buckets of [`Responder::handle_initiation`]'s rate limiter ([`RATE_LIMITER_ENTRIES`],
    /// fixed).
    pub fn rate_limiter_len(&self) -> usize {
        self.gate.rate_limiter_len()
    }

    /// Accepts a stale initiation ([`PendingResponse::fresh`] false) that the server decided to
    /// answer as a new session: later initiations of the peer need only be newer than this one,
    /// so a client whose clock went back is not locked out until it catches up.
    pub fn accept_stale(&mut self, p: &PendingResponse) {
        self.last_timestamp.insert(p.public, p.timestamp);
    }

    /// Takes an initiation from `from`. Cheap checks first ([`Gate::screen`]: length, `mac1`,
    /// then under load `mac2` or a cookie reply, and the per-source rate limit); only then
    /// Diffie-Hellman ([`Responder::handle_screened`]). `out` receives a cookie reply when one is
    /// due (at least [`COOKIE_REPLY_LEN`] bytes).
    pub fn handle_initiation(
        &mut self,
        now: Instant,
        from: SocketAddr,
        datagram: &[u8],
        out: &mut [u8],
    ) -> Result<InitiationOutcome, Reject> {
        match self.gate.screen(now, from, datagram, out)? {
            Screened::CookieReply(n) => Ok(InitiationOutcome::CookieReply(n)),
            Screened::Pass => self.handle_screened(datagram).map(InitiationOutcome::Accepted),
        }
    }

    /// The Diffie-Hellman part of [`Responder::handle_initiation`], for an initiation that a
    /// [`Gate`] of this server's key passed ([`Screened::Pass`]): a server screens initiations
    /// where they arrive and leaves only this to a thread of its own. An initiation no gate
    /// passed is still authenticated here (Noise refuses a forged one), but costs the
    /// Diffie-Hellman that the gate saves under a flood.
    pub fn handle_screened(&mut self, datagram: &[u8]) -> Result<PendingResponse, Reject> {
        let (h, kind) = HandshakeKind::of(datagram).map_err(|_| Reject::Malformed)?;
        if kind != HandshakeKind::Initiation {
            return Err(Reject::Malformed);
        }
        let m1 = HEADER_LEN + NOISE1_LEN;
        let mut hs = builder(&mut self.rng)
            .local_private_key(&self.secret.0)
            .and_then(|b| b.prologue(PROLOGUE))
            .and_then(|b| b.build_responder())
            .map_err(|_| Reject::Malformed)?;
        let mut payload = [0u8; 64];
        let n = hs.read_message(&datagram[HEADER_LEN..m1], &mut payload).map_err(|_| Reject::BadMac)?;
        if n != PAYLOAD1_LEN {
            return Err(Reject::Malformed);
        }
        let remote = hs.get_remote_static().and_then(|r| <[u8; KEY_LEN]>::try_from(r).ok());
        let Some(&peer) = remote.and_then(|r| self.by_key.get(&PublicKey(r))) else {
            return Err(Reject::UnknownKey);
        };
        let suite = CipherSuite::from_code(payload[0]).ok_or(Reject::Malformed)?;
        let wanted = u32::from_be_bytes([payload[1], payload[2], payload[3], payload[4]]);
        let mut ts = [0u8; 8];
        ts.copy_from_slice(&payload[5..13]);
        let ts = u64::from_be_bytes(ts);
        let public = PublicKey(remote.unwrap_or_default());
        let last = self.last_timestamp.entry(public).or_default();
        let fresh = ts > *last;
        if fresh {
            *last = ts;
        }
        let psk = self.peer(peer).and_then(|p| p.psk).unwrap_or_default();
        hs.set_psk(2, &psk).map_err(|_| Reject::Malformed)?;
        Ok(PendingResponse {
            hs: Box::new(hs),
            peer,
            wanted,
            suite,
            link: h.link,
            tag: h.link_seq,
            timestamp: ts,
            public,
            fresh,
        })
    }

    /// Writes the response naming `session` into `out` ([`RESPONSE_LEN`] bytes) and returns the
    /// session's keys. `continued` says the server keeps the running session `p.wanted` (a
    /// rekey) rather than opening a new one, so the client knows whether to start afresh even if
    /// a new id happened to equal the old one.
    pub fn respond(
        &mut self,
        now: Instant,
        mut p: PendingResponse,
        session: u32,
        continued: bool,
        out: &mut [u8],
    ) -> Result<(usize, SessionKeys), HandshakeError> {
        if out.len() < RESPONSE_LEN {
            return Err(HandshakeError::BufferTooSmall(RESPONSE_LEN));
        }
        header(HandshakeKind::Response, session, p.link, p.tag, now, out);
        let m1 = HEADER_LEN + NOISE2_LEN;
        let word = (session & Header::MAX_SESSION) | (u32::from(continued) << 24);
        p.hs.write_message(&word.to_be_bytes(), &mut out[HEADER_LEN..m1])?;
        let mac1 = cookie::mac(&self.peer_mac1[p.peer], &out[..m1]);
        out[m1..m1 + MAC_LEN].copy_from_slice(&mac1);
        out[m1 + MAC_LEN..RESPONSE_LEN].fill(0);
        let (initiator_to_responder, responder_to_initiator) = p.hs.dangerously_get_raw_split();
        Ok((RESPONSE_LEN, SessionKeys { suite: p.suite, send: responder_to_initiator, recv: initiator_to_responder }))
    }
}

/// Writes an unknown-session hint for `session` into `out` ([`HINT_LEN`] bytes); `None` if `out`
/// is too small.
pub fn unknown_session_hint(now: Instant, session: u32, link: LinkId, out: &mut [u8]) -> Option<usize> {
    if out.len() < HINT_LEN {
        return None;
    }
    header(HandshakeKind::UnknownSession, session, link, 0, now, out);
    Some(HINT_LEN)
}
