//! How `organ measure --html` shows θ (issue 35, points 15 and 2), on SmolLM2: a fixed
//! perceptual colour scale with a legend from 0° to 90°, text on each cell in the colour
//! that reads on it, no uppercased headings, the tensors outside the layers in a row of their
//! own, and a caption that says how much of the colour is sampling noise; with `--sigma`,
//! the cells within the noise of their neighbours hatched, worked out here from the draws.

use crate::common::*;
use organ_core::report::{cell_style, contrast_ratio, ink, theta_rgb};
use serde_json::Value;
use std::collections::BTreeMap;

/// `organ measure MODEL ARGS --html PAGE --json JSON`: the page and the report.
#[track_caller]
fn measure(model: &std::path::Path, args: &[&str], name: &str) -> (String, Value) {
    let (html, json) = (tmp(&format!("{name}.html")), tmp(&format!("{name}.json")));
    let mut c = organ();
    c.arg("measure").arg(model).args(args).arg("--html").arg(&html).arg("--json").arg(&json).arg("--force");
    ok(c);
    let page = std::fs::read_to_string(&html).unwrap();
    (page, serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap())
}

/// The θ heatmap of a page: its first `<table class="heat">`.
fn theta_table(page: &str) -> &str {
    let start = page.find("<table class=\"heat\">").expect("a θ heatmap");
    let end = page[start..].find("</table>").unwrap();
    &page[start..start + end]
}

/// A heatmap cell with a value: its style, its `data-v` and its opening tag's attributes.
type Cell = (String, f64, String);

/// Per tensor of a heatmap cell: its θ and its 8 draws.
type Draws = Vec<(f64, Vec<f64>)>;

/// Each row of a heatmap: its label and its cells.
fn rows(table: &str) -> Vec<(String, Vec<Cell>)> {
    table
        .split("<tr")
        .skip(2) // before the head, the head
        .map(|r| {
            let label = r.split("<td>").nth(1).and_then(|x| x.split("</td>").next()).unwrap_or("").to_owned();
            let cells = r
                .split("<td style=\"")
                .skip(1)
                .map(|c| {
                    let style = c.split('"').next().unwrap().to_owned();
                    let v = c.split("data-v=\"").nth(1).unwrap().split('"').next().unwrap().parse().unwrap();
                    let attrs = c.split('>').next().unwrap().to_owned();
                    (style, v, attrs)
                })
                .collect();
            (label, cells)
        })
        .collect()
}

/// The text of the `<p>` of class `class`.
fn paragraph<'a>(page: &'a str, class: &str) -> &'a str {
    let at = page.find(&format!("<p class=\"{class}\">")).unwrap_or_else(|| panic!("no <p class=\"{class}\">"));
    let rest = &page[at..];
    &rest[rest.find('>').unwrap() + 1..rest.find("</p>").unwrap()]
}

#[test]
fn the_page_has_a_fixed_scale_the_embedding_row_and_a_noise_caption() {
    let Some(model) = need::smollm2() else { return };
    let (page, report) = measure(&model, &[], "plain");
    assert!(!page.contains("uppercase"), "no heading is uppercased");
    // The legend: the scale's ends are 0° and 90°, whatever the report's θ span.
    let legend = paragraph(&page, "mute legend-line");
    assert!(
        legend.starts_with("0° <span class=\"legend\" style=\"background:linear-gradient(90deg,#440154 0%,"),
        "{legend}"
    );
    assert!(legend.contains("#fde725 100%)\"></span> 90°"), "{legend}");
    let rows = rows(theta_table(&page));
    // The tensors without a layer come first, labelled; then SmolLM2's 30 layers.
    assert_eq!(rows.len(), 31);
    assert_eq!(rows[0].0, "no layer");
    assert_eq!(rows[1].0, "0");
    let tensors = report["models"][0]["tensors"].as_array().unwrap();
    let theta_of = |name: &str| tensors.iter().find(|t| t["name"] == name).unwrap()["theta"].as_f64().unwrap();
    let embd = theta_of("token_embd.weight");
    let norm = theta_of("output_norm.weight");
    let outside: Vec<f64> = rows[0].1.iter().map(|c| c.1).collect();
    assert_eq!(outside, [embd, norm], "the embedding's and the final norm's θ");
    // Every cell: the fixed scale's colour of its θ, and the text colour that reads on it.
    let mut cells = 0;
    for (label, row) in &rows {
        for (style, v, _) in row {
            assert!(style.starts_with(&cell_style(theta_rgb(*v))), "layer {label}, θ {v}: {style}");
            assert!(contrast_ratio(theta_rgb(*v), ink(theta_rgb(*v))) >= 4.5);
            cells += 1;
        }
    }
    assert_eq!(cells, 2 + 30 * 3, "the outside row's two, and skeleton, organ and norm in each layer");
    // Without σ nothing is hatched, and the caption says what the colour may hide.
    assert!(!page.contains("data-within-noise"));
    let caption = paragraph(&page, "mute noise-caption");
    assert!(
        caption.contains("may be sampling noise") && caption.contains("3.3°") && caption.contains("--sigma"),
        "{caption}"
    );
}

/// With `--sigma`, the cells within 2σ of both neighbours are hatched and counted; the
/// count is worked out here from the report's draws (a cell's σ: the spread over the 8
/// draws of its mean θ, a tensor without draws counting with its θ).
#[test]
fn with_sigma_the_cells_within_the_noise_of_their_neighbours_are_marked() {
    let Some(model) = need::smollm2() else { return };
    let (page, report) = measure(&model, &["--sigma"], "sigma");
    // (layer, group) → per tensor, θ and its 8 draws.
    let mut by_cell: BTreeMap<(u64, String), Draws> = BTreeMap::new();
    for t in report["models"][0]["tensors"].as_array().unwrap() {
        let (Some(layer), Some(theta)) = (t["layer"].as_u64(), t["theta"].as_f64()) else { continue };
        let draws = t["draws"].as_array().map_or(vec![theta; 8], |d| d.iter().map(|x| x.as_f64().unwrap()).collect());
        by_cell.entry((layer, t["group"].as_str().unwrap().to_owned())).or_default().push((theta, draws));
    }
    let cell = |ts: &[(f64, Vec<f64>)]| {
        let n = ts.len() as f64;
        let mean = ts.iter().map(|t| t.0).sum::<f64>() / n;
        let means: Vec<f64> = (0..8).map(|k| ts.iter().map(|t| t.1[k]).sum::<f64>() / n).collect();
        let m = means.iter().sum::<f64>() / 8.0;
        (mean, (means.iter().map(|x| (x - m).powi(2)).sum::<f64>() / 8.0).sqrt())
    };
    let cells: BTreeMap<_, _> = by_cell.iter().map(|(k, ts)| (k.clone(), cell(ts))).collect();
    let mut want = BTreeMap::new();
    for ((layer, group), &(t, s)) in &cells {
        let neighbours: Vec<_> = [layer.checked_sub(1), Some(layer + 1)]
            .into_iter()
            .flatten()
            .filter_map(|l| cells.get(&(l, group.clone())))
            .collect();
        if !neighbours.is_empty() {
            let within = neighbours.iter().all(|&&(tn, sn)| (t - tn).abs() <= 2.0 * (s * s + sn * sn).sqrt());
            want.insert((*layer, group.clone()), within);
        }
    }
    let within = want.values().filter(|&&w| w).count();
    assert!(within > 0 && within < want.len(), "SmolLM2 has cells on both sides: {within} of {}", want.len());
    // The page: the same cells hatched, and the caption's count.
    let table = theta_table(&page);
    let groups: Vec<&str> = table.split("<th>").skip(2).map(|h| h.split("</th>").next().unwrap()).collect();
    let mut marked = 0;
    for (label, row) in rows(table) {
        let Ok(layer) = label.parse::<u64>() else {
            assert!(row.iter().all(|c| !c.2.contains("data-within-noise")), "the outside row is not judged");
            continue;
        };
        // Empty cells come out of `rows`, so match cells to groups by their θ.
        for (style, v, attrs) in row {
            let group = groups.iter().find(|g| cells.get(&(layer, g.to_string())).is_some_and(|c| c.0 == v)).unwrap();
            let hatched = attrs.contains("data-within-noise");
            assert_eq!(hatched, want[&(layer, group.to_string())], "layer {layer} {group}");
            assert_eq!(hatched, style.contains("repeating-linear-gradient"), "layer {layer} {group}: {style}");
            marked += usize::from(hatched);
        }
    }
    assert_eq!(marked, within);
    let caption = paragraph(&page, "mute noise-caption");
    assert!(
        caption.starts_with(&format!("{within} of {} cells within the sampling noise of their neighbours", want.len())),
        "{caption}"
    );
}
