//! The operations that plan a quantization (sensitivity, recipe) and the one that makes
//! it (quantize): each request checked, field by field, and turned into the command's own flags (the structs of
//! [`crate::cli`]), whose argv ([`cli::argv`]) starts an `organ` child as a job, as
//! [`super::operations`] does for measure, diff, check and eval.

use super::job::JobStatus;
use super::jobs::start_job;
use super::{bad, ApiResult, AppState};
use crate::cli::{self, argv, SelectArgs};
use crate::llama_cpp::perplexity::Offload;
use axum::extract::rejection::JsonRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use organ_core::report::formats;
use organ_core::surgery::select::{Layers, Selection};
use organ_core::GgmlType;
use serde::Deserialize;
use std::path::PathBuf;
use std::sync::Arc;

/// A sensitivity job's report (the result), its CSV, its page (measured runs only) and the
/// text `organ sensitivity` prints.
pub(super) const SENSITIVITY_JSON: &str = "sensitivity.json";
pub(super) const SENSITIVITY_CSV: &str = "sensitivity.csv";
pub(super) const SENSITIVITY_HTML: &str = "sensitivity.html";
pub(super) const SENSITIVITY_TXT: &str = "sensitivity.txt";
/// A recipe job's table (the result), its `--tensor-type` lines (for `llama-quantize
/// --tensor-type-file`) and the text `organ recipe` prints.
pub(super) const RECIPE_JSON: &str = "recipe.json";
pub(super) const RECIPE_LINES: &str = "tensor-types.txt";
pub(super) const RECIPE_TXT: &str = "recipe.txt";

/// A quantize job's report (the result), its text, and the model's default name.
pub(super) const QUANTIZE_JSON: &str = "quantize.json";
pub(super) const QUANTIZE_TXT: &str = "quantize.txt";
const QUANTIZED: &str = "quantized.gguf";

/// The most sensitivity reports a recipe request may name: more than there are types.
const MAX_FROM: usize = 64;

/// The most `tensor_types` patterns and `override_kv` keys a quantize request may give: a
/// pattern per tensor of a large model, each compiled before the job starts.
const MAX_PATTERNS: usize = 4096;
const MAX_OVERRIDES: usize = 256;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SensitivityReq {
    /// The model (a GGUF under the root).
    path: String,
    /// Requantize each tensor, alone, to this type (llama-quantize's names: q2_0, q4_0…).
    #[serde(default)]
    to: Option<String>,
    /// Instead of `to`: replace each tensor by Gaussian noise of its own statistics, or zeros.
    #[serde(default)]
    ablate: Option<String>,
    /// The noise's seed (`ablate: noise`).
    #[serde(default)]
    seed: Option<u64>,
    /// Predict instead of measuring (seconds, no llama.cpp; docs/predict.md).
    #[serde(default)]
    predict: bool,
    /// With `predict`: a llama-imatrix output under the root.
    #[serde(default)]
    imatrix: Option<String>,
    /// With `predict`: a measured report of the same `to` under the root, to rank against.
    #[serde(default)]
    truth: Option<String>,
    /// Measuring: the text each changed model is scored on (a file under the root).
    #[serde(default)]
    text: Option<String>,
    /// Measuring: a second, disjoint text, the same changes measured again on it.
    #[serde(default)]
    repeat_text: Option<String>,
    #[serde(default)]
    ctx: Option<u32>,
    #[serde(default)]
    chunks: Option<u32>,
    /// Measuring: evaluations at once (at most this machine's cores).
    #[serde(default)]
    jobs: Option<u32>,
    /// Measuring: llama-perplexity's `-ngl` (`--gpu-layers`: a count, auto or all).
    #[serde(default)]
    gpu_layers: Option<String>,
    /// Measuring: llama-perplexity's `--device` (`--device`: names, comma-separated; none:
    /// the CPU).
    #[serde(default)]
    device: Option<String>,
    /// Which tensors (default: every 2-D weight): these layers (`5-20`, `3,7`), …
    #[serde(default)]
    layers: Option<String>,
    /// … of these anatomy groups, …
    #[serde(default)]
    types: Vec<String>,
    /// … named as one of these patterns. (Fields of their own, not graft's flattened
    /// `Select`: a mistyped one is then named in the error.)
    #[serde(default)]
    names: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RecipeReq {
    /// The model to requantize (a GGUF under the root, an F16 or BF16 one usually).
    path: String,
    /// Bits per weight, tensor data only.
    #[serde(default)]
    target_bpw: Option<f64>,
    /// The output file's size, header included: bytes, or with a K, M, G or T suffix.
    #[serde(default)]
    target_size: Option<String>,
    /// Sensitivity reports under the root (`organ sensitivity --to TYPE --json`), one per
    /// candidate type.
    #[serde(default)]
    from: Vec<String>,
    /// Curves predicted from this llama-imatrix output under the root.
    #[serde(default)]
    imatrix: Option<String>,
    /// Curves predicted from the weights alone.
    #[serde(default)]
    data_free: bool,
    /// With `imatrix` or `data_free`: the candidate types (default: organ's list).
    #[serde(default)]
    types: Vec<String>,
}

/// `to` or `ablate` (exactly one), checked as `organ sensitivity` reads them.
fn change(r: &SensitivityReq) -> ApiResult<()> {
    match (&r.to, r.ablate.as_deref()) {
        (Some(_), Some(_)) => {
            return Err(bad("to and ablate: give one of them (a type to requantize to, or noise|zero)"))
        }
        (None, None) => {
            return Err(bad(
                "to: give the type each tensor is requantized to (q2_0, q4_0, q8_0…), or ablate: noise|zero",
            ))
        }
        (Some(t), None) if GgmlType::from_name(&t.to_ascii_uppercase()).is_none() => {
            return Err(bad(format!("to {t:?}: not a ggml type (q2_0, q3_k, q4_0, q8_0, f16…)")))
        }
        (None, Some(a)) if !matches!(a, "noise" | "zero") => {
            return Err(bad(format!("ablate {a:?}: give noise or zero")))
        }
        _ => {}
    }
    if r.seed.is_some() && r.ablate.as_deref() != Some("noise") {
        return Err(bad("seed: only with ablate: noise (it seeds the noise)"));
    }
    Ok(())
}

/// The fields of one mode only: `predict`'s, or measuring's.
fn mode(r: &SensitivityReq) -> ApiResult<()> {
    use crate::cmd::eval::{MAX_CTX, MIN_CTX};
    if r.predict {
        if r.ablate.is_some() {
            return Err(bad("predict: covers to TYPE (a requantization) only, not ablate"));
        }
        let measuring = [
            ("text", r.text.is_some()),
            ("repeat_text", r.repeat_text.is_some()),
            ("ctx", r.ctx.is_some()),
            ("chunks", r.chunks.is_some()),
            ("jobs", r.jobs.is_some()),
        ];
        if let Some((field, _)) = measuring.iter().find(|(_, given)| *given) {
            return Err(bad(format!("{field}: a measuring option; with predict: true, leave it out")));
        }
        return Ok(());
    }
    for (field, given) in [("imatrix", r.imatrix.is_some()), ("truth", r.truth.is_some())] {
        if given {
            return Err(bad(format!("{field}: only with predict: true")));
        }
    }
    if r.text.is_none() {
        return Err(bad(
            "text: give the text each changed model is scored on (a file under the root), or predict: true",
        ));
    }
    if let Some(c) = r.ctx.filter(|c| !(MIN_CTX..=MAX_CTX).contains(c)) {
        return Err(bad(format!("ctx {c}: give {MIN_CTX} to {MAX_CTX}")));
    }
    if r.chunks == Some(0) {
        return Err(bad("chunks 0: give at least 1"));
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if let Some(j) = r.jobs.filter(|&j| j == 0 || u64::from(j) > cores as u64) {
        return Err(bad(format!("jobs {j}: give 1 to {cores} (this machine's cores)")));
    }
    Ok(())
}

/// The selection, each criterion checked as the command parses it.
fn selection(layers: Option<String>, types: Vec<String>, names: Vec<String>) -> ApiResult<SelectArgs> {
    let s = SelectArgs { layers, types, names };
    if let Some(l) = &s.layers {
        Layers::parse(l).map_err(|e| bad(format!("layers: {e}")))?;
    }
    Selection::parse_groups(&s.types).map_err(|e| bad(format!("types: {e}")))?;
    if s.names.iter().any(String::is_empty) {
        return Err(bad("names: an empty pattern; give tensor name patterns, * matching anything"));
    }
    Ok(s)
}

/// `organ sensitivity MODEL (--to TYPE | --ablate noise|zero) …` (docs/sensitivity.md):
/// measured (`text`: llama.cpp's tools from the server's environment, as eval's; no cache
/// kept between jobs) or predicted (`predict`: seconds, no llama.cpp). The job's result is
/// `organ sensitivity --json`'s report; outputs sensitivity.json, sensitivity.csv, the page
/// sensitivity.html (measured only) and the text sensitivity.txt.
pub(super) async fn sensitivity(
    State(s): State<Arc<AppState>>,
    body: Result<Json<SensitivityReq>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<JobStatus>)> {
    let Json(r) = body?;
    change(&r)?;
    mode(&r)?;
    let model = s.path(&r.path)?;
    let path = |p: &Option<String>| p.as_deref().map(|p| s.path(p)).transpose();
    let (text, repeat_text, imatrix, truth) =
        (path(&r.text)?, path(&r.repeat_text)?, path(&r.imatrix)?, path(&r.truth)?);
    let select = selection(r.layers, r.types, r.names)?;
    let offload = Offload::new(r.gpu_layers.as_deref(), r.device.as_deref()).map_err(|e| bad(e.to_string()))?;
    let predict = r.predict;
    let mut outputs = vec![SENSITIVITY_JSON, SENSITIVITY_CSV];
    if !predict {
        outputs.push(SENSITIVITY_HTML);
    }
    outputs.push(SENSITIVITY_TXT);
    start_job(
        &s,
        "sensitivity",
        |dir| {
            let mut a = cli::SensitivityArgs::new(model);
            (a.to, a.ablate, a.seed, a.select) = (r.to, r.ablate, r.seed, select);
            (a.predict, a.imatrix, a.truth) = (predict, imatrix, truth);
            (a.text, a.repeat_text, a.chunks) = (text, repeat_text, r.chunks);
            a.ctx = r.ctx.unwrap_or(a.ctx);
            a.jobs = r.jobs.and_then(|j| usize::try_from(j).ok());
            a.offload = offload;
            // The CLI's cache off, as for measure's jobs: nothing one job measured stays
            // behind, outside its directory, for another.
            a.no_cache = true;
            a.reports = cli::ReportFiles::default()
                .with(&formats::JSON, Some(dir.join(SENSITIVITY_JSON)))
                .with(&formats::CSV, Some(dir.join(SENSITIVITY_CSV)))
                .with(&formats::HTML, (!predict).then(|| dir.join(SENSITIVITY_HTML)));
            argv(&a)
        },
        outputs.into_iter().map(String::from).collect(),
        Some(SENSITIVITY_JSON),
        Some(SENSITIVITY_TXT),
    )
}

/// `target_bpw` or `target_size` (exactly one), checked as `organ recipe` reads them.
fn target(r: &RecipeReq) -> ApiResult<()> {
    match (r.target_bpw, &r.target_size) {
        (Some(_), Some(_)) => Err(bad("target_bpw and target_size: give one of them")),
        (None, None) => Err(bad(
            "target_bpw or target_size: give one (bits per weight, or the output file's size in bytes, e.g. \"90M\")",
        )),
        (Some(b), None) if !(b.is_finite() && b > 0.0 && b <= 64.0) => {
            Err(bad(format!("target_bpw {b}: give bits per weight above 0, at most 64")))
        }
        (None, Some(size)) => match crate::write::parse_size(size) {
            Ok(_) => Ok(()),
            Err(e) => Err(bad(format!("target_size: {e:#}"))),
        },
        _ => Ok(()),
    }
}

/// The curve source (exactly one of `from`, `imatrix`, `data_free`) and `types`: the
/// candidate types' names, each one organ predicts, each once.
fn source(r: &RecipeReq) -> ApiResult<Vec<String>> {
    let given = usize::from(!r.from.is_empty()) + usize::from(r.imatrix.is_some()) + usize::from(r.data_free);
    if given == 0 {
        return Err(bad(
            "from, imatrix or data_free: give one curve source (sensitivity reports, an importance matrix, or data_free: true)",
        ));
    }
    if given > 1 {
        return Err(bad("from, imatrix and data_free: give one curve source, not several"));
    }
    if r.from.len() > MAX_FROM {
        return Err(bad(format!("from: {} reports; give 1 to {MAX_FROM}, one per candidate type", r.from.len())));
    }
    if !r.from.is_empty() && !r.types.is_empty() {
        return Err(bad("types: only with imatrix or data_free (with from, each report is one type)"));
    }
    let types = organ_core::recipe::predicted::candidate_types(&r.types).map_err(|e| bad(format!("types {e}")))?;
    let types: Vec<String> =
        if r.types.is_empty() { Vec::new() } else { types.iter().map(|t| t.name().to_owned()).collect() };
    Ok(types)
}

/// `organ recipe MODEL (--target-bpw B | --target-size S) (--from SENS.json… | --imatrix I
/// | --data-free) [--types …]` (docs/recipe.md): the job's result is the table `organ recipe
/// --json` writes; outputs recipe.json, the `--tensor-type` lines tensor-types.txt (`--out`)
/// and the text recipe.txt. `--apply` (llama-quantize run by the server) is not offered.
pub(super) async fn recipe(
    State(s): State<Arc<AppState>>,
    body: Result<Json<RecipeReq>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<JobStatus>)> {
    let Json(r) = body?;
    target(&r)?;
    let types = source(&r)?;
    let model = s.path(&r.path)?;
    let from = r.from.iter().map(|p| s.path(p)).collect::<ApiResult<Vec<PathBuf>>>()?;
    let imatrix = r.imatrix.as_deref().map(|p| s.path(p)).transpose()?;
    start_job(
        &s,
        "recipe",
        |dir| {
            let mut a = cli::RecipeArgs::new(model);
            (a.target_bpw, a.target_size) = (r.target_bpw, r.target_size);
            (a.from, a.imatrix, a.data_free, a.types) = (from, imatrix, r.data_free, types);
            a.out = Some(dir.join(RECIPE_LINES));
            a.json = Some(dir.join(RECIPE_JSON));
            argv(&a)
        },
        vec![RECIPE_JSON.into(), RECIPE_LINES.into(), RECIPE_TXT.into()],
        Some(RECIPE_JSON),
        Some(RECIPE_TXT),
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct QuantizeReq {
    /// The model (a GGUF under the root, a split model's first shard).
    path: String,
    /// The file type, as llama-quantize names it (Q4_K_M, IQ4_XS, Q8_0, …).
    #[serde(rename = "type")]
    ftype: String,
    /// The result's name in the job's directory (default quantized.gguf).
    #[serde(default)]
    out: Option<String>,
    /// An importance matrix under the root.
    #[serde(default)]
    imatrix: Option<String>,
    #[serde(default)]
    include_weights: Vec<String>,
    #[serde(default)]
    exclude_weights: Vec<String>,
    #[serde(default)]
    allow_requantize: bool,
    #[serde(default)]
    leave_output_tensor: bool,
    #[serde(default)]
    pure: bool,
    #[serde(default)]
    output_tensor_type: Option<String>,
    #[serde(default)]
    token_embedding_type: Option<String>,
    /// `PATTERN=TYPE` words, as `--tensor-type` takes them.
    #[serde(default)]
    tensor_types: Vec<String>,
    /// `KEY=TYPE:VALUE` words, as `--override-kv` takes them.
    #[serde(default)]
    override_kv: Vec<String>,
    #[serde(default)]
    prune_layers: Option<String>,
    /// A shard for each of the model's, named after `out` as llama-quantize names them.
    #[serde(default)]
    keep_split: bool,
    #[serde(default)]
    dry_run: bool,
}

/// `organ quantize [flags] PATH OUT TYPE --json quantize.json` (docs/quantize.md): the
/// job's result is the report `--json` writes; outputs the model (not for a dry run),
/// quantize.json and the text quantize.txt.
pub(super) async fn quantize(
    State(s): State<Arc<AppState>>,
    body: Result<Json<QuantizeReq>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<JobStatus>)> {
    let Json(r) = body?;
    if r.tensor_types.len() > MAX_PATTERNS || r.override_kv.len() > MAX_OVERRIDES {
        return Err(bad(format!(
            "at most {MAX_PATTERNS} tensor_types and {MAX_OVERRIDES} override_kv (given {} and {})",
            r.tensor_types.len(),
            r.override_kv.len()
        )));
    }
    let utf8 = |p: PathBuf, field: &str| {
        p.into_os_string().into_string().map_err(|_| bad(format!("{field}: organ quantize takes UTF-8 paths")))
    };
    let model = utf8(s.path(&r.path)?, "path")?;
    let imatrix = r.imatrix.as_deref().map(|p| s.path(p)).transpose()?;
    let out = super::surgery::out_name(r.out.as_deref(), QUANTIZED)?;
    if !out.to_ascii_lowercase().ends_with(".gguf") {
        return Err(bad(format!("out {out:?}: organ quantize writes one GGUF file: give a name ending in .gguf")));
    }
    let mut a = cli::QuantizeArgs::new(model, out.clone(), r.ftype);
    a.imatrix = imatrix;
    (a.include_weights, a.exclude_weights) = (r.include_weights, r.exclude_weights);
    (a.allow_requantize, a.leave_output_tensor, a.pure, a.dry_run) =
        (r.allow_requantize, r.leave_output_tensor, r.pure, r.dry_run);
    (a.output_tensor_type, a.token_embedding_type) = (r.output_tensor_type, r.token_embedding_type);
    (a.tensor_type, a.override_kv, a.prune_layers) = (r.tensor_types, r.override_kv, r.prune_layers);
    a.keep_split = r.keep_split;
    // A type, pattern, override or layer list that does not parse: a 400, not a failed job.
    // Whether the model takes them is the job's to say, once it has read it.
    if (a.include_weights.len() + a.exclude_weights.len() > 0) && a.imatrix.is_none() {
        return Err(bad("include_weights and exclude_weights choose entries of an importance matrix: give imatrix"));
    }
    a.check_flags().map_err(|e| bad(format!("{e:#}")))?;
    let mut outputs: Vec<String> = match (a.dry_run, a.keep_split) {
        (true, _) => Vec::new(),
        (false, false) => vec![out.clone()],
        // A shard for each of the model's, found beside it by name as the job will.
        (false, true) => {
            let n = organ_native::paths::split_shards(std::path::Path::new(&a.args[0])).map_or(1, |s| s.len());
            organ_core::quantize::keep_split_names(&out, n)
        }
    };
    outputs.extend([QUANTIZE_JSON.into(), QUANTIZE_TXT.into()]);
    start_job(
        &s,
        "quantize",
        move |dir| {
            a.args[1] = dir.join(&out).to_string_lossy().into_owned();
            a.reports = a.reports.clone().with(&formats::JSON, Some(dir.join(QUANTIZE_JSON)));
            argv(&a)
        },
        outputs,
        Some(QUANTIZE_JSON),
        Some(QUANTIZE_TXT),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/openapi.json names the sensitivity and recipe jobs' outputs (in the job's
    /// `outputs` and the operation's summary): they are the ones the jobs write.
    #[test]
    fn openapi_names_the_outputs_jobs_write() {
        let doc: serde_json::Value = serde_json::from_str(include_str!("../../../docs/openapi.json")).unwrap();
        let sensitivity = [SENSITIVITY_JSON, SENSITIVITY_CSV, SENSITIVITY_HTML, SENSITIVITY_TXT];
        let recipe = [RECIPE_JSON, RECIPE_LINES, RECIPE_TXT];
        let quantize = [QUANTIZE_JSON, QUANTIZE_TXT];
        for (job, path, names) in [
            ("SensitivityJob", "/api/sensitivity", &sensitivity[..]),
            ("RecipeJob", "/api/recipe", &recipe[..]),
            ("QuantizeJob", "/api/quantize", &quantize[..]),
        ] {
            super::super::outputs::openapi_lists_outputs(&doc, job, path, names);
        }
    }
}
