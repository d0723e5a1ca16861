//! Codes behind one pair of traits, so a new code (XOR, RLNC, RaptorQ, ...) is one new file.
//!
//! The sender side of a scheme decides *what* to cover ([`super::Repair::Code`] names a code kind
//! and a [`Coverage`]); the session fetches the covered packets from its store and asks the kind's
//! [`Encoder`] for the repair payload. The receiver keeps one [`Decoder`] per kind at all times, so
//! whatever the peer's scheme, its coded packets are used.

use super::Known;
use crate::time::Instant;
use crate::wire::{CodeKind, Coverage};
use std::fmt;

/// Builds a repair payload from the covered packets.
pub trait Encoder: Send + fmt::Debug {
    /// The payload and the 16-bit length field of the coded packet for `coverage`, whose members
    /// (ascending sequence numbers) and their packets are given; `None` if it cannot be built.
    fn encode(&mut self, coverage: &Coverage, members: &[(u64, &[u8])]) -> Option<(Vec<u8>, u16)>;
}

/// Counters every decoder keeps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DecoderStats {
    /// Coded packets received.
    pub received: u64,
    /// Coded packets that covered nothing missing.
    pub useless: u64,
    /// Coded packets kept for later.
    pub kept: u64,
    /// Packets recovered.
    pub recovered: u64,
    /// Packets recovered by a coded packet that had been kept.
    pub recovered_later: u64,
    /// Coded packets dropped: covered packets no longer available, too old, over the bound, or
    /// inconsistent.
    pub discarded: u64,
}

impl std::ops::AddAssign for DecoderStats {
    fn add_assign(&mut self, o: Self) {
        self.received += o.received;
        self.useless += o.useless;
        self.kept += o.kept;
        self.recovered += o.recovered;
        self.recovered_later += o.recovered_later;
        self.discarded += o.discarded;
    }
}

/// Recovers missing packets from coded packets of one kind.
pub trait Decoder: Send + fmt::Debug {
    /// Takes a coded packet; `known(seq)` says what the receiver has. Recovered packets are pushed
    /// to `out`; the caller stores each and feeds it back through [`Decoder::handle_packet`].
    fn handle_coded<'k>(
        &mut self,
        now: Instant,
        coverage: &Coverage,
        len_field: u16,
        payload: &[u8],
        known: &dyn Fn(u64) -> Known<'k>,
        out: &mut Vec<(u64, Vec<u8>)>,
    );

    /// A packet arrived or was recovered: use it to reduce what is kept.
    fn handle_packet(&mut self, seq: u64, packet: &[u8], out: &mut Vec<(u64, Vec<u8>)>);

    /// Counters.
    fn stats(&self) -> DecoderStats;
}

/// The encoder for `kind`.
pub fn encoder(kind: CodeKind) -> Box<dyn Encoder> {
    match kind {
        CodeKind::Xor => Box::new(super::xor::XorEncoder),
        CodeKind::Rlnc => Box::new(super::rlnc::RlncEncoder),
        CodeKind::Fountain => Box::new(super::fountain::FountainEncoder::new()),
    }
}

/// A decoder for `kind`, keeping at most `max_pending` coded packets for at most `max_age`.
pub fn decoder(kind: CodeKind, max_pending: usize, max_age: std::time::Duration) -> Box<dyn Decoder> {
    match kind {
        CodeKind::Xor => Box::new(super::xor::XorDecoder::new(max_pending, max_age)),
        CodeKind::Rlnc => Box::new(super::rlnc::RlncDecoder::new(max_pending, max_age)),
        CodeKind::Fountain => Box::new(super::fountain::FountainDecoder::new(max_pending, max_age)),
    }
}
