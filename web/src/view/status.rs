//! What is under way, or what went wrong: one line below the drop zone, or the progress bar.

use super::progress::ProgressBar;
use crate::reads::Progress;
use crate::state::Phase;
use leptos::prelude::*;

/// The phase in words: nothing when idle or done, the progress bar while measuring.
#[component]
pub fn StatusLine(
    phase: ReadSignal<Phase>,
    progress: ReadSignal<Progress>,
    /// Called when the user cancels the measurement.
    on_cancel: Callback<()>,
) -> impl IntoView {
    move || match phase.get() {
        Phase::Idle | Phase::Done => ().into_any(),
        Phase::Reading(name) => {
            view! { <p id="status" class="status">"Reading the header of " {name} "…"</p> }.into_any()
        }
        Phase::Measuring(name) => view! { <ProgressBar name progress on_cancel /> }.into_any(),
        Phase::Checking(name) => view! { <ProgressBar name progress on_cancel verb="Checking" /> }.into_any(),
        Phase::Predicting(name) => {
            view! { <ProgressBar name progress on_cancel verb="Predicting the sensitivity of" unit="steps" /> }
                .into_any()
        }
        Phase::Quantizing(name) => view! { <ProgressBar name progress on_cancel verb="Quantizing" /> }.into_any(),
        Phase::Comparing(name) => {
            view! { <ProgressBar name progress on_cancel verb="Comparing" unit="pairs" /> }.into_any()
        }
        Phase::Cancelled => {
            view! { <p id="status" class="status">"Cancelled. Drop a file to start again."</p> }.into_any()
        }
        Phase::Error(e) => view! { <p id="error" class="error" role="alert">{e}</p> }.into_any(),
    }
}
