//! The layer × expert θ heatmaps of a model's report (§6: "per model a layer × expert
//! view"), one per FFN kind (gate, up, down), computed here so every face draws the same
//! one; and their section of the static page, with the routers and shared experts listed
//! as such.

use super::page::escape;
use super::{cell_style, theta_legend, theta_rgb, ModelReport, THETA_SCALE};
use crate::anatomy::OrganKind;
use crate::zmeasure::experts::{slices_sampled, standings, ExpertTheta, Standing};
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt::Write;
use serde::Serialize;

/// Per-expert θ of one FFN kind's expert tensors, by layer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExpertHeatmap {
    /// The kind: the part of the name between `ffn_` and `_exps` (`gate`, `up`, `down`).
    pub kind: String,
    /// The layers with such a tensor, ascending.
    pub layers: Vec<u32>,
    /// The most experts of any of them (the columns).
    pub experts: u64,
    /// `cells[row * experts + e]`: expert e of that layer's tensor; `None` past its count.
    pub cells: Vec<Option<ExpertTheta>>,
    /// As `cells`: how a display marks each expert ([`Standing`]: an outlier only beyond
    /// the noise, never a copy).
    pub standings: Vec<Standing>,
}

/// The FFN kind of an expert tensor's name: `blk.3.ffn_gate_exps.weight` → `gate`.
fn kind_of(name: &str) -> String {
    let after = name.find("ffn_").map_or(name, |i| &name[i + 4..]);
    String::from(after.find("_exps").map_or("experts", |i| &after[..i]))
}

impl ExpertHeatmap {
    /// One heatmap per FFN kind present, gate, up and down first.
    pub fn of(m: &ModelReport) -> Vec<ExpertHeatmap> {
        // (rank of the kind, kind) → (layer, experts) of each tensor of that kind.
        type ByKind<'a> = BTreeMap<(u8, String), Vec<(u32, &'a [ExpertTheta], bool)>>;
        let mut by_kind = ByKind::new();
        for t in &m.tensors {
            let (Some(rows), Some(layer)) = (&t.experts, t.layer) else { continue };
            let kind = kind_of(&t.name);
            let rank = ["gate", "up", "down"].iter().position(|k| *k == kind).unwrap_or(3) as u8;
            let sampled = slices_sampled(t.n_elements, t.sampled, rows.len() as u64);
            by_kind.entry((rank, kind)).or_default().push((layer, rows, sampled));
        }
        by_kind
            .into_iter()
            .map(|((_, kind), mut rows)| {
                rows.sort_by_key(|r| r.0);
                rows.dedup_by_key(|r| r.0);
                let experts = rows.iter().map(|r| r.1.len() as u64).max().unwrap_or(0);
                let mut cells = vec![None; rows.len() * experts as usize];
                let mut marks = vec![Standing::Typical; cells.len()];
                for (i, (_, r, sampled)) in rows.iter().enumerate() {
                    for ((e, x), mark) in r.iter().enumerate().zip(standings(r, *sampled)) {
                        cells[i * experts as usize + e] = Some(x.clone());
                        marks[i * experts as usize + e] = mark;
                    }
                }
                let layers = rows.iter().map(|r| r.0).collect();
                ExpertHeatmap { kind, layers, experts, cells, standings: marks }
            })
            .collect()
    }

    /// Expert `e` of row `row`.
    pub fn cell(&self, row: usize, e: usize) -> Option<&ExpertTheta> {
        self.cells.get(row * self.experts as usize + e)?.as_ref()
    }

    /// How a display marks expert `e` of row `row`.
    pub fn standing(&self, row: usize, e: usize) -> Standing {
        self.standings.get(row * self.experts as usize + e).copied().unwrap_or(Standing::Typical)
    }

    /// A cell's outline (a CSS declaration list, leading `;`), its tooltip's words about
    /// the mark, and its text's suffix (`=k` for a copy of expert k): the static page and the
    /// app draw a cell alike.
    pub fn marks(&self, row: usize, e: usize) -> (&'static str, String, String) {
        let Some(c) = self.cell(row, e) else { return ("", String::new(), String::new()) };
        let (outline, words) = match self.standing(row, e) {
            Standing::Outlier => (";outline:2px solid currentColor;outline-offset:-2px", ", outlier beyond the noise"),
            Standing::Unconfirmed => {
                (";outline:2px dotted currentColor;outline-offset:-2px", ", over 3 MAD: noise not measured")
            }
            Standing::Typical | Standing::Copy | Standing::WithinNoise => ("", ""),
        };
        let dup = c.duplicate_of.map_or_else(String::new, |d| format!(", byte-identical to expert {d}"));
        (outline, format!("{words}{dup}"), c.duplicate_of.map_or_else(String::new, |d| format!("={d}")))
    }
}

/// The caption under the experts' heading, with the counts of `maps`: what a cell is, what
/// the outlines and `=k` mean and how many there are, and, when some outlier could not be
/// held against the noise, how to measure it.
pub fn caption(maps: &[ExpertHeatmap]) -> String {
    let all = || maps.iter().flat_map(|h| h.cells.iter().zip(&h.standings)).filter(|(c, _)| c.is_some());
    let n = all().count();
    let outliers = all().filter(|(_, s)| **s == Standing::Outlier).count();
    let unconfirmed = all().filter(|(_, s)| **s == Standing::Unconfirmed).count();
    let copies = all().filter(|(c, _)| c.as_ref().is_some_and(|c| c.duplicate_of.is_some())).count();
    let mut out = format!(
        "{n} experts, each measured as a tensor of its own (§6 of the Z-measure): one row per layer, one column per \
         expert. Outlined: an outlier, over 3 MAD from its tensor's median and beyond twice the sampling noise of its \
         θ, {outliers} of them; =k: byte-identical to expert k (never an outlier: the θ of identical bytes differ by \
         sampling alone), {copies} of them."
    );
    if unconfirmed > 0 {
        out.push_str(&format!(
            " Dotted: over 3 MAD, but measured on a sample without σ, so possibly noise, {unconfirmed} of them \
             (measure with --sigma to tell)."
        ));
    }
    out
}

/// The static page's experts section for `m`: a heatmap per FFN kind (outliers outlined,
/// duplicates marked `=k`), then the routers and shared experts. Empty when the report has
/// no per-expert θ.
pub fn html_section(m: &ModelReport) -> String {
    let maps = ExpertHeatmap::of(m);
    let mut out = String::new();
    if maps.is_empty() {
        return out;
    }
    let _ = write!(out, "<h3>θ per expert</h3><p class=\"mute\">{}</p>", escape(&caption(&maps)));
    let _ = write!(
        out,
        "<p class=\"mute legend-line\">{:.0}° <span class=\"legend\" style=\"background:{}\"></span> {:.0}° \
         <span class=\"mute\">(the fixed θ scale of the layer heatmap: gate, up and down compare)</span></p>",
        THETA_SCALE.0,
        theta_legend(),
        THETA_SCALE.1
    );
    for h in &maps {
        let _ = write!(
            out,
            "<h4>{} experts</h4><div class=\"hscroll\"><table class=\"heat experts\" data-kind=\"{}\"><thead><tr><th>layer</th>",
            escape(&h.kind),
            escape(&h.kind),
        );
        for e in 0..h.experts {
            let _ = write!(out, "<th>{e}</th>");
        }
        out.push_str("</tr></thead><tbody>");
        for (r, l) in h.layers.iter().enumerate() {
            let _ = write!(out, "<tr><td>{l}</td>");
            for e in 0..h.experts as usize {
                let Some(c) = h.cell(r, e) else {
                    out.push_str("<td></td>");
                    continue;
                };
                let sigma = c.sigma.map_or_else(String::new, |s| format!(" ± {s:.3}°"));
                let (outline, words, dup) = h.marks(r, e);
                let _ = write!(
                    out,
                    "<td style=\"{}{outline}\" title=\"layer {l} expert {e}: θ {:.3}°{sigma}{words}\" data-v=\"{}\">{:.1}{dup}</td>",
                    cell_style(theta_rgb(c.theta)),
                    c.theta,
                    c.theta,
                    c.theta,
                );
            }
            out.push_str("</tr>");
        }
        out.push_str("</tbody></table></div>");
    }
    let others: Vec<_> =
        m.tensors.iter().filter(|t| matches!(t.organ, Some(OrganKind::Router | OrganKind::SharedExpert))).collect();
    if !others.is_empty() {
        out.push_str("<h4>Routers and shared experts</h4><table class=\"routers\"><thead><tr><th>tensor</th><th>kind</th><th data-num>layer</th><th data-num>θ</th></tr></thead><tbody>");
        for t in others {
            let kind = if t.organ == Some(OrganKind::Router) { "router" } else { "shared expert" };
            let sigma = t.sigma.map_or_else(String::new, |s| format!(" ± {s:.3}"));
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{kind}</td><td class=\"n\">{}</td><td class=\"n\">{}{sigma}</td></tr>",
                escape(&t.name),
                t.layer.map_or_else(String::new, |l| format!("{l}")),
                t.theta.map_or_else(String::new, |x| format!("{x:.3}")),
            );
        }
        out.push_str("</tbody></table>");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::TensorReport;
    use crate::zmeasure::Measurement;
    use crate::GgmlType;

    fn row(name: &str, theta: f64, experts: Option<&[f64]>) -> TensorReport {
        let m = Measurement {
            theta,
            entropy: Some(0.5),
            kurtosis: Some(0.0),
            cv: Some(0.1),
            degenerate: false,
            sampled: 10,
            dropped: 0,
        };
        let mut t = TensorReport::from_parts(name, GgmlType::F32, &[4, 4, 2], 128, Some(&m));
        t.experts = experts.map(|x| {
            let ms: Vec<_> = x.iter().map(|&theta| (Measurement { theta, ..m }, None)).collect();
            let dup: Vec<_> = (0..x.len() as u64).map(|e| (e > 0 && x[e as usize] == x[0]).then_some(0)).collect();
            crate::zmeasure::experts::expert_rows(&ms, &dup, false)
        });
        t
    }

    #[test]
    fn one_map_per_kind_rows_per_layer_and_routers_listed() {
        let tensors = vec![
            row("blk.1.ffn_up_exps.weight", 40.0, Some(&[41.0, 42.0, 43.0])),
            row("blk.0.ffn_up_exps.weight", 40.0, Some(&[30.0, 30.0])),
            row("blk.0.ffn_down_exps.weight", 40.0, Some(&[20.0, 21.0])),
            row("blk.0.ffn_gate_exps.weight", 40.0, None),
            row("blk.0.ffn_gate_inp.weight", 12.5, None),
            row("blk.0.ffn_up_shexp.weight", 33.0, None),
        ];
        let m = ModelReport::from_parts("m", None, None, 0, tensors);
        let maps = ExpertHeatmap::of(&m);
        assert_eq!(maps.iter().map(|h| h.kind.as_str()).collect::<Vec<_>>(), ["up", "down"]);
        let up = &maps[0];
        assert_eq!((up.layers.clone(), up.experts), (vec![0, 1], 3));
        assert_eq!(up.cell(0, 1).unwrap().duplicate_of, Some(0));
        assert!(up.cell(0, 2).is_none());
        assert_eq!(up.cell(1, 2).unwrap().theta, 43.0);
        let html = html_section(&m);
        assert!(html.contains("data-kind=\"up\"") && html.contains("30.0=0"), "{html}");
        // The fixed θ scale, and every layer shown: no inner box that scrolls vertically.
        assert!(
            html.contains("0° <span class=\"legend\" style=\"background:linear-gradient(90deg,#440154 0%"),
            "{html}"
        );
        assert!(html.contains("90° <span") && !html.contains("class=\"scroll\""), "{html}");
        assert!(html.contains(&format!("style=\"{}\"", cell_style(theta_rgb(43.0)))), "{html}");
        assert!(html.contains("blk.0.ffn_gate_inp.weight</td><td>router"), "{html}");
        assert!(html.contains("blk.0.ffn_up_shexp.weight</td><td>shared expert"), "{html}");
        assert_eq!(kind_of("blk.0.ffn_gate_up_exps.weight"), "gate_up");
        let none = ModelReport::from_parts("m", None, None, 0, vec![row("blk.0.ffn_up.weight", 1.0, None)]);
        assert!(html_section(&none).is_empty());
    }

    #[test]
    fn copies_are_never_outlined_and_unmeasured_noise_is_dotted() {
        // Eight experts of 200 000 elements each, sampled: expert 1 copies expert 0, and
        // both lie far from the others' θ.
        let mut t = row("blk.0.ffn_up_exps.weight", 40.0, Some(&[80.0, 80.0, 40.0, 41.0, 40.5, 40.2, 39.8, 90.0]));
        t.n_elements = 8 * 200_000;
        t.sampled = 100_000;
        let m = ModelReport::from_parts("m", None, None, 0, vec![t.clone()]);
        let h = &ExpertHeatmap::of(&m)[0];
        assert!(h.cell(0, 0).unwrap().outlier && h.cell(0, 1).unwrap().outlier, "§6's figure is kept");
        assert_eq!((h.standing(0, 0), h.standing(0, 1)), (Standing::Copy, Standing::Copy), "expert 1 copies 0");
        assert!(!h.standing(0, 1).marked());
        assert_eq!(h.standing(0, 7), Standing::Unconfirmed);
        let (outline, words, dup) = h.marks(0, 1);
        assert_eq!((outline, words.as_str(), dup.as_str()), ("", ", byte-identical to expert 0", "=0"));
        assert!(h.marks(0, 7).0.contains("dotted"));
        let c = caption(core::slice::from_ref(h));
        assert!(c.starts_with("8 experts") && c.contains(", 0 of them;") && c.contains("1 of them"), "{c}");
        assert!(c.contains("Dotted") && c.contains("--sigma"), "{c}");
        // Measured whole (exact mode): the same figures make expert 7 an outlier, outlined.
        t.sampled = t.n_elements;
        let m = ModelReport::from_parts("m", None, None, 0, vec![t]);
        let h = &ExpertHeatmap::of(&m)[0];
        assert_eq!(h.standing(0, 7), Standing::Outlier);
        assert!(h.marks(0, 7).0.contains("solid"));
        assert!(!caption(core::slice::from_ref(h)).contains("Dotted"));
        assert!(html_section(&m).contains("outlier beyond the noise"));
    }
}
