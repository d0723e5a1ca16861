//! A keyed session: the engine ([`Session`]) and its transport ([`SecureChannel`]) as one
//! datagram path. Everything a session sends leaves sealed and everything it takes in is opened
//! first, so the engine adopts an uplink's new address only from an authentic datagram.
//!
//! Both daemons, the simulator, the pair harness and the fuzz targets drive this same type, so
//! what the simulator puts on the air (sizes, the 16-byte tag, the MTU it leaves for passengers)
//! is what the daemon sends. The daemons keep only I/O: sockets, the TUN device and handshakes.

use super::{DatagramError, Session, Transmit};
use crate::Instant;
use crate::crypto::{Reject, SealError, SecureChannel, SessionKeys, TAG_LEN};
use crate::link::LinkId;
use std::net::SocketAddr;

/// Why a sealed datagram did not reach the engine, or was refused by it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealedDatagramError {
    /// It did not open: forged, modified, replayed, too short, or its keys expired. The engine
    /// never saw it.
    #[error("not opened: {0}")]
    Rejected(#[from] Reject),
    /// It opened (authentic), but the engine refused its content.
    #[error("authentic datagram refused by the engine: {0}")]
    Engine(#[from] DatagramError),
}

/// A session keyed by a finished handshake: seals what the engine sends, opens what arrives.
///
/// It dereferences to its [`Session`] for settings, timers, deliveries and status; its own
/// [`SealedSession::handle_datagram`] and [`SealedSession::poll_transmit`] take the place of the
/// engine's (inherent methods come first in Rust's method lookup), so a caller holding a
/// `SealedSession` cannot send or take in a datagram unsealed by accident.
pub struct SealedSession {
    session: Session,
    channel: SecureChannel,
    /// Where datagrams are opened: reused, so a datagram costs no allocation.
    scratch: Vec<u8>,
}

impl SealedSession {
    /// A session whose datagrams are sealed with `keys`, born at `now`.
    pub fn new(session: Session, keys: &SessionKeys, now: Instant) -> Self {
        let scratch = Vec::with_capacity(session.min_transmit_buffer() + TAG_LEN);
        SealedSession { session, channel: SecureChannel::new(keys, now), scratch }
    }

    /// The transport: its keys' age, suite, last authentic datagram.
    pub fn channel(&self) -> &SecureChannel {
        &self.channel
    }

    /// The transport, for rekeys.
    pub fn channel_mut(&mut self) -> &mut SecureChannel {
        &mut self.channel
    }

    /// The engine alone, e.g. to compare its datagrams with the sealed ones.
    pub fn engine(&self) -> &Session {
        &self.session
    }

    /// Smallest buffer [`SealedSession::poll_transmit`] accepts: the engine's largest datagram and
    /// the tag.
    pub fn min_transmit_buffer(&self) -> usize {
        self.session.min_transmit_buffer() + TAG_LEN
    }

    /// Takes a sealed datagram that arrived from `from`: opened at `now` (the transport's timers),
    /// then handed to the engine stamped `at` (the receive time its estimators use; the daemons
    /// pass the kernel's). `link` is as for [`Session::handle_datagram`].
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        at: Instant,
        link: Option<LinkId>,
        from: SocketAddr,
        datagram: &[u8],
    ) -> Result<(), SealedDatagramError> {
        self.channel.open(now, datagram, &mut self.scratch)?;
        self.session.handle_datagram(at, link, from, &self.scratch)?;
        Ok(())
    }

    /// The engine's next datagram, sealed in `buf`; [`Transmit::len`] is the sealed length (what
    /// goes on the air inside UDP). `Some(Err)` when it could not be sealed (the keys expired):
    /// that datagram is lost like one dropped by the network, and the caller keeps polling. `None`
    /// when there is nothing to send, or, as for [`Session::poll_transmit`], when `buf` is shorter
    /// than [`SealedSession::min_transmit_buffer`].
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<Result<Transmit, SealError>> {
        if buf.len() < self.min_transmit_buffer() {
            return None;
        }
        let mut t = self.session.poll_transmit(now, buf)?;
        Some(self.channel.seal(now, buf, t.len).map(|n| {
            t.len = n;
            t
        }))
    }
}

impl std::ops::Deref for SealedSession {
    type Target = Session;

    fn deref(&self) -> &Session {
        &self.session
    }
}

impl std::ops::DerefMut for SealedSession {
    fn deref_mut(&mut self) -> &mut Session {
        &mut self.session
    }
}
