//! The `merge` job (docs/merge.md): runs `organ merge` with the flags a request's fields
//! give (the method, the base, each model with its weight and density, `t`, the other
//! parameters, the type, the seed), its report as the job's result. Models are files
//! under the root; `judge` is a text under the root, as for lora-merge. The job merges
//! whole models: mergekit's `slices:` are the CLI's (`organ merge CONFIG.yml`), and a
//! request with `slices` is refused by name.

use super::job::JobStatus;
use super::jobs::start_job;
use super::lora::judge;
use super::surgery::out_name;
use super::{bad, ApiResult, AppState};
use crate::cli::{argv, Force, ModelMergeArgs};
use axum::extract::rejection::JsonRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Models one request may name.
const MAX_MODELS: usize = 64;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ModelReq {
    /// A GGUF under the root.
    path: String,
    /// Default 1 where the method reads a weight.
    #[serde(default)]
    weight: Option<f64>,
    /// Default 1.
    #[serde(default)]
    density: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct MergeReq {
    method: String,
    #[serde(default)]
    base: Option<String>,
    models: Vec<ModelReq>,
    #[serde(default)]
    t: Option<f64>,
    /// Other parameters of the merge (normalize, rescale, lambda, int8_mask): numbers or
    /// booleans.
    #[serde(default)]
    parameters: BTreeMap<String, Value>,
    #[serde(default, rename = "type")]
    ty: Option<String>,
    #[serde(default)]
    seed: Option<u64>,
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
    /// Read only to be refused by name (serde's unknown-field message would list every
    /// field instead of saying where slices are merged).
    #[serde(default)]
    slices: Option<Value>,
}

/// `organ merge --method M [--base B] --model FILE:W,density=D… --out OUT --json merge.json`.
pub(super) async fn merge(
    State(s): State<Arc<AppState>>,
    body: Result<Json<MergeReq>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<JobStatus>)> {
    let Json(r) = body?;
    if r.slices.is_some() {
        return Err(bad(
            "slices: the merge job merges whole models; mergekit's slices (layer ranges, passthrough stacks) are \
             merged by `organ merge CONFIG.yml` (docs/merge.md)",
        ));
    }
    if r.models.is_empty() || r.models.len() > MAX_MODELS {
        return Err(bad(format!("models: give 1 to {MAX_MODELS}, not {}", r.models.len())));
    }
    let mut models = Vec::with_capacity(r.models.len());
    for m in &r.models {
        let path = s.path(&m.path)?;
        let shown = path.to_str().ok_or_else(|| bad(format!("models: {:?}: a path that is not UTF-8", m.path)))?;
        let mut spec = shown.to_owned();
        for (i, (k, v)) in [("weight", m.weight), ("density", m.density)].into_iter().enumerate() {
            match v {
                Some(v) if !v.is_finite() => return Err(bad(format!("models: {:?}: {k} is not finite", m.path))),
                // FILE:W,density=D: a density needs a weight before it.
                Some(v) if i == 0 => spec.push_str(&format!(":{v}")),
                Some(v) => {
                    if m.weight.is_none() {
                        spec.push_str(":1");
                    }
                    spec.push_str(&format!(",{k}={v}"));
                }
                None => {}
            }
        }
        // FILE:W is split at the last ':': a path ending in ':2' with no weight given would
        // be read as weight 2 of another file.
        let read = crate::cli::model_flag(&spec).map_err(|e| bad(format!("models: {:?}: {e:#}", m.path)))?;
        if read["model"].as_str() != Some(shown) {
            return Err(bad(format!("models: {:?}: a path ending in ':NUMBER': give its weight too", m.path)));
        }
        models.push(spec);
    }
    let mut params = Vec::with_capacity(r.parameters.len());
    for (k, v) in &r.parameters {
        // The child splits --param KEY=VALUE at the first '=', and reads VALUE as YAML.
        if k.contains('=') {
            return Err(bad(format!("parameters.{:?}: a parameter's name has no '='", super::shown(k))));
        }
        if !(v.is_number() || v.is_boolean()) {
            return Err(bad(format!("parameters.{}: a number or true or false", super::shown(k))));
        }
        params.push(format!("{k}={v}"));
    }
    let base = r.base.as_deref().map(|b| s.path(b)).transpose()?;
    let judge = judge(&s, super::lora::judge_of!(r))?;
    let out = out_name(r.out.as_deref(), "merged.gguf")?;
    let mut args = ModelMergeArgs {
        config: None,
        method: Some(r.method),
        base,
        models,
        t: r.t,
        params,
        out: out.clone().into(),
        ty: r.ty,
        seed: r.seed.unwrap_or(0),
        json: None,
        force: Force::default(),
        judge,
    };
    // The method, parameters, densities and type are checked here: a 400, not a failed job.
    crate::cmd::merge::Options::try_from(&args).map_err(|e| bad(format!("{e:#}")))?;
    start_job(
        &s,
        "merge",
        move |dir| {
            args.out = dir.join(&args.out);
            args.json = Some(dir.join("merge.json"));
            argv(&args)
        },
        vec![out, "merge.json".into()],
        Some("merge.json"),
        None,
    )
}
