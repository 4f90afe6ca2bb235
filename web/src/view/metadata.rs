//! The model's metadata keys, folded away under a summary line: a filter on the keys, and
//! long strings (a chat template) cut to a line, shown whole on demand.

use crate::source::MetaRow;
use leptos::prelude::*;

/// Whether a key is shown for the filter `q`: every key for an empty filter, else the keys
/// that contain it, case aside.
pub(super) fn shown(key: &str, q: &str) -> bool {
    q.is_empty() || key.to_lowercase().contains(&q.to_lowercase())
}

/// A value: its one-line form, and for a string cut there, the whole string under it.
pub(super) fn value(r: &MetaRow) -> impl IntoView {
    match &r.whole {
        None => r.value.clone().into_any(),
        Some(whole) => view! {
            <details class="whole"><summary>{r.value.clone()}" (show whole)"</summary><pre>{whole.clone()}</pre></details>
        }
        .into_any(),
    }
}

/// Every metadata key with its type and value, with a filter on the keys; nothing when there
/// are none (a report opened from an export carries no metadata).
#[component]
pub fn MetadataTable(rows: Vec<MetaRow>) -> impl IntoView {
    let (query, set_query) = signal(String::new());
    let total = rows.len();
    let keys: Vec<String> = rows.iter().map(|r| r.key.clone()).collect();
    let count = move || {
        let q = query.get();
        let n = keys.iter().filter(|k| shown(k, &q)).count();
        if q.is_empty() {
            String::new()
        } else {
            format!("{n} of {total} keys")
        }
    };
    (!rows.is_empty()).then(|| {
        view! {
            <details class="meta"><summary>{format!("Metadata ({total} keys)")}</summary>
                <p class="row filters"><input id="meta-filter" type="search" placeholder="filter keys (tokenizer, rope, chat_template…)"
                    on:input=move |ev| set_query.set(event_target_value(&ev)) />
                    <span class="mute" id="meta-count">{count}</span></p>
                <table id="metadata"><thead><tr><th>"key"</th><th>"type"</th><th>"value"</th></tr></thead><tbody>
                {rows.into_iter().map(|r| {
                    let key = r.key.clone();
                    view! {
                        <tr data-key=r.key.clone() hidden=move || !shown(&key, &query.get())>
                            <td><code>{r.key.clone()}</code></td><td>{r.ty.clone()}</td><td class="val">{value(&r)}</td>
                        </tr>
                    }
                }).collect_view()}
                </tbody></table>
            </details>
        }
    })
}
