//! Paired comparisons of mean FCT between two schemes.
//!
//! Every scheme runs with the same seeds (`runner.rs`: run `i` of every scheme and every sweep point
//! has seed `seed + i`; docs/design.md 5). A seed fixes the flows (sizes, start times: `FlowPlan` draws
//! them from the seed alone) and the random stream of every link direction (`LinkModel` is seeded
//! from the run's seed and the link's index, never the scheme). So run `seed` of scheme B and run
//! `seed` of scheme A face the same workload and the same sequence of loss draws, and the
//! run-to-run spread that dominates each scheme's own interval (a run with one 2 MB flow is slow
//! for everyone) largely cancels in their difference. The statistic is then the paired one: per
//! seed `d = mean FCT of B - mean FCT of A`, and a Student-t 95 % interval of the mean of `d` over
//! seeds. It is valid whatever the correlation (the seeds are independent of each other); the
//! correlation is only what makes it narrower than the two unpaired intervals.
//!
//! What is shared is the sequence of draws, not the losses in time: the loss processes advance per
//! packet, and schemes that send different packets (coded ones, retransmissions) meet the same
//! draws on different packets. The pairing is by common random numbers, not by identical loss.
//!
//! Runs are paired by their `seed` field, never by position, so a report whose runs are in any
//! order (or where one scheme lacks a seed) still pairs correctly; a seed with no partner, or a run
//! without a completed flow (no mean FCT), is counted in [`PairedFct::unpaired_runs`].
//!
//! In `--json` the comparisons are the top-level array `"paired_fct"`, one object per comparison
//! and sweep point with the fields of [`PairedFct`] (`"sweep_value"` only when sweeping).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::str::FromStr;

use serde::Serialize;

use super::{finite, format_sweep_value, runs_of, scheme_names, sweep_points};
use crate::results::{RunResult, SimReport, mean_ci95};

/// A comparison to report: `scheme` (B) against `reference` (A), as `B - A`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versus {
    /// A, the scheme compared against.
    pub reference: String,
    /// B, the scheme whose difference from A is reported.
    pub scheme: String,
}

/// Why a `--versus` argument does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expected two scheme names as REFERENCE,SCHEME (e.g. oec,rlnc), got {0:?}")]
pub struct VersusParseError(String);

impl FromStr for Versus {
    type Err = VersusParseError;

    /// Parses `A,B` (B compared against A).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.split(',').map(str::trim).collect::<Vec<_>>()[..] {
            [a, b] if !a.is_empty() && !b.is_empty() => Ok(Versus { reference: a.into(), scheme: b.into() }),
            _ => Err(VersusParseError(s.into())),
        }
    }
}

/// The paired difference of mean FCT, `scheme - reference`, at one sweep point.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairedFct {
    /// A, the scheme compared against.
    pub reference: String,
    /// B.
    pub scheme: String,
    /// Value of the swept parameter, if sweeping.
    pub sweep_value: Option<f64>,
    /// Seeds at which both schemes have a mean FCT: the pairs the statistic is over.
    pub runs: u32,
    /// Runs of either scheme left out: their seed has no run of the other scheme with a mean FCT
    /// (or appears twice), or they completed no flow.
    pub unpaired_runs: u32,
    /// Mean over the paired seeds of B's mean FCT minus A's, seconds (negative: B is faster).
    pub fct_diff_mean_s: Option<f64>,
    /// Half-width of the Student-t 95 % interval of `fct_diff_mean_s`; `None` for fewer than two pairs.
    pub fct_diff_ci95_s: Option<f64>,
    /// Seeds at which B's mean FCT is strictly below A's.
    pub faster_runs: u32,
    /// Whether the 95 % interval excludes 0 (never with fewer than two pairs).
    pub significant: bool,
}

/// Compares the runs of `scheme` with those of `reference` (one scheme's runs at one sweep point
/// each), pairing them by seed.
pub fn paired_fct(
    reference: &str,
    scheme: &str,
    sweep_value: Option<f64>,
    reference_runs: &[&RunResult],
    scheme_runs: &[&RunResult],
) -> PairedFct {
    let (a, a_left) = by_seed(reference_runs);
    let (b, b_left) = by_seed(scheme_runs);
    let diffs: Vec<f64> = a.iter().filter_map(|(seed, fa)| b.get(seed).map(|fb| fb - fa)).collect();
    let unpaired = a_left + b_left + (a.len() - diffs.len()) + (b.len() - diffs.len());
    let stat = mean_ci95(&diffs);
    let mean = stat.map(|s| s.0).and_then(finite);
    let ci = stat.and_then(|s| s.1).and_then(finite);
    PairedFct {
        reference: reference.into(),
        scheme: scheme.into(),
        sweep_value,
        runs: diffs.len() as u32,
        unpaired_runs: unpaired as u32,
        fct_diff_mean_s: mean,
        fct_diff_ci95_s: ci,
        faster_runs: diffs.iter().filter(|d| **d < 0.0).count() as u32,
        // The interval [mean - ci, mean + ci] excludes 0 exactly when |mean| > ci.
        significant: matches!((mean, ci), (Some(m), Some(c)) if m.abs() > c),
    }
}

/// Each seed's mean FCT, and how many runs were left out: those without a mean FCT and every run
/// of a seed that appears more than once (which of them to pair would be a guess).
fn by_seed(runs: &[&RunResult]) -> (BTreeMap<u64, f64>, usize) {
    let mut seen: BTreeMap<u64, Vec<Option<f64>>> = BTreeMap::new();
    for r in runs {
        seen.entry(r.seed).or_default().push(r.mean_fct_s().and_then(finite));
    }
    let mut out = BTreeMap::new();
    let mut left = 0;
    for (seed, fcts) in seen {
        match fcts[..] {
            [Some(f)] => {
                out.insert(seed, f);
            }
            _ => left += fcts.len(),
        }
    }
    (out, left)
}

/// The comparisons `versus` asks for, or when it is empty every scheme against the first (the
/// reference of [`super::ratios`]); per comparison, one entry per sweep point in sweep order.
pub fn comparisons(report: &SimReport, versus: &[Versus]) -> Vec<PairedFct> {
    let defaults: Vec<Versus>;
    let versus = if versus.is_empty() {
        let names = scheme_names(report);
        defaults = match names.split_first() {
            Some((first, others)) => {
                others.iter().map(|o| Versus { reference: first.to_string(), scheme: o.to_string() }).collect()
            }
            None => Vec::new(),
        };
        &defaults
    } else {
        versus
    };
    let points = sweep_points(report);
    let mut out = Vec::new();
    for v in versus {
        for point in &points {
            let a = runs_of(report, &v.reference, *point);
            let b = runs_of(report, &v.scheme, *point);
            out.push(paired_fct(&v.reference, &v.scheme, *point, &a, &b));
        }
    }
    out
}

/// The terminal lines of [`comparisons`]: per comparison `B - A: mean ± ci ms, B faster in k/n runs`,
/// and `significant` when the interval excludes 0; one line per sweep point when sweeping. Empty
/// when there is nothing to compare.
pub fn paired(report: &SimReport, versus: &[Versus]) -> String {
    let all = comparisons(report, versus);
    if all.iter().all(|c| c.runs == 0) {
        return String::new();
    }
    let mut out = String::from("paired mean FCT difference (per seed, same flows and loss draws; mean ± 95 % CI):\n");
    let mut i = 0;
    while i < all.len() {
        let (a, b) = (&all[i].reference, &all[i].scheme);
        let group: Vec<&PairedFct> = all[i..].iter().take_while(|c| (&c.reference, &c.scheme) == (a, b)).collect();
        i += group.len();
        let name = format!("{b} - {a}");
        if let [one] = group[..]
            && one.sweep_value.is_none()
        {
            let _ = writeln!(out, "  {name}: {}", describe(one));
            continue;
        }
        let _ = writeln!(out, "  {name}:");
        let labels: Vec<String> = group.iter().map(|c| point_label(report, c.sweep_value)).collect();
        let width = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0);
        for (c, label) in group.iter().zip(&labels) {
            let pad = " ".repeat(width - label.chars().count());
            let _ = writeln!(out, "    {label}:{pad} {}", describe(c));
        }
    }
    out
}

fn point_label(report: &SimReport, value: Option<f64>) -> String {
    match (value, &report.sweep_label) {
        (Some(v), Some(label)) => format!("{label} = {}", format_sweep_value(v)),
        (Some(v), None) => format!("at {}", format_sweep_value(v)),
        (None, _) => "-".into(),
    }
}

/// `-43.4 ± 16.8 ms, rlnc faster in 10/10 runs, significant` (and the unpaired runs, if any).
/// In milliseconds with a decimal, not the table's seconds: paired differences are often a few ms,
/// and at the table's 1 ms resolution `-0.003 ± 0.003 s, significant` would not read as what it is.
fn describe(c: &PairedFct) -> String {
    let Some(mean) = c.fct_diff_mean_s else {
        return "n/a (no seed with a mean FCT for both)".into();
    };
    let mean = mean * 1e3;
    let mut s = match c.fct_diff_ci95_s {
        Some(ci) => format!("{mean:+.1} ± {:.1} ms", ci * 1e3),
        None => format!("{mean:+.1} ms (no interval from one run)"),
    };
    let _ = write!(s, ", {} faster in {}/{} runs", c.scheme, c.faster_runs, c.runs);
    if c.significant {
        s.push_str(", significant");
    }
    if c.unpaired_runs > 0 {
        let _ = write!(s, " ({} runs unpaired)", c.unpaired_runs);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;
    use crate::results::FlowRecord;

    /// A run of `scheme` with seed `seed` whose flows all took `fct` seconds (`None`: none completed).
    fn run(scheme: &str, run: u32, seed: u64, fct: Option<f64>) -> RunResult {
        let mut r = fixture::report(false).runs.remove(0);
        r.scheme = scheme.into();
        r.run = run;
        r.seed = seed;
        r.flows = (0..3)
            .map(|k| FlowRecord { size_bytes: 1000, start_s: f64::from(k), fct_s: fct, incomplete: fct.is_none() })
            .collect();
        r
    }

    fn runs(scheme: &str, seeds: &[u64], fcts: &[f64]) -> Vec<RunResult> {
        seeds.iter().zip(fcts).enumerate().map(|(i, (s, f))| run(scheme, i as u32, *s, Some(*f))).collect()
    }

    fn refs(v: &[RunResult]) -> Vec<&RunResult> {
        v.iter().collect()
    }

    #[test]
    fn known_pairs_give_the_hand_computed_interval() {
        let a = runs("oec", &[1, 2, 3, 4], &[1.0, 2.0, 3.0, 4.0]);
        let b = runs("rlnc", &[1, 2, 3, 4], &[0.9, 1.8, 2.7, 3.8]);
        let p = paired_fct("oec", "rlnc", None, &refs(&a), &refs(&b));
        // d = -0.1 -0.2 -0.3 -0.2: mean -0.2, sd = sqrt(0.02 / 3) = 0.081650, se = 0.040825,
        // t(3) = 3.182 -> half-width 0.129904; the interval [-0.330, -0.070] excludes 0.
        assert!((p.fct_diff_mean_s.unwrap() + 0.2).abs() < 1e-12, "{p:?}");
        assert!((p.fct_diff_ci95_s.unwrap() - 0.129_904).abs() < 1e-6, "{p:?}");
        assert_eq!((p.runs, p.unpaired_runs, p.faster_runs, p.significant), (4, 0, 4, true));
    }

    #[test]
    fn overlapping_unpaired_intervals_can_hide_a_significant_paired_difference() {
        // Runs differ a lot from seed to seed (as a 2 MB flow in one run makes it slow for every
        // scheme), and B is a little faster at every seed but one.
        let base = [0.45, 0.62, 0.51, 0.90, 0.48, 0.70, 0.55, 1.10, 0.47, 0.66];
        let gain = [0.03, 0.05, 0.02, 0.09, -0.01, 0.06, 0.04, 0.12, 0.02, 0.05];
        let seeds: Vec<u64> = (1..=10).collect();
        let b_fcts: Vec<f64> = base.iter().zip(gain).map(|(x, g)| x - g).collect();
        let a = runs("oec", &seeds, &base);
        let b = runs("rlnc", &seeds, &b_fcts);
        let (ma, ha) = mean_ci95(&base).map(|(m, h)| (m, h.unwrap())).unwrap();
        let (mb, hb) = mean_ci95(&b_fcts).map(|(m, h)| (m, h.unwrap())).unwrap();
        assert!(ma - ha < mb + hb && mb - hb < ma + ha, "the unpaired intervals must overlap: {ma}±{ha}, {mb}±{hb}");
        let p = paired_fct("oec", "rlnc", None, &refs(&a), &refs(&b));
        let (m, h) = (p.fct_diff_mean_s.unwrap(), p.fct_diff_ci95_s.unwrap());
        assert!((m + 0.047).abs() < 1e-12, "{p:?}");
        assert!(m + h < 0.0 && p.significant, "the paired interval must exclude 0: {m} ± {h}");
        assert_eq!((p.runs, p.faster_runs), (10, 9));
    }

    #[test]
    fn pairs_by_seed_not_by_position() {
        let a = runs("oec", &[1, 2, 3, 4], &[1.0, 2.0, 3.0, 4.0]);
        // B's runs are listed in reverse and numbered 0.. in that order: pairing by position (or by
        // run index) would compare 1.0 with 3.8 and report B much slower.
        let b = runs("rlnc", &[4, 3, 2, 1], &[3.8, 2.7, 1.8, 0.9]);
        let p = paired_fct("oec", "rlnc", None, &refs(&a), &refs(&b));
        assert!((p.fct_diff_mean_s.unwrap() + 0.2).abs() < 1e-12, "{p:?}");
        assert_eq!((p.runs, p.faster_runs), (4, 4));
    }

    #[test]
    fn unmatched_duplicated_and_empty_runs_are_left_out_and_counted() {
        let mut a = runs("oec", &[1, 2, 3, 4, 5], &[1.0, 2.0, 3.0, 4.0, 5.0]);
        a.push(run("oec", 9, 5, Some(7.0))); // seed 5 twice: ambiguous
        let mut b = runs("rlnc", &[1, 2, 3, 6, 5], &[1.1, 2.1, 3.2, 6.0, 5.0]);
        b[1] = run("rlnc", 1, 2, None); // seed 2: no completed flow
        let p = paired_fct("oec", "rlnc", None, &refs(&a), &refs(&b));
        // Pairs: seeds 1 and 3 (d = 0.1, 0.2). Left out: a's 2 and 4 (no partner), a's two 5s,
        // b's 2 (no mean), b's 6 and b's 5 (no partner once a's 5 is dropped).
        assert_eq!((p.runs, p.unpaired_runs, p.faster_runs), (2, 7, 0));
        assert!((p.fct_diff_mean_s.unwrap() - 0.15).abs() < 1e-12, "{p:?}");
        // d = 0.1, 0.2: se = 0.05, t(1) = 12.706: the interval includes 0.
        assert!((p.fct_diff_ci95_s.unwrap() - 12.706 * 0.05).abs() < 1e-9 && !p.significant, "{p:?}");
    }

    #[test]
    fn one_pair_or_none_is_never_significant() {
        let a = runs("oec", &[1], &[1.0]);
        let b = runs("rlnc", &[1], &[0.5]);
        let p = paired_fct("oec", "rlnc", None, &refs(&a), &refs(&b));
        assert_eq!((p.runs, p.fct_diff_mean_s, p.fct_diff_ci95_s, p.significant), (1, Some(-0.5), None, false));
        let p = paired_fct("oec", "rlnc", None, &refs(&a), &[]);
        assert_eq!((p.runs, p.unpaired_runs, p.fct_diff_mean_s, p.significant), (0, 1, None, false));
        // Identical schemes: d = 0 at every seed, a zero-width interval that does not exclude 0.
        let a = runs("oec", &[1, 2], &[1.0, 2.0]);
        let p = paired_fct("oec", "oec", None, &refs(&a), &refs(&a));
        assert_eq!((p.fct_diff_mean_s, p.faster_runs, p.significant), (Some(0.0), 0, false));
    }

    #[test]
    fn versus_parses_two_names() {
        let v: Versus = "oec, rlnc".parse().unwrap();
        assert_eq!(v, Versus { reference: "oec".into(), scheme: "rlnc".into() });
        for bad in ["oec", "oec,", ",rlnc", "a,b,c", ""] {
            assert!(bad.parse::<Versus>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn default_comparisons_are_against_the_first_scheme_at_every_point() {
        let report = fixture::report(true);
        let all = comparisons(&report, &[]);
        let names: Vec<(&str, &str, Option<f64>)> =
            all.iter().map(|c| (c.reference.as_str(), c.scheme.as_str(), c.sweep_value)).collect();
        let p = fixture::SWEEP.map(Some);
        assert_eq!(names, [("oec", "none", p[0]), ("oec", "none", p[1]), ("oec", "rs", p[0]), ("oec", "rs", p[1])],);
        // rs is oec x 1.5 at every seed: run means 0.4, 0.6 -> d = 0.2, 0.3 at the first point.
        assert!((all[2].fct_diff_mean_s.unwrap() - 0.25).abs() < 1e-12, "{:?}", all[2]);
        assert_eq!(all[2].faster_runs, 0);
        let asked = comparisons(&report, &["rs,oec".parse().unwrap()]);
        assert_eq!(asked.len(), 2);
        assert!((asked[0].fct_diff_mean_s.unwrap() + 0.25).abs() < 1e-12, "{:?}", asked[0]);
        assert_eq!(asked[0].faster_runs, 2);
    }

    #[test]
    fn paired_lines_read_as_documented() {
        let text = paired(&fixture::report(false), &[]);
        println!("{text}");
        // oec x 1.5 = rs: d = 0.2, 0.3 -> +0.250 ± 12.706 * 0.05 = 0.635.
        // The interval includes 0: the line ends there, with no "significant".
        assert!(text.contains("  rs - oec: +250.0 ± 635.3 ms, rs faster in 0/2 runs\n"), "{text}");
        // none: run means 1.36 and 1.7 against 0.4 and 0.6: d = 0.96, 1.1, se 0.07, t(1) 12.706.
        assert!(text.contains("  none - oec: +1030.0 ± 889.4 ms, none faster in 0/2 runs, significant\n"), "{text}");
        let text = paired(&fixture::report(true), &["rs,oec".parse().unwrap()]);
        println!("{text}");
        assert!(text.contains("  oec - rs:\n    loss = 0.01: -250.0 ± 635.3 ms, oec faster in 2/2 runs\n"), "{text}");
        assert!(text.contains("    loss = 0.05: -500.0 ± 1270.6 ms"), "{text}");
        let unknown = paired(&fixture::report(false), &["oec,nope".parse().unwrap()]);
        assert_eq!(unknown, "");
    }
}
