//! One of two 20 Mbit/s uplinks falls to 2 Mbit/s for 10 s under a bulk CUBIC download
//! (scenarios/uplink-drop.toml, bench-bond's drop case in virtual time), under braid's default
//! scheme: the uplink that is left carries the download, and both are used again once the rate
//! is back.
//!
//! What it guards: the passenger's TCP, in recovery after the fall, sends a burst that overflows
//! the remaining uplink's buffer, and its loss estimate jumps to 0.65 on a report whose echo
//! predates the queue. Degraded for that at once, the one fast uplink was drained for half a
//! second, the download went over the 2 Mbit/s one and the passenger's TCP timed out (5.1 and
//! 6.7 Mbit/s in the two seconds after the fall). A link the others could not stand in for is now
//! judged as a queued one when it was found overfilled within the second before
//! (`braid_proto::link::Evidence::dominant`).

use braid_sim::runner::{RunOptions, run_scenario};
use braid_sim::scenario::Scenario;
use std::path::Path;

#[test]
fn the_uplink_left_after_a_fall_is_not_drained() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/uplink-drop.toml");
    let mut sc = Scenario::from_file(&path).expect("shipped scenario parses");
    sc.schemes.retain(|s| s.name == "default");
    assert_eq!(sc.schemes.len(), 1, "the scenario runs braid's default scheme");
    let report = run_scenario(&sc, &RunOptions { runs: Some(1), ..Default::default() }, &|_, _| {}).unwrap();
    let r = &report.runs[0];
    let series: Vec<u64> = r.goodput_kbps_series.iter().map(|g| g.round() as u64).collect();
    println!("goodput per second (kbit/s): {series:?}");
    let two = r.links.iter().find(|l| l.name == "two").expect("link two");
    assert_eq!(two.degraded_s, Some(0.0), "the uplink left was drained");
    // Uplink two's 20 Mbit/s from 2 s after the fall, both again from 2 s after the restore.
    assert!(series[10..18].iter().all(|&g| g >= 19_000), "{series:?}");
    assert!(series[20..25].iter().all(|&g| g >= 35_000), "{series:?}");
}
