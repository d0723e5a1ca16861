//! Feedback: what the receiver tells the sender (docs/design.md 3).

use super::{Reader, WireError, Writer};
use crate::link::LinkId;

/// The receiver's view of one link in the sender-to-receiver direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkReport {
    /// The link.
    pub link: LinkId,
    /// Exponentially averaged loss rate, in 1/65535 units (PluriBus 5.1).
    pub loss: u16,
    /// Estimated capacity of the direction toward the reporter, kbit/s; 0 = no estimate yet
    /// (PluriBus 5.2).
    pub capacity_kbps: u32,
    /// The reporter's configured capacity of its own direction on this link, kbit/s, so the peer can
    /// bootstrap its estimator (0 = none configured).
    pub reverse_hint_kbps: u32,
    /// One-way delay plus clock offset, d + δ, µs, wrapping (PluriBus 5.3).
    pub owd_us: u32,
    /// Send time of the newest datagram received on this link (sender's clock, low 32 bits).
    pub echo_timestamp: u32,
    /// µs from that datagram's arrival to this report.
    pub echo_delay_us: u32,
}

impl LinkReport {
    const LEN: usize = 1 + 2 + 4 + 4 + 4 + 4 + 4;

    /// Loss as a probability.
    pub fn loss_rate(&self) -> f64 {
        f64::from(self.loss) / f64::from(u16::MAX)
    }

    /// Encodes a probability for [`Self::loss`].
    pub fn encode_loss(p: f64) -> u16 {
        (p.clamp(0.0, 1.0) * f64::from(u16::MAX)).round() as u16
    }
}

/// A run of sequence numbers the receiver is missing (ARQ).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NackRange {
    /// Low 24 bits of the first missing sequence number.
    pub start: u32,
    /// How many consecutive numbers are missing (1..=255).
    pub len: u8,
}

/// A feedback body.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FeedbackRepr {
    /// Low 24 bits of the cumulative ack: every sequence number below it has been delivered or given
    /// up by the sequencing buffer.
    pub cum_ack: u32,
    /// Low 24 bits of the highest sequence number received.
    pub highest: u32,
    /// How long the receiver's sequencing buffer has lately held a delivered passenger packet, on
    /// average over every packet (those delivered at once count as 0), in ms: the part of the
    /// passengers' round trip that the links' delays do not show, which the sender's CoDel target
    /// follows (`crate::aqm`).
    pub hold_ms: u16,
    /// Per-link reports.
    pub links: Vec<LinkReport>,
    /// Holes the receiver wants retransmitted.
    pub nacks: Vec<NackRange>,
}

impl FeedbackRepr {
    /// Most link reports one feedback carries.
    pub const MAX_LINKS: usize = 32;
    /// Most NACK ranges one feedback carries.
    pub const MAX_NACKS: usize = 64;

    /// Parses a feedback body.
    pub fn parse(body: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(body);
        let cum_ack = r.u24("feedback ack")?;
        let highest = r.u24("feedback highest")?;
        let hold_ms = r.u16("feedback hold")?;
        let n_links = r.u8("feedback link count")? as usize;
        if n_links > Self::MAX_LINKS {
            return Err(WireError::Invalid { field: "feedback link count", why: "too many links" });
        }
        if r.remaining() < n_links * LinkReport::LEN {
            return Err(WireError::Truncated {
                field: "feedback link reports",
                need: n_links * LinkReport::LEN,
                have: r.remaining(),
            });
        }
        let mut links = Vec::with_capacity(n_links);
        for _ in 0..n_links {
            links.push(LinkReport {
                link: LinkId(r.u8("report link")?),
                loss: r.u16("report loss")?,
                capacity_kbps: r.u32("report capacity")?,
                reverse_hint_kbps: r.u32("report reverse hint")?,
                owd_us: r.u32("report delay")?,
                echo_timestamp: r.u32("report echo")?,
                echo_delay_us: r.u32("report echo delay")?,
            });
        }
        let n_nacks = r.u8("feedback nack count")? as usize;
        if n_nacks > Self::MAX_NACKS {
            return Err(WireError::Invalid { field: "feedback nack count", why: "too many ranges" });
        }
        let mut nacks = Vec::with_capacity(n_nacks);
        for _ in 0..n_nacks {
            let start = r.u24("nack start")?;
            let len = r.u8("nack length")?;
            if len == 0 {
                return Err(WireError::Invalid { field: "nack length", why: "zero" });
            }
            nacks.push(NackRange { start, len });
        }
        if r.remaining() != 0 {
            return Err(WireError::Invalid { field: "feedback", why: "trailing bytes" });
        }
        Ok(FeedbackRepr { cum_ack, highest, hold_ms, links, nacks })
    }

    /// Bytes the body takes.
    pub fn len(&self) -> usize {
        3 + 3 + 2 + 1 + self.links.len() * LinkReport::LEN + 1 + self.nacks.len() * 4
    }

    /// Whether the body has no link reports and no NACKs.
    pub fn is_empty(&self) -> bool {
        self.links.is_empty() && self.nacks.is_empty()
    }

    /// Writes the body, returning the bytes written.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        if self.links.len() > Self::MAX_LINKS {
            return Err(WireError::Invalid { field: "feedback link count", why: "too many links" });
        }
        if self.nacks.len() > Self::MAX_NACKS {
            return Err(WireError::Invalid { field: "feedback nack count", why: "too many ranges" });
        }
        let mut w = Writer::new(buf, self.len())?;
        w.u24(self.cum_ack & 0x00ff_ffff);
        w.u24(self.highest & 0x00ff_ffff);
        w.u16(self.hold_ms);
        w.u8(self.links.len() as u8);
        for l in &self.links {
            w.u8(l.link.0);
            w.u16(l.loss);
            w.u32(l.capacity_kbps);
            w.u32(l.reverse_hint_kbps);
            w.u32(l.owd_us);
            w.u32(l.echo_timestamp);
            w.u32(l.echo_delay_us);
        }
        w.u8(self.nacks.len() as u8);
        for n in &self.nacks {
            w.u24(n.start & 0x00ff_ffff);
            w.u8(n.len);
        }
        Ok(w.pos)
    }
}
