//! Reports in and out of the page: the JSON and static HTML exports of θ and compare
//! reports offered as downloads (from a local object URL; nothing is sent), and an export
//! of either kind opened again.

use leptos::prelude::document;
use organ_core::compare::CompareReport;
use organ_core::report::html;
use organ_core::report::Report;
use serde::Deserialize;
use wasm_bindgen::JsCast;

/// Offers `text` as a download called `name`, from a local object URL (nothing is sent).
pub fn download(name: &str, mime: &str, text: &str) {
    let parts = js_sys::Array::of1(&text.into());
    let opts = web_sys::BlobPropertyBag::new();
    opts.set_type(mime);
    let Ok(blob) = web_sys::Blob::new_with_str_sequence_and_options(&parts, &opts) else { return };
    let Ok(url) = web_sys::Url::create_object_url_with_blob(&blob) else { return };
    if let Some(a) = document().create_element("a").ok().and_then(|e| e.dyn_into::<web_sys::HtmlAnchorElement>().ok()) {
        a.set_href(&url);
        a.set_download(name);
        a.click();
    }
    let _ = web_sys::Url::revoke_object_url(&url);
}

/// Offers the report as pretty JSON, `<model>.organ.json`.
pub fn download_json(report: &Report) {
    let text = serde_json::to_string_pretty(report).unwrap_or_default();
    download(&format!("{}.organ.json", report.models[0].model), "application/json", &text);
}

/// Offers the report as the static HTML page, `<model>.organ.html`: the same page
/// `organ measure --html` writes.
pub fn download_html(report: &Report) {
    download(&format!("{}.organ.html", report.models[0].model), "text/html", &html::render(report));
}

/// The file name both compare exports start with: `A-vs-B`.
fn compare_stem(r: &CompareReport) -> String {
    format!("{}-vs-{}", r.a.model, r.b.model)
}

/// Offers a compare report as pretty JSON, `<A>-vs-<B>.organ-diff.json`: what
/// `organ diff --json` writes.
pub fn download_compare_json(r: &CompareReport) {
    let text = serde_json::to_string_pretty(r).unwrap_or_default();
    download(&format!("{}.organ-diff.json", compare_stem(r)), "application/json", &text);
}

/// Offers a compare report as its static HTML page, `<A>-vs-<B>.organ-diff.html`: the
/// page `organ diff --html` writes.
pub fn download_compare_html(r: &CompareReport) {
    download(&format!("{}.organ-diff.html", compare_stem(r)), "text/html", &html::render_compare(r));
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
pub fn parse_export(name: &str, text: &str) -> Result<Export, String> {
    let lower = name.to_lowercase();
    let json = if lower.ends_with(".html") || lower.ends_with(".htm") {
        html::extract_json(text).ok_or_else(|| format!("{name}: not an organ report page (no embedded report)"))?
    } else {
        text
    };
    let kind = serde_json::from_str::<Kind>(json).map_err(|e| format!("{name}: not an organ report: {e}"))?;
    if kind.compare.is_some() {
        serde_json::from_str::<CompareReport>(json)
            .map(|r| Export::Compare(Box::new(r)))
            .map_err(|e| format!("{name}: not an organ compare report: {e}"))
    } else {
        serde_json::from_str::<Report>(json)
            .map(Export::Measure)
            .map_err(|e| format!("{name}: not an organ θ report: {e}"))
    }
}
