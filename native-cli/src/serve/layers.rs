//! The `layers` job (docs/surgery.md): `organ layers PATH --drop LIST | --keep LIST`, the
//! model and layers.json (the job's result) in the job's directory; `judge` as the adapter
//! jobs take it.

use super::job::JobStatus;
use super::jobs::start_job;
use super::surgery::out_name;
use super::{bad, ApiResult, AppState};
use crate::cli::{self, argv};
use axum::extract::rejection::JsonRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use std::sync::Arc;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LayersReq {
    /// The model (a GGUF under the root, a split model's first shard, or an organ directory).
    path: String,
    /// The layers to remove, as `--drop` takes them: `10-12,15`.
    #[serde(default)]
    drop: Option<String>,
    /// The layers to keep, the others removed.
    #[serde(default)]
    keep: Option<String>,
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

/// `organ layers PATH (--drop|--keep) LIST --out OUT --json layers.json [--judge TEXT]`.
pub(super) async fn layers(
    State(s): State<Arc<AppState>>,
    body: Result<Json<LayersReq>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<JobStatus>)> {
    let Json(r) = body?;
    let model = s.path(&r.path)?;
    let judge = super::lora::judge(&s, super::lora::judge_of!(r))?;
    let out = out_name(r.out.as_deref(), "layers.gguf")?;
    let mut args = cli::LayersArgs {
        model,
        drop: r.drop,
        keep: r.keep,
        written: cli::Written { out: Some(out.clone().into()), ..Default::default() },
        judge,
        ..Default::default()
    };
    // One of drop and keep, a list that parses, a .gguf name: a 400, not a failed job.
    // Whether the layers are the model's is the job's to say, once it has read the header.
    if args.drop.is_some() == args.keep.is_some() {
        return Err(bad("give one of drop and keep"));
    }
    crate::cmd::layers::Options::try_from(&args).map_err(|e| bad(format!("{e:#}")))?;
    if !out.to_ascii_lowercase().ends_with(".gguf") {
        return Err(bad(format!("out {out:?}: organ layers writes one GGUF file: give a name ending in .gguf")));
    }
    start_job(
        &s,
        "layers",
        move |dir| {
            args.written.out = args.written.out.take().map(|o| dir.join(o));
            args.json = Some(dir.join("layers.json"));
            argv(&args)
        },
        vec![out, "layers.json".into()],
        Some("layers.json"),
        None,
    )
}
