//! Runs a whole scenario: every scheme, every run, every sweep point, in parallel on all cores,
//! with the same seeds for every scheme (docs/design.md 5), and aggregates the results (docs/design.md 6).

use crate::results::{LinkResult, RunResult, SchemeResult, SimReport, mean_ci95, percentile};
use crate::scenario::{Scenario, SchemeSpec};
use crate::world::{self, SimError};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// How to run a scenario.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Overrides the scenario's `runs`.
    pub runs: Option<u32>,
    /// Overrides the scenario's `seed`.
    pub seed: Option<u64>,
    /// Worker threads (default: all cores).
    pub jobs: Option<usize>,
}

struct Job<'a> {
    scenario: &'a Scenario,
    scheme: &'a SchemeSpec,
    sweep_value: Option<f64>,
    run: u32,
    seed: u64,
}

/// Runs everything; `progress(done, total)` is called after each run finishes.
pub fn run_scenario(
    scenario: &Scenario,
    opts: &RunOptions,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<SimReport, SimError> {
    let started = std::time::Instant::now();
    let runs = opts.runs.unwrap_or(scenario.runs).max(1);
    let seed0 = opts.seed.unwrap_or(scenario.seed);
    let points = scenario.expand_sweep();
    // Check every scheme maps onto the engine before spending time on any run.
    for (_, sc) in &points {
        for s in &sc.schemes {
            world::engine_scheme(s)?;
        }
    }
    let mut jobs = Vec::new();
    for (value, sc) in &points {
        for scheme in &sc.schemes {
            for run in 0..runs {
                jobs.push(Job { scenario: sc, scheme, sweep_value: *value, run, seed: seed0 + u64::from(run) });
            }
        }
    }
    let total = jobs.len();
    let threads =
        opts.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).clamp(1, total.max(1));
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<RunResult, SimError>>>> = Mutex::new((0..total).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(j) = jobs.get(i) else { break };
                    let span = tracing::info_span!("run", scheme = %j.scheme.name, run = j.run, seed = j.seed);
                    let r = span.in_scope(|| world::run(j.scenario, j.scheme, j.run, j.seed, j.sweep_value));
                    results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
                    progress(done.fetch_add(1, Ordering::Relaxed) + 1, total);
                }
            });
        }
    });
    let runs_out: Vec<RunResult> = results
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|r| r.expect("every job index below total was taken by a worker"))
        .collect::<Result<_, _>>()?;
    let mut aggregates = Vec::new();
    for (value, sc) in &points {
        for scheme in &sc.schemes {
            let mine: Vec<&RunResult> =
                runs_out.iter().filter(|r| r.scheme == scheme.name && r.sweep_value == *value).collect();
            aggregates.push(aggregate(&scheme.name, *value, &mine));
        }
    }
    Ok(SimReport {
        scenario: scenario.name.clone(),
        sweep_label: scenario.sweep.as_ref().map(|s| s.label.clone()),
        results: aggregates,
        runs: runs_out,
        wall_s: started.elapsed().as_secs_f64(),
    })
}

fn mean(xs: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = xs.collect();
    if v.is_empty() { 0.0 } else { v.iter().sum::<f64>() / v.len() as f64 }
}

fn mean_opt(xs: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let v: Vec<f64> = xs.flatten().collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Aggregates one scheme's runs: FCT mean with a Student-t 95 % interval over per-run means,
/// percentiles over all flows pooled, everything else averaged.
pub fn aggregate(scheme: &str, sweep_value: Option<f64>, runs: &[&RunResult]) -> SchemeResult {
    let per_run: Vec<f64> = runs.iter().filter_map(|r| r.mean_fct_s()).collect();
    let fct = mean_ci95(&per_run);
    let mut all: Vec<f64> = runs.iter().flat_map(|r| r.flows.iter().filter_map(|f| f.fct_s)).collect();
    let goodputs: Vec<f64> = runs.iter().filter_map(|r| r.goodput_kbps).collect();
    let goodput = mean_ci95(&goodputs);
    let links = match runs.first() {
        None => Vec::new(),
        Some(first) => first
            .links
            .iter()
            .enumerate()
            .map(|(i, l0)| {
                let ls: Vec<&LinkResult> = runs.iter().filter_map(|r| r.links.get(i)).collect();
                LinkResult {
                    name: l0.name.clone(),
                    utilisation_down: mean(ls.iter().map(|l| l.utilisation_down)),
                    utilisation_up: mean(ls.iter().map(|l| l.utilisation_up)),
                    data_share: mean(ls.iter().map(|l| l.data_share)),
                    loss: mean(ls.iter().map(|l| l.loss)),
                    queue_drops: mean(ls.iter().map(|l| l.queue_drops)),
                    est_capacity_down_kbps: mean(ls.iter().map(|l| l.est_capacity_down_kbps)),
                    true_capacity_down_kbps: mean(ls.iter().map(|l| l.true_capacity_down_kbps)),
                    est_loss_down: mean(ls.iter().map(|l| l.est_loss_down)),
                    true_loss_down: mean(ls.iter().map(|l| l.true_loss_down)),
                    down_kbps_series: l0.down_kbps_series.clone(),
                    degraded_s: l0.degraded_s.map(|_| mean(ls.iter().map(|l| l.degraded_s.unwrap_or(0.0)))),
                }
            })
            .collect(),
    };
    SchemeResult {
        scheme: scheme.to_string(),
        sweep_value,
        runs: runs.len() as u32,
        flows: runs.iter().map(|r| r.flows.len() as u64).sum(),
        fct_mean_s: fct.map(|f| f.0),
        fct_ci95_s: fct.and_then(|f| f.1),
        fct_p50_s: percentile(&mut all, 50.0),
        fct_p95_s: percentile(&mut all, 95.0),
        fct_p99_s: percentile(&mut all, 99.0),
        incomplete_flows: runs.iter().map(|r| r.flows.iter().filter(|f| f.incomplete).count() as u64).sum(),
        goodput_kbps: goodput.map(|g| g.0),
        goodput_ci95_kbps: goodput.and_then(|g| g.1),
        goodput_kbps_series: mean_series(runs.iter().map(|r| r.goodput_kbps_series.as_slice())),
        sender_cwnd_kb_series: mean_series(runs.iter().map(|r| r.sender_cwnd_kb_series.as_slice())),
        sender_rtt_ms_series: mean_series(runs.iter().map(|r| r.sender_rtt_ms_series.as_slice())),
        residual_loss: mean(runs.iter().map(|r| r.residual_loss)),
        aqm_drops: mean(runs.iter().map(|r| r.aqm_drops)),
        overhead: mean(runs.iter().map(|r| r.overhead)),
        coded_fraction: mean(runs.iter().map(|r| r.coded_fraction)),
        recovered: runs.iter().map(|r| r.recovered).sum(),
        resent: runs.iter().map(|r| r.resent).sum(),
        tcp_timeouts: mean(runs.iter().map(|r| r.tcp_timeouts as f64)),
        tcp_recoveries: mean(runs.iter().map(|r| r.tcp_recoveries as f64)),
        tcp_spurious_timeouts: mean(runs.iter().map(|r| r.tcp_spurious_timeouts as f64)),
        late_fraction: mean(runs.iter().map(|r| r.late_fraction)),
        reordered_fraction: mean(runs.iter().map(|r| r.reordered_fraction)),
        mean_hold_ms: mean(runs.iter().map(|r| r.mean_hold_ms)),
        arrival_error_ms: mean(runs.iter().map(|r| r.arrival_error_ms)),
        arrival_within_10ms: mean(runs.iter().map(|r| r.arrival_within_10ms)),
        cbr_loss: mean_opt(runs.iter().map(|r| r.cbr_loss)),
        cbr_delay_ms: mean_opt(runs.iter().map(|r| r.cbr_delay_ms)),
        cbr_jitter_ms: mean_opt(runs.iter().map(|r| r.cbr_jitter_ms)),
        links,
        pass_share: mean_opt(runs.iter().map(|r| r.pass_share)),
        longest_stall_ms: runs.iter().filter_map(|r| r.longest_stall_ms).reduce(f64::max),
        wifi_pass_mb: mean_opt(runs.iter().flat_map(|r| r.wifi_pass_mb.iter().map(|x| Some(*x)))),
    }
}

/// Per-second means over runs; a second some runs lack averages the runs that have it.
fn mean_series<'a>(series: impl Iterator<Item = &'a [f64]>) -> Vec<f64> {
    let mut sum: Vec<(f64, u32)> = Vec::new();
    for s in series {
        if sum.len() < s.len() {
            sum.resize(s.len(), (0.0, 0));
        }
        for (acc, v) in sum.iter_mut().zip(s) {
            acc.0 += v;
            acc.1 += 1;
        }
    }
    sum.into_iter().map(|(t, n)| t / f64::from(n.max(1))).collect()
}
