//! CSV files for `--out DIR`: the aggregates, every flow, every link of every run, throughput over
//! time and, for bulk workloads, goodput over time.
//!
//! RFC 4180: comma separated, `\n` line ends, a header row, fields with a comma, quote or line break
//! quoted with inner quotes doubled. Missing values are empty fields; numbers use Rust's shortest
//! round-trip form (`NaN` and `inf` for non-finite values, which pandas and R read back).

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use super::{first_run, scheme_names, sweep_points};
use crate::results::{SchemeResult, SimReport};

/// Writes `results.csv` (one row per [`SchemeResult`]), `flows.csv` (one row per flow of every run),
/// `links.csv` (one row per link of every run) and `throughput.csv` (per-second down throughput of each
/// link in the first run of each scheme and sweep point) and `goodput.csv` (per-second bulk goodput
/// of every run; only a header for other workloads) into `dir`, creating it if needed.
/// Returns the paths written.
pub fn write_csv(report: &SimReport, dir: &Path) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let files: [(&str, WriteFile); 5] = [
        ("results.csv", results),
        ("flows.csv", flows),
        ("links.csv", links),
        ("throughput.csv", throughput),
        ("goodput.csv", goodput),
    ];
    let mut written = Vec::with_capacity(files.len());
    for (name, write) in files {
        let path = dir.join(name);
        let mut out = BufWriter::new(File::create(&path)?);
        write(report, &mut out)?;
        out.flush()?;
        written.push(path);
    }
    Ok(written)
}

/// Writes one CSV file's records.
type WriteFile = fn(&SimReport, &mut dyn Write) -> io::Result<()>;

/// A `results.csv` column: header and the field as text.
type ResultColumn = (&'static str, fn(&SchemeResult) -> String);

/// The columns of `results.csv`: every scalar field of [`SchemeResult`] (links are in `links.csv`).
const RESULT_COLUMNS: [ResultColumn; 29] = [
    ("scheme", |r| r.scheme.clone()),
    ("sweep_value", |r| opt(r.sweep_value)),
    ("runs", |r| r.runs.to_string()),
    ("flows", |r| r.flows.to_string()),
    ("fct_mean_s", |r| opt(r.fct_mean_s)),
    ("fct_ci95_s", |r| opt(r.fct_ci95_s)),
    ("fct_p50_s", |r| opt(r.fct_p50_s)),
    ("fct_p95_s", |r| opt(r.fct_p95_s)),
    ("fct_p99_s", |r| opt(r.fct_p99_s)),
    ("incomplete_flows", |r| r.incomplete_flows.to_string()),
    ("goodput_kbps", |r| opt(r.goodput_kbps)),
    ("goodput_ci95_kbps", |r| opt(r.goodput_ci95_kbps)),
    ("residual_loss", |r| float(r.residual_loss)),
    ("aqm_drops", |r| float(r.aqm_drops)),
    ("overhead", |r| float(r.overhead)),
    ("coded_fraction", |r| float(r.coded_fraction)),
    ("recovered", |r| r.recovered.to_string()),
    ("resent", |r| r.resent.to_string()),
    ("tcp_timeouts", |r| r.tcp_timeouts.to_string()),
    ("tcp_recoveries", |r| r.tcp_recoveries.to_string()),
    ("tcp_spurious_timeouts", |r| r.tcp_spurious_timeouts.to_string()),
    ("late_fraction", |r| float(r.late_fraction)),
    ("reordered_fraction", |r| float(r.reordered_fraction)),
    ("mean_hold_ms", |r| float(r.mean_hold_ms)),
    ("arrival_error_ms", |r| float(r.arrival_error_ms)),
    ("arrival_within_10ms", |r| float(r.arrival_within_10ms)),
    ("cbr_loss", |r| opt(r.cbr_loss)),
    ("cbr_delay_ms", |r| opt(r.cbr_delay_ms)),
    ("cbr_jitter_ms", |r| opt(r.cbr_jitter_ms)),
];

fn results(report: &SimReport, out: &mut dyn Write) -> io::Result<()> {
    row(out, RESULT_COLUMNS.iter().map(|(name, _)| name.to_string()))?;
    for r in &report.results {
        row(out, RESULT_COLUMNS.iter().map(|(_, value)| value(r)))?;
    }
    Ok(())
}

fn flows(report: &SimReport, out: &mut dyn Write) -> io::Result<()> {
    row(out, ["scheme", "sweep_value", "run", "seed", "size_bytes", "start_s", "fct_s"].map(String::from))?;
    for run in &report.runs {
        for f in &run.flows {
            row(
                out,
                [
                    run.scheme.clone(),
                    opt(run.sweep_value),
                    run.run.to_string(),
                    run.seed.to_string(),
                    f.size_bytes.to_string(),
                    float(f.start_s),
                    opt(f.fct_s),
                ],
            )?;
        }
    }
    Ok(())
}

fn links(report: &SimReport, out: &mut dyn Write) -> io::Result<()> {
    let header = [
        "scheme",
        "sweep_value",
        "run",
        "link",
        "utilisation_down",
        "utilisation_up",
        "data_share",
        "loss",
        "queue_drops",
        "est_capacity_down_kbps",
        "true_capacity_down_kbps",
        "est_loss_down",
        "true_loss_down",
    ];
    row(out, header.map(String::from))?;
    for run in &report.runs {
        for l in &run.links {
            row(
                out,
                [
                    run.scheme.clone(),
                    opt(run.sweep_value),
                    run.run.to_string(),
                    l.name.clone(),
                    float(l.utilisation_down),
                    float(l.utilisation_up),
                    float(l.data_share),
                    float(l.loss),
                    l.queue_drops.to_string(),
                    float(l.est_capacity_down_kbps),
                    float(l.true_capacity_down_kbps),
                    float(l.est_loss_down),
                    float(l.true_loss_down),
                ],
            )?;
        }
    }
    Ok(())
}

/// Every float cell: Rust's `Display` writes an f64 in full decimal, so an estimate decayed to
/// 3e-300 took over 300 characters of `links.csv` (the blackout scenario's `est_loss_down`);
/// below 1e-9 the cell is in exponent form, which every CSV reader parses as the same number.
fn float(x: f64) -> String {
    if x != 0.0 && x.abs() < 1e-9 { format!("{x:e}") } else { x.to_string() }
}

fn throughput(report: &SimReport, out: &mut dyn Write) -> io::Result<()> {
    row(out, ["scheme", "sweep_value", "run", "link", "second", "down_kbps"].map(String::from))?;
    for scheme in scheme_names(report) {
        for point in sweep_points(report) {
            let Some(run) = first_run(report, scheme, point) else { continue };
            for l in &run.links {
                for (second, kbps) in l.down_kbps_series.iter().enumerate() {
                    row(
                        out,
                        [
                            run.scheme.clone(),
                            opt(run.sweep_value),
                            run.run.to_string(),
                            l.name.clone(),
                            second.to_string(),
                            float(*kbps),
                        ],
                    )?;
                }
            }
        }
    }
    Ok(())
}

fn goodput(report: &SimReport, out: &mut dyn Write) -> io::Result<()> {
    row(out, ["scheme", "sweep_value", "run", "second", "goodput_kbps"].map(String::from))?;
    for run in &report.runs {
        for (second, kbps) in run.goodput_kbps_series.iter().enumerate() {
            row(
                out,
                [run.scheme.clone(), opt(run.sweep_value), run.run.to_string(), second.to_string(), float(*kbps)],
            )?;
        }
    }
    Ok(())
}

fn opt(x: Option<f64>) -> String {
    x.map_or_else(String::new, float)
}

/// One record, fields quoted where RFC 4180 requires it.
fn row(out: &mut dyn Write, fields: impl IntoIterator<Item = String>) -> io::Result<()> {
    let mut line = String::new();
    for (i, f) in fields.into_iter().enumerate() {
        if i > 0 {
            line.push(',');
        }
        line.push_str(&quote(&f));
    }
    line.push('\n');
    out.write_all(line.as_bytes())
}

/// `s` as a CSV field: quoted (inner quotes doubled) if it holds a comma, quote or line break.
fn quote(s: &str) -> Cow<'_, str> {
    if s.contains([',', '"', '\n', '\r']) {
        Cow::Owned(format!("\"{}\"", s.replace('"', "\"\"")))
    } else {
        Cow::Borrowed(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;

    fn read(path: &Path) -> Vec<String> {
        std::fs::read_to_string(path).unwrap().lines().map(String::from).collect()
    }

    #[test]
    fn csv_files_have_one_row_per_item() {
        let dir = fixture::temp_dir("csv-rows");
        let report = fixture::report(true);
        let files = write_csv(&report, &dir).unwrap();
        let names: Vec<_> = files.iter().map(|p| p.file_name().unwrap().to_str().unwrap().to_string()).collect();
        assert_eq!(names, ["results.csv", "flows.csv", "links.csv", "throughput.csv", "goodput.csv"]);
        // 3 schemes x 2 sweep values; each with 2 runs of 4 flows and 2 links; series of 10 s in run 0.
        let results = read(&files[0]);
        assert_eq!(results.len(), 1 + 6);
        assert_eq!(results[0].split(',').count(), 29);
        assert!(results[0].starts_with("scheme,sweep_value,runs,flows,fct_mean_s,fct_ci95_s"));
        assert!(results[1].starts_with("oec,0.01,2,8,0.5,"), "{}", results[1]);
        let flows = read(&files[1]);
        assert_eq!(flows.len(), 1 + 6 * 2 * 4);
        assert_eq!(flows[0], "scheme,sweep_value,run,seed,size_bytes,start_s,fct_s");
        assert_eq!(flows[1], "oec,0.01,0,1,1000,0,0.2");
        // The incomplete flow: `none`, run 1, last flow, empty FCT.
        assert!(flows.contains(&"none,0.01,1,2,1000000,1.5,".to_string()), "{flows:?}");
        assert_eq!(read(&files[2]).len(), 1 + 6 * 2 * 2);
        let throughput = read(&files[3]);
        assert_eq!(throughput.len(), 1 + 6 * 2 * 10);
        assert!(throughput.iter().skip(1).all(|l| l.split(',').nth(2) == Some("0")));
        assert_eq!(throughput[1], "oec,0.01,0,wimax,0,750");
        // Flows, not bulk: no goodput series.
        assert_eq!(read(&files[4]), ["scheme,sweep_value,run,second,goodput_kbps"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_vanishing_estimate_is_a_short_cell_that_reads_back() {
        let dir = fixture::temp_dir("csv-tiny");
        let mut report = fixture::report(false);
        report.runs[0].links[0].est_loss_down = 3.3e-300;
        let files = write_csv(&report, &dir).unwrap();
        let links = read(&files[2]);
        let cell = links[1].rsplit(',').nth(1).unwrap();
        assert_eq!(cell, "3.3e-300");
        assert_eq!(cell.parse::<f64>().unwrap(), 3.3e-300);
        assert!(links.iter().all(|l| l.len() < 200), "{links:?}");
        assert_eq!(float(0.25), "0.25");
        assert_eq!(float(0.0), "0");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn csv_quotes_names_and_leaves_sweep_empty() {
        let dir = fixture::temp_dir("csv-quote");
        let mut report = fixture::report(false);
        for run in &mut report.runs {
            if run.scheme == "rs" {
                run.scheme = "rs \"k=8\", m=2".into();
            }
        }
        fixture::rebuild(&mut report);
        let files = write_csv(&report, &dir).unwrap();
        let results = std::fs::read_to_string(&files[0]).unwrap();
        assert!(results.contains("\n\"rs \"\"k=8\"\", m=2\",,2,8,"), "{results}");
        let flows = read(&files[1]);
        assert_eq!(flows.len(), 1 + 3 * 2 * 4);
        assert_eq!(flows[1], "oec,,0,1,1000,0,0.2");
        assert!(flows.iter().filter(|l| l.starts_with("\"rs \"\"k=8\"\", m=2\",")).count() == 8);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn csv_of_an_empty_report_has_headers_only() {
        let dir = fixture::temp_dir("csv-empty");
        let empty = SimReport { scenario: "x".into(), sweep_label: None, results: vec![], runs: vec![], wall_s: 0.0 };
        for path in write_csv(&empty, &dir).unwrap() {
            assert_eq!(read(&path).len(), 1, "{}", path.display());
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn quote_follows_rfc_4180() {
        assert_eq!(quote("oec"), "oec");
        assert_eq!(quote("a,b"), "\"a,b\"");
        assert_eq!(quote("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(quote("two\nlines"), "\"two\nlines\"");
    }
}
