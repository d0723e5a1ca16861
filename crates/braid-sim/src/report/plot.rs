//! Plots for `--out DIR` (docs/design.md 6): FCT CDF, FCT vs the swept parameter, per-link throughput over
//! time. plotters draws SVG; resvg rasterises that same SVG into PNG, so both files show the same figure
//! and no bitmap font stack is needed (PNG text uses the system fonts, and is simply absent without any).

use std::io;
use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::element::ComposedElement;
use plotters::prelude::*;
use resvg::{tiny_skia, usvg};

use super::{finite, first_run, format_sweep_value, runs_of, scheme_names, sweep_points};
use crate::results::{SchemeResult, SimReport};

/// Why plots could not be written.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// Creating the output directory or writing a file failed.
    #[error("writing {}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// plotters could not lay out or draw a chart.
    #[error("drawing {file}: {message}")]
    Draw {
        /// The plot's file name (without extension).
        file: String,
        /// plotters' description of the failure.
        message: String,
    },
    /// The SVG that plotters produced could not be parsed for rasterising.
    #[error("rasterising {file}: {source}")]
    Svg {
        /// The plot's file name (without extension).
        file: String,
        /// usvg's parse error.
        #[source]
        source: usvg::Error,
    },
    /// The PNG could not be encoded.
    #[error("encoding {file}.png: {message}")]
    Png {
        /// The plot's file name (without extension).
        file: String,
        /// What went wrong.
        message: String,
    },
}

/// Writes the plots of `report` into `dir` (created if needed), each as `<name>.svg` and `<name>.png`:
///
/// - `fct_cdf`: the CDF of flow completion times per scheme, all flows of all runs pooled, log x axis;
///   incomplete flows count in the denominator, so a curve ends below 1 by the share that never
///   completed. When sweeping, one `fct_cdf_<value>` per sweep value. Not written if no flow started.
/// - `fct_vs_<label>` (sweeping only): mean FCT with 95 % CI error bars per scheme against the swept
///   value; likewise `goodput_vs_<label>` when the workload measured goodput.
/// - `fct_vs_bytes_<label>` (when sweeping with flows): mean FCT against bytes sent per passenger
///   byte, one point per sweep value, one line per scheme: what each millisecond saved costs.
/// - `throughput`: down throughput of each link over time, one panel per scheme: the mean over the
///   runs with a band from the lowest to the highest run, binned to at most 150 points per line
///   (`throughput_<value>` per sweep value when sweeping). Not written if no run has a link.
///
/// Returns the paths written, SVG then PNG for each plot.
pub fn write_plots(report: &SimReport, dir: &Path) -> Result<Vec<PathBuf>, PlotError> {
    std::fs::create_dir_all(dir).map_err(|source| PlotError::Io { path: dir.to_path_buf(), source })?;
    let raster = Rasteriser::new();
    let points = sweep_points(report);
    let sweeping = points.iter().any(Option::is_some);
    let label = report.sweep_label.clone().unwrap_or_else(|| "parameter".to_string());
    let suffix =
        |point: Option<f64>| point.map_or_else(String::new, |v| format!("_{}", file_part(&format_sweep_value(v))));
    let at = |point: Option<f64>| match point {
        Some(v) => format!(" ({label} = {})", format_sweep_value(v)),
        None => String::new(),
    };
    let mut written = Vec::new();

    if report.runs.iter().any(|r| !r.flows.is_empty()) {
        for &point in &points {
            let file = format!("fct_cdf{}", suffix(point));
            let title = format!("{}: FCT CDF{}", report.scenario, at(point));
            let svg = render(&file, (900, 560), |root| fct_cdf(root, report, point, &title))?;
            written.extend(save(dir, &file, &svg, &raster)?);
        }
    }

    if sweeping {
        let metrics: [(&str, &str, Metric); 2] = [
            ("fct", "mean FCT (s)", |r| (r.fct_mean_s, r.fct_ci95_s)),
            ("goodput", "mean goodput (kbit/s)", |r| (r.goodput_kbps, r.goodput_ci95_kbps)),
        ];
        for (name, axis, metric) in metrics {
            if report.results.iter().any(|r| r.sweep_value.is_some() && metric(r).0.and_then(finite).is_some()) {
                let file = format!("{name}_vs_{}", file_part(&label));
                let title = format!("{}: {axis} vs {label}, 95 % CI", report.scenario);
                let svg = render(&file, (900, 560), |root| versus(root, report, metric, &title, &label, axis))?;
                written.extend(save(dir, &file, &svg, &raster)?);
            }
        }
        if !super::cost::series(report).is_empty() {
            let file = format!("fct_vs_bytes_{}", file_part(&label));
            let title = format!("{}: mean FCT vs bytes sent, by {label}", report.scenario);
            let svg = render(&file, (900, 560), |root| super::cost::fct_vs_bytes(root, report, &title, &label))?;
            written.extend(save(dir, &file, &svg, &raster)?);
        }
    }

    if report.runs.iter().any(|r| !r.links.is_empty()) {
        let schemes = scheme_names(report);
        let height = 70 + 280 * schemes.len().max(1) as u32;
        for &point in &points {
            let file = format!("throughput{}", suffix(point));
            let title = format!("{}: down throughput per link{}", report.scenario, at(point));
            let svg = render(&file, (1000, height), |root| throughput(root, report, &schemes, point, &title))?;
            written.extend(save(dir, &file, &svg, &raster)?);
        }
    }
    Ok(written)
}

/// A figure with its mean and CI half-width, per aggregate.
type Metric = fn(&SchemeResult) -> (Option<f64>, Option<f64>);

pub(super) type DrawResult = Result<(), DrawingAreaErrorKind<io::Error>>;
pub(super) type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// Line colours: the Tableau 10 palette, distinct for the usual handful of schemes and links.
const COLOURS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

pub(super) fn colour(i: usize) -> RGBColor {
    COLOURS[i % COLOURS.len()]
}

/// The marker of scheme `i`, as a polygon around (0, 0) in pixels: a distinct shape per scheme
/// (octagon, triangle, square, diamond, triangle down, hourglass), so the lines stay apart in
/// print and in grey. Drawn with `EmptyElement::at(point) + Polygon::new(marker(i, 0), ..)`.
pub(super) fn marker(i: usize, dx: i32) -> Vec<(i32, i32)> {
    let shape: &[(i32, i32)] = match i % 6 {
        0 => &[(-2, -5), (2, -5), (5, -2), (5, 2), (2, 5), (-2, 5), (-5, 2), (-5, -2)],
        1 => &[(0, -6), (6, 4), (-6, 4)],
        2 => &[(-4, -4), (4, -4), (4, 4), (-4, 4)],
        3 => &[(0, -6), (6, 0), (0, 6), (-6, 0)],
        4 => &[(0, 6), (6, -4), (-6, -4)],
        _ => &[(-5, -5), (5, -5), (0, 0), (5, 5), (-5, 5), (0, 0)],
    };
    shape.iter().map(|&(x, y)| (x + dx, y)).collect()
}

/// A legend entry's drawing: a line and a marker.
pub(super) type LegendEntry<'b> =
    ComposedElement<(i32, i32), SVGBackend<'b>, PathElement<(i32, i32)>, Polygon<(i32, i32)>>;

/// A legend entry: the scheme's line with its marker on it.
pub(super) fn legend_entry<'b>(i: usize) -> impl Fn((i32, i32)) -> LegendEntry<'b> {
    move |(x, y)| {
        EmptyElement::at((x, y))
            + PathElement::new(vec![(0, 0), (20, 0)], colour(i).stroke_width(2))
            + Polygon::new(marker(i, 10), colour(i).filled())
    }
}

/// The legend box every figure uses.
pub(super) fn draw_legend<'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, SVGBackend<'a>, CT>,
    position: SeriesLabelPosition,
) -> DrawResult {
    chart
        .configure_series_labels()
        .position(position)
        .label_font((FONT, 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
}

/// Whether positive values from `lo` to `hi` span enough decades that a linear axis would flatten
/// the small ones (a factor of 20 or more).
pub(super) fn spans_decades(lo: f64, hi: f64) -> bool {
    lo > 0.0 && hi.is_finite() && hi / lo >= 20.0
}

/// Most points drawn for one CDF: more adds SVG bytes, not information, at this size.
const CDF_POINTS: usize = 2000;

/// Width of the legend column of the throughput panels, pixels.
const LEGEND_WIDTH: i32 = 110;

/// PNG pixels per SVG pixel, for figures up to [`PNG_MAX_PIXELS`].
const PNG_SCALE: f32 = 1.5;

/// Most pixels in a PNG: a tall figure (throughput panels of many schemes) is rasterised at a
/// smaller scale so that its file stays small; its SVG is there for print.
const PNG_MAX_PIXELS: f32 = 0.9e6;

pub(super) const FONT: &str = "sans-serif";

fn fct_cdf(root: &Area<'_>, report: &SimReport, point: Option<f64>, title: &str) -> DrawResult {
    // Per scheme: completed FCTs (sorted, positive and finite, as the axis is logarithmic) and flows started.
    let series: Vec<(&str, Vec<f64>, usize)> = scheme_names(report)
        .into_iter()
        .map(|scheme| {
            let runs = runs_of(report, scheme, point);
            let mut done: Vec<f64> = runs
                .iter()
                .flat_map(|r| r.flows.iter().filter_map(|f| f.fct_s))
                .filter(|x| x.is_finite() && *x > 0.0)
                .collect();
            done.sort_by(f64::total_cmp);
            (scheme, done, runs.iter().map(|r| r.flows.len()).sum())
        })
        .filter(|(_, _, total)| *total > 0)
        .collect();
    let all = series.iter().flat_map(|(_, done, _)| done.iter().copied());
    let (lo, hi) = decades(all.clone().reduce(f64::min), all.reduce(f64::max));
    // Enough label slots that plotters puts a tick at every integer multiple of each power of ten
    // (log paper); the formatter then labels only the 1-2-5 ones, or only powers over many decades.
    let span = (hi / lo).log10().round().max(1.0) as usize;
    let mantissas: &[f64] = if span <= 3 { &[1.0, 2.0, 5.0] } else { &[1.0] };

    let mut chart = ChartBuilder::on(root)
        .caption(title, (FONT, 22))
        .margin(15)
        .x_label_area_size(50)
        .y_label_area_size(65)
        // plotters starts the ticks at the power of ten *above* the start when log10(start) rounds just
        // below an integer (0.1): start a hair lower so the first decade gets its ticks.
        .build_cartesian_2d((lo * (1.0 - 1e-9)..hi).log_scale(), 0.0..1.0)?;
    chart
        .configure_mesh()
        .x_desc("flow completion time (s, log scale)")
        .y_desc("fraction of flows completed")
        .x_labels(10 * span + 1)
        // The ticks are the log grid already; minor lines between them would only be noise.
        .max_light_lines(0)
        .x_label_formatter(&|v| {
            if mantissas.iter().any(|m| (mantissa(*v) - m).abs() < 1e-6) { short(*v) } else { String::new() }
        })
        .y_label_formatter(&|v| format!("{v:.1}"))
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 16))
        .draw()?;
    for (i, (scheme, done, total)) in series.iter().enumerate() {
        let style = colour(i).stroke_width(2);
        let incomplete = total - done.len();
        let label =
            if incomplete > 0 { format!("{scheme} ({incomplete}/{total} incomplete)") } else { scheme.to_string() };
        chart
            .draw_series(LineSeries::new(cdf_points(done, *total, lo, hi), style))?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
    }
    if series.iter().all(|(_, done, _)| done.is_empty()) {
        chart.draw_series([Text::new("no completed flows", ((lo * hi).sqrt(), 0.5), (FONT, 20).into_font())])?;
    }
    draw_legend(&mut chart, SeriesLabelPosition::LowerRight)
}

/// Staircase of the empirical CDF of `done` (sorted) out of `total` flows, from `lo` to `hi`.
fn cdf_points(done: &[f64], total: usize, lo: f64, hi: f64) -> Vec<(f64, f64)> {
    let n = total.max(1) as f64;
    let mut points = vec![(lo, 0.0)];
    // With many flows, step at evenly spaced ranks only; the last rank is always kept.
    let ranks: Vec<usize> = if done.len() <= CDF_POINTS {
        (0..done.len()).collect()
    } else {
        (0..CDF_POINTS).map(|m| m * (done.len() - 1) / (CDF_POINTS - 1)).collect()
    };
    let mut below = 0.0;
    for k in ranks {
        points.push((done[k], below));
        below = (k + 1) as f64 / n;
        points.push((done[k], below));
    }
    points.push((hi, below));
    points
}

/// `v / 10^floor(log10 v)`, in [1, 10), tolerant of the rounding in `10^k * m`.
fn mantissa(v: f64) -> f64 {
    let m = v / 10f64.powf((v.log10() + 1e-9).floor());
    if m.is_finite() { m } else { 0.0 }
}

/// A log axis range covering `[min, max]` in whole decades, so the axis always has labelled ticks.
fn decades(min: Option<f64>, max: Option<f64>) -> (f64, f64) {
    match (min, max) {
        (Some(min), Some(max)) if min > 0.0 && max.is_finite() => {
            // The tolerance keeps 0.1 (whose log10 rounds just below -1) in its own decade.
            let lo = 10f64.powf((min.log10() + 1e-9).floor());
            let hi = 10f64.powf((max.log10() - 1e-9).ceil());
            if hi > lo { (lo, hi) } else { (lo, lo * 10.0) }
        }
        _ => (0.01, 10.0),
    }
}

/// `metric` against the sweep value, one line per scheme with CI error bars.
fn versus(root: &Area<'_>, report: &SimReport, metric: Metric, title: &str, label: &str, axis: &str) -> DrawResult {
    // Per scheme, (sweep value, mean, CI) sorted by value, finite means only.
    type Points = Vec<(f64, f64, f64)>;
    let series: Vec<(&str, Points)> = scheme_names(report)
        .into_iter()
        .map(|scheme| {
            let mut pts: Vec<(f64, f64, f64)> = report
                .results
                .iter()
                .filter(|r| r.scheme == scheme)
                .filter_map(|r| {
                    let (mean, ci) = metric(r);
                    Some((r.sweep_value.and_then(finite)?, mean.and_then(finite)?, ci.and_then(finite).unwrap_or(0.0)))
                })
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            (scheme, pts)
        })
        .collect();
    let pts = || series.iter().flat_map(|(_, p)| p.iter());
    let (x_min, x_max) = pts().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| (lo.min(p.0), hi.max(p.0)));
    let (m_min, m_max) = pts().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| (lo.min(p.1), hi.max(p.1)));
    // Log axes where the values span decades (loss rates 0.001-0.1, FCTs from 0.1 s to 30 s): on a
    // linear axis the small ones collapse onto each other.
    let log_x = spans_decades(x_min, x_max);
    let log_y = spans_decades(m_min, m_max);
    let (x_lo, x_hi) = if log_x {
        decades(Some(x_min), Some(x_max))
    } else if x_max > x_min {
        let pad = 0.06 * (x_max - x_min);
        (x_min - pad, x_max + pad)
    } else if x_min.is_finite() {
        let pad = if x_min == 0.0 { 1.0 } else { 0.5 * x_min.abs() };
        (x_min - pad, x_min + pad)
    } else {
        (0.0, 1.0)
    };
    let y_top = pts().map(|p| p.1 + p.2).fold(0.0, f64::max);
    // FCT and goodput are never negative: the axis starts at 0 and error bars are cut there (with two
    // runs, t = 12.7 makes wide intervals), unless a mean itself is negative.
    let (y_bottom, y_hi) = if log_y {
        let lowest = pts().map(|p| if p.1 - p.2 > 0.0 { p.1 - p.2 } else { p.1 }).fold(f64::INFINITY, f64::min);
        decades(Some(lowest), Some(y_top))
    } else {
        let y_bottom = pts().map(|p| p.1).fold(0.0, f64::min);
        (y_bottom, if y_top > y_bottom { y_top + 0.08 * (y_top - y_bottom) } else { y_bottom + 1.0 })
    };
    let x_desc = if log_x { format!("{label} (log scale)") } else { label.to_string() };
    let y_desc = if log_y { format!("{axis} (log scale)") } else { axis.to_string() };
    // Each scheme is shifted a little sideways so that error bars at the same value do not overlap:
    // by a share of the axis, in the axis' own terms.
    let shift = move |x: f64, share: f64| {
        if log_x { x * (x_hi / x_lo).powf(share) } else { x + share * (x_hi - x_lo) }
    };
    let count = series.len();
    macro_rules! draw {
        ($x:expr, $y:expr) => {{
            let mut chart = ChartBuilder::on(root)
                .caption(title, (FONT, 22))
                .margin(15)
                .x_label_area_size(50)
                .y_label_area_size(75)
                .build_cartesian_2d($x, $y)?;
            chart
                .configure_mesh()
                .x_desc(x_desc.as_str())
                .y_desc(y_desc.as_str())
                .x_label_formatter(&|v| short(*v))
                .y_label_formatter(&|v| short(*v))
                .max_light_lines(4)
                .label_style((FONT, 14))
                .axis_desc_style((FONT, 16))
                .draw()?;
            for (i, (scheme, pts)) in series.iter().enumerate() {
                let style = colour(i).stroke_width(2);
                let dodge = (i as f64 - (count as f64 - 1.0) / 2.0) * 0.008;
                let line: Vec<(f64, f64)> = pts.iter().map(|(x, m, _)| (shift(*x, dodge), *m)).collect();
                chart
                    .draw_series(LineSeries::new(line.clone(), style))?
                    .label(scheme.to_string())
                    .legend(legend_entry(i));
                chart.draw_series(
                    line.iter().map(|p| EmptyElement::at(*p) + Polygon::new(marker(i, 0), colour(i).filled())),
                )?;
                chart.draw_series(pts.iter().filter(|p| p.2 > 0.0).flat_map(|(x, m, ci)| {
                    let x = shift(*x, dodge);
                    let (low, high) = ((m - ci).max(y_bottom), m + ci);
                    let (left, right) = (shift(x, -0.006), shift(x, 0.006));
                    [
                        PathElement::new(vec![(x, low), (x, high)], style),
                        PathElement::new(vec![(left, low), (right, low)], style),
                        PathElement::new(vec![(left, high), (right, high)], style),
                    ]
                }))?;
            }
            draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)
        }};
    }
    match (log_x, log_y) {
        (false, false) => draw!(x_lo..x_hi, y_bottom..y_hi),
        (true, false) => draw!((x_lo..x_hi).log_scale(), y_bottom..y_hi),
        (false, true) => draw!(x_lo..x_hi, (y_bottom..y_hi).log_scale()),
        (true, true) => draw!((x_lo..x_hi).log_scale(), (y_bottom..y_hi).log_scale()),
    }
}

/// One panel per scheme: each link's down throughput per second of the scheme's first run.
fn throughput(root: &Area<'_>, report: &SimReport, schemes: &[&str], point: Option<f64>, title: &str) -> DrawResult {
    let root = root.titled(title, (FONT, 22))?;
    let runs: Vec<_> = schemes.iter().map(|s| first_run(report, s, point)).collect();
    // Per scheme and link: each second's mean over the runs and the lowest and highest run.
    let bands: Vec<Vec<Band>> = schemes.iter().map(|s| link_bands(&runs_of(report, s, point))).collect();
    // One y scale for all panels, so that schemes compare at a glance.
    let y_max =
        bands.iter().flatten().flat_map(|b| b.iter().map(|p| p.3)).filter(|v| v.is_finite()).fold(0.0, f64::max);
    let y_hi = if y_max > 0.0 { y_max * 1.08 } else { 1.0 };
    let seconds = bands.iter().flatten().flat_map(|b| b.last().map(|p| p.0 + 0.5)).fold(0.0, f64::max);
    let x_hi = seconds.max(1.0);

    for (((scheme, run), panel), bands) in
        schemes.iter().zip(&runs).zip(root.split_evenly((schemes.len().max(1), 1))).zip(&bands)
    {
        // The legend goes in a column to the right: throughput series fill their panel, so a legend
        // inside would hide data wherever it sat.
        let (panel, legend) = panel.split_horizontally(panel.dim_in_pixel().0 as i32 - LEGEND_WIDTH);
        let n = runs_of(report, scheme, point).len();
        let caption = match run {
            Some(_) if n > 1 => format!("{scheme} (mean of {n} runs, band: lowest to highest run)"),
            Some(r) => format!("{scheme} (run {}, seed {})", r.run, r.seed),
            None => format!("{scheme} (no run)"),
        };
        let mut chart = ChartBuilder::on(&panel)
            .caption(caption, (FONT, 18))
            .margin(10)
            .x_label_area_size(45)
            .y_label_area_size(75)
            .build_cartesian_2d(0.0..x_hi, 0.0..y_hi)?;
        chart
            .configure_mesh()
            .x_desc("time (s)")
            .y_desc("down throughput (kbit/s)")
            .x_label_formatter(&|v| short(*v))
            .y_label_formatter(&|v| short(*v))
            .max_light_lines(4)
            .label_style((FONT, 13))
            .axis_desc_style((FONT, 15))
            .draw()?;
        let links = run.map_or(&[][..], |r| &r.links[..]);
        for (i, (link, band)) in links.iter().zip(bands).enumerate() {
            let style = colour(i).stroke_width(2);
            if n > 1 {
                let mut outline: Vec<(f64, f64)> = band.iter().map(|p| (p.0, p.3)).collect();
                outline.extend(band.iter().rev().map(|p| (p.0, p.2)));
                chart.draw_series([Polygon::new(outline, colour(i).mix(0.2).filled())])?;
            }
            chart
                .draw_series(LineSeries::new(band.iter().map(|p| (p.0, p.1)), style))?
                .label(link.name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
        }
        if links.is_empty() {
            chart.draw_series([Text::new("no links", (x_hi / 2.0, y_hi / 2.0), (FONT, 18).into_font())])?;
        }
        for (i, link) in links.iter().enumerate() {
            let y = 50 + 22 * i as i32;
            legend.draw(&PathElement::new(vec![(4, y), (28, y)], colour(i).stroke_width(2)))?;
            legend.draw(&Text::new(link.name.clone(), (34, y - 7), (FONT, 14).into_font()))?;
        }
    }
    Ok(())
}

/// One link's throughput over time: (bin middle in s, mean, lowest, highest over the runs), kbit/s.
type Band = Vec<(f64, f64, f64, f64)>;

/// Most points per throughput line: seconds are averaged into bins beyond this, which keeps long
/// runs' figures small and readable (a 600 s run at one point per second drew 600 wiggles).
const THROUGHPUT_POINTS: usize = 150;

/// Per link (in the order of the first run's links), the down throughput per time bin across
/// `runs`: the mean and the lowest and highest run. Non-finite samples are left out.
fn link_bands(runs: &[&crate::results::RunResult]) -> Vec<Band> {
    let Some(first) = runs.iter().min_by_key(|r| r.run) else { return Vec::new() };
    first
        .links
        .iter()
        .enumerate()
        .map(|(li, _)| {
            let series: Vec<&[f64]> =
                runs.iter().filter_map(|r| r.links.get(li)).map(|l| &l.down_kbps_series[..]).collect();
            let seconds = series.iter().map(|s| s.len()).max().unwrap_or(0);
            let bin = seconds.div_ceil(THROUGHPUT_POINTS).max(1);
            (0..seconds.div_ceil(bin))
                .filter_map(|b| {
                    let range = b * bin..((b + 1) * bin).min(seconds);
                    // Each run's mean over the bin, then across runs.
                    let per_run: Vec<f64> = series
                        .iter()
                        .filter_map(|s| {
                            let v: Vec<f64> =
                                s.get(range.clone()).unwrap_or(&[]).iter().copied().filter(|v| v.is_finite()).collect();
                            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
                        })
                        .collect();
                    if per_run.is_empty() {
                        return None;
                    }
                    let mean = per_run.iter().sum::<f64>() / per_run.len() as f64;
                    let lo = per_run.iter().copied().fold(f64::INFINITY, f64::min);
                    let hi = per_run.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    Some(((range.start + range.end) as f64 / 2.0, mean, lo, hi))
                })
                .collect()
        })
        .collect()
}

/// A tick label: a few significant digits, no trailing zeros (`0.05`, `1500`, `0.3`).
pub(super) fn short(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return if v == 0.0 { "0".to_string() } else { format!("{v}") };
    }
    let magnitude = v.abs().log10().floor();
    let decimals = (4.0 - magnitude).clamp(0.0, 12.0) as usize;
    let text = format!("{v:.decimals$}");
    let text = if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.') } else { &text };
    if text == "-0" { "0".to_string() } else { text.to_string() }
}

/// `name` reduced to characters safe in a file name on every platform.
fn file_part(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') { c } else { '_' }).collect()
}

/// Draws one figure into an SVG string.
fn render(file: &str, size: (u32, u32), draw: impl FnOnce(&Area<'_>) -> DrawResult) -> Result<String, PlotError> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE)
            .and_then(|()| draw(&root))
            .and_then(|()| root.present())
            .map_err(|e| PlotError::Draw { file: file.to_string(), message: e.to_string() })?;
    }
    Ok(svg)
}

/// Writes `<file>.svg` and its rasterisation `<file>.png`.
fn save(dir: &Path, file: &str, svg: &str, raster: &Rasteriser) -> Result<[PathBuf; 2], PlotError> {
    let write = |path: PathBuf, bytes: &[u8]| {
        std::fs::write(&path, bytes).map(|()| path.clone()).map_err(|source| PlotError::Io { path, source })
    };
    let svg_path = write(dir.join(format!("{file}.svg")), svg.as_bytes())?;
    let png_path = write(dir.join(format!("{file}.png")), &raster.png(file, svg)?)?;
    Ok([svg_path, png_path])
}

/// SVG to PNG with the system fonts, loaded once per [`write_plots`].
struct Rasteriser {
    options: usvg::Options<'static>,
}

impl Rasteriser {
    fn new() -> Self {
        let mut options = usvg::Options::default();
        let fonts = options.fontdb_mut();
        fonts.load_system_fonts();
        // fontdb maps the generic families to "Arial" and "Times New Roman", which Linux systems rarely
        // have, and usvg falls back to the serif family: point both at a sans face that is installed so
        // the plotters text (font-family="sans-serif") renders. With no font at all, text is skipped.
        let installed: Vec<String> =
            fonts.faces().flat_map(|f| f.families.iter().map(|(name, _)| name.clone())).collect();
        let preferred = ["Arial", "DejaVu Sans", "Liberation Sans", "Noto Sans", "Helvetica", "FreeSans"];
        let family = preferred
            .iter()
            .find(|p| installed.iter().any(|name| name == *p))
            .map(|p| p.to_string())
            .or_else(|| installed.first().cloned());
        if let Some(family) = family {
            fonts.set_sans_serif_family(family.clone());
            fonts.set_serif_family(family);
        }
        Rasteriser { options }
    }

    fn png(&self, file: &str, svg: &str) -> Result<Vec<u8>, PlotError> {
        let tree = usvg::Tree::from_str(svg, &self.options)
            .map_err(|source| PlotError::Svg { file: file.to_string(), source })?;
        let png_error = |message: String| PlotError::Png { file: file.to_string(), message };
        let area = tree.size().width() * tree.size().height();
        let scale = PNG_SCALE.min((PNG_MAX_PIXELS / area.max(1.0)).sqrt());
        let size = tree
            .size()
            .to_int_size()
            .scale_by(scale)
            .ok_or_else(|| png_error(format!("cannot scale {:?} by {scale}", tree.size())))?;
        let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height())
            .ok_or_else(|| png_error(format!("no pixmap of {}x{}", size.width(), size.height())))?;
        resvg::render(&tree, tiny_skia::Transform::from_scale(scale, scale), &mut pixmap.as_mut());
        // The background is opaque white, so the alpha channel carries nothing: RGB, every row
        // filtered as suits it, compressed hard (the figures go into the repository's docs).
        let rgb: Vec<u8> = pixmap.data().chunks_exact(4).flat_map(|p| [p[0], p[1], p[2]]).collect();
        let mut out = Vec::new();
        let mut encoder = png::Encoder::new(&mut out, size.width(), size.height());
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        encoder.set_compression(png::Compression::Best);
        encoder.set_adaptive_filter(png::AdaptiveFilterType::Adaptive);
        let mut writer = encoder.write_header().map_err(|e| png_error(e.to_string()))?;
        writer.write_image_data(&rgb).map_err(|e| png_error(e.to_string()))?;
        writer.finish().map_err(|e| png_error(e.to_string()))?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;

    const PNG_SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n'];

    fn names(files: &[PathBuf]) -> Vec<String> {
        files.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect()
    }

    fn check_files(files: &[PathBuf]) {
        for path in files {
            let bytes = std::fs::read(path).unwrap();
            match path.extension().and_then(|e| e.to_str()) {
                Some("svg") => {
                    let text = String::from_utf8(bytes).unwrap();
                    assert!(text.starts_with("<svg") && text.trim_end().ends_with("</svg>"), "{}", path.display());
                    assert!(text.len() > 1000, "{} is nearly empty", path.display());
                }
                Some("png") => assert!(bytes.starts_with(&PNG_SIGNATURE) && bytes.len() > 1000, "{}", path.display()),
                _ => panic!("unexpected file {}", path.display()),
            }
        }
    }

    #[test]
    fn plots_write_svg_and_png() {
        let dir = fixture::temp_dir("plots");
        let files = write_plots(&fixture::report(false), &dir).unwrap();
        assert_eq!(names(&files), ["fct_cdf.svg", "fct_cdf.png", "throughput.svg", "throughput.png"]);
        check_files(&files);
        let cdf = std::fs::read_to_string(&files[0]).unwrap();
        for text in ["bus: FCT CDF", "flow completion time (s, log scale)", "none (1/8 incomplete)", "oec"] {
            assert!(cdf.contains(text), "{text} missing from the CDF");
        }
        let throughput = std::fs::read_to_string(&files[2]).unwrap();
        assert!(throughput.contains("down throughput (kbit/s)") && throughput.contains("wimax"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn sweep_plots_one_cdf_per_value_and_fct_vs_parameter() {
        let dir = fixture::temp_dir("plots-sweep");
        let files = write_plots(&fixture::report(true), &dir).unwrap();
        let names = names(&files);
        for name in ["fct_cdf_0.01", "fct_cdf_0.05", "fct_vs_loss", "throughput_0.01", "throughput_0.05"] {
            assert!(
                names.contains(&format!("{name}.svg")) && names.contains(&format!("{name}.png")),
                "{name}: {names:?}"
            );
        }
        assert!(names.contains(&"fct_vs_bytes_loss.svg".to_string()), "{names:?}");
        assert_eq!(names.len(), 12, "{names:?}");
        check_files(&files);
        let vs = std::fs::read_to_string(dir.join("fct_vs_loss.svg")).unwrap();
        assert!(vs.contains("mean FCT (s)") && vs.contains("95 % CI"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn plots_are_small_and_show_every_run() {
        let dir = fixture::temp_dir("plots-small");
        let report = fixture::report(true);
        let files = write_plots(&report, &dir).unwrap();
        for path in &files {
            let len = std::fs::metadata(path).unwrap().len();
            assert!(len < 300_000, "{} is {len} bytes", path.display());
        }
        let n = runs_of(&report, "oec", Some(fixture::SWEEP[0])).len();
        assert!(n > 1);
        let throughput = std::fs::read_to_string(dir.join("throughput_0.01.svg")).unwrap();
        assert!(throughput.contains(&format!("oec (mean of {n} runs, band: lowest to highest run)")), "{throughput}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn values_spanning_decades_get_a_log_axis() {
        assert!(spans_decades(0.001, 0.1) && !spans_decades(0.01, 0.05) && !spans_decades(0.0, 1.0));
        let linear = fixture::report(true);
        let svg = |report: &SimReport| {
            let metric: Metric = |r| (r.fct_mean_s, r.fct_ci95_s);
            render("v", (900, 560), |root| versus(root, report, metric, "t", "loss", "mean FCT (s)")).unwrap()
        };
        assert!(!svg(&linear).contains("log scale"));
        // Sweep values 0.0002 and 0.05 and means 250 times apart: both axes logarithmic.
        let mut wide = linear.clone();
        for r in &mut wide.results {
            if r.sweep_value == Some(fixture::SWEEP[0]) {
                r.sweep_value = Some(0.0002);
                r.fct_mean_s = r.fct_mean_s.map(|m| m / 250.0);
            }
        }
        let drawn = svg(&wide);
        assert!(drawn.contains("loss (log scale)") && drawn.contains("mean FCT (s) (log scale)"));
    }

    #[test]
    fn plots_survive_zero_completed_flows() {
        for sweep in [false, true] {
            let dir = fixture::temp_dir(&format!("plots-none-done-{sweep}"));
            let files = write_plots(&fixture::report_without_completed_flows(sweep), &dir).unwrap();
            let names = names(&files);
            assert!(
                names.iter().any(|n| n.starts_with("fct_cdf")) && names.iter().any(|n| n.starts_with("throughput"))
            );
            assert!(!names.iter().any(|n| n.starts_with("fct_vs")), "{names:?}");
            check_files(&files);
            let cdf = std::fs::read_to_string(&files[0]).unwrap();
            assert!(cdf.contains("no completed flows"));
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }

    #[test]
    fn plots_survive_empty_and_odd_reports() {
        let dir = fixture::temp_dir("plots-odd");
        let empty = SimReport { scenario: "x".into(), sweep_label: None, results: vec![], runs: vec![], wall_s: 0.0 };
        assert!(write_plots(&empty, &dir).unwrap().is_empty());

        // One run, NaN throughput, a scheme without links, a single sweep value, one FCT equal to all others.
        let mut report = fixture::report(true);
        report.runs.retain(|r| r.run == 0 && r.sweep_value == Some(fixture::SWEEP[0]));
        for run in &mut report.runs {
            for f in &mut run.flows {
                f.fct_s = f.fct_s.map(|_| 0.25);
            }
            if run.scheme == "rs" {
                run.links.clear();
            }
            for l in &mut run.links {
                l.down_kbps_series[3] = f64::NAN;
            }
        }
        fixture::rebuild(&mut report);
        report.results[0].fct_mean_s = Some(f64::NAN);
        let files = write_plots(&report, &dir).unwrap();
        assert_eq!(names(&files).len(), 8, "{:?}", names(&files));
        check_files(&files);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn png_renders_without_any_font() {
        // usvg's default options have an empty font database: text is dropped, the figure still renders.
        let raster = Rasteriser { options: usvg::Options::default() };
        let report = fixture::report(false);
        let svg = render("t", (400, 300), |root| fct_cdf(root, &report, None, "title")).unwrap();
        assert!(raster.png("t", &svg).unwrap().starts_with(&PNG_SIGNATURE));
    }

    #[test]
    fn helpers_format_and_bound() {
        assert_eq!(short(0.05), "0.05");
        assert_eq!(short(1500.0), "1500");
        assert_eq!(short(0.1 + 0.2), "0.3");
        assert_eq!(short(-0.0), "0");
        assert_eq!(decades(Some(0.2), Some(0.8)), (0.1, 1.0));
        assert_eq!(decades(Some(1.0), Some(1.0)), (1.0, 10.0));
        assert_eq!(decades(None, None), (0.01, 10.0));
        assert_eq!(file_part("link.wimax down/loss"), "link.wimax_down_loss");
        let steps = cdf_points(&[1.0, 2.0], 4, 0.1, 10.0);
        assert_eq!(steps, [(0.1, 0.0), (1.0, 0.0), (1.0, 0.25), (2.0, 0.25), (2.0, 0.5), (10.0, 0.5)]);
        assert_eq!(
            cdf_points(&(1..=10_000).map(f64::from).collect::<Vec<_>>(), 10_000, 0.1, 1e5).len(),
            2 * CDF_POINTS + 2
        );
    }
}
