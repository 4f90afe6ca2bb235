//! A mergekit-style merge configuration (mergekit's `config.py`) where organ's features
//! meet it: `merge_method`, `base_model`, `models: [{model, parameters}]` or `slices:`
//! ([`super::slices`]), `parameters`, `dtype`/`out_dtype`. A parameter is a number or
//! boolean, a gradient (a list of numbers interpolated across the layers), or a list of
//! `{filter, value}` whose first match applies. Anything else is refused by its key, never
//! ignored.
//!
//! The configuration arrives as a JSON value (the CLI parses the YAML; a browser or the API
//! can parse it likewise), so this module reads no text of its own.

use super::slices::{self, Slice};
use super::Method;
use crate::error::{Error, Result};
use crate::ggml_type::GgmlType;
use alloc::borrow::ToOwned;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use serde_json::Value;

/// A leaf value.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    /// A number.
    Number(f64),
    /// A boolean.
    Bool(bool),
}

/// A parameter's setting (mergekit's `ParameterSetting`).
#[derive(Debug, Clone, PartialEq)]
pub enum Setting {
    /// One value for every tensor.
    Scalar(Scalar),
    /// Values interpolated across the layers: layer `i` of `L` at `t = i / (L − 1)`, every
    /// tensor outside a layer at `t = 0` (mergekit's `evaluate_setting` and `plan.py`).
    Gradient(Vec<f64>),
    /// The first condition whose filter is absent, `*`, or a part of the tensor's name.
    Conditions(Vec<(Option<String>, Setting)>),
}

impl Setting {
    /// The value for tensor `name` at layer position `t`, or `None` when no condition
    /// matches.
    pub fn evaluate(&self, name: &str, t: f64) -> Option<Scalar> {
        match self {
            Setting::Scalar(s) => Some(s.clone()),
            Setting::Gradient(v) => {
                let last = v.len().checked_sub(1)?;
                let scaled = t * last as f64;
                let i0 = (scaled as usize).min(last);
                let i1 = (i0 + 1).min(last);
                let frac = scaled - i0 as f64;
                Some(Scalar::Number((1.0 - frac) * v[i0] + frac * v[i1]))
            }
            Setting::Conditions(c) => c
                .iter()
                .find(|(f, _)| f.as_deref().is_none_or(|f| f == "*" || matches(f, name)))
                .and_then(|(_, s)| s.evaluate(name, t)),
        }
    }
}

/// One model of the merge.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelEntry {
    /// Where it is (a path, as the configuration gives it).
    pub model: String,
    /// Its own parameters, by name.
    pub parameters: Vec<(String, Setting)>,
}

/// A merge configuration, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The method.
    pub method: Method,
    /// The base model (required by every method but linear).
    pub base: Option<String>,
    /// The models, in the configuration's order (the base among them or not); empty when
    /// the configuration gives `slices`.
    pub models: Vec<ModelEntry>,
    /// `slices:`, in order (empty when it gives `models`).
    pub slices: Vec<Slice>,
    /// The merge's parameters, and defaults of the models'.
    pub parameters: Vec<(String, Setting)>,
    /// The merged tensors' type, from `out_dtype` or else `dtype`.
    pub out_type: Option<GgmlType>,
}

/// What one tensor is merged with: for each model merged (see [`Config::merged`]), its
/// weight and density; the merge's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorParams {
    /// Each merged model's weight (1 for SLERP's).
    pub weights: Vec<f64>,
    /// Each merged model's density (1 unless given).
    pub densities: Vec<f64>,
    /// SLERP's `t` (0 for the other methods).
    pub t: f64,
    /// `normalize`.
    pub normalize: bool,
    /// `rescale`.
    pub rescale: bool,
    /// `lambda`.
    pub lambda: f64,
    /// Passthrough's `scale` of its one model, where given.
    pub scale: Option<f64>,
}

/// One model's part in a tensor's parameters: how errors name it, its own parameters, the
/// name of its tensor (a model's filters see its own tensor's name, as mergekit's do).
pub(crate) struct Who<'a> {
    pub key: String,
    pub model: &'a str,
    pub own: &'a [(String, Setting)],
    pub tensor: &'a str,
}

/// The top-level keys organ reads.
const KNOWN: [&str; 8] =
    ["merge_method", "base_model", "models", "slices", "parameters", "dtype", "out_dtype", "tokenizer_source"];

impl Config {
    /// Reads and checks a configuration.
    ///
    /// # Errors
    /// [`Error::BadConfig`] naming the key: one organ does not know or support, a value of
    /// the wrong kind, an unknown method or parameter, a missing base, a model given twice.
    pub fn from_json(v: &Value) -> Result<Config> {
        let top = v.as_object().ok_or_else(|| bad("(the whole)", "is not a mapping of keys to values"))?;
        for k in top.keys() {
            if !KNOWN.contains(&k.as_str()) {
                return Err(bad(k, "organ does not support this key (it reads merge_method, base_model, models or slices, parameters, dtype, out_dtype, tokenizer_source: base)"));
            }
        }
        let name = top
            .get("merge_method")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("merge_method", "missing, or not a string"))?;
        let method = Method::from_name(name).ok_or_else(|| {
            let names: Vec<&str> = Method::ALL.iter().map(|m| m.name()).collect();
            bad("merge_method", &format!("{name:?} is not a method organ merges by ({})", names.join(", ")))
        })?;
        let base = match top.get("base_model") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
            Some(_) => return Err(bad("base_model", "not a path")),
        };
        let sliced = top.get("slices").filter(|v| !v.is_null());
        if method.needs_base() && base.is_none() && sliced.is_none() {
            return Err(bad("base_model", &format!("{} merges onto a base: give base_model", method.name())));
        }
        match top.get("tokenizer_source") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if s == "base" => {}
            Some(_) => return Err(bad("tokenizer_source", "organ keeps the base's tokenizer: give base or nothing")),
        }
        let out_type = match top.get("out_dtype").or_else(|| top.get("dtype")) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(match s.as_str() {
                "float32" | "fp32" => GgmlType::F32,
                "float16" | "fp16" => GgmlType::F16,
                "bfloat16" | "bf16" => GgmlType::BF16,
                _ => return Err(bad("dtype", &format!("{s:?}: give float32, float16 or bfloat16"))),
            }),
            Some(_) => return Err(bad("dtype", "not a string")),
        };
        let parameters =
            settings("parameters", top.get("parameters"), method.merge_parameters(), method.model_parameters())?;
        if let Some(v) = sliced {
            if top.get("models").is_some_and(|m| !m.is_null()) {
                return Err(bad("slices", "give models or slices, not both (as mergekit)"));
            }
            let slices = slices::parse(method, base.as_deref(), v)?;
            return Ok(Config { method, base, models: Vec::new(), slices, parameters, out_type });
        }
        let list = top
            .get("models")
            .and_then(Value::as_array)
            .ok_or_else(|| bad("models", "missing, or not a list (give models or slices)"))?;
        let mut models = Vec::with_capacity(list.len());
        for (i, m) in list.iter().enumerate() {
            let key = format!("models[{i}]");
            let (model, parameters) = match m {
                Value::String(s) => (s.clone(), Vec::new()),
                Value::Object(o) => {
                    for k in o.keys() {
                        if k != "model" && k != "parameters" {
                            return Err(bad(
                                &format!("{key}.{k}"),
                                "organ does not support this key (a model has model and parameters)",
                            ));
                        }
                    }
                    let model = o.get("model").and_then(Value::as_str).filter(|s| !s.is_empty());
                    let model = model.ok_or_else(|| bad(&format!("{key}.model"), "missing, or not a path"))?;
                    let ps =
                        settings(&format!("{key}.parameters"), o.get("parameters"), method.model_parameters(), &[])?;
                    (model.to_owned(), ps)
                }
                _ => return Err(bad(&key, "neither a path nor a mapping with model")),
            };
            if models.iter().any(|e: &ModelEntry| e.model == model) {
                return Err(bad(&format!("{key}.model"), &format!("{model:?} is given twice")));
            }
            models.push(ModelEntry { model, parameters });
        }
        let c = Config { method, base, models, slices: Vec::new(), parameters, out_type };
        let merged = c.merged().len();
        if merged == 0 {
            return Err(bad("models", "no model to merge (the base alone is no merge)"));
        }
        if method == Method::Slerp && merged != 1 {
            return Err(bad("models", &format!("slerp interpolates the base and one other model, not {merged}")));
        }
        if method == Method::Passthrough {
            if merged != 1 {
                return Err(bad(
                    "models",
                    &format!("passthrough copies one model, not {merged} (to stack layers of several, give slices)"),
                ));
            }
            if c.base.as_ref().is_some_and(|b| *b != c.models[0].model) {
                return Err(bad("base_model", "passthrough copies its one model: a base_model other than it would be a second (as in mergekit, which refuses it)"));
            }
        }
        Ok(c)
    }

    /// The models merged, as indices in [`Config::models`]: every one for linear; those
    /// other than the base for the rest (a base listed among the models is its starting
    /// point, as in mergekit).
    pub fn merged(&self) -> Vec<usize> {
        (0..self.models.len())
            .filter(|&i| !self.method.needs_base() || Some(&self.models[i].model) != self.base.as_ref())
            .collect()
    }

    /// The parameters of tensor `name`, in a model of `layers` layers (the `models` form).
    ///
    /// # Errors
    /// [`Error::BadConfig`]: a model without a weight where the method needs one, a value of
    /// the wrong kind, a density outside (0, 1], SLERP without `t`.
    pub fn resolve(&self, name: &str, layers: Option<u32>) -> Result<TensorParams> {
        let t = match (crate::anatomy::layer_of(name), layers) {
            (Some(i), Some(l)) if l > 1 => f64::from(i) / f64::from(l - 1),
            (Some(_), _) => 1.0,
            (None, _) => 0.0,
        };
        let who: Vec<Who<'_>> = self
            .merged()
            .into_iter()
            .map(|i| Who {
                key: format!("models[{i}]"),
                model: &self.models[i].model,
                own: &self.models[i].parameters,
                tensor: name,
            })
            .collect();
        self.resolve_with(&[], name, t, &who)
    }

    /// The parameters of tensor `name` at position `t` of the layers, the merge's looked up
    /// in `scope` (a slice's parameters) before the configuration's, each merged model's in
    /// its own first (mergekit's `ConfigReader.parameter`).
    pub(crate) fn resolve_with(
        &self,
        scope: &[(String, Setting)],
        name: &str,
        t: f64,
        who: &[Who<'_>],
    ) -> Result<TensorParams> {
        let find = |ps: &[(String, Setting)], p: &str, n: &str| {
            ps.iter().find(|(k, _)| k == p).and_then(|(_, s)| s.evaluate(n, t))
        };
        let global_of = |p: &str, n: &str| find(scope, p, n).or_else(|| find(&self.parameters, p, n));
        let global = |p: &str| global_of(p, name);
        let number = |p: &str, v: Option<Scalar>, default: Option<f64>| -> Result<f64> {
            match v {
                Some(Scalar::Number(x)) if x.is_finite() => Ok(x),
                Some(_) => Err(bad(p, &format!("for tensor {name:?}: not a finite number"))),
                None => default.ok_or_else(|| bad(p, &format!("missing for tensor {name:?}"))),
            }
        };
        let flag = |p: &str, default: bool| -> Result<bool> {
            match global(p) {
                Some(Scalar::Bool(b)) => Ok(b),
                Some(Scalar::Number(_)) => Err(bad(&format!("parameters.{p}"), "not true or false")),
                None => Ok(default),
            }
        };
        let (mut weights, mut densities, mut scale) = (Vec::new(), Vec::new(), None);
        for m in who {
            let own = |p: &str| find(m.own, p, m.tensor).or_else(|| global_of(p, m.tensor));
            let key = |p: &str| format!("{}.parameters.{p} ({})", m.key, m.model);
            let (w, d) = match self.method {
                Method::Slerp => (1.0, 1.0),
                Method::Passthrough => {
                    scale = own("scale").map(|s| number(&key("scale"), Some(s), None)).transpose()?;
                    (1.0, 1.0)
                }
                _ => {
                    (number(&key("weight"), own("weight"), None)?, number(&key("density"), own("density"), Some(1.0))?)
                }
            };
            if !(d > 0.0 && d <= 1.0) {
                return Err(bad(&key("density"), &format!("{d} for tensor {name:?} is outside (0, 1]")));
            }
            weights.push(w);
            densities.push(d);
        }
        let t = match self.method {
            Method::Slerp => number("parameters.t", global("t"), None)?,
            _ => 0.0,
        };
        let normalize = flag("normalize", self.method.default_normalize())?;
        // Sign election divides each value by the weights that agree there (1 when none
        // do); the others divide by the sum of all, which must not be 0.
        let total: f64 = weights.iter().sum();
        let summed = !matches!(self.method, Method::Slerp | Method::Passthrough) && !self.method.consensus();
        if normalize && summed && total.abs() < 1e-8 {
            return Err(bad(
                "weight",
                &format!("the weights of tensor {name:?} sum to {total}, and normalize divides by their sum"),
            ));
        }
        Ok(TensorParams {
            weights,
            densities,
            t,
            normalize,
            rescale: flag("rescale", self.method.default_rescale())?,
            lambda: number("parameters.lambda", global("lambda"), Some(1.0))?,
            scale,
        })
    }
}

/// A parameters mapping: each key one of `allowed` (or of `also`), each value a setting.
pub(crate) fn settings(
    key: &str,
    v: Option<&Value>,
    allowed: &[&str],
    also: &[&str],
) -> Result<Vec<(String, Setting)>> {
    let Some(v) = v.filter(|v| !v.is_null()) else { return Ok(Vec::new()) };
    let o = v.as_object().ok_or_else(|| bad(key, "not a mapping"))?;
    let mut out = Vec::with_capacity(o.len());
    for (k, v) in o {
        let at = format!("{key}.{k}");
        if !allowed.contains(&k.as_str()) && !also.contains(&k.as_str()) {
            let mut names: Vec<&str> = allowed.to_vec();
            names.extend(also);
            let list = if names.is_empty() { String::from("none") } else { names.join(", ") };
            return Err(bad(&at, &format!("not a parameter organ reads here (it reads: {list})")));
        }
        out.push((k.clone(), setting(&at, v, 0)?));
    }
    Ok(out)
}

/// Nesting of conditions within conditions, at most.
const MAX_DEPTH: usize = 4;

fn setting(key: &str, v: &Value, depth: usize) -> Result<Setting> {
    if depth > MAX_DEPTH {
        return Err(bad(key, "conditions nested too deep"));
    }
    Ok(match v {
        Value::Bool(b) => Setting::Scalar(Scalar::Bool(*b)),
        Value::Number(n) => Setting::Scalar(Scalar::Number(finite(key, n.as_f64())?)),
        Value::Array(a) if !a.is_empty() && a.iter().all(Value::is_number) => {
            Setting::Gradient(a.iter().map(|x| finite(key, x.as_f64())).collect::<Result<_>>()?)
        }
        Value::Array(a) if !a.is_empty() && a.iter().all(Value::is_object) => {
            Setting::Conditions(a.iter().map(|c| condition(key, c, depth)).collect::<Result<_>>()?)
        }
        Value::Object(_) => Setting::Conditions(alloc::vec![condition(key, v, depth)?]),
        _ => return Err(bad(key, "not a number, true or false, a list of numbers, or a list of {filter, value}")),
    })
}

fn condition(key: &str, v: &Value, depth: usize) -> Result<(Option<String>, Setting)> {
    let o = v.as_object().ok_or_else(|| bad(key, "a condition is a mapping"))?;
    for k in o.keys() {
        if k != "filter" && k != "value" {
            return Err(bad(&format!("{key}.{k}"), "a condition has filter and value"));
        }
    }
    let filter = match o.get("filter") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(bad(&format!("{key}.filter"), "not a string")),
    };
    let value = o.get("value").ok_or_else(|| bad(&format!("{key}.value"), "missing"))?;
    Ok((filter, setting(key, value, depth + 1)?))
}

fn finite(key: &str, x: Option<f64>) -> Result<f64> {
    x.filter(|x| x.is_finite()).ok_or_else(|| bad(key, "not a finite number"))
}

/// Whether `filter` is a part of tensor `name` or of the Hugging Face name it was
/// converted from ([`hf_name`]), so mergekit's filters (`self_attn`, `mlp`) select the
/// same tensors in a GGUF.
pub fn matches(filter: &str, name: &str) -> bool {
    name.contains(filter) || hf_name(name).is_some_and(|h| h.contains(filter))
}

/// The Hugging Face (Llama-style) name of a GGUF tensor, for filters: the inverse of
/// llama.cpp's `convert_hf_to_gguf.py` for the common tensors.
pub fn hf_name(name: &str) -> Option<String> {
    let (stem, suffix) = name.rsplit_once('.')?;
    let whole = match stem {
        "token_embd" => "model.embed_tokens".to_string(),
        "output_norm" => "model.norm".to_string(),
        "output" => "lm_head".to_string(),
        _ => {
            let layer = crate::anatomy::layer_of(stem)?;
            let part = stem.strip_prefix(&format!("blk.{layer}."))?;
            let hf = match part {
                "attn_q" => "self_attn.q_proj",
                "attn_k" => "self_attn.k_proj",
                "attn_v" => "self_attn.v_proj",
                "attn_output" => "self_attn.o_proj",
                "attn_q_norm" => "self_attn.q_norm",
                "attn_k_norm" => "self_attn.k_norm",
                "attn_norm" => "input_layernorm",
                "ffn_norm" => "post_attention_layernorm",
                "ffn_gate" => "mlp.gate_proj",
                "ffn_up" => "mlp.up_proj",
                "ffn_down" => "mlp.down_proj",
                _ => return None,
            };
            format!("model.layers.{layer}.{hf}")
        }
    };
    Some(format!("{whole}.{suffix}"))
}

pub(crate) fn bad(key: &str, reason: &str) -> Error {
    Error::BadConfig { key: key.into(), reason: reason.into() }
}
