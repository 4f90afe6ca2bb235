//! θ per expert (§6): a layer × expert heatmap per FFN kind (gate, up, down), the core's
//! `ExpertHeatmap` as the static page draws it, outliers outlined and duplicates marked
//! `=k`; then the routers and shared experts, named as such. Nothing for a model without
//! per-expert θ. Each cell's `data-*` attributes carry its figures in full.

use leptos::prelude::*;
use organ_core::anatomy::OrganKind;
use organ_core::report::{
    cell_style, experts_caption, theta_legend, theta_rgb, ExpertHeatmap, ModelReport, THETA_SCALE,
};
use std::sync::Arc;

/// A number's attribute value: every digit (the shortest form that reads back the same).
fn full(x: Option<f64>) -> String {
    x.map_or_else(String::new, |v| v.to_string())
}

/// One FFN kind's heatmap: a row per layer, a column per expert.
fn heatmap(m: &ModelReport, h: &ExpertHeatmap) -> impl IntoView {
    let kind = h.kind.clone();
    // Each row's tensor, by layer, for the cells' names.
    let tensor = |layer: u32| {
        let suffix = format!("ffn_{kind}_exps");
        (m.tensors.iter())
            .find(|t| t.layer == Some(layer) && t.experts.is_some() && t.name.contains(&suffix))
            .map_or_else(String::new, |t| t.name.clone())
    };
    let rows = (h.layers.iter().enumerate())
        .map(|(r, &l)| {
            let name = tensor(l);
            let cells = (0..h.experts as usize)
                .map(|e| match h.cell(r, e) {
                    None => view! { <td></td> }.into_any(),
                    Some(c) => {
                        let (outline, words, dup) = h.marks(r, e);
                        let style = format!("{}{outline}", cell_style(theta_rgb(c.theta)));
                        let sigma = c.sigma.map_or_else(String::new, |s| format!(" ± {s:.3}°"));
                        let title = format!("layer {l} expert {e}: θ {:.3}°{sigma}{words}", c.theta);
                        let standing = h.standing(r, e).name();
                        view! {
                            <td style=style title=title data-name=name.clone() data-expert=e.to_string()
                                data-theta=full(Some(c.theta)) data-sigma=full(c.sigma)
                                data-degenerate=c.degenerate.to_string() data-outlier=c.outlier.to_string() data-standing=standing
                                data-duplicate-of=c.duplicate_of.map_or_else(String::new, |d| d.to_string())>
                                {format!("{:.1}{dup}", c.theta)}
                            </td>
                        }
                        .into_any()
                    }
                })
                .collect_view();
            view! { <tr><td>{l}</td>{cells}</tr> }
        })
        .collect_view();
    view! {
        <h4>{format!("{} experts", h.kind)}</h4>
        <div class="hscroll">
            <table class="heat experts" data-kind=h.kind.clone()>
                <thead><tr><th>"layer"</th>{(0..h.experts).map(|e| view! { <th>{e}</th> }).collect_view()}</tr></thead>
                <tbody>{rows}</tbody>
            </table>
        </div>
    }
}

/// The experts section of a model's report.
#[component]
pub fn ExpertsView(m: Arc<ModelReport>) -> impl IntoView {
    let maps = ExpertHeatmap::of(&m);
    if maps.is_empty() {
        return ().into_any();
    }
    let others: Vec<_> = (m.tensors.iter())
        .filter(|t| matches!(t.organ, Some(OrganKind::Router | OrganKind::SharedExpert)))
        .map(|t| {
            let kind = if t.organ == Some(OrganKind::Router) { "router" } else { "shared expert" };
            let sigma = t.sigma.map_or_else(String::new, |s| format!(" ± {s:.3}"));
            let theta = t.theta.map_or_else(String::new, |x| format!("{x:.3}"));
            view! {
                <tr data-name=t.name.clone() data-kind=kind data-theta=full(t.theta)>
                    <td>{t.name.clone()}</td><td>{kind}</td>
                    <td class="n">{t.layer.map_or_else(String::new, |l| l.to_string())}</td>
                    <td class="n">{format!("{theta}{sigma}")}</td>
                </tr>
            }
        })
        .collect_view();
    view! {
        <section id="experts" class="card">
            <h3>"θ per expert"</h3>
            <p class="mute" id="experts-caption">{experts_caption(&maps)}</p>
            <p class="mute legend-line">{format!("{:.0}° ", THETA_SCALE.0)}<span class="legend" style:background=theta_legend()></span>
                {format!(" {:.0}° (the fixed θ scale of the layer heatmap: gate, up and down compare)", THETA_SCALE.1)}</p>
            {maps.iter().map(|h| heatmap(&m, h)).collect_view()}
            <h4>"Routers and shared experts"</h4>
            <table id="routers" class="routers">
                <thead><tr><th>"tensor"</th><th>"kind"</th><th data-num>"layer"</th><th data-num>"θ"</th></tr></thead>
                <tbody>{others}</tbody>
            </table>
        </section>
    }
    .into_any()
}
