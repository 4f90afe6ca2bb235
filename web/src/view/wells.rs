//! The wells: the tensors of lowest θ.

use leptos::prelude::*;
use organ_core::report::ModelReport;
use std::sync::Arc;

/// The report's wells, lowest θ first, with their group, and σ_θ when measured (§7); a
/// well clicked goes to `on_pick`, the one `selected` is marked.
#[component]
pub fn Wells(m: Arc<ModelReport>, selected: RwSignal<Option<String>>, on_pick: Callback<String>) -> impl IntoView {
    view! {
        <h3>"Wells: the lowest θ"</h3>
        <ol id="wells" class="wells">
        {m.summary.wells.iter().map(|w| {
            let (is, pick) = (w.name.clone(), w.name.clone());
            view! {
                <li data-name=w.name.clone() class:sel=move || selected.with(|s| s.as_ref() == Some(&is)) on:click=move |_| on_pick.run(pick.clone())>
                    <code>{w.name.clone()}</code>" "<span class="mute">{w.group.name()}</span>" "{format!("{:.3}°", w.theta)}{w.sigma.map(|s| format!(" ± {s:.3}°"))}
                </li>
            }
        }).collect_view()}
        </ol>
    }
}
