//! Sensitivity beside θ: predict it here from the weights alone, or open what `organ
//! sensitivity` measured through llama.cpp; each figure stands in the tensor table beside
//! θ, and these lines say how the rankings agree (Spearman's ρ), with what the data-free
//! prediction was measured to be worth.

use crate::state::SensData;
use leptos::prelude::*;
use organ_core::predict::Calibration;
use organ_core::quant::quantize::can_quantize;
use organ_core::report::ModelReport;
use organ_core::sensitivity::predicted::rank_against;
use organ_core::sensitivity::spearman;
use organ_core::GgmlType;
use std::collections::HashMap;
use std::sync::Arc;

/// The controls and what the opened and predicted figures say.
#[component]
pub fn SensitivityPanel(
    m: Arc<ModelReport>,
    sens: ReadSignal<SensData>,
    /// Whether the model was measured in this tab (a prediction reads its weights).
    can_predict: bool,
    on_predict: Callback<GgmlType>,
    on_open: Callback<Vec<web_sys::File>>,
) -> impl IntoView {
    let ty = RwSignal::new(GgmlType::Q4_0);
    let types: Vec<GgmlType> = GgmlType::ALL.iter().copied().filter(|t| can_quantize(*t)).collect();
    let title = if can_predict { "" } else { "Measure the model in this tab to predict its sensitivity" };
    let on_file = move |ev: web_sys::Event| {
        let input: web_sys::HtmlInputElement = event_target(&ev);
        if let Some(list) = input.files() {
            on_open.run((0..list.length()).filter_map(|i| list.get(i)).collect());
        }
        // The same file chosen again is a change again.
        input.set_value("");
    };
    view! {
        <section id="sensitivity">
            <h3>"Sensitivity"</h3>
            <p class="mute">"What a weight is worth to the model: the KL divergence from it when that weight alone is changed. "
                <code>"organ sensitivity --json"</code>" measures it through llama.cpp (open its report here); the prediction reads only the weights."</p>
            <div class="row">
                <select id="predict-type" on:change=move |ev| {
                    if let Some(t) = GgmlType::from_name(&event_target_value(&ev)) { ty.set(t) }
                }>
                    {types.into_iter().map(|t| view! { <option value=t.name() selected={t == GgmlType::Q4_0}>{t.name()}</option> }).collect_view()}
                </select>
                <button id="predict" disabled={!can_predict} on:click=move |_| on_predict.run(ty.get_untracked()) title=title>
                    "Predict (data-free)"
                </button>
                <label>"Open a sensitivity report (.json): "
                    <input id="open-sensitivity" type="file" accept=".json,application/json" on:change=on_file />
                </label>
            </div>
            {move || lines(&m, &sens.get())}
        </section>
    }
}

/// What the prediction, the measured report and θ say together.
fn lines(m: &ModelReport, s: &SensData) -> impl IntoView {
    let fmt_rho = |x: Option<f64>| x.map_or_else(|| "undefined".to_owned(), |x| format!("{x:+.2}"));
    let predicted = s.predicted.as_ref().map(|p| {
        let mut top: Vec<_> = p.tensors.iter().collect();
        top.sort_by(|a, b| b.predicted_kld.total_cmp(&a.predicted_kld));
        let top: Vec<String> = top.iter().take(3).map(|t| format!("{} ({:.2e})", t.name, t.predicted_kld)).collect();
        view! {
            <p id="predicted" data-n=p.tensors.len().to_string() data-change=p.change.clone()>
                {format!(
                    "Predicted from the weights alone, each block weight in {}: {} weights, most sensitive {}. A data-free prediction {} (docs/predict.md).",
                    p.change, p.tensors.len(), top.join(", "), Calibration::measured_rho(false)
                )}
            </p>
        }
    });
    let measured = s.measured.as_ref().map(|r| {
        let theta: HashMap<&str, f64> = m.tensors.iter().filter_map(|t| Some((t.name.as_str(), t.theta?))).collect();
        let (a, b): (Vec<f64>, Vec<f64>) = r.klds.iter().filter_map(|(n, k)| Some((*theta.get(n.as_str())?, *k))).unzip();
        let rho = spearman(&a, &b);
        view! {
            <p id="measured" data-n=r.klds.len().to_string() data-change=r.change.clone() data-rho-theta=rho.map(|x| x.to_string()).unwrap_or_default()>
                {format!(
                    "Measured ({}, {}): {} tensors. θ against the measured KLD: ρ {} over {} tensors: θ describes values, not worth (docs/validity.md).",
                    r.file, r.change, r.klds.len(), fmt_rho(rho), a.len()
                )}
            </p>
        }
    });
    let both = s.predicted.as_ref().zip(s.measured.as_ref()).map(|(p, r)| {
        if !p.change.eq_ignore_ascii_case(&r.change) {
            let text = format!(
                "The report measured {} and the prediction is for {}: predict {} to rank one against the other.",
                r.change, p.change, r.change
            );
            return view! { <p id="predicted-vs-measured" class="mute">{text}</p> }.into_any();
        }
        let klds: HashMap<&str, f64> = r.klds.iter().map(|(n, k)| (n.as_str(), *k)).collect();
        let mut rows = p.tensors.clone();
        let k = rank_against(&mut rows, |n| klds.get(n).copied());
        view! {
            <p id="predicted-vs-measured" data-rho=k.overall.map(|x| x.to_string()).unwrap_or_default()
                data-within=k.within_kind_mean.map(|x| x.to_string()).unwrap_or_default()>
                {format!(
                    "The prediction against the measurement: ρ {} overall, {} within kind (mean), over {} weights.",
                    fmt_rho(k.overall), fmt_rho(k.within_kind_mean), k.n
                )}
            </p>
        }
        .into_any()
    });
    (predicted, measured, both)
}
