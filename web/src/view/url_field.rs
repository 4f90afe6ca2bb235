//! The URL field beside the drop zone: a model at an http(s) URL, read by range requests
//! (only the header and the sampled blocks, as for a dropped file). The host must allow
//! this page to read it (CORS); when it does not, the error says so and what to do.

use leptos::prelude::*;

/// A URL input and its button; `on_url` gets the URL given.
#[component]
pub fn UrlField(
    on_url: Callback<String>,
    /// The button's label.
    #[prop(default = "Measure")]
    button: &'static str,
    /// What is read, after the field.
    #[prop(
        default = "Read by range requests (the header and the sampled blocks only); the host must allow this page to read it (CORS)."
    )]
    note: &'static str,
) -> impl IntoView {
    let url = RwSignal::new(String::new());
    let submit = move |ev: web_sys::SubmitEvent| {
        ev.prevent_default();
        on_url.run(url.get_untracked());
    };
    view! {
        <form id="url-form" class="row filters" on:submit=submit>
            <label for="url">"Or a model at a URL: "</label>
            <input id="url" type="url" placeholder="https://host/path/model.gguf" style="flex:1;min-width:20em"
                prop:value=move || url.get() on:input=move |ev| url.set(event_target_value(&ev)) />
            <button id="url-open" type="submit">{button}</button>
            <span class="mute">{note}</span>
        </form>
    }
}
