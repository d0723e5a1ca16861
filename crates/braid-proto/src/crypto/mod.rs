//! Authenticated, encrypted sessions (issue 5), sans-IO like the rest of braid-proto: time comes in
//! as [`Instant`](crate::Instant) arguments, randomness from a seed the driver draws once from the
//! OS, wall-clock time (for replay protection of handshakes) as a number the driver passes in.
//!
//! The design follows WireGuard (J. A. Donenfeld, "WireGuard: Next Generation Kernel Network
//! Tunnel", NDSS 2017; section numbers below are the paper's):
//!
//! - **Keys** are static X25519 pairs ([`StaticSecret`], [`PublicKey`]). The server lists the
//!   vehicles' public keys; a vehicle knows the server's.
//! - **Handshake** ([`handshake`]): Noise `IKpsk2` (Noise spec rev. 34, section 7.5 and 9.4) through
//!   the `snow` crate, one round trip, optional pre-shared key, a TAI64N-like timestamp in the first
//!   message against replayed initiations (5.1), `mac1`/`mac2` and cookie replies against floods
//!   ([`cookie`], 5.3, 5.4.4, 5.4.7). The server names the session id in its response.
//! - **Transport** ([`channel`]): every datagram after the handshake is sealed with an AEAD
//!   (ChaCha20-Poly1305 or AES-256-GCM, `ring`); the 12-byte clear header is the associated data.
//!   The nonce is the link id and the sender's 64-bit per-link counter, whose low 24 bits are the
//!   header's per-link sequence number: the receiver reconstructs it (as QUIC does packet numbers),
//!   so encryption costs no header byte, only the 16-byte tag.
//! - **Anti-replay** ([`replay`]): an RFC 6479 bitmap window per link ([`REPLAY_WINDOW`] packets).
//! - **Rekeying** every [`REKEY_AFTER`]: the client starts a new handshake on the running session;
//!   the old keys stay valid for receiving for [`KEY_GRACE`] so nothing in flight is lost (5.4.6,
//!   6.1: the responder sends with new keys only once the initiator has used them). Keys older
//!   than [`REJECT_AFTER`] neither seal nor open.
//!
//! Every rejected datagram has a [`Reject`] reason for the daemon to count.

pub mod aead;
pub mod channel;
pub mod cookie;
pub mod handshake;
pub mod replay;

pub use aead::CipherSuite;
pub use channel::{OpenError, SealError, SecureChannel, SessionKeys};
pub use cookie::RateLimiter;
pub use handshake::{
    DuplicateKey, Established, Gate, HandshakeError, HandshakeKind, INITIATION_LEN, InitiationOutcome, Initiator,
    InitiatorEvent, MAX_PENDING, PeerConfig, PendingResponse, RESPONSE_LEN, Responder, Screened, unknown_session_hint,
};
pub use replay::{REPLAY_WINDOW, ReplayWindow};

use std::fmt;
use std::time::Duration;

/// Bytes of the AEAD tag on every sealed datagram.
pub const TAG_LEN: usize = 16;
/// Bytes of a symmetric key, a static secret and a public key.
pub const KEY_LEN: usize = 32;

/// Per-packet overhead of a data packet on the wire: outer IPv4 (20) + UDP (8) + braid's data
/// header + the AEAD tag. docs/design.md 3 caps it at WireGuard's 60 bytes (20 + 8 + 16 + 16).
pub const DATA_PACKET_OVERHEAD: usize = 20 + 8 + crate::wire::DATA_HEADER_LEN + TAG_LEN;
/// The same for a data packet that piggybacks a cumulative ack, the largest data packet there is.
pub const DATA_ACK_PACKET_OVERHEAD: usize = DATA_PACKET_OVERHEAD + crate::wire::DATA_ACK_LEN;
const _: () = assert!(DATA_ACK_PACKET_OVERHEAD <= 60, "braid's per-packet overhead exceeds WireGuard's 60 bytes");

/// How often the initiator starts a new handshake on a running session (WireGuard's
/// `REKEY_AFTER_TIME`, 6.1).
pub const REKEY_AFTER: Duration = Duration::from_secs(120);
/// How long the previous keys still open datagrams after a rekey: packets sealed just before it
/// may still be in flight on a slow uplink.
pub const KEY_GRACE: Duration = Duration::from_secs(30);
/// Age after which a session's keys neither seal nor open (WireGuard's `REJECT_AFTER_TIME`, 6.1,
/// 6.2): a rekey is due at [`REKEY_AFTER`], and the 60 s between the two leave room for about
/// fifteen handshake retries (1, 2, 4, 4, ... s apart) on a bad uplink. If all of them fail, the
/// keys stop there rather than serving for ever: whoever obtains them later (a memory dump of a
/// stolen gateway) can then read at most three minutes of traffic, which is what forward secrecy
/// by rekeying is for.
pub const REJECT_AFTER: Duration = Duration::from_secs(180);

/// An X25519 static private key.
#[derive(Clone)]
pub struct StaticSecret([u8; KEY_LEN]);

impl StaticSecret {
    /// A key from 32 bytes (e.g. from the OS RNG or a key file); clamped as RFC 7748 section 5
    /// asks, as `wg genkey` does, so every stored key is already in canonical form.
    pub fn from_bytes(mut b: [u8; KEY_LEN]) -> Self {
        b[0] &= 248;
        b[31] &= 127;
        b[31] |= 64;
        StaticSecret(b)
    }

    /// The key's bytes.
    pub fn to_bytes(&self) -> [u8; KEY_LEN] {
        self.0
    }

    /// The matching public key (X25519 base-point multiplication, through snow's resolver).
    pub fn public_key(&self) -> PublicKey {
        use snow::resolvers::{CryptoResolver, DefaultResolver};
        let mut out = [0u8; KEY_LEN];
        // The default resolver is compiled with curve25519 (Cargo.toml), so this is always Some.
        if let Some(mut dh) = DefaultResolver.resolve_dh(&snow::params::DHChoice::Curve25519) {
            dh.set(&self.0);
            out.copy_from_slice(&dh.pubkey()[..KEY_LEN]);
        }
        PublicKey(out)
    }
}

/// Whether the X25519 function of a clamped scalar with `public` is all zeros: true exactly for the
/// points of small order (order 1, 2, 4 or 8, on the curve or its twist, in any of their
/// encodings), since a clamped scalar is a multiple of the cofactor 8. With such a "public key"
/// the Diffie-Hellman result is known to everybody (zero), so no secret key is needed to use it.
pub(crate) fn dh_is_zero(secret: &[u8; KEY_LEN], public: &[u8; KEY_LEN]) -> bool {
    use snow::resolvers::{CryptoResolver, DefaultResolver};
    let mut out = [0u8; KEY_LEN];
    // The default resolver is compiled with curve25519 (Cargo.toml), so this is always Some; if it
    // were not, `out` stays zero and the key is refused, which is the safe side.
    if let Some(mut dh) = DefaultResolver.resolve_dh(&snow::params::DHChoice::Curve25519) {
        dh.set(secret);
        let _ = dh.dh(public, &mut out);
    }
    out == [0u8; KEY_LEN]
}

impl PublicKey {
    /// Whether this is a point of small order (all zeros among them): a key nobody holds the
    /// secret of, with which a Diffie-Hellman result is public. Refused wherever keys are
    /// configured.
    pub fn is_low_order(&self) -> bool {
        // Any clamped scalar will do; this one is fixed so the check is deterministic.
        let k = StaticSecret::from_bytes([0x42; KEY_LEN]);
        dh_is_zero(&k.0, &self.0)
    }
}

impl fmt::Debug for StaticSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StaticSecret(..)")
    }
}

/// An X25519 public key.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PublicKey(pub [u8; KEY_LEN]);

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey(")?;
        for b in &self.0[..4] {
            write!(f, "{b:02x}")?;
        }
        write!(f, "..)")
    }
}

/// Why a datagram was dropped; the daemons count each reason (`braid status --json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum Reject {
    /// Authentication failed: a modified or forged datagram, a wrong key, or a handshake message
    /// whose `mac1` or Noise decryption does not verify.
    #[error("bad MAC")]
    BadMac,
    /// Seen before, or older than the replay window; also a handshake initiation whose timestamp
    /// is not newer than the last one accepted from that peer.
    #[error("replayed or too old")]
    Replay,
    /// A sealed datagram for a session this end does not have.
    #[error("unknown session")]
    UnknownSession,
    /// Too short, wrong length, unparsable header, or unexpected in this state.
    #[error("malformed")]
    Malformed,
    /// A handshake initiation not processed because the server is under load (a cookie reply was
    /// sent instead, or the source exceeded its rate).
    #[error("rate limited")]
    RateLimited,
    /// A handshake from a static key the server does not list.
    #[error("unknown key")]
    UnknownKey,
    /// A sealed datagram for a session whose keys are older than [`REJECT_AFTER`].
    #[error("keys expired")]
    Expired,
}

/// Counts of rejected datagrams by [`Reject`] reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RejectCounts {
    /// [`Reject::BadMac`].
    pub bad_mac: u64,
    /// [`Reject::Replay`].
    pub replay: u64,
    /// [`Reject::UnknownSession`].
    pub unknown_session: u64,
    /// [`Reject::Malformed`].
    pub malformed: u64,
    /// [`Reject::RateLimited`].
    pub rate_limited: u64,
    /// [`Reject::UnknownKey`].
    pub unknown_key: u64,
    /// [`Reject::Expired`].
    pub expired: u64,
}

impl RejectCounts {
    /// Counts one rejected datagram.
    pub fn count(&mut self, r: Reject) {
        let c = match r {
            Reject::BadMac => &mut self.bad_mac,
            Reject::Replay => &mut self.replay,
            Reject::UnknownSession => &mut self.unknown_session,
            Reject::Malformed => &mut self.malformed,
            Reject::RateLimited => &mut self.rate_limited,
            Reject::UnknownKey => &mut self.unknown_key,
            Reject::Expired => &mut self.expired,
        };
        *c += 1;
    }

    /// All rejected datagrams.
    pub fn total(&self) -> u64 {
        self.bad_mac
            + self.replay
            + self.unknown_session
            + self.malformed
            + self.rate_limited
            + self.unknown_key
            + self.expired
    }
}

impl std::ops::AddAssign for RejectCounts {
    /// Adds `o`'s counts (another worker's, say) to these.
    fn add_assign(&mut self, o: RejectCounts) {
        // Taken apart without `..`, so that a reason added to the struct cannot be left out here.
        let RejectCounts { bad_mac, replay, unknown_session, malformed, rate_limited, unknown_key, expired } = o;
        self.bad_mac += bad_mac;
        self.replay += replay;
        self.unknown_session += unknown_session;
        self.malformed += malformed;
        self.rate_limited += rate_limited;
        self.unknown_key += unknown_key;
        self.expired += expired;
    }
}

/// Constant-time comparison of two MACs, so a forger learns nothing from timing.
pub(crate) fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests;
