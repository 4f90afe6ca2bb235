//! The adapter jobs (docs/adapters.md): `lora-merge` runs `organ lora merge`, `lora-extract`
//! runs `organ lora extract`, each with its report as the job's result. Adapters are files
//! under the root, as models are, each with its scale; `judge` is a text under the root,
//! scored by the llama.cpp of the server's environment as the eval job's is.

use super::job::JobStatus;
use super::jobs::start_job;
use super::surgery::out_name;
use super::{bad, ApiResult, AppState};
use crate::cli::{self, argv, Force};
use crate::cmd::eval::{JudgeArgs, DEFAULT_CTX, MAX_CTX, MIN_CTX};
use crate::llama_cpp::perplexity::{Offload, Scaled};
use axum::extract::rejection::JsonRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use std::sync::Arc;

/// Adapters one request may name (a merge of more is a script's job, not a request's).
pub(super) const MAX_ADAPTERS: usize = 64;

/// One adapter and the scale it is applied at (llama.cpp's `--lora-scaled FILE S`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AdapterReq {
    /// The adapter (a GGUF under the root).
    path: String,
    /// Default 1, as `--lora`.
    #[serde(default)]
    scale: Option<f64>,
}

/// Requests' adapters as the CLI's `FILE:S` arguments, each path resolved under the root.
pub(super) fn adapters(s: &AppState, list: &[AdapterReq], field: &str) -> ApiResult<Vec<String>> {
    if list.len() > MAX_ADAPTERS {
        return Err(bad(format!("{field}: {} adapters, at most {MAX_ADAPTERS}", list.len())));
    }
    list.iter()
        .map(|a| {
            let scale = a.scale.unwrap_or(1.0);
            // f32, as llama.cpp takes it; a scale past f32's range would be infinite there.
            let s32 = scale as f32;
            if !s32.is_finite() {
                return Err(bad(format!("{field}: adapter {:?}: scale {scale} is not a finite f32", a.path)));
            }
            let path = s.path(&a.path)?;
            // The CLI reads FILE:S as a string; a path that is not UTF-8 could not be one.
            let shown =
                path.to_str().ok_or_else(|| bad(format!("{field}: adapter {:?}: a path that is not UTF-8", a.path)))?;
            Ok(Scaled { path: shown.into(), scale: s32 }.to_string())
        })
        .collect()
}

/// The most threads a judge's request may ask llama-perplexity for.
const MAX_JUDGE_THREADS: u32 = 4096;

/// A request's judge fields (`judge`, `judge_ctx`, `judge_chunks`, `judge_threads`, `judge_gpu_layers`,
/// `judge_device`): each request names them itself, as `deny_unknown_fields` cannot
/// flatten them.
#[derive(Clone, Copy)]
pub(super) struct Judge<'a> {
    pub text: Option<&'a str>,
    pub ctx: Option<u32>,
    pub chunks: Option<u32>,
    pub threads: Option<u32>,
    pub gpu_layers: Option<&'a str>,
    pub device: Option<&'a str>,
}

/// The judge fields as the command's judge flags, each checked as the CLI checks its flag.
pub(super) fn judge(s: &AppState, j: Judge<'_>) -> ApiResult<JudgeArgs> {
    if let Some(c) = j.ctx.filter(|c| !(MIN_CTX..=MAX_CTX).contains(c)) {
        return Err(bad(format!("judge_ctx {c}: give {MIN_CTX} to {MAX_CTX}")));
    }
    if j.chunks == Some(0) {
        return Err(bad(String::from("judge_chunks 0: give 1 or more")));
    }
    if let Some(t) = j.threads.filter(|t| !(1..=MAX_JUDGE_THREADS).contains(t)) {
        return Err(bad(format!("judge_threads {t}: give 1 to {MAX_JUDGE_THREADS}")));
    }
    if j.text.is_none() {
        let given = [
            ("judge_ctx", j.ctx.is_some()),
            ("judge_chunks", j.chunks.is_some()),
            ("judge_threads", j.threads.is_some()),
            ("judge_gpu_layers", j.gpu_layers.is_some()),
            ("judge_device", j.device.is_some()),
        ];
        if let Some((field, _)) = given.iter().find(|(_, g)| *g) {
            return Err(bad(format!("{field} without judge: give the text to judge on")));
        }
    }
    let offload = Offload::new(j.gpu_layers, j.device).map_err(|e| bad(format!("judge_{e}")))?;
    Ok(JudgeArgs {
        judge: j.text.map(|t| s.path(t)).transpose()?,
        judge_ctx: j.ctx.unwrap_or(DEFAULT_CTX),
        judge_chunks: j.chunks,
        llama_cpp: None,
        judge_threads: j.threads,
        judge_gpu_layers: offload.gpu_layers,
        judge_device: offload.device,
        // No logits kept between jobs, as no sensitivity or measure result is: nothing one
        // job computed stays behind, outside its directory, for another.
        logits_cache_max: 0,
    })
}

/// A request's judge fields, by name.
macro_rules! judge_of {
    ($r:expr) => {
        super::lora::Judge {
            text: $r.judge.as_deref(),
            ctx: $r.judge_ctx,
            chunks: $r.judge_chunks,
            threads: $r.judge_threads,
            gpu_layers: $r.judge_gpu_layers.as_deref(),
            device: $r.judge_device.as_deref(),
        }
    };
}
pub(super) use judge_of;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LoraMergeReq {
    /// The base (a GGUF under the root; a split model: its first shard).
    base: String,
    /// The adapters to merge, in order.
    adapters: Vec<AdapterReq>,
    /// `keep` (default) or a type organ writes.
    #[serde(default, rename = "type")]
    ty: Option<String>,
    #[serde(default)]
    out: Option<String>,
    #[serde(default)]
    judge: Option<String>,
    #[serde(default)]
    judge_ctx: Option<u32>,
    #[serde(default)]
    judge_chunks: Option<u32>,
    #[serde(default)]
    judge_threads: Option<u32>,
    #[serde(default)]
    judge_gpu_layers: Option<String>,
    #[serde(default)]
    judge_device: Option<String>,
}

/// `organ lora merge BASE --lora A[:S]… --out OUT --json lora-merge.json [--judge TEXT]`.
pub(super) async fn merge(
    State(s): State<Arc<AppState>>,
    body: Result<Json<LoraMergeReq>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<JobStatus>)> {
    let Json(r) = body?;
    if r.adapters.is_empty() {
        return Err(bad("adapters: give at least one"));
    }
    let base = s.path(&r.base)?;
    let lora = adapters(&s, &r.adapters, "adapters")?;
    let judge = judge(&s, judge_of!(r))?;
    let out = out_name(r.out.as_deref(), "merged.gguf")?;
    let o2 = out.clone();
    // The type is checked here, so a typo is a 400 rather than a failed job.
    let mut args = cli::lora::LoraMergeArgs {
        base,
        lora,
        out: o2.into(),
        ty: r.ty.unwrap_or_else(|| "keep".into()),
        json: None,
        force: Force::default(),
        judge,
    };
    crate::cmd::lora::merge::Options::try_from(&args).map_err(|e| bad(format!("{e:#}")))?;
    start_job(
        &s,
        "lora-merge",
        move |dir| {
            args.out = dir.join(&args.out);
            args.json = Some(dir.join("lora-merge.json"));
            argv(&cli::lora::Op::Merge(args))
        },
        vec![out, "lora-merge.json".into()],
        Some("lora-merge.json"),
        None,
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LoraExtractReq {
    /// The base (a GGUF under the root, a split model's first shard, or an organ directory).
    base: String,
    /// The finetune.
    tuned: String,
    rank: u64,
    /// Only weights whose name matches one of these (`*` matches anything).
    #[serde(default)]
    names: Vec<String>,
    /// The halves' type: f32, f16 (default), bf16 or q8_0.
    #[serde(default, rename = "type")]
    ty: Option<String>,
    #[serde(default)]
    out: Option<String>,
    #[serde(default)]
    judge: Option<String>,
    #[serde(default)]
    judge_ctx: Option<u32>,
    #[serde(default)]
    judge_chunks: Option<u32>,
    #[serde(default)]
    judge_threads: Option<u32>,
    #[serde(default)]
    judge_gpu_layers: Option<String>,
    #[serde(default)]
    judge_device: Option<String>,
}

/// `organ lora extract --base B --tuned T --rank R --out OUT --json lora-extract.json`.
pub(super) async fn extract(
    State(s): State<Arc<AppState>>,
    body: Result<Json<LoraExtractReq>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<JobStatus>)> {
    let Json(r) = body?;
    let (base, tuned) = (s.path(&r.base)?, s.path(&r.tuned)?);
    let judge = judge(&s, judge_of!(r))?;
    let out = out_name(r.out.as_deref(), "adapter.gguf")?;
    let mut args = cli::lora::ExtractArgs::new(base, tuned, r.rank, out.clone().into());
    args.names = r.names;
    args.ty = r.ty.unwrap_or(args.ty);
    args.judge = judge;
    // The rank, the type and the name (.gguf) are checked here: a 400, not a failed job.
    crate::cmd::lora::extract::Options::try_from(&args).map_err(|e| bad(format!("{e:#}")))?;
    start_job(
        &s,
        "lora-extract",
        move |dir| {
            args.out = dir.join(&args.out);
            args.json = Some(dir.join("lora-extract.json"));
            argv(&cli::lora::Op::Extract(args))
        },
        vec![out, "lora-extract.json".into()],
        Some("lora-extract.json"),
        None,
    )
}
