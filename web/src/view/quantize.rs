//! Quantize mode on screen (`organ quantize` in the page): the model opened, the type to
//! quantize to with its plan previewed (the sizes `organ quantize --dry-run` prints, and
//! how many tensors get each type), the button that asks where to save and writes, and
//! after it the report the CLI prints, its export, the run's figures and the page's memory.

use crate::export;
use crate::state::{QuantizeData, Quantized};
use leptos::prelude::*;
use organ_core::quantize::ftype::NAMES;
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
) -> impl IntoView {
    let ty = RwSignal::new(DEFAULT_TYPE.to_owned());
    // Re-planned when the type or the importance matrix changes.
    let preview = Memo::new(move |_| {
        imatrix.track();
        on_preview.run(ty.get())
    });
    let types: Vec<String> = data.types.iter().map(|(t, n)| format!("{n} {}", t.name())).collect();
    let about = format!(
        "{} · {} · {} tensors ({})",
        data.label,
        human_bytes(data.file_bytes),
        data.n_tensors,
        types.join(", ")
    );
    let options =
        NAMES.iter().map(|(n, _)| view! { <option value=*n selected=*n == DEFAULT_TYPE>{*n}</option> }).collect_view();
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
