//! Reports in and out of the page: the exports the core's format registry marks for the
//! app (JSON and the static HTML page; JSON only for a check report), offered as
//! downloads from a local object URL (nothing is sent), and an export of a θ or compare
//! report opened again.

use crate::error::Error;
use leptos::prelude::*;
use organ_core::compare::CompareReport;
use organ_core::report::formats::{self, AnyReport, Format, Shown};
use organ_core::report::{html, Report, WELLS};
use serde::Deserialize;
use wasm_bindgen::JsCast;

/// Offers `text` as a download called `name`, from a local object URL (nothing is sent).
pub fn download(name: &str, mime: &str, text: &str) {
    let parts = js_sys::Array::of1(&text.into());
    let opts = web_sys::BlobPropertyBag::new();
    opts.set_type(mime);
    if let Ok(blob) = web_sys::Blob::new_with_str_sequence_and_options(&parts, &opts) {
        download_blob(name, &blob);
    }
}

/// Offers `blob` as a download called `name`, from a local object URL (nothing is sent).
/// The URL is let go a minute later, not at once: a blob made of a `File`'s slice is read
/// while the download runs.
pub fn download_blob(name: &str, blob: &web_sys::Blob) {
    let Ok(url) = web_sys::Url::create_object_url_with_blob(blob) else { return };
    if let Some(a) = document().create_element("a").ok().and_then(|e| e.dyn_into::<web_sys::HtmlAnchorElement>().ok()) {
        a.set_href(&url);
        a.set_download(name);
        a.click();
    }
    let revoke = wasm_bindgen::closure::Closure::once_into_js(move || {
        let _ = web_sys::Url::revoke_object_url(&url);
    });
    let _ = window().set_timeout_with_callback_and_timeout_and_arguments_0(revoke.unchecked_ref(), 60_000);
}

/// What an export of `report` is called, before its extension: `<model>.organ` (a θ
/// report), `<A>-vs-<B>.organ-diff` (a compare report), `<model>.organ-check`,
/// `<model>.organ-sensitivity`, `<model>.organ-prediction`, `<model>.organ-eval`,
/// `organ-surgery`, `<model>.organ-recipe` (the browser makes none of the last three today).
fn stem(report: AnyReport<'_>) -> String {
    match report {
        AnyReport::Measure(r) => format!("{}.organ", r.models.first().map_or("", |m| m.model.as_str())),
        AnyReport::Compare(r) => format!("{}-vs-{}.organ-diff", r.a.model, r.b.model),
        AnyReport::Check(r) => format!("{}.organ-check", r.model),
        AnyReport::Sensitivity(r) => format!("{}.organ-sensitivity", r.model),
        AnyReport::Prediction(r) => format!("{}.organ-prediction", r.model),
        AnyReport::Eval(r) => format!("{}.organ-eval", r.evaluation.model),
        AnyReport::Surgery(_) => "organ-surgery".to_owned(),
        AnyReport::Recipe(r) => format!("{}.organ-recipe", r.model),
        AnyReport::Quantize(r) => format!("{}.organ-quantize", r.input),
    }
}

/// Offers `report` in `format` as a download, `<stem>.<extension>`: the bytes the CLI's
/// `--NAME` writes (JSON: but the generator).
pub fn offer(report: AnyReport<'_>, format: &Format) {
    let shown = Shown { wells: WELLS, ..Shown::WHOLE };
    let mut text = String::new();
    if (format.render)(report, &shown, &mut text).is_ok() {
        download(&format!("{}.{}", stem(report), format.extension), format.media_type, &text);
    }
}

/// The export buttons of a report of `kind`: one per format the registry offers in the app
/// ([`Format::export_label`]), with the id `PREFIX-NAME`; a click calls `offer` with its
/// format.
pub fn buttons(kind: formats::Kind, prefix: &'static str, offer: impl Fn(&Format) + Clone + 'static) -> impl IntoView {
    (formats::for_kind(kind).filter_map(|f| f.export_label.map(|label| (f, label))))
        .map(|(f, label)| {
            let offer = offer.clone();
            view! { <button id=format!("{prefix}-{}", f.name) on:click=move |_| offer(f)>{label}</button> }
        })
        .collect_view()
}

/// Whether a file of this name is a report exported earlier rather than a model.
pub fn is_export(name: &str) -> bool {
    let name = name.to_lowercase();
    [".json", ".html", ".htm"].iter().any(|x| name.ends_with(x))
}

/// A report exported earlier: a θ report or a compare report.
pub enum Export {
    Measure(Report),
    Compare(Box<CompareReport>),
}

/// Just enough of a report to tell which kind it is: a compare report names its
/// definition in `"compare"`.
#[derive(Deserialize)]
struct Kind {
    compare: Option<String>,
}

/// A report exported earlier, as JSON or as the static HTML page, θ or compare.
///
/// # Errors
/// A sentence naming the file when it holds no organ report.
pub fn parse_export(name: &str, text: &str) -> Result<Export, Error> {
    let lower = name.to_lowercase();
    let json = if lower.ends_with(".html") || lower.ends_with(".htm") {
        html::extract_json(text)
            .ok_or_else(|| Error::Refused(format!("{name}: not an organ report page (no embedded report)")))?
    } else {
        text
    };
    let kind =
        serde_json::from_str::<Kind>(json).map_err(|e| Error::Refused(format!("{name}: not an organ report: {e}")))?;
    if kind.compare.is_some() {
        serde_json::from_str::<CompareReport>(json)
            .map(|r| Export::Compare(Box::new(r)))
            .map_err(|e| Error::Refused(format!("{name}: not an organ compare report: {e}")))
    } else {
        serde_json::from_str::<Report>(json)
            .map(Export::Measure)
            .map_err(|e| Error::Refused(format!("{name}: not an organ θ report: {e}")))
    }
}
