//! A hand-built [`SimReport`] for the report tests: three schemes, two runs each, some incomplete flows,
//! with or without a sweep. The aggregates are computed from the runs the way docs/design.md 6 defines them,
//! so the numbers the tests check can be derived by hand from the constants below.

use crate::results::{FlowRecord, LinkResult, RunResult, SchemeResult, SimReport, mean_ci95, percentile};

/// Schemes and their FCT multiplier relative to `oec`.
pub(crate) const SCHEMES: [(&str, f64); 3] = [("oec", 1.0), ("none", 3.4), ("rs", 1.5)];

/// FCTs of the four flows of run 0 and run 1 for a multiplier of 1 (run means 0.4 s and 0.6 s).
const FCTS: [[f64; 4]; 2] = [[0.2, 0.3, 0.5, 0.6], [0.3, 0.5, 0.7, 0.9]];

/// Sweep values used by [`report`] with `sweep = true`; the second doubles every FCT.
pub(crate) const SWEEP: [f64; 2] = [0.01, 0.05];

/// The fixture report.
pub(crate) fn report(sweep: bool) -> SimReport {
    let points: Vec<Option<f64>> = if sweep { SWEEP.iter().map(|v| Some(*v)).collect() } else { vec![None] };
    let mut runs = Vec::new();
    let mut results = Vec::new();
    for (scheme, factor) in SCHEMES {
        for (p, point) in points.iter().enumerate() {
            let factor = factor * if p == 1 { 2.0 } else { 1.0 };
            let scheme_runs: Vec<RunResult> = (0..2).map(|r| run(scheme, r, *point, factor)).collect();
            results.push(aggregate(&scheme_runs));
            runs.extend(scheme_runs);
        }
    }
    SimReport { scenario: "bus".into(), sweep_label: sweep.then(|| "loss".into()), results, runs, wall_s: 1.25 }
}

fn run(scheme: &str, run: u32, sweep_value: Option<f64>, factor: f64) -> RunResult {
    let flows = FCTS[run as usize]
        .iter()
        .enumerate()
        .map(|(k, fct)| {
            // `none` loses its last flow of run 1: an incomplete flow.
            let fct_s = (!(scheme == "none" && run == 1 && k == 3)).then_some(fct * factor);
            FlowRecord {
                size_bytes: 1000 * 10u64.pow(k as u32),
                start_s: 0.5 * k as f64,
                fct_s,
                incomplete: fct_s.is_none(),
            }
        })
        .collect();
    RunResult {
        scheme: scheme.into(),
        run,
        seed: 1 + u64::from(run),
        sweep_value,
        flows,
        goodput_kbps: None,
        goodput_kbps_series: Vec::new(),
        sender_cwnd_kb_series: Vec::new(),
        sender_rtt_ms_series: Vec::new(),
        residual_loss: 0.001 * factor,
        aqm_drops: 0.0,
        overhead: 1.1 + 0.1 * f64::from(run),
        coded_fraction: if scheme == "none" { 0.0 } else { 0.2 },
        recovered: if scheme == "none" { 0 } else { 5 },
        resent: 2,
        tcp_timeouts: u64::from(run),
        tcp_recoveries: 3,
        tcp_spurious_timeouts: 0,
        late_fraction: 0.01,
        reordered_fraction: 0.05,
        mean_hold_ms: 12.0,
        arrival_error_ms: 3.0,
        arrival_within_10ms: 0.9,
        cbr_loss: None,
        cbr_delay_ms: None,
        cbr_jitter_ms: None,
        links: vec![link("wimax", 1500.0, 0.05), link("3g", 800.0, 0.01)],
        pass_share: None,
        longest_stall_ms: None,
        wifi_pass_mb: Vec::new(),
        datagrams: 1000,
        simulated_s: 10.0,
    }
}

fn link(name: &str, capacity: f64, loss: f64) -> LinkResult {
    LinkResult {
        name: name.into(),
        utilisation_down: 0.5,
        utilisation_up: 0.1,
        data_share: if capacity > 1000.0 { 0.65 } else { 0.35 },
        loss,
        queue_drops: 0.002,
        est_capacity_down_kbps: capacity * 0.9,
        true_capacity_down_kbps: capacity,
        est_loss_down: loss * 1.2,
        true_loss_down: loss,
        down_kbps_series: (0..10).map(|s| capacity * 0.5 + 20.0 * f64::from(s)).collect(),
        degraded_s: Some(0.0),
    }
}

/// Aggregates runs of one scheme at one point as docs/design.md 6 says.
pub(crate) fn aggregate(runs: &[RunResult]) -> SchemeResult {
    let mean = |f: fn(&RunResult) -> f64| runs.iter().map(f).sum::<f64>() / runs.len() as f64;
    let run_means: Vec<f64> = runs.iter().filter_map(RunResult::mean_fct_s).collect();
    let fct = mean_ci95(&run_means);
    let mut done: Vec<f64> = runs.iter().flat_map(|r| r.flows.iter().filter_map(|f| f.fct_s)).collect();
    SchemeResult {
        scheme: runs[0].scheme.clone(),
        sweep_value: runs[0].sweep_value,
        runs: runs.len() as u32,
        flows: runs.iter().map(|r| r.flows.len() as u64).sum(),
        fct_mean_s: fct.map(|(m, _)| m),
        fct_ci95_s: fct.and_then(|(_, ci)| ci),
        fct_p50_s: percentile(&mut done, 50.0),
        fct_p95_s: percentile(&mut done, 95.0),
        fct_p99_s: percentile(&mut done, 99.0),
        incomplete_flows: runs.iter().flat_map(|r| &r.flows).filter(|f| f.fct_s.is_none()).count() as u64,
        goodput_kbps: None,
        goodput_ci95_kbps: None,
        goodput_kbps_series: Vec::new(),
        sender_cwnd_kb_series: Vec::new(),
        sender_rtt_ms_series: Vec::new(),
        residual_loss: mean(|r| r.residual_loss),
        aqm_drops: mean(|r| r.aqm_drops),
        overhead: mean(|r| r.overhead),
        coded_fraction: mean(|r| r.coded_fraction),
        recovered: runs.iter().map(|r| r.recovered).sum(),
        resent: runs.iter().map(|r| r.resent).sum(),
        tcp_timeouts: mean(|r| r.tcp_timeouts as f64),
        tcp_recoveries: mean(|r| r.tcp_recoveries as f64),
        tcp_spurious_timeouts: mean(|r| r.tcp_spurious_timeouts as f64),
        late_fraction: mean(|r| r.late_fraction),
        reordered_fraction: mean(|r| r.reordered_fraction),
        mean_hold_ms: mean(|r| r.mean_hold_ms),
        arrival_error_ms: mean(|r| r.arrival_error_ms),
        arrival_within_10ms: mean(|r| r.arrival_within_10ms),
        cbr_loss: None,
        cbr_delay_ms: None,
        cbr_jitter_ms: None,
        links: runs[0].links.clone(),
        pass_share: None,
        longest_stall_ms: None,
        wifi_pass_mb: None,
    }
}

/// The fixture with every flow incomplete: no FCT anywhere.
pub(crate) fn report_without_completed_flows(sweep: bool) -> SimReport {
    let mut report = report(sweep);
    for run in &mut report.runs {
        for flow in &mut run.flows {
            flow.fct_s = None;
            flow.incomplete = true;
        }
    }
    rebuild(&mut report);
    report
}

/// Recomputes the aggregates of `report` from its runs (after a test edited them).
pub(crate) fn rebuild(report: &mut SimReport) {
    let mut results = Vec::new();
    for scheme in super::scheme_names(report) {
        for point in super::sweep_points(report) {
            let runs: Vec<RunResult> = super::runs_of(report, scheme, point).into_iter().cloned().collect();
            if !runs.is_empty() {
                results.push(aggregate(&runs));
            }
        }
    }
    report.results = results;
}

/// A fresh, empty directory under the system temp dir for one test.
pub(crate) fn temp_dir(test: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("braid-report-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create a temp dir for the test");
    dir
}
