//! The operations (measure, diff, check, dissect, assemble, graft, moe, purify, eval,
//! experts-extract, experts-prune): each request checked
//! and turned into the argv of an `organ` child, started as a job.

use super::job::JobStatus;
use super::jobs::start_job;
use super::outputs::{CHECK_OUT, DIFF_OUT, MEASURE_OUT};
use super::{bad, ApiResult, AppState};
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

impl Select {
    /// Appends --layers, --type and --name as the CLI takes them.
    fn args(&self, a: &mut Vec<std::ffi::OsString>) {
        flag(a, "--layers", self.layers.as_ref());
        for t in &self.types {
            flag(a, "--type", Some(t));
        }
        for n in &self.names {
            flag(a, "--name", Some(n));
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

fn os(p: impl AsRef<std::ffi::OsStr>) -> std::ffi::OsString {
    p.as_ref().to_owned()
}

/// Appends `NAME VALUE` to an argv when there is a value.
fn flag(a: &mut Vec<std::ffi::OsString>, name: &str, value: Option<impl AsRef<std::ffi::OsStr>>) {
    if let Some(v) = value {
        a.extend([os(name), os(v)]);
    }
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
            let mut a = vec![os("measure")];
            a.extend(paths.iter().map(os));
            a.extend([os("--summary-only"), os("--no-cache")]);
            a.extend(MEASURE_OUT.flags(dir));
            if r.sigma {
                a.push(os("--sigma"));
            }
            if r.exact {
                a.push(os("--exact"));
            }
            if r.experts {
                a.push(os("--experts"));
            }
            a
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
            let mut a = vec![os("diff"), os(&base), os(&other)];
            a.extend(DIFF_OUT.flags(dir));
            flag(&mut a, "--top", r.top.map(|t| t.to_string()));
            if r.only_changed {
                a.push(os("--only-changed"));
            }
            a
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
    let model = s.path(&r.path)?;
    start_job(
        &s,
        "check",
        |dir| [os("check"), os(&model), os("--exit-zero")].into_iter().chain(CHECK_OUT.flags(dir)).collect(),
        CHECK_OUT.names(),
        Some(&CHECK_OUT.report()),
        CHECK_OUT.stdout().as_deref(),
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
        |dir| {
            let mut a = vec![os("dissect"), os(&model), os("--out"), os(dir.join("organs"))];
            if r.measure {
                a.push(os("--measure"));
            }
            a
        },
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
            let mut a = vec![os("assemble"), os(&src), os("--out"), os(dir.join(&o2))];
            flag(&mut a, "--split-max-size", r.split_max_size.as_ref());
            a
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
            let mut a = vec![os("graft"), os("--donor"), os(&donor), os("--recipient"), os(&recipient)];
            if r.dry_run {
                a.push(os("--dry-run"));
            } else {
                a.extend([os("--out"), os(dir.join(&o2))]);
            }
            flag(&mut a, "--split-max-size", r.split_max_size.as_ref());
            r.select.args(&mut a);
            a
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
            let mut a = vec![os("moe"), os("--base"), os(&base)];
            for e in &experts {
                a.extend([os("--expert"), os(e)]);
            }
            for p in &prompts {
                a.extend([os("--prompts"), os(p)]);
            }
            for p in &negative {
                a.extend([os("--negative-prompts"), os(p)]);
            }
            flag(&mut a, "--experts-used", r.experts_used.map(|k| k.to_string()));
            flag(&mut a, "--router", r.router.as_ref());
            flag(&mut a, "--seed", r.seed.map(|k| k.to_string()));
            flag(&mut a, "--type", r.ty.as_ref());
            a.extend([os("--out"), os(dir.join(&o2)), os("--json"), os(dir.join("moe.json"))]);
            a
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
            let mut a = vec![os("purify"), os(&model), os("--method"), os(&r.method), os("--out"), os(dir.join(&o2))];
            a.extend([os("--json"), os(dir.join("purify.json"))]);
            flag(&mut a, "--strength", r.strength.map(|x| x.to_string()));
            flag(&mut a, "--keep", r.keep.map(|x| x.to_string()));
            flag(&mut a, "--as", r.as_type.as_ref());
            if r.only_if_improves {
                a.push(os("--only-if-improves"));
            }
            flag(&mut a, "--split-max-size", r.split_max_size.as_ref());
            r.select.args(&mut a);
            a
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
            let mut a = vec![os("eval"), os(&model), os("--text"), os(&text), os("--json"), os(dir.join("eval.json"))];
            flag(&mut a, "--base", base.as_ref());
            flag(&mut a, "--ctx", r.ctx.map(|c| c.to_string()));
            flag(&mut a, "--chunks", r.chunks.map(|c| c.to_string()));
            a
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
        move |dir| {
            let e = r.expert.to_string();
            let mut a = vec![os("experts"), os("extract"), os(&model), os("--expert"), os(e)];
            a.extend([os("--out"), os(dir.join(&o2)), os("--json"), os(dir.join("experts.json"))]);
            a
        },
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
            let mut a = vec![os("experts"), os("prune"), os(&model), os("--keep"), os(&r.keep)];
            flag(&mut a, "--experts-used", r.experts_used.map(|k| k.to_string()));
            a.extend([os("--out"), os(dir.join(&o2)), os("--json"), os(dir.join("experts.json"))]);
            a
        },
        vec![out, "experts.json".into()],
        Some("experts.json"),
        None,
    )
}
