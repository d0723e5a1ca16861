//! TCP MSS clamping (PluriBus 5.4).
//!
//! Passengers' TCP does not know that its packets travel inside braid datagrams, so a SYN
//! advertising the LAN's MSS would make the peer send segments the tunnel cannot carry without
//! fragmenting. Every SYN entering the tunnel, on either side, gets its MSS option lowered to what
//! fits the TUN MTU; the TCP checksum is fixed incrementally (RFC 1624).

/// IPv4 protocol number of TCP.
const TCP: u8 = 6;
/// TCP option kinds.
const OPT_END: u8 = 0;
const OPT_NOP: u8 = 1;
const OPT_MSS: u8 = 2;

/// Lowers the MSS option of a TCP SYN (IPv4 or IPv6, no extension headers) to what fits `mtu`.
/// Returns whether the packet was changed. Anything that is not a well-formed SYN is left alone.
pub fn clamp_mss(packet: &mut [u8], mtu: u16) -> bool {
    let Some(&b0) = packet.first() else { return false };
    let (tcp_off, max_mss) = match b0 >> 4 {
        4 => {
            if packet.len() < 20 {
                return false;
            }
            let ihl = usize::from(b0 & 0x0f) * 4;
            let frag = u16::from_be_bytes([packet[6], packet[7]]);
            // Only the first fragment carries the TCP header; a fragmented SYN is left alone.
            if ihl < 20 || packet[9] != TCP || frag & 0x3fff != 0 {
                return false;
            }
            (ihl, mtu.saturating_sub(40))
        }
        6 => {
            if packet.len() < 40 || packet[6] != TCP {
                return false;
            }
            (40, mtu.saturating_sub(60))
        }
        _ => return false,
    };
    let Some(tcp) = packet.get_mut(tcp_off..) else { return false };
    if tcp.len() < 20 || tcp[13] & 0x02 == 0 {
        return false;
    }
    let data_off = usize::from(tcp[12] >> 4) * 4;
    if data_off < 20 || data_off > tcp.len() {
        return false;
    }
    let mut i = 20;
    while i < data_off {
        match tcp[i] {
            OPT_END => return false,
            OPT_NOP => i += 1,
            kind => {
                let Some(&len) = tcp.get(i + 1) else { return false };
                let len = usize::from(len);
                if len < 2 || i + len > data_off {
                    return false;
                }
                if kind == OPT_MSS && len == 4 {
                    let old = u16::from_be_bytes([tcp[i + 2], tcp[i + 3]]);
                    if old <= max_mss {
                        return false;
                    }
                    tcp[i + 2..i + 4].copy_from_slice(&max_mss.to_be_bytes());
                    let sum = u16::from_be_bytes([tcp[16], tcp[17]]);
                    tcp[16..18].copy_from_slice(&checksum_update(sum, old, max_mss).to_be_bytes());
                    return true;
                }
                i += len;
            }
        }
    }
    false
}

/// RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m'), for one 16-bit word changing from `old` to `new`.
fn checksum_update(sum: u16, old: u16, new: u16) -> u16 {
    let mut acc = u32::from(!sum) + u32::from(!old) + u32::from(new);
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fold(mut acc: u32) -> u16 {
        while acc > 0xffff {
            acc = (acc & 0xffff) + (acc >> 16);
        }
        !(acc as u16)
    }

    fn sum_words(b: &[u8]) -> u32 {
        b.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))).sum()
    }

    /// The TCP checksum computed from scratch over the IPv4 pseudo-header.
    fn tcp4_checksum(p: &[u8]) -> u16 {
        let tcp = &p[20..];
        let pseudo = sum_words(&p[12..20]) + u32::from(TCP) + tcp.len() as u32;
        let mut t = tcp.to_vec();
        t[16] = 0;
        t[17] = 0;
        fold(pseudo + sum_words(&t))
    }

    fn tcp6_checksum(p: &[u8]) -> u16 {
        let tcp = &p[40..];
        let pseudo = sum_words(&p[8..40]) + u32::from(TCP) + tcp.len() as u32;
        let mut t = tcp.to_vec();
        t[16] = 0;
        t[17] = 0;
        fold(pseudo + sum_words(&t))
    }

    /// A SYN with options NOP, NOP, SACK-permitted, MSS.
    fn tcp_syn(mss: u16, flags: u8) -> Vec<u8> {
        let mut t = vec![0u8; 28];
        t[0..2].copy_from_slice(&40000u16.to_be_bytes());
        t[2..4].copy_from_slice(&80u16.to_be_bytes());
        t[4..8].copy_from_slice(&0x1234_5678u32.to_be_bytes());
        t[12] = 7 << 4;
        t[13] = flags;
        t[14..16].copy_from_slice(&64240u16.to_be_bytes());
        t[20..28].copy_from_slice(&[1, 1, 4, 2, 2, 4, (mss >> 8) as u8, mss as u8]);
        t
    }

    fn ipv4_syn(mss: u16, flags: u8) -> Vec<u8> {
        let tcp = tcp_syn(mss, flags);
        let mut p = vec![0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, TCP, 0, 0, 10, 0, 0, 2, 93, 184, 216, 34];
        let total = (20 + tcp.len()) as u16;
        p[2..4].copy_from_slice(&total.to_be_bytes());
        p.extend_from_slice(&tcp);
        let c = tcp4_checksum(&p);
        p[36..38].copy_from_slice(&c.to_be_bytes());
        p
    }

    fn ipv6_syn(mss: u16) -> Vec<u8> {
        let tcp = tcp_syn(mss, 0x02);
        let mut p = vec![0u8; 40];
        p[0] = 0x60;
        p[4..6].copy_from_slice(&(tcp.len() as u16).to_be_bytes());
        p[6] = TCP;
        p[7] = 64;
        p[8] = 0xfd;
        p[23] = 2;
        p[24] = 0x20;
        p[25] = 0x01;
        p[39] = 1;
        p.extend_from_slice(&tcp);
        let c = tcp6_checksum(&p);
        p[56..58].copy_from_slice(&c.to_be_bytes());
        p
    }

    #[test]
    fn ipv4_syn_is_clamped_with_a_valid_checksum() {
        for flags in [0x02, 0x12] {
            let mut p = ipv4_syn(1460, flags);
            assert!(clamp_mss(&mut p, 1432));
            assert_eq!(u16::from_be_bytes([p[46], p[47]]), 1392);
            assert_eq!(u16::from_be_bytes([p[36], p[37]]), tcp4_checksum(&p));
        }
    }

    #[test]
    fn ipv6_syn_is_clamped_with_a_valid_checksum() {
        let mut p = ipv6_syn(1440);
        assert!(clamp_mss(&mut p, 1432));
        assert_eq!(u16::from_be_bytes([p[66], p[67]]), 1372);
        assert_eq!(u16::from_be_bytes([p[56], p[57]]), tcp6_checksum(&p));
    }

    #[test]
    fn small_mss_and_non_syn_are_left_alone() {
        let mut p = ipv4_syn(1200, 0x02);
        let orig = p.clone();
        assert!(!clamp_mss(&mut p, 1432));
        let mut ack = ipv4_syn(1460, 0x10);
        assert!(!clamp_mss(&mut ack, 1432));
        assert_eq!(p, orig);
    }

    #[test]
    fn malformed_input_never_panics() {
        let good = ipv4_syn(1460, 0x02);
        for cut in 0..good.len() {
            let mut p = good[..cut].to_vec();
            clamp_mss(&mut p, 1432);
        }
        let mut bad_len = good.clone();
        bad_len[41] = 0xff; // option length running past the header
        assert!(!clamp_mss(&mut bad_len, 1432));
        let mut zero_len = good.clone();
        zero_len[43] = 0; // SACK-permitted with length 0
        assert!(!clamp_mss(&mut zero_len, 1432));
        for seed in 0u32..2000 {
            let mut p: Vec<u8> =
                (0..60).map(|i| (seed.wrapping_mul(2654435761).wrapping_add(i * 97) >> 7) as u8).collect();
            p[0] = 0x45;
            p[9] = TCP;
            clamp_mss(&mut p, 1432);
        }
    }
}
