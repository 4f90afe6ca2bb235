//! θ per tensor group (attention, feed-forward, …).

use leptos::prelude::*;
use organ_core::report::ModelReport;
use std::sync::Arc;

/// Each group's tensor count and θ mean, min and max.
#[component]
pub fn GroupTable(m: Arc<ModelReport>) -> impl IntoView {
    view! {
        <h3>"Groups"</h3>
        <table id="groups"><thead><tr><th>"group"</th><th>"tensors"</th><th>"θ mean"</th><th>"θ min"</th><th>"θ max"</th></tr></thead><tbody>
        {m.summary.groups.iter().map(|g| view! {
            <tr><td>{g.group.name()}</td><td class="n">{g.count}</td><td class="n">{format!("{:.3}", g.mean)}</td><td class="n">{format!("{:.3}", g.min)}</td><td class="n">{format!("{:.3}", g.max)}</td></tr>
        }).collect_view()}
        </tbody></table>
    }
}
