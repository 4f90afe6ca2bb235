//! Where files come in: a drop target that is also a file chooser.

use leptos::prelude::*;

fn file_list(list: Option<web_sys::FileList>) -> Vec<web_sys::File> {
    let Some(list) = list else { return Vec::new() };
    (0..list.length()).filter_map(|i| list.get(i)).collect()
}

/// The drop zone: files dropped on it or chosen through it go to `on_files`.
#[component]
pub fn DropZone(
    /// Called with the files dropped or chosen (a model, its shards, or an export).
    on_files: Callback<Vec<web_sys::File>>,
) -> impl IntoView {
    let dragging = RwSignal::new(false);
    let on_change = move |ev: web_sys::Event| {
        let input: web_sys::HtmlInputElement = event_target(&ev);
        on_files.run(file_list(input.files()));
        input.set_value("");
    };
    let on_drop = move |ev: web_sys::DragEvent| {
        ev.prevent_default();
        dragging.set(false);
        on_files.run(file_list(ev.data_transfer().and_then(|d| d.files())));
    };
    view! {
        <label id="drop" class="drop" class:over=move || dragging.get()
            on:dragover=move |ev: web_sys::DragEvent| { ev.prevent_default(); dragging.set(true); }
            on:dragleave=move |_| dragging.set(false)
            on:drop=on_drop>
            <input id="file-input" type="file" multiple accept=".gguf,.json,.html" on:change=on_change />
            <b>"Drop a .gguf file here, or click to choose one"</b>
            <span class="mute">"All the shards of a split model together, or a report exported earlier (.json or .html). Any size: only the sampled blocks are read."</span>
        </label>
    }
}
