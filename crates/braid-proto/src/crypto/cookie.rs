//! Denial-of-service defences of the handshake, after WireGuard 5.3 and 5.4.4/5.4.7.
//!
//! - `mac1` on every handshake message, keyed by the receiver's public key: a server spends one
//!   HMAC, no Diffie-Hellman, on a datagram from someone who does not even know its public key.
//! - Under load, `mac2`: a MAC keyed by a *cookie*, a MAC of the sender's IP address and port under
//!   a secret that changes every two minutes. An initiation without a valid `mac2` gets a cookie
//!   reply (an encrypted cookie, no state kept) instead of a Diffie-Hellman; only a sender that
//!   receives at its source address can answer with one, so spoofed floods cost the server a few
//!   HMACs each, and the per-source [`RateLimiter`] bounds what genuine addresses can make it do.
//!
//! WireGuard uses BLAKE2s and XChaCha20-Poly1305 here; braid uses what `ring` offers: HMAC-SHA256
//! truncated to 16 bytes, and ChaCha20-Poly1305 with a random 96-bit nonce for the cookie reply
//! (its key is fixed per server, and 2^32 replies per key keep nonce collisions negligible).

use super::{KEY_LEN, PublicKey, ct_eq};
use crate::Instant;
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, Nonce, UnboundKey};
use ring::hmac;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// Bytes of `mac1` and of `mac2`.
pub const MAC_LEN: usize = 16;
/// Bytes of a cookie.
pub const COOKIE_LEN: usize = 16;
/// Bytes of a cookie reply's nonce.
pub const COOKIE_NONCE_LEN: usize = 12;
/// Bytes of a cookie reply's body: nonce, encrypted cookie, tag.
pub const COOKIE_REPLY_BODY_LEN: usize = COOKIE_NONCE_LEN + COOKIE_LEN + super::TAG_LEN;
/// How often the server's cookie secret changes (WireGuard's `COOKIE_SECRET_MAX_AGE`).
pub const COOKIE_SECRET_AGE: Duration = Duration::from_secs(120);
/// How long a client uses a cookie it received (a little less than the secret's age).
pub const COOKIE_USE_AGE: Duration = Duration::from_secs(110);

const LABEL_MAC1: &[u8] = b"mac1----";
const LABEL_COOKIE: &[u8] = b"cookie--";

fn labelled_key(label: &[u8], key: &PublicKey) -> [u8; KEY_LEN] {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    ctx.update(label);
    ctx.update(&key.0);
    let mut out = [0u8; KEY_LEN];
    out.copy_from_slice(ctx.finish().as_ref());
    out
}

/// HMAC-SHA256 of `data` under `key`, truncated to [`MAC_LEN`].
pub(crate) fn mac(key: &[u8], data: &[u8]) -> [u8; MAC_LEN] {
    let tag = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data);
    let mut out = [0u8; MAC_LEN];
    out.copy_from_slice(&tag.as_ref()[..MAC_LEN]);
    out
}

/// The `mac1` key of messages sent to the holder of `receiver` (WireGuard: `HASH(LABEL_MAC1 || S_pub)`).
pub(crate) fn mac1_key(receiver: &PublicKey) -> [u8; KEY_LEN] {
    labelled_key(LABEL_MAC1, receiver)
}

/// Verifies `mac1` (the 16 bytes after `msg`) under `key`.
pub(crate) fn mac1_ok(key: &[u8; KEY_LEN], msg: &[u8], mac1: &[u8]) -> bool {
    ct_eq(&mac(key, msg), mac1)
}

fn cookie_aead(server: &PublicKey) -> LessSafeKey {
    let k = labelled_key(LABEL_COOKIE, server);
    // 32 bytes for a 256-bit key: cannot fail.
    LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, &k).expect("32-byte key"))
}

fn addr_bytes(from: SocketAddr) -> Vec<u8> {
    let mut v = match from.ip() {
        IpAddr::V4(a) => a.octets().to_vec(),
        IpAddr::V6(a) => a.octets().to_vec(),
    };
    v.extend_from_slice(&from.port().to_be_bytes());
    v
}

/// The server's side: makes cookies and cookie replies, checks `mac2`.
pub(crate) struct CookieChecker {
    secret: [u8; KEY_LEN],
    secret_born: Option<Instant>,
    aead: LessSafeKey,
}

impl CookieChecker {
    pub(crate) fn new(server: &PublicKey) -> Self {
        CookieChecker { secret: [0; KEY_LEN], secret_born: None, aead: cookie_aead(server) }
    }

    /// Renews the secret when it is older than [`COOKIE_SECRET_AGE`]; `fresh` gives random bytes.
    fn refresh(&mut self, now: Instant, fresh: impl FnOnce() -> [u8; KEY_LEN]) {
        if self.secret_born.is_none_or(|b| now.saturating_duration_since(b) >= COOKIE_SECRET_AGE) {
            self.secret = fresh();
            self.secret_born = Some(now);
        }
    }

    fn cookie(&self, from: SocketAddr) -> [u8; COOKIE_LEN] {
        mac(&self.secret, &addr_bytes(from))
    }

    /// Whether `mac2` (over `msg`, everything before it) is right for a sender at `from`.
    pub(crate) fn mac2_ok(
        &mut self,
        now: Instant,
        from: SocketAddr,
        msg: &[u8],
        mac2: &[u8],
        fresh: impl FnOnce() -> [u8; KEY_LEN],
    ) -> bool {
        self.refresh(now, fresh);
        ct_eq(&mac(&self.cookie(from), msg), mac2)
    }

    /// Writes a cookie reply body for a sender at `from` into `out`: nonce, then the cookie sealed
    /// with the initiation's `mac1` as associated data (so it answers that initiation only).
    pub(crate) fn reply(
        &mut self,
        now: Instant,
        from: SocketAddr,
        mac1: &[u8],
        nonce: [u8; COOKIE_NONCE_LEN],
        out: &mut [u8; COOKIE_REPLY_BODY_LEN],
        fresh: impl FnOnce() -> [u8; KEY_LEN],
    ) {
        self.refresh(now, fresh);
        let cookie = self.cookie(from);
        out[..COOKIE_NONCE_LEN].copy_from_slice(&nonce);
        let body = &mut out[COOKIE_NONCE_LEN..COOKIE_NONCE_LEN + COOKIE_LEN];
        body.copy_from_slice(&cookie);
        let tag = self
            .aead
            .seal_in_place_separate_tag(Nonce::assume_unique_for_key(nonce), Aad::from(mac1), body)
            .map(|t| {
                let mut a = [0u8; super::TAG_LEN];
                a.copy_from_slice(t.as_ref());
                a
            })
            .unwrap_or_default();
        out[COOKIE_NONCE_LEN + COOKIE_LEN..].copy_from_slice(&tag);
    }
}

/// The client's side: decrypts cookie replies, keeps the cookie for `mac2`.
pub(crate) struct CookieJar {
    aead: LessSafeKey,
    cookie: Option<([u8; COOKIE_LEN], Instant)>,
}

impl CookieJar {
    pub(crate) fn new(server: &PublicKey) -> Self {
        CookieJar { aead: cookie_aead(server), cookie: None }
    }

    /// Takes a cookie reply body answering the initiation whose `mac1` was `mac1`.
    pub(crate) fn handle_reply(&mut self, now: Instant, mac1: &[u8], body: &[u8]) -> bool {
        if body.len() != COOKIE_REPLY_BODY_LEN {
            return false;
        }
        let mut nonce = [0u8; COOKIE_NONCE_LEN];
        nonce.copy_from_slice(&body[..COOKIE_NONCE_LEN]);
        let mut sealed = body[COOKIE_NONCE_LEN..].to_vec();
        match self.aead.open_in_place(Nonce::assume_unique_for_key(nonce), Aad::from(mac1), &mut sealed) {
            Ok(c) if c.len() == COOKIE_LEN => {
                let mut cookie = [0u8; COOKIE_LEN];
                cookie.copy_from_slice(c);
                self.cookie = Some((cookie, now));
                true
            }
            _ => false,
        }
    }

    /// `mac2` for `msg`: under the cookie if a fresh one is held, else zeros (WireGuard 5.4.4).
    pub(crate) fn mac2(&self, now: Instant, msg: &[u8]) -> [u8; MAC_LEN] {
        match self.cookie {
            Some((c, at)) if now.saturating_duration_since(at) < COOKIE_USE_AGE => mac(&c, msg),
            _ => [0; MAC_LEN],
        }
    }
}

/// Per-source token bucket for handshake initiations under load, after WireGuard's
/// `ratelimiter.c`: 20 per second, bursts of 5, per IP address.
///
/// The buckets are a fixed table indexed by a keyed hash of the address, so memory is bounded
/// and a new address is never refused for want of room: the table WireGuard and earlier braid
/// kept (one entry per address, refusing new ones when full) let 65,536 spoofed sources lock out
/// every genuine newcomer. Two addresses that share a bucket share its rate; the hash key is
/// random per process, so an attacker cannot aim at a given address's bucket, and with the
/// limiter behind a valid `mac2` only addresses that receive their cookie reach it at all.
pub struct RateLimiter {
    per_second: f64,
    burst: f64,
    buckets: Vec<(f64, Instant)>,
    hasher: std::collections::hash_map::RandomState,
}

impl RateLimiter {
    /// WireGuard's figures: 20 per second, bursts of 5; `buckets` buckets (at least one).
    pub fn new(buckets: usize) -> Self {
        RateLimiter {
            per_second: 20.0,
            burst: 5.0,
            // A bucket idle since the beginning is full (refilled below from its age).
            buckets: vec![(5.0, Instant::from_micros(0)); buckets.max(1)],
            hasher: std::collections::hash_map::RandomState::new(),
        }
    }

    /// Buckets in the table (fixed at creation).
    pub fn len(&self) -> usize {
        self.buckets.len()
    }

    /// Always false: the table has at least one bucket.
    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    /// Takes a token for `ip`; false when its bucket has none left.
    pub fn allow(&mut self, now: Instant, ip: IpAddr) -> bool {
        use std::hash::BuildHasher;
        let i = (self.hasher.hash_one(ip) % self.buckets.len() as u64) as usize;
        let (tokens, at) = &mut self.buckets[i];
        let refill = now.saturating_duration_since(*at).as_secs_f64() * self.per_second;
        *tokens = (*tokens + refill).min(self.burst);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limiter_allows_the_burst_then_the_rate() {
        let mut r = RateLimiter::new(2);
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        let t0 = Instant::from_micros(10_000_000);
        let first: usize = (0..100).filter(|_| r.allow(t0, ip)).count();
        assert_eq!(first, 5, "the burst");
        let t1 = t0 + Duration::from_millis(500);
        let later: usize = (0..100).filter(|_| r.allow(t1, ip)).count();
        assert_eq!(later, 5, "half a second at 20/s, capped at the burst");
        assert_eq!(r.len(), 2);
    }

    #[test]
    fn rate_limiter_never_locks_out_a_new_source() {
        // 65,536 sources exhaust what they can; a source never seen before still gets through
        // (the limiter used to refuse new sources once 4,096 were tracked).
        let mut r = RateLimiter::new(4096);
        let t0 = Instant::from_micros(10_000_000);
        for i in 0..65_536u32 {
            let ip = IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + i));
            for _ in 0..10 {
                r.allow(t0, ip);
            }
        }
        let newcomer: IpAddr = "192.0.2.200".parse().unwrap();
        let t1 = t0 + Duration::from_millis(300);
        assert!(r.allow(t1, newcomer), "a new source is refused after a flood from many sources");
        assert_eq!(r.len(), 4096, "memory bounded");
    }

    #[test]
    fn cookie_reply_round_trip_and_binding() {
        let server = PublicKey([9; 32]);
        let mut checker = CookieChecker::new(&server);
        let mut jar = CookieJar::new(&server);
        let now = Instant::from_micros(1);
        let from: SocketAddr = "198.51.100.1:4000".parse().unwrap();
        let mac1 = [7u8; MAC_LEN];
        let mut body = [0u8; COOKIE_REPLY_BODY_LEN];
        checker.reply(now, from, &mac1, [1; 12], &mut body, || [3; 32]);
        assert!(!jar.handle_reply(now, &[8u8; MAC_LEN], &body), "bound to the initiation's mac1");
        assert!(jar.handle_reply(now, &mac1, &body));
        let msg = b"an initiation";
        let m2 = jar.mac2(now, msg);
        assert!(checker.mac2_ok(now, from, msg, &m2, || [4; 32]));
        let other: SocketAddr = "198.51.100.2:4000".parse().unwrap();
        assert!(!checker.mac2_ok(now, other, msg, &m2, || [4; 32]), "a cookie is for one address");
        let later = now + COOKIE_SECRET_AGE;
        assert!(!checker.mac2_ok(later, from, msg, &m2, || [5; 32]), "the secret rotated");
    }
}
