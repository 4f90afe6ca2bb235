//! How far each layer's groups moved between A and B: the 1 − cos heatmap, on the core's
//! log colour scale, with byte-identical cells in their own colour.

use leptos::prelude::*;
use organ_core::compare::CompareReport;
use organ_core::report::{cell_style, diff_color, diff_rgb, sci, CompareHeatmap, IDENTICAL_COLOR};
use std::sync::Arc;

/// One row per layer, one column per group, each cell the mean 1 − cos of its pairs, with
/// a legend; nothing for models without layers.
#[component]
pub fn DiffHeatmapView(r: Arc<CompareReport>) -> impl IntoView {
    let h = CompareHeatmap::of(&r);
    if h.layers.is_empty() {
        return ().into_any();
    }
    let (lo, hi) = h.range;
    let legend = format!(
        "linear-gradient(90deg,{},{},{})",
        diff_color(lo, lo, hi),
        diff_color((lo * hi).sqrt(), lo, hi),
        diff_color(hi, lo, hi)
    );
    view! {
        <div>
            <h3>"1 − cos by layer and group"</h3>
            <p class="mute">{format!("{} ", sci(Some(lo)))}<span class="legend" style:background=legend></span>
                {format!(" {} (log scale) · ", sci(Some(hi)))}<span class="same">"="</span>" every pair byte-identical"</p>
            <table id="diff-heatmap" class="heat diff">
                <thead><tr><th>"layer"</th>{h.groups.iter().map(|g| view! { <th>{g.name()}</th> }).collect_view()}</tr></thead>
                <tbody>
                {h.layers.iter().enumerate().map(|(row, l)| view! {
                    <tr><td>{*l}</td>
                    {(0..h.groups.len()).map(|col| match h.cell(row, col) {
                        None => view! { <td></td> }.into_any(),
                        Some(c) if c.all_identical() => view! {
                            <td class="same" style:background=IDENTICAL_COLOR data-v="0" title=format!("{} pairs, all byte-identical", c.pairs)>"="</td>
                        }.into_any(),
                        Some(c) => {
                            let d = c.one_minus_cos;
                            let style = d.map_or_else(|| "background:#fff".to_owned(), |d| cell_style(diff_rgb(d, lo, hi)));
                            let title = format!("{} pairs, {} identical, mean 1 − cos {}", c.pairs, c.identical, d.map_or_else(|| "n/a".to_owned(), |d| d.to_string()));
                            view! {
                                <td style=style data-v=d.map(|d| d.to_string()).unwrap_or_default() title=title>
                                    {d.map_or_else(|| "n/m".to_owned(), |d| sci(Some(d)))}
                                </td>
                            }.into_any()
                        }
                    }).collect_view()}
                    </tr>
                }).collect_view()}
                </tbody>
            </table>
        </div>
    }
    .into_any()
}
