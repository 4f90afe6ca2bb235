//! `organ quantize`'s plan: llama-quantize's (`llama_model_quantize_impl`, llama.cpp build
//! 11434) decisions for a model, so the file a host then writes is that tool's byte for
//! byte. The plan says, for every tensor in the order it is written, its type and where it
//! goes, and gives the header; the host streams each tensor through [`convert`].
//!
//! What llama-quantize does and this follows:
//! - tensors in `llama_model_loader::weights_map`'s order: by the layer number after
//!   `blk.` (tensors without one first), then by name, byte for byte;
//! - the input's metadata in order (`gguf_set_kv`), then `general.quantization_version`
//!   and `general.file_type` moved to the end with their new values, `split.*` removed;
//! - each tensor's type from the mix's rules ([`rules`]), `--tensor-type` patterns, the
//!   fallbacks for rows that are not whole blocks;
//! - GGUF version 3, each tensor info with `ggml_n_dims` dimensions, the data aligned to 32.

pub mod derived;
pub mod ftype;
pub mod imatrix;
pub mod rules;

pub use ftype::Ftype;
pub use imatrix::QuantImatrix;
pub use rules::{Category, Hparams};

use crate::error::{Error, Result};
use crate::ggml_type::GgmlType;
use crate::gguf::writer::{plan as lay_out, Layout, TensorSpec};
use crate::gguf::MetaValue;
use crate::model::{Model, OwnedValue, TensorEntry};
use crate::recipe::accept::n_dims;
use alloc::borrow::Borrow;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

/// `GGML_QNT_VERSION`, and the alignment llama-quantize lays the data out to whatever the
/// input's `general.alignment` says: the recipe's size account knows them already.
pub use crate::recipe::size::{ALIGNMENT, QUANTIZATION_VERSION};

/// Whether ggml calls a type quantized (`ggml_is_quantized`): every type of blocks.
pub fn is_quantized(ty: GgmlType) -> bool {
    ty.block_size() > 1
}

/// A `--tensor-type` pattern: a regular expression searched for in the tensor's name.
#[derive(Debug, Clone)]
pub struct Pattern {
    text: String,
    re: regex_automata::meta::Regex,
}

impl Pattern {
    /// The pattern `text`, lower-cased as llama-quantize lower-cases it.
    ///
    /// llama-quantize reads patterns as ECMAScript (`std::regex`); organ reads them as
    /// Rust's regex syntax, which is the same for what tensor patterns use (literals,
    /// `.`, `^`, `$`, classes, groups, `|`, repetitions) and refuses backreferences and
    /// look-around rather than guess.
    ///
    /// # Errors
    /// [`Error::Quantize`] naming the pattern when it does not parse.
    pub fn new(text: &str) -> Result<Pattern> {
        let text = text.to_ascii_lowercase();
        let syntax = regex_automata::util::syntax::Config::new().unicode(false).utf8(false);
        let re = regex_automata::meta::Regex::builder()
            .syntax(syntax)
            .build(&text)
            .map_err(|e| Error::Quantize { reason: format!("--tensor-type pattern {text:?}: {e}") })?;
        Ok(Pattern { text, re })
    }

    /// The pattern as given (lower-cased).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether the pattern is found in `name` (`std::regex_search`).
    pub fn found_in(&self, name: &str) -> bool {
        self.re.is_match(name.as_bytes())
    }
}

/// llama-quantize's settings (`llama_model_quantize_params`), as its command line sets them.
#[derive(Debug, Clone)]
pub struct Params {
    /// The file type (`type` argument).
    pub ftype: Ftype,
    /// `--pure`: every quantized tensor the default type, no mix.
    pub pure: bool,
    /// Not `--leave-output-tensor`.
    pub quantize_output: bool,
    /// `--output-tensor-type`.
    pub output_tensor_type: Option<GgmlType>,
    /// `--token-embedding-type`.
    pub token_embedding_type: Option<GgmlType>,
    /// `--tensor-type NAME=TYPE` and `--tensor-type-file`, in order: the first found wins.
    pub patterns: Vec<(Pattern, GgmlType)>,
    /// `--allow-requantize`.
    pub allow_requantize: bool,
    /// `--imatrix` (with `--include-weights`/`--exclude-weights` applied).
    pub imatrix: Option<QuantImatrix>,
    /// `--dry-run`: plan and size, and do not refuse for a missing importance matrix.
    pub dry_run: bool,
}

impl Params {
    /// llama-quantize's defaults for file type `ftype`.
    pub fn new(ftype: Ftype) -> Params {
        Params {
            ftype,
            pure: false,
            quantize_output: true,
            output_tensor_type: None,
            token_embedding_type: None,
            patterns: Vec::new(),
            allow_requantize: false,
            imatrix: None,
            dry_run: false,
        }
    }

    /// Whether llama-quantize has an importance matrix (`qs.has_imatrix`): one was given
    /// and the filters left an entry in it.
    pub fn has_imatrix(&self) -> bool {
        self.active_imatrix().is_some()
    }

    /// The importance matrix llama-quantize uses: `None` without one, or when the filters
    /// left no entry (then it quantizes, and writes its header, as without).
    fn active_imatrix(&self) -> Option<&QuantImatrix> {
        self.imatrix.as_ref().filter(|m| !m.entries.is_empty())
    }

    /// The type of the first pattern found in `name`.
    pub(crate) fn pattern_type(&self, name: &str) -> Option<GgmlType> {
        self.patterns.iter().find(|(p, _)| p.found_in(name)).map(|(_, t)| *t)
    }
}

/// One tensor of the plan, in the order it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    /// Its index in the input model's tensors.
    pub input: usize,
    /// Its name.
    pub name: String,
    /// Its shape as written (`ggml_n_dims` dimensions).
    pub dims: Vec<u64>,
    /// Its type in the input.
    pub from: GgmlType,
    /// Its type in the output: `from` means copied as it is.
    pub to: GgmlType,
    /// Whether llama-quantize refuses this type here without an importance matrix
    /// (`tensor_requires_imatrix`).
    pub requires_imatrix: bool,
}

/// What llama-quantize would write.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The output's metadata, in order.
    pub kvs: Vec<(String, OwnedValue)>,
    /// The tensors, in the order they are written.
    pub tensors: Vec<Planned>,
    /// The header and where each tensor goes ([`Plan::tensors`]' order).
    pub layout: Layout,
    /// Tensors whose type fell back for their row length.
    pub n_fallback: u32,
    /// The model's size in the input's types and in the output's, data bytes.
    pub bytes_in: u64,
    /// See [`Plan::bytes_in`].
    pub bytes_out: u64,
}

/// llama-quantize's order of tensors `a` and `b` (`weight_name_comparer`): by layer, then
/// by name, byte for byte.
pub(crate) fn write_order(a: &str, b: &str) -> core::cmp::Ordering {
    layer_of(a).cmp(&layer_of(b)).then_with(|| a.as_bytes().cmp(b.as_bytes()))
}

/// The layer number `weight_name_comparer` and `layer_info` read (`sscanf(name, "blk.%d.")`), -1 without.
pub(crate) fn layer_of(name: &str) -> i64 {
    let Some(rest) = name.strip_prefix("blk.") else { return -1 };
    let rest = rest.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, digits) = match rest.as_bytes().first() {
        Some(b'-') => (true, &rest[1..]),
        Some(b'+') => (false, &rest[1..]),
        _ => (false, rest),
    };
    let end = digits.bytes().position(|b| !b.is_ascii_digit()).unwrap_or(digits.len());
    if end == 0 {
        return -1;
    }
    let n = digits[..end].parse::<i64>().unwrap_or(i64::MAX).min(i64::from(i32::MAX));
    if neg {
        -n
    } else {
        n
    }
}

/// The hyperparameters the rules read, from the model's metadata.
///
/// # Errors
/// [`Error::BadMetadata`] for a missing architecture or block count, or counts that are
/// not numbers.
pub fn hparams<T>(m: &Model<T>) -> Result<Hparams> {
    let arch = m.architecture().ok_or_else(|| bad("general.architecture", "the model's architecture"))?.into_owned();
    let key = |k: &str| format!("{arch}.{k}");
    let number = |k: &str| -> Result<Option<u64>> {
        match m.get(k) {
            None => Ok(None),
            Some(OwnedValue::Scalar(v)) => v.as_u64().map(Some).ok_or_else(|| bad(k, "an unsigned integer")),
            Some(v @ OwnedValue::Array { .. }) => match v.view()? {
                // Per-layer counts: the rules read layer 0's.
                MetaValue::Array(a) => Ok(a.iter().next().and_then(|x| x.as_u64())),
                _ => Err(bad(k, "an unsigned integer")),
            },
            Some(_) => Err(bad(k, "an unsigned integer")),
        }
    };
    let n_layer = number(&key("block_count"))?.ok_or_else(|| bad(&key("block_count"), "the layer count"))?;
    let n_layer =
        u32::try_from(n_layer).ok().filter(|&n| n > 0).ok_or_else(|| bad(&key("block_count"), "1 to 2³²-1"))?;
    let n_expert = u32::try_from(number(&key("expert_count"))?.unwrap_or(0)).unwrap_or(u32::MAX);
    let n_head = number(&key("attention.head_count"))?.unwrap_or(0);
    let n_head_kv = number(&key("attention.head_count_kv"))?.unwrap_or(n_head);
    let n_gqa = u32::try_from(n_head.checked_div(n_head_kv).unwrap_or(0)).unwrap_or(u32::MAX);
    let is_70b = match arch.as_str() {
        "llama" => n_expert != 8 && n_layer == 80 && n_head != n_head_kv,
        "qwen2" | "deci" | "olmo" => n_layer == 80,
        "jais2" => n_layer == 68,
        _ => false,
    };
    Ok(Hparams { arch, n_layer, n_expert, n_gqa, is_70b })
}

fn bad(key: &str, expected: &str) -> Error {
    Error::BadMetadata { key: key.to_string(), reason: format!("expected {expected}") }
}

/// `tensor_requires_imatrix`: the i-quants below 3 bits (as the recipe refuses them), and
/// Q2_K in a Q2_K_S file.
fn requires_imatrix(name: &str, to: GgmlType, ftype: Ftype) -> bool {
    crate::recipe::accept::needs_imatrix(name, to)
        || (to == GgmlType::Q2_K && ftype == Ftype::Q2_K_S && !crate::recipe::accept::imatrix_exempt(name))
}

/// Plans the quantization of `m` with `p`, refusing what llama-quantize refuses.
///
/// # Errors
/// [`Error::Quantize`] naming the tensor or key: a type organ cannot write, requantizing
/// without `allow_requantize`, a type that needs an importance matrix without one, an
/// input `general.alignment` other than 32 (llama-quantize would write a file whose data
/// is not where its header says), a header the writer refuses.
pub fn plan<T: Borrow<TensorEntry>>(m: &Model<T>, p: &Params) -> Result<Plan> {
    let hp = hparams(m)?;
    if let Some(v) = m.get("general.alignment") {
        if v.as_u64() != Some(ALIGNMENT) {
            return Err(Error::Quantize {
                reason: format!(
                    "general.alignment is {v:?}: llama-quantize lays the data out to {ALIGNMENT} regardless, \
                     so the file it writes would not load; realign the input first"
                ),
            });
        }
    }
    let mut order: Vec<usize> = (0..m.tensors.len()).collect();
    order.sort_by(|&a, &b| write_order(&m.tensors[a].borrow().name, &m.tensors[b].borrow().name));
    let mut qs = rules::Counters {
        n_attention_wv: order.iter().filter(|&&i| Category::of(&m.tensors[i].borrow().name).is_attn_v()).count() as u32,
        has_tied_embeddings: !m.tensors.iter().any(|t| t.borrow().name == "output.weight"),
        ..rules::Counters::default()
    };
    let mut tensors = Vec::with_capacity(order.len());
    let (mut bytes_in, mut bytes_out) = (0u64, 0u64);
    for &i in &order {
        let t = m.tensors[i].borrow();
        let to = rules::tensor_type(p, &hp, &mut qs, &t.name, &t.dims, t.ty)?;
        let allows = rules::allows_quantization(p, &hp.arch, &t.name, &t.dims);
        let needs = requires_imatrix(&t.name, to, p.ftype);
        if to != t.ty {
            if !crate::quant::quantize::can_quantize(to) {
                return Err(Error::Quantize {
                    reason: format!("tensor {:?}: organ cannot quantize to {to} yet", t.name),
                });
            }
            if is_quantized(t.ty) && !p.allow_requantize {
                return Err(Error::Quantize {
                    reason: format!(
                        "tensor {:?}: requantizing from type {} is disabled (allow it with --allow-requantize)",
                        t.name, t.ty
                    ),
                });
            }
            if !matches!(t.ty, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16) && !is_quantized(t.ty) {
                return Err(Error::Quantize {
                    reason: format!("tensor {:?}: cannot dequantize/convert tensor type {}", t.name, t.ty),
                });
            }
        }
        if allows && needs && !p.has_imatrix() && !p.dry_run {
            return Err(Error::Quantize {
                reason: format!(
                    "tensor {:?}: this quantization requires an importance matrix (target type {to})",
                    t.name
                ),
            });
        }
        let dims = t.dims[..n_dims(&t.dims).min(t.dims.len())].to_vec();
        bytes_in = bytes_in.saturating_add(t.n_bytes);
        let planned = Planned { input: i, name: t.name.clone(), dims, from: t.ty, to, requires_imatrix: needs };
        // An entry of the wrong size is refused before anything is written.
        weights_for(p, &planned)?;
        tensors.push(planned);
    }
    let kvs = header_kvs(m, p);
    let views = kvs.iter().map(|(k, v)| Ok((k.as_str(), v.view()?))).collect::<Result<Vec<_>>>()?;
    let specs: Vec<TensorSpec<'_>> =
        tensors.iter().map(|t| TensorSpec { name: &t.name, dims: &t.dims, ty: t.to }).collect();
    let layout = lay_out(3, &views, &specs)?;
    for (_, n) in &layout.tensors {
        bytes_out = bytes_out.saturating_add(*n);
    }
    Ok(Plan { kvs, tensors, layout, n_fallback: qs.n_fallback, bytes_in, bytes_out })
}

/// The output's metadata: the input's in order, `general.quantization_version` and
/// `general.file_type` set at the end (ggml's `gguf_set_val_*` removes a key and appends
/// it), the `split.*` keys removed.
fn header_kvs<T>(m: &Model<T>, p: &Params) -> Vec<(String, OwnedValue)> {
    const SPLIT: [&str; 3] = ["split.no", "split.count", "split.tensors.count"];
    const SET: [&str; 2] = ["general.quantization_version", "general.file_type"];
    let mut kvs: Vec<(String, OwnedValue)> =
        m.kvs.iter().filter(|(k, _)| !SPLIT.contains(&k.as_str()) && !SET.contains(&k.as_str())).cloned().collect();
    kvs.push((SET[0].into(), OwnedValue::Scalar(MetaValue::U32(QUANTIZATION_VERSION))));
    kvs.push((SET[1].into(), OwnedValue::Scalar(MetaValue::U32(p.ftype.id()))));
    // The importance matrix's keys, as `gguf_set_val_*` sets them: an input's key of the
    // same name is removed and the new one appended.
    if let Some(m) = p.active_imatrix() {
        for (k, v) in m.keys() {
            kvs.retain(|(have, _)| *have != k);
            kvs.push((k, v));
        }
    }
    kvs
}

/// The importance matrix's weights for tensor `t` of the plan, `None` when it is
/// quantized without (no matrix, no entry, or an entry llama-quantize ignores).
///
/// # Errors
/// As [`QuantImatrix::weights`].
pub fn weights_for<'a>(p: &'a Params, t: &Planned) -> Result<Option<&'a [f32]>> {
    match p.active_imatrix().filter(|_| t.to != t.from) {
        Some(m) => m.weights(&t.name, &t.dims),
        None => Ok(None),
    }
}

/// Converts `values` (whole rows of the tensor, f32) to type `to`, appending to `out`, as
/// `ggml_quantize_chunk` does without an importance matrix, and refuses what
/// `ggml_validate_row_data` would (a value or a block's scale that is not finite in `to`).
///
/// # Errors
/// [`Error::Unwritable`] with the index of the first such value.
pub fn convert(to: GgmlType, values: &[f32], out: &mut Vec<u8>) -> Result<()> {
    crate::quant::quantize::quantize_in_range(to, values, out)
}

/// [`convert`] with an importance matrix: `values` whole rows of one matrix (an expert of a
/// MoE weight), `qw` that matrix's weights, as `ggml_quantize_chunk` takes them.
///
/// # Errors
/// As [`convert`].
pub fn convert_weighted(to: GgmlType, values: &[f32], qw: &[f32], out: &mut Vec<u8>) -> Result<()> {
    crate::quant::quantize::quantize_rows_in_range(to, values, Some(qw), out)
}

/// Decodes `bytes` of type `from` to f32 into `out` (`llama_tensor_dequantize_impl`).
///
/// # Errors
/// As [`crate::quant::dequantize_into`].
pub fn decode(from: GgmlType, bytes: &[u8], out: &mut [f32]) -> Result<()> {
    crate::quant::dequantize_into(from, bytes, out)
}

#[cfg(test)]
mod tests;
