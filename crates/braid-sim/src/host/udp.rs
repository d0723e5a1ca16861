//! Constant-bit-rate UDP probes (the `cbr` workload, docs/design.md 5): real UDP/IPv4 packets, with
//! correct checksums, that carry a sequence number and their send time so the receiver can
//! measure residual loss, one-way delay and jitter (docs/design.md 6).
//!
//! Payload: magic `b"bCBR"`, sequence number (u64, big endian), send time in microseconds (u64,
//! big endian), then zeros up to the requested size.

use std::net::SocketAddrV4;

use braid_proto::Instant;
use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{IpAddress, IpProtocol, Ipv4Packet, Ipv4Repr, UdpPacket, UdpRepr};

/// Marks a probe among other UDP traffic.
const MAGIC: [u8; 4] = *b"bCBR";
/// IPv4 header (no options) + UDP header.
const HEADERS: usize = 20 + 8;
/// Magic + sequence number + send time.
const PROBE_FIELDS: usize = 4 + 8 + 8;
/// The smallest probe: headers and the probe fields. Smaller requested sizes are raised to it.
pub const CBR_MIN_SIZE: usize = HEADERS + PROBE_FIELDS;
/// The largest probe: the IPv4 maximum.
pub const CBR_MAX_SIZE: usize = 65_535;

/// A probe of `size` bytes in all (clamped to [`CBR_MIN_SIZE`]..=[`CBR_MAX_SIZE`]) from `src` to
/// `dst`, numbered `seq` and stamped with its send time `sent`.
pub fn cbr_packet(src: SocketAddrV4, dst: SocketAddrV4, seq: u64, sent: Instant, size: usize) -> Vec<u8> {
    let size = size.clamp(CBR_MIN_SIZE, CBR_MAX_SIZE);
    let payload_len = size - HEADERS;
    let mut buf = vec![0; size];
    let ip = Ipv4Repr {
        src_addr: *src.ip(),
        dst_addr: *dst.ip(),
        next_header: IpProtocol::Udp,
        payload_len: 8 + payload_len,
        hop_limit: 64,
    };
    let checksums = ChecksumCapabilities::default();
    let mut ip_packet = Ipv4Packet::new_unchecked(&mut buf[..]);
    ip.emit(&mut ip_packet, &checksums);
    let udp = UdpRepr { src_port: src.port(), dst_port: dst.port() };
    let mut udp_packet = UdpPacket::new_unchecked(ip_packet.payload_mut());
    udp.emit(
        &mut udp_packet,
        &IpAddress::Ipv4(*src.ip()),
        &IpAddress::Ipv4(*dst.ip()),
        payload_len,
        |payload| {
            payload[..4].copy_from_slice(&MAGIC);
            payload[4..12].copy_from_slice(&seq.to_be_bytes());
            payload[12..20].copy_from_slice(&sent.as_micros().to_be_bytes());
        },
        &checksums,
    );
    buf
}

/// The sequence number and send time of a probe; `None` for anything that is not an intact
/// probe (bad checksums, truncated, not UDP, no magic).
pub fn parse_cbr(packet: &[u8]) -> Option<(u64, Instant)> {
    let checksums = ChecksumCapabilities::default();
    let ip_packet = Ipv4Packet::new_checked(packet).ok()?;
    let ip = Ipv4Repr::parse(&ip_packet, &checksums).ok()?;
    if ip.next_header != IpProtocol::Udp || ip_packet.more_frags() || ip_packet.frag_offset() != 0 {
        return None;
    }
    let udp_packet = UdpPacket::new_checked(ip_packet.payload()).ok()?;
    UdpRepr::parse(&udp_packet, &IpAddress::Ipv4(ip.src_addr), &IpAddress::Ipv4(ip.dst_addr), &checksums).ok()?;
    let payload = udp_packet.payload();
    if payload.len() < PROBE_FIELDS || payload[..4] != MAGIC {
        return None;
    }
    let seq = u64::from_be_bytes(payload[4..12].try_into().ok()?);
    let sent = u64::from_be_bytes(payload[12..20].try_into().ok()?);
    Some((seq, Instant::from_micros(sent)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::net::Ipv4Addr;

    fn addrs() -> (SocketAddrV4, SocketAddrV4) {
        (SocketAddrV4::new(Ipv4Addr::new(10, 1, 0, 2), 5000), SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 6000))
    }

    #[test]
    fn round_trip_with_valid_checksums() {
        let (src, dst) = addrs();
        let p = cbr_packet(src, dst, 42, Instant::from_micros(1_234_567), 200);
        assert_eq!(p.len(), 200);
        assert_eq!(parse_cbr(&p), Some((42, Instant::from_micros(1_234_567))));
        // Checked independently of parse_cbr: both checksums verify and the ports are right.
        let ip = Ipv4Packet::new_checked(&p[..]).unwrap();
        assert!(ip.verify_checksum());
        let udp = UdpPacket::new_checked(ip.payload()).unwrap();
        assert!(udp.verify_checksum(&IpAddress::Ipv4(*src.ip()), &IpAddress::Ipv4(*dst.ip())));
        assert_eq!((udp.src_port(), udp.dst_port()), (5000, 6000));
    }

    #[test]
    fn sizes_are_clamped() {
        let (src, dst) = addrs();
        assert_eq!(cbr_packet(src, dst, 1, Instant::ZERO, 0).len(), CBR_MIN_SIZE);
        assert_eq!(cbr_packet(src, dst, 1, Instant::ZERO, 1 << 20).len(), CBR_MAX_SIZE);
        assert!(parse_cbr(&cbr_packet(src, dst, 7, Instant::ZERO, 0)).is_some());
    }

    #[test]
    fn corruption_and_truncation_are_rejected() {
        let (src, dst) = addrs();
        let p = cbr_packet(src, dst, 9, Instant::from_millis(5), 100);
        for i in 0..p.len() {
            let mut q = p.clone();
            q[i] ^= 0x10;
            // One flipped bit anywhere breaks the IP header checksum or the UDP checksum (which
            // covers the addresses through the pseudo-header).
            assert_eq!(parse_cbr(&q), None, "flip at byte {i} accepted");
        }
        assert_eq!(parse_cbr(&p[..p.len() - 1]), None);
        assert_eq!(parse_cbr(&[]), None);
    }

    proptest! {
        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = parse_cbr(&bytes);
        }

        #[test]
        fn any_probe_round_trips(seq in any::<u64>(), t in any::<u64>(), size in 0usize..2000) {
            let (src, dst) = addrs();
            let p = cbr_packet(src, dst, seq, Instant::from_micros(t), size);
            prop_assert_eq!(parse_cbr(&p), Some((seq, Instant::from_micros(t))));
        }
    }
}
