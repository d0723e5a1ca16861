//! Tests of the RLNC encoder and decoder: a small receiver harness that stores what it has and
//! feeds recovered packets back, as the session does.

use super::*;
use proptest::prelude::*;
use std::collections::HashMap;

/// Packets of varied lengths (1..=1400), content derived from the sequence number.
fn packet(seq: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (seq as usize * 131 + i * 7 + (i >> 8)) as u8).collect()
}

fn encode(packets: &HashMap<u64, Vec<u8>>, cov: &Coverage) -> (Vec<u8>, u16) {
    let members: Vec<(u64, &[u8])> = cov.members().into_iter().map(|s| (s, &packets[&s][..])).collect();
    RlncEncoder.encode(cov, &members).unwrap()
}

/// A receiver: what it has, its decoder, and what was recovered.
struct Rx {
    have: HashMap<u64, Vec<u8>>,
    dec: RlncDecoder,
    recovered: Vec<u64>,
}

impl Rx {
    fn new() -> Self {
        Rx { have: HashMap::new(), dec: RlncDecoder::new(512, Duration::from_secs(1)), recovered: Vec::new() }
    }

    fn accept(&mut self, seq: u64, p: Vec<u8>, recovered: bool) {
        let mut work = vec![(seq, p, recovered)];
        while let Some((s, p, rec)) = work.pop() {
            if self.have.contains_key(&s) {
                continue;
            }
            if rec {
                self.recovered.push(s);
            }
            let mut out = Vec::new();
            self.dec.handle_packet(s, &p, &mut out);
            self.have.insert(s, p);
            work.extend(out.into_iter().map(|(s, p)| (s, p, true)));
        }
    }

    fn coded(&mut self, now: Instant, cov: &Coverage, len: u16, payload: &[u8]) {
        let mut out = Vec::new();
        let have = &self.have;
        self.dec.handle_coded(
            now,
            cov,
            len,
            payload,
            &|s| have.get(&s).map_or(Known::Missing, |p| Known::Have(p)),
            &mut out,
        );
        for (s, p) in out {
            self.accept(s, p, true);
        }
    }
}

fn window(base: u64, n: u64, lens: impl Fn(u64) -> usize) -> HashMap<u64, Vec<u8>> {
    (base..base + n).map(|s| (s, packet(s, lens(s)))).collect()
}

#[test]
fn coefficients_are_nonzero_and_fixed() {
    let cov = Coverage { base: 1000, span: 64, degree: 64, seed: 7 };
    let c = rlnc_coefficients(&cov, 64);
    assert_eq!(c.len(), 64);
    assert!(c.iter().all(|&x| x != 0));
    assert_eq!(c, rlnc_coefficients(&cov, 64), "deterministic");
    assert_ne!(c, rlnc_coefficients(&Coverage { seed: 8, ..cov }, 64), "the seed matters");
    assert_ne!(c, rlnc_coefficients(&Coverage { base: 1001, ..cov }, 64), "the base matters");
    // Pinned: the coefficients are part of the wire format and must never change.
    assert_eq!(rlnc_coefficients(&Coverage { base: 0, span: 4, degree: 4, seed: 0 }, 4), PINNED);
}

/// The first coefficients for base 0, seed 0 (wire format; see `coefficients_are_nonzero_and_fixed`).
const PINNED: [u8; 4] = [180, 172, 248, 210];

#[test]
fn k_losses_among_n_recovered_from_k_coded_packets() {
    let (n, k) = (64u64, 8usize);
    let mut full = 0;
    let trials = 200;
    for t in 0..trials {
        let p = window(t * 1000, n, |s| 40 + (s as usize * 97) % 1361);
        let lost: Vec<u64> = (0..k as u64).map(|i| t * 1000 + (i * 7 + t) % n).collect();
        let mut rx = Rx::new();
        for (&s, pk) in &p {
            if !lost.contains(&s) {
                rx.accept(s, pk.clone(), false);
            }
        }
        for j in 0..k as u16 {
            let cov = Coverage { base: t * 1000, span: n as u16, degree: n as u16, seed: j };
            let (payload, len) = encode(&p, &cov);
            rx.coded(Instant::ZERO, &cov, len, &payload);
        }
        for s in &rx.recovered {
            assert_eq!(rx.have[s], p[s], "recovered packet {s} exactly, length included");
        }
        if rx.recovered.len() == k {
            full += 1;
        }
    }
    // A random k x k matrix over GF(256) is singular with probability about 1/255.
    assert!(full >= trials - 5, "{full}/{trials} windows fully recovered from exactly k coded packets");
}

#[test]
fn coded_before_data_is_kept_and_solved_by_later_arrivals() {
    let p = window(0, 10, |s| 100 + s as usize);
    let mut rx = Rx::new();
    // Three coded packets arrive while 0..10 are all missing: rank 3, 10 unknowns.
    for seed in 0..3 {
        let cov = Coverage { base: 0, span: 10, degree: 10, seed };
        let (payload, len) = encode(&p, &cov);
        rx.coded(Instant::ZERO, &cov, len, &payload);
    }
    assert_eq!(rx.dec.pending(), 3);
    assert!(rx.recovered.is_empty());
    // Six data packets arrive: 7 unknowns... then the seventh leaves 3 unknowns for 3 equations.
    for s in 0..7 {
        rx.accept(s, p[&s].clone(), false);
    }
    let mut got = rx.recovered.clone();
    got.sort_unstable();
    assert_eq!(got, vec![7, 8, 9]);
    for s in 7..10 {
        assert_eq!(rx.have[&s], p[&s]);
    }
    assert_eq!(rx.dec.pending(), 0);
    assert_eq!(rx.dec.stats().recovered_later, 3);
}

#[test]
fn useless_and_redundant_packets_cost_nothing_and_are_counted() {
    let p = window(0, 8, |_| 50);
    let mut rx = Rx::new();
    for s in 0..8 {
        rx.accept(s, p[&s].clone(), false);
    }
    let cov = Coverage::all(0, 8);
    let (payload, len) = encode(&p, &cov);
    rx.coded(Instant::ZERO, &cov, len, &payload);
    assert_eq!(rx.dec.stats().useless, 1);
    // Same equation twice while two are missing: the second is not innovative.
    let mut rx = Rx::new();
    for s in 2..8 {
        rx.accept(s, p[&s].clone(), false);
    }
    rx.coded(Instant::ZERO, &cov, len, &payload);
    rx.coded(Instant::ZERO, &cov, len, &payload);
    assert_eq!(rx.dec.stats().useless, 1);
    assert_eq!(rx.dec.pending(), 1);
}

#[test]
fn forged_and_inconsistent_input_is_discarded_never_delivered() {
    let p = window(0, 6, |s| 30 + 10 * s as usize);
    let cov = Coverage { base: 0, span: 6, degree: 6, seed: 1 };
    let (payload, len) = encode(&p, &cov);

    // A member longer than the payload.
    let mut rx = Rx::new();
    for s in 1..6 {
        rx.accept(s, p[&s].clone(), false);
    }
    rx.coded(Instant::ZERO, &cov, len, &payload[..20]);
    assert_eq!(rx.dec.stats().discarded, 1);

    // A corrupted length field: the recovered length would not fit, or the padding is not zero.
    rx.coded(Instant::ZERO, &cov, len ^ 0x4000, &payload);
    let mut bad = payload.clone();
    *bad.last_mut().unwrap() ^= 1;
    rx.coded(Instant::ZERO, &cov, len, &bad);
    assert!(rx.recovered.is_empty());
    assert_eq!(rx.dec.stats().discarded, 3);

    // Two equations over the same two unknowns, one with a corrupted length symbol: the solution
    // is wrong for both unknowns, and the length check catches it.
    let mut rx = Rx::new();
    for s in 2..6 {
        rx.accept(s, p[&s].clone(), false);
    }
    let cov2 = Coverage { seed: 2, ..cov };
    let (pb, lb) = encode(&p, &cov2);
    rx.coded(Instant::ZERO, &cov, len, &payload);
    rx.coded(Instant::ZERO, &cov2, lb ^ 0x4000, &pb);
    assert!(rx.recovered.is_empty());
    assert_eq!(rx.dec.stats().discarded, 2);

    // Forgotten members, an empty window and an absurd span.
    let mut out = Vec::new();
    let mut d = RlncDecoder::new(16, Duration::from_secs(1));
    d.handle_coded(Instant::ZERO, &cov, len, &payload, &|_| Known::Forgotten, &mut out);
    let huge = Coverage { base: 0, span: u16::MAX, degree: u16::MAX, seed: 0 };
    d.handle_coded(Instant::ZERO, &huge, len, &payload, &|_| Known::Missing, &mut out);
    assert!(out.is_empty());
    assert_eq!(d.stats().discarded, 2);
}

#[test]
fn kept_equations_are_bounded_and_expire() {
    let p = window(0, 40, |_| 20);
    let mut d = RlncDecoder::new(4, Duration::from_millis(100));
    let mut out = Vec::new();
    for seed in 0..10 {
        let cov = Coverage { base: 0, span: 40, degree: 40, seed };
        let (payload, len) = encode(&p, &cov);
        d.handle_coded(Instant::from_millis(u64::from(seed)), &cov, len, &payload, &|_| Known::Missing, &mut out);
    }
    assert_eq!(d.pending(), 4);
    let cov = Coverage { base: 100, span: 1, degree: 1, seed: 0 };
    d.handle_coded(Instant::from_millis(500), &cov, 1, &[1], &|_| Known::Have(&[1]), &mut out);
    assert_eq!(d.pending(), 0);
    assert!(out.is_empty());
}

#[test]
fn sparse_coverage_and_single_member_repairs_decode() {
    let p = window(50, 30, |s| 1 + s as usize % 300);
    let mut rx = Rx::new();
    for s in 50..80 {
        if s != 61 && s != 70 {
            rx.accept(s, p[&s].clone(), false);
        }
    }
    // A degree-1 repair of 61, then sparse codes until 70 is covered.
    let one = Coverage { base: 61, span: 1, degree: 1, seed: 9 };
    let (payload, len) = encode(&p, &one);
    rx.coded(Instant::ZERO, &one, len, &payload);
    assert_eq!(rx.recovered, vec![61]);
    for seed in 0..50 {
        let cov = Coverage { base: 50, span: 30, degree: 5, seed };
        let (payload, len) = encode(&p, &cov);
        rx.coded(Instant::ZERO, &cov, len, &payload);
    }
    assert_eq!(rx.recovered, vec![61, 70]);
    assert_eq!(rx.have[&70], p[&70]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Random windows, lengths and loss of data and coded packets, in a random arrival order:
    /// whatever is decoded equals what was sent, and with a few more coded packets than losses
    /// everything is decoded.
    #[test]
    fn decoded_equals_sent(
        base in 0u64..1_000_000,
        n in 1u64..80,
        lens in proptest::collection::vec(1usize..1400, 80),
        data_lost in proptest::collection::vec(any::<bool>(), 80),
        coded in 0usize..24,
        order_seed in any::<u64>(),
        degree in prop_oneof![Just(None), (1u16..20).prop_map(Some)],
    ) {
        let p = window(base, n, |s| lens[(s - base) as usize]);
        let mut events: Vec<(u64, bool)> = (0..n).filter(|&i| !data_lost[i as usize]).map(|i| (base + i, false)).collect();
        events.extend((0..coded as u64).map(|j| (j, true)));
        // Shuffle with the wire's PRNG (any deterministic shuffle will do).
        let mut rng = SplitMix64(order_seed);
        for i in (1..events.len()).rev() {
            let j = (rng.next() % (i as u64 + 1)) as usize;
            events.swap(i, j);
        }
        let mut rx = Rx::new();
        for (x, is_coded) in events {
            if is_coded {
                let d = degree.unwrap_or(n as u16);
                let cov = Coverage { base, span: n as u16, degree: d, seed: x as u16 };
                let (payload, len) = encode(&p, &cov);
                rx.coded(Instant::ZERO, &cov, len, &payload);
            } else {
                rx.accept(x, p[&x].clone(), false);
            }
        }
        for s in &rx.recovered {
            prop_assert_eq!(&rx.have[s], &p[s]);
        }
        for (s, pk) in &rx.have {
            prop_assert_eq!(pk, &p[s]);
        }
        let missing = (0..n).filter(|&i| data_lost[i as usize]).count();
        if degree.is_none() && coded >= missing + 3 {
            prop_assert_eq!(rx.have.len() as u64, n, "dense code, {} coded for {} missing", coded, missing);
        }
    }
}
