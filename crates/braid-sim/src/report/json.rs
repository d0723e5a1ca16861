//! `--json` (docs/design.md 6): one object with the scenario and one entry per scheme (and sweep point).

use serde_json::{Map, Value};

use super::paired::{Versus, comparisons};
use crate::results::SimReport;

/// The `--json` object of `report`:
///
/// `{ "scenario", "wall_s", "results": [ {every SchemeResult field}, ... ], "paired_fct": [ {every
/// PairedFct field}, ... ] }`, plus `"sweep_label"` at the top level and `"sweep_value"` in each
/// result and comparison only when sweeping. `"paired_fct"` (added to docs/design.md 6's keys, which are
/// unchanged) holds the paired comparisons that `versus` asks for, every scheme against the first
/// when it is empty; it is an empty array when there is nothing to compare. Per-run data (flows,
/// series of runs other than the first) is not included; the CSV files have it. NaN and infinite
/// figures are written as `null`, as JSON has no representation for them.
pub fn json(report: &SimReport, versus: &[Versus]) -> Value {
    let results = report.results.iter().map(|r| object(r, "SchemeResult")).collect();
    let paired = comparisons(report, versus).iter().map(|c| object(c, "PairedFct")).collect();
    let mut top = Map::new();
    top.insert("scenario".into(), Value::from(report.scenario.clone()));
    if let Some(label) = &report.sweep_label {
        top.insert("sweep_label".into(), Value::from(label.clone()));
    }
    top.insert("wall_s".into(), Value::from(report.wall_s));
    top.insert("results".into(), Value::Array(results));
    top.insert("paired_fct".into(), Value::Array(paired));
    Value::Object(top)
}

/// `item` as a JSON object, without its `"sweep_value"` when that is `null` (not sweeping).
fn object(item: &impl serde::Serialize, what: &str) -> Value {
    // SchemeResult and PairedFct hold only strings, numbers, booleans, options and vectors of
    // structs with named fields: serialising them into a `Value` cannot fail.
    let mut value = serde_json::to_value(item).unwrap_or_else(|e| panic!("{what} serialises into JSON: {e}"));
    if let Value::Object(fields) = &mut value
        && fields.get("sweep_value").is_some_and(Value::is_null)
    {
        fields.remove("sweep_value");
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;

    /// Every SchemeResult field: the keys of docs/design.md 6 and the rest of the struct.
    const RESULT_KEYS: [&str; 33] = [
        "scheme",
        "runs",
        "flows",
        "fct_mean_s",
        "fct_ci95_s",
        "fct_p50_s",
        "fct_p95_s",
        "fct_p99_s",
        "incomplete_flows",
        "goodput_kbps",
        "goodput_ci95_kbps",
        "residual_loss",
        "aqm_drops",
        "overhead",
        "pass_share",
        "longest_stall_ms",
        "wifi_pass_mb",
        "coded_fraction",
        "recovered",
        "resent",
        "tcp_timeouts",
        "tcp_recoveries",
        "tcp_spurious_timeouts",
        "late_fraction",
        "reordered_fraction",
        "mean_hold_ms",
        "arrival_error_ms",
        "arrival_within_10ms",
        "cbr_loss",
        "cbr_delay_ms",
        "cbr_jitter_ms",
        "links",
        // Only when sweeping.
        "sweep_value",
    ];

    fn keys(v: &Value) -> Vec<String> {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    }

    fn expected(sweep: bool) -> Vec<String> {
        let mut k: Vec<String> =
            RESULT_KEYS.iter().filter(|k| sweep || **k != "sweep_value").map(|k| k.to_string()).collect();
        k.sort();
        k
    }

    #[test]
    fn json_has_the_design_keys_and_values() {
        let report = fixture::report(false);
        let v = json(&report, &[]);
        assert_eq!(keys(&v), ["paired_fct", "results", "scenario", "wall_s"]);
        assert_eq!(v["scenario"], "bus");
        assert_eq!(v["wall_s"], 1.25);
        let results = v["results"].as_array().unwrap();
        assert_eq!(results.len(), 3);
        for r in results {
            assert_eq!(keys(r), expected(false));
        }
        let oec = &results[0];
        assert_eq!(oec["scheme"], "oec");
        assert!((oec["fct_mean_s"].as_f64().unwrap() - 0.5).abs() < 1e-12);
        assert!((oec["fct_ci95_s"].as_f64().unwrap() - 12.706 * 0.1).abs() < 1e-9);
        assert!((oec["fct_p50_s"].as_f64().unwrap() - 0.5).abs() < 1e-12);
        assert_eq!(oec["incomplete_flows"], 0);
        assert_eq!(results[1]["incomplete_flows"], 1);
        assert_eq!(oec["goodput_kbps"], Value::Null);
        assert!((oec["overhead"].as_f64().unwrap() - 1.15).abs() < 1e-12);
        assert!((oec["coded_fraction"].as_f64().unwrap() - 0.2).abs() < 1e-12);
        assert!((oec["residual_loss"].as_f64().unwrap() - 0.001).abs() < 1e-12);
        assert_eq!(oec["links"][0]["name"], "wimax");
        assert_eq!(oec["links"][0]["down_kbps_series"].as_array().unwrap().len(), 10);
    }

    #[test]
    fn json_has_sweep_fields_only_when_sweeping() {
        let v = json(&fixture::report(true), &[]);
        assert_eq!(keys(&v), ["paired_fct", "results", "scenario", "sweep_label", "wall_s"]);
        assert_eq!(v["sweep_label"], "loss");
        let results = v["results"].as_array().unwrap();
        assert_eq!(results.len(), 6);
        for r in results {
            assert_eq!(keys(r), expected(true));
        }
        assert_eq!(results[0]["sweep_value"], 0.01);
        assert_eq!(results[1]["sweep_value"], 0.05);
        let paired = v["paired_fct"].as_array().unwrap();
        assert_eq!(paired.len(), 4, "none and rs against oec at two points");
        for p in paired {
            assert_eq!(keys(p), paired_expected(true));
        }
        assert_eq!(paired[1]["sweep_value"], 0.05);
    }

    /// Every PairedFct field.
    const PAIRED_KEYS: [&str; 9] = [
        "reference",
        "scheme",
        "runs",
        "unpaired_runs",
        "fct_diff_mean_s",
        "fct_diff_ci95_s",
        "faster_runs",
        "significant",
        // Only when sweeping.
        "sweep_value",
    ];

    fn paired_expected(sweep: bool) -> Vec<String> {
        let mut k: Vec<String> =
            PAIRED_KEYS.iter().filter(|k| sweep || **k != "sweep_value").map(|k| k.to_string()).collect();
        k.sort();
        k
    }

    #[test]
    fn json_has_the_paired_comparisons_asked_for() {
        let report = fixture::report(false);
        let v = json(&report, &[]);
        let paired = v["paired_fct"].as_array().unwrap();
        assert_eq!(paired.len(), 2);
        for p in paired {
            assert_eq!(keys(p), paired_expected(false));
        }
        // rs = oec x 1.5: run means 0.6, 0.9 against 0.4, 0.6.
        let rs = &paired[1];
        assert_eq!((&rs["reference"], &rs["scheme"]), (&Value::from("oec"), &Value::from("rs")));
        assert_eq!((&rs["runs"], &rs["unpaired_runs"], &rs["faster_runs"]), (&2.into(), &0.into(), &0.into()));
        assert!((rs["fct_diff_mean_s"].as_f64().unwrap() - 0.25).abs() < 1e-12);
        assert!((rs["fct_diff_ci95_s"].as_f64().unwrap() - 12.706 * 0.05).abs() < 1e-9);
        assert_eq!(rs["significant"], false);
        let v = json(&report, &["rs,oec".parse().unwrap()]);
        let paired = v["paired_fct"].as_array().unwrap();
        assert_eq!(paired.len(), 1);
        assert_eq!((&paired[0]["scheme"], &paired[0]["faster_runs"]), (&Value::from("oec"), &2.into()));
        // One scheme: nothing to compare, an empty array.
        let mut one = fixture::report(false);
        one.runs.retain(|r| r.scheme == "oec");
        fixture::rebuild(&mut one);
        assert_eq!(json(&one, &[])["paired_fct"], Value::Array(vec![]));
    }

    #[test]
    fn json_writes_nan_as_null() {
        let mut report = fixture::report(false);
        report.results[0].overhead = f64::NAN;
        report.wall_s = f64::INFINITY;
        let v = json(&report, &[]);
        assert_eq!(v["results"][0]["overhead"], Value::Null);
        assert_eq!(v["wall_s"], Value::Null);
        assert!(serde_json::to_string(&v).is_ok());
    }
}
