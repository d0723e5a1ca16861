//! From the serde view of a scenario (`raw`) to the typed [`Scenario`]: defaults, semantic checks,
//! and loading the files it names, with every error naming its key and line.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::doc::{self, Doc, Loc};
use super::raw::*;
use super::scheme::{Peer, RecoveryKind, SchedulerKind, SchemeKind, SchemeSpec};
use super::{
    Congestion, DEFAULT_BUFFER_KB, DEFAULT_BYTE_COUNTING, DEFAULT_DELAY_MS, DEFAULT_HYSTART, DEFAULT_INITIAL_RTO_MS,
    DEFAULT_INITIAL_WINDOW_BYTES, DEFAULT_LINUX_RTO, DEFAULT_MIN_RTO_MS, DEFAULT_MSS, DEFAULT_PACKET_BYTES,
    DEFAULT_QUEUE_KB, DEFAULT_RACK, DEFAULT_RUNS, DEFAULT_SACK, DEFAULT_SEED, DEFAULT_WHOLE_SEGMENTS, Direction,
    LinkSpec, Scenario, ScenarioError, TcpSpec, WorkloadSpec,
};
use crate::link::{DriveBy, LinkDirSpec, LossSpec, Outage, RateSpec, Schedule, Trace, Vehicle};
use crate::workload::Dist;

type Result<T> = std::result::Result<T, ScenarioError>;

/// What error messages and relative paths need: the text (for line numbers), its spanned
/// document (for key positions) and the directory relative paths start from.
pub(crate) struct Ctx<'a, 'i> {
    pub text: &'a str,
    pub doc: &'a Doc<'i>,
    pub base_dir: &'a Path,
}

/// The prefix of a trace path in the folder of real cellular traces (Mahimahi's), which braid
/// does not ship: `trace = "$BRAID_TRACES/ATT-LTE-driving-2016.down"`.
pub const TRACES_VAR: &str = "$BRAID_TRACES";

/// The folder of real cellular traces: `$BRAID_TRACES`, else `shared/traces` beside the project
/// folder (resolved from the scenario file's folder, `scenarios/`), where the project's build
/// machines keep them.
pub fn traces_dir(base_dir: &Path) -> std::path::PathBuf {
    match std::env::var_os("BRAID_TRACES") {
        Some(d) if !d.is_empty() => std::path::PathBuf::from(d),
        _ => base_dir.join("../../shared/traces"),
    }
}

impl Ctx<'_, '_> {
    fn line(&self, loc: &Loc) -> usize {
        doc::line_of(self.text, doc::span_of(self.doc, loc).start)
    }

    fn invalid(&self, loc: &Loc, message: impl Into<String>) -> ScenarioError {
        ScenarioError::Invalid { key: loc.name(), line: self.line(loc), message: message.into() }
    }

    fn required<T>(&self, v: Option<T>, loc: &Loc) -> Result<T> {
        v.ok_or_else(|| self.invalid(loc, "missing (required)"))
    }

    fn positive(&self, v: f64, loc: &Loc) -> Result<f64> {
        if v.is_finite() && v > 0.0 {
            Ok(v)
        } else {
            Err(self.invalid(loc, format!("must be a number > 0, found {v}")))
        }
    }

    fn non_negative(&self, v: f64, loc: &Loc) -> Result<f64> {
        if v.is_finite() && v >= 0.0 {
            Ok(v)
        } else {
            Err(self.invalid(loc, format!("must be a number >= 0, found {v}")))
        }
    }

    fn probability(&self, v: f64, loc: &Loc) -> Result<f64> {
        if (0.0..=1.0).contains(&v) {
            Ok(v)
        } else {
            Err(self.invalid(loc, format!("must be a probability within [0, 1], found {v}")))
        }
    }

    /// A non-negative number of `unit`s per second as a `Duration`.
    fn duration(&self, v: f64, per_second: f64, loc: &Loc) -> Result<Duration> {
        let v = self.non_negative(v, loc)?;
        Duration::try_from_secs_f64(v / per_second).map_err(|_| self.invalid(loc, format!("{v} is too large")))
    }

    fn choice<T>(&self, name: &str, lookup: fn(&str) -> Option<T>, names: &[&str], loc: &Loc) -> Result<T> {
        lookup(name).ok_or_else(|| self.invalid(loc, format!("unknown value {name:?}; valid: {}", names.join(", "))))
    }

    /// Rejects keys that are present but mean nothing in this variant (`what`).
    fn not_applicable(&self, loc: &Loc, what: &str, keys: &[(&str, bool)]) -> Result<()> {
        match keys.iter().find(|(_, present)| *present) {
            Some((k, _)) => Err(self.invalid(&loc.key(k), format!("does not apply to {what}"))),
            None => Ok(()),
        }
    }

    fn path(&self, rel: &str, loc: &Loc) -> Result<std::path::PathBuf> {
        if rel.is_empty() {
            return Err(self.invalid(loc, "empty path"));
        }
        if let Some(name) = rel.strip_prefix(TRACES_VAR) {
            let dir = traces_dir(self.base_dir);
            let path = dir.join(name.trim_start_matches('/'));
            if !path.exists() {
                return Err(self.invalid(
                    loc,
                    format!(
                        "{} not found: the Mahimahi cellular traces are not shipped with braid; set BRAID_TRACES to the folder that holds them",
                        path.display()
                    ),
                ));
            }
            return Ok(path);
        }
        Ok(self.base_dir.join(rel))
    }

    fn file_error(&self, loc: &Loc, source: crate::link::SpecFileError) -> ScenarioError {
        ScenarioError::File { key: loc.name(), line: self.line(loc), source }
    }
}

/// Builds everything but the sweep (the caller expands that).
pub(crate) fn scenario(ctx: &Ctx<'_, '_>, raw: RawScenario) -> Result<Scenario> {
    let root = Loc::root();
    let name = ctx.required(raw.name, &root.key("name"))?;
    if name.trim().is_empty() {
        return Err(ctx.invalid(&root.key("name"), "must not be empty"));
    }
    let loc = root.key("duration_s");
    let duration_s = ctx.positive(ctx.required(raw.duration_s, &loc)?, &loc)?;
    let duration = ctx.duration(duration_s, 1.0, &loc)?;
    let runs = raw.runs.unwrap_or(DEFAULT_RUNS);
    if runs == 0 {
        return Err(ctx.invalid(&root.key("runs"), "must be at least 1"));
    }

    let vehicle = match raw.vehicle {
        Some(v) => Some(vehicle(ctx, &root.key("vehicle"), v)?),
        None => None,
    };
    let loc = root.key("link");
    let raw_links = ctx.required(raw.link, &loc)?;
    if raw_links.is_empty() {
        return Err(ctx.invalid(&loc, "at least one [[link]] is required"));
    }
    let mut links = Vec::with_capacity(raw_links.len());
    let mut seen = HashSet::new();
    for (i, l) in raw_links.into_iter().enumerate() {
        let link = link(ctx, &loc.elem(i, l.name.as_deref()), l, vehicle)?;
        if !seen.insert(link.name.clone()) {
            let at = loc.elem(i, None).key("name");
            return Err(ctx.invalid(&at, format!("duplicate link name {:?}", link.name)));
        }
        links.push(link);
    }

    let workload = workload(ctx, &root.key("workload"), ctx.required(raw.workload, &root.key("workload"))?)?;

    let loc = root.key("scheme");
    let raw_schemes = ctx.required(raw.scheme, &loc)?;
    if raw_schemes.is_empty() {
        return Err(ctx.invalid(&loc, "at least one [[scheme]] is required"));
    }
    let mut schemes = Vec::with_capacity(raw_schemes.len());
    let mut seen = HashSet::new();
    for (i, s) in raw_schemes.into_iter().enumerate() {
        let spec = scheme(ctx, &loc.elem(i, s.name.as_deref()), s, links.len())?;
        if !seen.insert(spec.name.clone()) {
            let at = loc.elem(i, None).key("name");
            return Err(ctx.invalid(&at, format!("duplicate scheme name {:?}", spec.name)));
        }
        // Location awareness learns by the vehicle's position; without one it would run as if off.
        if spec.location && vehicle.is_none() {
            let at = loc.elem(i, Some(spec.name.as_str())).key("location");
            return Err(ctx.invalid(&at, "needs a [vehicle] table (the position it learns by)"));
        }
        schemes.push(spec);
    }

    let tcp = match raw.tcp {
        Some(t) => tcp(ctx, &root.key("tcp"), t)?,
        None => TcpSpec::default(),
    };

    Ok(Scenario {
        name,
        duration,
        runs,
        seed: raw.seed.unwrap_or(DEFAULT_SEED),
        links,
        workload,
        schemes,
        tcp,
        sweep: None,
        base_dir: ctx.base_dir.to_path_buf(),
        vehicle,
    })
}

fn link(ctx: &Ctx<'_, '_>, loc: &Loc, raw: RawLink, vehicle: Option<Vehicle>) -> Result<LinkSpec> {
    let name = ctx.required(raw.name, &loc.key("name"))?;
    if name.trim().is_empty() {
        return Err(ctx.invalid(&loc.key("name"), "must not be empty"));
    }
    let drive_by = match raw.drive_by {
        Some(d) => {
            let at = loc.key("drive_by");
            let v = vehicle.ok_or_else(|| ctx.invalid(&at, "a drive-by link needs a [vehicle] table (speed_kmh)"))?;
            Some(Arc::new(drive_by(ctx, &at, d, v)?))
        }
        None => None,
    };
    let shared = outages(ctx, &loc.key("outages"), raw.outages)?;
    let is_drive = drive_by.is_some();
    let mut down = direction(ctx, &loc.key("down"), ctx.required(raw.down, &loc.key("down"))?, is_drive)?;
    let mut up = direction(ctx, &loc.key("up"), ctx.required(raw.up, &loc.key("up"))?, is_drive)?;
    for dir in [&mut down, &mut up] {
        dir.outages.extend_from_slice(&shared);
        dir.outages.sort_by_key(|o| o.at);
    }
    let metering = braid_proto::Metering::new(raw.coding_budget, raw.backup.unwrap_or(false)).map_err(|_| {
        ctx.invalid(
            &loc.key("coding_budget"),
            format!("must be a number >= 0 (or inf for no bound), found {}", raw.coding_budget.unwrap_or(f64::NAN)),
        )
    })?;
    Ok(LinkSpec { name, down, up, drive_by, metering, rate_known: raw.rate_known.unwrap_or(true) })
}

fn vehicle(ctx: &Ctx<'_, '_>, loc: &Loc, raw: RawVehicle) -> Result<Vehicle> {
    let at = loc.key("speed_kmh");
    let speed = ctx.positive(ctx.required(raw.speed_kmh, &at)?, &at)?;
    let start_m = raw.start_m.unwrap_or(0.0);
    if !start_m.is_finite() {
        return Err(ctx.invalid(&loc.key("start_m"), format!("must be a finite number, found {start_m}")));
    }
    let route_m = match raw.route_m {
        Some(r) => Some(ctx.positive(r, &loc.key("route_m"))?),
        None => None,
    };
    Ok(Vehicle { speed_mps: speed / 3.6, start_m, route_m })
}

/// `drive_by = {...}`: access points either listed (`aps_m`) or evenly spaced (`first_m`,
/// `spacing_m`, `count`); the rest default to paper 002's setting ([`DriveBy::default`]).
fn drive_by(ctx: &Ctx<'_, '_>, loc: &Loc, raw: RawDriveBy, vehicle: Vehicle) -> Result<DriveBy> {
    let d = DriveBy::default();
    let finite = |v: f64, key: &str| -> Result<f64> {
        if v.is_finite() {
            Ok(v)
        } else {
            Err(ctx.invalid(&loc.key(key), format!("must be a finite number, found {v}")))
        }
    };
    let aps_m = match (raw.aps_m, raw.spacing_m) {
        (Some(_), Some(_)) => {
            return Err(ctx.invalid(&loc.key("spacing_m"), "give either aps_m or first_m/spacing_m/count, not both"));
        }
        (Some(list), None) => {
            ctx.not_applicable(
                loc,
                "a list of access points (aps_m)",
                &[("first_m", raw.first_m.is_some()), ("count", raw.count.is_some())],
            )?;
            if list.is_empty() {
                return Err(ctx.invalid(&loc.key("aps_m"), "at least one access point position is required"));
            }
            let mut out = Vec::with_capacity(list.len());
            for x in list {
                out.push(finite(x, "aps_m")?);
            }
            out.sort_by(f64::total_cmp);
            out
        }
        (None, Some(spacing)) => {
            let spacing = ctx.positive(spacing, &loc.key("spacing_m"))?;
            let first = finite(raw.first_m.unwrap_or(0.0), "first_m")?;
            let at = loc.key("count");
            let count = ctx.required(raw.count, &at)?;
            if count == 0 || count > 10_000 {
                return Err(ctx.invalid(&at, format!("must be within 1..=10000, found {count}")));
            }
            (0..count).map(|i| first + spacing * f64::from(i)).collect()
        }
        (None, None) => {
            return Err(ctx.invalid(&loc.key("aps_m"), "missing: give aps_m (a list) or first_m, spacing_m and count"));
        }
    };
    let range_m = ctx.positive(raw.range_m.unwrap_or(d.range_m), &loc.key("range_m"))?;
    let edge_loss = ctx.probability(raw.edge_loss.unwrap_or(d.edge_loss), &loc.key("edge_loss"))?;
    let production_loss =
        ctx.probability(raw.production_loss.unwrap_or(d.production_loss), &loc.key("production_loss"))?;
    let assoc_dbm = finite(raw.assoc_dbm.unwrap_or(d.assoc_dbm), "assoc_dbm")?;
    if assoc_dbm < crate::link::driveby::MAC_RATES[0].sensitivity_dbm {
        return Err(ctx.invalid(
            &loc.key("assoc_dbm"),
            format!("must be at least the slowest rate's sensitivity, -95 dBm, found {assoc_dbm}"),
        ));
    }
    Ok(DriveBy {
        vehicle,
        aps_m,
        offset_m: ctx.non_negative(raw.offset_m.unwrap_or(d.offset_m), &loc.key("offset_m"))?,
        range_m,
        path_loss_exp: ctx.positive(raw.path_loss_exp.unwrap_or(d.path_loss_exp), &loc.key("path_loss_exp"))?,
        edge_loss,
        production_loss,
        assoc_dbm,
        mgmt_timeout: ctx.duration(
            raw.mgmt_timeout_s.unwrap_or(d.mgmt_timeout.as_secs_f64()),
            1.0,
            &loc.key("mgmt_timeout_s"),
        )?,
    })
}

fn direction(ctx: &Ctx<'_, '_>, loc: &Loc, raw: RawDir, drive_by: bool) -> Result<LinkDirSpec> {
    if drive_by {
        ctx.not_applicable(
            loc,
            "a drive-by link (its rate, loss and schedule follow the vehicle's position)",
            &[
                ("rate_kbps", raw.rate_kbps.is_some()),
                ("trace", raw.trace.is_some()),
                ("loss", raw.loss.is_some()),
                ("schedule", raw.schedule.is_some()),
            ],
        )?;
    }
    let rate = match (raw.rate_kbps, raw.trace) {
        // Replaced per run by the pass (`LinkSpec::for_run`); what remains is the nominal rate the
        // client starts its estimates from, an 802.11g link's best TCP-level rate (Table 3).
        (None, None) if drive_by => RateSpec::Constant { kbps: 30_000.0 },
        (Some(_), Some(_)) => {
            return Err(ctx.invalid(&loc.key("trace"), "give either rate_kbps or trace, not both"));
        }
        (None, None) => {
            return Err(ctx.invalid(&loc.key("rate_kbps"), "missing: give rate_kbps or trace (a mahimahi file)"));
        }
        (Some(kbps), None) => RateSpec::Constant { kbps: ctx.positive(kbps, &loc.key("rate_kbps"))? },
        (None, Some(rel)) => {
            let at = loc.key("trace");
            let path = ctx.path(&rel, &at)?;
            RateSpec::Trace(Arc::new(Trace::from_file(&path).map_err(|e| ctx.file_error(&at, e))?))
        }
    };
    let delay = ctx.duration(raw.delay_ms.unwrap_or(DEFAULT_DELAY_MS), 1e3, &loc.key("delay_ms"))?;
    let at = loc.key("queue_kb");
    let queue_kb = ctx.positive(raw.queue_kb.unwrap_or(DEFAULT_QUEUE_KB), &at)?;
    let queue_bytes = (queue_kb * 1000.0).round();
    if queue_bytes < 1.0 || queue_bytes > usize::MAX as f64 {
        return Err(ctx.invalid(&at, format!("{queue_kb} kB is not a usable queue size")));
    }
    let loss = match raw.loss {
        Some(l) => loss(ctx, &loc.key("loss"), l)?,
        None => LossSpec::None,
    };
    let schedule = match raw.schedule {
        Some(rel) => {
            let at = loc.key("schedule");
            let path = ctx.path(&rel, &at)?;
            Some(Arc::new(Schedule::from_file(&path).map_err(|e| ctx.file_error(&at, e))?))
        }
        None => None,
    };
    let mut outages = outages(ctx, &loc.key("outages"), raw.outages)?;
    outages.sort_by_key(|o| o.at);
    Ok(LinkDirSpec { rate, delay, queue_bytes: queue_bytes as usize, loss, schedule, outages })
}

fn loss(ctx: &Ctx<'_, '_>, loc: &Loc, raw: RawLoss) -> Result<LossSpec> {
    let at = loc.key("model");
    let model = ctx.required(raw.model.as_deref(), &at)?;
    let prob = |v: Option<f64>, key: &str| -> Result<f64> {
        let at = loc.key(key);
        ctx.probability(ctx.required(v, &at)?, &at)
    };
    match model {
        "none" => {
            ctx.not_applicable(
                loc,
                "model \"none\"",
                &[
                    ("p", raw.p.is_some()),
                    ("p_gb", raw.p_gb.is_some()),
                    ("p_bg", raw.p_bg.is_some()),
                    ("loss_good", raw.loss_good.is_some()),
                    ("loss_bad", raw.loss_bad.is_some()),
                ],
            )?;
            Ok(LossSpec::None)
        }
        "bernoulli" => {
            ctx.not_applicable(
                loc,
                "model \"bernoulli\"",
                &[
                    ("p_gb", raw.p_gb.is_some()),
                    ("p_bg", raw.p_bg.is_some()),
                    ("loss_good", raw.loss_good.is_some()),
                    ("loss_bad", raw.loss_bad.is_some()),
                ],
            )?;
            Ok(LossSpec::Bernoulli { p: prob(raw.p, "p")? })
        }
        "gilbert" => {
            ctx.not_applicable(loc, "model \"gilbert\"", &[("p", raw.p.is_some())])?;
            Ok(LossSpec::Gilbert {
                p_gb: prob(raw.p_gb, "p_gb")?,
                p_bg: prob(raw.p_bg, "p_bg")?,
                loss_good: prob(raw.loss_good.or(Some(0.0)), "loss_good")?,
                loss_bad: prob(raw.loss_bad.or(Some(1.0)), "loss_bad")?,
            })
        }
        other => Err(ctx.invalid(&at, format!("unknown loss model {other:?}; valid: none, bernoulli, gilbert"))),
    }
}

fn outages(ctx: &Ctx<'_, '_>, loc: &Loc, raw: Option<Vec<RawOutage>>) -> Result<Vec<Outage>> {
    let mut out = Vec::new();
    for (i, o) in raw.unwrap_or_default().into_iter().enumerate() {
        let e = loc.elem(i, None);
        let (at_loc, for_loc) = (e.key("at_s"), e.key("for_s"));
        let at = ctx.duration(ctx.required(o.at_s, &at_loc)?, 1.0, &at_loc)?;
        let for_s = ctx.positive(ctx.required(o.for_s, &for_loc)?, &for_loc)?;
        let jitter_loc = e.key("jitter_s");
        let jitter = match o.jitter_s {
            None => Duration::ZERO,
            Some(j) => ctx.duration(j, 1.0, &jitter_loc)?,
        };
        out.push(Outage { at, duration: ctx.duration(for_s, 1.0, &for_loc)?, jitter });
    }
    Ok(out)
}

fn workload(ctx: &Ctx<'_, '_>, loc: &Loc, raw: RawWorkload) -> Result<WorkloadSpec> {
    let kind_loc = loc.key("kind");
    let kind = ctx.required(raw.kind.as_deref(), &kind_loc)?;
    let direction = match raw.direction.as_deref() {
        Some(d) => ctx.choice(d, Direction::from_name, Direction::NAMES, &loc.key("direction"))?,
        None => Direction::Down,
    };
    match kind {
        "flows" => {
            let what = "kind \"flows\"";
            ctx.not_applicable(
                loc,
                what,
                &[
                    ("flows", raw.flows.is_some()),
                    ("rate_kbps", raw.rate_kbps.is_some()),
                    ("packet_bytes", raw.packet_bytes.is_some()),
                ],
            )?;
            let mean_positive = |raw: Option<RawDist>, key: &str| -> Result<Dist> {
                let at = loc.key(key);
                let d = dist(ctx, &at, ctx.required(raw, &at)?)?;
                let mean = d.mean();
                if mean.is_nan() || mean <= 0.0 {
                    return Err(ctx.invalid(&at, format!("mean must be > 0, found {mean}")));
                }
                Ok(d)
            };
            let size_bytes = mean_positive(raw.size_bytes, "size_bytes")?;
            let interarrival_s = mean_positive(raw.interarrival_s, "interarrival_s")?;
            let scale = ctx.positive(raw.scale.unwrap_or(1.0), &loc.key("scale"))?;
            Ok(WorkloadSpec::Flows { direction, size_bytes, interarrival_s, scale })
        }
        "bulk" => {
            ctx.not_applicable(
                loc,
                "kind \"bulk\"",
                &[
                    ("size_bytes", raw.size_bytes.is_some()),
                    ("interarrival_s", raw.interarrival_s.is_some()),
                    ("scale", raw.scale.is_some()),
                    ("rate_kbps", raw.rate_kbps.is_some()),
                    ("packet_bytes", raw.packet_bytes.is_some()),
                ],
            )?;
            let flows = raw.flows.unwrap_or(1);
            if flows == 0 {
                return Err(ctx.invalid(&loc.key("flows"), "must be at least 1"));
            }
            Ok(WorkloadSpec::Bulk { direction, flows })
        }
        "cbr" => {
            ctx.not_applicable(
                loc,
                "kind \"cbr\"",
                &[
                    ("size_bytes", raw.size_bytes.is_some()),
                    ("interarrival_s", raw.interarrival_s.is_some()),
                    ("scale", raw.scale.is_some()),
                    ("flows", raw.flows.is_some()),
                ],
            )?;
            let at = loc.key("rate_kbps");
            let rate_kbps = ctx.positive(ctx.required(raw.rate_kbps, &at)?, &at)?;
            let packet_bytes = raw.packet_bytes.unwrap_or(DEFAULT_PACKET_BYTES);
            if !(1..=65_507).contains(&packet_bytes) {
                return Err(
                    ctx.invalid(&loc.key("packet_bytes"), format!("must be within 1..=65507, found {packet_bytes}"))
                );
            }
            Ok(WorkloadSpec::Cbr { direction, rate_kbps, packet_bytes })
        }
        other => Err(ctx.invalid(&kind_loc, format!("unknown workload kind {other:?}; valid: flows, bulk, cbr"))),
    }
}

fn dist(ctx: &Ctx<'_, '_>, loc: &Loc, raw: RawDist) -> Result<Dist> {
    let kind_loc = loc.key("dist");
    let kind = ctx.required(raw.dist.as_deref(), &kind_loc)?;
    let all = [
        ("median", raw.median.is_some()),
        ("sigma", raw.sigma.is_some()),
        ("max", raw.max.is_some()),
        ("scale", raw.scale.is_some()),
        ("shape", raw.shape.is_some()),
        ("value", raw.value.is_some()),
        ("mean", raw.mean.is_some()),
        ("min", raw.min.is_some()),
        ("file", raw.file.is_some()),
    ];
    let only = |keys: &[&str]| -> Result<()> {
        let others: Vec<(&str, bool)> = all.iter().copied().filter(|(k, _)| !keys.contains(k)).collect();
        ctx.not_applicable(loc, &format!("dist {kind:?}"), &others)
    };
    let req = |v: Option<f64>, key: &str| ctx.required(v, &loc.key(key));
    let d = match kind {
        "lognormal" => {
            only(&["median", "sigma", "max"])?;
            Dist::LogNormal { median: req(raw.median, "median")?, sigma: req(raw.sigma, "sigma")?, max: raw.max }
        }
        "pareto" => {
            only(&["scale", "shape", "max"])?;
            Dist::Pareto { scale: req(raw.scale, "scale")?, shape: req(raw.shape, "shape")?, max: raw.max }
        }
        "fixed" => {
            only(&["value"])?;
            Dist::Fixed { value: req(raw.value, "value")? }
        }
        "exponential" => {
            only(&["mean"])?;
            Dist::Exponential { mean: req(raw.mean, "mean")? }
        }
        "uniform" => {
            only(&["min", "max"])?;
            Dist::Uniform { min: req(raw.min, "min")?, max: req(raw.max, "max")? }
        }
        "empirical" => {
            only(&["file"])?;
            let at = loc.key("file");
            let rel = ctx.required(raw.file, &at)?;
            let path = ctx.path(&rel, &at)?;
            Dist::empirical_from_file(&path).map_err(|e| ctx.file_error(&at, e))?
        }
        other => {
            return Err(ctx.invalid(&kind_loc, format!("unknown dist {other:?}; valid: {}", Dist::KINDS.join(", "))));
        }
    };
    d.check().map_err(|e| ctx.invalid(&loc.key(e.param), e.what))?;
    Ok(d)
}

fn scheme(ctx: &Ctx<'_, '_>, loc: &Loc, raw: RawScheme, n_links: usize) -> Result<SchemeSpec> {
    let name_loc = loc.key("name");
    let name = ctx.required(raw.name.clone(), &name_loc)?;
    if name.trim().is_empty() {
        return Err(ctx.invalid(&name_loc, "must not be empty"));
    }
    let kind = match (raw.recovery.as_deref(), raw.peer.as_deref()) {
        (Some(_), Some(_)) => {
            return Err(ctx.invalid(&loc.key("peer"), "give either recovery or peer, not both"));
        }
        // A scheme with only a name is braid's general setting.
        (None, None) => braid_scheme(ctx, loc, "auto", &raw)?,
        (Some(r), None) => braid_scheme(ctx, loc, r, &raw)?,
        (None, Some(p)) => {
            let peer = ctx.choice(p, Peer::from_name, Peer::NAMES, &loc.key("peer"))?;
            ctx.not_applicable(
                loc,
                "a peer (it has no braid scheduler or sequencing buffer)",
                &[
                    ("scheduler", raw.scheduler.is_some()),
                    ("weights", raw.weights.is_some()),
                    ("hold_ms", raw.hold_ms.is_some()),
                    ("aqm", raw.aqm.is_some()),
                    ("location", raw.location.is_some()),
                ],
            )?;
            SchemeKind::Peer(peer)
        }
    };

    let fec_loc = loc.key("fec_percent");
    let fec_percent = match raw.fec_percent {
        None => None,
        Some(_) if kind != SchemeKind::Peer(Peer::Kcptun) => {
            return Err(ctx.invalid(&fec_loc, "applies only to peer kcptun"));
        }
        Some(k) if k.is_finite() && k > 0.0 && k <= 1000.0 => Some(k),
        Some(k) => return Err(ctx.invalid(&fec_loc, format!("must be within (0, 1000], found {k}"))),
    };

    let weights_loc = loc.key("weights");
    let fixed_wrr = matches!(kind, SchemeKind::Braid { scheduler: SchedulerKind::Wrr { auto: false }, .. });
    let auto_wrr = matches!(kind, SchemeKind::Braid { scheduler: SchedulerKind::Wrr { auto: true }, .. });
    let weights = match raw.weights {
        None if fixed_wrr => {
            return Err(ctx.invalid(
                &loc.key("scheduler"),
                "wrr takes fixed weights: give weights = [..] (one per link), or write scheduler = \"wrr:auto\" for weights from measured bandwidth",
            ));
        }
        None => None,
        // Every scheduler honours operator weights (docs/schemes.md) but wrr:auto, which sets its own.
        Some(_) if auto_wrr => {
            return Err(ctx.invalid(
                &weights_loc,
                "does not apply to scheduler wrr:auto, which weights the links by their measured bandwidth",
            ));
        }
        Some(RawWeights::Name(s)) => {
            return Err(ctx.invalid(&weights_loc, format!("expected a list of numbers, found {s:?}")));
        }
        Some(RawWeights::List(w)) => {
            if w.len() != n_links {
                return Err(ctx.invalid(
                    &weights_loc,
                    format!("has {} weights but there are {n_links} links (one weight per link)", w.len()),
                ));
            }
            if let Some((i, bad)) = w.iter().enumerate().find(|(_, x)| !(x.is_finite() && **x >= 0.0)) {
                return Err(ctx.invalid(&weights_loc.elem(i, None), format!("must be a number >= 0, found {bad}")));
            }
            if w.iter().all(|x| *x == 0.0) {
                return Err(ctx.invalid(&weights_loc, "at least one weight must be > 0"));
            }
            Some(w)
        }
    };

    let hold = match raw.hold_ms {
        Some(ms) => Some(ctx.duration(ms, 1e3, &loc.key("hold_ms"))?),
        None => None,
    };
    Ok(SchemeSpec {
        name,
        kind,
        fec_percent,
        weights,
        hold,
        aqm: raw.aqm.unwrap_or(false),
        location: raw.location.unwrap_or(false),
    })
}

/// A braid scheme's `recovery` and `scheduler`, parsed by braid-proto's grammar. The older
/// spellings (`recovery = "fec"` with `fec_percent = 10`, `scheduler = "wrr"` with `weights =
/// "auto"`) are refused with the spelling to write instead.
fn braid_scheme(ctx: &Ctx<'_, '_>, loc: &Loc, recovery: &str, raw: &RawScheme) -> Result<SchemeKind> {
    if let Some(k) = raw.fec_percent {
        return Err(ctx.invalid(
            &loc.key("fec_percent"),
            format!("is not a key of braid's schemes any more: write recovery = \"{recovery}:{k}\""),
        ));
    }
    if let (Some(RawWeights::Name(w)), Some(s)) = (&raw.weights, raw.scheduler.as_deref()) {
        return Err(ctx.invalid(
            &loc.key("weights"),
            format!(
                "{w:?} is not a list of weights; for weights from measured bandwidth write scheduler = \"{s}:{w}\""
            ),
        ));
    }
    let recovery = recovery.parse::<RecoveryKind>().map_err(|e| ctx.invalid(&loc.key("recovery"), e.to_string()))?;
    let scheduler = match raw.scheduler.as_deref() {
        Some(s) => s.parse::<SchedulerKind>().map_err(|e| ctx.invalid(&loc.key("scheduler"), e.to_string()))?,
        None => SchemeSpec::DEFAULT_SCHEDULER,
    };
    Ok(SchemeKind::Braid { recovery, scheduler })
}

fn tcp(ctx: &Ctx<'_, '_>, loc: &Loc, raw: RawTcp) -> Result<TcpSpec> {
    let congestion = match raw.congestion.as_deref() {
        Some(c) => ctx.choice(c, Congestion::from_name, Congestion::NAMES, &loc.key("congestion"))?,
        None => Congestion::Cubic,
    };
    let mss = raw.mss.unwrap_or(DEFAULT_MSS);
    if mss < 64 {
        return Err(ctx.invalid(&loc.key("mss"), format!("must be at least 64, found {mss}")));
    }
    let at = loc.key("buffer_kb");
    let buffer_kb = ctx.positive(raw.buffer_kb.unwrap_or(DEFAULT_BUFFER_KB), &at)?;
    let buffer_bytes = (buffer_kb * 1000.0).round();
    if buffer_bytes < f64::from(mss) || buffer_bytes > u32::MAX as f64 {
        return Err(ctx.invalid(&at, format!("{buffer_kb} kB must hold at least one segment and fit 32 bits")));
    }
    // smoltcp keeps RTOs in whole milliseconds between 1 ms and 60 s (RFC 6298 2.5).
    let rto = |v: Option<f64>, default: u64, key: &str| -> Result<Duration> {
        let ms = v.unwrap_or(default as f64);
        if !(1.0..=60_000.0).contains(&ms) || ms.fract() != 0.0 {
            return Err(ctx.invalid(&loc.key(key), format!("must be a whole number of ms in 1..=60000, found {ms}")));
        }
        Ok(Duration::from_millis(ms as u64))
    };
    let initial_rto = rto(raw.initial_rto_ms, DEFAULT_INITIAL_RTO_MS, "initial_rto_ms")?;
    let min_rto = rto(raw.min_rto_ms, DEFAULT_MIN_RTO_MS, "min_rto_ms")?;
    let initial_window = raw.initial_window_bytes.unwrap_or(DEFAULT_INITIAL_WINDOW_BYTES as u64);
    if initial_window < u64::from(mss) || initial_window > u64::from(u32::MAX) {
        return Err(ctx.invalid(
            &loc.key("initial_window_bytes"),
            format!("must hold at least one segment ({mss} bytes) and fit 32 bits, found {initial_window}"),
        ));
    }
    Ok(TcpSpec {
        congestion,
        mss,
        buffer_bytes: buffer_bytes as usize,
        initial_rto,
        min_rto,
        initial_window: initial_window as usize,
        sack: raw.sack.unwrap_or(DEFAULT_SACK),
        hystart: raw.hystart.unwrap_or(DEFAULT_HYSTART),
        linux_rto: raw.linux_rto.unwrap_or(DEFAULT_LINUX_RTO),
        byte_counting: raw.byte_counting.unwrap_or(DEFAULT_BYTE_COUNTING),
        rack: raw.rack.unwrap_or(DEFAULT_RACK),
        whole_segments: raw.whole_segments.unwrap_or(DEFAULT_WHOLE_SEGMENTS),
    })
}
