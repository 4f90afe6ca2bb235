//! What the merged model is made of, tensor by tensor: for each output tensor, its name,
//! the input tensors merged into it (the base's and each merged model's, by model and
//! name) and its parameters; for `slices:`, the output's metadata too (its layer count,
//! its per-layer arrays taken from each layer's source).
//!
//! The models are the configuration's [`Config::inputs`], in that order; the first is the
//! reference, whose metadata and non-layer tensor names the output has (mergekit's output
//! configuration is the base's, else a source's). With `models:` every tensor of the
//! reference is merged from the same tensor of every model (the caller checks they have
//! the same tensors). With `slices:` ([`super::slices`]) the output's layer `offset + i`
//! of a slice is merged from layer `start + i` of each of its sources, renamed
//! `blk.{offset + i}.*`; the non-layer tensors from the first slice's sources, but
//! `output*` (the final norm and the output projection) from the last slice's.

use super::config::{Config, TensorParams, Who};
use super::setting::bad;
use super::slices::Slice;
use crate::error::{Error, Result};
use crate::gguf::ValueType;
use crate::model::{Model, OwnedValue, TensorEntry};
use crate::surgery::layers::{cut, set_count, swa_layers, NOT_PER_LAYER, POSITIONAL};
use alloc::borrow::{Borrow, ToOwned};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// One input tensor: a model (an index in [`Config::inputs`]) and its tensor's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    /// The model.
    pub model: usize,
    /// Its tensor.
    pub tensor: String,
}

/// One tensor of the output.
#[derive(Debug, Clone, PartialEq)]
pub struct OutTensor {
    /// Its name in the output.
    pub name: String,
    /// The base's tensor, for the methods that merge onto one.
    pub base: Option<Input>,
    /// The merged models' tensors, in the order of [`TensorParams::weights`].
    pub parts: Vec<Input>,
    /// Its parameters.
    pub params: TensorParams,
}

/// The merged model, planned.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    /// Its tensors, in order.
    pub tensors: Vec<OutTensor>,
    /// `slices:` only: the output's metadata (the reference's, its layer count and per-layer
    /// arrays set to the stack's), and what changed in it.
    pub kvs: Option<StackMeta>,
    /// `slices:` only: each output layer's source, the first of its slice's: (model, layer).
    pub layers: Vec<(usize, u32)>,
}

/// A stack's metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct StackMeta {
    /// The output's keys and values, in the reference's order.
    pub kvs: Vec<(String, OwnedValue)>,
    /// The keys changed, each with what was done.
    pub changed: Vec<(String, String)>,
}

/// Architectures whose llama.cpp 11434 loader reads no `output.weight` (`src/models/*.cpp`
/// create none: the output projection is always `token_embd`'s).
const NO_OUTPUT: &[&str] =
    &["gemma", "gemma2", "cohere2", "command-r", "hunyuan-dense", "ernie4_5-moe", "mistral4", "openelm", "bitnet"];

impl Config {
    /// Every model to open, each once: the base first when there is one, then the models,
    /// or the slices' sources, in order of appearance. The first is the reference.
    pub fn inputs(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.base.iter().map(String::as_str).collect();
        let all = self.models.iter().map(|m| m.model.as_str());
        for p in all.chain(self.slices.iter().flat_map(|s| s.sources.iter().map(|x| x.model.as_str()))) {
            if !v.contains(&p) {
                v.push(p);
            }
        }
        v
    }

    /// Plans the output from `models`, the models of [`Config::inputs`] in that order.
    ///
    /// # Errors
    /// [`Error::BadConfig`] for a parameter, or a layer range beyond a model's layers
    /// (naming its key); [`Error::BadSetting`] naming the model for one whose architecture,
    /// layer count or tensors do not fit the stack; [`Error::BadMetadata`] for metadata
    /// organ cannot stack.
    pub fn layout<T: Borrow<TensorEntry>>(&self, models: &[&Model<T>]) -> Result<Layout> {
        let inputs = self.inputs();
        if models.len() != inputs.len() || models.is_empty() {
            return Err(Error::CountMismatch {
                what: "models",
                expected: inputs.len() as u64,
                got: models.len() as u64,
            });
        }
        let at = |p: &str| inputs.iter().position(|i| *i == p).unwrap_or(0);
        if self.slices.is_empty() {
            return self.whole(models[0], &at);
        }
        Stack::new(self, models, &inputs)?.layout(&at)
    }

    /// `models:`: every tensor of the reference, from the same tensor of each model.
    fn whole<T: Borrow<TensorEntry>>(&self, r: &Model<T>, at: &dyn Fn(&str) -> usize) -> Result<Layout> {
        let arch = r.architecture().unwrap_or_default().into_owned();
        let layers = r.get(&format!("{arch}.block_count")).and_then(OwnedValue::as_u64);
        let layers = layers.and_then(|l| u32::try_from(l).ok());
        let base = self.base.as_deref().filter(|_| self.method.needs_base()).map(at);
        let merged: Vec<usize> = self.merged().iter().map(|&i| at(&self.models[i].model)).collect();
        let mut tensors = Vec::with_capacity(r.tensors.len());
        for t in r.tensors.iter().map(Borrow::borrow) {
            let input = |model: usize| Input { model, tensor: t.name.clone() };
            tensors.push(OutTensor {
                name: t.name.clone(),
                base: base.map(input),
                parts: merged.iter().map(|&m| input(m)).collect(),
                params: self.resolve(&t.name, layers)?,
            });
        }
        Ok(Layout { tensors, kvs: None, layers: Vec::new() })
    }
}

/// `slices:` against the models: checked on creation.
struct Stack<'a, T> {
    c: &'a Config,
    models: &'a [&'a Model<T>],
    inputs: &'a [&'a str],
    arch: String,
    /// Each model's layer count.
    counts: Vec<u64>,
    /// The reference's layer tensors, by the rest of their names after `blk.0.`, in order.
    rests: Vec<String>,
}

fn model_err(model: &str, reason: String) -> Error {
    Error::BadSetting { what: model.into(), reason }
}

impl<'a, T: Borrow<TensorEntry>> Stack<'a, T> {
    fn new(c: &'a Config, models: &'a [&'a Model<T>], inputs: &'a [&'a str]) -> Result<Self> {
        let r = models[0];
        let arch = r.architecture().map(|a| a.into_owned());
        let arch =
            arch.ok_or_else(|| model_err(inputs[0], "no general.architecture: organ needs it to stack layers".into()))?;
        let key = format!("{arch}.block_count");
        let mut counts = Vec::with_capacity(models.len());
        for (m, p) in models.iter().zip(inputs) {
            let a = m.architecture().unwrap_or_default();
            if a != arch {
                return Err(model_err(
                    p,
                    format!("architecture {a:?}, but {} is {arch:?}: stacked models share one architecture", inputs[0]),
                ));
            }
            let n = m.get(&key).and_then(OwnedValue::as_u64).filter(|&n| n > 0 && n <= crate::limits::MAX_LAYERS);
            counts.push(n.ok_or_else(|| model_err(p, format!("{key} is missing or not a layer count")))?);
        }
        let rests = r
            .tensors
            .iter()
            .filter_map(|t| t.borrow().name.strip_prefix("blk.0.").map(ToOwned::to_owned))
            .collect::<Vec<_>>();
        let s = Stack { c, models, inputs, arch, counts, rests };
        s.check()?;
        Ok(s)
    }

    /// Each range within its model; every model's non-layer tensors the reference's, each
    /// layer taken the reference's first layer's tensors, of their shapes.
    fn check(&self) -> Result<()> {
        let at = |p: &str| self.inputs.iter().position(|i| *i == p).unwrap_or(0);
        for (i, s) in self.c.slices.iter().enumerate() {
            for (j, src) in s.sources.iter().enumerate() {
                let n = self.counts[at(&src.model)];
                if u64::from(src.end) > n {
                    return Err(bad(
                        &format!("slices[{i}].sources[{j}].layer_range"),
                        &format!("[{}, {}] is beyond {}'s {n} layers (0 to {})", src.start, src.end, src.model, n - 1),
                    ));
                }
            }
        }
        let r = self.models[0];
        let entry = |m: &Model<T>, name: &str| m.tensors.iter().map(Borrow::borrow).find(|t| t.name == name).cloned();
        for (m, p) in self.models.iter().zip(self.inputs) {
            let n = self.counts[at(p)];
            for t in m.tensors.iter().map(Borrow::borrow) {
                match crate::anatomy::layer_of(&t.name) {
                    Some(l) if u64::from(l) >= n => {
                        return Err(model_err(p, format!("tensor {:?} is not in one of its {n} layers", t.name)))
                    }
                    Some(_) => {}
                    None => match entry(r, &t.name) {
                        None => return Err(model_err(p, format!("tensor {:?} is not in {}", t.name, self.inputs[0]))),
                        Some(x) if x.dims != t.dims => {
                            return Err(model_err(
                                p,
                                format!(
                                    "tensor {:?} is {:?}, in {} it is {:?}",
                                    t.name, t.dims, self.inputs[0], x.dims
                                ),
                            ))
                        }
                        Some(_) => {}
                    },
                }
            }
            for t in r.tensors.iter().map(Borrow::borrow) {
                if crate::anatomy::layer_of(&t.name).is_none() && entry(m, &t.name).is_none() {
                    return Err(model_err(p, format!("has no tensor {:?} (in {})", t.name, self.inputs[0])));
                }
            }
        }
        for s in &self.c.slices {
            for src in &s.sources {
                let m = self.models[at(&src.model)];
                for l in src.start..src.end {
                    let prefix = format!("blk.{l}.");
                    let mut count = 0;
                    for t in m.tensors.iter().map(Borrow::borrow).filter(|t| t.name.starts_with(&prefix)) {
                        count += 1;
                        let rest = &t.name[prefix.len()..];
                        match entry(r, &format!("blk.0.{rest}")) {
                            Some(x) if x.dims == t.dims => {}
                            Some(x) => {
                                return Err(model_err(
                                    &src.model,
                                    format!(
                                    "tensor {:?} is {:?}, but the output's layers are {}'s blk.0's, where it is {:?}",
                                    t.name, t.dims, self.inputs[0], x.dims
                                ),
                                ))
                            }
                            None => {
                                return Err(model_err(
                                    &src.model,
                                    format!("tensor {:?} is not in {}'s layers", t.name, self.inputs[0]),
                                ))
                            }
                        }
                    }
                    if count != self.rests.len() {
                        return Err(model_err(
                            &src.model,
                            format!(
                                "layer {l} has {count} tensors, {}'s blk.0 {}: the output's layers are all alike",
                                self.inputs[0],
                                self.rests.len()
                            ),
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    fn layout(&self, at: &dyn Fn(&str) -> usize) -> Result<Layout> {
        let (c, r) = (self.c, self.models[0]);
        let (first, last) = (&c.slices[0], &c.slices[c.slices.len() - 1]);
        let non_layer = |post: bool| {
            r.tensors
                .iter()
                .map(|t| t.borrow().name.as_str())
                .filter(move |n| crate::anatomy::layer_of(n).is_none() && n.starts_with("output") == post)
        };
        let mut tensors = Vec::new();
        for name in non_layer(false) {
            tensors.push(self.one(0, first, name, 0.0, &|_| name.to_owned(), at)?);
        }
        let mut layers = Vec::new();
        for (i, s) in c.slices.iter().enumerate() {
            let n = s.len();
            for k in 0..n {
                let t = if n > 1 { f64::from(k) / f64::from(n - 1) } else { 1.0 };
                let out = layers.len();
                layers.push((at(&s.sources[0].model), s.sources[0].start + k));
                for rest in &self.rests {
                    let name = format!("blk.{out}.{rest}");
                    let of = |j: usize| format!("blk.{}.{rest}", s.sources[j].start + k);
                    tensors.push(self.one(i, s, &name, t, &of, at)?);
                }
            }
        }
        let lm = c.slices.len() - 1;
        for name in non_layer(true) {
            tensors.push(self.one(lm, last, name, 0.0, &|_| name.to_owned(), at)?);
        }
        // Tied embeddings (no output.weight): mergekit's lm_head falls back to the last
        // slice's embed_tokens, which the first slice's token_embd need not be.
        let tied = r.tensors.iter().any(|t| t.borrow().name == "token_embd.weight")
            && !r.tensors.iter().any(|t| t.borrow().name == "output.weight");
        if tied {
            let embd = |s: usize, slice: &Slice| {
                self.one(s, slice, "token_embd.weight", 0.0, &|_| "token_embd.weight".into(), at)
            };
            let (pre, mut post) = (embd(0, first)?, embd(lm, last)?);
            if pre != post {
                if NO_OUTPUT.contains(&self.arch.as_str()) {
                    return Err(bad(
                        &format!("slices[{lm}]"),
                        &format!(
                            "the output projection is token_embd in {}, and llama.cpp reads no output.weight for it: the last slice's models would give another (mergekit's lm_head), the first's token_embd; make them the same models",
                            self.arch
                        ),
                    ));
                }
                post.name = "output.weight".into();
                tensors.push(post);
            }
        }
        let kvs = self.metadata(&layers)?;
        Ok(Layout { tensors, kvs: Some(kvs), layers })
    }

    /// Output tensor `name` from slice `s` (index `i`): each source's tensor `of(j)`.
    fn one(
        &self,
        i: usize,
        s: &Slice,
        name: &str,
        t: f64,
        of: &dyn Fn(usize) -> String,
        at: &dyn Fn(&str) -> usize,
    ) -> Result<OutTensor> {
        let (c, top) = (self.c, self.c.base.as_deref());
        let names: Vec<String> = (0..s.sources.len()).map(of).collect();
        let base =
            s.base_source(c.method, top).map(|j| Input { model: at(&s.sources[j].model), tensor: names[j].clone() });
        let merged = s.merged(c.method, top);
        let who: Vec<Who<'_>> = merged
            .iter()
            .map(|&j| Who {
                key: format!("slices[{i}].sources[{j}]"),
                model: &s.sources[j].model,
                own: &s.sources[j].parameters,
                tensor: &names[j],
            })
            .collect();
        Ok(OutTensor {
            name: name.to_owned(),
            base,
            parts: merged.iter().map(|&j| Input { model: at(&s.sources[j].model), tensor: names[j].clone() }).collect(),
            params: c.resolve_with(&s.parameters, name, t, &who)?,
        })
    }

    /// The reference's metadata for a stack of `layers` (model, layer): the layer count,
    /// each per-layer array (and llama.cpp's sliding-window period, written out) taken
    /// from each layer's model; keys that place layers otherwise refused.
    fn metadata(&self, layers: &[(usize, u32)]) -> Result<StackMeta> {
        let (r, arch) = (self.models[0], self.arch.as_str());
        let prefix = format!("{arch}.");
        let n = self.counts[0];
        let refuse = |k: &str, reason: String| Error::BadMetadata { key: k.into(), reason };
        let (mut kvs, mut changed) = (Vec::with_capacity(r.kvs.len() + 1), Vec::new());
        let total = layers.len() as u64;
        for (k, v) in &r.kvs {
            let Some(key) = k.strip_prefix(&prefix) else {
                kvs.push((k.clone(), v.clone()));
                continue;
            };
            let new = match key {
                "block_count" => {
                    let c = set_count(v, total).ok_or_else(|| refuse(k, format!("cannot hold {total}")))?;
                    changed.push((k.clone(), format!("{n} → {total}")));
                    c
                }
                "leading_dense_block_count" | "nextn_predict_layers" if !matches!(v.as_u64(), Some(0)) => {
                    return Err(refuse(
                        k,
                        "counts layers at one end of the model: organ does not know how to stack them".into(),
                    ))
                }
                _ if POSITIONAL.contains(&key) && !matches!(v.as_u64(), Some(0)) => {
                    return Err(refuse(k, "places layers by position: organ does not know how to stack them".into()))
                }
                _ => match v {
                    OwnedValue::Array { len, .. } if *len == n && !NOT_PER_LAYER.contains(&key) => {
                        changed.push((k.clone(), format!("per-layer array of {n} elements stacked to {total}")));
                        self.stacked(k, v, layers)?
                    }
                    OwnedValue::Array { len, .. } if key == "attention.sliding_window_pattern" => {
                        return Err(refuse(
                            k,
                            format!("a per-layer array of {len} elements, but the model has {n} layers"),
                        ))
                    }
                    _ => v.clone(),
                },
            };
            kvs.push((k.clone(), new));
        }
        if swa_layers(r, arch, n, 0).is_some() {
            let key = format!("{prefix}attention.sliding_window_pattern");
            let mut raw = Vec::with_capacity(layers.len());
            for &(m, l) in layers {
                let p = swa_layers(self.models[m], arch, self.counts[m], 0);
                let p = p.ok_or_else(|| {
                    refuse(&key, format!("{} has no sliding window, {} has", self.inputs[m], self.inputs[0]))
                })?;
                raw.push(u8::from(p[l as usize]));
            }
            let v = OwnedValue::Array { elem_type: ValueType::Bool, len: raw.len() as u64, raw: raw.into() };
            match kvs.iter_mut().find(|(x, _)| *x == key) {
                Some(slot) => slot.1 = v,
                None => kvs.push((key.clone(), v)),
            }
            changed.push((
                key,
                format!("llama.cpp's period for {arch} written out per stacked layer (true: sliding window)"),
            ));
        }
        Ok(StackMeta { kvs, changed })
    }

    /// Per-layer array `k` (the reference's `v`) for the stack: each layer's element from
    /// its own model's array.
    fn stacked(&self, k: &str, v: &OwnedValue, layers: &[(usize, u32)]) -> Result<OwnedValue> {
        let OwnedValue::Array { elem_type, .. } = v else { return Ok(v.clone()) };
        let mut raw = Vec::new();
        for &(m, l) in layers {
            let theirs = self.models[m].get(k);
            let one = match theirs {
                Some(a @ OwnedValue::Array { elem_type: e, len, .. }) if e == elem_type && *len == self.counts[m] => {
                    cut(a, &[u64::from(l)])
                }
                _ => None,
            };
            let Some(OwnedValue::Array { raw: r, .. }) = one else {
                return Err(Error::BadMetadata {
                    key: k.into(),
                    reason: format!(
                        "{}'s is not a per-layer array of {elem_type:?} like {}'s: organ cannot stack it",
                        self.inputs[m], self.inputs[0]
                    ),
                });
            };
            raw.extend_from_slice(&r);
        }
        Ok(OwnedValue::Array { elem_type: *elem_type, len: layers.len() as u64, raw: raw.into() })
    }
}
