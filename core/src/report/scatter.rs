//! θ(A) against θ(B) for every comparable pair of a compare report, as an inline SVG
//! (no script, no external reference): the same drawing in the browser app, its static
//! HTML export and `organ diff --html`. A pair on the diagonal kept its θ; identical pairs
//! are grey, changed ones coloured by 1 − cos on the heatmap's log scale.

use super::page::escape;
use super::{diff_color, CompareHeatmap, IDENTICAL_COLOR};
use crate::compare::CompareReport;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;

/// The drawing's side, in SVG units (it scales to its container).
const SIZE: f64 = 360.0;
/// Room for the axis labels.
const MARGIN: f64 = 34.0;

/// The scatter plot of `r` as an `<svg>` element; every point carries its pair's name in
/// `data-name` and a tooltip.
pub fn theta_scatter_svg(r: &CompareReport) -> String {
    let pts: Vec<(&str, f64, f64, bool, Option<f64>)> = r
        .pairs
        .iter()
        .filter_map(|p| Some((p.name.as_str(), p.theta_a?, p.theta_b?, p.identical, p.cos)))
        .filter(|p| p.1.is_finite() && p.2.is_finite())
        .collect();
    let all = pts.iter().flat_map(|p| [p.1, p.2]);
    let (mut lo, mut hi) = (all.clone().fold(f64::INFINITY, f64::min), all.fold(f64::NEG_INFINITY, f64::max));
    if lo.is_nan() || hi.is_nan() || lo > hi {
        (lo, hi) = (0.0, 90.0);
    }
    let pad = ((hi - lo) * 0.05).max(0.5);
    let (lo, hi) = ((lo - pad).max(0.0), (hi + pad).min(90.0));
    let span = (hi - lo).max(1e-9);
    let plot = SIZE - 2.0 * MARGIN;
    let x = |t: f64| MARGIN + plot * (t - lo) / span;
    let y = |t: f64| SIZE - MARGIN - plot * (t - lo) / span;
    let (dlo, dhi) = CompareHeatmap::of(r).range;
    let mut out = String::with_capacity(512 + pts.len() * 160);
    let _ = write!(
        out,
        "<svg class=\"scatter\" viewBox=\"0 0 {SIZE} {SIZE}\" width=\"100%\" role=\"img\" \
         aria-label=\"θ of A against θ of B, one point per comparable pair\">\
         <rect x=\"{MARGIN}\" y=\"{MARGIN}\" width=\"{plot}\" height=\"{plot}\" fill=\"#fff\" stroke=\"#d9dde2\"/>\
         <line x1=\"{:.2}\" y1=\"{:.2}\" x2=\"{:.2}\" y2=\"{:.2}\" stroke=\"#9aa5b1\" stroke-dasharray=\"4 3\"/>",
        x(lo),
        y(lo),
        x(hi),
        y(hi)
    );
    // Identical pairs first, so changed ones are drawn on top.
    for &(name, ta, tb, identical, cos) in pts.iter().filter(|p| p.3).chain(pts.iter().filter(|p| !p.3)) {
        let fill =
            if identical { String::from(IDENTICAL_COLOR) } else { diff_color(cos.map_or(0.0, |c| 1.0 - c), dlo, dhi) };
        let stroke = if identical { "#8b95a1" } else { "#6b2a20" };
        let name = escape(name);
        let _ = write!(
            out,
            "<circle class=\"pt{}\" cx=\"{:.2}\" cy=\"{:.2}\" r=\"3\" fill=\"{fill}\" stroke=\"{stroke}\" stroke-width=\"0.5\" \
             data-name=\"{name}\"><title>{name}: θ(A) {ta:.3}°, θ(B) {tb:.3}°{}</title></circle>",
            if identical { " same" } else { "" },
            x(ta),
            y(tb),
            if identical { " (identical)" } else { "" },
        );
    }
    let _ = write!(
        out,
        "<text x=\"{MARGIN}\" y=\"{:.0}\" font-size=\"11\">{lo:.1}°</text>\
         <text x=\"{:.0}\" y=\"{:.0}\" font-size=\"11\" text-anchor=\"end\">{hi:.1}°</text>\
         <text x=\"{:.0}\" y=\"{:.0}\" font-size=\"12\" text-anchor=\"middle\">θ(A), base</text>\
         <text x=\"12\" y=\"{:.0}\" font-size=\"12\" text-anchor=\"middle\" transform=\"rotate(-90 12 {:.0})\">θ(B), other</text>\
         <text x=\"{:.0}\" y=\"{:.0}\" font-size=\"11\" text-anchor=\"end\">{hi:.1}°</text></svg>",
        SIZE - MARGIN + 14.0,
        SIZE - MARGIN,
        SIZE - MARGIN + 14.0,
        SIZE / 2.0,
        SIZE - 6.0,
        SIZE / 2.0,
        SIZE / 2.0,
        MARGIN - 4.0,
        MARGIN + 10.0,
    );
    out
}
