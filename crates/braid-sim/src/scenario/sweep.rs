//! `[sweep]`: the same scenario with some keys set to each of a list of values (a figure's x axis).
//! Each value is written into a copy of the spanned document, which is then deserialised and
//! checked like any scenario, so a swept value gets exactly the checks of a written one.

use std::path::Path;

use super::doc::{self, Doc, Loc};
use super::raw::RawSweep;
use super::{Scenario, ScenarioError, build_doc, serde_error};

/// A parameter sweep, already expanded.
#[derive(Debug, Clone, PartialEq)]
pub struct Sweep {
    /// The dotted keys that are all set to each value (`link.<name>.<dir>.<key path>`,
    /// `workload.<key>`, `scheme.<name>.<key>`, or a top-level key).
    pub keys: Vec<String>,
    /// The values, in file order.
    pub values: Vec<f64>,
    /// Axis label for reports (default: the first key).
    pub label: String,
    /// One scenario per value, in the same order; none of them has a sweep.
    pub points: Vec<Scenario>,
}

/// Checks `[sweep]` and builds one scenario per value.
pub(crate) fn expand(text: &str, doc: &Doc<'_>, base_dir: &Path, raw: RawSweep) -> Result<Sweep, ScenarioError> {
    let loc = Loc::root().key("sweep");
    let invalid = |at: &Loc, message: String| ScenarioError::Invalid {
        key: at.name(),
        line: doc::line_of(text, doc::span_of(doc, at).start),
        message,
    };
    let keys = raw.keys.unwrap_or_default();
    if keys.is_empty() {
        return Err(invalid(&loc.key("keys"), "missing or empty: name at least one key to sweep".into()));
    }
    let values = raw.values.unwrap_or_default();
    if values.is_empty() {
        return Err(invalid(&loc.key("values"), "missing or empty: give at least one value".into()));
    }
    // `inf` is allowed where the swept key takes it (`coding_budget`: no bound); every point
    // is checked as a written file would be.
    if let Some(i) = values.iter().position(|v| v.is_nan() || *v == f64::NEG_INFINITY) {
        return Err(invalid(&loc.key("values").elem(i, None), format!("must be a number or inf, found {}", values[i])));
    }
    let label = raw.label.unwrap_or_else(|| keys[0].clone());

    // serde has accepted `keys` as strings and `values` as numbers, so these arrays exist with
    // exactly these lengths; fall back to an empty span rather than trust that blindly.
    let key_spans: Vec<_> = (0..keys.len())
        .map(|i| doc::array_at(doc, "sweep", "keys").and_then(|a| a.get(i)).map_or(0..0, |v| v.span()))
        .collect();
    let value_items: Vec<_> = match doc::array_at(doc, "sweep", "values") {
        Some(a) if a.len() == values.len() => a.iter().cloned().collect(),
        _ => {
            return Err(invalid(&loc.key("values"), "must be an array of numbers".into()));
        }
    };

    let mut points = Vec::with_capacity(values.len());
    for (value, item) in values.iter().zip(value_items) {
        let mut point = doc.clone();
        point.get_mut().remove("sweep");
        for (key, span) in keys.iter().zip(&key_spans) {
            doc::set(&mut point, key, span.clone(), item.clone()).map_err(|message| ScenarioError::SweepKey {
                key: key.clone(),
                line: doc::line_of(text, span.start),
                message,
            })?;
        }
        let wrap = |e: ScenarioError| ScenarioError::SweepPoint { value: *value, source: Box::new(e) };
        let raw = match super::deserialize(&point) {
            Ok(raw) => raw,
            Err(e) => {
                // An error at an inserted key's own span means the key is not one the format knows.
                if let Some(i) = key_spans.iter().position(|s| e.span().as_ref() == Some(s)) {
                    return Err(ScenarioError::SweepKey {
                        key: keys[i].clone(),
                        line: doc::line_of(text, key_spans[i].start),
                        message: format!("names nothing: {}", e.message()),
                    });
                }
                return Err(wrap(serde_error(text, &point, &e)));
            }
        };
        let scenario = build_doc(text, &point, base_dir, raw).map_err(wrap)?;
        points.push(scenario);
    }
    Ok(Sweep { keys, values, label, points })
}
