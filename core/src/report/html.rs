//! A θ report as one self-contained static HTML page: inline data, CSS, charts (the
//! heatmap, θ by layer) and a few
//! lines of script for sorting and filtering; a Content-Security-Policy that forbids every
//! network fetch, so the page opens offline and can be shared as a file. The browser app
//! exports it and `organ measure --html` writes it: the same function for both.
//!
//! The full report is embedded as JSON (`<script type="application/json"
//! id="organ-report">`), so the page can be opened in the app again; each tensor row also
//! carries its exact θ in `data-theta`.

pub use super::compare_html::render_compare;
pub use super::page::{embeddable_json, escape, extract_json};
use super::page::{opt, SCRIPT, STYLE};
use super::{cell_style, hatch_style, human_bytes, human_count, ink, sigma_legend, sigma_rgb, theta_legend, theta_rgb};
use super::{theta_by_layer_svg, Heatmap, ModelReport, Report, Status, NOISY_STYLE, SIGMA_MARK, THETA_SCALE};
use alloc::format;
use alloc::string::String;
use core::fmt::Write;

/// An end of the θ legend: `0°`.
fn legend_end(theta: f64) -> String {
    format!("{theta:.0}°")
}

/// ` ± σ` after a θ, when there is a σ (§7: every list of tensors shows σ_θ beside θ).
fn pm(sigma: Option<f64>, digits: usize) -> String {
    sigma.map_or_else(String::new, |x| format!(" ± {x:.digits$}"))
}

fn model_section(out: &mut String, idx: usize, m: &ModelReport) {
    let s = &m.summary;
    let _ = write!(out, "<section class=\"model\" data-model=\"{}\"><h2>{}</h2>", escape(&m.model), escape(&m.model));
    if let Some(a) = &m.adapter {
        let _ = write!(
            out,
            "<p class=\"adapter-facts\">{}; rows are the updates ΔW = (α/r)·B·A</p>",
            escape(&super::adapter_facts(a))
        );
    }
    let types: String =
        m.types.iter().map(|(t, n)| format!("{} × {n}", escape(t))).collect::<alloc::vec::Vec<_>>().join(", ");
    let _ = write!(
        out,
        "<div class=\"cards\"><div class=\"card\">architecture<b>{}</b></div><div class=\"card\">name<b>{}</b></div>\
         <div class=\"card\">parameters<b>{}</b></div><div class=\"card\">file<b>{}</b></div>\
         <div class=\"card\">tensors<b>{}</b></div><div class=\"card\">θ mean<b class=\"theta-mean\"{}>{:.3}°{}</b></div>\
         <div class=\"card\">θ weighted<b>{:.3}°</b></div><div class=\"card\" title=\"the mean of sin θ over the tensors, from 0 to 1\">signal (mean sin θ)<b>{:.4}</b></div></div>\
         <p class=\"mute\">types: {types}; measured {}, degenerate {}, not measurable {}</p>",
        escape(m.architecture.as_deref().unwrap_or("?")),
        escape(m.name.as_deref().unwrap_or("?")),
        human_count(m.parameters),
        human_bytes(m.file_bytes),
        s.tensors,
        s.theta_mean_sigma.map_or_else(String::new, |x| format!(" data-sigma=\"{x}\"")),
        s.theta_mean,
        pm(s.theta_mean_sigma, 3),
        s.theta_weighted,
        s.signal,
        s.measured,
        s.degenerate,
        s.not_measurable,
    );
    out.push_str("<h3>Groups</h3><table class=\"groups\"><thead><tr><th>group</th><th>tensors</th><th>θ mean</th><th>θ min</th><th>θ max</th></tr></thead><tbody>");
    for g in &s.groups {
        let _ = write!(
            out,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\" data-v=\"{}\">{:.3}</td><td class=\"n\">{:.3}</td><td class=\"n\">{:.3}</td></tr>",
            g.group.name(),
            g.count,
            g.mean,
            g.mean,
            g.min,
            g.max
        );
    }
    out.push_str("</tbody></table><h3>Wells (lowest θ among weight matrices)</h3>");
    let list = |out: &mut String, wells: &[super::Well]| {
        out.push_str("<ol class=\"wells\">");
        for w in wells {
            let _ = write!(
                out,
                "<li><code>{}</code> <span class=\"mute\">{}</span> {:.3}°{}</li>",
                escape(&w.name),
                w.group.name(),
                w.theta,
                pm(w.sigma, 3)
            );
        }
        out.push_str("</ol>");
    };
    list(out, &super::summary::wells(&m.tensors, false, super::WELLS));
    out.push_str("<details><summary>Among all tensors, norm vectors and routers included</summary>");
    list(out, &s.wells);
    out.push_str("</details>");
    let h = Heatmap::of(m);
    if !h.layers.is_empty() {
        let _ = write!(
            out,
            "<h3>θ by layer and group</h3><p class=\"mute legend-line\">{} <span class=\"legend\" style=\"background:{}\"></span> {} \
             <span class=\"mute\">(a fixed scale: the same colour is the same θ in every report)</span></p>\
             <p class=\"mute noise-caption\">{}</p><table class=\"heat\"><thead><tr><th>layer</th>",
            legend_end(THETA_SCALE.0),
            theta_legend(),
            legend_end(THETA_SCALE.1),
            escape(&h.noise_caption()),
        );
        for g in &h.groups {
            let _ = write!(out, "<th>{}</th>", g.name());
        }
        out.push_str("</tr></thead><tbody>");
        for (r, label) in h.rows() {
            let outside = h.is_outside(r);
            let _ = write!(out, "<tr{}><td>{label}</td>", if outside { " class=\"outside\"" } else { "" });
            for c in 0..h.groups.len() {
                match h.cell(r, c) {
                    Some((t, _)) => {
                        let noisy = h.noisy(r, c, SIGMA_MARK);
                        let within = h.within_neighbours_noise(r, c) == Some(true);
                        let bg = theta_rgb(t);
                        let _ = write!(
                            out,
                            "<td style=\"{}{}{}\" title=\"{}\" data-v=\"{t}\"{}{}>{t:.1}</td>",
                            cell_style(bg),
                            if noisy { format!(";{NOISY_STYLE}") } else { String::new() },
                            if within { format!(";{}", hatch_style(ink(bg))) } else { String::new() },
                            escape(&h.title(r, c, SIGMA_MARK)),
                            if noisy { " data-noisy" } else { "" },
                            if within { " data-within-noise" } else { "" },
                        );
                    }
                    None => out.push_str("<td></td>"),
                }
            }
            out.push_str("</tr>");
        }
        out.push_str("</tbody></table>");
        if h.has_sigma() {
            sigma_heatmap(out, &h);
        }
    }
    let plot = theta_by_layer_svg(m);
    if !plot.is_empty() {
        let _ = write!(out, "<h3>θ by layer</h3><div class=\"layer-plot\" style=\"max-width:680px\">{plot}</div>");
    }
    out.push_str(&super::expert_heatmap::html_section(m));
    let _ = write!(
        out,
        "<h3>Tensors</h3><input class=\"filter\" placeholder=\"filter by name, group, type…\" data-table=\"tensors-{idx}\">\
         <div class=\"scroll\"><table class=\"sortable tensors\" id=\"tensors-{idx}\"><thead><tr><th data-key=\"name\">name</th>\
         <th data-key=\"group\">group</th><th data-num data-key=\"layer\">layer</th><th data-key=\"type\">type</th><th>shape</th>\
         <th data-num data-key=\"theta\">θ</th><th data-num data-key=\"h\">H</th><th data-num data-key=\"k\">K</th>\
         <th data-num data-key=\"c\">C</th><th>status</th>"
    );
    // An adapter's rows are updates: their rank and ‖ΔW‖_F, and with a base ‖ΔW‖/‖W‖.
    let (update, base) = (m.adapter.is_some(), m.adapter.as_ref().is_some_and(|a| a.base.is_some()));
    if update {
        out.push_str("<th data-num>rank</th><th data-num>‖ΔW‖_F</th>");
    }
    if base {
        out.push_str("<th data-num>‖ΔW‖/‖W‖</th>");
    }
    out.push_str("</tr></thead><tbody>");
    for t in &m.tensors {
        let shape: String = t.shape.iter().map(|d| format!("{d}")).collect::<alloc::vec::Vec<_>>().join("×");
        let status = match t.status {
            Status::Measured => "measured",
            Status::Degenerate => "degenerate",
            Status::NotMeasurable => "not measurable",
        };
        let theta_attr = t.theta.map_or_else(String::new, |x| format!("{x}"));
        let sigma_attr = t.sigma.map_or_else(String::new, |x| format!(" data-sigma=\"{x}\""));
        let _ = write!(
            out,
            "<tr data-name=\"{}\" data-group=\"{}\" data-layer=\"{}\" data-theta=\"{theta_attr}\"{sigma_attr}><td>{}</td><td>{}</td><td class=\"n\">{}</td><td>{}</td><td>{shape}</td>\
             <td class=\"n\" data-v=\"{theta_attr}\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{status}</td>",
            escape(&t.name),
            t.group.name(),
            t.layer.map_or_else(String::new, |l| format!("{l}")),
            escape(&t.name),
            t.group.name(),
            t.layer.map_or_else(String::new, |l| format!("{l}")),
            escape(&t.ty),
            opt(t.theta, 3) + &pm(t.sigma, 3),
            opt(t.entropy, 4),
            opt(t.kurtosis, 3),
            opt(t.cv, 4),
        );
        if let (true, Some(u)) = (update, &t.update) {
            let (frobenius, relative) = super::update_figures(u);
            let _ = write!(
                out,
                "<td class=\"n\">{}</td><td class=\"n\" data-v=\"{}\">{frobenius}</td>",
                u.rank, u.frobenius
            );
            if base {
                let _ = write!(out, "<td class=\"n\">{}</td>", relative.as_deref().unwrap_or("-"));
            }
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table></div></section>");
}

/// The σ of each heatmap cell's mean θ as a heatmap of its own (§7), after a line saying
/// which θ cells are marked as within the noise.
fn sigma_heatmap(out: &mut String, h: &Heatmap) {
    let _ = write!(
        out,
        "<p class=\"mute\"><span style=\"display:inline-block;width:1.2em;{NOISY_STYLE}\">&nbsp;</span> {} cells whose \
         mean θ has a σ above {SIGMA_MARK}°: their colour is within the sampling noise.</p>\
         <h3>σ of θ by layer and group</h3><p class=\"mute\">0° <span class=\"legend\" style=\"background:{}\">\
         </span> {:.2}°</p><table class=\"heat sigma\"><thead><tr><th>layer</th>",
        h.count_noisy(SIGMA_MARK),
        sigma_legend(),
        h.sigma_max
    );
    for g in &h.groups {
        let _ = write!(out, "<th>{}</th>", g.name());
    }
    out.push_str("</tr></thead><tbody>");
    for (r, label) in h.rows() {
        let _ = write!(out, "<tr{}><td>{label}</td>", if h.is_outside(r) { " class=\"outside\"" } else { "" });
        for c in 0..h.groups.len() {
            match h.cell_sigma(r, c) {
                Some(s) => {
                    let _ = write!(
                        out,
                        "<td style=\"{}\" title=\"{}\" data-v=\"{s}\">{s:.2}</td>",
                        cell_style(sigma_rgb(s, h.sigma_max)),
                        escape(&h.title(r, c, SIGMA_MARK))
                    );
                }
                None => out.push_str("<td></td>"),
            }
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>");
}

/// The whole page for `report`.
pub fn render(report: &Report) -> String {
    let mut out = String::with_capacity(4096 + report.models.iter().map(|m| m.tensors.len() * 400).sum::<usize>());
    let title = match report.models.as_slice() {
        [m] => format!("organ θ report: {}", m.model),
        ms => format!("organ θ report: {} models", ms.len()),
    };
    let _ = write!(
        out,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>{}</title><style>{STYLE}</style></head><body>\
         <header><h1>{}</h1><div class=\"mute\">Z-measure {} · {} · θ from 0° (noise) to 90° (structure) · a static page: \
         it opens offline and fetches nothing</div></header><main>",
        escape(&title),
        escape(&title),
        escape(&report.measure),
        escape(&report.generator)
    );
    if report.models.len() > 1 {
        out.push_str("<h2>Ranking</h2><table class=\"sortable ranking\"><thead><tr><th data-num>rank</th><th>model</th><th data-num>parameters</th><th data-num>θ mean</th><th data-num>θ weighted</th><th data-num>signal</th><th data-num>tensors</th>");
        let measured = report.ranking.iter().any(|r| r.measured.is_some());
        if measured {
            out.push_str("<th>measured (organ eval)</th>");
        }
        out.push_str("</tr></thead><tbody>");
        for r in &report.ranking {
            let _ = write!(
                out,
                "<tr><td class=\"n\">{}</td><td>{}</td><td class=\"n\" data-v=\"{}\">{}</td><td class=\"n\">{:.3}{}{}</td><td class=\"n\">{:.3}</td><td class=\"n\">{:.4}</td><td class=\"n\">{}</td>",
                r.rank,
                escape(&r.model),
                r.parameters,
                human_count(r.parameters),
                r.theta_mean,
                pm(r.theta_mean_sigma, 3),
                if r.distinguishable_from_next == Some(false) {
                    " <span class=\"mute\" title=\"within twice the larger σ of the next model: not distinguishable\">≈ next</span>"
                } else {
                    ""
                },
                r.theta_weighted,
                r.signal,
                r.tensors
            );
            if measured {
                let (text, title) = r
                    .measured
                    .as_ref()
                    .map_or_else(|| (String::from("-"), String::new()), |m| (m.short(), format!("from {}", m.source)));
                let _ = write!(out, "<td class=\"measured\" title=\"{}\">{}</td>", escape(&title), escape(&text));
            }
            out.push_str("</tr>");
        }
        let _ = write!(out, "</tbody></table><p class=\"mute ranking-note\">{}</p>", escape(super::RANKING_NOTE));
    }
    for (i, m) in report.models.iter().enumerate() {
        model_section(&mut out, i, m);
    }
    let _ = writeln!(
        out,
        "</main><script type=\"application/json\" id=\"organ-report\">{}</script><script>{SCRIPT}</script></body></html>",
        embeddable_json(report)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::TensorReport;
    use crate::zmeasure::Measurement;
    use crate::GgmlType;
    use alloc::vec;

    fn report(name: &str) -> Report {
        let m = Measurement {
            theta: 41.25,
            entropy: Some(0.9),
            kurtosis: Some(1.5),
            cv: Some(0.2),
            degenerate: false,
            sampled: 4,
            dropped: 0,
        };
        let rows = vec![
            TensorReport::from_parts(name, GgmlType::F32, &[4], 16, Some(&m)),
            TensorReport::from_parts("blk.1.ffn_up.weight", GgmlType::Q8_0, &[32], 34, Some(&m)),
        ];
        Report::new("test", vec![ModelReport::from_parts("m<1>.gguf", Some("llama"), None, 50, rows)])
    }

    #[test]
    fn hostile_names_are_escaped_and_cannot_close_the_data_script() {
        let page = render(&report("blk.0.attn_q</script><script>alert(1)</script>"));
        assert!(!page.contains("<script>alert"));
        assert!(page.contains("m&lt;1&gt;.gguf"));
        let json = extract_json(&page).unwrap();
        assert!(!json.contains('<'));
        let back: Report = serde_json::from_str(json).unwrap();
        assert_eq!(back, report("blk.0.attn_q</script><script>alert(1)</script>"));
    }

    #[test]
    fn the_page_fetches_nothing_and_carries_every_theta() {
        let page = render(&report("blk.0.attn_q.weight"));
        assert!(page.contains("default-src 'none'"));
        for needle in ["src=", "href=", "url(", "@import"] {
            assert!(!page.contains(needle), "{needle}");
        }
        assert_eq!(page.matches("data-theta=\"41.25\"").count(), 2);
        assert!(page.contains("<table class=\"heat\">"));
        assert!(!page.contains('±'), "no σ without --sigma");
        assert!(page.contains("<h3>θ by layer</h3>") && page.contains("<svg class=\"theta-by-layer\""));
        assert!(!page.contains("class=\"band\""));
    }

    /// An adapter's page says its facts and shows each update's rank, ‖ΔW‖_F and, with a
    /// base, ‖ΔW‖/‖W‖, formatted as the text report formats them.
    #[test]
    fn an_adapter_shows_its_facts_and_updates() {
        use crate::report::adapter::{Facts, Update};
        let mut r = report("blk.0.attn_q.weight.lora");
        let m = &mut r.models[0];
        let facts = Facts { alpha: Some(16.0), ranks: vec![8], pairs: 2, invocation_tokens: None, base: None };
        m.adapter = Some(facts.clone());
        for (t, f) in m.tensors.iter_mut().zip([0.125, 2.5]) {
            t.update = Some(Update { rank: 8, scale: 2.0, frobenius: f, base_frobenius: Some(10.0) });
        }
        let page = render(&r);
        assert!(page.contains("LoRA adapter: 2 pairs, rank 8, α 16; rows are the updates"));
        assert!(page.contains("<th data-num>rank</th><th data-num>‖ΔW‖_F</th></tr>"), "no ‖ΔW‖/‖W‖ without a base");
        assert!(page.contains("<td class=\"n\">8</td><td class=\"n\" data-v=\"0.125\">0.1250</td></tr>"));
        r.models[0].adapter = Some(Facts { base: Some("base<1>.gguf".into()), ..facts });
        let page = render(&r);
        assert!(page.contains("rank 8, α 16, against the base base&lt;1&gt;.gguf;"));
        assert!(
            page.contains("<th>status</th><th data-num>rank</th><th data-num>‖ΔW‖_F</th><th data-num>‖ΔW‖/‖W‖</th>")
        );
        assert!(page.contains("data-v=\"2.5\">2.5000</td><td class=\"n\">0.25000</td></tr>"));
        assert!(!render(&report("a.weight")).contains("‖ΔW‖"), "a model's page has no update columns");
    }

    /// With σ (§7), θ shows its σ beside it in the card, the wells, the table and the
    /// ranking, which marks neighbours within 2σ.
    #[test]
    fn sigma_stands_beside_theta() {
        let draws = [40.0, 42.5, 40.0, 42.5, 40.0, 42.5, 40.0, 42.5];
        let mut r = report("blk.0.attn_q.weight");
        let rows: alloc::vec::Vec<TensorReport> =
            r.models[0].tensors.drain(..).map(|t| t.with_draws(Some(&draws))).collect();
        let m = ModelReport::from_parts("a.gguf", Some("llama"), None, 50, rows);
        let mut b = m.clone();
        b.model = "b.gguf".into();
        r = Report::new("test", vec![m, b]);
        let page = render(&r);
        // Two tensor rows per model, and each model's ranking row.
        assert_eq!(page.matches("41.250 ± 1.250").count(), 6);
        assert!(page.contains("41.250° ± 1.250</b>"));
        assert!(page.contains("41.250° ± 1.250</li>"));
        assert_eq!(page.matches("≈ next</span>").count(), 1);
        // The heatmap: each model's two cells (σ 1.25 > SIGMA_MARK) marked, and the σ map.
        assert_eq!(page.matches(" data-noisy>").count(), 4);
        assert_eq!(page.matches("<table class=\"heat sigma\">").count(), 2);
        assert_eq!(page.matches("data-v=\"1.25\">1.25</td>").count(), 4);
        assert_eq!(page.matches(" data-sigma=\"1.25\"").count(), 6, "4 tensor rows and 2 θ mean cards");
        // θ by layer: each model's plot has a σ band per kind (two kinds of one layer each).
        assert_eq!(page.matches("<polygon class=\"band\"").count(), 4);
    }
}
