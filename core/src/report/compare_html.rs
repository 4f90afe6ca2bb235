//! A compare report (`docs/compare.md`) as one self-contained static HTML page, like the θ
//! report's ([`super::html`]): inline data, CSS, the 1 − cos heatmap, the θ scatter and dθ
//! by layer ([`CompareHeatmap`], [`theta_scatter_svg`], [`d_theta_by_layer_svg`], shared
//! with the browser app), a few lines of script for sorting and filtering, and a
//! Content-Security-Policy that forbids every network fetch. The browser app exports it and `organ diff --html` writes it.
//!
//! The full report is embedded as JSON (`<script type="application/json"
//! id="organ-report">`, read back by [`super::page::extract_json`]), so the page opens in
//! the app again; each pair row carries its exact figures in `data-*` attributes.

use super::page::{embeddable_json, escape, opt, SCRIPT, STYLE};
use super::{
    cell_style, d_theta_by_layer_svg, diff_color, diff_rgb, human_bytes, human_count, sci, theta_scatter_svg,
    CompareHeatmap, IDENTICAL_COLOR,
};
use crate::compare::{CompareReport, PairReport, Side};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::Write;

/// More CSS than the θ page's.
/// What every compare report says about sampling noise (Z-measure §7): both models are
/// read at the same positions, so dθ is not as noisy as each θ.
pub const SAME_POSITIONS: &str = "Compare v1 reads both models at the same sampled positions, which cancels most of \
     the sampling noise in dθ (the σ_θ of a single θ overstates it).";

const COMPARE_STYLE: &str = "
.heat.diff td{width:70px}.same{background:#dfe3e8;color:#5b6673}.cols{display:flex;flex-wrap:wrap;gap:32px;align-items:flex-start}
.scatterbox{width:380px}ul.warnings li{color:#8a4b00}td.yes{color:#5b6673}.sides td:first-child{font-weight:600}
";

/// A most changed pair's figures, as the most changed lists show them beside its name
/// (here and in the browser app): `cos 0.99900000 · rel_l2 1.00e-2`.
pub fn changed_figures(p: &PairReport) -> String {
    format!("cos {} · rel_l2 {}", opt(p.cos, 8), sci(p.rel_l2))
}

/// An exact figure for a `data-*` attribute (shortest round-trip form; empty for none).
fn exact(v: Option<f64>) -> String {
    v.map_or_else(String::new, |x| format!("{x}"))
}

fn side_row(out: &mut String, role: &str, s: &Side) {
    let _ = write!(
        out,
        "<tr><td>{role}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
        escape(&s.model),
        escape(s.architecture.as_deref().unwrap_or("?")),
        escape(s.name.as_deref().unwrap_or("?")),
        human_count(s.parameters),
        human_bytes(s.file_bytes),
        s.tensors
    );
}

fn pair_row(out: &mut String, p: &PairReport) {
    let shape: String = p.shape.iter().map(|d| format!("{d}")).collect::<Vec<_>>().join("×");
    let omc = p.cos.map(|c| 1.0 - c);
    let experts = p
        .experts
        .as_ref()
        .map_or_else(String::new, |e| format!("{} ({} identical)", e.len(), e.iter().filter(|x| x.identical).count()));
    let _ = write!(
        out,
        "<tr data-name=\"{name}\" data-group=\"{group}\" data-layer=\"{layer}\" data-identical=\"{}\" data-cos=\"{}\" data-rel-l2=\"{}\" data-max-abs=\"{}\" data-d-theta=\"{}\">\
         <td>{name}{b_name}</td><td>{group}</td><td class=\"n\">{layer}</td><td>{}</td><td>{}</td><td>{shape}</td><td{}>{}</td>\
         <td class=\"n\" data-v=\"{}\">{}</td><td class=\"n\" data-v=\"{}\">{}</td><td class=\"n\" data-v=\"{}\">{}</td>\
         <td class=\"n\" data-v=\"{}\">{}</td><td class=\"n\" data-v=\"{}\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{experts}</td></tr>",
        p.identical,
        exact(p.cos),
        exact(p.rel_l2),
        exact(p.max_abs),
        exact(p.d_theta),
        escape(&p.type_a),
        escape(&p.type_b),
        if p.identical { " class=\"yes\"" } else { "" },
        if p.identical { "identical" } else if p.measurable { "changed" } else { "changed (bytes only)" },
        exact(p.cos),
        opt(p.cos, 8),
        exact(omc),
        sci(omc),
        exact(p.rel_l2),
        sci(p.rel_l2),
        exact(p.max_abs),
        sci(p.max_abs),
        exact(p.d_theta),
        opt(p.d_theta, 4),
        opt(p.theta_a, 3),
        opt(p.theta_b, 3),
        p.dropped,
        name = escape(&p.name),
        b_name = p.name_b.as_ref().map_or_else(String::new, |n| format!(" <span class=\"mute\">· B {}</span>", escape(n))),
        group = p.group.name(),
        layer = p.layer.map_or_else(String::new, |l| format!("{l}")),
    );
}

/// What the metadata and the lining up of layers say, under the counts: the summary lines.
fn metadata_lines(out: &mut String, r: &CompareReport) {
    if let Some(m) = &r.metadata {
        let _ = write!(
            out,
            "<p id=\"metadata-line\" data-differ=\"{}\">{}</p>",
            m.counts.differ(),
            escape(&m.counts.line())
        );
    }
    if let Some(l) = &r.layers {
        let _ = write!(out, "<p id=\"layers-line\">{}</p>", escape(&l.line()));
    }
}

/// The metadata keys that differ: a row per key, A's value and B's as `organ inspect`
/// shows them.
fn metadata_table(out: &mut String, r: &CompareReport) {
    let Some(m) = &r.metadata else { return };
    let _ = write!(out, "<h2>Metadata</h2><p class=\"mute\">{}</p>", escape(&m.counts.line()));
    if m.counts.differ() == 0 {
        return;
    }
    out.push_str(
        "<div class=\"scroll\"><table class=\"metadata-diff\" id=\"metadata-diff\"><thead><tr><th>key</th><th></th><th>A</th><th>B</th></tr></thead><tbody>",
    );
    for (key, how, a, b) in m.rows() {
        let v = |v: Option<&crate::compare::meta::ValueShown>| v.map_or_else(String::new, |v| escape(&v.line()));
        let _ = write!(
            out,
            "<tr data-key=\"{k}\" data-change=\"{how}\"><td><code>{k}</code></td><td>{how}</td><td><code>{}</code></td><td><code>{}</code></td></tr>",
            v(a),
            v(b),
            k = escape(key),
            how = how.name(),
        );
    }
    out.push_str("</tbody></table></div>");
}

fn heatmap(out: &mut String, r: &CompareReport) {
    let h = CompareHeatmap::of(r);
    if h.layers.is_empty() {
        return;
    }
    let (lo, hi) = h.range;
    let mid = libm::sqrt(lo * hi);
    let _ = write!(
        out,
        "<div><h3>1 − cos by layer and group</h3><p class=\"mute\">{} <span class=\"legend\" style=\"background:linear-gradient(90deg,{},{},{})\"></span> {} \
         (log scale) · <span class=\"same\" style=\"padding:0 6px\">=</span> every pair byte-identical</p>\
         <table class=\"heat diff\" id=\"diff-heatmap\"><thead><tr><th>layer</th>",
        sci(Some(lo)),
        diff_color(lo, lo, hi),
        diff_color(mid, lo, hi),
        diff_color(hi, lo, hi),
        sci(Some(hi)),
    );
    for g in &h.groups {
        let _ = write!(out, "<th>{}</th>", g.name());
    }
    out.push_str("</tr></thead><tbody>");
    for (row, l) in h.layers.iter().enumerate() {
        let _ = write!(out, "<tr><td>{l}</td>");
        for col in 0..h.groups.len() {
            match h.cell(row, col) {
                None => out.push_str("<td></td>"),
                Some(c) if c.all_identical() => {
                    let _ = write!(
                        out,
                        "<td class=\"same\" style=\"background:{IDENTICAL_COLOR}\" data-v=\"0\" title=\"{} pairs, all identical\">=</td>",
                        c.pairs
                    );
                }
                Some(c) => {
                    let d = c.one_minus_cos;
                    let bg = d.map_or_else(|| String::from("background:#fff"), |d| cell_style(diff_rgb(d, lo, hi)));
                    let _ = write!(
                        out,
                        "<td style=\"{bg}\" data-v=\"{}\" title=\"{} pairs, {} identical, mean 1 − cos {}\">{}</td>",
                        exact(d),
                        c.pairs,
                        c.identical,
                        exact(d),
                        d.map_or_else(|| String::from("n/m"), |d| sci(Some(d))),
                    );
                }
            }
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table></div>");
}

fn name_list(out: &mut String, title: &str, class: &str, names: &[String]) {
    let _ = write!(out, "<h3>{title} ({})</h3>", names.len());
    if names.is_empty() {
        out.push_str("<p class=\"mute\">none</p>");
        return;
    }
    let _ = write!(out, "<ul class=\"{class}\">");
    for n in names {
        let _ = write!(out, "<li><code>{}</code></li>", escape(n));
    }
    out.push_str("</ul>");
}

/// The whole page for a compare report.
pub fn render_compare(r: &CompareReport) -> String {
    let mut out = String::with_capacity(8192 + r.pairs.len() * 700);
    let title = format!("organ compare: {} (A) vs {} (B)", r.a.model, r.b.model);
    let _ = write!(
        out,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>{t}</title><style>{STYLE}{COMPARE_STYLE}</style></head><body>\
         <header><h1>{t}</h1><div class=\"mute\">Compare {} · {} · A is the base, B the other · cos, rel_l2 and max_abs over the \
         Z-measure sample, dθ = θ(B) − θ(A) · a static page: it opens offline and fetches nothing</div>\
         <div class=\"mute\" id=\"same-positions\">{}</div></header><main class=\"compare\">",
        escape(&r.compare),
        escape(&r.generator),
        escape(SAME_POSITIONS),
        t = escape(&title),
    );
    out.push_str("<h2>Models</h2><table class=\"sides\"><thead><tr><th></th><th>file</th><th>architecture</th><th>name</th><th>parameters</th><th>size</th><th>tensors</th></tr></thead><tbody>");
    side_row(&mut out, "A (base)", &r.a);
    side_row(&mut out, "B (other)", &r.b);
    out.push_str("</tbody></table><h2>Counts</h2><div class=\"cards counts\">");
    for (k, label, v) in r.counts.labelled() {
        let _ = write!(out, "<div class=\"card\" data-count=\"{k}\">{label}<b>{v}</b></div>");
    }
    out.push_str("</div>");
    if !r.warnings.is_empty() {
        out.push_str("<ul class=\"warnings\">");
        for w in &r.warnings {
            let _ = write!(out, "<li>{}</li>", escape(w));
        }
        out.push_str("</ul>");
    }
    metadata_lines(&mut out, r);
    out.push_str("<div class=\"cols\"><div><h3>Groups</h3><table class=\"groups\"><thead><tr><th>group</th><th>pairs</th><th>identical</th>\
                  <th>cos mean</th><th>cos min</th><th>rel_l2 mean</th></tr></thead><tbody>");
    for g in &r.groups {
        let _ = write!(
            out,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            g.group.name(),
            g.count,
            g.identical,
            opt(g.cos_mean, 8),
            opt(g.cos_min, 8),
            sci(g.rel_l2_mean)
        );
    }
    out.push_str("</tbody></table><h3>Most changed</h3><ol class=\"most-changed\">");
    for p in r.most_changed_pairs() {
        let _ = write!(
            out,
            "<li data-name=\"{name}\" data-cos=\"{}\" data-rel-l2=\"{}\"><code>{name}</code> <span class=\"mute\">{}</span></li>",
            exact(p.cos),
            exact(p.rel_l2),
            changed_figures(p),
            name = escape(&p.name),
        );
    }
    out.push_str("</ol></div>");
    heatmap(&mut out, r);
    let _ = write!(out, "<div class=\"scatterbox\"><h3>θ(A) against θ(B)</h3>{}</div></div>", theta_scatter_svg(r));
    let plot = d_theta_by_layer_svg(r);
    if !plot.is_empty() {
        let _ = write!(out, "<h3>dθ by layer</h3><div class=\"layer-plot\" style=\"max-width:680px\">{plot}</div>");
    }
    out.push_str(
        "<h2>Pairs</h2><input class=\"filter\" placeholder=\"filter by name, group, type…\" data-table=\"pairs\">\
         <div class=\"scroll\"><table class=\"sortable pairs\" id=\"pairs\"><thead><tr><th data-key=\"name\">name</th>\
         <th data-key=\"group\">group</th><th data-num data-key=\"layer\">layer</th><th>type A</th><th>type B</th><th>shape</th>\
         <th data-key=\"identical\">bytes</th><th data-num data-key=\"cos\">cos</th><th data-num>1 − cos</th>\
         <th data-num data-key=\"rel_l2\">rel_l2</th><th data-num data-key=\"max_abs\">max_abs</th><th data-num data-key=\"d_theta\">dθ</th>\
         <th data-num data-key=\"theta_a\">θ(A)</th><th data-num data-key=\"theta_b\">θ(B)</th><th data-num>dropped</th><th>experts</th>\
         </tr></thead><tbody>",
    );
    for p in &r.pairs {
        pair_row(&mut out, p);
    }
    out.push_str("</tbody></table></div>");
    let with_experts: Vec<&PairReport> = r.pairs.iter().filter(|p| p.experts.is_some()).collect();
    if !with_experts.is_empty() {
        out.push_str(
            "<h3>Experts</h3><div class=\"scroll\"><table class=\"sortable experts\"><thead><tr><th>tensor</th><th data-num>expert</th><th>bytes</th>\
             <th data-num>cos</th><th data-num>rel_l2</th><th data-num>max_abs</th><th data-num>dθ</th><th data-num>θ(A)</th><th data-num>θ(B)</th></tr></thead><tbody>",
        );
        for p in with_experts {
            for e in p.experts.iter().flatten() {
                let _ = write!(
                    out,
                    "<tr><td>{}</td><td class=\"n\">{}</td><td>{}</td><td class=\"n\" data-v=\"{}\">{}</td><td class=\"n\" data-v=\"{}\">{}</td>\
                     <td class=\"n\" data-v=\"{}\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
                    escape(&p.name),
                    e.expert,
                    if e.identical { "identical" } else { "changed" },
                    exact(e.cos),
                    opt(e.cos, 8),
                    exact(e.rel_l2),
                    sci(e.rel_l2),
                    exact(e.max_abs),
                    sci(e.max_abs),
                    opt(e.d_theta, 4),
                    opt(e.theta_a, 4),
                    opt(e.theta_b, 4),
                );
            }
        }
        out.push_str("</tbody></table></div>");
    }
    out.push_str("<h2>Unmatched</h2><div class=\"cols\"><div>");
    name_list(&mut out, "Only in A", "only-in-a", &r.only_in_a);
    out.push_str("</div><div>");
    name_list(&mut out, "Only in B", "only-in-b", &r.only_in_b);
    out.push_str("</div><div>");
    let _ = write!(out, "<h3>Shape mismatch ({})</h3>", r.shape_mismatch.len());
    if r.shape_mismatch.is_empty() {
        out.push_str("<p class=\"mute\">none</p>");
    } else {
        out.push_str(
            "<table class=\"shape-mismatch\"><thead><tr><th>name</th><th>A</th><th>B</th></tr></thead><tbody>",
        );
        for s in &r.shape_mismatch {
            let dims = |d: &[u64]| d.iter().map(|x| format!("{x}")).collect::<Vec<_>>().join("×");
            let _ = write!(out, "<tr><td>{}</td><td>{}</td><td>{}</td></tr>", escape(&s.name), dims(&s.a), dims(&s.b));
        }
        out.push_str("</tbody></table>");
    }
    out.push_str("</div></div>");
    metadata_table(&mut out, r);
    let _ = writeln!(
        out,
        "</main><script type=\"application/json\" id=\"organ-report\">{}</script><script>{SCRIPT}</script></body></html>",
        embeddable_json(r)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::{pair, CompareReport, ExpertPair, Figures};
    use crate::model::Model;
    use crate::report::html::extract_json;
    use alloc::vec;

    use crate::model::f32_entry as entry;

    fn report(hostile: &str) -> CompareReport {
        let a = Model {
            version: 3,
            kvs: Vec::new(),
            tensors: vec![entry(hostile, &[4]), entry("blk.0.ffn_up_exps.weight", &[4, 2, 2]), entry("gone", &[1])],
        };
        let b = Model {
            version: 3,
            kvs: Vec::new(),
            tensors: vec![entry(hostile, &[4]), entry("blk.0.ffn_up_exps.weight", &[4, 2, 2]), entry("new<b>", &[1])],
        };
        let f = Figures {
            cos: Some(0.999),
            rel_l2: Some(0.01),
            max_abs: 0.5,
            theta_a: 40.0,
            theta_b: 41.5,
            sampled: 4,
            dropped: 0,
        };
        let same = Figures { cos: Some(1.0), rel_l2: Some(0.0), max_abs: 0.0, ..f };
        let experts = vec![ExpertPair::new(0, true, Some(&same)), ExpertPair::new(1, false, Some(&f))];
        let pairs = vec![
            PairReport::new(&a.tensors[0], &b.tensors[0], false, Some(&f), None),
            PairReport::new(&a.tensors[1], &b.tensors[1], false, Some(&f), Some(experts)),
        ];
        CompareReport::new("test", Side::of("a</script>.gguf", &a, 10), Side::of("b.gguf", &b, 10), pair(&a, &b), pairs)
    }

    #[test]
    fn the_page_embeds_the_report_escapes_names_and_fetches_nothing() {
        let r = report("blk.0.attn_q</script><script>alert(1)</script>");
        let page = render_compare(&r);
        assert!(!page.contains("<script>alert") && !page.contains("a</script>.gguf"));
        assert!(page.contains("new&lt;b&gt;"));
        let json = extract_json(&page).unwrap();
        assert!(!json.contains('<'));
        let back: CompareReport = serde_json::from_str(json).unwrap();
        assert_eq!(back, r);
        assert!(page.contains("default-src 'none'"));
        for needle in ["src=", "href=", "url(", "@import"] {
            assert!(!page.contains(needle), "{needle}");
        }
        assert_eq!(page.matches("data-cos=\"0.999\"").count(), 4, "two pair rows, two most changed");
        assert!(page.contains("id=\"diff-heatmap\"") && page.contains("<svg class=\"scatter\""));
        assert_eq!(page.matches("<circle class=\"pt").count(), 2);
        assert!(page.contains("data-count=\"only_in_a\">only in A<b>1</b>"));
        assert!(page.contains("<h3>Experts</h3>"));
        // The most changed list names each pair with its cos and rel_l2; dθ by layer.
        assert_eq!(page.matches("<li data-name=").count(), 2);
        assert_eq!(page.matches("cos 0.99900000 · rel_l2 1.0e-2</span></li>").count(), 2);
        assert!(page.contains("<h3>dθ by layer</h3>") && page.contains("<svg class=\"d-theta-by-layer\""));
    }
}
