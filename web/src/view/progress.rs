//! A measurement's or comparison's progress: a bar, tensors and bytes done, the time left, and Cancel.

use crate::reads::Progress;
use leptos::prelude::*;
use organ_core::report::human_bytes;

/// The progress bar of the model being measured.
#[component]
pub fn ProgressBar(
    /// The model's label.
    name: String,
    progress: ReadSignal<Progress>,
    /// Called when the user presses Cancel.
    on_cancel: Callback<()>,
    /// What is under way: "Measuring", "Comparing".
    #[prop(default = "Measuring")]
    verb: &'static str,
    /// What `done` and `total` count.
    #[prop(default = "tensors")]
    unit: &'static str,
) -> impl IntoView {
    view! {
        <section id="progress" class="progress">
            <div class="row">
                <b>{verb}" "{name}</b>
                <button id="cancel" on:click=move |_| on_cancel.run(())>"Cancel"</button>
            </div>
            <div class="bar"><div class="fill" style:width=move || {
                let p = progress.get();
                format!("{:.1}%", if p.total == 0 { 0.0 } else { 100.0 * p.done as f64 / p.total as f64 })
            }></div></div>
            <p class="mute">{move || {
                let p = progress.get();
                let left = p.eta_ms().map_or_else(String::new, |ms| format!(" · about {:.1} s left", ms / 1000.0));
                format!("{} / {} {unit} · {} read of {}{left}", p.done, p.total, human_bytes(p.bytes_read), human_bytes(p.bytes_total))
            }}</p>
        </section>
    }
}
