//! A mergekit-style merge configuration (mergekit's `config.py`) where organ's features
//! meet it: `merge_method`, `base_model`, `models: [{model, parameters}]` or `slices:`
//! ([`super::slices`]), `parameters`, `dtype`/`out_dtype`. A parameter is a number or
//! boolean, a gradient (a list of numbers interpolated across the layers), or a list of
//! `{filter, value}` whose first match applies. Anything else is refused by its key, never
//! ignored.
//!
//! The configuration arrives as a JSON value (the CLI parses the YAML; a browser or the API
//! can parse it likewise), so this module reads no text of its own.

pub(crate) use super::setting::{bad, settings};
pub use super::setting::{hf_name, matches, Scalar, Setting};
use super::slices::{self, Slice};
use super::Method;
use crate::error::Result;
use crate::ggml_type::GgmlType;
use alloc::borrow::ToOwned;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use serde_json::Value;

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
