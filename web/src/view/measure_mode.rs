//! How a model dropped in measure mode is measured: θ of the usual sample, θ with its σ
//! over 8 alternate draws, or θ over every value (§7; `organ measure`, `--sigma`, `--exact`).

use leptos::prelude::*;
use organ_core::zmeasure::Mode;

/// The choices, as the `<select>` lists them: value, label, mode.
const CHOICES: [(&str, &str, Mode); 3] = [
    ("sampled", "θ (100 000 sampled values)", Mode::Sampled),
    ("sigma", "θ ± σ (8 more samples, like --sigma)", Mode::Sigma),
    ("exact", "θ over every value (like --exact)", Mode::Exact),
];

/// A `<select>` of the measure's mode; `on_mode` gets the one chosen.
#[component]
pub fn MeasureModePicker(mode: ReadSignal<Mode>, on_mode: Callback<Mode>) -> impl IntoView {
    let on_change = move |ev: web_sys::Event| {
        let v = event_target_value(&ev);
        if let Some(&(_, _, m)) = CHOICES.iter().find(|c| c.0 == v) {
            on_mode.run(m);
        }
    };
    view! {
        <p class="row filters">
            <label for="measure-mode">"Measure: "</label>
            <select id="measure-mode" on:change=on_change>
                {CHOICES.iter().map(|&(v, label, m)| view! { <option value=v selected=move || mode.get() == m>{label}</option> }).collect_view()}
            </select>
            <span class="mute">"σ: how far each θ would move with another sample. It reads and measures up to nine times as much."</span>
        </p>
    }
}
