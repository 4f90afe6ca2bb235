//! The static page of a sensitivity report (`organ sensitivity --html`): the measured KL
//! divergence as a layer × kind heatmap on a fixed logarithmic scale (so that pages compare),
//! the sortable table of every tensor, and the report itself embedded as JSON.

use super::page::{embeddable_json, escape, CSP_META, SCRIPT, STYLE};
use super::readable::{cell_style, diff_color, diff_rgb};
use crate::sensitivity::report::{Report, Row};
use alloc::collections::BTreeSet;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::{self, Write};

/// The scale's ends, in nats: the same on every page.
pub const KLD_SCALE: (f64, f64) = (1e-4, 10.0);

/// Renders the page.
pub fn render(r: &Report, out: &mut dyn Write) -> fmt::Result {
    let title = format!("Sensitivity of {} to {}", r.model, r.change);
    // The same policy as the θ and compare pages: a page opened from a job's results
    // fetches nothing, whatever a tensor's name holds.
    write!(
        out,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">{CSP_META}<title>{}</title>",
        escape(&title)
    )?;
    write!(out, "<style>{STYLE}</style></head><body><header><h1>{}</h1>", escape(&title))?;
    writeln!(
        out,
        "<div class=\"mute\">Mean KL divergence (nats per token) of the model with one tensor changed, from the \
         unchanged model, measured by llama.cpp's llama-perplexity on {} ({} chunks of {} tokens; base perplexity \
         {:.4} ± {:.4}).</div></header><main>",
        escape(&r.text.text),
        r.text.chunks,
        r.text.ctx,
        r.text.base_perplexity.value,
        r.text.base_perplexity.error
    )?;
    if let (Some(rep), Some(rho)) = (&r.repeat, r.repeat_rho) {
        writeln!(
            out,
            "<p>Measured again on {}: Spearman ρ between the two texts = <b>{rho:.3}</b>, the ceiling any predictor \
             of this measurement can reach.</p>",
            escape(&rep.text)
        )?;
    }
    heatmap(r, out)?;
    table(&r.tensors, out)?;
    write!(out, "<script type=\"application/json\" id=\"organ-report\">{}</script>", embeddable_json(r))?;
    write!(out, "<script>{SCRIPT}</script></main></body></html>")
}

/// A cell's CSS: its colour on the fixed KL scale and the text colour that reads on it.
fn cell_css(kld: f64) -> String {
    cell_style(diff_rgb(kld, KLD_SCALE.0, KLD_SCALE.1))
}

fn cell_color(kld: f64) -> String {
    diff_color(kld, KLD_SCALE.0, KLD_SCALE.1)
}

fn heatmap(r: &Report, out: &mut dyn Write) -> fmt::Result {
    let kinds: BTreeSet<&str> = r.tensors.iter().filter(|t| t.layer.is_some()).map(|t| t.kind.as_str()).collect();
    let layers: BTreeSet<u32> = r.tensors.iter().filter_map(|t| t.layer).collect();
    let others: Vec<&Row> = r.tensors.iter().filter(|t| t.layer.is_none()).collect();
    writeln!(out, "<h2>Layer × kind</h2>")?;
    writeln!(
        out,
        "<p class=\"mute\">Colour: KL divergence on a log scale from {} (pale) to {} nats (deep red); hover a cell for \
         its value ± its error. <span class=\"legend\" style=\"background:linear-gradient(90deg,{},{},{})\"></span></p>",
        KLD_SCALE.0,
        KLD_SCALE.1,
        cell_color(KLD_SCALE.0),
        cell_color(libm::sqrt(KLD_SCALE.0 * KLD_SCALE.1)),
        cell_color(KLD_SCALE.1)
    )?;
    write!(out, "<table class=\"heat\"><thead><tr><th>layer</th>")?;
    for k in &kinds {
        write!(out, "<th>{}</th>", escape(k))?;
    }
    writeln!(out, "</tr></thead><tbody>")?;
    for l in &layers {
        write!(out, "<tr><th>{l}</th>")?;
        for k in &kinds {
            match r.tensors.iter().find(|t| t.layer == Some(*l) && t.kind == *k) {
                Some(t) => write!(
                    out,
                    "<td style=\"{}\" title=\"{} {:.6} ± {:.6}\">{}</td>",
                    cell_css(t.kld.value),
                    escape(&t.name),
                    t.kld.value,
                    t.kld.error,
                    short(t.kld.value)
                )?,
                None => write!(out, "<td></td>")?,
            }
        }
        writeln!(out, "</tr>")?;
    }
    for t in others {
        writeln!(
            out,
            "<tr><th>{}</th><td colspan=\"{}\" style=\"{}\">{:.6} ± {:.6}</td></tr>",
            escape(&t.kind),
            kinds.len().max(1),
            cell_css(t.kld.value),
            t.kld.value,
            t.kld.error
        )?;
    }
    writeln!(out, "</tbody></table>")
}

/// A cell's figure in at most 5 characters.
fn short(v: f64) -> String {
    if v >= 1.0 {
        format!("{v:.2}")
    } else if v >= 1e-3 {
        format!("{:.3}", v).trim_start_matches('0').into()
    } else {
        format!("{v:.0e}")
    }
}

fn table(rows: &[Row], out: &mut dyn Write) -> fmt::Result {
    writeln!(out, "<h2>Every tensor</h2><input class=\"filter\" data-table=\"sens\" placeholder=\"filter\">")?;
    writeln!(
        out,
        "<div class=\"scroll\"><table id=\"sens\" class=\"sortable\"><thead><tr><th>tensor</th><th>kind</th>\
         <th data-num>layer</th><th>type</th><th>as</th><th data-num>bytes</th><th data-num>KLD</th><th data-num>±</th>\
         <th data-num>PPL</th><th data-num>same top</th></tr></thead><tbody>"
    )?;
    for t in rows {
        writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td>\
             <td class=\"n\" style=\"{}\">{:.6}</td><td class=\"n\">{:.6}</td><td class=\"n\">{:.4}</td>\
             <td class=\"n\">{:.2}%</td></tr>",
            escape(&t.name),
            escape(&t.kind),
            t.layer.map(|l| format!("{l}")).unwrap_or_default(),
            escape(&t.ty),
            escape(&t.changed_type),
            t.changed_bytes,
            cell_css(t.kld.value),
            t.kld.value,
            t.kld.error,
            t.ppl.value,
            100.0 * t.same_top.value
        )?;
    }
    writeln!(out, "</tbody></table></div>")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report of one tensor whose name tries to load a script from elsewhere.
    fn report() -> Report {
        let row = serde_json::json!({
            "name": "blk.0.attn_q.weight<script src=//x></script>", "kind": "attn_q", "layer": 0, "type": "f32",
            "dims": [4, 4], "n_elements": 16, "bytes": 64, "changed_type": "q4_0", "changed_bytes": 18,
            "kld": {"value": 0.01, "error": 0.001}, "kld_median": 0.005, "kld_p99": 0.1,
            "ppl": {"value": 10.0, "error": 0.1}, "same_top": {"value": 0.9, "error": 0.01}
        });
        let setup = serde_json::json!({
            "text": "t.txt", "text_blake3": "00", "ctx": 128, "chunks": 2,
            "base_perplexity": {"value": 9.0, "error": 0.1}
        });
        serde_json::from_value(serde_json::json!({
            "organ_sensitivity": 1, "model": "m.gguf", "model_blake3": "00", "change": "q4_0",
            "text": setup, "llama_perplexity": "llama-perplexity", "tensors": [row]
        }))
        .unwrap()
    }

    #[test]
    fn the_page_forbids_every_fetch_as_the_other_pages_do() {
        let mut page = String::new();
        render(&report(), &mut page).unwrap();
        let head = &page[..page.find("</head>").unwrap()];
        assert!(head.contains(CSP_META), "{head}");
        assert!(CSP_META.contains("default-src 'none'"));
        assert!(!page.contains("<script src"), "the name is escaped");
    }
}
