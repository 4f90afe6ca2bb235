//! Where files come in: a drop target that is also a file chooser (a thin bar once a
//! report is on screen), and the page's mode tabs and the two drop targets of a
//! comparison (A, the base; B, the other).

use crate::state::{Mode, Role};
use leptos::prelude::*;

fn file_list(list: Option<web_sys::FileList>) -> Vec<web_sys::File> {
    let Some(list) = list else { return Vec::new() };
    (0..list.length()).filter_map(|i| list.get(i)).collect()
}

/// A drop zone: files dropped on it or chosen through it go to `on_files`.
#[component]
pub fn DropZone(
    /// Called with the files dropped or chosen (a model, its shards, or an export).
    on_files: Callback<Vec<web_sys::File>>,
    /// The zone's element id.
    #[prop(default = "drop")]
    id: &'static str,
    /// The file input's element id.
    #[prop(default = "file-input")]
    input_id: &'static str,
    /// What to drop, in bold.
    #[prop(into, default = Signal::stored("Drop a .gguf file here, or click to choose one".to_owned()))]
    title: Signal<String>,
    /// The line below it.
    #[prop(
        default = "All the shards of a split model together, or a report exported earlier (.json or .html). Any size: only the sampled blocks are read."
    )]
    hint: &'static str,
    /// Shrinks the zone to a thin bar (after a run: it still takes another file).
    #[prop(into, default = Signal::stored(false))]
    slim: Signal<bool>,
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
        <label id=id class="drop" class:over=move || dragging.get() class:slim=move || slim.get()
            on:dragover=move |ev: web_sys::DragEvent| { ev.prevent_default(); dragging.set(true); }
            on:dragleave=move |_| dragging.set(false)
            on:drop=on_drop>
            <input id=input_id type="file" multiple accept=".gguf,.json,.html" on:change=on_change />
            <b>{move || title.get()}</b>
            <span class="mute">{hint}</span>
        </label>
    }
}

/// The modes of the page, as tabs.
#[component]
pub fn ModeTabs(mode: ReadSignal<Mode>, on_mode: Callback<Mode>) -> impl IntoView {
    let tab = move |m: Mode, id: &'static str, label: &'static str| {
        view! {
            <button id=id class="tab" class:on=move || mode.get() == m aria-pressed=move || (mode.get() == m).to_string()
                on:click=move |_| on_mode.run(m)>{label}</button>
        }
    };
    view! {
        <nav class="tabs">
            {tab(Mode::Measure, "mode-measure", "Measure one model")}
            {tab(Mode::Compare, "mode-compare", "Compare two models")}
            {tab(Mode::Check, "mode-check", "Check one model")}
            {tab(Mode::Inspect, "mode-inspect", "Inspect and edit one model")}
            {tab(Mode::Quantize, "mode-quantize", "Quantize one model")}
        </nav>
    }
}

/// The drop zones of A (the base) and B (the other): the comparison starts once both hold
/// a model; dropping another file on either compares again.
#[component]
pub fn CompareInputs(
    /// The names of the files chosen as A and B (empty: none yet).
    names: ReadSignal<[String; 2]>,
    /// Called with the role and the files dropped or chosen.
    on_files: Callback<(Role, Vec<web_sys::File>)>,
    /// Shrinks both zones to thin bars (after a run).
    #[prop(into, default = Signal::stored(false))]
    slim: Signal<bool>,
) -> impl IntoView {
    let title = move |k: usize, role: &'static str| {
        Signal::derive(move || {
            let n = &names.get()[k];
            if n.is_empty() {
                format!("{role}: drop a .gguf here, or click")
            } else {
                format!("{role}: {n}")
            }
        })
    };
    view! {
        <div class="two pair-inputs">
            <DropZone id="drop-a" input_id="file-a" title=title(0, "A · the base")
                hint="The model compared against (e.g. the original). All shards of a split model together." slim
                on_files=Callback::new(move |f| on_files.run((Role::A, f))) />
            <DropZone id="drop-b" input_id="file-b" title=title(1, "B · the other")
                hint="The model compared with A (a finetune, a requantization, a graft…). Or drop a compare report (.json, .html)." slim
                on_files=Callback::new(move |f| on_files.run((Role::B, f))) />
        </div>
    }
}
