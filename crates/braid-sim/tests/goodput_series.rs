//! The per-second bulk goodput series (what FMTCP Fig. 11 plots) adds up to the run's goodput and
//! follows the links' capacity.

use braid_sim::runner::{RunOptions, run_scenario};
use braid_sim::scenario::Scenario;
use std::path::Path;
use std::time::Duration;

#[test]
fn goodput_series_sums_to_the_goodput_and_stays_under_capacity() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/natalie-fig7.toml");
    let mut sc = Scenario::from_file(&path).expect("shipped scenario parses");
    sc.schemes.retain(|s| s.name == "min-delay");
    sc.duration = Duration::from_secs(30);
    let opts = RunOptions { runs: Some(1), ..Default::default() };
    let report = run_scenario(&sc, &opts, &|_, _| {}).expect("runs");
    let run = &report.runs[0];
    let series = &run.goodput_kbps_series;
    assert_eq!(series.len(), 30, "one value per second");
    assert_eq!(series[0], 0.0, "the workload starts at 1 s");
    // goodput_kbps is measured from 1 s to the end.
    let mean = series.iter().sum::<f64>() / 29.0;
    let goodput = run.goodput_kbps.expect("bulk goodput");
    assert!((mean - goodput).abs() < 1e-6 * goodput, "series mean {mean} vs goodput {goodput}");
    // Both links give 10 Mbit/s until 10 s, then 7 + 4 until 30 s (natalie-fig7-link*.csv).
    assert!(series[2..10].iter().all(|&g| g <= 20_000.0), "{series:?}");
    assert!(series[12..30].iter().all(|&g| g <= 11_000.0), "{series:?}");
    assert!(series[2..10].iter().sum::<f64>() / 8.0 > 11_000.0, "a bulk flow uses both free links: {series:?}");
    // And the report averages it per second.
    assert_eq!(&report.results[0].goodput_kbps_series, series);
    // Beside it, the sender's window and round trip at the end of each second: nothing before
    // the flow starts; then a window at least the initial 10 segments that carries the second's
    // goodput within its round trip (goodput <= window / RTT, within the smoothing), over
    // a round trip no shorter than the links' 2 x 10 ms.
    let (cwnd, rtt) = (&run.sender_cwnd_kb_series, &run.sender_rtt_ms_series);
    assert_eq!((cwnd.len(), rtt.len()), (30, 30), "one value per second");
    assert_eq!((cwnd[0], rtt[0]), (0.0, 0.0), "{cwnd:?}");
    for s in 2..30 {
        assert!(cwnd[s] >= 14.0 && rtt[s] >= 20.0, "second {s}: {} kB, {} ms", cwnd[s], rtt[s]);
        let carried_kb = series[s] / 8.0 * rtt[s] / 1000.0;
        assert!(carried_kb <= cwnd[s] * 1.2, "second {s}: {carried_kb} kB in a round trip, window {} kB", cwnd[s]);
    }
    assert_eq!(&report.results[0].sender_cwnd_kb_series, cwnd);
    // A bulk flow has no end of its own: one that ran to the end of the run is not incomplete
    // (the table said "1/1 (100.0 %)").
    assert_eq!(report.results[0].incomplete_flows, 0);
}

#[test]
fn a_bulk_flow_that_fails_keeps_the_goodput_it_delivered() {
    // The only link goes dark at 4 s for longer than the hosts' 60 s idle timeout, so the flow
    // fails and its hosts forget it. What it delivered in its first 3 s still counts, and the
    // series never falls below zero (when the host's count fell to zero, the subtraction
    // overflowed: a panic in a debug build, about 1.5e17 kbit/s in a release one, and a goodput
    // of 0).
    let text = r#"
name = "failing-bulk"
duration_s = 70
runs = 1
seed = 1

[[link]]
name = "only"
outages = [ { at_s = 4, for_s = 66 } ]
down = { rate_kbps = 5000, delay_ms = 20 }
up = { rate_kbps = 5000, delay_ms = 20 }

[workload]
kind = "bulk"
flows = 1
direction = "down"

[[scheme]]
name = "single"
recovery = "none"
scheduler = "single"
"#;
    let sc = Scenario::from_str(text, Path::new(".")).expect("parses");
    let opts = RunOptions { runs: Some(1), ..Default::default() };
    let report = run_scenario(&sc, &opts, &|_, _| {}).expect("runs");
    let run = &report.runs[0];
    let series = &run.goodput_kbps_series;
    assert!(series.iter().all(|&g| g <= 5_000.0), "{series:?}");
    assert!(series[1..4].iter().sum::<f64>() > 5_000.0, "the flow ran before the outage: {series:?}");
    let goodput = run.goodput_kbps.expect("bulk goodput");
    let mean = series.iter().sum::<f64>() / 69.0;
    assert!(goodput > 0.0 && (mean - goodput).abs() < 1e-6 * goodput, "series mean {mean} vs goodput {goodput}");
    assert_eq!(report.results[0].incomplete_flows, 1, "a bulk flow that failed is incomplete");
}
