//! The wells: the tensors of lowest θ, among the weight matrices unless the viewer asks for
//! all tensors (norm vectors and routers: §4's wells, as the report's summary holds them).

use leptos::prelude::*;
use organ_core::report::{summary, ModelReport, WELLS};
use std::sync::Arc;

/// The wells, lowest θ first, with their group, and σ_θ when measured (§7); a checkbox adds
/// the norm vectors and routers. A well clicked goes to `on_pick`, the one `selected` is
/// marked.
#[component]
pub fn Wells(m: Arc<ModelReport>, selected: RwSignal<Option<String>>, on_pick: Callback<String>) -> impl IntoView {
    let all = RwSignal::new(false);
    let list = move || {
        summary::wells(&m.tensors, all.get(), WELLS)
            .into_iter()
            .map(|w| {
                let (is, pick) = (w.name.clone(), w.name.clone());
                view! {
                    <li data-name=w.name.clone() class:sel=move || selected.with(|s| s.as_ref() == Some(&is)) on:click=move |_| on_pick.run(pick.clone())>
                        <code>{w.name.clone()}</code>" "<span class="mute">{w.group.name()}</span>" "{format!("{:.3}°", w.theta)}{w.sigma.map(|s| format!(" ± {s:.3}°"))}
                    </li>
                }
            })
            .collect_view()
    };
    view! {
        <h3>"Wells: the lowest θ"</h3>
        <p class="mute"><label><input id="all-wells" type="checkbox" on:change=move |ev| all.set(event_target_checked(&ev)) />
            " among all tensors (norm vectors and routers too; else the weight matrices only)"</label></p>
        <ol id="wells" class="wells">{list}</ol>
    }
}
