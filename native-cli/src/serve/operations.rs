//! The operations that read models and report (measure, diff, check, eval): each request
//! checked and turned into the command's own flags (the structs of [`crate::cli`]), whose
//! argv ([`cli::argv`]) starts an `organ` child as a job. Those that write a model:
//! [`super::surgery`].

use super::job::JobStatus;
use super::jobs::start_job;
use super::outputs::{CHECK_OUT, DIFF_OUT, MEASURE_OUT};
use super::{bad, ApiResult, AppState};
use crate::cli::{self, argv, Force, ReportOutputs, Work};
use crate::llama_cpp::perplexity::Offload;
use axum::extract::rejection::JsonRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use std::sync::Arc;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct MeasureReq {
    /// The models (or `path`: one model).
    #[serde(default)]
    paths: Option<Vec<String>>,
    /// One model, as the other jobs name theirs.
    #[serde(default)]
    path: Option<String>,
    /// σ_θ beside θ and σ of θ_mean (§7), as `organ measure --sigma`.
    #[serde(default)]
    sigma: bool,
    /// θ over every value, no sampling (§7), as `organ measure --exact`.
    #[serde(default)]
    exact: bool,
    /// Also each expert's θ (§6), outliers and duplicates, as `organ measure --experts`.
    #[serde(default)]
    experts: bool,
    /// The base of the adapters measured, as `organ measure --base`.
    #[serde(default)]
    base: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DiffReq {
    /// The base model.
    a: String,
    /// The other model.
    b: String,
    /// How many of the most changed tensors the text report (diff.txt) lists.
    #[serde(default)]
    top: Option<u64>,
    /// The per-tensor outputs (the JSON's `pairs`, the CSV rows) list changed pairs only.
    #[serde(default)]
    only_changed: bool,
}

/// The most `top` a diff request may ask for: far more than a person reads, few enough
/// that the text report stays small.
const MAX_TOP: u64 = 10_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CheckReq {
    /// The model.
    #[serde(default)]
    path: Option<String>,
    /// The model as a list of one, as measure names its models.
    #[serde(default)]
    paths: Option<Vec<String>>,
    /// An adapter's base, as `organ check --base`.
    #[serde(default)]
    base: Option<String>,
    /// The model this one should be quantized from, as `organ check --derived-from`.
    #[serde(default)]
    derived_from: Option<String>,
    /// With `derived_from`: the importance matrix, a llama-imatrix output under the root.
    #[serde(default)]
    imatrix: Option<String>,
}

/// A request's models, named by `paths` (a list) or `path` (one): both forms are taken
/// by every job that names models this way, so a client need not remember which is which.
fn models_named(path: Option<String>, paths: Option<Vec<String>>) -> ApiResult<Vec<String>> {
    match (path, paths) {
        (Some(_), Some(_)) => Err(bad("path and paths: give one of them")),
        (Some(p), None) => Ok(vec![p]),
        (None, Some(ps)) => Ok(ps),
        (None, None) => Err(bad("path: missing (give path, one model, or paths, a list)")),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct EvalReq {
    /// The model (a GGUF under the root).
    path: String,
    /// The text to score (a file under the root, as models are).
    text: String,
    /// The parent to compare with.
    #[serde(default)]
    base: Option<String>,
    /// Adapters llama.cpp applies to the model (`--lora`), each at its scale.
    #[serde(default)]
    lora: Vec<super::lora::AdapterReq>,
    /// Adapters applied to the base (`--base-lora`).
    #[serde(default)]
    base_lora: Vec<super::lora::AdapterReq>,
    #[serde(default)]
    ctx: Option<u32>,
    #[serde(default)]
    chunks: Option<u32>,
    /// llama-perplexity's `-ngl` (`--gpu-layers`: a count, auto or all).
    #[serde(default)]
    gpu_layers: Option<String>,
    /// llama-perplexity's `--device` (`--device`: names, comma-separated; none: the CPU).
    #[serde(default)]
    device: Option<String>,
}

pub(super) async fn measure(
    State(s): State<Arc<AppState>>,
    body: Result<Json<MeasureReq>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<JobStatus>)> {
    let Json(r) = body?;
    let named = models_named(r.path, r.paths)?;
    if named.is_empty() || named.len() > 1000 {
        return Err(bad("paths: give 1 to 1000 model paths"));
    }
    if r.sigma && r.exact {
        return Err(bad("sigma and exact: give one of them (exact θ has no sampling, so no σ)"));
    }
    let paths = named.iter().map(|p| s.model(p)).collect::<ApiResult<Vec<_>>>()?;
    let base = r.base.as_deref().map(|b| s.model(b)).transpose()?;
    // Each entry is a model the child holds: the same one twice (however it is spelled)
    // would cost its memory twice and measure nothing more.
    let mut seen = std::collections::HashSet::with_capacity(paths.len());
    if let Some((rel, _)) = named.iter().zip(&paths).find(|(_, p)| !seen.insert(*p)) {
        let shown = crate::remote::policy::redact(rel);
        return Err(bad(format!(
            "paths: {shown:?} is given twice (or names a model given before): give each model once"
        )));
    }
    start_job(
        &s,
        "measure",
        |dir| {
            argv(&cli::MeasureArgs {
                models: paths,
                report: ReportOutputs {
                    files: MEASURE_OUT.files(dir).into(),
                    summary_only: true,
                    ..Default::default()
                },
                no_cache: true,
                sigma: r.sigma,
                exact: r.exact,
                experts: r.experts,
                base,
                ..Default::default()
            })
        },
        MEASURE_OUT.names(),
        Some(&MEASURE_OUT.report()),
        None,
    )
}

/// `organ diff A B` (Compare v1, docs/compare.md): the job's result is the report, the same
/// JSON as `organ diff --json`; outputs diff.json, diff.csv and the text report diff.txt.
pub(super) async fn diff(
    State(s): State<Arc<AppState>>,
    body: Result<Json<DiffReq>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<JobStatus>)> {
    let Json(r) = body?;
    let (base, other) = (s.model(&r.a)?, s.model(&r.b)?);
    if let Some(t) = r.top.filter(|&t| t > MAX_TOP) {
        return Err(bad(format!("top {t}: give 0 to {MAX_TOP}")));
    }
    start_job(
        &s,
        "diff",
        |dir| {
            let mut d = cli::DiffArgs::new(base, other);
            d.outputs = DIFF_OUT.files(dir).into();
            if let Some(t) = r.top {
                d.top = usize::try_from(t).unwrap_or(usize::MAX); // at most MAX_TOP
            }
            d.only_changed = r.only_changed;
            argv(&d)
        },
        DIFF_OUT.names(),
        Some(&DIFF_OUT.report()),
        DIFF_OUT.stdout().as_deref(),
    )
}

/// `organ check MODEL` (Check k1): the job's result is the report, the same JSON as
/// `organ check --json`; outputs check.json and the text report check.txt. A model with
/// error findings is a done job whose report says so (`--exit-zero`), not a failed one.
pub(super) async fn check(
    State(s): State<Arc<AppState>>,
    body: Result<Json<CheckReq>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<JobStatus>)> {
    let Json(r) = body?;
    let [path] = <[String; 1]>::try_from(models_named(r.path, r.paths)?)
        .map_err(|_| bad("paths: check takes one model; give a list of one, or path"))?;
    let model = s.path(&path)?;
    let base = r.base.as_deref().map(|b| s.model(b)).transpose()?;
    if r.imatrix.is_some() && r.derived_from.is_none() {
        return Err(bad("imatrix: the matrix a derived_from model was quantized with; give derived_from"));
    }
    if base.is_some() && r.derived_from.is_some() {
        return Err(bad("base and derived_from: an adapter has a base, a quantized model a source; give one"));
    }
    let derived_from = r.derived_from.as_deref().map(|b| s.model(b)).transpose()?;
    let imatrix = r.imatrix.as_deref().map(|p| s.path(p)).transpose()?;
    start_job(
        &s,
        "check",
        |dir| {
            let reports = CHECK_OUT.files(dir).into();
            argv(&cli::CheckArgs {
                model,
                reports,
                work: Work::default(),
                exit_zero: true,
                force: Force::default(),
                base,
                derived_from,
                imatrix,
            })
        },
        CHECK_OUT.names(),
        Some(&CHECK_OUT.report()),
        CHECK_OUT.stdout().as_deref(),
    )
}

/// `organ eval MODEL --text TEXT [--base PARENT] [--lora A:S]… [--base-lora A:S]…` (docs/judge.md): llama.cpp's
/// llama-perplexity, found in the server's environment (ORGAN_LLAMA_CPP, then PATH). The
/// job's result is `organ eval --json`'s report; outputs eval.json and the text eval.txt.
pub(super) async fn eval(
    State(s): State<Arc<AppState>>,
    body: Result<Json<EvalReq>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<JobStatus>)> {
    use crate::cmd::eval::{MAX_CTX, MIN_CTX};
    let Json(r) = body?;
    let (model, text) = (s.path(&r.path)?, s.path(&r.text)?);
    let base = r.base.as_deref().map(|b| s.path(b)).transpose()?;
    if let Some(c) = r.ctx.filter(|c| !(MIN_CTX..=MAX_CTX).contains(c)) {
        return Err(bad(format!("ctx {c}: give {MIN_CTX} to {MAX_CTX}")));
    }
    if r.chunks == Some(0) {
        return Err(bad("chunks 0: give at least 1"));
    }
    if base.is_none() && !r.base_lora.is_empty() {
        return Err(bad("base_lora without base: give the base they apply to"));
    }
    let (lora, base_lora) =
        (super::lora::adapters(&s, &r.lora, "lora")?, super::lora::adapters(&s, &r.base_lora, "base_lora")?);
    let offload = Offload::new(r.gpu_layers.as_deref(), r.device.as_deref()).map_err(|e| bad(e.to_string()))?;
    start_job(
        &s,
        "eval",
        |dir| {
            let mut e = cli::EvalArgs::new(model, text);
            e.base = base;
            (e.lora, e.base_lora) = (lora, base_lora);
            e.ctx = r.ctx.unwrap_or(e.ctx);
            e.chunks = r.chunks;
            e.offload = offload;
            // No logits kept between jobs (as for sensitivity's and measure's).
            e.logits_cache_max = 0;
            e.json = Some(dir.join("eval.json"));
            argv(&e)
        },
        vec!["eval.json".into(), "eval.txt".into()],
        Some("eval.json"),
        Some("eval.txt"),
    )
}
