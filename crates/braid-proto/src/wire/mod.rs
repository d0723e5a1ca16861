//! braid's wire format (docs/design.md 3).
//!
//! Every datagram starts with an 11-byte clear header; the body depends on the packet type:
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |Ver|  Type |Flg|       Session id (16)         |    Link id    |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |          Per-link sequence number (24)        |  Send time    :
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! :     (µs, sender's clock, low 32 bits)         |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! Data adds a 3-byte global sequence number (and the low 16 bits of a cumulative ack when the ACK
//! flag is set, [`crate::seq::expand_ack`]), so a data packet costs 14 bytes of header, 16 with an
//! ack: with outer IPv4 + UDP (28) and a 16-byte AEAD tag that is 58 or 60 bytes, within
//! WireGuard's 60 (docs/design.md 3). The per-link sequence number and the send time
//! are on every datagram so the receiver can measure each link's loss, one-way delay and rate
//! (PluriBus 5.2, 5.3) from all traffic, not just data.
//!
//! Each body has a borrowed representation (`*Repr<'a>`) with `parse` and `emit`, in the style of
//! smoltcp's `wire` module: parse, don't validate. Nothing here panics on any input.

mod coded;
mod feedback;
mod header;
mod probe;

pub(crate) use coded::SplitMix64;
pub use coded::{CodeKind, CodedRepr, Coverage, FOUNTAIN_SYMBOL_PREFIX};
pub use feedback::{FeedbackRepr, LinkReport, NackRange};
pub use header::{Header, PacketType};
pub use probe::{LinkName, LinkRequest, MAX_LINK_NAME, ProbeRepr};

/// braid's protocol version, carried in the top two bits of every datagram. Version 2 narrowed the
/// session id to 16 bits and the piggybacked ack to 16, so that no data packet exceeds 60 bytes;
/// version 3 added the receiver's mean hold to feedback ([`FeedbackRepr::hold_ms`]). A peer of
/// another version is refused by name ([`WireError::BadVersion`]) rather than misread.
pub const VERSION: u8 = 3;
/// Length of the common header.
pub const HEADER_LEN: usize = 11;
/// Offset of the link id in the header; the crypto layer reads it and the per-link sequence number
/// that follows ([`LINK_SEQ_OFFSET`]) without parsing the rest, to build the AEAD nonce.
pub const LINK_ID_OFFSET: usize = 3;
/// Offset of the 24-bit per-link sequence number in the header.
pub const LINK_SEQ_OFFSET: usize = 4;
/// Length of a data packet's header, without the optional ack.
pub const DATA_HEADER_LEN: usize = HEADER_LEN + 3;
/// Bytes a piggybacked ack adds to a data packet.
pub const DATA_ACK_LEN: usize = 2;
/// Length of a coded packet's header.
pub const CODED_HEADER_LEN: usize = HEADER_LEN + coded::CODED_FIELDS_LEN;
/// The most header bytes any packet that carries a passenger packet adds to it; the TUN MTU is the
/// path MTU minus this, minus the outer IP/UDP headers and the AEAD tag.
/// A fountain repair symbol is a packet plus its 2-byte length, so coded packets may be that much
/// longer than the longest passenger packet.
pub const MAX_CARRIER_OVERHEAD: usize = if CODED_HEADER_LEN + FOUNTAIN_SYMBOL_PREFIX > DATA_HEADER_LEN + 3 {
    CODED_HEADER_LEN + FOUNTAIN_SYMBOL_PREFIX
} else {
    DATA_HEADER_LEN + DATA_ACK_LEN
};

/// Header flag on data packets: a cumulative ack (its low 16 bits) follows the global sequence
/// number.
pub const FLAG_ACK: u8 = 0b01;
/// Header flag on data packets: the sender recovers losses by retransmission, so the receiver
/// should report holes (NACKs).
pub const FLAG_NACK_WANTED: u8 = 0b10;
/// Header flag on probes: this is a reply.
pub const FLAG_REPLY: u8 = 0b01;

/// Why a datagram could not be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The datagram ends before a field it must contain.
    #[error("truncated: {field} needs {need} bytes, {have} left")]
    Truncated {
        /// The field being read.
        field: &'static str,
        /// Bytes the field needs.
        need: usize,
        /// Bytes that were left.
        have: usize,
    },
    /// The version bits are not braid's.
    #[error("unsupported version {0}")]
    BadVersion(u8),
    /// The packet type is not one braid knows.
    #[error("unknown packet type {0}")]
    UnknownType(u8),
    /// A field holds a value that is not allowed.
    #[error("invalid {field}: {why}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The output buffer is too small for the packet being emitted.
    #[error("buffer too small: need {need} bytes, have {have}")]
    BufferTooSmall {
        /// Bytes required.
        need: usize,
        /// Bytes available.
        have: usize,
    },
}

/// A data packet's body: one passenger packet with its global sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataRepr<'a> {
    /// Low 24 bits of the global sequence number.
    pub seq: u32,
    /// Low 16 bits of the sender's cumulative ack of the reverse direction, if piggybacked.
    pub ack: Option<u16>,
    /// The passenger's IP packet.
    pub payload: &'a [u8],
}

impl<'a> DataRepr<'a> {
    /// Parses a data body (the bytes after the common header); `flags` come from the header.
    pub fn parse(flags: u8, body: &'a [u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(body);
        let seq = r.u24("data sequence number")?;
        let ack = if flags & FLAG_ACK != 0 { Some(r.u16("data ack")?) } else { None };
        let payload = r.rest();
        if payload.is_empty() {
            return Err(WireError::Invalid { field: "data payload", why: "empty" });
        }
        Ok(DataRepr { seq, ack, payload })
    }

    /// Header flags this body needs.
    pub fn flags(&self) -> u8 {
        if self.ack.is_some() { FLAG_ACK } else { 0 }
    }

    /// Bytes the body takes.
    pub fn len(&self) -> usize {
        3 + if self.ack.is_some() { DATA_ACK_LEN } else { 0 } + self.payload.len()
    }

    /// Whether the body carries no payload (never true for a parsed body).
    pub fn is_empty(&self) -> bool {
        self.payload.is_empty()
    }

    /// Writes the body into `buf`, returning the bytes written.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let mut w = Writer::new(buf, self.len())?;
        w.u24(self.seq);
        if let Some(a) = self.ack {
            w.u16(a);
        }
        w.bytes(self.payload);
        Ok(w.pos)
    }
}

/// A close packet's body: why the session ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CloseRepr {
    /// Application-defined reason code.
    pub reason: u8,
}

impl CloseRepr {
    /// Parses a close body.
    pub fn parse(body: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(body);
        Ok(CloseRepr { reason: r.u8("close reason")? })
    }

    /// Writes the body, returning the bytes written.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let mut w = Writer::new(buf, 1)?;
        w.u8(self.reason);
        Ok(w.pos)
    }
}

/// A bounds-checked big-endian reader.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub(crate) fn take(&mut self, field: &'static str, n: usize) -> Result<&'a [u8], WireError> {
        let have = self.buf.len() - self.pos;
        if have < n {
            return Err(WireError::Truncated { field, need: n, have });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub(crate) fn u8(&mut self, field: &'static str) -> Result<u8, WireError> {
        Ok(self.take(field, 1)?[0])
    }

    pub(crate) fn u16(&mut self, field: &'static str) -> Result<u16, WireError> {
        let b = self.take(field, 2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    pub(crate) fn u24(&mut self, field: &'static str) -> Result<u32, WireError> {
        let b = self.take(field, 3)?;
        Ok(u32::from_be_bytes([0, b[0], b[1], b[2]]))
    }

    pub(crate) fn u32(&mut self, field: &'static str) -> Result<u32, WireError> {
        let b = self.take(field, 4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let s = &self.buf[self.pos..];
        self.pos = self.buf.len();
        s
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
}

/// A big-endian writer into a buffer already checked to be large enough.
pub(crate) struct Writer<'a> {
    buf: &'a mut [u8],
    pub(crate) pos: usize,
}

impl<'a> Writer<'a> {
    /// Checks up front that `need` bytes fit, so the writes below cannot go out of bounds.
    pub(crate) fn new(buf: &'a mut [u8], need: usize) -> Result<Self, WireError> {
        if buf.len() < need {
            return Err(WireError::BufferTooSmall { need, have: buf.len() });
        }
        Ok(Writer { buf, pos: 0 })
    }

    pub(crate) fn u8(&mut self, v: u8) {
        self.buf[self.pos] = v;
        self.pos += 1;
    }

    pub(crate) fn u16(&mut self, v: u16) {
        self.bytes(&v.to_be_bytes());
    }

    pub(crate) fn u24(&mut self, v: u32) {
        self.bytes(&v.to_be_bytes()[1..]);
    }

    pub(crate) fn u32(&mut self, v: u32) {
        self.bytes(&v.to_be_bytes());
    }

    pub(crate) fn bytes(&mut self, b: &[u8]) {
        self.buf[self.pos..self.pos + b.len()].copy_from_slice(b);
        self.pos += b.len();
    }
}

#[cfg(test)]
mod tests;
