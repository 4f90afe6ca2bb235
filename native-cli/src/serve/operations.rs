//! The operations (measure, diff, check, dissect, assemble, graft, moe, purify, eval,
//! experts-extract, experts-prune): each request checked and turned into the command's
//! own flags (the structs of [`crate::cli`]), whose argv ([`cli::argv`]) starts an `organ`
//! child as a job.

use super::jobs::{start_job, JobStatus};
use super::{bad, ApiResult, AppState};
use crate::cli::{self, argv, Force, ReportOutputs, SelectArgs, Work};
use axum::extract::rejection::JsonRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use std::sync::Arc;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct MeasureReq {
    paths: Vec<String>,
    /// σ_θ beside θ and σ of θ_mean (§7), as `organ measure --sigma`.
    #[serde(default)]
    sigma: bool,
    /// θ over every value, no sampling (§7), as `organ measure --exact`.
    #[serde(default)]
    exact: bool,
    /// Also each expert's θ (§6), outliers and duplicates, as `organ measure --experts`.
    #[serde(default)]
    experts: bool,
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
    path: String,
}

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
}

impl From<Select> for SelectArgs {
    fn from(s: Select) -> SelectArgs {
        SelectArgs { layers: s.layers, types: s.types, names: s.names }
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
    #[serde(default)]
    ctx: Option<u32>,
    #[serde(default)]
    chunks: Option<u32>,
}

/// An output name for a job's directory: one plain file name.
fn out_name(name: Option<&str>, default: &str) -> ApiResult<String> {
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

pub(super) async fn measure(
    State(s): State<Arc<AppState>>,
    body: Result<Json<MeasureReq>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<JobStatus>)> {
    let Json(r) = body?;
    if r.paths.is_empty() || r.paths.len() > 1000 {
        return Err(bad("paths: give 1 to 1000 model paths"));
    }
    if r.sigma && r.exact {
        return Err(bad("sigma and exact: give one of them (exact θ has no sampling, so no σ)"));
    }
    let paths = r.paths.iter().map(|p| s.model(p)).collect::<ApiResult<Vec<_>>>()?;
    // Each entry is a model the child holds: the same one twice (however it is spelled)
    // would cost its memory twice and measure nothing more.
    let mut seen = std::collections::HashSet::with_capacity(paths.len());
    if let Some((rel, _)) = r.paths.iter().zip(&paths).find(|(_, p)| !seen.insert(*p)) {
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
                    json: Some(dir.join("report.json")),
                    csv: Some(dir.join("report.csv")),
                    html: Some(dir.join("report.html")),
                    summary_only: true,
                    ..Default::default()
                },
                no_cache: true,
                sigma: r.sigma,
                exact: r.exact,
                experts: r.experts,
                ..Default::default()
            })
        },
        vec!["report.json".into(), "report.csv".into(), "report.html".into()],
        Some("report.json"),
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
            d.outputs.json = Some(dir.join("diff.json"));
            d.outputs.csv = Some(dir.join("diff.csv"));
            if let Some(t) = r.top {
                d.top = usize::try_from(t).unwrap_or(usize::MAX); // at most MAX_TOP
            }
            d.only_changed = r.only_changed;
            argv(&d)
        },
        vec!["diff.json".into(), "diff.csv".into(), "diff.txt".into()],
        Some("diff.json"),
        Some("diff.txt"),
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
    let model = s.path(&r.path)?;
    start_job(
        &s,
        "check",
        |dir| {
            let json = Some(dir.join("check.json"));
            argv(&cli::CheckArgs { model, json, work: Work::default(), exit_zero: true, force: Force::default() })
        },
        vec!["check.json".into(), "check.txt".into()],
        Some("check.json"),
        Some("check.txt"),
    )
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
                select: r.select.into(),
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
    let out = out_name(r.out.as_deref(), "purified.gguf")?;
    let o2 = out.clone();
    start_job(
        &s,
        "purify",
        move |dir| {
            let mut p = cli::PurifyArgs::new(model, r.method, dir.join(&o2));
            p.select = r.select.into();
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

/// `organ eval MODEL --text TEXT [--base PARENT]` (docs/judge.md): llama.cpp's
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
    start_job(
        &s,
        "eval",
        |dir| {
            let mut e = cli::EvalArgs::new(model, text);
            e.base = base;
            e.ctx = r.ctx.unwrap_or(e.ctx);
            e.chunks = r.chunks;
            e.json = Some(dir.join("eval.json"));
            argv(&e)
        },
        vec!["eval.json".into(), "eval.txt".into()],
        Some("eval.json"),
        Some("eval.txt"),
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
    organ_core::surgery::experts::parse_keep(&r.keep).map_err(bad)?;
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
    let (out, json) = (Some(dir.join(out)), Some(dir.join("experts.json")));
    cli::experts::Common { model, out, json, ..Default::default() }
}
