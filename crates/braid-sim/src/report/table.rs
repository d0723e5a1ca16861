//! The terminal report: one row per scheme (and sweep point), the FCT ratios that the PluriBus comparison
//! is about, and on request a per-link table.

use std::fmt::Write as _;

use super::paired::{Versus, paired};
use super::{finite, format_sweep_value, results_at, scheme_names, sweep_points};
use crate::results::{LinkResult, SchemeResult, SimReport};

/// The comparison table of `report`: a header line, one row per scheme (grouped by sweep value when
/// sweeping, the value in the first column), then the [`ratios`] lines and the [`paired`]
/// comparisons that `versus` asks for (every scheme against the first when it is empty).
///
/// Columns that are empty for every row (no goodput, no CBR, no completed flow) are left out; a
/// single missing or NaN figure shows as `-`.
pub fn table(report: &SimReport, versus: &[Versus]) -> String {
    let mut out = header(report);
    let mut columns = Vec::new();
    let rows: Vec<(bool, &SchemeResult)> = grouped(report);
    let cells = |f: &dyn Fn(&SchemeResult) -> Option<Vec<String>>| rows.iter().map(|(_, r)| f(r)).collect::<Vec<_>>();

    if let Some(label) = &report.sweep_label {
        columns.push(Column::new(label, Align::Right, &[], cells(&|r| Some(vec![sweep_cell(r.sweep_value)]))));
    }
    columns.push(Column::new("scheme", Align::Left, &[], cells(&|r| Some(vec![r.scheme.clone()]))));
    columns.push(Column::new(
        "FCT mean ± CI95 (s)",
        Align::Right,
        &[" ± "],
        cells(&|r| plus_minus(r.fct_mean_s, r.fct_ci95_s, 3)),
    ));
    columns.push(Column::new("p50 (s)", Align::Right, &[], cells(&|r| one(r.fct_p50_s, 3))));
    columns.push(Column::new("p95 (s)", Align::Right, &[], cells(&|r| one(r.fct_p95_s, 3))));
    columns.push(Column::new("p99 (s)", Align::Right, &[], cells(&|r| one(r.fct_p99_s, 3))));
    columns.push(Column::new(
        "incomplete flows",
        Align::Right,
        &["/", " "],
        cells(&|r| {
            (r.flows > 0).then(|| {
                let share = 100.0 * r.incomplete_flows as f64 / r.flows as f64;
                vec![r.incomplete_flows.to_string(), r.flows.to_string(), format!("({share:.1} %)")]
            })
        }),
    ));
    columns.push(Column::new("resid. loss (%)", Align::Right, &[], cells(&|r| percent(r.residual_loss, 3))));
    columns.push(Column::new("AQM drops (%)", Align::Right, &[], cells(&|r| percent(r.aqm_drops, 3))));
    columns.push(Column::new("overhead (x)", Align::Right, &[], cells(&|r| one(Some(r.overhead), 3))));
    columns.push(Column::new("coded (%)", Align::Right, &[], cells(&|r| percent(r.coded_fraction, 1))));
    columns.push(Column::new("recovered", Align::Right, &[], cells(&|r| Some(vec![r.recovered.to_string()]))));
    columns.push(Column::new("late (%)", Align::Right, &[], cells(&|r| percent(r.late_fraction, 2))));
    // The end hosts' view: a timeout idles a flow for an RTO or more, which the goodput and FCT
    // columns show only as a smaller number.
    columns.push(Column::new(
        "TCP RTOs (undone) / recoveries per run",
        Align::Right,
        &[" (", ") / "],
        cells(&|r| {
            Some(vec![
                format!("{:.1}", r.tcp_timeouts),
                format!("{:.1}", r.tcp_spurious_timeouts),
                format!("{:.1}", r.tcp_recoveries),
            ])
        }),
    ));
    columns.push(Column::new(
        "goodput ± CI95 (kbit/s)",
        Align::Right,
        &[" ± "],
        cells(&|r| plus_minus(r.goodput_kbps, r.goodput_ci95_kbps, 1)),
    ));
    columns.push(Column::new("longest stall (ms)", Align::Right, &[], cells(&|r| one(r.longest_stall_ms, 0))));
    columns.push(Column::new(
        "pass share (%)",
        Align::Right,
        &[],
        cells(&|r| r.pass_share.and_then(|x| percent(x, 1))),
    ));
    columns.push(Column::new("WiFi per pass (MB)", Align::Right, &[], cells(&|r| one(r.wifi_pass_mb, 1))));
    columns.push(Column::new("CBR loss (%)", Align::Right, &[], cells(&|r| r.cbr_loss.and_then(|x| percent(x, 3)))));
    columns.push(Column::new("CBR delay (ms)", Align::Right, &[], cells(&|r| one(r.cbr_delay_ms, 1))));
    columns.push(Column::new("CBR jitter (ms)", Align::Right, &[], cells(&|r| one(r.cbr_jitter_ms, 2))));

    let rules: Vec<bool> = rows.iter().map(|(rule, _)| *rule).collect();
    out.push_str(&render(&columns, &rules));
    for lines in [ratios(report), paired(report, versus)] {
        if !lines.is_empty() {
            out.push('\n');
            out.push_str(&lines);
        }
    }
    out
}

/// One line per scheme with the first scheme's mean FCT over its own (a speed-up, `none / oec = 3.40x`),
/// per sweep value when sweeping, and the same for goodput when the workload measured it. Empty when
/// there is at most one scheme or nothing to compare.
pub fn ratios(report: &SimReport) -> String {
    let names = scheme_names(report);
    let Some((base, others)) = names.split_first() else { return String::new() };
    let points = sweep_points(report);
    let mut out = String::new();
    type Figure = fn(&SchemeResult) -> Option<f64>;
    // FCT: lower is better, so the line reads as a speed-up, "none / oec = 2.5x", as the paper puts
    // it. Goodput: higher is better, "oec / none".
    let metrics: [(&str, Figure, bool); 2] =
        [("mean FCT speed-up over", |r| r.fct_mean_s, true), ("mean goodput relative to", |r| r.goodput_kbps, false)];
    for (metric, value, invert) in metrics {
        let present = report.results.iter().any(|r| value(r).and_then(finite).is_some());
        if others.is_empty() || !present {
            continue;
        }
        let _ = writeln!(out, "{metric} {base}:");
        for other in others {
            let mut parts = Vec::new();
            for point in &points {
                let at = results_at(report, *point);
                let of = |name: &str| at.iter().find(|r| r.scheme == name).and_then(|r| value(r)).and_then(finite);
                let ratio = match (of(other), of(base)) {
                    (Some(x), Some(b)) if invert && x != 0.0 => format!("{:.2}x", b / x),
                    (Some(x), Some(b)) if !invert && b != 0.0 => format!("{:.2}x", x / b),
                    _ => "n/a".to_string(),
                };
                parts.push(match (point, &report.sweep_label) {
                    (Some(v), Some(label)) => format!("{ratio} ({label} = {})", format_sweep_value(*v)),
                    (Some(v), None) => format!("{ratio} (at {})", format_sweep_value(*v)),
                    (None, _) => ratio,
                });
            }
            let (num, den) = if invert { (base, other) } else { (other, base) };
            let _ = writeln!(out, "  {num} / {den} = {}", parts.join(", "));
        }
    }
    out
}

/// Per-link figures of every scheme (means over runs): utilisation down/up, share of data packets, loss,
/// queue drops, and the client's estimates of down capacity and loss next to the true values.
pub fn link_table(report: &SimReport) -> String {
    // A rule before each scheme's block of links but the first.
    let rows: Vec<(bool, &SchemeResult, &LinkResult)> = grouped(report)
        .into_iter()
        .flat_map(|(_, r)| r.links.iter().enumerate().map(move |(i, l)| (i == 0, r, l)))
        .enumerate()
        .map(|(row, (first, r, l))| (first && row > 0, r, l))
        .collect();
    let mut out = String::from("per link (means over runs; estimates are the client's at the end of a run):\n");
    if rows.is_empty() {
        out.push_str("  no links\n");
        return out;
    }
    let cells = |f: &dyn Fn(&SchemeResult, &LinkResult) -> Option<Vec<String>>| {
        rows.iter().map(|(_, r, l)| f(r, l)).collect::<Vec<_>>()
    };
    let mut columns = Vec::new();
    if let Some(label) = &report.sweep_label {
        columns.push(Column::new(label, Align::Right, &[], cells(&|r, _| Some(vec![sweep_cell(r.sweep_value)]))));
    }
    columns.push(Column::new("scheme", Align::Left, &[], cells(&|r, _| Some(vec![r.scheme.clone()]))));
    columns.push(Column::new("link", Align::Left, &[], cells(&|_, l| Some(vec![l.name.clone()]))));
    columns.push(Column::new("util down (%)", Align::Right, &[], cells(&|_, l| percent(l.utilisation_down, 1))));
    columns.push(Column::new("util up (%)", Align::Right, &[], cells(&|_, l| percent(l.utilisation_up, 1))));
    columns.push(Column::new("data share (%)", Align::Right, &[], cells(&|_, l| percent(l.data_share, 1))));
    columns.push(Column::new("loss (%)", Align::Right, &[], cells(&|_, l| percent(l.loss, 2))));
    columns.push(Column::new("queue drops (%)", Align::Right, &[], cells(&|_, l| percent(l.queue_drops, 2))));
    columns.push(Column::new(
        "down capacity est / true (kbit/s)",
        Align::Right,
        &[" / "],
        cells(&|_, l| pair(finite(l.est_capacity_down_kbps), finite(l.true_capacity_down_kbps), 0, 1.0)),
    ));
    columns.push(Column::new(
        "down loss est / true (%)",
        Align::Right,
        &[" / "],
        cells(&|_, l| pair(finite(l.est_loss_down), finite(l.true_loss_down), 2, 100.0)),
    ));
    let rules: Vec<bool> = rows.iter().map(|(rule, _, _)| *rule).collect();
    out.push_str(&render(&columns, &rules));
    out
}

/// The first line: scenario, schemes, runs, sweep, wall time.
fn header(report: &SimReport) -> String {
    let schemes = scheme_names(report).len();
    let (lo, hi) = report.results.iter().fold((u32::MAX, 0), |(lo, hi), r| (lo.min(r.runs), hi.max(r.runs)));
    let runs = match (lo, hi) {
        (u32::MAX, _) => "no runs".to_string(),
        (lo, hi) if lo == hi => format!("{lo} run{} each", if lo == 1 { "" } else { "s" }),
        (lo, hi) => format!("{lo}-{hi} runs each"),
    };
    let mut out =
        format!("scenario {}: {schemes} scheme{}, {runs}", report.scenario, if schemes == 1 { "" } else { "s" });
    if let Some(label) = &report.sweep_label {
        let _ = write!(out, ", sweeping {label} over {} values", sweep_points(report).len());
    }
    if let Some(wall) = finite(report.wall_s) {
        let _ = write!(out, " (wall {wall:.1} s)");
    }
    out.push('\n');
    out
}

/// The results in display order: grouped by sweep point (in first-appearance order), scheme order
/// within a group; `true` marks the first row of each group after the first, where a rule goes.
fn grouped(report: &SimReport) -> Vec<(bool, &SchemeResult)> {
    let mut rows = Vec::new();
    for (g, point) in sweep_points(report).into_iter().enumerate() {
        for (i, r) in results_at(report, point).into_iter().enumerate() {
            rows.push((g > 0 && i == 0, r));
        }
    }
    rows
}

fn sweep_cell(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_string(), format_sweep_value)
}

fn one(x: Option<f64>, decimals: usize) -> Option<Vec<String>> {
    x.and_then(finite).map(|x| vec![format!("{x:.decimals$}")])
}

fn percent(fraction: f64, decimals: usize) -> Option<Vec<String>> {
    one(Some(fraction * 100.0), decimals)
}

/// `mean ± ci` as two aligned parts; the CI part is blank when there is a single run.
fn plus_minus(mean: Option<f64>, ci: Option<f64>, decimals: usize) -> Option<Vec<String>> {
    let mean = mean.and_then(finite)?;
    let ci = ci.and_then(finite).map_or_else(String::new, |c| format!("{c:.decimals$}"));
    Some(vec![format!("{mean:.decimals$}"), ci])
}

/// `estimate / truth` scaled by `scale`; `-` for a missing half, nothing when both are missing.
fn pair(est: Option<f64>, truth: Option<f64>, decimals: usize, scale: f64) -> Option<Vec<String>> {
    if est.is_none() && truth.is_none() {
        return None;
    }
    let f = |x: Option<f64>| x.map_or_else(|| "-".to_string(), |x| format!("{:.decimals$}", x * scale));
    Some(vec![f(est), f(truth)])
}

#[derive(Clone, Copy, PartialEq)]
enum Align {
    Left,
    Right,
}

/// One column: a header and per row either nothing (shown as `-`) or parts that are aligned part by part
/// across rows and joined with `joiners` (so that `0.512 ± 0.031` lines up on the `±`).
struct Column {
    header: String,
    align: Align,
    joiners: Vec<&'static str>,
    cells: Vec<Option<Vec<String>>>,
}

impl Column {
    fn new(header: &str, align: Align, joiners: &[&'static str], cells: Vec<Option<Vec<String>>>) -> Self {
        Column { header: header.to_string(), align, joiners: joiners.to_vec(), cells }
    }

    /// Each row's text, parts padded to a common width.
    fn texts(&self) -> Vec<String> {
        let parts = self.cells.iter().flatten().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..parts)
            .map(|p| self.cells.iter().flatten().filter_map(|c| c.get(p)).map(|s| width(s)).max().unwrap_or(0))
            .collect();
        self.cells
            .iter()
            .map(|cell| {
                let Some(cell) = cell else { return "-".to_string() };
                let mut text = String::new();
                for (p, w) in widths.iter().enumerate() {
                    let part = cell.get(p).map_or("", String::as_str);
                    if p > 0 {
                        let joiner = self.joiners.get(p - 1).copied().unwrap_or(" ");
                        // A missing tail (no CI with one run) leaves blanks, not a dangling `±`.
                        let rest_empty = cell[p.min(cell.len())..].iter().all(String::is_empty);
                        if rest_empty { text.push_str(&" ".repeat(width(joiner))) } else { text.push_str(joiner) }
                    }
                    if self.align == Align::Left && parts == 1 {
                        text.push_str(part);
                    } else {
                        text.push_str(&" ".repeat(w - width(part)));
                        text.push_str(part);
                    }
                }
                text
            })
            .collect()
    }
}

/// Display width in terminal cells (characters: the tables use no wide glyphs).
fn width(s: &str) -> usize {
    s.chars().count()
}

/// Lays the non-empty columns out with two spaces between them, a dashed rule under the header and
/// before each row marked in `rules`.
fn render(columns: &[Column], rules: &[bool]) -> String {
    let shown: Vec<(&Column, Vec<String>)> =
        columns.iter().filter(|c| c.cells.iter().any(Option::is_some)).map(|c| (c, c.texts())).collect();
    let widths: Vec<usize> = shown
        .iter()
        .map(|(c, texts)| texts.iter().map(|t| width(t)).chain([width(&c.header)]).max().unwrap_or(0))
        .collect();
    let line = |cells: Vec<(&str, Align)>| {
        let mut out = String::new();
        for (i, ((text, align), w)) in cells.into_iter().zip(&widths).enumerate() {
            if i > 0 {
                out.push_str("  ");
            }
            let pad = " ".repeat(w - width(text));
            match align {
                Align::Left => {
                    out.push_str(text);
                    out.push_str(&pad);
                }
                Align::Right => {
                    out.push_str(&pad);
                    out.push_str(text);
                }
            }
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
        out
    };
    let rule = {
        let mut r = widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>().join("  ");
        r.push('\n');
        r
    };
    let mut out = line(shown.iter().map(|(c, _)| (c.header.as_str(), c.align)).collect());
    out.push_str(&rule);
    for (row, is_rule) in rules.iter().enumerate() {
        if *is_rule {
            out.push_str(&rule);
        }
        out.push_str(&line(shown.iter().map(|(c, texts)| (texts[row].as_str(), c.align)).collect()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;

    #[test]
    fn table_shows_each_scheme_with_mean_and_ci_digits() {
        let report = fixture::report(false);
        let text = table(&report, &[]);
        println!("{text}");
        for (scheme, _) in fixture::SCHEMES {
            assert!(text.lines().any(|l| l.split_whitespace().next() == Some(scheme)), "{scheme} missing:\n{text}");
        }
        // oec: run means 0.4 and 0.6 -> mean 0.5; sd 0.1414, se 0.1, t(1) = 12.706 -> CI 1.2706.
        let oec = text.lines().find(|l| l.starts_with("oec")).unwrap();
        assert!(oec.contains("0.500 ± 1.271"), "{oec}");
        // p50 of the eight pooled FCTs 0.2 0.3 0.3 0.5 0.5 0.6 0.7 0.9 is 0.5.
        assert!(oec.split_whitespace().any(|c| c == "0.500"), "{oec}");
        // none: one of eight flows incomplete.
        let none = text.lines().find(|l| l.starts_with("none")).unwrap();
        assert!(none.contains("1/8 (12.5 %)"), "{none}");
        assert!(text.starts_with("scenario bus: 3 schemes, 2 runs each"), "{text}");
    }

    #[test]
    fn table_omits_empty_columns_and_shows_present_ones() {
        let mut report = fixture::report(false);
        let text = table(&report, &[]);
        for header in ["goodput", "CBR"] {
            assert!(!text.contains(header), "{header} should be omitted:\n{text}");
        }
        assert!(text.contains("FCT mean ± CI95 (s)") && text.contains("resid. loss (%)"));
        report.results[1].cbr_delay_ms = Some(42.25);
        report.results[1].goodput_kbps = Some(812.0);
        let text = table(&report, &[]);
        assert!(text.contains("CBR delay (ms)") && text.contains("42.2") && text.contains("812.0"), "{text}");
        assert!(!text.contains("CBR jitter"), "{text}");
        // The rows without a figure show a dash in the column that is shown.
        let oec = text.lines().find(|l| l.starts_with("oec")).unwrap();
        assert!(oec.trim_end().ends_with('-'), "{oec}");
    }

    #[test]
    fn table_omits_fct_columns_without_completed_flows() {
        let report = fixture::report_without_completed_flows(false);
        let text = table(&report, &[]);
        assert!(!text.contains("FCT mean") && !text.contains("p99"), "{text}");
        assert!(text.contains("8/8 (100.0 %)"), "{text}");
        assert!(!text.contains("speed-up") && !text.contains("relative to"), "{text}");
    }

    #[test]
    fn ratios_compare_each_scheme_with_the_first() {
        let report = fixture::report(false);
        let text = ratios(&report);
        // none: run means 1.36 and 1.7 (its last flow of run 1 is incomplete) -> 1.53 / 0.5 = 3.06.
        assert_eq!(text, "mean FCT speed-up over oec:\n  oec / none = 0.33x\n  oec / rs = 0.67x\n");
        assert!(table(&report, &[]).ends_with(&format!("{text}\n{}", paired(&report, &[]))));
    }

    #[test]
    fn table_ends_with_the_paired_comparisons_asked_for() {
        let report = fixture::report(false);
        let text = table(&report, &[]);
        // By default every scheme against the first, as the ratios.
        assert!(text.contains("  none - oec: ") && text.contains("  rs - oec: "), "{text}");
        let text = table(&report, &["none,rs".parse().expect("two names")]);
        println!("{text}");
        let tail = text.rsplit("paired mean FCT difference").next().unwrap();
        // none's run means 1.36 and 1.7 against rs's 0.6 and 0.9: d = -0.76, -0.8.
        assert!(tail.contains("  rs - none: -780.0 ± 254.1 ms, rs faster in 2/2 runs, significant\n"), "{tail}");
        assert!(!tail.contains(" - oec"), "{tail}");
    }

    #[test]
    fn sweep_groups_rows_by_value_and_ratios_per_value() {
        let report = fixture::report(true);
        let text = table(&report, &[]);
        println!("{text}");
        let rows: Vec<&str> = text.lines().filter(|l| l.trim_start().starts_with("0.0")).collect();
        assert_eq!(rows.len(), 6, "{text}");
        assert!(rows[..3].iter().all(|r| r.trim_start().starts_with("0.01")), "{text}");
        assert!(rows[3..].iter().all(|r| r.trim_start().starts_with("0.05")), "{text}");
        assert!(text.lines().nth(1).unwrap().trim_start().starts_with("loss"), "{text}");
        // At 0.05 every FCT doubles: oec mean 1.0.
        assert!(rows[3].contains("1.000 ± 2.541"), "{}", rows[3]);
        assert!(text.contains("  oec / none = 0.33x (loss = 0.01), 0.33x (loss = 0.05)\n"), "{text}");
    }

    #[test]
    fn single_run_shows_mean_without_ci() {
        let mut report = fixture::report(false);
        report.runs.retain(|r| r.run == 0);
        fixture::rebuild(&mut report);
        let text = table(&report, &[]);
        assert!(text.contains("1 run each") && !text.contains(" ± 0") && !text.contains(" ± 1"), "{text}");
        let oec = text.lines().find(|l| l.starts_with("oec")).unwrap();
        assert!(oec.contains("0.400"), "{oec}");
    }

    #[test]
    fn nan_and_empty_reports_do_not_panic() {
        let mut report = fixture::report(false);
        report.results[0].fct_mean_s = Some(f64::NAN);
        report.results[0].overhead = f64::NAN;
        let text = table(&report, &[]);
        assert!(text.contains("oec / none = n/a"), "{text}");
        let empty = SimReport { scenario: "x".into(), sweep_label: None, results: vec![], runs: vec![], wall_s: 0.0 };
        assert!(table(&empty, &[]).contains("no runs"));
        assert_eq!(ratios(&empty), "");
        assert!(link_table(&empty).contains("no links"));
    }

    #[test]
    fn link_table_shows_estimates_next_to_truth() {
        let report = fixture::report(true);
        let text = link_table(&report);
        println!("{text}");
        assert_eq!(text.lines().filter(|l| l.contains("wimax")).count(), 6, "{text}");
        let wimax = text.lines().find(|l| l.contains("wimax")).unwrap();
        assert!(wimax.contains("1350 / 1500") && wimax.contains("6.00 / 5.00") && wimax.contains("65.0"), "{wimax}");
    }
}
