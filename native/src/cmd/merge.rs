//! `organ merge`: finetunes of one base merged as mergekit merges them (the core's
//! [`organ_core::merge`]), read from GGUFs of any type organ dequantizes. Every model is
//! opened and checked against the reference (the base, or linear's first model) before any
//! work; tensors identical in every input are copied byte for byte; the others are
//! dequantized, merged in f32/f64 and written in their output type, a window of tensors at
//! a time in parallel, so memory holds a few tensors, never a model.

use crate::llama_cpp::perplexity::Settings;
use crate::model::{Model, Tensor};
use crate::write::Made;
use anyhow::{bail, Context, Result};
use organ_core::lora::merge::{file_type, OutputType};
use organ_core::merge::config::{Config, TensorParams};
use organ_core::merge::math;
use organ_core::merge::Method;
use organ_core::model::OwnedValue;
use organ_core::quant::quantize::{can_quantize, quantize_in_range as quantize};
use organ_core::report::surgery::{self, MergeRow, Surgery};
use organ_core::report::AnyReport;
use organ_core::{GgmlType, MetaValue};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The prefix of the metadata organ adds to a merged model.
const KEY_PREFIX: &str = "organ.merge.";

pub struct Options<'a> {
    /// The merge, checked.
    pub config: Config,
    /// The configuration it was read from (JSON), for the provenance.
    pub spec: serde_json::Value,
    /// One GGUF file.
    pub out: &'a Path,
    /// The merged tensors' type (`--type`, else the configuration's `dtype`, else keep).
    pub ty: OutputType,
    /// DARE's seed.
    pub seed: u64,
    pub json: Option<&'a Path>,
    /// Replace outputs that exist (never an input).
    pub force: bool,
    /// `--judge`: the output against the base (linear: its first model).
    pub judge: Option<Settings>,
}

impl Options<'_> {
    /// Every model's path, the base first when there is one, each once.
    pub fn inputs(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = self.config.base.iter().map(PathBuf::from).collect();
        for m in &self.config.models {
            let p = PathBuf::from(&m.model);
            if !v.contains(&p) {
                v.push(p);
            }
        }
        v
    }
}

/// One tensor to merge.
struct Job {
    /// Its index among the reference's tensors.
    tensor: usize,
    to: GgmlType,
    why: &'static str,
    params: TensorParams,
}

pub fn run(o: &Options<'_>, w: &mut dyn Write) -> Result<()> {
    if !o.out.extension().is_some_and(|e| e.eq_ignore_ascii_case("gguf")) {
        bail!("{}: merge writes one GGUF file: give a name ending in .gguf", o.out.display());
    }
    let inputs = o.inputs();
    let reference = &inputs[0];
    if let Some(s) = &o.judge {
        crate::judge::check(reference, o.out, false, s)?;
    }
    let models: Vec<Model> = inputs.iter().map(|p| Model::open(p)).collect::<Result<_>>()?;
    let at = |p: &str| inputs.iter().position(|i| i.as_path() == Path::new(p)).unwrap_or(0);
    // The base (or linear's reference) and, in order, the models merged.
    let base = o.config.base.as_deref().map(at);
    let merged: Vec<usize> = o.config.merged().iter().map(|&i| at(&o.config.models[i].model)).collect();
    check_models(&models)?;
    let jobs = plan(o, &models, base, &merged)?;

    let copied = models[0].tensors.len() - jobs.len();
    let rows = tensor_rows(o, &models, base, &merged, &jobs);
    report(o, &models, &rows, copied, w)?;
    let kvs = metadata(o, &models, base, &merged)?;
    let len = write(o, &models, base, &merged, &jobs, &kvs)?;
    writeln!(w, "wrote {} ({len} bytes)", o.out.display())?;

    let verdict = crate::judge::judged(o.out, reference, o.judge.as_ref(), w)?;
    if let Some(p) = o.json {
        let report = surgery::Merge {
            method: o.config.method.name(),
            base: base.map(|b| models[b].label.as_str()),
            models: merged.iter().map(|&m| models[m].label.as_str()).collect(),
            out: &o.out.display().to_string(),
            seed: o.seed,
            tensors: &rows,
            copied,
            judge: verdict.as_ref(),
        };
        super::outputs::write_json(AnyReport::Surgery(&Surgery::Merge(report)), p, o.force)?;
    }
    Ok(())
}

/// Every model has the reference's architecture and exactly its tensors, each of its shape.
fn check_models(models: &[Model]) -> Result<()> {
    let r = &models[0];
    let arch = r.architecture().unwrap_or_default().into_owned();
    for m in &models[1..] {
        let a = m.architecture().unwrap_or_default();
        if a != arch {
            bail!("{}: architecture {a:?}, but {} is {arch:?}: merged models share one architecture", m.label, r.label);
        }
        if m.tensors.len() != r.tensors.len() {
            for t in &m.tensors {
                if !r.tensors.iter().any(|x| x.name == t.name) {
                    bail!("{}: tensor {:?} is not in {}", m.label, t.name, r.label);
                }
            }
        }
        for t in &r.tensors {
            let Some(x) = m.tensors.iter().find(|x| x.name == t.name) else {
                bail!("{}: has no tensor {:?} (in {})", m.label, t.name, r.label);
            };
            if x.dims != t.dims {
                bail!("{}: tensor {:?} is {:?}, in {} it is {:?}", m.label, t.name, x.dims, r.label, t.dims);
            }
        }
    }
    Ok(())
}

/// The tensors to merge (those not identical in every input), each with its parameters
/// and output type; every refusal comes here, before anything is written.
fn plan(o: &Options<'_>, models: &[Model], base: Option<usize>, merged: &[usize]) -> Result<Vec<Job>> {
    let r = &models[0];
    let arch = r.architecture().unwrap_or_default().into_owned();
    let layers = r.model.get(&format!("{arch}.block_count")).and_then(OwnedValue::as_u64);
    let layers = layers.and_then(|l| u32::try_from(l).ok());
    let used: Vec<usize> = base.into_iter().chain(merged.iter().copied()).collect();
    let mut jobs = Vec::new();
    for (i, t) in r.tensors.iter().enumerate() {
        let same = used.iter().all(|&m| {
            let x = tensor(&models[m], &t.name);
            x.ty == t.ty && x.bytes() == t.bytes()
        });
        // Read whole to be compared: their pages go back, or the map would hold them all.
        for &m in &used {
            tensor(&models[m], &t.name).release();
        }
        if same {
            continue;
        }
        for &m in &used {
            let x = tensor(&models[m], &t.name);
            if !x.ty.can_dequantize() {
                bail!("{}: tensor {:?} is {}, which organ cannot dequantize", models[m].label, t.name, x.ty);
            }
        }
        let params = o.config.resolve(&t.name, layers).with_context(|| format!("{}: cannot merge", r.label))?;
        let (to, why) = match o.ty {
            OutputType::Forced(ty) => (ty, "--type"),
            OutputType::Keep if can_quantize(t.ty) => (t.ty, "kept"),
            OutputType::Keep => (GgmlType::F16, "F16: organ cannot write the base's type"),
        };
        let cols = t.dims.first().copied().unwrap_or(0);
        if cols % to.block_size() as u64 != 0 {
            bail!("{}: tensor {:?}: its rows of {cols} values are not whole {to} blocks", r.label, t.name);
        }
        jobs.push(Job { tensor: i, to, why, params });
    }
    Ok(jobs)
}

/// Model `m`'s tensor `name` (every model was checked to have it).
fn tensor<'a>(m: &'a Model, name: &str) -> &'a Tensor {
    m.tensors.iter().find(|x| x.name == name).unwrap_or(&m.tensors[0])
}

fn tensor_rows(
    o: &Options<'_>,
    models: &[Model],
    base: Option<usize>,
    merged: &[usize],
    jobs: &[Job],
) -> Vec<MergeRow> {
    jobs.iter()
        .map(|j| {
            let t = &models[0].tensors[j.tensor];
            MergeRow {
                name: t.name.clone(),
                types: base.iter().chain(merged).map(|&m| tensor(&models[m], &t.name).ty.name().to_owned()).collect(),
                written_as: j.to.name().into(),
                why: j.why,
                weights: j.params.weights.clone(),
                densities: j.params.densities.clone(),
                t: (o.config.method == Method::Slerp).then_some(j.params.t),
            }
        })
        .collect()
}

fn report(o: &Options<'_>, models: &[Model], rows: &[MergeRow], copied: usize, w: &mut dyn Write) -> Result<()> {
    let c = &o.config;
    let r = &models[0];
    let n = c.merged().len();
    let onto = c.base.as_ref().map(|_| format!(" onto {}", r.label)).unwrap_or_default();
    let arch = r.architecture().unwrap_or_default().into_owned();
    writeln!(w, "merge: {} of {n} model{}{onto} ({arch})", c.method.name(), if n == 1 { "" } else { "s" })?;
    for i in c.merged() {
        writeln!(w, "  model  {}", c.models[i].model)?;
    }
    writeln!(w, "merged {} tensors, copied {copied} byte for byte", rows.len())?;
    let mut groups: Vec<(String, &str, &str, usize)> = Vec::new();
    for t in rows {
        let from = t.types.join("+");
        match groups.iter_mut().find(|g| (g.0.as_str(), g.1, g.2) == (from.as_str(), t.written_as.as_str(), t.why)) {
            Some(g) => g.3 += 1,
            None => groups.push((from, &t.written_as, t.why, 1)),
        }
    }
    for (from, to, why, count) in groups {
        writeln!(w, "  {count:>4} {from} -> {to} ({why})")?;
    }
    Ok(())
}

/// The reference's metadata, `general.file_type` set to the forced type's when it
/// changed a tensor's type, and the provenance: method, every input by file name and
/// BLAKE3, the parameters as given and the seed.
fn metadata(
    o: &Options<'_>,
    models: &[Model],
    base: Option<usize>,
    merged: &[usize],
) -> Result<Vec<(String, OwnedValue)>> {
    let r = &models[0];
    let mut kvs: Vec<(String, OwnedValue)> =
        r.kvs.iter().filter(|(k, _)| !k.starts_with(KEY_PREFIX)).cloned().collect();
    if let OutputType::Forced(ty) = o.ty {
        if let Some(ft) = file_type(ty) {
            let v = OwnedValue::Scalar(MetaValue::U32(ft));
            match kvs.iter_mut().find(|(k, _)| k == "general.file_type") {
                Some(kv) => kv.1 = v,
                None => kvs.push(("general.file_type".into(), v)),
            }
        }
    }
    let hash = |m: usize| -> Result<String> { Ok(models[m].fingerprint(false)?.blake3) };
    kvs.push((format!("{KEY_PREFIX}method"), OwnedValue::string(o.config.method.name())));
    if let Some(b) = base {
        kvs.push((format!("{KEY_PREFIX}base"), OwnedValue::string(&models[b].label)));
        kvs.push((format!("{KEY_PREFIX}base_blake3"), OwnedValue::string(&hash(b)?)));
    }
    let names: Vec<String> = merged.iter().map(|&m| models[m].label.clone()).collect();
    let hashes: Vec<String> = merged.iter().map(|&m| hash(m)).collect::<Result<_>>()?;
    kvs.push((format!("{KEY_PREFIX}models"), OwnedValue::strings(&names)?));
    kvs.push((format!("{KEY_PREFIX}models_blake3"), OwnedValue::strings(&hashes)?));
    kvs.push((format!("{KEY_PREFIX}parameters"), OwnedValue::string(&parameters(o))));
    Ok(kvs)
}

/// The parameters as given (the merge's, each merged model's in order), and the seed, as
/// JSON: paths stay out, as in `models`, so the file says what was merged, not where it lay.
fn parameters(o: &Options<'_>) -> String {
    let c = &o.config;
    let given = |v: Option<&serde_json::Value>| v.cloned().unwrap_or(serde_json::Value::Null);
    let models: Vec<serde_json::Value> = c
        .merged()
        .iter()
        .map(|&i| given(o.spec.get("models").and_then(|m| m.get(i)).and_then(|m| m.get("parameters"))))
        .collect();
    serde_json::json!({ "parameters": given(o.spec.get("parameters")), "models": models, "seed": o.seed }).to_string()
}

/// The f32 bytes the tensors merged at once may hold (inputs and outputs), beyond one
/// tensor (a batch always holds one, however large).
const MERGE_BUDGET: u64 = 192 << 20;

/// The f32 copies of its tensor a merge holds at its peak, whatever the number of models:
/// the base, the output, one model and its magnitudes (TIES), beside the core's span of
/// rows of every model ([`math::SPAN_VALUES`]).
const MERGE_COPIES: u64 = 4;

/// Writes the merged model through a temp file; returns its length. A merged tensor holds
/// at most MERGE_COPIES f32 copies of itself and a span while made: a batch holds at most
/// MERGE_BUDGET bytes of them (always one tensor), so memory is a few tensors whatever the
/// models and however many.
fn write(
    o: &Options<'_>,
    models: &[Model],
    base: Option<usize>,
    merged: &[usize],
    jobs: &[Job],
    kvs: &[(String, OwnedValue)],
) -> Result<u64> {
    let r = &models[0];
    let span = 4 * math::SPAN_VALUES as u64;
    let mut job_of: Vec<Option<usize>> = vec![None; r.tensors.len()];
    let mut made: Vec<Option<Made>> = vec![None; r.tensors.len()];
    for (k, j) in jobs.iter().enumerate() {
        job_of[j.tensor] = Some(k);
        let holds = r.tensors[j.tensor].n_elements.saturating_mul(4 * MERGE_COPIES).saturating_add(span);
        made[j.tensor] = Some(Made { ty: j.to, holds });
    }
    let make = |i: usize| match job_of[i] {
        Some(k) => merge_one(o, models, base, merged, &jobs[k]),
        None => bail!("tensor {i} has no merge"),
    };
    crate::write::write_made(o.out, o.force, r, kvs, &made, MERGE_BUDGET, make)
}

/// One merged tensor's bytes in its output type. The inputs are read as the core asks,
/// a span of rows of each at a time, their pages given back once read: memory holds a few
/// copies of the tensor, not one per model.
fn merge_one(o: &Options<'_>, models: &[Model], base: Option<usize>, merged: &[usize], j: &Job) -> Result<Vec<u8>> {
    let r = &models[0];
    let name = &r.tensors[j.tensor].name;
    let n = usize::try_from(r.tensors[j.tensor].n_elements).context("a tensor larger than memory")?;
    let row = usize::try_from(r.tensors[j.tensor].dims.first().copied().unwrap_or(1)).unwrap_or(n).max(1);
    let mut read = |input: math::Input, range: std::ops::Range<usize>, into: &mut Vec<f32>| {
        let m = match input {
            math::Input::Base => base,
            math::Input::Part(k) => merged.get(k).copied(),
        };
        let Some(m) = m else {
            return Err(organ_core::Error::BadLayout { tensor: name.clone(), reason: "no such input".into() });
        };
        let t = tensor(&models[m], name);
        let (bs, ts) = (t.ty.block_size(), t.ty.type_size());
        // Every row is whole blocks (the parser checks), and a range is whole rows.
        let (from, to) = (range.start / bs * ts, range.end / bs * ts);
        let bytes = t.bytes().get(from..to).ok_or_else(|| organ_core::Error::BadLayout {
            tensor: name.clone(),
            reason: format!("values {range:?} are outside {}'s tensor", models[m].label),
        })?;
        into.clear();
        into.resize(range.len(), 0.0);
        let done = organ_core::quant::dequantize_into(t.ty, bytes, into);
        t.release_range(from as u64, (to - from) as u64);
        done
    };
    let p = &j.params;
    let mut out = vec![0f32; n];
    let shares: Vec<math::Share> =
        p.weights.iter().zip(&p.densities).map(|(&weight, &density)| math::Share { weight, density }).collect();
    let method = o.config.method;
    let done = match (method, base) {
        (Method::Linear, _) => math::linear_streamed(name, &shares, p.normalize, row, &mut read, &mut out),
        (Method::Slerp, Some(_)) => {
            let (mut b, mut x) = (Vec::new(), Vec::new());
            read(math::Input::Base, 0..n, &mut b)
                .and_then(|()| read(math::Input::Part(0), 0..n, &mut x))
                .and_then(|()| math::slerp(name, p.t, &b, &x, &mut out))
        }
        (_, Some(_)) => {
            let s = math::Settings { normalize: p.normalize, rescale: p.rescale, lambda: p.lambda, seed: o.seed };
            math::task_arithmetic_streamed(name, method, &shares, &s, row, &mut read, &mut out)
        }
        (_, None) => bail!("{} merges onto a base: give one", method.name()),
    };
    done.with_context(|| format!("{}: merging", r.label))?;
    let mut bytes = Vec::new();
    quantize(j.to, &out, &mut bytes)
        .with_context(|| format!("{}: writing merged tensor {name:?} as {}", o.out.display(), j.to))?;
    Ok(bytes)
}
