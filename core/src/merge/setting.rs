//! A parameter's setting in a merge configuration (mergekit's `ParameterSetting`): a
//! number or boolean, a gradient across the layers, or a list of `{filter, value}` whose
//! first match applies, read and checked from JSON with the key it came from; and the
//! filters' matching against GGUF and Hugging Face names. Shared by the configuration's
//! `models:` ([`super::config`]) and `slices:` ([`super::slices`]).

use crate::error::{Error, Result};
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
