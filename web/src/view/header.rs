//! The page's header: the title, and a badge with the worker pool's size.

use crate::pool;
use leptos::prelude::*;

/// The title and the worker-thread badge, which warns when the page is not cross-origin
/// isolated and so measures on one thread.
#[component]
pub fn Header(
    /// Worker threads in the pool; 0 while it starts.
    threads: ReadSignal<usize>,
) -> impl IntoView {
    view! {
        <header class="top">
            <div>
                <h1>"organ"</h1>
                <p class="mute">"The Z-measure θ of every tensor of a GGUF model, or two models compared tensor by tensor, computed in this tab. The files never leave your machine."</p>
                <p class="mute" id="theta-caveat">"θ describes a tensor's values, not its worth to the model: it does not rank tensors by the damage their loss does (ρ ≈ 0.1 on SmolLM2, docs/validity.md); organ sensitivity measures that."</p>
            </div>
            <span id="threads" class="badge" data-threads=move || threads.get().to_string()
                class:warn=move || threads.get() == 1 && !pool::cross_origin_isolated()>
                {move || match threads.get() {
                    0 => "starting workers…".to_owned(),
                    1 if !pool::cross_origin_isolated() => "1 thread: this page is not cross-origin isolated (COOP/COEP), so no worker pool".to_owned(),
                    n => format!("{n} worker threads"),
                }}
            </span>
        </header>
    }
}
