//! `rlnc:<K>`: coded packets sent ahead of any report repair holes sooner than reports can, so
//! packets behind a hole wait less in the peer's sequencing buffer (`recovery/rlnc_sender.rs`).

use braid_sim::runner::{RunOptions, run_scenario};
use braid_sim::scenario::Scenario;
use std::path::Path;
use std::time::Duration;

#[test]
fn coded_packets_ahead_of_reports_shorten_the_hold_behind_each_hole() {
    // FMTCP Table II case 5: both paths full with one bulk flow (no spare capacity for
    // opportunistic coding), path 2 losing 1 %, so holes wait for a report's round trip.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/fmtcp-table2-case5.toml");
    let mut sc = Scenario::from_file(&path).expect("shipped scenario parses");
    sc.schemes.retain(|s| s.name == "rlnc-aqm");
    let mut ahead = sc.schemes[0].clone();
    ahead.name = "rlnc-aqm-ahead".into();
    let braid_sim::scenario::SchemeKind::Braid { recovery, .. } = &mut ahead.kind else { panic!("a braid scheme") };
    *recovery = "rlnc:2".parse().expect("rlnc:<K> parses");
    sc.schemes.push(ahead);
    sc.duration = Duration::from_secs(20);
    let opts = RunOptions { runs: Some(1), ..Default::default() };
    let report = run_scenario(&sc, &opts, &|_, _| {}).expect("runs");
    let [plain, ahead] = [0, 1].map(|i| &report.results[i]);
    assert_eq!(ahead.scheme, "rlnc-aqm-ahead");
    // Without: a hole waits for the peer's report and the repair, about two 100 ms paths.
    assert!(plain.mean_hold_ms > 50.0, "{}", plain.mean_hold_ms);
    // With 2 coded packets per 100 data packets sent at once, the next one repairs it: 139 ms
    // against 8.9 ms when written.
    assert!(
        ahead.mean_hold_ms < plain.mean_hold_ms / 3.0,
        "{} ms against {} ms",
        ahead.mean_hold_ms,
        plain.mean_hold_ms
    );
    assert_eq!(ahead.late_fraction, 0.0, "holes repaired in time");
}
