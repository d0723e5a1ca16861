//! The default scheme (`auto`, a `[[scheme]]` with only a name) against the named schemes of two
//! shipped files, in short virtual time: where the best code differs (PluriBus Fig. 10's bursty
//! loss wants RLNC) and where a coding budget of 0 forbids coded repairs. The full table over every
//! file is `scripts/default-vs-named.sh`.

use braid_sim::runner::{RunOptions, run_scenario};
use braid_sim::scenario::Scenario;
use std::path::Path;
use std::time::Duration;

/// The point `value` of `file`'s sweep, with only the schemes `keep`, 120 s of virtual time.
fn scenario(file: &str, value: f64, keep: &[&str]) -> Scenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios").join(file);
    let sc = Scenario::from_file(&path).expect("shipped scenario parses");
    let sweep = sc.sweep.expect("a sweep");
    let i = sweep.values.iter().position(|&v| v == value).expect("the swept value");
    let mut sc = sweep.points[i].clone();
    sc.schemes.retain(|s| keep.contains(&s.name.as_str()));
    assert_eq!(sc.schemes.len(), keep.len(), "{file}: schemes {keep:?}");
    sc.duration = Duration::from_secs(120);
    sc
}

/// The mean FCT over 2 runs of each of `names`, in that order.
fn mean_fct<const N: usize>(sc: &Scenario, names: [&str; N]) -> [f64; N] {
    let report = run_scenario(sc, &RunOptions { runs: Some(2), ..Default::default() }, &|_, _| {}).expect("runs");
    for r in &report.results {
        eprintln!("{}: mean FCT {:?} s", r.scheme, r.fct_mean_s);
    }
    names.map(|n| {
        let r = report.results.iter().find(|r| r.scheme == n).expect("a result per scheme");
        r.fct_mean_s.expect("flows completed")
    })
}

#[test]
fn under_heavy_bursty_loss_the_default_codes_as_well_as_rlnc() {
    // One 1.5 Mbit/s link losing half of what it carries in bad spells (mean 25 %): OEC's XORs
    // cannot untangle several holes at once, RLNC's combinations can.
    let names = ["oec", "rlnc", "default"];
    let [oec, rlnc, default] = mean_fct(&scenario("fig10-gilbert-sweep.toml", 0.5, &names), names);
    assert!(default <= rlnc.min(oec) / 0.95, "default {default:.3} s, rlnc {rlnc:.3} s, oec {oec:.3} s");
}

#[test]
fn on_a_lone_link_losing_a_third_the_default_keeps_pace_with_the_best_code() {
    // The sweep's last point, 35 % mean loss: a lone link taken down in a quiet spell though the
    // peer's datagrams still arrived on it came back only after tens of seconds, while the client
    // held the passengers' packets (here 2.8 s mean FCT against RLNC's 0.8).
    let names = ["oec", "rlnc", "default"];
    let [oec, rlnc, default] = mean_fct(&scenario("fig10-gilbert-sweep.toml", 0.7, &names), names);
    assert!(default <= rlnc.min(oec) / 0.95, "default {default:.3} s, rlnc {rlnc:.3} s, oec {oec:.3} s");
}

#[test]
fn with_no_coding_budget_the_default_still_repairs_known_holes() {
    // The bus with a coding budget of 0: OEC's coded repairs are withheld and the receiver waited
    // for them in vain (slower than no recovery at all); the default resends what is reported lost.
    let names = ["none", "oec", "default"];
    let [none, oec, default] = mean_fct(&scenario("bus-metered.toml", 0.0, &names), names);
    assert!(default < none && default < oec, "default {default:.3} s, none {none:.3} s, oec {oec:.3} s");
}
