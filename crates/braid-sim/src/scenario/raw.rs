//! The scenario file as serde sees it: every table denies unknown keys, and every key is optional
//! so that `build` can report a missing one with its own message and the enclosing table's line.
//! Names that pick a variant (`model`, `dist`, `kind`, `recovery`, ...) stay strings here for the
//! same reason: the error can list the valid choices.

use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawScenario {
    pub name: Option<String>,
    pub duration_s: Option<f64>,
    pub runs: Option<u32>,
    pub seed: Option<u64>,
    pub link: Option<Vec<RawLink>>,
    pub workload: Option<RawWorkload>,
    pub scheme: Option<Vec<RawScheme>>,
    pub tcp: Option<RawTcp>,
    pub sweep: Option<RawSweep>,
    pub vehicle: Option<RawVehicle>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawVehicle {
    pub speed_kmh: Option<f64>,
    pub start_m: Option<f64>,
    pub route_m: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDriveBy {
    pub aps_m: Option<Vec<f64>>,
    pub first_m: Option<f64>,
    pub spacing_m: Option<f64>,
    pub count: Option<u32>,
    pub offset_m: Option<f64>,
    pub range_m: Option<f64>,
    pub path_loss_exp: Option<f64>,
    pub edge_loss: Option<f64>,
    pub production_loss: Option<f64>,
    pub assoc_dbm: Option<f64>,
    pub mgmt_timeout_s: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLink {
    pub name: Option<String>,
    pub down: Option<RawDir>,
    pub up: Option<RawDir>,
    pub outages: Option<Vec<RawOutage>>,
    pub drive_by: Option<RawDriveBy>,
    pub coding_budget: Option<f64>,
    pub backup: Option<bool>,
    pub rate_known: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDir {
    pub rate_kbps: Option<f64>,
    pub trace: Option<String>,
    pub delay_ms: Option<f64>,
    pub queue_kb: Option<f64>,
    pub loss: Option<RawLoss>,
    pub schedule: Option<String>,
    pub outages: Option<Vec<RawOutage>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLoss {
    pub model: Option<String>,
    pub p: Option<f64>,
    pub p_gb: Option<f64>,
    pub p_bg: Option<f64>,
    pub loss_good: Option<f64>,
    pub loss_bad: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawOutage {
    pub at_s: Option<f64>,
    pub for_s: Option<f64>,
    pub jitter_s: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawWorkload {
    pub kind: Option<String>,
    pub direction: Option<String>,
    pub size_bytes: Option<RawDist>,
    pub interarrival_s: Option<RawDist>,
    pub scale: Option<f64>,
    pub flows: Option<u32>,
    pub rate_kbps: Option<f64>,
    pub packet_bytes: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDist {
    pub dist: Option<String>,
    pub median: Option<f64>,
    pub sigma: Option<f64>,
    pub max: Option<f64>,
    pub scale: Option<f64>,
    pub shape: Option<f64>,
    pub value: Option<f64>,
    pub mean: Option<f64>,
    pub min: Option<f64>,
    pub file: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawScheme {
    pub name: Option<String>,
    pub recovery: Option<String>,
    pub scheduler: Option<String>,
    pub peer: Option<String>,
    pub fec_percent: Option<f64>,
    pub weights: Option<RawWeights>,
    pub hold_ms: Option<f64>,
    pub aqm: Option<bool>,
    pub location: Option<bool>,
}

/// `weights = [1, 2]`, or a string (`weights = "auto"` of older files), which `build` refuses
/// with the spelling to write instead.
#[derive(Debug)]
pub(crate) enum RawWeights {
    Name(String),
    List(Vec<f64>),
}

impl<'de> Deserialize<'de> for RawWeights {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RawWeights;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an array of numbers (one per link) or \"auto\"")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<RawWeights, E> {
                Ok(RawWeights::Name(s.to_string()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<RawWeights, A::Error> {
                let mut out = Vec::new();
                while let Some(w) = seq.next_element::<f64>()? {
                    out.push(w);
                }
                Ok(RawWeights::List(out))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTcp {
    pub congestion: Option<String>,
    pub mss: Option<u16>,
    pub buffer_kb: Option<f64>,
    pub initial_rto_ms: Option<f64>,
    pub min_rto_ms: Option<f64>,
    pub initial_window_bytes: Option<u64>,
    pub sack: Option<bool>,
    pub hystart: Option<bool>,
    pub linux_rto: Option<bool>,
    pub byte_counting: Option<bool>,
    pub rack: Option<bool>,
    pub whole_segments: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSweep {
    pub keys: Option<Vec<String>>,
    pub values: Option<Vec<f64>>,
    pub label: Option<String>,
}
