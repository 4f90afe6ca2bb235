//! mergekit's `slices:` (its `config.py` `OutputSliceDefinition`, planned by `plan.py`):
//! the output's layers are the slices' layers in order, numbered on across slices; slice
//! `s` of `n` layers makes output layers `offset .. offset + n` by merging, for each `i`
//! below `n`, layer `start + i` of every one of its sources (`layer_range: [start, end]`,
//! half-open, every source of a slice as long). A gradient is evaluated within its slice:
//! layer `i` at `t = i / (n − 1)` (1 for a slice of one layer). The tensors outside the
//! layers are merged from the first slice's sources (`token_embd`…) and the last slice's
//! (`output_norm`, `output`), at `t = 0`, each slice's parameters applying.
//!
//! A slice reads `sources`, `base_model` and `parameters`; a source `model`,
//! `layer_range` and `parameters`. Everything else is refused by its key, as is what
//! mergekit would fail on later: sources of different lengths, a model twice in a slice,
//! a base missing from a slice that merges onto it, a passthrough slice of several sources.
//! [`super::layout`] checks the ranges against each model's layer count.

use super::setting::{bad, settings, Setting};
use super::Method;
use crate::error::Result;
use alloc::borrow::ToOwned;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use serde_json::Value;

/// One source of a slice: layers `start .. end` of `model`.
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    /// Where it is (a path, as the configuration gives it).
    pub model: String,
    /// The first layer taken.
    pub start: u32,
    /// The layer after the last one taken (`layer_range` is half-open).
    pub end: u32,
    /// Its own parameters, by name.
    pub parameters: Vec<(String, Setting)>,
}

/// One slice: the same number of layers of each source, merged layer by layer.
#[derive(Debug, Clone, PartialEq)]
pub struct Slice {
    /// Its sources, in the configuration's order.
    pub sources: Vec<Source>,
    /// Its own `base_model` (else the configuration's).
    pub base: Option<String>,
    /// Its parameters, before the configuration's.
    pub parameters: Vec<(String, Setting)>,
}

impl Slice {
    /// The number of layers it makes.
    pub fn len(&self) -> u32 {
        self.sources.first().map_or(0, |s| s.end - s.start)
    }

    /// Whether it makes no layer (never, once checked).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Its base: its own, else `top` (the configuration's).
    pub fn base<'a>(&'a self, top: Option<&'a str>) -> Option<&'a str> {
        self.base.as_deref().or(top)
    }

    /// The sources merged, as indices: every one but the base for the methods that merge
    /// onto one, every one for linear and passthrough.
    pub fn merged(&self, method: Method, top: Option<&str>) -> Vec<usize> {
        let base = self.base(top).filter(|_| method.needs_base());
        (0..self.sources.len()).filter(|&j| Some(self.sources[j].model.as_str()) != base).collect()
    }

    /// The index of the base among the sources, for the methods that merge onto one.
    pub fn base_source(&self, method: Method, top: Option<&str>) -> Option<usize> {
        let base = self.base(top).filter(|_| method.needs_base())?;
        self.sources.iter().position(|s| s.model == base)
    }
}

/// Slices at most (a layer each, at least).
const MAX_SLICES: usize = crate::limits::MAX_LAYERS as usize;
/// Sources of one slice at most.
const MAX_SOURCES: usize = 256;

/// Reads and checks `slices:` for `method`, `top` the configuration's `base_model`.
pub(super) fn parse(method: Method, top: Option<&str>, v: &Value) -> Result<Vec<Slice>> {
    let list = v.as_array().ok_or_else(|| bad("slices", "not a list"))?;
    if list.is_empty() {
        return Err(bad("slices", "empty: give at least one slice"));
    }
    if list.len() > MAX_SLICES {
        return Err(bad("slices", &format!("{} slices: organ reads at most {MAX_SLICES}", list.len())));
    }
    let mut out: Vec<Slice> = Vec::with_capacity(list.len());
    let mut total = 0u64;
    for (i, s) in list.iter().enumerate() {
        let key = format!("slices[{i}]");
        let slice = one_slice(method, top, &key, s)?;
        total += u64::from(slice.len());
        if total > crate::limits::MAX_LAYERS {
            return Err(bad(
                &key,
                &format!(
                    "the slices make more than {} layers: organ writes at most that many",
                    crate::limits::MAX_LAYERS
                ),
            ));
        }
        out.push(slice);
    }
    Ok(out)
}

fn one_slice(method: Method, top: Option<&str>, key: &str, v: &Value) -> Result<Slice> {
    let o = v.as_object().ok_or_else(|| bad(key, "not a mapping (a slice has sources, base_model, parameters)"))?;
    for k in o.keys() {
        if !["sources", "base_model", "parameters"].contains(&k.as_str()) {
            return Err(bad(
                &format!("{key}.{k}"),
                "organ does not support this key (a slice has sources, base_model and parameters)",
            ));
        }
    }
    let base = match o.get("base_model") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        Some(_) => return Err(bad(&format!("{key}.base_model"), "not a path")),
    };
    let parameters = settings(
        &format!("{key}.parameters"),
        o.get("parameters"),
        method.merge_parameters(),
        method.model_parameters(),
    )?;
    let list = o
        .get("sources")
        .and_then(Value::as_array)
        .filter(|l| !l.is_empty())
        .ok_or_else(|| bad(&format!("{key}.sources"), "missing, empty, or not a list"))?;
    if list.len() > MAX_SOURCES {
        return Err(bad(
            &format!("{key}.sources"),
            &format!("{} sources: organ reads at most {MAX_SOURCES}", list.len()),
        ));
    }
    let mut sources: Vec<Source> = Vec::with_capacity(list.len());
    for (j, s) in list.iter().enumerate() {
        let at = format!("{key}.sources[{j}]");
        let src = source(method, &at, s)?;
        if let Some(first) = sources.first() {
            let (n, n0) = (src.end - src.start, first.end - first.start);
            if n != n0 {
                return Err(bad(
                    &format!("{at}.layer_range"),
                    &format!(
                        "[{}, {}] is {n} layers, {key}.sources[0]'s is {n0}: the sources of a slice are merged layer by layer, so each gives as many",
                        src.start, src.end
                    ),
                ));
            }
        }
        if sources.iter().any(|x| x.model == src.model) {
            return Err(bad(&format!("{at}.model"), &format!("{:?} is given twice in this slice", src.model)));
        }
        sources.push(src);
    }
    let slice = Slice { sources, base, parameters };
    let merged = slice.merged(method, top).len();
    let base = slice.base(top).filter(|_| method.needs_base());
    match (method, base) {
        (Method::Passthrough, _) if slice.sources.len() != 1 => {
            return Err(bad(
                &format!("{key}.sources"),
                &format!(
                    "passthrough copies one source per slice, not {} (to merge them, give another merge_method)",
                    slice.sources.len()
                ),
            ))
        }
        (_, None) if method.needs_base() => {
            return Err(bad(
                &format!("{key}.base_model"),
                &format!("{} merges onto a base: give base_model (the slice's or the configuration's)", method.name()),
            ))
        }
        (_, Some(b)) if slice.base_source(method, top).is_none() => {
            return Err(bad(
                &format!("{key}.sources"),
                &format!(
                    "{} merges onto base_model {b:?}, which is not among this slice's sources: give it as a source (mergekit takes the base's layers from the slice)",
                    method.name()
                ),
            ))
        }
        _ => {}
    }
    if merged == 0 {
        return Err(bad(&format!("{key}.sources"), "no model to merge (the base alone is no merge)"));
    }
    if method == Method::Slerp && merged != 1 {
        return Err(bad(
            &format!("{key}.sources"),
            &format!("slerp interpolates the base and one other model, not {merged}"),
        ));
    }
    Ok(slice)
}

fn source(method: Method, key: &str, v: &Value) -> Result<Source> {
    let o = v.as_object().ok_or_else(|| bad(key, "not a mapping with model and layer_range"))?;
    for k in o.keys() {
        if !["model", "layer_range", "parameters"].contains(&k.as_str()) {
            return Err(bad(
                &format!("{key}.{k}"),
                "organ does not support this key (a source has model, layer_range and parameters)",
            ));
        }
    }
    let model = o.get("model").and_then(Value::as_str).filter(|s| !s.is_empty());
    let model = model.ok_or_else(|| bad(&format!("{key}.model"), "missing, or not a path"))?.to_owned();
    let at = format!("{key}.layer_range");
    let range =
        o.get("layer_range").ok_or_else(|| bad(&at, "missing: give [start, end], the layers start to end − 1"))?;
    let pair: Option<Vec<u32>> = range
        .as_array()
        .filter(|a| a.len() == 2)
        .and_then(|a| a.iter().map(|x| x.as_u64().and_then(|x| u32::try_from(x).ok())).collect());
    let Some([start, end]) = pair.as_deref().map(|p| [p[0], p[1]]) else {
        return Err(bad(&at, &format!("{range}: give [start, end], two layer numbers (end not included)")));
    };
    if start >= end {
        return Err(bad(&at, &format!("[{start}, {end}] has no layer: start must be below end (end is not included)")));
    }
    if u64::from(end) > crate::limits::MAX_LAYERS {
        return Err(bad(
            &at,
            &format!("[{start}, {end}]: organ reads models of at most {} layers", crate::limits::MAX_LAYERS),
        ));
    }
    let parameters = settings(&format!("{key}.parameters"), o.get("parameters"), method.model_parameters(), &[])?;
    Ok(Source { model, start, end, parameters })
}
