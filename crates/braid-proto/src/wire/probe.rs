//! Probes: liveness and round-trip time of one link, answered on the same link. A request may
//! also carry the uplink's name as its sender calls it, so that the server's status and metrics
//! name a vehicle's uplinks as the vehicle does (`lte1`, `wifi`), not by number.

use super::{Reader, WireError, Writer};

/// A probe's body. A request carries zeros in the echo fields; the reply (header flag
/// [`super::FLAG_REPLY`]) echoes the request's send time and says how long the replier held it, so
/// the prober computes the link's RTT without synchronised clocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeRepr {
    /// The sender's name for this uplink, in a request (after the fixed fields: a length byte
    /// and the name; receivers that predate it ignore trailing bytes).
    pub name: Option<LinkName>,
    /// What the sender asks of the receiver's sends on this link, in a request that carries a
    /// name (one byte after it; a named request without it asks nothing). Without a name it is
    /// not sent.
    pub request: Option<LinkRequest>,
    /// Probe number chosen by the prober.
    pub id: u32,
    /// The request's header timestamp (prober's clock), in a reply.
    pub echo_timestamp: u32,
    /// µs between receiving the request and sending the reply.
    pub echo_delay_us: u32,
}

impl ProbeRepr {
    /// Bytes the fixed fields take.
    pub const LEN: usize = 12;

    /// Bytes the body takes, with the name and request.
    pub fn len(&self) -> usize {
        Self::LEN + self.name.map_or(0, |n| 1 + n.as_str().len() + usize::from(self.request.is_some()))
    }

    /// Whether the body is empty (never: the fixed fields are always there).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Parses a probe body.
    pub fn parse(body: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(body);
        let id = r.u32("probe id")?;
        let echo_timestamp = r.u32("probe echo timestamp")?;
        let echo_delay_us = r.u32("probe echo delay")?;
        let name = match r.remaining() {
            0 => None,
            _ => {
                let n = usize::from(r.u8("uplink name length")?);
                Some(LinkName::from_bytes(r.take("uplink name", n)?)?)
            }
        };
        // Anything after the request byte is from a later version: ignored, as the name was.
        let request = match (name, r.remaining()) {
            (Some(_), 1..) => Some(LinkRequest::from_byte(r.u8("link request")?)),
            _ => None,
        };
        Ok(ProbeRepr { name, request, id, echo_timestamp, echo_delay_us })
    }

    /// Writes the body, returning the bytes written.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        let mut w = Writer::new(buf, self.len())?;
        w.u32(self.id);
        w.u32(self.echo_timestamp);
        w.u32(self.echo_delay_us);
        if let Some(n) = &self.name {
            // At most MAX_LINK_NAME (32) bytes: fits the length byte.
            w.u8(n.len as u8);
            w.bytes(n.as_str().as_bytes());
            if let Some(r) = self.request {
                w.u8(r.to_byte());
            }
        }
        Ok(w.pos)
    }
}

/// What one end asks of the other's sends on a link: a vehicle whose monthly data allowance on
/// an uplink is nearly used asks the server to stop coding there, and once it is used up, to
/// treat the uplink as a backup, so that the allowance bounds both directions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LinkRequest {
    /// Send no coded packets on the link.
    pub no_coding: bool,
    /// Use the link only while no other is usable (the receiver's `Metering::backup`).
    pub backup: bool,
}

impl LinkRequest {
    const NO_CODING: u8 = 1;
    const BACKUP: u8 = 2;

    /// The byte it travels as (bits this version does not know are ignored when read).
    pub fn to_byte(self) -> u8 {
        (u8::from(self.no_coding) * Self::NO_CODING) | (u8::from(self.backup) * Self::BACKUP)
    }

    /// Reads the byte.
    pub fn from_byte(b: u8) -> Self {
        LinkRequest { no_coding: b & Self::NO_CODING != 0, backup: b & Self::BACKUP != 0 }
    }
}

/// Longest uplink name a probe carries, in bytes.
pub const MAX_LINK_NAME: usize = 32;

/// An uplink's name as carried in probes: 1 to [`MAX_LINK_NAME`] characters from `A-Z a-z 0-9
/// . _ : -`, so that it can go into logs, JSON and Prometheus label values as it is.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct LinkName {
    len: usize,
    bytes: [u8; MAX_LINK_NAME],
}

impl LinkName {
    /// The name, if it is one.
    pub fn new(s: &str) -> Result<Self, WireError> {
        Self::from_bytes(s.as_bytes())
    }

    fn from_bytes(b: &[u8]) -> Result<Self, WireError> {
        if b.is_empty() || b.len() > MAX_LINK_NAME {
            return Err(WireError::Invalid { field: "uplink name", why: "must be 1 to 32 bytes" });
        }
        if !b.iter().all(|c| c.is_ascii_alphanumeric() || b"._:-".contains(c)) {
            return Err(WireError::Invalid { field: "uplink name", why: "only A-Z a-z 0-9 . _ : - are allowed" });
        }
        let mut bytes = [0u8; MAX_LINK_NAME];
        bytes[..b.len()].copy_from_slice(b);
        Ok(LinkName { len: b.len(), bytes })
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        // Only ASCII is ever stored (checked in from_bytes).
        std::str::from_utf8(&self.bytes[..self.len]).unwrap_or_default()
    }
}

impl std::fmt::Debug for LinkName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

impl std::fmt::Display for LinkName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_bad_ones_are_refused() {
        let named = ProbeRepr {
            id: 7,
            echo_timestamp: 0,
            echo_delay_us: 0,
            name: Some(LinkName::new("lte1").unwrap()),
            request: None,
        };
        let mut buf = [0u8; 64];
        let n = named.emit(&mut buf).unwrap();
        assert_eq!(n, 12 + 1 + 4);
        assert_eq!(ProbeRepr::parse(&buf[..n]).unwrap(), named);
        // Without a name: the old 12 bytes, read as before.
        let plain = ProbeRepr { name: None, ..named };
        assert_eq!(plain.emit(&mut buf).unwrap(), 12);
        assert_eq!(ProbeRepr::parse(&buf[..12]).unwrap(), plain);
        // A length beyond the datagram, too long, empty, or characters outside the set: malformed.
        let n = named.emit(&mut buf).unwrap();
        assert!(ProbeRepr::parse(&buf[..n - 1]).is_err());
        for bad in ["", "a\"b", "lte 1", "wlan0\n", "ünicode", &"x".repeat(33)] {
            assert!(LinkName::new(bad).is_err(), "{bad:?}");
        }
        buf[12] = 0;
        assert!(ProbeRepr::parse(&buf[..13]).is_err(), "an empty name");
        buf[12] = 33;
        buf[13..46].fill(b'x');
        assert!(ProbeRepr::parse(&buf[..46]).is_err(), "33 bytes");
        assert_eq!(LinkName::new(&"x".repeat(32)).unwrap().as_str().len(), 32);
    }

    #[test]
    fn a_request_rides_after_the_name_and_unknown_bits_are_ignored() {
        let mut buf = [0u8; 64];
        for request in [
            LinkRequest { no_coding: true, backup: false },
            LinkRequest { no_coding: true, backup: true },
            LinkRequest::default(),
        ] {
            let p = ProbeRepr {
                id: 9,
                echo_timestamp: 0,
                echo_delay_us: 0,
                name: Some(LinkName::new("lte0").unwrap()),
                request: Some(request),
            };
            let n = p.emit(&mut buf).unwrap();
            assert_eq!(n, 12 + 1 + 4 + 1);
            assert_eq!(ProbeRepr::parse(&buf[..n]).unwrap(), p);
            // A receiver of the version before reads the name and stops there: the byte after
            // it is what it ignores (the name test above parses 12 + 1 + 4 bytes exactly).
        }
        buf[17] = 0xfe;
        assert_eq!(ProbeRepr::parse(&buf[..18]).unwrap().request, Some(LinkRequest { no_coding: false, backup: true }));
        // Without a name no request is sent.
        let p =
            ProbeRepr { id: 1, echo_timestamp: 0, echo_delay_us: 0, name: None, request: Some(LinkRequest::default()) };
        assert_eq!(p.emit(&mut buf).unwrap(), 12);
    }
}
