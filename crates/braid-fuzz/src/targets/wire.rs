//! Wire parsers (`braid_proto::wire`): the common header and every body, on their own and as whole
//! datagrams. Whatever parses must emit back to exactly the bytes it came from (parse, don't
//! validate: the representation holds everything the bytes said).

use super::{Target, Verdict};
use braid_proto::LinkId;
use braid_proto::wire::{
    CloseRepr, CodeKind, CodedRepr, DataRepr, FeedbackRepr, HEADER_LEN, Header, LinkReport, NackRange, PacketType,
    ProbeRepr, WireError,
};

/// The 12-byte common header.
pub(super) const HEADER: Target = Target {
    name: "wire-header",
    about: "wire::Header::parse, round trip through emit",
    text: false,
    max_len: 64,
    run: header,
    seeds: || datagram_seeds().into_iter().map(|d| d[..HEADER_LEN.min(d.len())].to_vec()).collect(),
};

/// Data bodies; the first input byte is the header's flags.
pub(super) const DATA: Target = Target {
    name: "wire-data",
    about: "wire::DataRepr::parse (first byte: header flags), round trip",
    text: false,
    max_len: 2048,
    run: data,
    seeds: || bodies(PacketType::Data),
};

/// Coded bodies, and the coverage they describe.
pub(super) const CODED: Target = Target {
    name: "wire-coded",
    about: "wire::CodedRepr::parse, round trip, Coverage::members and rlnc_coefficients of what parses",
    text: false,
    max_len: 2048,
    run: coded,
    seeds: || bodies(PacketType::Coded),
};

/// Feedback bodies: link reports and NACK ranges.
pub(super) const FEEDBACK: Target = Target {
    name: "wire-feedback",
    about: "wire::FeedbackRepr::parse (link reports, NACK ranges), round trip",
    text: false,
    max_len: 2048,
    run: feedback,
    seeds: || bodies(PacketType::Feedback),
};

/// Probe bodies.
pub(super) const PROBE: Target = Target {
    name: "wire-probe",
    about: "wire::ProbeRepr::parse, round trip",
    text: false,
    max_len: 64,
    run: probe,
    seeds: || bodies(PacketType::Probe),
};

/// Close bodies.
pub(super) const CLOSE: Target = Target {
    name: "wire-close",
    about: "wire::CloseRepr::parse, round trip",
    text: false,
    max_len: 16,
    run: close,
    seeds: || bodies(PacketType::Close),
};

/// Whole datagrams: the header, then the body its type names.
pub(super) const DATAGRAM: Target = Target {
    name: "wire-datagram",
    about: "Header::parse then the body parser the type names, as the session does; round trip",
    text: false,
    max_len: 2048,
    run: datagram,
    seeds: datagram_seeds,
};

fn header(input: &[u8]) -> Verdict {
    let Ok((h, rest)) = Header::parse(input) else { return Verdict::Rejected };
    assert_eq!(rest, &input[HEADER_LEN..], "header consumes exactly {HEADER_LEN} bytes");
    let mut buf = [0u8; HEADER_LEN];
    assert_eq!(h.emit(&mut buf), Ok(HEADER_LEN));
    assert_eq!(&buf[..], &input[..HEADER_LEN], "header round trip");
    Verdict::Accepted
}

fn data(input: &[u8]) -> Verdict {
    let Some((&flags, body)) = input.split_first() else { return Verdict::Rejected };
    let Ok(d) = DataRepr::parse(flags, body) else { return Verdict::Rejected };
    assert!(!d.is_empty());
    assert_eq!(round_trip(d.len(), |b| d.emit(b)), body, "data round trip");
    Verdict::Accepted
}

fn coded(input: &[u8]) -> Verdict {
    let Ok(c) = CodedRepr::parse(input) else { return Verdict::Rejected };
    assert_eq!(round_trip(c.len(), |b| c.emit(b)), input, "coded round trip");
    // The coverage is computed by every receiver from attacker-chosen fields: it must stay a
    // sorted set of `min(degree, span)` numbers inside the window, whatever they are.
    let expected = u64::from(input.len() as u32) << 20;
    let cov = c.coverage(expected);
    let members = cov.members();
    assert_eq!(members.len(), usize::from(cov.degree.min(cov.span)), "member count");
    assert!(members.windows(2).all(|w| w[0] < w[1]), "members ascending and distinct");
    assert!(members.iter().all(|&m| m >= cov.base && m < cov.base + u64::from(cov.span)), "members in the window");
    let n = members.len().min(braid_proto::recovery::MAX_MEMBERS);
    let coefs = braid_proto::recovery::rlnc_coefficients(&cov, n);
    assert!(coefs.len() == n && coefs.iter().all(|&c| c != 0), "rlnc coefficients nonzero");
    Verdict::Accepted
}

fn feedback(input: &[u8]) -> Verdict {
    let Ok(f) = FeedbackRepr::parse(input) else { return Verdict::Rejected };
    assert!(f.links.len() <= FeedbackRepr::MAX_LINKS && f.nacks.len() <= FeedbackRepr::MAX_NACKS);
    assert!(f.nacks.iter().all(|n| n.len > 0 && n.start < 1 << 24));
    assert_eq!(round_trip(f.len(), |b| f.emit(b)), input, "feedback round trip");
    Verdict::Accepted
}

fn probe(input: &[u8]) -> Verdict {
    let Ok(p) = ProbeRepr::parse(input) else { return Verdict::Rejected };
    // A request byte's bits this version does not know are ignored (a later version may add
    // some), so they do not come back; everything else does, byte for byte.
    let mut expected = input[..p.len()].to_vec();
    if let (Some(r), Some(last)) = (p.request, expected.last_mut()) {
        *last = r.to_byte();
    }
    assert_eq!(round_trip(p.len(), |b| p.emit(b)), expected, "probe round trip");
    Verdict::Accepted
}

fn close(input: &[u8]) -> Verdict {
    let Ok(c) = CloseRepr::parse(input) else { return Verdict::Rejected };
    assert_eq!(round_trip(1, |b| c.emit(b)), &input[..1], "close round trip");
    Verdict::Accepted
}

fn datagram(input: &[u8]) -> Verdict {
    let Ok((h, body)) = Header::parse(input) else { return Verdict::Rejected };
    let ok = match h.ptype {
        PacketType::Data => data(&[&[h.flags][..], body].concat()) == Verdict::Accepted,
        PacketType::Coded => coded(body) == Verdict::Accepted,
        PacketType::Feedback => feedback(body) == Verdict::Accepted,
        PacketType::Probe => probe(body) == Verdict::Accepted,
        PacketType::Close => close(body) == Verdict::Accepted,
        PacketType::Handshake => braid_proto::crypto::HandshakeKind::parse(h.flags, body).is_ok(),
    };
    Verdict::from_ok(ok)
}

/// Emits into a buffer of exactly `len` bytes (a too-small buffer must be refused, not overrun:
/// tried first) and returns what was written.
fn round_trip(len: usize, emit: impl Fn(&mut [u8]) -> Result<usize, WireError>) -> Vec<u8> {
    if len > 0 {
        let mut short = vec![0u8; len - 1];
        assert!(matches!(emit(&mut short), Err(WireError::BufferTooSmall { .. })), "short buffer refused");
    }
    let mut buf = vec![0u8; len + 8];
    let n = emit(&mut buf).expect("a parsed representation emits");
    assert_eq!(n, len, "emit writes len() bytes");
    buf.truncate(n);
    buf
}

/// Datagrams from the real emitters: a hand-made set covering every type and flag, plus the
/// datagrams a live session pair exchanged under every recovery scheme.
fn datagram_seeds() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (ptype, flags, body) in handmade_bodies() {
        let h = Header { ptype, flags, session: 0xabcd, link: LinkId(1), link_seq: 0x12_3456, timestamp: 7 };
        let mut d = vec![0u8; HEADER_LEN];
        h.emit(&mut d).expect("12 bytes");
        d.extend_from_slice(&body);
        out.push(d);
    }
    out.extend(super::session::captured_datagrams().iter().take(400).cloned());
    out
}

/// Bodies of one type (with the flags byte in front for data), hand-made and captured.
fn bodies(want: PacketType) -> Vec<Vec<u8>> {
    datagram_seeds()
        .into_iter()
        .filter_map(|d| {
            let (h, body) = Header::parse(&d).ok()?;
            (h.ptype == want)
                .then(|| if want == PacketType::Data { [&[h.flags][..], body].concat() } else { body.to_vec() })
        })
        .collect()
}

/// Every body type, with edge values, from the emitters.
fn handmade_bodies() -> Vec<(PacketType, u8, Vec<u8>)> {
    let emit = |len: usize, f: &dyn Fn(&mut [u8]) -> Result<usize, WireError>| {
        let mut b = vec![0u8; len];
        let n = f(&mut b).expect("seed emits");
        b.truncate(n);
        b
    };
    let mut out = Vec::new();
    for (ack, payload) in [(None, &b"x"[..]), (Some(0xffff), &[0x45u8; 60][..])] {
        let d = DataRepr { seq: 0xff_fffe, ack, payload };
        out.push((PacketType::Data, d.flags() | braid_proto::wire::FLAG_NACK_WANTED, emit(d.len(), &|b| d.emit(b))));
    }
    for (kind, span, degree) in [(CodeKind::Xor, 4, 4), (CodeKind::Rlnc, 300, 7), (CodeKind::Fountain, 16, 16)] {
        let c = CodedRepr { kind, base: 0xff_fff0, span, degree, seed: 9, len_xor: 3, payload: &[1, 2, 3, 4, 5] };
        out.push((PacketType::Coded, 0, emit(c.len(), &|b| c.emit(b))));
    }
    let f = FeedbackRepr {
        cum_ack: 10,
        highest: 20,
        hold_ms: 77,
        links: vec![LinkReport {
            link: LinkId(0),
            loss: LinkReport::encode_loss(0.1),
            capacity_kbps: 5000,
            reverse_hint_kbps: 2000,
            owd_us: 30_000,
            echo_timestamp: 1,
            echo_delay_us: 2,
        }],
        nacks: vec![NackRange { start: 11, len: 3 }, NackRange { start: 0xff_ffff, len: 255 }],
    };
    out.push((PacketType::Feedback, 0, emit(f.len(), &|b| f.emit(b))));
    let p = ProbeRepr { id: 1, echo_timestamp: 2, echo_delay_us: 3, name: None, request: None };
    out.push((PacketType::Probe, braid_proto::wire::FLAG_REPLY, emit(ProbeRepr::LEN, &|b| p.emit(b))));
    let named = ProbeRepr { name: braid_proto::wire::LinkName::new("lte1").ok(), ..p };
    out.push((PacketType::Probe, 0, emit(named.len(), &|b| named.emit(b))));
    let asking = ProbeRepr { request: Some(braid_proto::wire::LinkRequest { no_coding: true, backup: true }), ..named };
    out.push((PacketType::Probe, 0, emit(asking.len(), &|b| asking.emit(b))));
    out.push((PacketType::Close, 0, emit(1, &|b| CloseRepr { reason: 7 }.emit(b))));
    out
}
