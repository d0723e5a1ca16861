//! Tests of the link model against hand-computed timings, statistics of the loss processes, and
//! brute-force reference models (mm-link's per-opportunity loop, the fluid FIFO formula).

use super::*;
use crate::link::spec::{LossSpec, Outage};
use proptest::prelude::*;

fn ms(x: u64) -> Instant {
    Instant::from_millis(x)
}

fn constant(kbps: f64) -> LinkDirSpec {
    LinkDirSpec {
        rate: RateSpec::Constant { kbps },
        delay: Duration::ZERO,
        queue_bytes: usize::MAX,
        loss: LossSpec::None,
        schedule: None,
        outages: vec![],
    }
}

fn traced(text: &str) -> LinkDirSpec {
    LinkDirSpec { rate: RateSpec::Trace(Arc::new(Trace::parse("t", text).unwrap())), ..constant(0.0) }
}

fn schedule(csv: &str) -> Option<Arc<Schedule>> {
    Some(Arc::new(Schedule::parse("s", csv).unwrap()))
}

/// The packet id a report carries.
fn id(r: &Delivery<usize>) -> usize {
    match r {
        Delivery::Delivered { packet, .. } | Delivery::Lost { packet, .. } => *packet,
    }
}

/// What an event-loop run produced; packet ids are indices into the arrivals.
#[derive(Debug, Default, PartialEq)]
struct Outcome {
    reports: Vec<Delivery<usize>>,
    dropped: Vec<usize>,
}

impl Outcome {
    fn delivered(&self) -> Vec<(usize, Instant)> {
        self.reports
            .iter()
            .filter_map(|r| match r {
                Delivery::Delivered { at, packet } => Some((*packet, *at)),
                Delivery::Lost { .. } => None,
            })
            .collect()
    }

    fn lost(&self) -> Vec<(usize, Instant, LossCause)> {
        self.reports
            .iter()
            .filter_map(|r| match r {
                Delivery::Lost { at, cause, packet } => Some((*packet, *at, *cause)),
                Delivery::Delivered { .. } => None,
            })
            .collect()
    }
}

/// Drives `link` as the simulator will: at each step, the earlier of the next arrival and the
/// link's timeout; reports are drained before same-time arrivals are offered. Checks on the way
/// that nothing is reported early and that the queue limit holds.
fn drive(link: &mut LinkModel<usize>, arrivals: &[(Instant, usize)], queue_bytes: usize) -> Outcome {
    let mut out = Outcome::default();
    let mut next = 0;
    loop {
        let t = match (arrivals.get(next).map(|a| a.0), link.poll_timeout()) {
            (None, None) => break,
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b).unwrap(),
        };
        while let Some(report) = link.poll_deliver(t) {
            assert!(report.at() <= t, "reported {:?} before it happened (now {t})", report.at());
            out.reports.push(report);
        }
        while let Some(&(at, size)) = arrivals.get(next)
            && at <= t
        {
            if let Enqueue::Dropped(id) = link.enqueue(at, size, next) {
                out.dropped.push(id);
            }
            assert!(link.queued_bytes(at) <= queue_bytes);
            next += 1;
        }
    }
    out
}

fn run(spec: &LinkDirSpec, seed: u64, arrivals: &[(Instant, usize)]) -> (Outcome, LinkModel<usize>) {
    let mut link = LinkModel::new(spec, seed);
    let out = drive(&mut link, arrivals, spec.queue_bytes);
    (out, link)
}

fn times(v: &[(usize, Instant)]) -> Vec<u64> {
    v.iter().map(|(_, t)| t.as_micros()).collect()
}

#[test]
fn constant_rate_spaces_back_to_back_packets_and_adds_delay() {
    // 1500 B at 1000 kbit/s = 12 ms each; 20 ms of propagation.
    let spec = LinkDirSpec { delay: Duration::from_millis(20), ..constant(1000.0) };
    let (out, link) = run(&spec, 1, &[(ms(0), 1500); 5]);
    assert_eq!(times(&out.delivered()), [32_000, 44_000, 56_000, 68_000, 80_000]);
    assert_eq!(link.stats().delivered_bytes, 7500);
    assert_eq!(link.stats().busy, Duration::from_millis(60));
}

#[test]
fn fractional_serialisation_times_do_not_drift() {
    // 1 byte at 3 kbit/s = 2666.67 µs: rounded up per packet, but timed from the run's start.
    let (out, _) = run(&constant(3.0), 1, &[(ms(0), 1); 6]);
    assert_eq!(times(&out.delivered()), [2667, 5334, 8000, 10_667, 13_334, 16_000]);
}

#[test]
fn idle_link_starts_service_at_arrival() {
    let (out, _) = run(&constant(1000.0), 1, &[(ms(0), 1500), (ms(100), 1500), (Instant::from_micros(112_001), 1500)]);
    assert_eq!(times(&out.delivered()), [12_000, 112_000, 124_001]);
}

#[test]
fn drop_tail_drops_exactly_the_excess() {
    // 1000 B at 1000 kbit/s = 8 ms. One in service + 3000 B waiting: 4 of 10 accepted.
    let spec = LinkDirSpec { queue_bytes: 3000, ..constant(1000.0) };
    let mut link = LinkModel::new(&spec, 1);
    let accepted: Vec<bool> = (0..10).map(|i| link.enqueue(ms(0), 1000, i) == Enqueue::Queued).collect();
    assert_eq!(accepted, [true, true, true, true, false, false, false, false, false, false]);
    assert_eq!(link.stats().queue_drops, 6);
    assert_eq!(link.queued_bytes(ms(0)), 3000);
    // Packet 0 leaves at 8 ms and packet 1 enters service: room for exactly one more.
    assert_eq!(link.queued_bytes(ms(8)), 2000);
    assert_eq!(link.enqueue(ms(8), 1000, 10), Enqueue::Queued);
    assert_eq!(link.enqueue(ms(8), 1, 11), Enqueue::Dropped(11));
    assert_eq!(link.packets_in_link(), 5);

    // The packet in service never counts: an idle link takes a packet larger than the queue.
    let mut link = LinkModel::new(&LinkDirSpec { queue_bytes: 0, ..constant(1000.0) }, 1);
    assert_eq!(link.enqueue(ms(0), 9000, 0), Enqueue::Queued);
    assert_eq!(link.enqueue(ms(0), 1, 1), Enqueue::Dropped(1));
}

#[test]
fn trace_opportunities_carry_packets_and_repeat() {
    // Opportunities at 2, 2, 5 and 10 ms; period 10 ms. 1 ms of propagation.
    let spec = LinkDirSpec { delay: Duration::from_millis(1), ..traced("2\n2\n5\n10\n") };
    let arrivals = [(ms(0), 1000), (ms(0), 1000), (ms(0), 3000), (ms(11), 100), (ms(25), 1500), (ms(31), 1500)];
    let mut link = LinkModel::new(&spec, 1);
    for (id, &(t, size)) in arrivals[..3].iter().enumerate() {
        assert_eq!(link.enqueue(t, size, id), Enqueue::Queued);
    }
    // The head is in service while it waits for its opportunity.
    assert_eq!(link.queued_bytes(ms(0)), 4000);
    let (out, _) = run(&spec, 1, &arrivals);
    // A and B share the first opportunity and B finishes in the second; C spans the rest of the
    // second, 5 ms and 10 ms. D arrives after 10 ms, so that opportunity's leftover is lost and it
    // rides the repeat's first one (12 ms). E arrives exactly at 25 ms and takes it; F misses
    // 30 ms and takes 32 ms.
    assert_eq!(times(&out.delivered()), [3000, 3000, 11_000, 13_000, 26_000, 33_000]);
}

#[test]
fn trace_leftover_credit_serves_packets_already_queued() {
    let spec = traced("2\n2\n5\n10\n");
    let arrivals = [(ms(0), 3000), (ms(2), 500), (ms(5), 800), (ms(5), 300)];
    let (out, _) = run(&spec, 1, &arrivals);
    // 3000 B uses both 2 ms opportunities fully; 500 B (arriving at 2 ms) gets nothing there and
    // takes 5 ms, leaving 1000 B that the 800 B packet arriving at 5 ms uses; the 300 B packet
    // gets the last 200 B at 5 ms and finishes at 10 ms.
    assert_eq!(times(&out.delivered()), [2000, 5000, 5000, 10_000]);
}

#[test]
fn saturated_trace_delivers_its_mean_rate() {
    let spec = traced("1\n1\n3\n4\n4\n4\n7\n");
    let period = Duration::from_millis(7);
    let mut link = LinkModel::new(&spec, 1);
    // Keep 100 full-size packets queued: the link delivers exactly 7 per 7 ms period.
    for i in 0..100 {
        let _ = link.enqueue(ms(0), 1500, i);
    }
    let mut n = 0;
    while link.poll_deliver(Instant::ZERO + period * 10).is_some() {
        n += 1;
    }
    assert_eq!(n, 70);
    let kbps = link.stats().delivered_bytes as f64 * 8.0 / 70.0;
    assert_eq!(kbps, spec.rate.mean_kbps());
}

/// 95 % binomial interval around `p` for `n` trials (normal approximation).
fn binomial_95(p: f64, n: usize) -> (f64, f64) {
    let half = 1.96 * (p * (1.0 - p) / n as f64).sqrt();
    (p - half, p + half)
}

/// One 1500 B packet per ms on a 12 Mbit/s link: no queueing, one loss decision per packet.
fn paced(n: usize) -> Vec<(Instant, usize)> {
    (0..n as u64).map(|i| (ms(i), 1500)).collect()
}

fn lost_flags(spec: &LinkDirSpec, seed: u64, n: usize) -> Vec<bool> {
    let (out, link) = run(spec, seed, &paced(n));
    assert_eq!(link.stats().delivered_packets + link.stats().random_losses, n as u64);
    let mut lost = vec![false; n];
    for (id, _, _) in out.lost() {
        lost[id] = true;
    }
    lost
}

#[test]
fn bernoulli_loss_rate_is_within_binomial_interval() {
    let n = 200_000;
    let spec = LinkDirSpec { loss: LossSpec::Bernoulli { p: 0.05 }, ..constant(12_000.0) };
    let rate = lost_flags(&spec, 11, n).iter().filter(|&&l| l).count() as f64 / n as f64;
    let (lo, hi) = binomial_95(0.05, n);
    assert!(lo <= rate && rate <= hi, "measured {rate}, 95% interval [{lo}, {hi}]");
}

#[test]
fn gilbert_elliott_mean_and_bursts() {
    let n = 400_000;
    let loss = LossSpec::Gilbert { p_gb: 0.01, p_bg: 0.25, loss_good: 0.0, loss_bad: 1.0 };
    let lost = lost_flags(&LinkDirSpec { loss, ..constant(12_000.0) }, 5, n);
    let rate = lost.iter().filter(|&&l| l).count() as f64 / n as f64;
    assert!((rate - loss.mean_loss()).abs() < 0.1 * loss.mean_loss(), "{rate} vs {}", loss.mean_loss());
    // With loss only in "bad", a burst is one visit to "bad": mean length 1 / p_bg = 4.
    let bursts = lost.windows(2).filter(|w| w[1] && !w[0]).count() + usize::from(lost[0]);
    let mean_burst = lost.iter().filter(|&&l| l).count() as f64 / bursts as f64;
    assert!((mean_burst - 4.0).abs() < 0.25, "mean burst {mean_burst}");
    // Bernoulli at the same mean has bursts of about 1 / (1 - p) = 1.04.
    assert!(mean_burst > 3.0);

    let loss = LossSpec::Gilbert { p_gb: 0.05, p_bg: 0.5, loss_good: 0.01, loss_bad: 0.3 };
    let lost = lost_flags(&LinkDirSpec { loss, ..constant(12_000.0) }, 6, n);
    let rate = lost.iter().filter(|&&l| l).count() as f64 / n as f64;
    assert!((rate - loss.mean_loss()).abs() < 0.05 * loss.mean_loss(), "{rate} vs {}", loss.mean_loss());
}

#[test]
fn outages_lose_packets_leaving_inside_the_window() {
    // 1500 B at 12 Mbit/s = 1 ms. Outage [100 ms, 150 ms).
    let spec = LinkDirSpec {
        outages: vec![Outage {
            at: Duration::from_millis(100),
            duration: Duration::from_millis(50),
            jitter: Duration::ZERO,
        }],
        delay: Duration::from_millis(30),
        ..constant(12_000.0)
    };
    let arrivals = [(ms(98), 1500), (ms(99), 1500), (ms(105), 1500), (ms(149), 1500), (ms(200), 1500)];
    let (out, link) = run(&spec, 1, &arrivals);
    assert_eq!(out.lost(), [(1, ms(100), LossCause::Outage), (2, ms(106), LossCause::Outage)]);
    assert_eq!(out.delivered(), [(0, ms(129)), (3, ms(180)), (4, ms(231))]);
    assert_eq!(link.stats().outage_losses, 2);
    assert_eq!(link.stats().random_losses, 0);
    // Reports come in time order: the losses at 100 and 106 ms before the delivery at 129 ms.
    let order: Vec<usize> = out.reports.iter().map(id).collect();
    assert_eq!(order, [1, 2, 0, 3, 4]);
}

#[test]
fn schedule_changes_rate_delay_and_loss_at_their_seconds() {
    let spec = LinkDirSpec {
        schedule: schedule("t_s,delay_ms,loss,rate_kbps\n0,20,,1000\n1,,,2000\n2,5,,\n3,,1,\n4,,0,\n"),
        ..constant(500.0)
    };
    let arrivals = [
        (ms(990), 1500),  // starts at 1000 kbit/s: 12 ms, leaves 1002, arrives 1022
        (ms(995), 1500),  // starts at 1002 at 2000 kbit/s: 6 ms, leaves 1008, arrives 1028
        (ms(1990), 1500), // leaves 1996 with 20 ms: 2016
        (ms(1995), 1500), // leaves 2002 with 5 ms: 2007, held to 2016 (FIFO)
        (ms(2010), 1500), // leaves 2016 with 5 ms: 2021
        (ms(2995), 1500), // leaves 3001: lost (loss 1 from 3 s)
        (ms(3990), 1500), // leaves 3996: lost
        (ms(3997), 1500), // leaves 4003: delivered at 4008
    ];
    let (out, _) = run(&spec, 1, &arrivals);
    let delivered: Vec<(usize, u64)> = out.delivered().iter().map(|(i, t)| (*i, t.as_micros() / 1000)).collect();
    assert_eq!(delivered, [(0, 1022), (1, 1028), (2, 2016), (3, 2016), (4, 2021), (7, 4008)]);
    assert_eq!(out.lost(), [(5, ms(3001), LossCause::Random), (6, ms(3996), LossCause::Random)]);
}

#[test]
fn scheduled_loss_replaces_the_loss_model_until_changed() {
    let spec = LinkDirSpec {
        loss: LossSpec::Bernoulli { p: 1.0 },
        schedule: schedule("t_s,delay_ms,loss,rate_kbps\n1,,0,\n"),
        ..constant(12_000.0)
    };
    let (out, _) = run(&spec, 1, &[(ms(500), 1500), (ms(1500), 1500)]);
    assert_eq!(out.lost().len(), 1);
    assert_eq!(out.delivered(), [(1, ms(1501))]);
}

#[test]
fn zero_rate_holds_packets_until_the_schedule_raises_it() {
    let spec = LinkDirSpec {
        queue_bytes: 1500,
        schedule: schedule("t_s,delay_ms,loss,rate_kbps\n1,,,1000\n"),
        ..constant(0.0)
    };
    let (out, link) = run(&spec, 1, &[(ms(0), 1500), (ms(0), 1500), (ms(0), 1500)]);
    assert_eq!(out.dropped, [2]);
    assert_eq!(times(&out.delivered()), [1_012_000, 1_024_000]);
    // Waiting for the rate to rise is time in service.
    assert_eq!(link.stats().busy, Duration::from_millis(1024));

    // Never raised: the head and the queue stay forever, the rest is dropped.
    let spec = LinkDirSpec { queue_bytes: 1500, ..constant(0.0) };
    let (out, mut link) = run(&spec, 1, &[(ms(0), 1500), (ms(0), 1500), (ms(5), 1500)]);
    assert_eq!(out.dropped, [2]);
    assert!(out.reports.is_empty());
    assert_eq!(link.poll_timeout(), None);
    assert!(link.poll_deliver(Instant::MAX).is_none());
    assert_eq!(link.packets_in_link(), 2);
    assert_eq!(link.queued_bytes(Instant::MAX), 1500);
}

#[test]
fn scheduled_rate_replaces_a_trace() {
    // One opportunity per ms (12 Mbit/s), then 1200 kbit/s (10 ms per 1500 B) from 1 s.
    let spec = LinkDirSpec { schedule: schedule("t_s,delay_ms,loss,rate_kbps\n1,,,1200\n"), ..traced("1\n") };
    let (out, link) = run(&spec, 1, &[(ms(500), 1500), (ms(1000), 1500), (ms(1000), 1500)]);
    assert_eq!(times(&out.delivered()), [500_000, 1_010_000, 1_020_000]);
    // Window [200 ms, 1200 ms) holds 1000 opportunities: 12 Mbit/s, though the link ran at 1.2.
    assert_eq!(link.true_rate_kbps(ms(700)), 12_000.0);
    assert_eq!(link.true_rate_kbps(ms(1500)), 1200.0);
}

#[test]
fn true_rate_of_a_trace_matches_a_brute_force_count() {
    // An opportunity at 0 and at the period (the repeat boundary counts both), uneven density.
    let text = "0\n3\n3\n3\n250\n251\n900\n1200\n1200\n1300\n";
    let spec = traced(text);
    let link: LinkModel<()> = LinkModel::new(&spec, 1);
    let trace = Trace::parse("t", text).unwrap();
    let all: Vec<u64> =
        (0..20u64).flat_map(|lap| trace.opportunities_ms.iter().map(move |o| lap * trace.period_ms + o)).collect();
    for now_ms in [0u64, 10, 499, 500, 777, 1300, 1301, 2599, 2600, 9000] {
        let from = now_ms.saturating_sub(500);
        let count = all.iter().filter(|&&t| t >= from && t < from + 1000).count();
        let expect = count as f64 * 12.0;
        assert_eq!(link.true_rate_kbps(ms(now_ms)), expect, "at {now_ms} ms");
    }
    assert_eq!(LinkModel::<()>::new(&constant(750.0), 1).true_rate_kbps(ms(3)), 750.0);
}

fn lossy_spec() -> LinkDirSpec {
    LinkDirSpec {
        loss: LossSpec::Gilbert { p_gb: 0.05, p_bg: 0.3, loss_good: 0.02, loss_bad: 0.5 },
        queue_bytes: 20_000,
        delay: Duration::from_millis(10),
        ..constant(8000.0)
    }
}

#[test]
fn same_seed_same_results_different_seed_differs() {
    let arrivals: Vec<(Instant, usize)> = (0..5000u64).map(|i| (Instant::from_micros(i * 1400), 1200)).collect();
    let (a, _) = run(&lossy_spec(), 42, &arrivals);
    let (b, _) = run(&lossy_spec(), 42, &arrivals);
    let (c, _) = run(&lossy_spec(), 43, &arrivals);
    assert_eq!(a, b);
    assert_ne!(a.lost(), c.lost());
    assert!(!a.lost().is_empty());
}

#[test]
fn time_going_backwards_is_taken_as_the_latest() {
    let mut link = LinkModel::new(&constant(1000.0), 1);
    assert_eq!(link.enqueue(ms(100), 1500, 0), Enqueue::Queued);
    assert_eq!(link.enqueue(ms(50), 1500, 1), Enqueue::Queued);
    assert!(link.poll_deliver(ms(200)).is_some());
    assert_eq!(link.poll_deliver(ms(0)).map(|d| d.at()), Some(ms(124)));
}

#[test]
fn hostile_specs_do_not_panic() {
    let unsorted = Trace { name: "u".into(), opportunities_ms: vec![9, 3, 3, 0], period_ms: 2 };
    let empty = Trace { name: "e".into(), opportunities_ms: vec![], period_ms: 0 };
    let huge = Trace { name: "h".into(), opportunities_ms: vec![u64::MAX - 1, u64::MAX], period_ms: u64::MAX };
    let mut bad_schedule = Schedule::parse("s", "t_s,delay_ms,loss,rate_kbps\n").unwrap();
    bad_schedule.rows.push(crate::link::ScheduleRow {
        t_s: f64::NAN,
        delay_ms: Some(f64::INFINITY),
        loss: Some(f64::NAN),
        rate_kbps: Some(-5.0),
    });
    let specs = [
        constant(f64::NAN),
        constant(-1.0),
        constant(f64::INFINITY),
        constant(1e-300),
        LinkDirSpec { delay: Duration::MAX, ..constant(1000.0) },
        LinkDirSpec { rate: RateSpec::Trace(Arc::new(unsorted)), ..constant(0.0) },
        LinkDirSpec { rate: RateSpec::Trace(Arc::new(empty)), ..constant(0.0) },
        LinkDirSpec { rate: RateSpec::Trace(Arc::new(huge)), ..constant(0.0) },
        LinkDirSpec { schedule: Some(Arc::new(bad_schedule)), ..constant(1000.0) },
        LinkDirSpec {
            outages: vec![Outage { at: Duration::MAX, duration: Duration::MAX, jitter: Duration::ZERO }],
            ..constant(1000.0)
        },
    ];
    for spec in &specs {
        let mut link = LinkModel::new(spec, 3);
        for (i, t) in [0, 0, 5, 1 << 40, u64::MAX - 1, u64::MAX].into_iter().enumerate() {
            let now = Instant::from_micros(t);
            let _ = link.enqueue(now, [0, 1, 1500, usize::MAX][i % 4], i);
            while link.poll_deliver(now).is_some() {}
            let _ = (link.poll_timeout(), link.queued_bytes(now), link.true_rate_kbps(now));
        }
        let s = link.stats().clone();
        let reported = s.delivered_packets + s.random_losses + s.outage_losses + s.queue_drops;
        assert_eq!(reported + link.packets_in_link() as u64, s.offered_packets, "{spec:?}");
    }
    // An infinite rate serialises in no time.
    let (out, _) = run(&constant(f64::INFINITY), 1, &[(ms(7), 1500), (ms(7), 1500)]);
    assert_eq!(out.delivered(), [(0, ms(7)), (1, ms(7))]);
}

/// mm-link's loop, opportunity by opportunity: every packet that has arrived by an opportunity
/// shares its 1500 bytes in FIFO order. Departure times of each packet, `None` if beyond `horizon`.
fn mm_link_reference(trace: &Trace, arrivals: &[(Instant, usize)], horizon_ms: u64) -> Vec<Option<Instant>> {
    let mut out = vec![None; arrivals.len()];
    let mut head = 0;
    let mut left_of_head = arrivals.first().map_or(0, |a| a.1);
    'laps: for lap in 0.. {
        for &o in &trace.opportunities_ms {
            let t_ms = lap * trace.period_ms + o;
            if t_ms > horizon_ms {
                break 'laps;
            }
            let t = ms(t_ms);
            let mut credit = TRACE_OPPORTUNITY_BYTES;
            // A 0-byte packet still needs an opportunity to ride; credit 0 can carry it.
            while head < arrivals.len() && arrivals[head].0 <= t {
                let take = left_of_head.min(credit);
                credit -= take;
                left_of_head -= take;
                if left_of_head > 0 {
                    break;
                }
                out[head] = Some(t);
                head += 1;
                left_of_head = arrivals.get(head).map_or(0, |a| a.1);
                if credit == 0 && left_of_head > 0 {
                    break;
                }
            }
        }
    }
    out
}

fn arb_trace() -> impl Strategy<Value = Trace> {
    proptest::collection::vec(0u64..40, 1..12).prop_map(|mut opps| {
        opps.sort_unstable();
        let text: String = opps.iter().map(|o| format!("{o}\n")).collect();
        Trace::parse("p", &text).unwrap()
    })
}

fn arb_arrivals(max_gap_us: u64, max_size: usize) -> impl Strategy<Value = Vec<(Instant, usize)>> {
    proptest::collection::vec((0..max_gap_us, 0..max_size), 0..120).prop_map(|v| {
        let mut t = 0;
        v.into_iter()
            .map(|(gap, size)| {
                t += gap;
                (Instant::from_micros(t), size)
            })
            .collect()
    })
}

fn arb_loss() -> impl Strategy<Value = LossSpec> {
    prop_oneof![
        Just(LossSpec::None),
        (0.0..=1.0f64).prop_map(|p| LossSpec::Bernoulli { p }),
        (0.0..=1.0f64, 0.0..=1.0f64, 0.0..=1.0f64, 0.0..=1.0f64)
            .prop_map(|(p_gb, p_bg, loss_good, loss_bad)| { LossSpec::Gilbert { p_gb, p_bg, loss_good, loss_bad } }),
    ]
}

fn arb_rate_kbps() -> impl Strategy<Value = f64> {
    prop_oneof![Just(0.0), Just(f64::INFINITY), 1.0..20_000.0f64]
}

fn arb_schedule() -> impl Strategy<Value = Option<Arc<Schedule>>> {
    let row = (
        0.0..3.0f64,
        proptest::option::of(0.0..200.0f64),
        proptest::option::of(0.0..=1.0f64),
        proptest::option::of(arb_rate_kbps()),
    )
        .prop_map(|(t_s, delay_ms, loss, rate_kbps)| crate::link::ScheduleRow { t_s, delay_ms, loss, rate_kbps });
    proptest::option::of(proptest::collection::vec(row, 0..6).prop_map(|mut rows| {
        rows.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
        Arc::new(Schedule { rows })
    }))
}

fn arb_spec() -> impl Strategy<Value = LinkDirSpec> {
    let rate = prop_oneof![
        arb_rate_kbps().prop_map(|kbps| RateSpec::Constant { kbps }),
        arb_trace().prop_map(|t| RateSpec::Trace(Arc::new(t))),
    ];
    let outages = proptest::collection::vec((0u64..3000, 0u64..500), 0..4).prop_map(|v| {
        v.into_iter()
            .map(|(at, len)| Outage {
                at: Duration::from_millis(at),
                duration: Duration::from_millis(len),
                jitter: Duration::ZERO,
            })
            .collect()
    });
    (rate, 0u64..200, 0usize..20_000, arb_loss(), arb_schedule(), outages).prop_map(
        |(rate, delay_ms, queue_bytes, loss, schedule, outages)| LinkDirSpec {
            rate,
            delay: Duration::from_millis(delay_ms),
            queue_bytes,
            loss,
            schedule,
            outages,
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any spec, any arrivals: no panic, every packet accounted for exactly once, deliveries in
    /// FIFO order and time order, nothing delivered before it was sent.
    #[test]
    fn every_packet_is_accounted_for_in_order(
        spec in arb_spec(),
        arrivals in arb_arrivals(20_000, 4000),
        seed in any::<u64>(),
    ) {
        let (out, link) = run(&spec, seed, &arrivals);
        let s = link.stats();
        let stuck = link.packets_in_link();
        prop_assert_eq!(s.offered_packets, arrivals.len() as u64);
        prop_assert_eq!(
            s.delivered_packets + s.random_losses + s.outage_losses + s.queue_drops + stuck as u64,
            s.offered_packets
        );
        prop_assert_eq!(s.queue_drops as usize, out.dropped.len());
        // Whatever is left is stuck behind a rate that never rises, so it never comes out.
        prop_assert!(stuck == 0 || link.poll_timeout().is_none());

        let delivered = out.delivered();
        prop_assert!(delivered.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        prop_assert!(out.lost().windows(2).all(|w| w[0].0 < w[1].0));
        prop_assert!(out.reports.windows(2).all(|w| w[0].at() <= w[1].at()));
        let mut seen = vec![false; arrivals.len()];
        for &(id, at) in &delivered {
            prop_assert!(at >= arrivals[id].0);
            seen[id] = true;
        }
        for (id, at, _) in out.lost() {
            prop_assert!(at >= arrivals[id].0);
            prop_assert!(!seen[id]);
            seen[id] = true;
        }
        for &id in &out.dropped {
            prop_assert!(!seen[id]);
            seen[id] = true;
        }
        prop_assert_eq!(seen.iter().filter(|&&x| !x).count(), stuck);
        // Nothing gets past a stuck packet: everything delivered or lost is older.
        if let Some(first_stuck) = seen.iter().position(|&x| !x) {
            let older = out.reports.iter().all(|r| id(r) < first_stuck);
            prop_assert!(older);
        }
        let bytes: usize = delivered.iter().map(|&(id, _)| arrivals[id].1).sum();
        prop_assert_eq!(s.delivered_bytes, bytes as u64);
    }

    /// On a trace link (unbounded queue, no loss, no delay) every departure is what mm-link's
    /// opportunity-by-opportunity loop gives.
    #[test]
    fn trace_matches_mm_link_reference(trace in arb_trace(), arrivals in arb_arrivals(8000, 5000)) {
        let spec = LinkDirSpec { rate: RateSpec::Trace(Arc::new(trace.clone())), ..constant(0.0) };
        let horizon_ms = arrivals.last().map_or(0, |a| a.0.as_micros() / 1000) + 5000 * trace.period_ms;
        let (out, _) = run(&spec, 1, &arrivals);
        let mut got = vec![None; arrivals.len()];
        for (id, at) in out.delivered() {
            got[id] = Some(at);
        }
        let want = mm_link_reference(&trace, &arrivals, horizon_ms);
        prop_assert_eq!(got, want);
    }

    /// On a constant-rate link every departure is the fluid FIFO formula
    /// `max(arrival, previous departure) + size * 8 / rate`, rounded up, to within 1 µs.
    #[test]
    fn constant_rate_matches_fluid_fifo(kbps in 1.0..50_000.0f64, arrivals in arb_arrivals(3000, 3000)) {
        let (out, _) = run(&constant(kbps), 1, &arrivals);
        let delivered = out.delivered();
        prop_assert_eq!(delivered.len(), arrivals.len());
        let mut free = 0.0f64;
        for (i, (&(id, at), &(arrival, size))) in delivered.iter().zip(&arrivals).enumerate() {
            prop_assert_eq!(id, i);
            free = free.max(arrival.as_micros() as f64) + size as f64 * 8000.0 / kbps;
            // Rounding up, and continuing a busy run across a sub-µs idle gap, each stay < 1 µs.
            let diff = at.as_micros() as f64 - free;
            prop_assert!(diff.abs() < 1.0 + 1e-6, "packet {} left at {} µs, fluid {} µs", id, at.as_micros(), free);
        }
    }
}
