//! Reports of a [`SimReport`] (docs/design.md 6): a terminal table, `--json`, CSV files and plots, and
//! the paired comparisons of schemes that the table and `--json` carry ([`paired()`]).
//!
//! Every function here reads the result types of [`crate::results`] and nothing else, so a report
//! can be produced again from a saved simulation. None of them panics on empty data: zero flows,
//! zero completed flows, a single run and NaN figures all produce a (sparser) report.

mod cost;
mod csv;
mod json;
mod paired;
mod plot;
mod table;

#[cfg(test)]
pub(crate) mod fixture;

pub use csv::write_csv;
pub use json::json;
pub use paired::{PairedFct, Versus, VersusParseError, comparisons, paired, paired_fct};
pub use plot::{PlotError, write_plots};
pub use table::{link_table, ratios, table};

use crate::results::{RunResult, SchemeResult, SimReport};

/// A sweep value as reports print it: the shortest decimal that reads back as the same `f64`.
pub fn format_sweep_value(value: f64) -> String {
    // `Display` for f64 already gives the shortest round-trip form ("0.05", "3", "1e-7" as "0.0000001").
    format!("{value}")
}

/// The distinct sweep values of `report`, in the order they first appear (`[None]` when not
/// sweeping, and nothing for an empty report).
pub(crate) fn sweep_points(report: &SimReport) -> Vec<Option<f64>> {
    let mut points: Vec<Option<f64>> = Vec::new();
    for value in report.results.iter().map(|r| r.sweep_value).chain(report.runs.iter().map(|r| r.sweep_value)) {
        if !points.iter().any(|p| same_point(*p, value)) {
            points.push(value);
        }
    }
    points
}

/// The scheme names of `report`, in the order they first appear.
pub(crate) fn scheme_names(report: &SimReport) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    for name in report.results.iter().map(|r| r.scheme.as_str()).chain(report.runs.iter().map(|r| r.scheme.as_str())) {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// Whether two sweep values name the same point (bitwise, so a NaN point still groups with itself).
pub(crate) fn same_point(a: Option<f64>, b: Option<f64>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => a.to_bits() == b.to_bits(),
        (None, None) => true,
        _ => false,
    }
}

/// The aggregates at one sweep point, in scheme order.
pub(crate) fn results_at(report: &SimReport, point: Option<f64>) -> Vec<&SchemeResult> {
    report.results.iter().filter(|r| same_point(r.sweep_value, point)).collect()
}

/// The runs of one scheme at one sweep point.
pub(crate) fn runs_of<'a>(report: &'a SimReport, scheme: &str, point: Option<f64>) -> Vec<&'a RunResult> {
    report.runs.iter().filter(|r| r.scheme == scheme && same_point(r.sweep_value, point)).collect()
}

/// The first run (lowest index) of one scheme at one sweep point: the one whose time series are shown.
pub(crate) fn first_run<'a>(report: &'a SimReport, scheme: &str, point: Option<f64>) -> Option<&'a RunResult> {
    runs_of(report, scheme, point).into_iter().min_by_key(|r| r.run)
}

/// `Some(x)` if `x` is a finite number: reports show NaN and infinities as missing.
pub(crate) fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}
