use super::*;
use crate::link::LinkId;
use proptest::prelude::*;

fn header(ptype: PacketType, flags: u8) -> Header {
    Header { ptype, flags, session: 0xabcd, link: LinkId(3), link_seq: 0x123456, timestamp: 0xdead_beef }
}

#[test]
fn header_round_trip_and_layout() {
    let h = header(PacketType::Data, FLAG_ACK);
    let mut buf = [0u8; 16];
    assert_eq!(h.emit(&mut buf).unwrap(), HEADER_LEN);
    assert_eq!(buf[0], (VERSION << 6) | (1 << 2) | FLAG_ACK);
    assert_eq!(&buf[1..3], &[0xab, 0xcd], "session id");
    assert_eq!(buf[LINK_ID_OFFSET], 3);
    assert_eq!(&buf[LINK_SEQ_OFFSET..LINK_SEQ_OFFSET + 3], &[0x12, 0x34, 0x56], "per-link sequence number");
    let (back, rest) = Header::parse(&buf).unwrap();
    assert_eq!(back, h);
    assert_eq!(rest.len(), buf.len() - HEADER_LEN);
}

#[test]
fn header_rejects_bad_version_type_and_truncation() {
    let mut buf = [0u8; HEADER_LEN];
    header(PacketType::Probe, 0).emit(&mut buf).unwrap();
    let mut bad = buf;
    // A version 1 peer (24-bit session ids) is told apart, not misread.
    bad[0] = (1 << 6) | (bad[0] & 0x3f);
    assert_eq!(Header::parse(&bad), Err(WireError::BadVersion(1)));
    let mut bad = buf;
    bad[0] = (VERSION << 6) | (15 << 2);
    assert_eq!(Header::parse(&bad), Err(WireError::UnknownType(15)));
    assert!(matches!(Header::parse(&buf[..7]), Err(WireError::Truncated { .. })));
    assert!(matches!(Header::parse(&[]), Err(WireError::Truncated { .. })));
    let too_big = Header { session: 1 << 16, ..header(PacketType::Data, 0) };
    assert!(too_big.emit(&mut [0u8; 12]).is_err());
}

#[test]
fn data_overhead_fits_wireguard_budget() {
    // outer IPv4 (20) + UDP (8) + braid data header, with its piggybacked ack, + AEAD tag (16) <=
    // WireGuard's 60.
    const { assert!(20 + 8 + DATA_HEADER_LEN + DATA_ACK_LEN + 16 <= 60, "data header too long for the 60-byte budget") };
    let d = DataRepr { seq: 0xff_ffff, ack: Some(0xffff), payload: &[0x45; 1000] };
    assert_eq!(20 + 8 + HEADER_LEN + d.len() - d.payload.len() + 16, 60);
}

#[test]
fn data_round_trip_with_and_without_ack() {
    for ack in [None, Some(0xfffe)] {
        let d = DataRepr { seq: 77, ack, payload: b"hello passenger" };
        let mut buf = [0u8; 64];
        let n = d.emit(&mut buf).unwrap();
        assert_eq!(n, d.len());
        assert_eq!(DataRepr::parse(d.flags(), &buf[..n]).unwrap(), d);
    }
    assert!(DataRepr::parse(0, &[0, 0, 1]).is_err(), "empty payload is refused");
    assert!(matches!(
        DataRepr { seq: 1, ack: None, payload: b"x" }.emit(&mut [0u8; 3]),
        Err(WireError::BufferTooSmall { .. })
    ));
}

#[test]
fn coded_round_trip() {
    let c = CodedRepr {
        kind: CodeKind::Xor,
        base: 0x10_0000,
        span: 40,
        degree: 7,
        seed: 99,
        len_xor: 1234,
        payload: &[1, 2, 3],
    };
    let mut buf = [0u8; 64];
    let n = c.emit(&mut buf).unwrap();
    assert_eq!(CodedRepr::parse(&buf[..n]).unwrap(), c);
    assert_eq!(c.coverage(0x10_0005).base, 0x10_0000);
}

#[test]
fn coverage_members_are_distinct_sorted_and_in_window() {
    for (span, degree, seed) in
        [(1u16, 1u16, 0u16), (10, 3, 1), (64, 64, 5), (200, 17, 65535), (1000, 999, 7), (5, 9, 2)]
    {
        let c = Coverage { base: 1_000_000, span, degree, seed };
        let m = c.members();
        assert_eq!(m.len(), degree.min(span) as usize);
        assert!(m.windows(2).all(|w| w[0] < w[1]));
        assert!(m.iter().all(|&s| (1_000_000..1_000_000 + u64::from(span)).contains(&s)));
    }
    // Determinism: the wire meaning of a coverage must never change between versions.
    let c = Coverage { base: 42, span: 16, degree: 4, seed: 1234 };
    assert_eq!(c.members(), c.members());
    assert_ne!(c.members(), Coverage { seed: 1235, ..c }.members());
}

#[test]
fn feedback_round_trip() {
    let f = FeedbackRepr {
        cum_ack: 5,
        highest: 9,
        hold_ms: 77,
        links: vec![LinkReport {
            link: LinkId(1),
            loss: LinkReport::encode_loss(0.05),
            capacity_kbps: 1500,
            reverse_hint_kbps: 200,
            owd_us: 0xffff_fff0,
            echo_timestamp: 3,
            echo_delay_us: 4,
        }],
        nacks: vec![NackRange { start: 6, len: 2 }],
    };
    let mut buf = [0u8; 128];
    let n = f.emit(&mut buf).unwrap();
    assert_eq!(n, f.len());
    assert_eq!(FeedbackRepr::parse(&buf[..n]).unwrap(), f);
    assert!(FeedbackRepr::parse(&buf[..n - 1]).is_err());
    let mut trailing = buf[..n + 1].to_vec();
    trailing[n] = 0;
    assert!(FeedbackRepr::parse(&trailing).is_err());
    assert!((f.links[0].loss_rate() - 0.05).abs() < 1e-4);
}

#[test]
fn probe_and_close_round_trip() {
    let p = ProbeRepr { id: 7, echo_timestamp: 8, echo_delay_us: 9, name: None, request: None };
    let mut buf = [0u8; 12];
    p.emit(&mut buf).unwrap();
    assert_eq!(ProbeRepr::parse(&buf).unwrap(), p);
    let c = CloseRepr { reason: 3 };
    c.emit(&mut buf).unwrap();
    assert_eq!(CloseRepr::parse(&buf[..1]).unwrap(), c);
}

/// Parses a datagram the way the session does, body by type. Used by the decoder fuzz tests.
fn parse_any(d: &[u8]) -> Result<(), WireError> {
    let (h, body) = Header::parse(d)?;
    match h.ptype {
        PacketType::Data => DataRepr::parse(h.flags, body).map(|_| ()),
        PacketType::Coded => CodedRepr::parse(body).map(|c| {
            let _ = c.coverage(0).members();
        }),
        PacketType::Feedback => FeedbackRepr::parse(body).map(|_| ()),
        PacketType::Probe => ProbeRepr::parse(body).map(|_| ()),
        PacketType::Close => CloseRepr::parse(body).map(|_| ()),
        PacketType::Handshake => crate::crypto::HandshakeKind::parse(h.flags, body).map(|_| ()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 4096, ..ProptestConfig::default() })]

    #[test]
    fn no_decoder_panics_on_any_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = parse_any(&bytes);
    }

    #[test]
    fn no_decoder_panics_on_any_body_after_a_valid_header(ptype in 0usize..6, flags in 0u8..4, body in proptest::collection::vec(any::<u8>(), 0..200)) {
        let types = [PacketType::Data, PacketType::Coded, PacketType::Feedback, PacketType::Probe, PacketType::Close, PacketType::Handshake];
        let mut d = vec![0u8; HEADER_LEN];
        header(types[ptype], flags).emit(&mut d).unwrap();
        d.extend_from_slice(&body);
        let _ = parse_any(&d);
    }
}
