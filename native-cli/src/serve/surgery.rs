//! The operations that write a model (dissect, assemble, graft, moe, purify,
//! experts-extract, experts-prune): each request checked and turned into the command's
//! own flags (the structs of [`crate::cli`]), whose argv ([`cli::argv`]) starts an `organ`
//! child as a job. Their output goes to the job's directory, under a name the request may
//! choose ([`out_name`]).

use super::job::JobStatus;
use super::jobs::start_job;
use super::{bad, ApiResult, AppState};
use crate::cli::{self, argv, Force, SelectArgs};
use axum::extract::rejection::JsonRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use organ_core::surgery::purify::Method;
use serde::Deserialize;
use std::sync::Arc;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DissectReq {
    path: String,
    #[serde(default)]
    measure: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AssembleReq {
    path: String,
    /// Output file name (inside the job's results directory).
    #[serde(default)]
    out: Option<String>,
    #[serde(default)]
    split_max_size: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Select {
    #[serde(default)]
    layers: Option<String>,
    #[serde(default)]
    types: Vec<String>,
    #[serde(default)]
    names: Vec<String>,
    /// Every tensor; with none of the above and not `all`, the request is refused (a
    /// selection is never read into "everything").
    #[serde(default)]
    all: bool,
}

impl Select {
    /// The selection flags and `--all`, or a 400 naming the fields when neither is given
    /// or both are.
    fn required(self, command: &str) -> ApiResult<(SelectArgs, bool)> {
        let all = self.all;
        let s = SelectArgs { layers: self.layers, types: self.types, names: self.names };
        match (s.is_empty(), all) {
            (true, false) => Err(bad(format!(
                "{command}: which tensors? Give layers, types or names, or \"all\": true for every tensor"
            ))),
            (false, true) => Err(bad(format!("{command}: \"all\" and layers, types or names: give one or the other"))),
            _ => Ok((s, all)),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct GraftReq {
    donor: String,
    recipient: String,
    #[serde(default)]
    out: Option<String>,
    #[serde(flatten)]
    select: Select,
    #[serde(default)]
    dry_run: bool,
    #[serde(default)]
    split_max_size: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct MoeReq {
    /// The dense llama base (a GGUF under the root).
    base: String,
    /// The donors, one expert each, in order.
    experts: Vec<String>,
    #[serde(default)]
    experts_used: Option<u64>,
    #[serde(default)]
    router: Option<String>,
    #[serde(default)]
    prompts: Vec<String>,
    #[serde(default)]
    negative_prompts: Vec<String>,
    #[serde(default)]
    seed: Option<u64>,
    #[serde(default, rename = "type")]
    ty: Option<String>,
    #[serde(default)]
    out: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PurifyReq {
    path: String,
    method: String,
    #[serde(default)]
    out: Option<String>,
    #[serde(flatten)]
    select: Select,
    #[serde(default)]
    strength: Option<f64>,
    #[serde(default)]
    keep: Option<f64>,
    #[serde(default, rename = "as")]
    as_type: Option<String>,
    #[serde(default)]
    only_if_improves: bool,
    #[serde(default)]
    split_max_size: Option<String>,
}

/// An output name for a job's directory: one plain file name.
pub(super) fn out_name(name: Option<&str>, default: &str) -> ApiResult<String> {
    let n = name.unwrap_or(default);
    let ok = !n.is_empty()
        && n.len() <= 200
        && !n.starts_with('.')
        && n.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    if !ok {
        return Err(bad(format!("out {n:?}: a plain file name of letters, digits, '.', '-' and '_'")));
    }
    Ok(n.to_owned())
}

pub(super) async fn dissect(
    State(s): State<Arc<AppState>>,
    body: Result<Json<DissectReq>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<JobStatus>)> {
    let Json(r) = body?;
    let model = s.model(&r.path)?;
    start_job(
        &s,
        "dissect",
        |dir| argv(&cli::DissectArgs { model, out: dir.join("organs"), measure: r.measure, ..Default::default() }),
        vec!["organs".into()],
        None,
        None,
    )
}

pub(super) async fn assemble(
    State(s): State<Arc<AppState>>,
    body: Result<Json<AssembleReq>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<JobStatus>)> {
    let Json(r) = body?;
    let src = s.path(&r.path)?;
    let out = out_name(r.out.as_deref(), "model.gguf")?;
    let o2 = out.clone();
    start_job(
        &s,
        "assemble",
        move |dir| {
            let out = dir.join(&o2);
            argv(&cli::AssembleArgs { dir: src, out, split_max_size: r.split_max_size, force: Force::default() })
        },
        vec![out],
        None,
        None,
    )
}

pub(super) async fn graft(
    State(s): State<Arc<AppState>>,
    body: Result<Json<GraftReq>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<JobStatus>)> {
    let Json(r) = body?;
    let (donor, recipient) = (s.model(&r.donor)?, s.path(&r.recipient)?);
    let (select, all) = r.select.required("graft")?;
    let out = out_name(r.out.as_deref(), "graft.gguf")?;
    let o2 = out.clone();
    start_job(
        &s,
        "graft",
        move |dir| {
            argv(&cli::GraftArgs {
                donor,
                recipient,
                out: (!r.dry_run).then(|| dir.join(&o2)),
                select,
                all,
                dry_run: r.dry_run,
                split_max_size: r.split_max_size,
                ..Default::default()
            })
        },
        vec![out],
        None,
        None,
    )
}

/// `organ moe --base B --expert D… --out OUT --json moe.json` (docs/moe.md).
pub(super) async fn moe(
    State(s): State<Arc<AppState>>,
    body: Result<Json<MoeReq>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<JobStatus>)> {
    let Json(r) = body?;
    let max = organ_core::surgery::moe::MAX_EXPERTS;
    if r.experts.is_empty() || r.experts.len() > max {
        return Err(bad(format!("{} experts: give 1 to {max}", r.experts.len())));
    }
    if r.prompts.len() > max || r.negative_prompts.len() > max {
        return Err(bad(format!("more prompt files than the {max} experts possible")));
    }
    if let Some(m) = r.router.as_deref().filter(|m| organ_core::surgery::moe::RouterMode::parse(m).is_none()) {
        return Err(bad(format!("router {m:?}: use uniform, random or embed")));
    }
    let base = s.path(&r.base)?;
    let paths = |v: &[String]| v.iter().map(|p| s.path(p)).collect::<ApiResult<Vec<_>>>();
    let (experts, prompts, negative) = (paths(&r.experts)?, paths(&r.prompts)?, paths(&r.negative_prompts)?);
    let out = out_name(r.out.as_deref(), "moe.gguf")?;
    let o2 = out.clone();
    start_job(
        &s,
        "moe",
        move |dir| {
            let mut m = cli::MoeArgs::new(base, experts, dir.join(&o2));
            m.experts_used = r.experts_used.unwrap_or(m.experts_used);
            m.router = r.router.unwrap_or(m.router);
            m.prompts = prompts;
            m.negative_prompts = negative;
            m.seed = r.seed.unwrap_or(m.seed);
            m.ty = r.ty;
            m.json = Some(dir.join("moe.json"));
            argv(&m)
        },
        vec![out, "moe.json".into()],
        Some("moe.json"),
        None,
    )
}

pub(super) async fn purify(
    State(s): State<Arc<AppState>>,
    body: Result<Json<PurifyReq>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<JobStatus>)> {
    let Json(r) = body?;
    let model = s.path(&r.path)?;
    if !matches!(r.method.as_str(), "fractal" | "spectral") {
        return Err(bad(format!("method {:?}: use fractal or spectral", r.method)));
    }
    let (select, all) = r.select.required("purify")?;
    // The parameters' ranges, as the child checks them: a 400, not a failed job.
    let methods =
        [r.strength.map(|strength| Method::Fractal { strength }), r.keep.map(|keep| Method::Spectral { keep })];
    for m in methods.into_iter().flatten() {
        m.check().map_err(|e| bad(format!("{} {e}", e.parameter)))?;
    }
    let out = out_name(r.out.as_deref(), "purified.gguf")?;
    let o2 = out.clone();
    start_job(
        &s,
        "purify",
        move |dir| {
            let mut p = cli::PurifyArgs::new(model, r.method, dir.join(&o2));
            (p.select, p.all) = (select, all);
            p.strength = r.strength.unwrap_or(p.strength);
            p.keep = r.keep.unwrap_or(p.keep);
            p.as_type = r.as_type;
            p.only_if_improves = r.only_if_improves;
            p.json = Some(dir.join("purify.json"));
            p.split_max_size = r.split_max_size;
            argv(&p)
        },
        vec![out, "purify.json".into()],
        Some("purify.json"),
        None,
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ExpertsExtractReq {
    /// The MoE (llama layout).
    path: String,
    /// Which expert, from 0.
    expert: u64,
    #[serde(default)]
    out: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ExpertsPruneReq {
    /// The MoE.
    path: String,
    /// The experts to keep, as `--keep` takes them: `0,2,5`, `0-3,6`.
    keep: String,
    #[serde(default)]
    experts_used: Option<u64>,
    #[serde(default)]
    out: Option<String>,
}

/// `organ experts extract PATH --expert E` (docs/experts.md): outputs the model and
/// experts.json, the job's result.
pub(super) async fn experts_extract(
    State(s): State<Arc<AppState>>,
    body: Result<Json<ExpertsExtractReq>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<JobStatus>)> {
    let Json(r) = body?;
    let model = s.path(&r.path)?;
    let out = out_name(r.out.as_deref(), "expert.gguf")?;
    let o2 = out.clone();
    start_job(
        &s,
        "experts-extract",
        move |dir| argv(&cli::experts::Op::Extract { common: experts_out(model, dir, &o2), expert: r.expert }),
        vec![out, "experts.json".into()],
        Some("experts.json"),
        None,
    )
}

/// `organ experts prune PATH --keep LIST [--experts-used K]` (docs/experts.md): outputs
/// the model and experts.json, the job's result.
pub(super) async fn experts_prune(
    State(s): State<Arc<AppState>>,
    body: Result<Json<ExpertsPruneReq>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<JobStatus>)> {
    let Json(r) = body?;
    let model = s.path(&r.path)?;
    organ_core::surgery::experts::parse_keep(&r.keep).map_err(|e| bad(format!("--keep {e}")))?;
    let out = out_name(r.out.as_deref(), "pruned.gguf")?;
    let o2 = out.clone();
    start_job(
        &s,
        "experts-prune",
        move |dir| {
            let common = experts_out(model, dir, &o2);
            argv(&cli::experts::Op::Prune { common, keep: r.keep, experts_used: r.experts_used })
        },
        vec![out, "experts.json".into()],
        Some("experts.json"),
        None,
    )
}

/// The flags of both experts operations: the model, written to OUT in the job's directory
/// with its report in experts.json.
fn experts_out(model: std::path::PathBuf, dir: &std::path::Path, out: &str) -> cli::experts::Common {
    let written = cli::Written { out: Some(dir.join(out)), ..Default::default() };
    cli::experts::Common { model, written, json: Some(dir.join("experts.json")), ..Default::default() }
}
