//! Session behaviour end to end over the pair harness.

use super::pair::{Dir, Pair, addr, index_of, packet};
use crate::aqm::AqmConfig;
use crate::link::{LinkId, LinkState};
use crate::recovery::RecoveryKind;
use crate::scheduler::SchedulerKind;
use crate::session::{Role, SealedDatagramError, Session, SessionConfig};
use crate::time::Instant;
use crate::wire::{DATA_ACK_LEN, DATA_HEADER_LEN, DataRepr, FLAG_ACK, Header, PacketType};
use proptest::prelude::*;
use std::time::Duration;

fn cfg(recovery: RecoveryKind, scheduler: SchedulerKind) -> impl Fn(Role) -> SessionConfig {
    move |role| {
        let mut c = SessionConfig::new(role);
        c.recovery = recovery;
        c.scheduler = scheduler;
        c.seed = 7;
        c
    }
}

fn bus() -> [(u64, f64); 2] {
    [(20, 1500.0), (75, 1000.0)]
}

/// Sends `n` packets each way, paced at `gap`, and runs until everything settles.
fn exchange(p: &mut Pair, n: u64, gap: Duration, len: usize) {
    p.advance(Duration::from_millis(500)); // links come up
    for i in 0..n {
        p.send_up(&packet(i, len));
        p.send_down(&packet(i, len));
        p.advance(gap);
    }
    p.advance(Duration::from_secs(2));
}

/// The passenger index ([`packet`]) of a downstream data datagram of `len` >= 500 bytes, for drop
/// rules; `None` for anything else (probes, feedback, coded, upstream).
fn down_data_index(dir: Dir, b: &[u8]) -> Option<u64> {
    if dir != Dir::Down || b[0] >> 2 & 0xf != 1 || b.len() < 500 {
        return None;
    }
    let at = DATA_HEADER_LEN + DATA_ACK_LEN * usize::from(b[0] & FLAG_ACK);
    Some(u64::from_be_bytes(b[at..at + 8].try_into().unwrap()))
}

fn assert_delivery_sane(delivered: &[bytes::Bytes], n: u64, len: usize) {
    let mut seen = std::collections::HashSet::new();
    for d in delivered {
        let i = index_of(d);
        assert!(i < n, "delivered a packet never sent");
        assert_eq!(&d[..], &packet(i, len)[..], "byte-identical");
        assert!(seen.insert(i), "packet {i} delivered twice");
    }
}

#[test]
fn links_come_up_and_data_crosses_both_ways_in_order() {
    let mut p = Pair::new(&bus(), cfg(RecoveryKind::None, SchedulerKind::MinDelay));
    exchange(&mut p, 200, Duration::from_millis(5), 600);
    let up: Vec<u64> = p.delivered_up.iter().map(|d| index_of(d)).collect();
    let down: Vec<u64> = p.delivered_down.iter().map(|d| index_of(d)).collect();
    assert_eq!(up, (0..200).collect::<Vec<_>>());
    assert_eq!(down, (0..200).collect::<Vec<_>>());
    let st = p.client.link_status(p.now);
    assert!(st.iter().all(|l| l.state == LinkState::Active), "{st:?}");
    // RTTs from probes: 40 ms and 150 ms plus serialisation.
    let rtt: Vec<u128> = st.iter().map(|l| l.srtt.unwrap().as_millis()).collect();
    assert!((40..50).contains(&rtt[0]) && (150..165).contains(&rtt[1]), "{rtt:?}");
    // Relative delay estimate: link 1 is ~55 ms slower one way, whatever the clock offset.
    let rel = st[1].relative_owd_us.unwrap() - st[0].relative_owd_us.unwrap();
    assert!((50_000..60_000).contains(&rel), "relative owd {rel}");
}

#[test]
fn min_delay_prefers_fast_link_until_its_queue_grows() {
    let mut p = Pair::new(&bus(), cfg(RecoveryKind::None, SchedulerKind::MinDelay));
    p.advance(Duration::from_millis(500));
    // A light load all goes on the 20 ms link.
    for i in 0..20 {
        p.send_up(&packet(i, 500));
        p.advance(Duration::from_millis(20));
    }
    let st = p.client.link_status(p.now);
    assert!(st[0].counters.data_sent >= 20 && st[1].counters.data_sent == 0, "{st:?}");
    // A burst fills the fast link's queue past the 55 ms difference, so some goes on the slow one.
    for i in 20..220 {
        p.send_up(&packet(i, 1200));
    }
    p.advance(Duration::from_secs(3));
    let st = p.client.link_status(p.now);
    assert!(st[1].counters.data_sent > 20, "{st:?}");
    assert_eq!(p.delivered_up.len(), 220);
}

#[test]
fn oec_recovers_lost_packets_from_spare_capacity() {
    let mut p = Pair::new(&bus(), cfg(RecoveryKind::Oec, SchedulerKind::MinDelay));
    // Drop every 10th data-sized datagram from the server on link 0.
    p.drop = Box::new(|dir, link, n, b| link == LinkId(0) && down_data_index(dir, b).is_some() && n % 10 == 0);
    exchange(&mut p, 300, Duration::from_millis(10), 800);
    assert_delivery_sane(&p.delivered_down, 300, 800);
    let st = p.client.stats();
    assert!(st.recovered > 0, "{st:?}");
    assert!(p.server.stats().coded_sent > 0);
    assert_eq!(p.delivered_down.len(), 300, "every loss recovered: {:?}", p.client.stats());
}

#[test]
fn no_recovery_leaves_losses_to_tcp() {
    let mut p = Pair::new(&bus(), cfg(RecoveryKind::None, SchedulerKind::MinDelay));
    p.drop = Box::new(|dir, link, n, b| dir == Dir::Down && link == LinkId(0) && b.len() > 500 && n % 10 == 0);
    exchange(&mut p, 300, Duration::from_millis(10), 800);
    assert_delivery_sane(&p.delivered_down, 300, 800);
    assert!(p.delivered_down.len() < 300);
    assert_eq!(p.server.stats().coded_sent, 0);
}

#[test]
fn arq_retransmits_what_the_receiver_reports_missing() {
    let mut p = Pair::new(&bus(), cfg(RecoveryKind::Arq, SchedulerKind::MinDelay));
    let mut dropped = std::collections::HashSet::new();
    p.drop = Box::new(move |dir, _link, _n, b| {
        // Drop the first transmission of every 7th data packet.
        down_data_index(dir, b).is_some_and(|i| i % 7 == 3 && dropped.insert(i))
    });
    exchange(&mut p, 200, Duration::from_millis(10), 800);
    assert_delivery_sane(&p.delivered_down, 200, 800);
    assert_eq!(p.delivered_down.len(), 200);
    assert!(p.client.stats().nacks_sent > 0);
    // Exactly the 29 first transmissions dropped (i % 7 == 3 below 200) are resent, at least once.
    assert!(p.server.stats().data_resent >= 29, "{:?}", p.server.stats());
}

#[test]
fn data_packets_piggyback_16_bit_acks_within_60_bytes() {
    // Traffic both ways: each side's data carries its cumulative ack of the other's.
    let mut p = Pair::new(&bus(), cfg(RecoveryKind::Arq, SchedulerKind::MinDelay));
    let acks = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let seen = acks.clone();
    p.drop = Box::new(move |_dir, _link, _n, b| {
        if let Ok((h, body)) = Header::parse(b)
            && h.ptype == PacketType::Data
            && let Ok(d) = DataRepr::parse(h.flags, body)
        {
            // What the sealed datagram would cost: IPv4 + UDP + header + data fields + tag.
            let overhead = 20 + 8 + b.len() - d.payload.len() + 16;
            seen.borrow_mut().push((d.ack, overhead));
        }
        false
    });
    exchange(&mut p, 300, Duration::from_millis(10), 600);
    assert_eq!(p.delivered_up.len(), 300);
    assert_eq!(p.delivered_down.len(), 300);
    let acks = acks.borrow();
    let with_ack: Vec<_> = acks.iter().filter(|(a, _)| a.is_some()).collect();
    assert!(with_ack.len() > 100, "only {} of {} data packets carried an ack", with_ack.len(), acks.len());
    assert!(acks.iter().all(|&(_, o)| o <= 60), "a data packet over 60 bytes of overhead");
    assert!(with_ack.iter().all(|&&(_, o)| o == 60));
    // The acks reached their senders: each side knows the other has everything.
    assert_eq!(p.client.acked_and_sent(), (300, 300));
    assert_eq!(p.server.acked_and_sent(), (300, 300));
}

#[test]
fn piggybacked_acks_alone_move_the_senders_ack() {
    // Feedback packets dropped, so the only acks are the 16-bit ones on data.
    let mut p = Pair::new(&bus(), cfg(RecoveryKind::None, SchedulerKind::MinDelay));
    p.drop = Box::new(|_dir, _link, _n, b| Header::parse(b).is_ok_and(|(h, _)| h.ptype == PacketType::Feedback));
    exchange(&mut p, 300, Duration::from_millis(10), 600);
    let (acked, sent) = p.client.acked_and_sent();
    assert_eq!(sent, 300);
    // The server's last data packet left as the client's last ones were still on the 20 ms link
    // (10 ms apart): it acked all but those.
    assert!((295..=300).contains(&acked), "client heard an ack of {acked}");
}

#[test]
fn fec_and_dup_recover_losses() {
    for kind in [RecoveryKind::Fec { percent: 100.0 }, RecoveryKind::Dup] {
        let mut p = Pair::new(&bus(), cfg(kind, SchedulerKind::MinDelay));
        p.drop = Box::new(|dir, link, n, b| dir == Dir::Down && link == LinkId(0) && b.len() > 500 && n % 9 == 0);
        exchange(&mut p, 200, Duration::from_millis(15), 800);
        assert_delivery_sane(&p.delivered_down, 200, 800);
        assert_eq!(p.delivered_down.len(), 200, "{kind}: {:?}", p.client.stats());
    }
}

#[test]
fn link_down_is_detected_within_a_second_and_traffic_moves() {
    let mut p = Pair::new(&bus(), cfg(RecoveryKind::None, SchedulerKind::MinDelay));
    p.advance(Duration::from_millis(500));
    for i in 0..50 {
        p.send_up(&packet(i, 300));
        p.advance(Duration::from_millis(10));
    }
    p.links[0].up = false;
    let t_down = p.now;
    let mut i = 50;
    while p.client.link_status(p.now)[0].state == LinkState::Active {
        p.send_up(&packet(i, 300));
        i += 1;
        p.advance(Duration::from_millis(10));
        assert!(p.now - t_down < Duration::from_secs(1), "not detected within 1 s");
    }
    for j in i..i + 50 {
        p.send_up(&packet(j, 300));
        p.advance(Duration::from_millis(10));
    }
    p.advance(Duration::from_secs(1));
    let got: std::collections::HashSet<u64> = p.delivered_up.iter().map(|d| index_of(d)).collect();
    // Packets sent on the dead link before detection were re-sent on the other one.
    assert_eq!(got.len() as u64, i + 50, "missing {:?}", (0..i + 50).filter(|x| !got.contains(x)).collect::<Vec<_>>());
    // And the link comes back.
    p.links[0].up = true;
    p.advance(Duration::from_secs(2));
    assert_eq!(p.client.link_status(p.now)[0].state, LinkState::Active);
}

/// A link in a loss burst is lossy, not down. With sparse traffic, few sends are left for the peer
/// to confirm, so silence alone took the link down whenever a burst ate the last of them and its
/// report: on the bus, WiMax (45 % loss in its bad state, PluriBus Table 1) went down 26 times a
/// minute, each time moving traffic to the slower link and re-sending what was in flight.
#[test]
fn a_lossy_link_with_sparse_traffic_is_probed_not_taken_down() {
    let mut p = Pair::new(&bus(), cfg(RecoveryKind::None, SchedulerKind::MinDelay));
    exchange(&mut p, 20, Duration::from_millis(10), 300);
    // 45 % of link 0's datagrams lost each way, drawn by a fixed hash of the datagram counter.
    p.drop = Box::new(|_, link, n, _| link == LinkId(0) && n.wrapping_mul(2_654_435_761) % 1000 < 450);
    for i in 0..100 {
        p.send_up(&packet(20 + i, 300));
        p.advance(Duration::from_millis(300));
    }
    let downs = p.client.link_status(p.now)[0].counters.downs;
    assert!(downs <= 2, "link 0 went down {downs} times in 30 s of 45 % loss");
}

/// A lone link whose sends go unconfirmed while the peer's datagrams still arrive on it is lossy,
/// not dead. At PluriBus Fig. 10's 70 % point (one link losing 35 % each way) the quiet spell
/// after a flow lost its last sends, their report and four probe round trips together now and
/// then (0.58^4), and the link went down; readmission wants four probe replies in a row, which at
/// that loss took tens of seconds while the client held every passenger packet. Here every
/// datagram the client sends is lost for 1.5 s while the server's keep coming.
#[test]
fn a_lone_link_the_peer_is_heard_on_is_not_taken_down() {
    let mut p = Pair::new(&[(75, 1500.0)], cfg(RecoveryKind::Auto, SchedulerKind::MinDelay));
    exchange(&mut p, 10, Duration::from_millis(10), 300);
    p.drop = Box::new(|dir, _, _, _| dir == Dir::Up);
    for i in 0..15 {
        p.send_down(&packet(10 + i, 300));
        p.advance(Duration::from_millis(100));
    }
    let st = &p.client.link_status(p.now)[0];
    assert_eq!((st.state, st.counters.downs), (LinkState::Active, 0), "after 1.5 s of lost sends");
    p.drop = Box::new(|_, _, _, _| false);
    p.send_up(&packet(10, 300));
    p.advance(Duration::from_secs(1));
    assert_eq!(p.client.link_status(p.now)[0].state, LinkState::Active);
    assert_eq!(p.delivered_up.iter().filter(|d| index_of(d) == 10).count(), 1, "the passenger packet crossed");
}

#[test]
fn server_follows_a_vehicle_address_change() {
    let mut p = Pair::new(&bus(), cfg(RecoveryKind::None, SchedulerKind::MinDelay));
    exchange(&mut p, 20, Duration::from_millis(10), 200);
    p.client_addrs[0] = addr("203.0.113.9:6000");
    for i in 20..40 {
        p.send_up(&packet(i, 200));
        p.send_down(&packet(i, 200));
        p.advance(Duration::from_millis(10));
    }
    p.advance(Duration::from_secs(1));
    assert_eq!(p.delivered_down.len(), 40);
    assert_eq!(p.delivered_up.len(), 40);
}

#[test]
fn garbage_and_foreign_datagrams_are_counted_and_dropped() {
    let mut p = Pair::new(&bus(), cfg(RecoveryKind::Oec, SchedulerKind::MinDelay));
    exchange(&mut p, 10, Duration::from_millis(10), 200);
    let from = addr("198.51.100.1:5000");
    let t = p.now + Duration::from_secs(3600);
    // On the sealed path nothing of this reaches the engine: it does not open.
    for d in [&[0xff; 40][..], &[]] {
        assert!(matches!(p.server.handle_datagram(t, t, None, from, d), Err(SealedDatagramError::Rejected(_))));
    }
    assert_eq!(p.server.stats().malformed, 0);
    // The engine behind it still refuses whatever it is handed, and counts it.
    let engine: &mut Session = &mut p.server;
    assert!(engine.handle_datagram(t, None, from, &[0xff; 40]).is_err());
    assert!(engine.handle_datagram(t, None, from, &[]).is_err());
    let mut foreign = vec![0u8; 30];
    crate::wire::Header {
        ptype: crate::wire::PacketType::Data,
        flags: 0,
        session: 99,
        link: LinkId(0),
        link_seq: 0,
        timestamp: 0,
    }
    .emit(&mut foreign)
    .unwrap();
    assert!(engine.handle_datagram(t, None, from, &foreign).is_err());
    let st = p.server.stats();
    assert_eq!((st.malformed, st.wrong_session), (2, 1));
    exchange(&mut p, 10, Duration::from_millis(10), 200);
    assert_eq!(p.delivered_up.len(), 20);
}

#[test]
fn scheme_and_scheduler_switch_live_without_losing_packets() {
    let mut p = Pair::new(&bus(), cfg(RecoveryKind::Oec, SchedulerKind::MinDelay));
    p.advance(Duration::from_millis(500));
    for i in 0..300u64 {
        if i == 100 {
            p.server.set_recovery(RecoveryKind::Arq);
            p.server.set_scheduler(SchedulerKind::RoundRobin);
        }
        if i == 200 {
            p.server.set_recovery(RecoveryKind::Fec { percent: 50.0 });
        }
        p.send_down(&packet(i, 400));
        p.advance(Duration::from_millis(5));
    }
    p.advance(Duration::from_secs(2));
    assert_delivery_sane(&p.delivered_down, 300, 400);
    assert_eq!(p.delivered_down.len(), 300);
}

#[test]
fn oversized_and_empty_passenger_packets_are_refused() {
    let mut p = Pair::new(&bus(), cfg(RecoveryKind::None, SchedulerKind::MinDelay));
    let max = p.client.config().max_packet;
    assert!(p.client.handle_tun_packet(Instant::ZERO, &vec![0; max + 1]).is_err());
    assert!(p.client.handle_tun_packet(Instant::ZERO, &[]).is_err());
    assert!(p.client.handle_tun_packet(Instant::ZERO, &vec![0; max]).is_ok());
    assert_eq!(p.client.stats().tun_refused, 2);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Whatever is lost, delayed or reordered: every delivered packet is byte-identical to one that
    /// was sent, none twice, and in order except where the hold time expired (marked late).
    #[test]
    fn delivery_is_exact_unique_and_ordered(
        scheme in 0usize..5,
        loss_pct in 0u64..40,
        jitter_ms in 0u64..60,
        seed in any::<u64>(),
        n in 20u64..150,
    ) {
        let kinds = [RecoveryKind::None, RecoveryKind::Oec, RecoveryKind::Arq, RecoveryKind::Fec { percent: 25.0 }, RecoveryKind::Dup];
        let mut p = Pair::new(&bus(), cfg(kinds[scheme], SchedulerKind::MinDelay));
        let mut state = seed | 1;
        let mut rnd = move || { state ^= state << 13; state ^= state >> 7; state ^= state << 17; state };
        let mut rnd2 = rnd;
        p.drop = Box::new(move |_, _, _, _| rnd() % 100 < loss_pct);
        p.jitter = Box::new(move |_, _, _| Duration::from_millis(rnd2() % (jitter_ms + 1)));
        p.advance(Duration::from_millis(800));
        for i in 0..n {
            p.send_down(&packet(i, 100 + (i as usize * 37) % 900));
            p.advance(Duration::from_millis(3));
        }
        p.advance(Duration::from_secs(3));
        let mut seen = std::collections::HashSet::new();
        for d in &p.delivered_down {
            let i = index_of(d);
            prop_assert!(i < n);
            prop_assert_eq!(&d[..], &packet(i, 100 + (i as usize * 37) % 900)[..]);
            prop_assert!(seen.insert(i));
        }
        // Order: the reorder buffer's own accounting says how many were late; the rest is increasing.
        let late = p.client.reorder_stats().late as usize;
        let idx: Vec<u64> = p.delivered_down.iter().map(|d| index_of(d)).collect();
        let inversions = idx.windows(2).filter(|w| w[0] > w[1]).count();
        prop_assert!(inversions <= late, "inversions {} late {}", inversions, late);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Decoder fuzzing at the session level: arbitrary bytes, and valid datagrams with bytes
    /// flipped, truncated or extended, never panic either end, and traffic still flows afterwards.
    #[test]
    fn sessions_survive_arbitrary_and_mutated_datagrams(
        garbage in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 1..20),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
        cut in any::<usize>(),
    ) {
        let mut p = Pair::new(&bus(), cfg(RecoveryKind::Oec, SchedulerKind::MinDelay));
        exchange(&mut p, 5, Duration::from_millis(10), 300);
        let from = p.client_addrs[0];
        let t = p.now + p.server_offset;
        // Through the sealed path (the daemons') and, behind it, straight into the engines.
        for g in &garbage {
            prop_assert!(p.server.handle_datagram(t, t, None, from, g).is_err());
            prop_assert!(p.client.handle_datagram(p.now, p.now, Some(LinkId(0)), p.server_addr, g).is_err());
            let _ = Session::handle_datagram(&mut p.server, t, None, from, g);
            let _ = Session::handle_datagram(&mut p.client, p.now, Some(LinkId(0)), p.server_addr, g);
        }
        // Mutate a real datagram, sealed and not: a valid header makes the body decoders do the
        // work; a sealed one changed anywhere must not open.
        let mut buf = vec![0u8; 2048];
        p.send_up(&packet(99, 300));
        if let Some(tx) = Session::poll_transmit(&mut p.client, p.now, &mut buf) {
            let mut d = buf[..tx.len].to_vec();
            for (i, b) in &flips {
                let n = d.len();
                d[i % n] ^= b;
            }
            let _ = Session::handle_datagram(&mut p.server, t, None, from, &d);
            let keep = cut % (d.len() + 1);
            let _ = Session::handle_datagram(&mut p.server, t, None, from, &d[..keep]);
            d.extend_from_slice(&[0xab; 7]);
            let _ = Session::handle_datagram(&mut p.server, t, None, from, &d);
        }
        p.send_up(&packet(98, 300));
        if let Some(Ok(tx)) = p.client.poll_transmit(p.now, &mut buf) {
            let mut d = buf[..tx.len].to_vec();
            let changed = flips.iter().fold(false, |c, (i, b)| {
                let n = d.len();
                d[i % n] ^= b;
                c || *b != 0
            });
            let keep = cut % (d.len() + 1);
            if changed {
                let r = p.server.handle_datagram(t, t, None, from, &d);
                prop_assert!(matches!(r, Err(SealedDatagramError::Rejected(_))) || d == buf[..tx.len], "{r:?}");
            }
            if keep < tx.len {
                let r = p.server.handle_datagram(t, t, None, from, &d[..keep]);
                prop_assert!(matches!(r, Err(SealedDatagramError::Rejected(_))), "{r:?}");
            }
        }
        let before = p.delivered_up.len();
        for i in 100..110 {
            p.send_up(&packet(i, 300));
            p.advance(Duration::from_millis(10));
        }
        p.advance(Duration::from_secs(2));
        prop_assert!(p.delivered_up.len() >= before + 10 - 1, "traffic flows after fuzzing");
    }
}

/// Records in `at` when passenger packet `index` first reached the client's passengers.
fn note_delivery(p: &Pair, index: u64, at: &mut Option<Instant>) {
    if at.is_none() && p.delivered_down.iter().any(|d| index_of(d) == index) {
        *at = Some(p.now);
    }
}

/// Sends `n` packets of 1400 bytes down, one per `gap`, numbered on from `next` (which it
/// advances).
fn offer_down(p: &mut Pair, next: &mut u64, n: u64, gap: Duration) {
    for _ in 0..n {
        p.send_down(&packet(*next, 1400));
        *next += 1;
        p.advance(gap);
    }
}

/// Sends `n` packets down at one per `gap` and lets the tunnel drain.
fn push_down(p: &mut Pair, n: u64, gap: Duration, len: usize) {
    p.advance(Duration::from_millis(500)); // links come up
    for i in 0..n {
        p.send_down(&packet(i, len));
        p.advance(gap);
    }
    p.advance(Duration::from_secs(5));
}

#[test]
fn aqm_drops_only_under_overload_and_never_leaves_a_hole() {
    let aqm = |on: bool| {
        move |role| {
            let mut c = cfg(RecoveryKind::None, SchedulerKind::MinDelay)(role);
            c.aqm.enabled = on;
            c
        }
    };
    // Below the bus's 2.5 Mbit/s: 1000-byte packets every 8 ms = 1 Mbit/s.
    let mut p = Pair::new(&bus(), aqm(true));
    push_down(&mut p, 500, Duration::from_millis(8), 1000);
    assert_eq!(p.server.stats().aqm_dropped, 0);
    assert_eq!(p.delivered_down.len(), 500);

    // 20 % above it for 4 s: the standing queue grows past the target, so the AQM drops.
    let mut p = Pair::new(&bus(), aqm(true));
    push_down(&mut p, 1500, Duration::from_micros(2667), 1000);
    let st = p.server.stats();
    assert!(st.aqm_dropped > 0, "no AQM drop at 120 % load");
    // Dropped before numbering: every packet that was sent arrives, in order, and nothing waits
    // for a packet that never existed.
    assert_delivery_sane(&p.delivered_down, 1500, 1000);
    assert_eq!(p.delivered_down.len() as u64, st.tun_in - st.aqm_dropped);
    let order: Vec<u64> = p.delivered_down.iter().map(|d| index_of(d)).collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "delivered out of order");
    assert_eq!(p.client.reorder_stats().late, 0);

    // The same load with the AQM off: nothing is dropped at the ingress.
    let mut p = Pair::new(&bus(), aqm(false));
    push_down(&mut p, 1500, Duration::from_micros(2667), 1000);
    assert_eq!(p.server.stats().aqm_dropped, 0);
    assert_eq!(p.delivered_down.len(), 1500);
}

#[test]
fn arq_does_not_resend_what_waits_in_a_standing_queue() {
    // FMTCP Table II's paths: 100 ms one way, 10 Mbit/s. 1400-byte packets offered at 12.4 Mbit/s
    // for 1.5 s against 20 Mbit/s in all, then at 25 Mbit/s for 1 s: the links' queues stand at
    // up to a quarter of a second, longer than a round trip, and nothing is lost.
    let mut p = Pair::new(&[(100, 10_000.0), (100, 10_000.0)], cfg(RecoveryKind::Arq, SchedulerKind::MinDelay));
    p.advance(Duration::from_millis(500));
    let mut i = 0;
    for (n, gap) in [(1_650, 900), (2_250, 450)] {
        offer_down(&mut p, &mut i, n, Duration::from_micros(gap));
    }
    p.advance(Duration::from_secs(3));
    assert_delivery_sane(&p.delivered_down, i, 1400);
    assert_eq!(p.delivered_down.len() as u64, i);
    let resent = p.server.stats().data_resent;
    assert!(resent < i / 100, "{resent} of {i} packets re-sent with no loss at all");
}

/// Coded packets (any kind) the server sends on a lone 10 Mbit/s uplink, 20 ms one way, over the
/// last 2,000 of 7,000 passengers' packets of 1000 bytes at 4 Mbit/s (the default recovery), with
/// every `drop_every`th data packet lost on the way (0: none).
fn coded_on_a_lone_uplink(drop_every: u64) -> u64 {
    let mut p = Pair::new(&[(20, 10_000.0)], cfg(RecoveryKind::Auto, SchedulerKind::MinDelay));
    p.drop = Box::new(move |dir, _, n, b| drop_every > 0 && down_data_index(dir, b).is_some() && n % drop_every == 0);
    p.advance(Duration::from_millis(500));
    let mut i = 0;
    let mut before = 0;
    for k in 0..7_000 {
        if k == 5_000 {
            before = p.server.stats().coded_sent;
        }
        p.send_down(&packet(i, 1000));
        i += 1;
        p.advance(Duration::from_millis(2));
    }
    p.advance(Duration::from_secs(1));
    assert_delivery_sane(&p.delivered_down, i, 1000);
    p.server.stats().coded_sent - before
}

#[test]
fn a_lone_uplink_that_loses_nothing_at_random_gets_no_coded_packets() {
    // Its holes hold back no other uplink's packets and its overflows are the passengers'
    // congestion, so coded packets there could only repair random loss; with none measured they
    // would only queue ahead of the passengers' packets. With 1 % lost at random they go on.
    let clean = coded_on_a_lone_uplink(0);
    assert_eq!(clean, 0, "{clean} coded packets on a lone uplink that loses nothing");
    let lossy = coded_on_a_lone_uplink(100);
    assert!(lossy > 100, "only {lossy} coded packets on a lone uplink losing 1 %");
}

#[test]
fn packets_queued_behind_a_collapsed_rate_are_not_taken_for_a_lost_tail() {
    // A lone cellular uplink, 20 ms one way: 10 Mbit/s for two seconds (the sender's capacity
    // estimate learns it), then 1 Mbit/s under a deep buffer, as a modem's rate collapses on a
    // bad stretch of road, while the passengers go on offering 8 Mbit/s for half a second: 4 s
    // of packets queue. Nothing is lost, and the peer's echoes show the queue growing far beyond
    // the model's; the packets not yet heard of are queued, not a lost tail. Re-sent, the copies
    // would only queue behind them (and in a modem's full buffer push the passengers' packets
    // out). Without the check on the echoes, 154 of them were.
    let mut p = Pair::new(&[(20, 10_000.0)], cfg(RecoveryKind::Auto, SchedulerKind::MinDelay));
    p.advance(Duration::from_millis(500));
    let mut i = 0;
    offer_down(&mut p, &mut i, 1_700, Duration::from_micros(1_200));
    let before = p.server.stats().data_resent;
    p.links[0].rate_bps = 1_000_000.0;
    offer_down(&mut p, &mut i, 357, Duration::from_micros(1_400));
    p.advance(Duration::from_secs(8));
    assert_delivery_sane(&p.delivered_down, i, 1400);
    assert_eq!(p.delivered_down.len() as u64, i, "every packet delivered");
    let resent = p.server.stats().data_resent - before;
    assert!(resent <= 20, "{resent} of 357 packets queued behind the collapsed rate were re-sent");
}

#[test]
fn a_hole_is_reported_without_waiting_for_a_slow_link_that_carries_no_data() {
    // FMTCP Table II case 8's paths: 100 ms and 500 ms one way. At 1 Mbit/s `min-delay` keeps all
    // data on the fast path, and the slow one carries only probes, so a hole cannot be a packet
    // still on its way over it: it is reported at once and re-sent a round trip later, not after
    // the slow path's 400 ms lead as well.
    let mut p = Pair::new(&[(100, 10_000.0), (500, 10_000.0)], cfg(RecoveryKind::Arq, SchedulerKind::MinDelay));
    let mut dropped = false;
    p.drop = Box::new(move |dir, _link, _n, b| {
        // The first transmission of passenger packet 150.
        down_data_index(dir, b) == Some(150) && !std::mem::replace(&mut dropped, true)
    });
    p.advance(Duration::from_millis(1500)); // links up, delays measured
    let mut sent_150 = None;
    let mut delivered_150 = None;
    for i in 0..400 {
        if i == 150 {
            sent_150 = Some(p.now);
        }
        p.send_down(&packet(i, 1000));
        for _ in 0..8 {
            p.advance(Duration::from_millis(1));
            note_delivery(&p, 150, &mut delivered_150);
        }
    }
    p.advance(Duration::from_secs(3));
    assert_delivery_sane(&p.delivered_down, 400, 1000);
    assert_eq!(p.delivered_down.len(), 400);
    let server_links = p.server.link_status(p.now);
    assert_eq!(server_links.iter().find(|l| l.id == LinkId(1)).map(|l| l.counters.data_sent), Some(0));
    assert!(p.server.stats().data_resent >= 1);
    let took = delivered_150.expect("packet 150 delivered while traffic ran") - sent_150.unwrap();
    // Hole seen 108 ms after the send (the next packet's arrival), reported within a few ms, the
    // report 100 ms up, the resend 100 ms down: about 310 ms. Waiting out the slow path's lead
    // first, as the receiver did when any link counted, takes 700 ms or more.
    assert!(took < Duration::from_millis(450), "packet 150 took {took:?} to arrive through its resend");
}

#[test]
fn a_hole_both_links_have_passed_is_reported_without_waiting_out_their_queues() {
    // FMTCP Table II's equal paths, 100 ms one way, 10 Mbit/s, offered 25 Mbit/s for a second:
    // `min-delay` fills both, and their queues stand at over 100 ms. A packet lost on one of
    // them leaves a hole that a later packet on each link has passed within a millisecond or two;
    // links deliver in order, so the hole is lost and is reported then. Waiting out the links'
    // delay spread (the queue) first, as every hole did before, adds that queue to the repair.
    let mut p = Pair::new(&[(100, 10_000.0), (100, 10_000.0)], cfg(RecoveryKind::Arq, SchedulerKind::MinDelay));
    const LOST: u64 = 1_800;
    let mut dropped = false;
    p.drop = Box::new(move |dir, _link, _n, b| {
        down_data_index(dir, b) == Some(LOST) && !std::mem::replace(&mut dropped, true)
    });
    p.advance(Duration::from_millis(500));
    let (mut sent, mut delivered) = (None, None);
    for i in 0..2_200 {
        if i == LOST {
            sent = Some(p.now);
        }
        p.send_down(&packet(i, 1400));
        for _ in 0..3 {
            p.advance(Duration::from_micros(150));
            note_delivery(&p, LOST, &mut delivered);
        }
    }
    while delivered.is_none() && p.now < sent.unwrap() + Duration::from_secs(5) {
        p.advance(Duration::from_millis(1));
        note_delivery(&p, LOST, &mut delivered);
    }
    p.advance(Duration::from_secs(3));
    assert_delivery_sane(&p.delivered_down, 2_200, 1400);
    assert_eq!(p.delivered_down.len(), 2_200);
    let took = delivered.expect("the lost packet was re-sent") - sent.unwrap();
    // Its queue and 100 ms down, the report 100 ms up, the resend behind the queue and 100 ms down
    // again: 561 ms. With the report held for the delay spread, 816 ms.
    assert!(
        took < Duration::from_millis(650),
        "lost packet took {took:?} to arrive through its resend; {:?} {:?}",
        p.server.stats(),
        p.server.link_status(p.now)
    );
}

/// FMTCP Table II case 8's paths (100 ms and 500 ms one way, 10 Mbit/s each) with the AQM on and
/// `equalize_limit` as given; 1400-byte packets offered at one per `gap` for `n` packets. Returns
/// the pair after it drained and the data packets each path carried.
fn far_paths_under_aqm(recovery: RecoveryKind, equalize_limit: Duration, n: u64, gap: Duration) -> (Pair, u64, u64) {
    let mut p = Pair::new(&[(100, 10_000.0), (500, 10_000.0)], |role| {
        let mut c = cfg(recovery, SchedulerKind::MinDelay)(role);
        c.aqm.enabled = true;
        c.aqm.equalize_limit = equalize_limit;
        c
    });
    p.advance(Duration::from_millis(1500));
    for i in 0..n {
        p.send_down(&packet(i, 1400));
        p.advance(gap);
    }
    p.advance(Duration::from_secs(3));
    let server_links = p.server.link_status(p.now);
    let data_on = |id| server_links.iter().find(|l| l.id == LinkId(id)).map_or(0, |l| l.counters.data_sent);
    let (fast, slow) = (data_on(0), data_on(1));
    // Nothing is lost but what CoDel dropped, and that before numbering: no holes, in order.
    let st = p.server.stats();
    assert_delivery_sane(&p.delivered_down, n, 1400);
    assert_eq!(p.delivered_down.len() as u64, st.tun_in - st.aqm_dropped);
    let order: Vec<u64> = p.delivered_down.iter().map(|d| index_of(d)).collect();
    let ooo = order.windows(2).filter(|w| w[0] > w[1]).count();
    assert_eq!(ooo, 0, "delivered out of order {ooo} times; {:?}; fast {fast} slow {slow}", p.client.reorder_stats());
    (p, fast, slow)
}

#[test]
fn aqm_without_equalizing_holds_data_for_a_full_fast_link_rather_than_send_it_late_on_a_slow_one() {
    // 12 Mbit/s for 1.5 s: the fast path's queue reaches the AQM's per-link limit long before the
    // slow path would deliver sooner (a 400 ms queue), so new data waits in braid, where CoDel
    // judges it, instead of arriving 400 ms behind its neighbours.
    let (p, fast, slow) = far_paths_under_aqm(RecoveryKind::None, Duration::ZERO, 1_600, Duration::from_micros(933));
    assert_eq!(slow, 0, "the slow path took data; the fast path took {fast}");
    assert!(p.server.stats().aqm_dropped > 0, "CoDel never dropped though the ingress queue stood above target");
}

#[test]
fn aqm_opens_a_slower_link_once_the_backlog_is_as_late_as_it_is() {
    // 12 Mbit/s for 6 s, the default equalizing: once the backlog waiting for the fast path would
    // take its 400 ms of extra delay to drain, the slow path takes the excess, and CoDel, judging
    // only the delay beyond the slow path's, sees no standing queue. Under OEC the slow path
    // carries coded packets while it has no data, so the receiver counts its delay from the
    // start: the first data on it is awaited, not skipped (with no coded packets it is not; see
    // `Session::rx_queue_spread`).
    let (p, fast, slow) =
        far_paths_under_aqm(RecoveryKind::Oec, AqmConfig::default().equalize_limit, 6_400, Duration::from_micros(933));
    // The excess is a sixth of the load; judged by the head packet alone the slow path took less
    // (817 of 6,387) and CoDel dropped.
    assert!(slow * 100 >= fast * 15, "the slow path took {slow} data packets, the fast one {fast}");
    assert_eq!(p.server.stats().aqm_dropped, 0);

    // 25 Mbit/s, more than both carry: both queue beyond the floor, and CoDel drops.
    let (p, _, slow) =
        far_paths_under_aqm(RecoveryKind::Oec, AqmConfig::default().equalize_limit, 6_000, Duration::from_micros(448));
    assert!(slow > 0);
    assert!(p.server.stats().aqm_dropped > 0, "CoDel never dropped at 125 % of both paths");
}

#[test]
fn the_server_learns_the_clients_names_for_its_links() {
    use crate::wire::LinkName;
    let mut p = Pair::new(&[(20, 1500.0), (75, 1000.0)], SessionConfig::new);
    for (i, name) in ["lte1", "wifi"].iter().enumerate() {
        let mut l = crate::session::LinkConfig::new(LinkId(i as u8), Some(addr("192.0.2.1:7700")), 1.5e6, 1.5e6);
        l.name = Some(LinkName::new(name).expect("a valid name"));
        p.client.add_link(p.now, &l);
    }
    assert_eq!(p.server.peer_link_name(LinkId(0)), None);
    p.advance(Duration::from_secs(2));
    assert_eq!(p.server.peer_link_name(LinkId(0)), Some("lte1"));
    assert_eq!(p.server.peer_link_name(LinkId(1)), Some("wifi"));
    // The server sends no names of its own; the client's view is unchanged.
    assert_eq!(p.client.peer_link_name(LinkId(0)), None);
}

#[test]
fn an_idle_session_falls_quiet_but_keeps_its_links_alive() {
    let mut p = Pair::new(&bus(), cfg(RecoveryKind::Oec, SchedulerKind::MinDelay));
    exchange(&mut p, 50, Duration::from_millis(20), 1000);
    let sent = |p: &Pair| {
        let snow = p.now + p.server_offset;
        let c: u64 = p.client.link_status(p.now).iter().map(|l| l.counters.datagrams_sent).sum();
        let s: u64 = p.server.link_status(snow).iter().map(|l| l.counters.datagrams_sent).sum();
        c + s
    };
    let before = sent(&p);
    p.advance(Duration::from_secs(20));
    // Two links, each end probing each idle link about once a second and the peer answering
    // with a reply and a report: about 8 datagrams a second. Reports answering reports made it 34.
    let per_s = (sent(&p) - before) as f64 / 20.0;
    assert!(per_s <= 14.0, "{per_s} datagrams/s on an idle session of two links");
    let snow = p.now + p.server_offset;
    for st in [p.client.link_status(p.now), p.server.link_status(snow)] {
        assert!(st.iter().all(|l| l.state == LinkState::Active), "an idle link went down: {st:?}");
    }
    // And it still carries traffic at once.
    p.send_down(&packet(1000, 1000));
    p.advance(Duration::from_millis(200));
    assert!(p.delivered_down.iter().any(|d| d == &packet(1000, 1000)), "nothing delivered after the quiet");
}

/// One link, 20 ms one way at 10 Mbit/s, with a 100 ms drop-tail buffer (125 kB), ARQ and
/// min-delay, half a second after start: the blackout scenario's LTE once WiFi is gone.
fn lte_with_a_drop_tail_buffer() -> Pair {
    let mut p = Pair::new(&[(20, 10_000.0)], cfg(RecoveryKind::Arq, SchedulerKind::MinDelay));
    p.links[0].queue_limit = Some(Duration::from_millis(100));
    p.advance(Duration::from_millis(500));
    p
}

#[test]
fn a_resend_waits_for_room_in_a_full_buffer_rather_than_overflow_it_again() {
    // A burst that fills the buffer to 90 ms shows the sender how deep it is; then the passengers offer 30 % more than the link carries for a
    // second, so the buffer stays full and overflows. Each hole is reported and re-sent; a resend
    // sent into the full buffer is lost again, and the receiver waits another round trip for it.
    let mut p = lte_with_a_drop_tail_buffer();
    let mut i = 0;
    for _ in 0..75 {
        p.send_down(&packet(i, 1400));
        i += 1;
    }
    p.advance(Duration::from_millis(500));
    offer_down(&mut p, &mut i, 1_100, Duration::from_micros(900));
    p.advance(Duration::from_secs(3));
    let mut overflows = std::collections::HashMap::new();
    for (dir, b) in &p.overflowed {
        if let Some(k) = down_data_index(*dir, b) {
            *overflows.entry(k).or_insert(0) += 1;
        }
    }
    assert!(overflows.len() > 50, "the buffer overflowed only {} times", overflows.len());
    // The queue model runs open loop between echoes and can trail the buffer, so a few resends
    // may still meet it full (7 of 120-odd with the burst hold below); sent at once, 114 did.
    let again: Vec<u64> = overflows.iter().filter(|&(_, &n)| n > 1).map(|(&k, _)| k).collect();
    assert!(
        again.len() * 10 <= overflows.len(),
        "{} of {} packets overflowed the buffer again when re-sent: {again:?}",
        again.len(),
        overflows.len()
    );
    assert_delivery_sane(&p.delivered_down, i, 1400);
    assert_eq!(p.delivered_down.len() as u64, i, "every packet delivered");
}

#[test]
fn a_lone_uplinks_overflows_reach_the_passengers_at_any_round_trip() {
    // One uplink, 50 ms one way at 10 Mbit/s with a 100 ms drop-tail buffer, the default
    // recovery: the passengers offer a quarter more than it carries for two seconds. With no other
    // uplink to move the load to, an overflow is their congestion: given up at once, so that
    // their TCP backs off as over the modem alone, not resent into the same full buffer. Before
    // (released only under a 50 ms round trip): 828 overflows, every one repaired, the resends
    // overflowing it again; now about 450, a quarter of them repaired (the later losses of a
    // burst, which come while the link's loss estimate is high).
    let mut p = Pair::new(&[(50, 10_000.0)], cfg(RecoveryKind::Auto, SchedulerKind::MinDelay));
    p.links[0].queue_limit = Some(Duration::from_millis(100));
    p.advance(Duration::from_millis(500));
    let mut i = 0;
    offer_down(&mut p, &mut i, 2_200, Duration::from_micros(900));
    p.advance(Duration::from_secs(3));
    let overflowed: std::collections::HashSet<u64> =
        p.overflowed.iter().filter_map(|(dir, b)| down_data_index(*dir, b)).collect();
    assert!(overflowed.len() > 50, "the buffer overflowed only {} times", overflowed.len());
    assert_delivery_sane(&p.delivered_down, i, 1400);
    let delivered: std::collections::HashSet<u64> = p.delivered_down.iter().map(|d| index_of(d)).collect();
    let repaired = overflowed.iter().filter(|k| delivered.contains(k)).count();
    assert!(
        repaired * 2 <= overflowed.len(),
        "{repaired} of {} overflowed packets were repaired and delivered",
        overflowed.len()
    );
}

#[test]
fn a_burst_into_a_full_buffer_waits_in_braid_rather_than_overflow_it() {
    // A first burst of 80 packets fills the buffer to about 93 ms
    // and shows the sender how deep it is; once it drained, the passengers send 120 packets at
    // once (140 ms of the link), as a TCP does when a repaired hole's backlog is acknowledged
    // together. What the buffer cannot hold waits in braid and goes as the buffer drains.
    let mut p = lte_with_a_drop_tail_buffer();
    let mut i = 0;
    for burst in [80, 120] {
        for _ in 0..burst {
            p.send_down(&packet(i, 1400));
            i += 1;
        }
        p.advance(Duration::from_millis(800));
    }
    p.advance(Duration::from_secs(2));
    let overflowed = p.overflowed.iter().filter(|(dir, b)| down_data_index(*dir, b).is_some()).count();
    assert_eq!(overflowed, 0, "data packets overflowed the buffer");
    assert_delivery_sane(&p.delivered_down, i, 1400);
    assert_eq!(p.delivered_down.len() as u64, i, "every packet delivered");
}

#[test]
fn data_that_waited_long_goes_where_a_buffer_holds_it_not_into_the_fastest_links_overflow() {
    // FMTCP Table II case 8's paths, the fast one's buffer 200 ms deep, the slow one's deep:
    // passengers that do not back off offer 1.2 times both paths together for 1.4 s, so data
    // waits in braid until every path is over the AQM's limit and then goes anyway. By earliest
    // arrival alone it went to the fast path until its modelled queue was 400 ms, twice what the
    // buffer holds: 264 data packets overflowed it; kept to the buffers, 65.
    let mut p = Pair::new(&[(100, 10_000.0), (500, 10_000.0)], |role| {
        let mut c = cfg(RecoveryKind::Arq, SchedulerKind::MinDelay)(role);
        c.aqm.enabled = true;
        c
    });
    p.links[0].queue_limit = Some(Duration::from_millis(200));
    p.advance(Duration::from_millis(1500));
    let mut i = 0;
    offer_down(&mut p, &mut i, 3_000, Duration::from_micros(467));
    p.advance(Duration::from_secs(5));
    let overflowed = p.overflowed.iter().filter(|(dir, b)| down_data_index(*dir, b).is_some()).count();
    assert!(overflowed < 130, "{overflowed} data packets overflowed the fast path's buffer; {:?}", p.server.stats());
    assert_delivery_sane(&p.delivered_down, i, 1400);
    assert_eq!(p.delivered_down.len() as u64, i, "every packet delivered");
}
