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
pub mod overrides;
pub mod report;
pub mod rules;
pub mod slabs;

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

    /// A `--tensor-type` word, `PATTERN=TYPE` (`parse_tensor_type`), the type named in
    /// any case.
    ///
    /// # Errors
    /// [`Error::BadSetting`] naming the word: no `=`, no pattern, no type, a type ggml
    /// does not have; a pattern that does not parse.
    pub fn word(word: &str) -> Result<(Pattern, GgmlType)> {
        let bad = |reason: &str| Error::BadSetting { what: format!("--tensor-type {word:?}"), reason: reason.into() };
        let (name, ty) = word.split_once('=').ok_or_else(|| bad("malformed tensor type (expected PATTERN=TYPE)"))?;
        match (name.is_empty(), ty.is_empty()) {
            (true, _) => return Err(bad("missing tensor name")),
            (_, true) => return Err(bad("missing quantization type")),
            _ => {}
        }
        let found = GgmlType::ALL.iter().copied().find(|t| t.name().eq_ignore_ascii_case(ty));
        Ok((Pattern::new(name)?, found.ok_or_else(|| bad(&format!("invalid ggml_type {ty:?}")))?))
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
    /// `--override-kv`, in order ([`overrides::parse_override`]).
    pub overrides: Vec<(String, OwnedValue)>,
    /// `--prune-layers`: sorted, each once ([`overrides::parse_prune`]).
    pub prune: Vec<u32>,
    /// `--keep-split`: a shard written for each of the input's, the tensors in the input's
    /// order ([`keep_split_names`]).
    pub keep_split: bool,
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
            overrides: Vec::new(),
            prune: Vec::new(),
            keep_split: false,
        }
    }

    /// Whether llama-quantize has an importance matrix (`qs.has_imatrix`): one was given
    /// and the filters left an entry in it.
    pub fn has_imatrix(&self) -> bool {
        self.active_imatrix().is_some()
    }

    /// The importance matrix llama-quantize uses: `None` without one, or when the filters
    /// left no entry (then it quantizes, and writes its header, as without).
    pub(crate) fn active_imatrix(&self) -> Option<&QuantImatrix> {
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
    /// Its name in the input, when `--prune-layers` renumbered its layer (the importance
    /// matrix is looked up by it).
    pub renamed_from: Option<String>,
}

/// One file of the output: the whole model, or with `--keep-split` a shard.
#[derive(Debug, Clone)]
pub struct Shard {
    /// Its metadata, in order.
    pub kvs: Vec<(String, OwnedValue)>,
    /// Its tensors: these of [`Plan::tensors`].
    pub tensors: core::ops::Range<usize>,
    /// Its header and where each of its tensors goes.
    pub layout: Layout,
}

/// What llama-quantize would write.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The tensors, in the order they are written.
    pub tensors: Vec<Planned>,
    /// The files, in order: one, or with `--keep-split` one per shard of the input.
    pub shards: Vec<Shard>,
    /// Tensors whose type fell back for their row length.
    pub n_fallback: u32,
    /// The model's size in the input's types and in the output's, data bytes.
    pub bytes_in: u64,
    /// See [`Plan::bytes_in`].
    pub bytes_out: u64,
}

impl Plan {
    /// The first file's metadata (a shard after it has only the `split.*` keys).
    pub fn kvs(&self) -> &[(String, OwnedValue)] {
        self.shards.first().map_or(&[], |s| &s.kvs)
    }

    /// Each tensor's bytes in the output, in [`Plan::tensors`]' order.
    pub fn tensor_bytes(&self) -> impl Iterator<Item = u64> + '_ {
        self.shards.iter().flat_map(|s| s.layout.tensors.iter().map(|&(_, n)| n))
    }

    /// Bytes of every file: headers and data, padded.
    pub fn file_len(&self) -> u64 {
        self.shards.iter().map(|s| s.layout.file_len).sum()
    }

    /// Bytes of every file's header.
    pub fn header_len(&self) -> u64 {
        self.shards.iter().map(|s| s.layout.header.len() as u64).sum()
    }

    /// The file's size, after checking that this plan (`organ quantize` with the recipe's
    /// lines) gives every tensor the recipe's type and the file the accounted size (at
    /// most it with an importance matrix, whose path and dataset name the recipe does not
    /// know).
    ///
    /// # Errors
    /// [`Error::Quantize`]: a tensor in another type or left out, another size.
    pub fn check_recipe(&self, r: &crate::recipe::report::Recipe) -> Result<u64> {
        let refuse = |reason: String| Err(Error::Quantize { reason });
        let to: alloc::collections::BTreeMap<&str, GgmlType> =
            self.tensors.iter().map(|t| (t.name.as_str(), t.to)).collect();
        for row in &r.tensors {
            match to.get(row.name.as_str()).copied() {
                Some(ty) if ty == row.ty => {}
                Some(ty) => {
                    return refuse(format!("{} would be written as {ty}, the recipe says {}", row.name, row.ty))
                }
                None => return refuse(format!("{} would be left out", row.name)),
            }
        }
        let len = self.file_len();
        let imatrix = self.kvs().iter().any(|(k, _)| k.starts_with("quantize.imatrix."));
        if len > r.file_bytes || (!imatrix && len != r.file_bytes) {
            return refuse(format!("the file would take {len} bytes, organ accounted {}", r.file_bytes));
        }
        Ok(len)
    }
}

/// The files `--keep-split` writes for output `out` in `n` shards, as llama-quantize names
/// them: `out` less its last five characters when it holds `.gguf` anywhere (the suffix,
/// in every sane name), then `-0000i-of-0000N.gguf`; `-00001-of-00001.gguf` for a model
/// that was not split.
pub fn keep_split_names(out: &str, n: usize) -> Vec<String> {
    let prefix = match out.contains(".gguf") {
        true => out.get(..out.len() - 5).unwrap_or(out),
        false => out,
    };
    (1..=n).map(|i| crate::gguf::split::shard_name(prefix, i, n)).collect()
}

/// llama-quantize's order of tensors `a` and `b` (`weight_name_comparer`): by layer, then
/// by name, byte for byte.
pub(crate) fn write_order(a: &str, b: &str) -> core::cmp::Ordering {
    layer_of(a).cmp(&layer_of(b)).then_with(|| a.as_bytes().cmp(b.as_bytes()))
}

/// The layer number `weight_name_comparer` and `layer_info` read (`sscanf(name, "blk.%d.")`), -1 without.
pub(crate) fn layer_of(name: &str) -> i64 {
    let max = i64::from(i32::MAX);
    name.strip_prefix("blk.").and_then(overrides::leading_int).map_or(-1, |n| n.clamp(-max, max))
}

/// The hyperparameters the rules read, from the model's metadata as `get` gives it (the
/// model's, under `--override-kv`'s keys, as llama.cpp's model loader reads them).
///
/// # Errors
/// [`Error::BadMetadata`] for a missing architecture or block count, or counts that are
/// not numbers.
pub fn hparams<'a>(get: &dyn Fn(&str) -> Option<&'a OwnedValue>) -> Result<Hparams> {
    let arch = match get("general.architecture") {
        Some(OwnedValue::Str(s)) => String::from_utf8_lossy(s).into_owned(),
        _ => return Err(bad("general.architecture", "the model's architecture")),
    };
    let key = |k: &str| format!("{arch}.{k}");
    let number = |k: &str| -> Result<Option<u64>> {
        match get(k) {
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
    let hp = hparams(&|k| p.overrides.iter().rev().find(|(o, _)| o == k).map(|(_, v)| v).or_else(|| m.get(k)))?;
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
    // --prune-layers: the pruned layers' tensors left out, the later layers renumbered, in
    // the order written; the rules then see the new names.
    let mut renumber = overrides::Renumber::default();
    let mut order: Vec<(usize, String)> =
        order.into_iter().filter_map(|i| Some((i, renumber.name(&m.tensors[i].borrow().name, &p.prune)?))).collect();
    // --keep-split: after the renumbering (in weights_map's order), in the input's order.
    if p.keep_split {
        order.sort_by_key(|&(i, _)| (m.tensors[i].borrow().file, m.tensors[i].borrow().offset));
    }
    let mut qs = rules::Counters {
        n_attention_wv: order.iter().filter(|(_, name)| Category::of(name).is_attn_v()).count() as u32,
        has_tied_embeddings: !m.tensors.iter().any(|t| t.borrow().name == "output.weight"),
        ..rules::Counters::default()
    };
    let mut tensors = Vec::with_capacity(order.len());
    let (mut bytes_in, mut bytes_out) = (0u64, 0u64);
    for (i, name) in order {
        let t = m.tensors[i].borrow();
        let to = rules::tensor_type(p, &hp, &mut qs, &name, &t.dims, t.ty)?;
        let allows = rules::allows_quantization(p, &hp.arch, &name, &t.dims);
        let needs = requires_imatrix(&name, to, p.ftype);
        if to != t.ty {
            if !crate::quant::quantize::can_quantize_weighted(to) {
                return Err(Error::Quantize { reason: format!("tensor {name:?}: organ cannot quantize to {to} yet") });
            }
            if is_quantized(t.ty) && !p.allow_requantize {
                return Err(Error::Quantize {
                    reason: format!(
                        "tensor {name:?}: requantizing from type {} is disabled (allow it with --allow-requantize)",
                        t.ty
                    ),
                });
            }
            if !matches!(t.ty, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16) && !is_quantized(t.ty) {
                return Err(Error::Quantize {
                    reason: format!("tensor {name:?}: cannot dequantize/convert tensor type {}", t.ty),
                });
            }
        }
        if allows && needs && !p.has_imatrix() && !p.dry_run {
            return Err(Error::Quantize {
                reason: format!("tensor {name:?}: this quantization requires an importance matrix (target type {to})"),
            });
        }
        let dims = t.dims[..n_dims(&t.dims).min(t.dims.len())].to_vec();
        bytes_in = bytes_in.saturating_add(t.n_bytes);
        let renamed_from = (name != t.name).then(|| t.name.clone());
        let planned = Planned { input: i, name, dims, from: t.ty, to, requires_imatrix: needs, renamed_from };
        // An entry of the wrong size is refused before anything is written; so is a tensor
        // without weights that needs them.
        imatrix::check_weights(p, &planned, allows && needs)?;
        tensors.push(planned);
    }
    let block_count = (!p.prune.is_empty()).then(|| (format!("{}.block_count", hp.arch), renumber.block_count()));
    let shards = shards(m, p, &tensors, header_kvs(m, p, block_count))?;
    bytes_out = shards.iter().flat_map(|s| &s.layout.tensors).fold(bytes_out, |b, &(_, n)| b.saturating_add(n));
    Ok(Plan { tensors, shards, n_fallback: qs.n_fallback, bytes_in, bytes_out })
}

/// The files: one with `kvs`; with `--keep-split`, one per shard of the input, the first
/// with `kvs` and each with the `split.*` keys appended (when there are several), as
/// llama-quantize sets them; `tensors` are in the input's order, so each shard's are
/// together.
fn shards<T: Borrow<TensorEntry>>(
    m: &Model<T>,
    p: &Params,
    tensors: &[Planned],
    kvs: Vec<(String, OwnedValue)>,
) -> Result<Vec<Shard>> {
    let file = |t: &Planned| if p.keep_split { m.tensors[t.input].borrow().file } else { 0 };
    let n = tensors.iter().map(|t| file(t) + 1).max().unwrap_or(1);
    let n16 =
        u16::try_from(n).map_err(|_| Error::Quantize { reason: format!("{n} shards: a split has at most 65535") })?;
    let count = i32::try_from(tensors.len()).unwrap_or(i32::MAX);
    let mut shards = Vec::with_capacity(n);
    let mut first = 0;
    for i in 0..n {
        let len = tensors[first..].iter().take_while(|t| file(t) == i).count();
        // The first file is written whatever it holds (a model without tensors; a split
        // whose first shard holds only the metadata); a later shard without a tensor is
        // one llama-quantize has no header for.
        if len == 0 && i > 0 {
            return Err(Error::Quantize {
                reason: format!(
                    "shard {} of {n} of the input holds no tensor: llama-quantize --keep-split fails on it",
                    i + 1
                ),
            });
        }
        let mut kvs = if i == 0 { kvs.clone() } else { Vec::new() };
        if n > 1 {
            kvs.push(("split.no".into(), OwnedValue::Scalar(MetaValue::U16(i as u16))));
            kvs.push(("split.count".into(), OwnedValue::Scalar(MetaValue::U16(n16))));
            kvs.push(("split.tensors.count".into(), OwnedValue::Scalar(MetaValue::I32(count))));
        }
        let views = kvs.iter().map(|(k, v)| Ok((k.as_str(), v.view()?))).collect::<Result<Vec<_>>>()?;
        let range = first..first + len;
        let specs: Vec<TensorSpec<'_>> =
            tensors[range.clone()].iter().map(|t| TensorSpec { name: &t.name, dims: &t.dims, ty: t.to }).collect();
        let layout = lay_out(3, &views, &specs)?;
        drop(views);
        shards.push(Shard { kvs, tensors: range, layout });
        first += len;
    }
    Ok(shards)
}

/// The output's metadata: the input's in order, `general.quantization_version` and
/// `general.file_type` set at the end (ggml's `gguf_set_val_*` removes a key and appends
/// it), the `split.*` keys removed, then `--override-kv`'s keys and the importance
/// matrix's (llama-quantize's overrides, in that order), and last, with `--prune-layers`,
/// the new `block_count`.
fn header_kvs<T>(m: &Model<T>, p: &Params, block_count: Option<(String, u64)>) -> Vec<(String, OwnedValue)> {
    const SPLIT: [&str; 3] = ["split.no", "split.count", "split.tensors.count"];
    const SET: [&str; 2] = ["general.quantization_version", "general.file_type"];
    let mut kvs: Vec<(String, OwnedValue)> =
        m.kvs.iter().filter(|(k, _)| !SPLIT.contains(&k.as_str()) && !SET.contains(&k.as_str())).cloned().collect();
    kvs.push((SET[0].into(), OwnedValue::Scalar(MetaValue::U32(QUANTIZATION_VERSION))));
    kvs.push((SET[1].into(), OwnedValue::Scalar(MetaValue::U32(p.ftype.id()))));
    // The overrides, as `gguf_set_val_*` sets them: an input's key of the same name is
    // removed and the new one appended.
    let imatrix = p.active_imatrix().map(QuantImatrix::keys).unwrap_or_default();
    let block_count = block_count.map(|(k, n)| (k, OwnedValue::Scalar(MetaValue::U32(n as u32))));
    for (k, v) in p.overrides.iter().cloned().chain(imatrix).chain(block_count) {
        kvs.retain(|(have, _)| *have != k);
        kvs.push((k, v));
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
        Some(m) => m.weights(t.renamed_from.as_deref().unwrap_or(&t.name), &t.dims),
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
