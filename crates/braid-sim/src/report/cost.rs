//! The price of speed: mean FCT against the bytes sent for it, one point per sweep value, one line
//! per scheme. Swept over a link's `coding_budget` it shows what each millisecond saved costs in
//! bytes on a metered uplink; over anything else, what that parameter costs and gives.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::finite;
use super::format_sweep_value;
use super::plot::{Area, DrawResult, FONT, colour, draw_legend, legend_entry, marker, short};
use super::scheme_names;
use crate::results::SimReport;

/// One scheme's points: (bytes on the air per passenger byte, mean FCT, its CI half-width, sweep
/// value), in sweep-value order.
type Points = Vec<(f64, f64, f64, f64)>;

/// The points to draw, finite figures only.
pub(super) fn series(report: &SimReport) -> Vec<(&str, Points)> {
    scheme_names(report)
        .into_iter()
        .map(|scheme| {
            let mut pts: Points = report
                .results
                .iter()
                .filter(|r| r.scheme == scheme)
                .filter_map(|r| {
                    Some((
                        finite(r.overhead)?,
                        r.fct_mean_s.and_then(finite)?,
                        r.fct_ci95_s.and_then(finite).unwrap_or(0.0),
                        r.sweep_value?,
                    ))
                })
                .collect();
            pts.sort_by(|a, b| a.3.total_cmp(&b.3));
            (scheme, pts)
        })
        .filter(|(_, p)| !p.is_empty())
        .collect()
}

/// A sweep value as a point label: `inf` is "no bound".
fn point_label(v: f64) -> String {
    if v == f64::INFINITY { "no bound".to_string() } else { format_sweep_value(v) }
}

/// Draws mean FCT (y) against bytes sent per passenger byte (x), each point labelled with its
/// sweep value.
pub(super) fn fct_vs_bytes(root: &Area<'_>, report: &SimReport, title: &str, label: &str) -> DrawResult {
    let series = series(report);
    let pts = || series.iter().flat_map(|(_, p)| p.iter());
    let (x_min, x_max) = pts().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| (lo.min(p.0), hi.max(p.0)));
    let (x_lo, x_hi) = if x_max > x_min {
        let pad = 0.08 * (x_max - x_min);
        ((x_min - pad).max(0.0), x_max + pad)
    } else if x_min.is_finite() {
        ((x_min - 0.5).max(0.0), x_min + 0.5)
    } else {
        (0.0, 1.0)
    };
    let y_top = pts().map(|p| p.1 + p.2).fold(0.0, f64::max);
    let y_hi = if y_top > 0.0 { y_top * 1.1 } else { 1.0 };
    let mut chart = ChartBuilder::on(root)
        .caption(title, (FONT, 22))
        .margin(15)
        .x_label_area_size(50)
        .y_label_area_size(75)
        .build_cartesian_2d(x_lo..x_hi, 0.0..y_hi)?;
    chart
        .configure_mesh()
        .x_desc("bytes sent per passenger byte delivered (outer headers included)")
        .y_desc("mean FCT (s)")
        .x_label_formatter(&|v| short(*v))
        .y_label_formatter(&|v| short(*v))
        .max_light_lines(4)
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 16))
        .draw()?;
    for (i, (scheme, pts)) in series.iter().enumerate() {
        let style = colour(i).stroke_width(2);
        let line: Vec<(f64, f64)> = pts.iter().map(|p| (p.0, p.1)).collect();
        chart
            .draw_series(LineSeries::new(line.clone(), style))?
            .label(format!("{scheme} ({label} at each point)"))
            .legend(legend_entry(i));
        chart
            .draw_series(line.iter().map(|p| EmptyElement::at(*p) + Polygon::new(marker(i, 0), colour(i).filled())))?;
        chart.draw_series(
            pts.iter()
                .filter(|p| p.2 > 0.0)
                .map(|&(x, m, ci, _)| PathElement::new(vec![(x, (m - ci).max(0.0)), (x, m + ci)], style)),
        )?;
        chart.draw_series(pts.iter().map(|&(x, m, _, v)| {
            Text::new(
                point_label(v),
                (x, m),
                (FONT, 13).into_font().color(&colour(i)).pos(Pos::new(HPos::Left, VPos::Bottom)),
            )
        }))?;
    }
    draw_legend(&mut chart, SeriesLabelPosition::UpperRight)
}
