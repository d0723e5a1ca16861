//! The common clear header.

use super::{HEADER_LEN, Reader, VERSION, WireError, Writer};
use crate::link::LinkId;

/// What a datagram carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PacketType {
    /// A passenger packet with its global sequence number.
    Data,
    /// A repair packet (XOR, RLNC, ...) with the description of what it covers.
    Coded,
    /// Acks, per-link estimates and receiver state for the coders.
    Feedback,
    /// A link probe or its reply (liveness, RTT).
    Probe,
    /// The session ends.
    Close,
    /// Session set-up in the clear: a Noise handshake message, a cookie reply or an "unknown
    /// session" hint; the flags say which ([`crate::crypto`]). Never passed to a [`crate::Session`].
    Handshake,
}

impl PacketType {
    fn code(self) -> u8 {
        match self {
            PacketType::Data => 1,
            PacketType::Coded => 2,
            PacketType::Feedback => 3,
            PacketType::Probe => 4,
            PacketType::Close => 5,
            PacketType::Handshake => 6,
        }
    }

    fn from_code(c: u8) -> Result<Self, WireError> {
        Ok(match c {
            1 => PacketType::Data,
            2 => PacketType::Coded,
            3 => PacketType::Feedback,
            4 => PacketType::Probe,
            5 => PacketType::Close,
            6 => PacketType::Handshake,
            other => return Err(WireError::UnknownType(other)),
        })
    }
}

/// The 11-byte clear header every datagram starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Packet type.
    pub ptype: PacketType,
    /// Two type-specific flag bits.
    pub flags: u8,
    /// Session id (16 bits): a vehicle keeps its session when its uplink addresses change. 16 bits
    /// (65,535 vehicles per server) rather than WireGuard's 32 buy the byte that lets a data packet
    /// with a piggybacked ack fit in 60 bytes; the server picks ids, so they never collide.
    pub session: u32,
    /// Which of the vehicle's uplinks this datagram travels on.
    pub link: LinkId,
    /// Low 24 bits of the sender's per-link sequence number.
    pub link_seq: u32,
    /// Low 32 bits of the sender's clock (µs) when it sent the datagram.
    pub timestamp: u32,
}

impl Header {
    /// Largest session id (16 bits).
    pub const MAX_SESSION: u32 = (1 << 16) - 1;

    /// Parses the header, returning it and the body that follows.
    pub fn parse(datagram: &[u8]) -> Result<(Header, &[u8]), WireError> {
        let mut r = Reader::new(datagram);
        let b0 = r.u8("header")?;
        if r.remaining() < HEADER_LEN - 1 {
            return Err(WireError::Truncated { field: "header", need: HEADER_LEN, have: datagram.len() });
        }
        let version = b0 >> 6;
        if version != VERSION {
            return Err(WireError::BadVersion(version));
        }
        let ptype = PacketType::from_code((b0 >> 2) & 0x0f)?;
        let flags = b0 & 0b11;
        let session = u32::from(r.u16("session id")?);
        let link = LinkId(r.u8("link id")?);
        let link_seq = r.u24("link sequence number")?;
        let timestamp = r.u32("timestamp")?;
        Ok((Header { ptype, flags, session, link, link_seq, timestamp }, r.rest()))
    }

    /// Writes the header into the first [`HEADER_LEN`] bytes of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        if self.session > Self::MAX_SESSION {
            return Err(WireError::Invalid { field: "session id", why: "exceeds 16 bits" });
        }
        let mut w = Writer::new(buf, HEADER_LEN)?;
        w.u8((VERSION << 6) | (self.ptype.code() << 2) | (self.flags & 0b11));
        w.u16(self.session as u16);
        w.u8(self.link.0);
        w.u24(self.link_seq & 0x00ff_ffff);
        w.u32(self.timestamp);
        Ok(w.pos)
    }
}
