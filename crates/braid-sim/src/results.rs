//! What a simulation produces: per-run measurements and their aggregate per scheme (docs/design.md 6).
//! These types are the contract between the simulator, the reports and `--json`.

use serde::Serialize;

/// One flow's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FlowRecord {
    /// Bytes transferred.
    pub size_bytes: u64,
    /// Start (the client's SYN), seconds from the start of the run.
    pub start_s: f64,
    /// Completion time, seconds; `None` if it never completed.
    pub fct_s: Option<f64>,
    /// Whether it counts as incomplete: a sized flow that never completed, or a bulk flow
    /// (which has no end of its own and runs to the end of the run) that failed.
    pub incomplete: bool,
}

/// Per-link measurements of one run (both directions summed unless named).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LinkResult {
    /// Link name from the scenario.
    pub name: String,
    /// Fraction of the run the bottleneck was busy, down direction.
    pub utilisation_down: f64,
    /// Fraction of the run the bottleneck was busy, up direction.
    pub utilisation_up: f64,
    /// This link's share of all data packets sent (both directions).
    pub data_share: f64,
    /// Packets lost on the link (random + outage) over packets that left the bottleneck.
    pub loss: f64,
    /// Packets dropped by the link's queue over packets offered.
    pub queue_drops: f64,
    /// The client's final estimate of the down capacity, kbit/s.
    pub est_capacity_down_kbps: f64,
    /// The down capacity in force at the end of the run, kbit/s.
    pub true_capacity_down_kbps: f64,
    /// The client's estimate of the down loss rate at the end of the run.
    pub est_loss_down: f64,
    /// The configured long-run mean loss of the down direction.
    pub true_loss_down: f64,
    /// Throughput carried down per second of the run, kbit/s, in 1-second bins.
    pub down_kbps_series: Vec<f64>,
    /// Seconds braid had the link degraded (drained of new data for its loss) at whichever end
    /// had it so longer; `None` where not measured (the testbed, peers).
    pub degraded_s: Option<f64>,
}

/// Everything measured in one run of one scheme.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunResult {
    /// Scheme name.
    pub scheme: String,
    /// Run index (seed = scenario seed + index).
    pub run: u32,
    /// The seed used.
    pub seed: u64,
    /// Value of the swept parameter, if sweeping.
    pub sweep_value: Option<f64>,
    /// Every flow started.
    pub flows: Vec<FlowRecord>,
    /// Bulk goodput, kbit/s (bulk workload), summed over flows.
    pub goodput_kbps: Option<f64>,
    /// Bulk goodput in each second of the run, kbit/s (bulk workload; empty otherwise): how a
    /// flow rides through a change of the links (FMTCP Fig. 11).
    pub goodput_kbps_series: Vec<f64>,
    /// The passengers' TCP senders at the end of each second of the run (bulk workload; empty
    /// otherwise, and on the testbed where iperf3 did not report them): their congestion windows,
    /// kB, summed over the flows sending. Beside the testbed's, read from its senders' kernels,
    /// it shows where the simulator's hosts and Linux part ways: where slow start ends, how fast
    /// the window grows back after a loss.
    pub sender_cwnd_kb_series: Vec<f64>,
    /// Their smoothed round trip at the end of each second, ms, the largest over the flows
    /// sending (0 while none sends); as [`RunResult::sender_cwnd_kb_series`].
    pub sender_rtt_ms_series: Vec<f64>,
    /// Passenger packets that entered the tunnel and never came out (both directions), whether
    /// the uplinks lost them or braid's AQM dropped them (as a router's queue would).
    pub residual_loss: f64,
    /// The part of `residual_loss` that braid's AQM dropped to tell TCP of congestion.
    pub aqm_drops: f64,
    /// Bytes on the air (outer headers included) per passenger byte delivered.
    pub overhead: f64,
    /// Coded packets over all packets carrying passenger data or repair.
    pub coded_fraction: f64,
    /// Packets recovered by coding.
    pub recovered: u64,
    /// Packets retransmitted or duplicated.
    pub resent: u64,
    /// Retransmission timeouts of the end hosts' TCP senders (both sides, every flow).
    pub tcp_timeouts: u64,
    /// Loss recoveries (fast retransmit or SACK recovery) the end hosts' TCP senders entered.
    pub tcp_recoveries: u64,
    /// Of `tcp_timeouts`, those the senders found spurious and undid (F-RTO).
    pub tcp_spurious_timeouts: u64,
    /// Fraction of delivered packets that left the sequencing buffer after their hold expired.
    pub late_fraction: f64,
    /// Fraction of delivered packets that waited in the sequencing buffer.
    pub reordered_fraction: f64,
    /// Mean wait of those that waited, ms.
    pub mean_hold_ms: f64,
    /// Mean absolute error of the sender's arrival-time estimate for data packets, ms.
    pub arrival_error_ms: f64,
    /// Fraction of data packets arriving within 10 ms of the predicted time (PluriBus Fig. 11a).
    pub arrival_within_10ms: f64,
    /// CBR workload: packets lost end to end.
    pub cbr_loss: Option<f64>,
    /// CBR workload: mean one-way delay, ms.
    pub cbr_delay_ms: Option<f64>,
    /// CBR workload: mean jitter (RFC 3550 style), ms.
    pub cbr_jitter_ms: Option<f64>,
    /// Per link.
    pub links: Vec<LinkResult>,
    /// Bulk workload over drive-by links: bytes delivered over the passes' potential (the integral
    /// of the rate the model allows, paper 002 section 5); `None` without a drive-by link.
    pub pass_share: Option<f64>,
    /// Bulk workload: the longest time any flow's receiver went without new data once it had
    /// started, ms (a blackout's stall).
    pub longest_stall_ms: Option<f64>,
    /// Drive-by links: the data each pass of an access point carried down to the vehicle, MB
    /// (braid's datagrams, outer headers included), one entry per pass in time order.
    pub wifi_pass_mb: Vec<f64>,
    /// Datagrams pushed through the links (a measure of simulator work).
    pub datagrams: u64,
    /// Simulated seconds.
    pub simulated_s: f64,
}

impl RunResult {
    /// Mean FCT of the completed flows, seconds.
    pub fn mean_fct_s(&self) -> Option<f64> {
        let done: Vec<f64> = self.flows.iter().filter_map(|f| f.fct_s).collect();
        (!done.is_empty()).then(|| done.iter().sum::<f64>() / done.len() as f64)
    }
}

/// One scheme's results aggregated over runs (docs/design.md 6 and its `--json` fields).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SchemeResult {
    /// Scheme name.
    pub scheme: String,
    /// Value of the swept parameter, if sweeping.
    pub sweep_value: Option<f64>,
    /// Runs aggregated.
    pub runs: u32,
    /// Flows started over all runs.
    pub flows: u64,
    /// Mean over runs of each run's mean FCT, seconds.
    pub fct_mean_s: Option<f64>,
    /// Half-width of the 95 % confidence interval of `fct_mean_s` (Student t over runs).
    pub fct_ci95_s: Option<f64>,
    /// FCT percentiles over all completed flows of all runs.
    pub fct_p50_s: Option<f64>,
    /// 95th percentile.
    pub fct_p95_s: Option<f64>,
    /// 99th percentile.
    pub fct_p99_s: Option<f64>,
    /// Flows that never completed, over all runs.
    pub incomplete_flows: u64,
    /// Mean bulk goodput over runs, kbit/s.
    pub goodput_kbps: Option<f64>,
    /// 95 % CI half-width of the goodput.
    pub goodput_ci95_kbps: Option<f64>,
    /// Bulk goodput in each second, kbit/s, averaged over runs (empty unless bulk).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub goodput_kbps_series: Vec<f64>,
    /// The passengers' senders' congestion window at the end of each second, kB, averaged over
    /// runs ([`RunResult::sender_cwnd_kb_series`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sender_cwnd_kb_series: Vec<f64>,
    /// Their smoothed round trip at the end of each second, ms, averaged over runs
    /// ([`RunResult::sender_rtt_ms_series`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sender_rtt_ms_series: Vec<f64>,
    /// Mean residual loss.
    pub residual_loss: f64,
    /// Mean fraction of passenger packets braid's AQM dropped (part of `residual_loss`).
    pub aqm_drops: f64,
    /// Mean overhead (bytes on the air per byte delivered).
    pub overhead: f64,
    /// Mean coded fraction.
    pub coded_fraction: f64,
    /// Packets recovered by coding, summed over runs.
    pub recovered: u64,
    /// Packets re-sent, summed over runs.
    pub resent: u64,
    /// End hosts' TCP retransmission timeouts, mean per run.
    pub tcp_timeouts: f64,
    /// End hosts' TCP loss recoveries, mean per run.
    pub tcp_recoveries: f64,
    /// End hosts' spurious (undone) TCP timeouts, mean per run.
    pub tcp_spurious_timeouts: f64,
    /// Mean late fraction.
    pub late_fraction: f64,
    /// Mean reordered fraction.
    pub reordered_fraction: f64,
    /// Mean hold of packets that waited, ms.
    pub mean_hold_ms: f64,
    /// Mean arrival-time estimation error, ms.
    pub arrival_error_ms: f64,
    /// Mean fraction of packets within 10 ms of prediction.
    pub arrival_within_10ms: f64,
    /// CBR loss, mean over runs.
    pub cbr_loss: Option<f64>,
    /// CBR delay, ms.
    pub cbr_delay_ms: Option<f64>,
    /// CBR jitter, ms.
    pub cbr_jitter_ms: Option<f64>,
    /// Per-link figures averaged over runs (series from the first run).
    pub links: Vec<LinkResult>,
    /// Mean over runs of [`RunResult::pass_share`].
    pub pass_share: Option<f64>,
    /// The largest [`RunResult::longest_stall_ms`] over runs.
    pub longest_stall_ms: Option<f64>,
    /// Mean over all passes of all runs of [`RunResult::wifi_pass_mb`]; `None` without a drive-by
    /// link.
    pub wifi_pass_mb: Option<f64>,
}

/// A whole simulation: every scheme (and sweep point).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimReport {
    /// Scenario name.
    pub scenario: String,
    /// The swept parameter's label, if sweeping.
    pub sweep_label: Option<String>,
    /// Aggregates, in scheme order, then sweep order.
    pub results: Vec<SchemeResult>,
    /// Every run, for CSV and CDF plots (not in `--json`).
    #[serde(skip)]
    pub runs: Vec<RunResult>,
    /// Wall-clock seconds the simulation took.
    pub wall_s: f64,
}

/// Two-sided 95 % Student t critical value for `df` degrees of freedom.
pub fn student_t95(df: u32) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::NAN,
        1..=30 => T[df as usize - 1],
        31..=40 => 2.021,
        41..=60 => 2.000,
        61..=120 => 1.980,
        _ => 1.960,
    }
}

/// Mean and 95 % CI half-width (Student t) of `xs`; the half-width is `None` for fewer than two.
pub fn mean_ci95(xs: &[f64]) -> Option<(f64, Option<f64>)> {
    if xs.is_empty() {
        return None;
    }
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    if xs.len() < 2 {
        return Some((mean, None));
    }
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    Some((mean, Some(student_t95(xs.len() as u32 - 1) * (var / n).sqrt())))
}

/// The `p`-th percentile (0..=100) of `xs` by linear interpolation between order statistics.
pub fn percentile(xs: &mut [f64], p: f64) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    xs.sort_by(f64::total_cmp);
    let rank = (p / 100.0).clamp(0.0, 1.0) * (xs.len() - 1) as f64;
    let (lo, hi) = (rank.floor() as usize, rank.ceil() as usize);
    Some(xs[lo] + (xs[hi] - xs[lo]) * (rank - lo as f64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ci_matches_hand_computation() {
        let (m, ci) = mean_ci95(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(m, 2.5);
        // sd = 1.2910, se = 0.6455, t(3) = 3.182
        assert!((ci.unwrap() - 3.182 * 0.645_497).abs() < 1e-4);
        assert_eq!(mean_ci95(&[5.0]), Some((5.0, None)));
        assert_eq!(mean_ci95(&[]), None);
    }

    #[test]
    fn percentiles_interpolate() {
        let mut v = vec![4.0, 1.0, 3.0, 2.0];
        assert_eq!(percentile(&mut v, 50.0), Some(2.5));
        assert_eq!(percentile(&mut v, 100.0), Some(4.0));
        assert_eq!(percentile(&mut v, 0.0), Some(1.0));
    }
}
