//! θ by layer and group: the heatmap, colored on the report's own θ range. With σ (§7) it
//! can show the σ of each cell's mean instead, and in the θ view it marks the cells whose
//! σ exceeds a threshold the viewer sets (the core's `Heatmap` decides which). A cell
//! clicked shows its tensors in the table.

use leptos::prelude::*;
use organ_core::anatomy::Group;
use organ_core::report::ModelReport;
use organ_core::report::{sigma_color, theta_color, Heatmap, NOISY_STYLE, SIGMA_MARK};
use std::sync::Arc;

/// One row per layer, one column per group, each cell the mean θ of its tensors (or its
/// σ), with a legend; nothing for a model without layers.
#[component]
pub fn HeatmapView(
    m: Arc<ModelReport>,
    /// A cell clicked: its layer and group.
    on_cell: Callback<(u32, Group)>,
) -> impl IntoView {
    let h = Arc::new(Heatmap::of(&m));
    if h.layers.is_empty() {
        return ().into_any();
    }
    let show_sigma = RwSignal::new(false);
    let threshold = RwSignal::new(SIGMA_MARK);
    let controls = h.has_sigma().then(|| {
        let hc = h.clone();
        view! {
            <p class="row filters">
                <select id="heatmap-view" on:change=move |ev| show_sigma.set(event_target_value(&ev) == "sigma")>
                    <option value="theta" selected=true>"θ"</option>
                    <option value="sigma">"σ of θ"</option>
                </select>
                <label>" mark cells with σ above "
                    <input id="sigma-mark" type="number" min="0" step="0.1" value=SIGMA_MARK.to_string() style="width:5em"
                        on:input=move |ev| {
                            if let Ok(x) = event_target_value(&ev).parse::<f64>() {
                                threshold.set(x.max(0.0));
                            }
                        } />
                    "°"</label>
                <span class="mute" id="noisy-count">{move || {
                    let t = threshold.get();
                    format!("{} cells marked: their colour is within the sampling noise.", hc.count_noisy(t))
                }}</span>
            </p>
        }
    });
    let legend = {
        let h = h.clone();
        move || {
            let (lo, hi) = h.range;
            if show_sigma.get() {
                let g = format!(
                    "linear-gradient(90deg,{},{})",
                    sigma_color(0.0, h.sigma_max),
                    sigma_color(h.sigma_max, h.sigma_max)
                );
                (String::from("0° "), g, format!(" {:.2}°", h.sigma_max))
            } else {
                let g = format!(
                    "linear-gradient(90deg,{},{},{})",
                    theta_color(lo, lo, hi),
                    theta_color((lo + hi) / 2.0, lo, hi),
                    theta_color(hi, lo, hi)
                );
                (format!("{lo:.2}° "), g, format!(" {hi:.2}°"))
            }
        }
    };
    let body = {
        let h = h.clone();
        move || {
            let (sigma, t) = (show_sigma.get(), threshold.get());
            h.layers
                .iter()
                .enumerate()
                .map(|(r, l)| {
                    view! {
                        <tr><td>{*l}</td>
                        {(0..h.groups.len()).map(|c| cell(&h, r, c, sigma, t, on_cell)).collect_view()}
                        </tr>
                    }
                })
                .collect_view()
        }
    };
    let legend_parts = move || {
        let (a, g, b) = legend();
        view! { {a}<span class="legend" style:background=g></span>{b} }
    };
    view! {
        <div>
            <h3>{move || if show_sigma.get() { "σ of θ by layer and group" } else { "θ by layer and group" }}</h3>
            {controls}
            <p class="mute">{legend_parts}</p>
            <table id="heatmap" class="heat" data-view=move || if show_sigma.get() { "sigma" } else { "theta" }>
                <thead><tr><th>"layer"</th>{h.groups.iter().map(|g| view! { <th>{g.name()}</th> }).collect_view()}</tr></thead>
                <tbody>{body}</tbody>
            </table>
        </div>
    }
    .into_any()
}

/// Cell (`r`, `c`): its mean θ, marked when noisier than `threshold`, or its σ; clicking
/// it calls `on_cell` with its layer and group.
fn cell(h: &Heatmap, r: usize, c: usize, sigma: bool, threshold: f64, on_cell: Callback<(u32, Group)>) -> AnyView {
    let (lo, hi) = h.range;
    let title = h.title(r, c, threshold);
    let (layer, group) = (h.layers[r], h.groups[c]);
    let click = move |_| on_cell.run((layer, group));
    match (h.cell(r, c), h.cell_sigma(r, c)) {
        (Some(_), Some(s)) if sigma => view! {
            <td style:background=sigma_color(s, h.sigma_max) title=title data-v=s.to_string() on:click=click>{format!("{s:.2}")}</td>
        }
        .into_any(),
        (Some((t, _)), _) => {
            let noisy = h.noisy(r, c, threshold);
            let style = format!(
                "background:{}{}",
                theta_color(t, lo, hi),
                if noisy { format!(";{NOISY_STYLE}") } else { String::new() }
            );
            view! { <td style=style title=title data-v=t.to_string() data-noisy=noisy.then_some("1") data-layer=layer.to_string() data-group=group.name() on:click=click>{format!("{t:.1}")}</td> }
                .into_any()
        }
        _ => view! { <td></td> }.into_any(),
    }
}
