//! The report of one model: its title, "Compare with…" and the exports, then the summary,
//! the metadata, the groups and wells beside the heatmap, θ by layer, θ per expert (for a
//! mixture of experts), and the tensor table, which a click on a heatmap cell, a well or a
//! point of θ by layer moves to its tensors.

use super::experts::ExpertsView;
use super::groups::GroupTable;
use super::heatmap::HeatmapView;
use super::metadata::MetadataTable;
use super::sensitivity::SensitivityPanel;
use super::summary::{QuantMix, SummaryCards};
use super::tensor_table::TensorTable;
use super::wells::Wells;
use crate::export;
use crate::state::{SensData, TensorView, ViewData};
use leptos::prelude::*;
use organ_core::anatomy::Group;
use organ_core::report::formats::{AnyReport, Format, Kind};
use organ_core::report::{adapter_facts, human_bytes, theta_by_layer_svg};
use organ_core::GgmlType;
use std::sync::Arc;

/// The report on screen. Its `data-*` attributes carry the run's figures for the tests
/// and benches: milliseconds from file chosen to report built, bytes read, threads.
#[component]
pub fn ReportView(
    data: Arc<ViewData>,
    /// Sensitivity beside θ.
    sens: ReadSignal<SensData>,
    /// Whether the model was measured in this tab (a prediction reads its weights).
    can_predict: bool,
    on_predict: Callback<GgmlType>,
    /// A measured sensitivity report chosen.
    on_open: Callback<Vec<web_sys::File>>,
    /// The tensor table's sort, filters and selection, which the heatmap and wells set.
    view: TensorView,
    /// Whether this model can be compared with another (its files were measured here).
    can_compare: bool,
    /// "Compare with…" clicked.
    on_compare: Callback<()>,
) -> impl IntoView {
    let Some(m) = data.report.models.first().cloned() else {
        return view! { <p id="error" class="error">"This report holds no model."</p> }.into_any();
    };
    let m = Arc::new(m);
    let offer = {
        let d = data.clone();
        move |f: &Format| export::offer(AnyReport::Measure(&d.report), f)
    };
    let run = data.run.map(|(ms, bytes, n)| {
        format!(
            "Measured in {:.2} s on {n} thread{}, reading {} of {}.",
            ms / 1000.0,
            if n == 1 { "" } else { "s" },
            human_bytes(bytes),
            human_bytes(m.file_bytes)
        )
    });
    let (ms, bytes, n) = data.run.unwrap_or((0.0, 0, 0));
    // The table is built again when sensitivity figures arrive (its rows are built once).
    let table = {
        let (m, histograms) = (m.clone(), Arc::new(data.histograms.clone()));
        move || view! { <TensorTable m=m.clone() histograms=histograms.clone() sens=sens.get() view /> }
    };
    // A heatmap cell shows its tensors (its layer and group), the first selected; a well
    // or a point of θ by layer selects its tensor, every filter cleared so its row shows.
    let on_cell = {
        let m = m.clone();
        Callback::new(move |(l, g): (u32, Group)| {
            view.query.set(String::new());
            view.group.set(g.name().to_owned());
            view.layer.set(Some(l));
            view.selected.set(m.tensors.iter().find(|t| t.layer == Some(l) && t.group == g).map(|t| t.name.clone()));
            reveal();
        })
    };
    let on_pick = Callback::new(move |name: String| {
        view.query.set(String::new());
        view.group.set(String::new());
        view.layer.set(None);
        view.selected.set(Some(name));
        reveal();
    });
    let plot = theta_by_layer_svg(&m);
    let on_plot = move |ev: web_sys::MouseEvent| {
        let target = ev.target().and_then(|t| wasm_bindgen::JsCast::dyn_into::<web_sys::Element>(t).ok());
        let circle = target.and_then(|t| t.closest("circle[data-name]").ok().flatten());
        if let Some(name) = circle.and_then(|c| c.get_attribute("data-name")) {
            on_pick.run(name);
        }
    };
    let measure = data.report.measure.clone();
    let exact = (measure != organ_core::zmeasure::MEASURE)
        .then(|| format!("Measure {measure}: θ over every value, no sampling (not comparable with sampled θ)."));
    view! {
        <section id="report" data-done="1" data-elapsed-ms=ms.to_string() data-bytes-read=bytes.to_string() data-threads=n.to_string() data-measure=measure>
            <div class="row">
                <h2>{m.model.clone()}</h2>
                <div class="actions">
                    {can_compare.then(|| view! {
                        <button id="compare-with" title="Compare this model (as A) with another (B)" on:click=move |_| on_compare.run(())>"Compare with…"</button>
                    })}
                    {export::buttons(Kind::Measure, "export", offer)}
                </div>
            </div>
            {run.map(|r| view! { <p class="mute" id="run">{r}</p> })}
            {exact.map(|r| view! { <p class="mute" id="measure-exact">{r}</p> })}
            {m.adapter.as_ref().map(|a| view! { <p id="adapter-facts" class="facts">{adapter_facts(a)}"; rows are the updates ΔW = (α/r)·B·A"</p> })}
            <SummaryCards m=m.clone() version=data.version />
            <QuantMix m=m.clone() />
            <MetadataTable rows=data.metadata.clone() />
            <div class="two">
                <div>
                    <GroupTable m=m.clone() />
                    <Wells m=m.clone() selected=view.selected on_pick />
                </div>
                <HeatmapView m=m.clone() on_cell />
            </div>
            {(!plot.is_empty()).then(|| view! {
                <h3>"θ by layer"</h3>
                <div id="theta-by-layer" class="layer-plot" inner_html=plot on:click=on_plot></div>
            })}
            <ExpertsView m=m.clone() />
            <SensitivityPanel m=m.clone() sens can_predict on_predict on_open />
            {table}
        </section>
    }
    .into_any()
}

/// Scrolls the selected tensor's row into view (the table's top when none is), once the
/// page has shown what was just chosen.
fn reveal() {
    request_animation_frame(|| {
        let d = document();
        let row = d.query_selector("#tensors tr.sel").ok().flatten();
        if let Some(e) = row.or_else(|| d.get_element_by_id("tensors")) {
            e.scroll_into_view();
        }
    });
}
