//! Quantize mode on screen (`organ quantize` in the page): the model opened, the type to
//! quantize to with its plan previewed (the sizes `organ quantize --dry-run` prints, and
//! how many tensors get each type), the button that asks where to save and writes, and
//! after it the report the CLI prints, its export, the run's figures and the page's memory.

use crate::app::RECIPE;
use crate::export;
use crate::state::{QuantizeData, Quantized};
use leptos::prelude::*;
use organ_core::quantize::ftype::NAMES;
use organ_core::recipe::report::Recipe;
use organ_core::report::formats::{AnyReport, Format, Kind, Shown, TEXT};
use organ_core::report::human_bytes;
use std::sync::Arc;

/// The type picked first: the preset most people want.
const DEFAULT_TYPE: &str = "Q4_K_M";

/// The model to quantize, and what was written.
#[component]
pub fn QuantizeView(
    data: Arc<QuantizeData>,
    /// The importance matrix's file name (empty: none).
    imatrix: ReadSignal<String>,
    quantized: ReadSignal<Quantized>,
    /// The plan of a type: the sizes and type counts, or why the core refuses it.
    on_preview: Callback<String, Result<String, String>>,
    /// Quantize to this type.
    on_quantize: Callback<String>,
    /// Let go of the importance matrix.
    on_no_imatrix: Callback<()>,
    /// The recipe chosen last, if any.
    recipe: ReadSignal<Option<Arc<Recipe>>, LocalStorage>,
    /// Choose the recipe for a target (`5.5bpw`, `90M`) among types, predicted from the
    /// importance matrix dropped or from the weights alone.
    on_recipe: Callback<(String, String)>,
) -> impl IntoView {
    let ty = RwSignal::new(DEFAULT_TYPE.to_owned());
    let target = RwSignal::new(String::new());
    let types = RwSignal::new(String::new());
    // Re-planned when the type, the importance matrix or the recipe changes.
    let preview = Memo::new(move |_| {
        imatrix.track();
        recipe.track();
        on_preview.run(ty.get())
    });
    let recipe_view = move || {
        (ty.get() == RECIPE).then(|| {
            let shown = recipe.get().map(|r| {
                let mut text = String::new();
                let _ = (TEXT.render)(AnyReport::Recipe(&r), &Shown::WHOLE, &mut text);
                let summary: Vec<&str> =
                    text.lines().filter(|l| l.starts_with("total:") || l.starts_with("predicted KLD")).collect();
                view! {
                    <p id="quant-recipe-summary">{format!("{}: {}", r.target, summary.join(" · "))}</p>
                    <details><summary>"The recipe, tensor by tensor"</summary><pre id="quant-recipe">{text.clone()}</pre></details>
                }
            });
            view! {
                <div class="row" id="quant-recipe-form">
                    <label>"Target "<input id="quant-target" placeholder="5.5bpw or 90M"
                        on:input=move |ev| target.set(event_target_value(&ev)) prop:value=move || target.get() /></label>
                    <label>"Types "<input id="quant-types" placeholder="Q2_K, Q3_K, Q4_K, … Q8_0 (organ recipe's list)"
                        on:input=move |ev| types.set(event_target_value(&ev)) prop:value=move || types.get() /></label>
                    <button id="quant-recipe-go" on:click=move |_| on_recipe.run((target.get_untracked(), types.get_untracked()))>
                        "Choose the recipe"</button>
                </div>
                <p class="mute">{move || format!(
                    "Each block weight's KL divergence in each type is predicted {}, and the types that minimise their sum within the target are chosen, as organ recipe {} chooses them; the other tensors stay Q8_0.",
                    if imatrix.get().is_empty() { "from the weights alone (no text)".to_owned() } else { format!("from the importance matrix {}, and the file is quantized under it", imatrix.get()) },
                    if imatrix.get().is_empty() { "--data-free" } else { "--imatrix" },
                )}</p>
                {shown}
            }
        })
    };
    let types: Vec<String> = data.types.iter().map(|(t, n)| format!("{n} {}", t.name())).collect();
    let about = format!(
        "{} · {} · {} tensors ({})",
        data.label,
        human_bytes(data.file_bytes),
        data.n_tensors,
        types.join(", ")
    );
    let options = (NAMES.iter().map(|(n, _)| (*n, *n)))
        .chain(std::iter::once((RECIPE, "a recipe for a size")))
        .map(|(v, label)| view! { <option value=v selected=v == DEFAULT_TYPE>{label}</option> })
        .collect_view();
    view! {
        <section id="quantize">
            <h2>{about}</h2>
            <div class="row">
                <label>"Type "
                    <select id="quant-type" on:change=move |ev| ty.set(event_target_value(&ev))>{options}</select>
                </label>
                <button id="quant-go" disabled=move || preview.with(Result::is_err)
                    on:click=move |_| on_quantize.run(ty.get_untracked())>"Quantize and save…"</button>
                {move || (!imatrix.get().is_empty()).then(|| view! {
                    <button id="quant-no-imatrix" on:click=move |_| on_no_imatrix.run(())>"Without the importance matrix"</button>
                })}
            </div>
            {recipe_view}
            {move || match preview.get() {
                Ok(text) => view! { <pre id="quant-plan">{text}</pre> }.into_any(),
                Err(e) => view! { <p id="quant-refused" class="error">{e}</p> }.into_any(),
            }}
            {move || match quantized.get() {
                Quantized::Idle => ().into_any(),
                Quantized::Wrote { report, file, run: (ms, bytes, n), heap } => {
                    let r = report.clone();
                    let offer = move |f: &Format| export::offer(AnyReport::Quantize(&r), f);
                    let mut text = String::new();
                    let _ = (TEXT.render)(AnyReport::Quantize(&report), &Shown::WHOLE, &mut text);
                    let heap_text = heap.map_or_else(String::new, |(js, wasm)| {
                        format!(" The page's memory at the end: JS heap {}, wasm memory {}.", human_bytes(js as u64), human_bytes(wasm as u64))
                    });
                    let run = format!(
                        "Wrote {file} ({}) in {:.2} s on {n} thread{}, reading {}.{heap_text}",
                        human_bytes(report.file_bytes),
                        ms / 1000.0,
                        if n == 1 { "" } else { "s" },
                        human_bytes(bytes),
                    );
                    let (js, wasm) = heap.unwrap_or((f64::NAN, f64::NAN));
                    view! {
                        <div id="quant-done" data-file=file.clone() data-file-bytes=report.file_bytes.to_string()
                            data-elapsed-ms=ms.to_string() data-bytes-read=bytes.to_string() data-threads=n.to_string()
                            data-js-heap=js.to_string() data-wasm-memory=wasm.to_string()>
                            <div class="row">
                                <p class="mute" id="run">{run}</p>
                                <div class="actions">{export::buttons(Kind::Quantize, "export-quantize", offer)}</div>
                            </div>
                            <pre id="quant-report">{text}</pre>
                        </div>
                    }
                    .into_any()
                }
            }}
        </section>
    }
}
