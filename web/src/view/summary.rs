//! The model at a glance: cards with its facts and θ summary, and its quantization mix.

use leptos::prelude::*;
use organ_core::report::ModelReport;
use organ_core::report::{human_bytes, human_count};
use std::sync::Arc;

/// Architecture, name, size, tensor count, GGUF version and the θ summary, as cards.
#[component]
pub fn SummaryCards(
    m: Arc<ModelReport>,
    /// The GGUF version, when the model was read here.
    version: Option<u32>,
) -> impl IntoView {
    let s = &m.summary;
    view! {
        <div class="cards">
            <div class="card">"architecture"<b>{m.architecture.clone().unwrap_or_else(|| "?".into())}</b></div>
            <div class="card">"name"<b>{m.name.clone().unwrap_or_else(|| "?".into())}</b></div>
            <div class="card">"parameters"<b>{human_count(m.parameters)}</b></div>
            <div class="card">"file"<b>{human_bytes(m.file_bytes)}</b></div>
            <div class="card">"tensors"<b>{s.tensors}</b></div>
            {version.map(|v| view! { <div class="card">"GGUF"<b>{format!("v{v}")}</b></div> })}
            <div class="card">"θ mean"<b id="theta-mean">{format!("{:.3}°", s.theta_mean)}</b></div>
            {s.theta_mean_sigma.map(|x| view! {
                <div class="card" title="σ of θ mean: its spread over 8 other samples (§7)">"σ of θ mean"<b id="theta-mean-sigma" data-v=x.to_string()>{format!("± {x:.3}°")}</b></div>
            })}
            <div class="card">"θ weighted"<b>{format!("{:.3}°", s.theta_weighted)}</b></div>
            <div class="card">"signal"<b>{format!("{:.4}", s.signal)}</b></div>
        </div>
    }
}

/// Tensors per quantization type as a bar of proportional parts, and how many were
/// measured, degenerate or not measurable.
#[component]
pub fn QuantMix(m: Arc<ModelReport>) -> impl IntoView {
    let s = &m.summary;
    let types: Vec<(String, u64)> = m.types.iter().map(|(k, v)| (k.clone(), *v)).collect();
    let total_types: u64 = types.iter().map(|t| t.1).sum::<u64>().max(1);
    view! {
        <h3>"Quantization mix"</h3>
        <div class="mix">
            {types.into_iter().map(|(t, c)| view! {
                <span class="mixpart" style:flex-grow=c.to_string() title=format!("{t}: {c} tensors")>{format!("{t} × {c}")}</span>
            }).collect_view()}
        </div>
        <p class="mute">{format!("{} measured · {} degenerate · {} not measurable ({} tensors in all)", s.measured, s.degenerate, s.not_measurable, total_types)}</p>
    }
}
