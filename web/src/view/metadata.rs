//! The model's metadata keys, folded away under a summary line.

use crate::source::MetaRow;
use leptos::prelude::*;

/// Every metadata key with its type and value; nothing when there are none (a report
/// opened from an export carries no metadata).
#[component]
pub fn MetadataTable(rows: Vec<MetaRow>) -> impl IntoView {
    (!rows.is_empty()).then(|| {
        view! {
            <details class="meta"><summary>{format!("Metadata ({} keys)", rows.len())}</summary>
                <table><thead><tr><th>"key"</th><th>"type"</th><th>"value"</th></tr></thead><tbody>
                {rows.into_iter().map(|r| view! { <tr><td><code>{r.key}</code></td><td>{r.ty}</td><td class="val">{r.value}</td></tr> }).collect_view()}
                </tbody></table>
            </details>
        }
    })
}
