//! θ by layer and group: the heatmap, coloured on the core's fixed θ scale (0° to 90°), with
//! the tensors outside the layers in a row of their own. With σ (§7) it can show the σ of
//! each cell's mean instead, and in the θ view it marks the cells whose σ exceeds a
//! threshold the viewer sets and hatches those within the noise of their neighbours (the
//! core's `Heatmap` decides which, and writes the caption). A layer's cell clicked shows its
//! tensors in the table.

use leptos::prelude::*;
use organ_core::anatomy::Group;
use organ_core::report::ModelReport;
use organ_core::report::{cell_style, hatch_style, ink, sigma_legend, sigma_rgb, theta_legend, theta_rgb};
use organ_core::report::{Heatmap, NOISY_STYLE, SIGMA_MARK, THETA_SCALE};
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
                    format!("{} cells dashed: the σ of their own θ is above the mark.", hc.count_noisy(t))
                }}</span>
            </p>
        }
    });
    let legend = {
        let h = h.clone();
        move || {
            if show_sigma.get() {
                (String::from("0° "), sigma_legend(), format!(" {:.2}°", h.sigma_max))
            } else {
                (format!("{:.0}° ", THETA_SCALE.0), theta_legend(), format!(" {:.0}°", THETA_SCALE.1))
            }
        }
    };
    let body = {
        let h = h.clone();
        move || {
            let (sigma, t) = (show_sigma.get(), threshold.get());
            h.rows()
                .into_iter()
                .map(|(r, label)| {
                    view! {
                        <tr class=h.is_outside(r).then_some("outside")><td>{label}</td>
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
            <p class="mute" id="heatmap-legend">{legend_parts}</p>
            <p class="mute" id="noise-caption" hidden=move || show_sigma.get()>{h.noise_caption()}</p>
            <table id="heatmap" class="heat" data-view=move || if show_sigma.get() { "sigma" } else { "theta" }>
                <thead><tr><th>"layer"</th>{h.groups.iter().map(|g| view! { <th>{g.name()}</th> }).collect_view()}</tr></thead>
                <tbody>{body}</tbody>
            </table>
        </div>
    }
    .into_any()
}

/// Cell (`r`, `c`): its mean θ, marked when noisier than `threshold` and hatched when within
/// the noise of its neighbours, or its σ; clicking a layer's cell calls `on_cell` with its
/// layer and group (the row outside the layers has no layer to filter by).
fn cell(h: &Heatmap, r: usize, c: usize, sigma: bool, threshold: f64, on_cell: Callback<(u32, Group)>) -> AnyView {
    let title = h.title(r, c, threshold);
    let (layer, group) = (h.layers.get(r).copied(), h.groups.get(c).copied().unwrap_or(Group::Other));
    let click = move |_| {
        if let Some(l) = layer {
            on_cell.run((l, group));
        }
    };
    match (h.cell(r, c), h.cell_sigma(r, c)) {
        (Some(_), Some(s)) if sigma => view! {
            <td style=cell_style(sigma_rgb(s, h.sigma_max)) title=title data-v=s.to_string() on:click=click>{format!("{s:.2}")}</td>
        }
        .into_any(),
        (Some((t, _)), _) => {
            let noisy = h.noisy(r, c, threshold);
            let within = h.within_neighbours_noise(r, c) == Some(true);
            let bg = theta_rgb(t);
            let style = format!(
                "{}{}{}",
                cell_style(bg),
                if noisy { format!(";{NOISY_STYLE}") } else { String::new() },
                if within { format!(";{}", hatch_style(ink(bg))) } else { String::new() }
            );
            view! {
                <td style=style title=title data-v=t.to_string() data-noisy=noisy.then_some("1")
                    data-within-noise=within.then_some("1") data-layer=layer.map(|l| l.to_string())
                    data-group=group.name() on:click=click>{format!("{t:.1}")}</td>
            }
            .into_any()
        }
        _ => view! { <td></td> }.into_any(),
    }
}
