//! The paired comparisons of the report rest on the runner giving run `i` of every scheme (and
//! every sweep point) the same seed, hence the same flows; these tests check that on real runs.

use braid_sim::report::comparisons;
use braid_sim::runner::{RunOptions, run_scenario};
use braid_sim::scenario::Scenario;
use std::path::Path;
use std::time::Duration;

#[test]
fn every_scheme_gets_the_same_seed_and_flows_per_run() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/fig10-gilbert-sweep.toml");
    let mut sc = Scenario::from_file(&path).expect("shipped scenario parses");
    sc.schemes.retain(|s| s.name == "none" || s.name == "rlnc");
    let sweep = sc.sweep.as_mut().expect("fig10 sweeps");
    sweep.points.truncate(2);
    sweep.values.truncate(2);
    for p in sweep.points.iter_mut() {
        p.duration = Duration::from_secs(20);
        p.schemes.retain(|s| s.name == "none" || s.name == "rlnc");
    }
    let opts = RunOptions { runs: Some(3), seed: Some(40), ..Default::default() };
    let report = run_scenario(&sc, &opts, &|_, _| {}).expect("runs");
    assert_eq!(report.runs.len(), 2 * 2 * 3);
    for r in &report.runs {
        assert_eq!(r.seed, 40 + u64::from(r.run), "{} run {}", r.scheme, r.run);
        let twin = report
            .runs
            .iter()
            .find(|o| o.scheme != r.scheme && o.run == r.run && o.sweep_value == r.sweep_value)
            .expect("the other scheme's run with the same index");
        assert_eq!(twin.seed, r.seed);
        let plan = |run: &braid_sim::results::RunResult| -> Vec<(u64, f64)> {
            run.flows.iter().map(|f| (f.size_bytes, f.start_s)).collect()
        };
        assert!(!r.flows.is_empty(), "20 s of a 1 flow/s workload starts flows");
        assert_eq!(plan(r), plan(twin), "seed {}: the schemes were given different flows", r.seed);
    }
    // And the report pairs all of them.
    let paired = comparisons(&report, &[]);
    assert_eq!(paired.len(), 2, "rlnc against none at two points");
    for p in &paired {
        assert_eq!((p.reference.as_str(), p.scheme.as_str(), p.runs, p.unpaired_runs), ("none", "rlnc", 3, 0));
    }
}
