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
//! [`KEY_GRACE`](super::KEY_GRACE); the responder keeps sealing with the old keys until a datagram
//! opens under the new ones (the initiator's confirmation), then switches. The per-link replay
//! windows run across epochs since the counters do.

use super::aead::{CipherSuite, DirectionKey};
use super::replay::ReplayWindow;
use super::{KEY_GRACE, KEY_LEN, Reject, TAG_LEN};
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
}

/// Why a datagram could not be sealed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// The datagram is shorter than the clear header.
    #[error("datagram shorter than the header")]
    TooShort,
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
    /// Responder only: keys of a finished rekey handshake, not yet confirmed by the initiator.
    next: Option<Epoch>,
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
            next: None,
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
            self.next = Some(epoch);
        }
    }

    /// Seals the engine's datagram `buf[..len]` in place: encrypts the body, appends the tag and
    /// returns the sealed length (`len + TAG_LEN`).
    pub fn seal(&mut self, buf: &mut [u8], len: usize) -> Result<usize, SealError> {
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
        // The epoch most likely to succeed first: current, then a pending next, then previous.
        let mut which = None;
        for (i, epoch) in
            [Some(&self.current), self.next.as_ref(), self.previous.as_ref().map(|p| &p.0)].into_iter().enumerate()
        {
            let Some(epoch) = epoch else { continue };
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
            return Err(Reject::BadMac);
        };
        if which == 1
            && let Some(next) = self.next.take()
        {
            // The initiator confirmed the new keys: seal with them from now on.
            let old = std::mem::replace(&mut self.current, next);
            self.previous = Some((old, now + KEY_GRACE));
        }
        self.rx_windows[usize::from(link)].get_or_insert_with(Box::default).update(counter);
        self.last_authentic = now;
        Ok(())
    }
}
