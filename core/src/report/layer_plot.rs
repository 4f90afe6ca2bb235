//! Figures by layer as line plots, one line per tensor kind (the name without its
//! `blk.N.` prefix: `attn_q.weight`, `ffn_down.weight`, …), as inline SVG (no script, no
//! external reference): θ by layer of a model's report, with a band of ± σ_θ when it was
//! measured with σ (§7), and dθ = θ(B) − θ(A) by layer of a compare report. The browser
//! app and the static pages ([`super::html`], [`super::render_compare`]) draw these same
//! ones. Only tensors with a layer and a finite figure are drawn; the figures are the
//! report's, unchanged.

use super::page::escape;
use super::ModelReport;
use crate::compare::CompareReport;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;

/// The drawing's size in SVG units (it scales to its container).
const WIDTH: f64 = 660.0;
const HEIGHT: f64 = 280.0;
/// Room for the y axis' labels, the x axis' labels, and the legend on the right.
const LEFT: f64 = 46.0;
const BOTTOM: f64 = 30.0;
const TOP: f64 = 12.0;
const LEGEND: f64 = 190.0;

/// The lines' colours, one per kind in order of first appearance (then again).
const PALETTE: [&str; 10] =
    ["#4a78b5", "#d0652d", "#3f9a5a", "#b3407a", "#7b5bb6", "#9a7b1e", "#2e96a6", "#c2413b", "#5b6673", "#8aa33c"];

/// One point: the tensor's name, its layer, the figure, and the band's half-width.
struct Point<'a> {
    name: &'a str,
    layer: u32,
    y: f64,
    band: Option<f64>,
}

/// A tensor's kind: its name after the `.{layer}.` that names its layer (`blk.3.attn_q.weight`
/// is `attn_q.weight`); the whole name when that is not in it.
pub fn kind_of(name: &str, layer: u32) -> &str {
    let mark = alloc::format!(".{layer}.");
    name.find(&mark).map_or(name, |at| &name[at + mark.len()..])
}

/// θ by layer of `m`, one line per kind, with a band of ± σ_θ where the tensors have σ;
/// an empty string when no tensor with a layer has a θ.
pub fn theta_by_layer_svg(m: &ModelReport) -> String {
    let pts: Vec<Point> = (m.tensors.iter())
        .filter_map(|t| Some(Point { name: &t.name, layer: t.layer?, y: t.theta?, band: t.sigma }))
        .collect();
    let label = "θ by layer, one line per tensor kind";
    plot(&pts, "theta-by-layer", label, "θ", Some((0.0, 90.0)))
}

/// dθ = θ(B) − θ(A) by layer of `r`, one line per kind, around a line at 0; an empty
/// string when no pair with a layer has a dθ.
pub fn d_theta_by_layer_svg(r: &CompareReport) -> String {
    let pts: Vec<Point> = (r.pairs.iter())
        .filter_map(|p| Some(Point { name: &p.name, layer: p.layer?, y: p.d_theta?, band: None }))
        .collect();
    let label = "dθ = θ(B) − θ(A) by layer, one line per tensor kind";
    plot(&pts, "d-theta-by-layer", label, "dθ", None)
}

/// The plot of `pts` grouped by kind. With `bounds` (θ's 0° to 90°), the y axis stays
/// within them (a band is cut at them); without, the y range holds 0 and a line marks it.
fn plot(pts: &[Point], class: &str, label: &str, axis: &str, bounds: Option<(f64, f64)>) -> String {
    let zero = bounds.is_none();
    let pts: Vec<&Point> = pts.iter().filter(|p| p.y.is_finite()).collect();
    if pts.is_empty() {
        return String::new();
    }
    // The kinds, in order of first appearance, each with its points in layer order.
    let mut kinds: Vec<(&str, Vec<&Point>)> = Vec::new();
    for &p in &pts {
        let k = kind_of(p.name, p.layer);
        match kinds.iter_mut().find(|(x, _)| *x == k) {
            Some((_, v)) => v.push(p),
            None => kinds.push((k, alloc::vec![p])),
        }
    }
    for (_, v) in &mut kinds {
        v.sort_by_key(|p| p.layer);
    }
    let band = |p: &Point| p.band.filter(|s| s.is_finite() && *s >= 0.0).unwrap_or(0.0);
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for p in &pts {
        lo = lo.min(p.y - band(p));
        hi = hi.max(p.y + band(p));
    }
    if zero {
        (lo, hi) = (lo.min(0.0), hi.max(0.0));
    }
    let pad = ((hi - lo) * 0.05).max(1e-3);
    let (mut lo, mut hi) = (lo - pad, hi + pad);
    if let Some((a, b)) = bounds.filter(|&(a, b)| lo.max(a) < hi.min(b)) {
        (lo, hi) = (lo.max(a), hi.min(b));
    }
    let (l0, l1) = pts.iter().fold((u32::MAX, 0), |(a, b), p| (a.min(p.layer), b.max(p.layer)));
    let plot_w = WIDTH - LEFT - LEGEND;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let x = |l: u32| LEFT + if l1 > l0 { plot_w * f64::from(l - l0) / f64::from(l1 - l0) } else { plot_w / 2.0 };
    let y = |v: f64| TOP + plot_h * (hi - v.clamp(lo, hi)) / (hi - lo);
    let mut out = String::with_capacity(1024 + pts.len() * 200);
    let _ = write!(
        out,
        "<svg class=\"{class}\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" width=\"100%\" role=\"img\" aria-label=\"{label}\">\
         <rect x=\"{LEFT}\" y=\"{TOP}\" width=\"{plot_w}\" height=\"{plot_h}\" fill=\"#fff\" stroke=\"#d9dde2\"/>"
    );
    // Digits enough to tell the axis' ends apart on a small range (dθ is often < 0.1°).
    let d = if hi - lo < 2.0 { 3 } else { 1 };
    if zero {
        let zy = y(0.0) + 4.0;
        let _ = write!(out, r#"<text x="{:.1}" y="{zy:.1}" font-size="11" text-anchor="end">0°</text>"#, LEFT - 4.0);
        let _ = write!(
            out,
            "<line class=\"zero\" x1=\"{LEFT}\" y1=\"{0:.2}\" x2=\"{1:.2}\" y2=\"{0:.2}\" stroke=\"#9aa5b1\" stroke-dasharray=\"4 3\"/>",
            y(0.0),
            LEFT + plot_w
        );
    }
    for (k, (kind, v)) in kinds.iter().enumerate() {
        let colour = PALETTE[k % PALETTE.len()];
        let kind = escape(kind);
        let _ = write!(out, "<g class=\"series\" data-kind=\"{kind}\">");
        if v.iter().any(|p| band(p) > 0.0) {
            // Along the upper edge, back along the lower one; a lone point's band is a bar.
            let w = if v.len() == 1 { 3.0 } else { 0.0 };
            out.push_str("<polygon class=\"band\" points=\"");
            for (k, p) in v.iter().enumerate() {
                let dx = if k == 0 { -w } else { 0.0 };
                let _ = write!(out, "{:.2},{:.2} ", x(p.layer) + dx, y(p.y + band(p)));
                if w > 0.0 {
                    let _ = write!(out, "{:.2},{:.2} ", x(p.layer) + w, y(p.y + band(p)));
                    let _ = write!(out, "{:.2},{:.2} ", x(p.layer) + w, y(p.y - band(p)));
                }
            }
            for (k, p) in v.iter().enumerate().rev() {
                let dx = if k == 0 { -w } else { 0.0 };
                let _ = write!(out, "{:.2},{:.2} ", x(p.layer) + dx, y(p.y - band(p)));
            }
            let _ = write!(out, "\" fill=\"{colour}\" fill-opacity=\"0.18\" stroke=\"none\"/>");
        }
        if v.len() > 1 {
            out.push_str("<polyline class=\"line\" points=\"");
            for p in v.iter() {
                let _ = write!(out, "{:.2},{:.2} ", x(p.layer), y(p.y));
            }
            let _ = write!(out, "\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.5\"/>");
        }
        for p in v.iter() {
            let name = escape(p.name);
            let sigma = match p.band {
                Some(s) if band(p) > 0.0 => alloc::format!(" ± {s:.3}°"),
                _ => String::new(),
            };
            let _ = write!(
                out,
                "<circle cx=\"{:.2}\" cy=\"{:.2}\" r=\"2.5\" fill=\"{colour}\" data-name=\"{name}\">\
                 <title>{name}: layer {}, {axis} {:.3}°{sigma}</title></circle>",
                x(p.layer),
                y(p.y),
                p.layer,
                p.y
            );
        }
        let ly = TOP + 6.0 + 15.0 * k as f64;
        let lx = WIDTH - LEGEND + 10.0;
        let _ = write!(
            out,
            "<line x1=\"{lx}\" y1=\"{ly:.1}\" x2=\"{:.1}\" y2=\"{ly:.1}\" stroke=\"{colour}\" stroke-width=\"3\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\">{kind}</text></g>",
            lx + 16.0,
            lx + 20.0,
            ly + 4.0
        );
    }
    let _ = write!(
        out,
        "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"end\">{hi:.d$}°</text>\
         <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"end\">{lo:.d$}°</text>\
         <text x=\"{LEFT}\" y=\"{:.1}\" font-size=\"11\">{l0}</text>\
         <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"end\">{l1}</text>\
         <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"middle\">layer</text>\
         <text x=\"12\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"middle\" transform=\"rotate(-90 12 {:.1})\">{axis}</text></svg>",
        LEFT - 4.0,
        TOP + 10.0,
        LEFT - 4.0,
        TOP + plot_h,
        HEIGHT - BOTTOM + 14.0,
        LEFT + plot_w,
        HEIGHT - BOTTOM + 14.0,
        LEFT + plot_w / 2.0,
        HEIGHT - 4.0,
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0,
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::{pair, Figures, PairReport, Side};
    use crate::model::{Model, TensorEntry};
    use crate::report::TensorReport;
    use crate::zmeasure::Measurement;
    use crate::GgmlType;
    use alloc::format;
    use alloc::vec;

    fn measured(theta: f64) -> Measurement {
        Measurement {
            theta,
            entropy: Some(0.9),
            kurtosis: Some(1.5),
            cv: Some(0.2),
            degenerate: false,
            sampled: 4,
            dropped: 0,
        }
    }

    fn model(names: &[(&str, f64)], draws: Option<&[f64; 8]>) -> ModelReport {
        let rows = (names.iter())
            .map(|(n, t)| TensorReport::from_parts(n, GgmlType::F32, &[4], 16, Some(&measured(*t))).with_draws(draws))
            .collect();
        ModelReport::from_parts("m.gguf", Some("llama"), None, 50, rows)
    }

    /// The `points` attribute of the first element of `class` in `svg`, as (x, y) pairs.
    fn points(svg: &str, class: &str) -> Vec<(f64, f64)> {
        let at = svg.find(&format!("class=\"{class}\" points=\"")).unwrap();
        let rest = &svg[at..];
        let open = rest.find("points=\"").unwrap() + 8;
        let close = rest[open..].find('"').unwrap();
        (rest[open..open + close].split_whitespace())
            .map(|p| {
                let (a, b) = p.split_once(',').unwrap();
                (a.parse().unwrap(), b.parse().unwrap())
            })
            .collect()
    }

    #[test]
    fn a_kind_is_the_name_after_its_layer() {
        assert_eq!(kind_of("blk.3.attn_q.weight", 3), "attn_q.weight");
        assert_eq!(kind_of("blk.13.ffn_up.weight", 13), "ffn_up.weight");
        assert_eq!(kind_of("model.layers.1.mlp.weight", 1), "mlp.weight");
        assert_eq!(kind_of("blk.1.a1.1.weight", 1), "a1.1.weight");
        assert_eq!(kind_of("odd1name", 1), "odd1name");
    }

    #[test]
    fn one_line_per_kind_in_layer_order_higher_theta_higher_up() {
        let m = model(
            &[
                ("token_embd.weight", 10.0),
                ("blk.1.attn_q.weight", 30.0),
                ("blk.0.attn_q.weight", 20.0),
                ("blk.0.ffn_up.weight", 40.0),
                ("blk.1.ffn_up.weight", 50.0),
                ("blk.2.ffn_up.weight", 45.0),
            ],
            None,
        );
        let svg = theta_by_layer_svg(&m);
        assert!(svg.starts_with("<svg class=\"theta-by-layer\"") && svg.ends_with("</svg>"));
        assert_eq!(svg.matches("<g class=\"series\"").count(), 2);
        assert!(svg.contains("data-kind=\"attn_q.weight\"") && svg.contains("data-kind=\"ffn_up.weight\""));
        // The embedding has no layer: not drawn.
        assert!(!svg.contains("token_embd"));
        assert_eq!(svg.matches("<circle").count(), 5);
        assert!(!svg.contains("class=\"band\""), "no σ, no band");
        // attn_q: layer 0 left of layer 1, θ 20 below θ 30 (SVG's y grows downwards).
        let q = points(&svg, "line");
        assert_eq!(q.len(), 2);
        assert!(q[0].0 < q[1].0 && q[0].1 > q[1].1);
        // Axes: the layers 0 and 2 at the ends, a θ label.
        assert!(svg.contains(">0</text>") && svg.contains(">2</text>") && svg.contains(">θ</text>"));
    }

    #[test]
    fn sigma_draws_a_band_around_the_line() {
        let draws = [40.0, 42.5, 40.0, 42.5, 40.0, 42.5, 40.0, 42.5];
        let m = model(&[("blk.0.attn_q.weight", 41.25), ("blk.1.attn_q.weight", 41.25)], Some(&draws));
        let svg = theta_by_layer_svg(&m);
        assert_eq!(svg.matches("class=\"band\"").count(), 1);
        let band = points(&svg, "band");
        let line = points(&svg, "line");
        assert_eq!(band.len(), 4);
        // The band's upper edge lies above the line, its lower edge below, by the same σ.
        assert!(band[0].1 < line[0].1 && band[3].1 > line[0].1);
        assert!(((line[0].1 - band[0].1) - (band[3].1 - line[0].1)).abs() < 0.02);
        assert!(svg.contains("± 1.250°"));
        // θ's axis stays within 0° to 90°: a band reaching past 90° is cut there.
        let draws = [88.0, 92.0, 88.0, 92.0, 88.0, 92.0, 88.0, 92.0];
        let m = model(&[("blk.0.attn_q.weight", 90.0), ("blk.1.attn_q.weight", 89.0)], Some(&draws));
        let svg = theta_by_layer_svg(&m);
        assert!(svg.contains(">90.0°</text>"));
        assert!(points(&svg, "band").iter().all(|p| p.1 >= TOP - 1e-9));
    }

    #[test]
    fn names_are_escaped() {
        let m = model(&[("blk.0.<b>\"x\".weight", 20.0), ("blk.1.<b>\"x\".weight", 30.0)], None);
        let svg = theta_by_layer_svg(&m);
        assert!(!svg.contains("<b>") && svg.contains("&lt;b&gt;&quot;x&quot;.weight"));
    }

    #[test]
    fn nothing_to_draw_is_an_empty_string() {
        assert_eq!(theta_by_layer_svg(&model(&[("token_embd.weight", 10.0)], None)), "");
    }

    fn entry(name: &str) -> TensorEntry {
        TensorEntry {
            name: name.into(),
            ty: GgmlType::F32,
            dims: vec![4],
            n_elements: 4,
            n_bytes: 16,
            file: 0,
            offset: 0,
        }
    }

    #[test]
    fn d_theta_lines_stand_around_zero() {
        let names = ["blk.0.ffn_up.weight", "blk.1.ffn_up.weight", "output.weight"];
        let a = Model { version: 3, kvs: Vec::new(), tensors: names.iter().map(|n| entry(n)).collect() };
        let f = |ta: f64, tb: f64| Figures {
            cos: Some(0.99),
            rel_l2: Some(0.1),
            max_abs: 0.5,
            theta_a: ta,
            theta_b: tb,
            sampled: 4,
            dropped: 0,
        };
        let figs = [f(40.0, 41.0), f(40.0, 38.0), f(40.0, 45.0)];
        let pairs = (a.tensors.iter().zip(&figs)).map(|(t, g)| PairReport::new(t, t, false, Some(g), None)).collect();
        let r = CompareReport::new("test", Side::of("a", &a, 1), Side::of("b", &a, 1), pair(&a, &a), pairs);
        let svg = d_theta_by_layer_svg(&r);
        assert!(svg.starts_with("<svg class=\"d-theta-by-layer\""));
        assert_eq!(svg.matches("<circle").count(), 2, "output.weight has no layer");
        let zero = svg.find("class=\"zero\"").unwrap();
        let y0: f64 = svg[zero..].split("y1=\"").nth(1).unwrap().split('"').next().unwrap().parse().unwrap();
        let line = points(&svg, "line");
        // +1° above the zero line, −2° below it.
        assert!(line[0].1 < y0 && line[1].1 > y0);
        assert!(svg.contains("dθ 1.000°") && svg.contains("dθ -2.000°"));
        assert!(svg.contains(">0°</text>"), "the zero line is labelled");
    }
}
