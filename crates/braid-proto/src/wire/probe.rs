//! Probes: liveness and round-trip time of one link, answered on the same link.

use super::{Reader, WireError, Writer};

/// A probe's body. A request carries zeros in the echo fields; the reply (header flag
/// [`super::FLAG_REPLY`]) echoes the request's send time and says how long the replier held it, so
/// the prober computes the link's RTT without synchronised clocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeRepr {
    /// Probe number chosen by the prober.
    pub id: u32,
    /// The request's header timestamp (prober's clock), in a reply.
    pub echo_timestamp: u32,
    /// µs between receiving the request and sending the reply.
    pub echo_delay_us: u32,
}

impl ProbeRepr {
    /// Bytes the body takes.
    pub const LEN: usize = 12;

    /// Parses a probe body.
    pub fn parse(body: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(body);
        Ok(ProbeRepr {
            id: r.u32("probe id")?,
            echo_timestamp: r.u32("probe echo timestamp")?,
            echo_delay_us: r.u32("probe echo delay")?,
        })
    }

    /// Writes the body, returning the bytes written.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let mut w = Writer::new(buf, Self::LEN)?;
        w.u32(self.id);
        w.u32(self.echo_timestamp);
        w.u32(self.echo_delay_us);
        Ok(w.pos)
    }
}
