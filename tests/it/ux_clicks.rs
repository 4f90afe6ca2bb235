//! The static pages carry what the browser app draws beside its clicks (issue 35, point
//! 16): `organ measure --html` has θ by layer, one line per tensor kind, with σ bands under
//! `--sigma`; `organ diff --html` has dθ by layer and a most changed list with each pair's
//! cos and rel_l2, the figures of its `--json` report; both pages' tables carry the keys
//! their script reads from and writes to the URL fragment.

use crate::build::*;
use crate::common::*;
use organ_core::GgmlType;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Elements of the attention and feed-forward tensors: more than the sample
/// (`SAMPLE_SIZE`), so that `--sigma` has alternate draws to measure.
const Q: usize = 256 * 512;
const UP: usize = 512 * 512;

/// Two layers of attention and feed-forward tensors and an embedding, in noise.
fn layered() -> Vec<T> {
    let mut v = vec![t("token_embd.weight", &[64, 40], GgmlType::F32, noise(1, 64 * 40))];
    for l in 0..2u64 {
        v.push(t(&format!("blk.{l}.attn_q.weight"), &[256, 512], GgmlType::F32, noise(10 + l, Q)));
        v.push(t(&format!("blk.{l}.ffn_up.weight"), &[512, 512], GgmlType::F32, noise(20 + l, UP)));
    }
    v
}

/// `organ measure M --html tmp(NAME) EXTRA…`: the page.
fn measure_page(m: &Path, name: &str, extra: &[&str]) -> String {
    let page = tmp(name);
    let mut c = organ();
    c.arg("measure").arg(m).arg("--html").arg(&page).args(["--force", "--no-cache"]).args(extra);
    ok(c);
    std::fs::read_to_string(&page).unwrap()
}

/// The element of `page` that starts at its first `<svg class="CLASS"`, to its `</svg>`.
fn svg<'a>(page: &'a str, class: &str) -> &'a str {
    let at = page.find(&format!("<svg class=\"{class}\"")).unwrap_or_else(|| panic!("no {class} plot"));
    let end = page[at..].find("</svg>").unwrap() + at + 6;
    &page[at..end]
}

#[test]
fn the_measure_page_draws_theta_by_layer_per_kind() {
    let m = write_model("ux-layers.gguf", "llama", &layered());
    let page = measure_page(&m, "ux-layers.html", &[]);
    let plot = svg(&page, "theta-by-layer");
    assert!(page.contains("<h3>θ by layer</h3>"));
    assert_eq!(plot.matches("<g class=\"series\"").count(), 2);
    assert!(plot.contains("data-kind=\"attn_q.weight\"") && plot.contains("data-kind=\"ffn_up.weight\""));
    // A point per layered tensor, the embedding (no layer) left out; no σ, no band.
    assert_eq!(plot.matches("<circle").count(), 4);
    assert!(!plot.contains("token_embd") && !plot.contains("class=\"band\""));
    // The table's columns carry the fragment's keys; its rows their group and layer.
    for key in ["name", "group", "layer", "type", "theta"] {
        assert!(page.contains(&format!("data-key=\"{key}\"")), "{key}");
    }
    assert!(page.contains("data-name=\"blk.1.ffn_up.weight\" data-group=\"organ\" data-layer=\"1\""));
    assert!(page.contains("location.hash") && page.contains("history.replaceState"));
}

#[test]
fn with_sigma_each_kind_has_its_band() {
    let m = write_model("ux-sigma.gguf", "llama", &layered());
    let page = measure_page(&m, "ux-sigma.html", &["--sigma"]);
    let plot = svg(&page, "theta-by-layer");
    assert_eq!(plot.matches("<polygon class=\"band\"").count(), 2);
    assert!(plot.contains('±'));
}

/// `organ diff A B --json tmp(NAME).json --html tmp(NAME).html`: the report and the page.
fn diff_page(a: &Path, b: &Path, name: &str) -> (Value, String) {
    let (json, html): (PathBuf, PathBuf) = (tmp(&format!("{name}.json")), tmp(&format!("{name}.html")));
    let mut c = organ();
    c.arg("diff").arg(a).arg(b).arg("--json").arg(&json).arg("--html").arg(&html).arg("--force");
    ok(c);
    let report = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    (report, std::fs::read_to_string(&html).unwrap())
}

#[test]
fn the_compare_page_draws_d_theta_by_layer_and_lists_cos_and_rel_l2() {
    let a = write_model("ux-a.gguf", "llama", &layered());
    let mut tensors = layered();
    // Layer 1's attn_q takes other values; layer 0's ffn_up a little noise.
    tensors[3].values = noise(99, Q);
    for (x, n) in tensors[2].values.iter_mut().zip(noise(7, UP)) {
        *x += 0.1 * n;
    }
    let b = write_model("ux-b.gguf", "llama", &tensors);
    let (r, page) = diff_page(&a, &b, "ux-diff");
    let plot = svg(&page, "d-theta-by-layer");
    assert!(page.contains("<h3>dθ by layer</h3>"));
    assert_eq!(plot.matches("<g class=\"series\"").count(), 2);
    assert_eq!(plot.matches("<circle").count(), 4);
    assert!(plot.contains("class=\"zero\""));
    // The most changed list: each pair with the report's own cos and rel_l2.
    let most = r["most_changed"].as_array().unwrap();
    assert_eq!(most.len(), 2);
    let at = page.find("<ol class=\"most-changed\">").unwrap();
    let list = &page[at..at + page[at..].find("</ol>").unwrap()];
    for name in most {
        let p = r["pairs"].as_array().unwrap().iter().find(|p| &p["name"] == name).unwrap();
        let (cos, rel) = (p["cos"].as_f64().unwrap(), p["rel_l2"].as_f64().unwrap());
        let li = format!("<li data-name=\"{}\" data-cos=\"{cos}\" data-rel-l2=\"{rel}\">", name.as_str().unwrap());
        assert!(list.contains(&li), "{li} in {list}");
        assert!(list.contains(&format!("cos {cos:.8} · rel_l2 {rel:.1e}")), "{list}");
    }
    for key in ["cos", "rel_l2", "d_theta"] {
        assert!(page.contains(&format!("data-key=\"{key}\"")), "{key}");
    }
}
