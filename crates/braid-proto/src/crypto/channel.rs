//! A keyed session's transport: seals what the engine sends, opens what arrives.
//!
//! A sealed datagram is the engine's datagram with its body encrypted and a 16-byte tag appended:
//!
//! ```text
//! | clear header (12, associated data) | encrypted body | tag (16) |
//! ```
//!
//! The nonce is (link id, 64-bit per-link counter); the header's per-link sequence number is the
//! counter's low 24 bits, so the receiver expands it against the highest counter authenticated on
//! that link ([`crate::seq::expand`]) and no byte is added for it. The sender makes the counter
//! strictly increase per link whatever the engine does (the next value above the last one with
//! the header's low bits), so a nonce is never reused under a key.
//!
//! Keys come in epochs (WireGuard 6.1, "key rotation"): `current` seals; after a rekey the
//! initiator seals with the new keys at once and keeps the old ones for opening during
//! [`KEY_GRACE`]; the responder keeps sealing with the old keys until a datagram
//! opens under the new ones (the initiator's confirmation), then switches. The per-link replay
//! windows run across epochs since the counters do.
//!
//! On a slow uplink (a round trip of a second or more) the initiator may retry a rekey before the
//! first response is back, and the responder answers each: it keeps up to [`MAX_NEXT`]
//! unconfirmed epochs, and the one the initiator seals with wins, so whichever response the
//! initiator takes, the responder follows. Keys older than [`REJECT_AFTER`] are refused both ways.

use super::aead::{CipherSuite, DirectionKey};
use super::replay::ReplayWindow;
use super::{KEY_GRACE, KEY_LEN, REJECT_AFTER, Reject, TAG_LEN};
use crate::Instant;
use crate::wire::{HEADER_LEN, LINK_ID_OFFSET, LINK_SEQ_OFFSET};

/// The keys a handshake produced, for one end.
#[derive(Clone)]
pub struct SessionKeys {
    /// The AEAD.
    pub suite: CipherSuite,
    /// Key for what this end sends.
    pub send: [u8; KEY_LEN],
    /// Key for what this end receives.
    pub recv: [u8; KEY_LEN],
}

impl SessionKeys {
    /// The other end's keys: what this end sends, that end receives. For drivers that key both
    /// ends themselves (the simulator, tests) rather than through a handshake.
    pub fn mirror(&self) -> SessionKeys {
        SessionKeys { suite: self.suite, send: self.recv, recv: self.send }
    }
}

impl std::fmt::Debug for SessionKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SessionKeys({}, ..)", self.suite)
    }
}

struct Epoch {
    send: DirectionKey,
    recv: DirectionKey,
    born: Instant,
}

impl Epoch {
    fn new(k: &SessionKeys, now: Instant) -> Self {
        Epoch { send: DirectionKey::new(k.suite, &k.send), recv: DirectionKey::new(k.suite, &k.recv), born: now }
    }

    fn expired(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.born) >= REJECT_AFTER
    }
}

/// Most unconfirmed rekey epochs a responder keeps (the initiator keeps as many initiations
/// pending, [`super::handshake::MAX_PENDING`]).
pub const MAX_NEXT: usize = super::handshake::MAX_PENDING;

/// Why a datagram could not be sealed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// The datagram is shorter than the clear header.
    #[error("datagram shorter than the header")]
    TooShort,
    /// The keys are older than [`REJECT_AFTER`]: a new handshake is needed.
    #[error("keys expired")]
    Expired,
    /// The buffer has no room for the tag after the datagram.
    #[error("no room for the tag: need {need} bytes, have {have}")]
    BufferTooSmall {
        /// Bytes needed.
        need: usize,
        /// Bytes available.
        have: usize,
    },
}

/// Why a datagram could not be opened: the reason the daemon counts.
pub type OpenError = Reject;

/// Transport state of one keyed session.
pub struct SecureChannel {
    current: Epoch,
    /// Old keys still accepted for receiving, until the instant given.
    previous: Option<(Epoch, Instant)>,
    /// Responder only: keys of finished rekey handshakes, not yet confirmed by the initiator,
    /// oldest first (at most [`MAX_NEXT`]).
    next: Vec<Epoch>,
    tx_counters: Vec<Option<u64>>,
    rx_windows: Vec<Option<Box<ReplayWindow>>>,
    last_authentic: Instant,
    suite: CipherSuite,
}

impl SecureChannel {
    /// A channel on the keys of a first handshake.
    pub fn new(keys: &SessionKeys, now: Instant) -> Self {
        SecureChannel {
            current: Epoch::new(keys, now),
            previous: None,
            next: Vec::new(),
            tx_counters: vec![None; 256],
            rx_windows: (0..256).map(|_| None).collect(),
            last_authentic: now,
            suite: keys.suite,
        }
    }

    /// The AEAD in use.
    pub fn suite(&self) -> CipherSuite {
        self.suite
    }

    /// When the sealing keys were made: the initiator rekeys [`REKEY_AFTER`](super::REKEY_AFTER)
    /// later.
    pub fn keys_born(&self) -> Instant {
        self.current.born
    }

    /// When a datagram last opened (or the channel was made).
    pub fn last_authentic(&self) -> Instant {
        self.last_authentic
    }

    /// Installs the keys of a rekey handshake. The initiator seals with them at once; the
    /// responder (`initiator == false`) only once a datagram opens under them.
    pub fn rekey(&mut self, keys: &SessionKeys, now: Instant, initiator: bool) {
        let epoch = Epoch::new(keys, now);
        self.suite = keys.suite;
        if initiator {
            let old = std::mem::replace(&mut self.current, epoch);
            self.previous = Some((old, now + KEY_GRACE));
        } else {
            if self.next.len() >= MAX_NEXT {
                self.next.remove(0);
            }
            self.next.push(epoch);
        }
    }

    /// Whether the sealing keys are older than [`REJECT_AFTER`] (nothing can be sent until a
    /// handshake replaces them).
    pub fn expired(&self, now: Instant) -> bool {
        self.current.expired(now)
    }

    /// Seals the engine's datagram `buf[..len]` in place: encrypts the body, appends the tag and
    /// returns the sealed length (`len + TAG_LEN`). Refused once the keys are older than
    /// [`REJECT_AFTER`].
    pub fn seal(&mut self, now: Instant, buf: &mut [u8], len: usize) -> Result<usize, SealError> {
        if self.current.expired(now) {
            return Err(SealError::Expired);
        }
        if len < HEADER_LEN {
            return Err(SealError::TooShort);
        }
        if buf.len() < len + TAG_LEN {
            return Err(SealError::BufferTooSmall { need: len + TAG_LEN, have: buf.len() });
        }
        let link = buf[LINK_ID_OFFSET];
        let low = u32::from_be_bytes([0, buf[LINK_SEQ_OFFSET], buf[LINK_SEQ_OFFSET + 1], buf[LINK_SEQ_OFFSET + 2]]);
        let slot = &mut self.tx_counters[usize::from(link)];
        let counter = match *slot {
            None => u64::from(low),
            Some(last) => {
                let c = (last & !0xff_ffff) | u64::from(low);
                if c > last { c } else { c + (1 << 24) }
            }
        };
        *slot = Some(counter);
        let (head, rest) = buf.split_at_mut(HEADER_LEN);
        let tag = self.current.send.seal(link, counter, head, &mut rest[..len - HEADER_LEN]);
        buf[len..len + TAG_LEN].copy_from_slice(&tag);
        Ok(len + TAG_LEN)
    }

    /// Opens a sealed datagram into `out` (cleared first): the engine's datagram, header and
    /// body. The replay window moves only once the datagram has authenticated.
    pub fn open(&mut self, now: Instant, datagram: &[u8], out: &mut Vec<u8>) -> Result<(), OpenError> {
        // Cleared on every path, rejections included: a caller reusing `out` must never see the
        // previous datagram's plaintext after an error.
        out.clear();
        if datagram.len() < HEADER_LEN + TAG_LEN {
            return Err(Reject::Malformed);
        }
        let link = datagram[LINK_ID_OFFSET];
        let low = u32::from_be_bytes([
            0,
            datagram[LINK_SEQ_OFFSET],
            datagram[LINK_SEQ_OFFSET + 1],
            datagram[LINK_SEQ_OFFSET + 2],
        ]);
        let window = &self.rx_windows[usize::from(link)];
        let counter = match window {
            Some(w) => crate::seq::expand(w.highest() + 1, low),
            None => u64::from(low),
        };
        if let Some(w) = window
            && w.check(counter).is_err()
        {
            return Err(Reject::Replay);
        }
        if let Some((_, until)) = &self.previous
            && now >= *until
        {
            self.previous = None;
        }
        // The epoch most likely to succeed first: current, then the pending next ones (newest
        // first), then previous. Expired keys are not tried.
        let candidates = std::iter::once(&self.current)
            .chain(self.next.iter().rev())
            .chain(self.previous.as_ref().map(|p| &p.0))
            .enumerate()
            .filter(|(_, e)| !e.expired(now));
        let mut which = None;
        let mut any = false;
        for (i, epoch) in candidates {
            any = true;
            out.clear();
            out.extend_from_slice(datagram);
            let (head, rest) = out.split_at_mut(HEADER_LEN);
            if let Some(n) = epoch.recv.open(link, counter, head, rest) {
                out.truncate(HEADER_LEN + n);
                which = Some(i);
                break;
            }
        }
        let Some(which) = which else {
            out.clear();
            return Err(if any { Reject::BadMac } else { Reject::Expired });
        };
        if (1..=self.next.len()).contains(&which) {
            // The initiator confirmed one of the new epochs: seal with it from now on. Older
            // unconfirmed ones are dropped (the initiator took a later response); newer ones stay,
            // since the initiator may still take a later response and seal with that.
            let idx = self.next.len() - which;
            let mut newer = self.next.split_off(idx);
            let confirmed = newer.remove(0);
            self.next = newer;
            let old = std::mem::replace(&mut self.current, confirmed);
            self.previous = Some((old, now + KEY_GRACE));
        }
        self.rx_windows[usize::from(link)].get_or_insert_with(Box::default).update(counter);
        self.last_authentic = now;
        Ok(())
    }
}
