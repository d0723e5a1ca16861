//! The default scheme (`auto`) with one bulk CUBIC flow over FMTCP Table II's long lossy paths
//! (FMTCP VI-C; `scenarios/fmtcp-table2-case*.toml`), in short virtual time: there `auto` must
//! keep judging the paths long (braid's CoDel on, wireless and overflow losses repaired) for the
//! whole transfer. The full 60 s table is `scripts/default-vs-named.sh
//! scenarios/fmtcp-table2-case*.toml`.

use braid_sim::results::SchemeResult;
use braid_sim::runner::{RunOptions, run_scenario};
use braid_sim::scenario::Scenario;
use std::path::Path;
use std::time::Duration;

/// One 30 s run of `file`'s default scheme (at `seed`, or the file's).
fn default_for_30_s(file: &str, seed: Option<u64>) -> SchemeResult {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios").join(file);
    let mut sc = Scenario::from_file(&path).expect("shipped scenario parses");
    sc.schemes.retain(|s| s.name == "default");
    assert_eq!(sc.schemes.len(), 1, "a default scheme");
    sc.duration = Duration::from_secs(30);
    sc.seed = seed.unwrap_or(sc.seed);
    let report = run_scenario(&sc, &RunOptions { runs: Some(1), ..Default::default() }, &|_, _| {}).expect("runs");
    report.results.into_iter().next().expect("one run")
}

#[test]
fn on_paths_400_ms_apart_the_default_keeps_its_aqm_and_its_repairs() {
    // Case 8: path 1 100 ms one way and 0.1 % loss, path 2 500 ms and 1 %. A flow's slow start
    // over these round trips takes most of 20 s, then the fast path's 200 ms buffer is full.
    let r = &default_for_30_s("fmtcp-table2-case8.toml", None);
    let goodput = r.goodput_kbps.expect("bulk goodput");
    eprintln!("default: {goodput:.0} kbit/s, late {:.4}", r.late_fraction);
    // When the server's path round-trip estimate fell to 0 (its queue model's error), `auto`
    // judged the paths short 19 s in: CoDel off, the fast path's overflow losses given up to
    // TCP, a stall, 6.4 Mbit/s over these 30 s and 2.6 % of packets past their hole's give-up;
    // with `aqm = true` 9.6 Mbit/s. Sum of capacity x (1 - loss): 19.89 Mbit/s.
    // Now about 8.6 Mbit/s with 0.75 % late (with the gate that keeps coded packets off a link
    // whose sends go unconfirmed; without it, none late; why is not known yet). The bound still
    // tells this from the failure above. With hosts that send whole segments (`[tcp]
    // whole_segments`), this seed meets one retransmission timeout: 7.9 Mbit/s (seeds 2 and 3
    // 11.9 and 11.4; with smoltcp's runts seed 3 met one: 11.2, 11.5, 8.2), so the bound sits
    // between that and the failure's 6.4.
    assert!(goodput >= 0.36 * 19_890.0, "default {goodput:.0} kbit/s");
    assert!(r.late_fraction < 0.015, "late {:.4}", r.late_fraction);
}

#[test]
fn a_hole_decoded_from_the_coded_packets_on_its_lossy_path_is_not_resent() {
    // Case 3: path 2 loses 20 %, so `auto` sends coded packets after its data on it, and the
    // client decodes a hole from them a few packets after reporting it. The server's repair
    // waits for the client's ack of the decoded hole before it resends (`Session::repair_wait`).
    // Seed 2 codes for path 2 from its first seconds on (seeds 1 and 3 start and stop in their
    // first 5 s, while the loss estimate settles, and resend as before then).
    let r = &default_for_30_s("fmtcp-table2-case3.toml", Some(2));
    let goodput = r.goodput_kbps.expect("bulk goodput");
    eprintln!("default: {goodput:.0} kbit/s, {} resent, mean hold {:.1} ms", r.resent, r.mean_hold_ms);
    // Resent at once, every hole went again a round trip later and arrived as a duplicate: 2,562
    // resent in these 30 s (13.1 Mbit/s); waiting, 443 (13.6 Mbit/s).
    assert!(r.resent < 1_000, "{} resent", r.resent);
    assert!(goodput >= 0.70 * 17_990.0, "default {goodput:.0} kbit/s");
}
