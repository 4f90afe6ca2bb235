//! The report of one model: its title and exports, then the summary, the metadata, the
//! groups and wells beside the heatmap, θ per expert (for a mixture of experts), and the
//! tensor table.

use super::experts::ExpertsView;
use super::groups::GroupTable;
use super::heatmap::HeatmapView;
use super::metadata::MetadataTable;
use super::sensitivity::SensitivityPanel;
use super::summary::{QuantMix, SummaryCards};
use super::tensor_table::TensorTable;
use super::wells::Wells;
use crate::export;
use crate::state::{SensData, ViewData};
use leptos::prelude::*;
use organ_core::report::formats::{AnyReport, Format, Kind};
use organ_core::report::human_bytes;
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
        move || view! { <TensorTable m=m.clone() histograms=histograms.clone() sens=sens.get() /> }
    };
    let measure = data.report.measure.clone();
    let exact = (measure != organ_core::zmeasure::MEASURE)
        .then(|| format!("Measure {measure}: θ over every value, no sampling (not comparable with sampled θ)."));
    view! {
        <section id="report" data-done="1" data-elapsed-ms=ms.to_string() data-bytes-read=bytes.to_string() data-threads=n.to_string() data-measure=measure>
            <div class="row">
                <h2>{m.model.clone()}</h2>
                <div class="actions">
                    {export::buttons(Kind::Measure, "export", offer)}
                </div>
            </div>
            {run.map(|r| view! { <p class="mute" id="run">{r}</p> })}
            {exact.map(|r| view! { <p class="mute" id="measure-exact">{r}</p> })}
            <SummaryCards m=m.clone() version=data.version />
            <QuantMix m=m.clone() />
            <MetadataTable rows=data.metadata.clone() />
            <div class="two">
                <div>
                    <GroupTable m=m.clone() />
                    <Wells m=m.clone() />
                </div>
                <HeatmapView m=m.clone() />
            </div>
            <ExpertsView m=m.clone() />
            <SensitivityPanel m=m.clone() sens can_predict on_predict on_open />
            {table}
        </section>
    }
    .into_any()
}
