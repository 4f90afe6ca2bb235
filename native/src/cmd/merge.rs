//! `organ merge`: finetunes of one base merged as mergekit merges them (the core's
//! [`organ_core::merge`]), read from GGUFs of any type organ dequantizes; with `slices:`,
//! layer ranges of several models merged slice by slice and stacked. Every model is
//! opened and checked against the reference (the base, or the first model) before any
//! work; the core lays out which input tensors make each output tensor; tensors identical
//! in every input (and left so by the merge) are copied byte for byte; the others are
//! dequantized, merged in f32/f64 and written in their output type, a window of tensors at
//! a time in parallel, so memory holds a few tensors, never a model.

use crate::llama_cpp::perplexity::Settings;
use crate::model::{Model, Tensor};
use crate::write::Made;
use anyhow::{bail, Context, Result};
use organ_core::lora::merge::{file_type, OutputType};
use organ_core::merge::config::Config;
use organ_core::merge::layout::{Input, Layout, OutTensor};
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
    /// `--judge`: the output against the reference (the base, else the first model).
    pub judge: Option<Settings>,
}

impl Options<'_> {
    /// Every model's path, the base first when there is one, each once (the core's
    /// [`Config::inputs`]).
    pub fn inputs(&self) -> Vec<PathBuf> {
        self.config.inputs().into_iter().map(PathBuf::from).collect()
    }
}

/// One tensor to merge.
struct Job {
    to: GgmlType,
    why: &'static str,
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
    if o.config.slices.is_empty() {
        check_models(&models)?;
    }
    let cores: Vec<&organ_core::model::Model<Tensor>> = models.iter().map(|m| &m.model).collect();
    let what = o.spec.get("slices").map_or("cannot merge", |_| "cannot stack the slices");
    let layout = o.config.layout(&cores).with_context(|| format!("{}: {what}", models[0].label))?;
    let base = o.config.base.as_ref().map(|_| 0);
    let merged = merged_inputs(&layout);
    let jobs = plan(o, &models, &layout)?;

    let copied = jobs.iter().filter(|j| j.is_none()).count();
    let rows = tensor_rows(o, &models, &layout, &jobs);
    report(o, &models, &layout, &merged, &rows, copied, w)?;
    let kvs = metadata(o, &models, &layout, base, &merged)?;
    let len = write(o, &models, &layout, &jobs, &kvs)?;
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
            block_count: layout.kvs.as_ref().map(|_| layout.layers.len() as u64),
            judge: verdict.as_ref(),
        };
        super::outputs::write_json(AnyReport::Surgery(&Surgery::Merge(report)), p, o.force)?;
    }
    Ok(())
}

/// The inputs merged (not only a base), in order (the models form's: the first tensor's
/// parts, every merged model in the configuration's order).
fn merged_inputs(layout: &Layout) -> Vec<usize> {
    let mut v: Vec<usize> = Vec::new();
    for t in &layout.tensors {
        for p in &t.parts {
            if !v.contains(&p.model) {
                v.push(p.model);
            }
        }
    }
    v
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

/// Every input of an output tensor: the base's first, then the merged models'.
fn used(t: &OutTensor) -> impl Iterator<Item = &Input> {
    t.base.iter().chain(&t.parts)
}

/// Whether merging inputs that are all the same tensor gives it back unchanged: every
/// method but linear without normalize (whose weights need not sum to 1) and a
/// passthrough's scale.
fn identity(c: &Config, t: &OutTensor) -> bool {
    match c.method {
        Method::Linear => t.params.normalize || t.params.weights.iter().sum::<f64>() == 1.0,
        Method::Passthrough => t.params.scale.is_none_or(|s| s == 1.0),
        _ => true,
    }
}

/// For each output tensor, None to copy it (identical in every input, and so after the
/// merge) or its merge's output type; every refusal comes here, before anything is
/// written.
fn plan(o: &Options<'_>, models: &[Model], layout: &Layout) -> Result<Vec<Option<Job>>> {
    let mut jobs = Vec::with_capacity(layout.tensors.len());
    for ot in &layout.tensors {
        let first = used(ot).next().map(|i| tensor(models, i));
        let Some(t) = first else { bail!("output tensor {:?} has no input", ot.name) };
        let same = used(ot).all(|i| {
            let x = tensor(models, i);
            x.ty == t.ty && x.bytes() == t.bytes()
        });
        // Read whole to be compared: their pages go back, or the map would hold them all.
        for i in used(ot) {
            tensor(models, i).release();
        }
        if same && identity(&o.config, ot) {
            jobs.push(None);
            continue;
        }
        for i in used(ot) {
            let x = tensor(models, i);
            if !x.ty.can_dequantize() {
                bail!("{}: tensor {:?} is {}, which organ cannot dequantize", models[i.model].label, x.name, x.ty);
            }
        }
        let (to, why) = match o.ty {
            OutputType::Forced(ty) => (ty, "--type"),
            OutputType::Keep if can_quantize(t.ty) => (t.ty, "kept"),
            OutputType::Keep => (GgmlType::F16, "F16: organ cannot write the base's type"),
        };
        let cols = t.dims.first().copied().unwrap_or(0);
        if cols % to.block_size() as u64 != 0 {
            bail!("{}: tensor {:?}: its rows of {cols} values are not whole {to} blocks", models[0].label, ot.name);
        }
        jobs.push(Some(Job { to, why }));
    }
    Ok(jobs)
}

/// Input `i`'s tensor (the core's layout names only tensors the models have).
fn tensor<'a>(models: &'a [Model], i: &Input) -> &'a Tensor {
    let m = &models[i.model];
    m.tensors.iter().find(|x| x.name == i.tensor).unwrap_or(&m.tensors[0])
}

fn tensor_rows(o: &Options<'_>, models: &[Model], layout: &Layout, jobs: &[Option<Job>]) -> Vec<MergeRow> {
    layout
        .tensors
        .iter()
        .zip(jobs)
        .filter_map(|(t, j)| {
            let j = j.as_ref()?;
            Some(MergeRow {
                name: t.name.clone(),
                types: used(t).map(|i| tensor(models, i).ty.name().to_owned()).collect(),
                written_as: j.to.name().into(),
                why: j.why,
                weights: t.params.weights.clone(),
                densities: t.params.densities.clone(),
                t: (o.config.method == Method::Slerp).then_some(t.params.t),
            })
        })
        .collect()
}

fn report(
    o: &Options<'_>,
    models: &[Model],
    layout: &Layout,
    merged: &[usize],
    rows: &[MergeRow],
    copied: usize,
    w: &mut dyn Write,
) -> Result<()> {
    let c = &o.config;
    let r = &models[0];
    let n = merged.len();
    let onto = c.base.as_ref().map(|_| format!(" onto {}", r.label)).unwrap_or_default();
    let arch = r.architecture().unwrap_or_default().into_owned();
    let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    if c.slices.is_empty() {
        writeln!(w, "merge: {} of {}{onto} ({arch})", c.method.name(), plural(n, "model"))?;
        for i in c.merged() {
            writeln!(w, "  model  {}", c.models[i].model)?;
        }
    } else {
        let layers = layout.layers.len();
        writeln!(
            w,
            "merge: {} of {}, {}{onto} ({arch})",
            c.method.name(),
            plural(c.slices.len(), "slice"),
            plural(layers, "layer")
        )?;
        let mut offset = 0;
        for (i, s) in c.slices.iter().enumerate() {
            let len = s.len() as usize;
            let from: Vec<String> = s
                .sources
                .iter()
                .map(|x| {
                    let label = c.inputs().iter().position(|p| *p == x.model).map_or("?", |m| models[m].label.as_str());
                    format!("{label} {}-{}", x.start, x.end - 1)
                })
                .collect();
            writeln!(w, "  slice {i}  layers {}-{} from {}", offset, offset + len - 1, from.join(" + "))?;
            offset += len;
        }
        if let Some(m) = &layout.kvs {
            for (k, what) in &m.changed {
                writeln!(w, "  {k}: {what}")?;
            }
        }
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

/// The reference's metadata (with `slices:`, the stack's: its layer count and per-layer
/// arrays), `general.file_type` set to the forced type's when it changed a tensor's type,
/// and the provenance: method, every input by file name and BLAKE3, the parameters (and
/// slices) as given and the seed.
fn metadata(
    o: &Options<'_>,
    models: &[Model],
    layout: &Layout,
    base: Option<usize>,
    merged: &[usize],
) -> Result<Vec<(String, OwnedValue)>> {
    let r = &models[0];
    let from = layout.kvs.as_ref().map_or(&r.kvs, |m| &m.kvs);
    let mut kvs: Vec<(String, OwnedValue)> = from.iter().filter(|(k, _)| !k.starts_with(KEY_PREFIX)).cloned().collect();
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
    kvs.push((format!("{KEY_PREFIX}parameters"), OwnedValue::string(&parameters(o, models))));
    Ok(kvs)
}

/// The parameters as given (the merge's, each merged model's in order; with `slices:`,
/// the slices, each model by its file name), and the seed, as JSON: paths stay out, as in
/// `models`, so the file says what was merged, not where it lay.
fn parameters(o: &Options<'_>, models: &[Model]) -> String {
    let c = &o.config;
    let given = |v: Option<&serde_json::Value>| v.cloned().unwrap_or(serde_json::Value::Null);
    if !c.slices.is_empty() {
        let inputs = c.inputs();
        let label = |p: &serde_json::Value| -> serde_json::Value {
            let at = p.as_str().and_then(|p| inputs.iter().position(|i| *i == p));
            at.map_or(serde_json::Value::Null, |m| models[m].label.clone().into())
        };
        let mut slices = given(o.spec.get("slices"));
        for s in slices.as_array_mut().into_iter().flatten() {
            if let Some(b) = s.get_mut("base_model") {
                *b = label(b);
            }
            for x in s.get_mut("sources").and_then(|v| v.as_array_mut()).into_iter().flatten() {
                if let Some(m) = x.get_mut("model") {
                    *m = label(m);
                }
            }
        }
        return serde_json::json!({ "parameters": given(o.spec.get("parameters")), "slices": slices, "seed": o.seed })
            .to_string();
    }
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
/// models and however many. A copied tensor's bytes come from its first input's file.
fn write(
    o: &Options<'_>,
    models: &[Model],
    layout: &Layout,
    jobs: &[Option<Job>],
    kvs: &[(String, OwnedValue)],
) -> Result<u64> {
    let span = 4 * math::SPAN_VALUES as u64;
    let mut tensors = Vec::with_capacity(layout.tensors.len());
    let mut made: Vec<Option<Made>> = Vec::with_capacity(layout.tensors.len());
    for (ot, j) in layout.tensors.iter().zip(jobs) {
        let first = used(ot).next().map(|i| tensor(models, i));
        let Some(from) = first else { bail!("output tensor {:?} has no input", ot.name) };
        let mut t = from.clone();
        t.entry.name.clone_from(&ot.name);
        let holds = t.n_elements.saturating_mul(4 * MERGE_COPIES).saturating_add(span);
        made.push(j.as_ref().map(|j| Made { ty: j.to, holds }));
        tensors.push(t);
    }
    let like = models[0].derived(kvs.to_vec(), tensors);
    let make = |i: usize| match &jobs[i] {
        Some(j) => merge_one(o, models, &layout.tensors[i], j),
        None => bail!("tensor {i} has no merge"),
    };
    crate::write::write_made(o.out, o.force, &like, kvs, &made, MERGE_BUDGET, make)
}

/// One merged tensor's bytes in its output type. The inputs are read as the core asks,
/// a span of rows of each at a time, their pages given back once read: memory holds a few
/// copies of the tensor, not one per model.
fn merge_one(o: &Options<'_>, models: &[Model], ot: &OutTensor, j: &Job) -> Result<Vec<u8>> {
    let name = &ot.name;
    let Some(first) = used(ot).next().map(|i| tensor(models, i)) else { bail!("output tensor {name:?} has no input") };
    let n = usize::try_from(first.n_elements).context("a tensor larger than memory")?;
    let row = usize::try_from(first.dims.first().copied().unwrap_or(1)).unwrap_or(n).max(1);
    let mut read = |input: math::Input, range: std::ops::Range<usize>, into: &mut Vec<f32>| {
        let i = match input {
            math::Input::Base => ot.base.as_ref(),
            math::Input::Part(k) => ot.parts.get(k),
        };
        let Some(i) = i else {
            return Err(organ_core::Error::BadLayout { tensor: name.clone(), reason: "no such input".into() });
        };
        let t = tensor(models, i);
        let (bs, ts) = (t.ty.block_size(), t.ty.type_size());
        // Every row is whole blocks (the parser checks), and a range is whole rows.
        let (from, to) = (range.start / bs * ts, range.end / bs * ts);
        let bytes = t.bytes().get(from..to).ok_or_else(|| organ_core::Error::BadLayout {
            tensor: name.clone(),
            reason: format!("values {range:?} are outside {}'s tensor {:?}", models[i.model].label, t.name),
        })?;
        into.clear();
        into.resize(range.len(), 0.0);
        let done = organ_core::quant::dequantize_into(t.ty, bytes, into);
        t.release_range(from as u64, (to - from) as u64);
        done
    };
    let p = &ot.params;
    let mut out = vec![0f32; n];
    let shares: Vec<math::Share> =
        p.weights.iter().zip(&p.densities).map(|(&weight, &density)| math::Share { weight, density }).collect();
    let method = o.config.method;
    let done = match (method, &ot.base) {
        (Method::Linear, _) => math::linear_streamed(name, &shares, p.normalize, row, &mut read, &mut out),
        (Method::Passthrough, _) => read(math::Input::Part(0), 0..n, &mut out).map(|()| {
            // mergekit's tensor * scale, rounded once.
            let s = p.scale.unwrap_or(1.0);
            for x in &mut out {
                *x = (f64::from(*x) * s) as f32;
            }
        }),
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
    done.with_context(|| format!("{}: merging", models[0].label))?;
    let mut bytes = Vec::new();
    quantize(j.to, &out, &mut bytes)
        .with_context(|| format!("{}: writing merged tensor {name:?} as {}", o.out.display(), j.to))?;
    Ok(bytes)
}
