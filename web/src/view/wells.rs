//! The wells: the tensors of lowest θ.

use leptos::prelude::*;
use organ_core::report::ModelReport;
use std::sync::Arc;

/// The report's wells, lowest θ first, with their group, and σ_θ when measured (§7).
#[component]
pub fn Wells(m: Arc<ModelReport>) -> impl IntoView {
    view! {
        <h3>"Wells: the lowest θ"</h3>
        <ol id="wells" class="wells">
        {m.summary.wells.iter().map(|w| view! { <li><code>{w.name.clone()}</code>" "<span class="mute">{w.group.name()}</span>" "{format!("{:.3}°", w.theta)}{w.sigma.map(|s| format!(" ± {s:.3}°"))}</li> }).collect_view()}
        </ol>
    }
}
