//! θ by layer and group: the heatmap, colored on the report's own θ range.

use leptos::prelude::*;
use organ_core::report::ModelReport;
use organ_core::report::{theta_color, Heatmap};
use std::sync::Arc;

/// One row per layer, one column per group, each cell the mean θ of its tensors, with a
/// legend; nothing for a model without layers.
#[component]
pub fn HeatmapView(m: Arc<ModelReport>) -> impl IntoView {
    let h = Heatmap::of(&m);
    if h.layers.is_empty() {
        return ().into_any();
    }
    let (lo, hi) = h.range;
    let legend = format!(
        "linear-gradient(90deg,{},{},{})",
        theta_color(lo, lo, hi),
        theta_color((lo + hi) / 2.0, lo, hi),
        theta_color(hi, lo, hi)
    );
    view! {
        <div>
            <h3>"θ by layer and group"</h3>
            <p class="mute">{format!("{lo:.2}° ")}<span class="legend" style:background=legend></span>{format!(" {hi:.2}°")}</p>
            <table id="heatmap" class="heat">
                <thead><tr><th>"layer"</th>{h.groups.iter().map(|g| view! { <th>{g.name()}</th> }).collect_view()}</tr></thead>
                <tbody>
                {h.layers.iter().enumerate().map(|(r, l)| view! {
                    <tr><td>{*l}</td>
                    {(0..h.groups.len()).map(|c| match h.cell(r, c) {
                        Some((t, n)) => view! { <td style:background=theta_color(t, lo, hi) title=format!("{n} tensors, mean θ {t:.3}°")>{format!("{t:.1}")}</td> }.into_any(),
                        None => view! { <td></td> }.into_any(),
                    }).collect_view()}
                    </tr>
                }).collect_view()}
                </tbody>
            </table>
        </div>
    }
    .into_any()
}
