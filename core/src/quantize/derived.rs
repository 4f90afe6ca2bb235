//! `organ check OUT --derived-from SRC`: whether OUT is SRC quantized by llama-quantize
//! with the types OUT holds and the settings its header records. The core pairs the
//! tensors, says how each is remade ([`Derivation`]), and turns what the host found into
//! check findings ([`findings`]); the host remakes each tensor in memory with the
//! quantizers `organ quantize` writes with and compares bytes, writing nothing.
//!
//! What is compared: every tensor's bytes (one llama-quantize copies is compared as it
//! is), the tensors' order, and the metadata llama-quantize would write
//! ([`super::header_kvs`]); `quantize.imatrix.file` is the path as given on its command
//! line, so another path for the same matrix is worth knowing, not an error. `split.*`
//! keys are left out on both sides (a split OUT or SRC is read whole).

use super::{header_kvs, write_order, Ftype, Params, Planned, QuantImatrix};
use crate::check::{Finding, Kind, Severity};
use crate::model::{Model, OwnedValue, TensorEntry};
use crate::recipe::accept::n_dims;
use alloc::borrow::Borrow;
use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

/// Each name's first index among `m`.
fn by_name<'a>(m: &[&'a TensorEntry]) -> BTreeMap<&'a str, usize> {
    m.iter().enumerate().rev().map(|(i, t)| (t.name.as_str(), i)).collect()
}

/// The key llama-quantize fills with the importance matrix's path as it was given.
const IMATRIX_FILE: &str = "quantize.imatrix.file";

/// How OUT's tensors are remade from SRC.
#[derive(Debug, Clone)]
pub struct Derivation {
    /// The settings: OUT's file type (Q8_0's when OUT records none: any will do, no rule
    /// is asked), the importance matrix given.
    pub params: Params,
    /// The file type OUT records, if it is one llama-quantize writes.
    pub ftype: Option<Ftype>,
    /// Each tensor OUT and SRC share with one shape: OUT's index, and the tensor as the
    /// plan says it (`input` SRC's index, `from` SRC's type, `to` OUT's).
    pub tensors: Vec<(usize, Planned)>,
    /// What the pairing found: tensors one side lacks or of other shapes, the order, the
    /// metadata.
    pub found: Vec<Finding>,
    /// The two models' names, for the findings: the model checked, the source.
    pub names: (String, String),
}

/// What the host found remaking one tensor of [`Derivation::tensors`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Outcome {
    /// OUT's bytes are the remade ones.
    Identical,
    /// They differ.
    Differs {
        /// Blocks that differ.
        blocks: u64,
        /// Blocks in all.
        of: u64,
        /// The first that differs.
        first: u64,
        /// ‖OUT − remade‖ / ‖remade‖ over the dequantized values.
        rel_l2: f64,
    },
    /// Not remade: organ cannot quantize to OUT's type, or not without the importance
    /// matrix that type needs.
    NotRemade,
}

/// Pairs OUT's tensors with SRC's, and compares OUT's metadata with what llama-quantize
/// writes for SRC with OUT's file type and `imatrix`; what does not pair is a finding.
/// `names`: OUT's and SRC's, as the findings say them.
pub fn derivation<T: Borrow<TensorEntry>, U: Borrow<TensorEntry>>(
    out: &Model<T>,
    src: &Model<U>,
    imatrix: Option<QuantImatrix>,
    names: (&str, &str),
) -> Derivation {
    let mut found = Vec::new();
    let err = |subject: &str, message: String| Finding::new(Severity::Error, Kind::Derivation, subject, message);
    let ftype = match out.get("general.file_type").and_then(OwnedValue::as_u64) {
        Some(id) => {
            let f = u32::try_from(id).ok().and_then(Ftype::from_id);
            if f.is_none() {
                found.push(err("general.file_type", format!("file type {id} is not one llama-quantize writes")));
            }
            f
        }
        None => {
            found.push(err("general.file_type", "no file type recorded: llama-quantize always writes one".into()));
            None
        }
    };
    let mut params = Params::new(ftype.unwrap_or(Ftype::Q8_0));
    params.imatrix = imatrix;
    // By name, so that pairing is n log n at any tensor count (the hostile corpus's
    // models at the tensor cap took a linear search per tensor past its time limit).
    let src_entries: Vec<&TensorEntry> = src.tensors.iter().map(Borrow::borrow).collect();
    let out_entries: Vec<&TensorEntry> = out.tensors.iter().map(Borrow::borrow).collect();
    let (src_names, out_names) = (by_name(&src_entries), by_name(&out_entries));
    let mut tensors = Vec::with_capacity(out.tensors.len());
    for (oi, t) in out_entries.iter().enumerate() {
        let Some(&si) = src_names.get(t.name.as_str()) else {
            found.push(err(&t.name, format!("{} has no tensor of this name", names.1)));
            continue;
        };
        let s = src_entries[si];
        if s.dims != t.dims {
            found.push(err(&t.name, format!("shape {:?} here, {:?} in {}", t.dims, s.dims, names.1)));
            continue;
        }
        let dims = t.dims[..n_dims(&t.dims).min(t.dims.len())].to_vec();
        let planned = Planned {
            input: si,
            name: t.name.clone(),
            dims,
            from: s.ty,
            to: t.ty,
            requires_imatrix: false,
            renamed_from: None,
        };
        tensors.push((oi, planned));
    }
    for s in &src_entries {
        if !out_names.contains_key(s.name.as_str()) {
            found.push(err(&s.name, format!("{} has this tensor, this model has not", names.1)));
        }
    }
    // llama-quantize writes in weights_map's order: by layer, then by name.
    let sorted = out_entries.windows(2).all(|w| write_order(&w[0].name, &w[1].name).is_le());
    if !sorted {
        found.push(err("", "the tensors are not in the order llama-quantize writes them (by layer, then name)".into()));
    }
    if ftype.is_some() {
        found.extend(metadata(out, src, &params));
    }
    Derivation { params, ftype, tensors, found, names: (names.0.to_string(), names.1.to_string()) }
}

/// Where two quantizations of one model differ before their data: the GGUF version, the
/// metadata in order (every key but `quantize.imatrix.file`, the path as each tool was
/// given it), the tensors' names, types and shapes in order. `None` when they agree: then
/// the tensors' bytes, in order, are all that is left to compare.
pub fn header_difference<T: Borrow<TensorEntry>, U: Borrow<TensorEntry>>(a: &Model<T>, b: &Model<U>) -> Option<String> {
    if a.version != b.version {
        return Some(format!("GGUF version {} against {}", a.version, b.version));
    }
    let kvs = |m: &'_ [(String, OwnedValue)]| -> Vec<(String, OwnedValue)> {
        m.iter().filter(|(k, _)| k != IMATRIX_FILE).cloned().collect()
    };
    let (ka, kb) = (kvs(&a.kvs), kvs(&b.kvs));
    if let Some(((k, v), (l, w))) = ka.iter().zip(&kb).find(|(x, y)| x != y) {
        return Some(if k == l {
            format!("metadata {k:?}: {} against {}", shown(v), shown(w))
        } else {
            format!("metadata key {k:?} where the other has {l:?}")
        });
    }
    if ka.len() != kb.len() {
        return Some(format!("{} metadata keys against {}", ka.len(), kb.len()));
    }
    let (ta, tb) = (&a.tensors, &b.tensors);
    if let Some((x, y)) = ta
        .iter()
        .map(Borrow::borrow)
        .zip(tb.iter().map(Borrow::borrow))
        .find(|(x, y)| (x.name.as_str(), x.ty, &x.dims) != (y.name.as_str(), y.ty, &y.dims))
    {
        return Some(format!(
            "tensor {:?} {} {:?} where the other has {:?} {} {:?}",
            x.name, x.ty, x.dims, y.name, y.ty, y.dims
        ));
    }
    (ta.len() != tb.len()).then(|| format!("{} tensors against {}", ta.len(), tb.len()))
}

/// OUT's metadata against what llama-quantize writes for SRC: a finding per key that
/// differs or that one side lacks, one for the order.
fn metadata<T, U>(out: &Model<T>, src: &Model<U>, params: &Params) -> Vec<Finding> {
    let split = |k: &str| k.starts_with("split.");
    let want: Vec<(String, OwnedValue)> =
        header_kvs(src, params, None).into_iter().filter(|(k, _)| !split(k)).collect();
    let have: Vec<&(String, OwnedValue)> = out.kvs.iter().filter(|(k, _)| !split(k)).collect();
    let want_keys: BTreeMap<&str, &OwnedValue> = want.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let have_keys: BTreeMap<&str, &OwnedValue> = have.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut found = Vec::new();
    for (k, v) in &want {
        let severity = if k == IMATRIX_FILE { Severity::Info } else { Severity::Error };
        match have_keys.get(k.as_str()) {
            None => found.push(Finding::new(
                Severity::Error,
                Kind::Derivation,
                k,
                format!("missing (llama-quantize writes {})", shown(v)),
            )),
            Some(h) if *h != v => found.push(Finding::new(
                severity,
                Kind::Derivation,
                k,
                format!("{} here, llama-quantize writes {}", shown(h), shown(v)),
            )),
            Some(_) => {}
        }
    }
    for (k, v) in &have {
        if !want_keys.contains_key(k.as_str()) {
            let hint = if k.starts_with("quantize.imatrix.") && params.imatrix.is_none() {
                ": the model was made with an importance matrix; give it with --imatrix"
            } else {
                ""
            };
            found.push(Finding::new(
                Severity::Error,
                Kind::Derivation,
                k,
                format!("{} here, a key llama-quantize does not write{hint}", shown(v)),
            ));
        }
    }
    let same_keys = want.len() == have.len() && want.iter().all(|(k, _)| have_keys.contains_key(k.as_str()));
    if same_keys && want.iter().zip(&have).any(|((w, _), (h, _))| w != h) {
        found.push(Finding::new(
            Severity::Error,
            Kind::Derivation,
            "",
            "the metadata keys are in another order than llama-quantize writes them".into(),
        ));
    }
    found
}

/// A value in a few words: a number, a string (its first 60 characters), an array's length.
fn shown(v: &OwnedValue) -> String {
    match v {
        OwnedValue::Scalar(m) => format!("{m:?}"),
        OwnedValue::Str(_) => {
            let s = v.as_str().unwrap_or("(not UTF-8)");
            let cut: String = s.chars().take(60).collect();
            if cut.len() < s.len() {
                format!("{cut:?}…")
            } else {
                format!("{cut:?}")
            }
        }
        OwnedValue::Array { len, .. } => format!("an array of {len}"),
    }
}

/// The findings: the pairing's, one per tensor that differs or is not remade, and the
/// verdict (an info when OUT is SRC quantized as its header says, else an error).
pub fn findings(d: &Derivation, outcomes: &[Outcome]) -> Vec<Finding> {
    let mut found = d.found.clone();
    let mut differ = 0usize;
    let mut not_remade = 0usize;
    for ((_, t), o) in d.tensors.iter().zip(outcomes) {
        match *o {
            Outcome::Identical => {}
            Outcome::Differs { blocks, of, first, rel_l2 } => {
                differ += 1;
                found.push(Finding::new(
                    Severity::Error,
                    Kind::Derivation,
                    &t.name,
                    format!(
                        "differs from {}'s {} {}: {blocks} of {of} blocks, the first at block {first}; \
                         rel_l2 {rel_l2:.3e} against it",
                        d.names.1,
                        t.from,
                        if t.from == t.to { "as it is".to_string() } else { format!("quantized to {}", t.to) },
                    ),
                ));
            }
            Outcome::NotRemade => {
                not_remade += 1;
                found.push(Finding::new(
                    Severity::Warning,
                    Kind::Derivation,
                    &t.name,
                    if crate::quant::quantize::requires_imatrix(t.to) {
                        format!(
                            "not compared: ggml quantizes {} only with an importance matrix; give the one it was \
                             made with (--imatrix)",
                            t.to
                        )
                    } else {
                        format!("not compared: organ cannot quantize to {}", t.to)
                    },
                ));
            }
        }
    }
    let how = match d.ftype {
        // The variant (Q4_K_M), not llama-quantize's first name for it (Q4_K).
        Some(f) => format!("{f:?}{}", imatrix_words(d.params.imatrix.as_ref())),
        None => "llama-quantize".to_string(),
    };
    let n = d.tensors.len();
    let verdict = if found.iter().all(|f| f.severity != Severity::Error) {
        let compared = n - not_remade;
        let all = if not_remade == 0 { format!("all {n}") } else { format!("{compared} of {n}") };
        Finding::new(
            Severity::Info,
            Kind::Derivation,
            "",
            format!(
                "{} is {} quantized with {how}: {all} tensors identical, the metadata as llama-quantize writes it",
                d.names.0, d.names.1
            ),
        )
    } else {
        Finding::new(
            Severity::Error,
            Kind::Derivation,
            "",
            format!("{} is not {} quantized with {how}: {differ} of {n} tensors differ", d.names.0, d.names.1),
        )
    };
    found.insert(0, verdict);
    found
}

fn imatrix_words(m: Option<&QuantImatrix>) -> String {
    match m {
        Some(m) => format!(" and the importance matrix {:?} ({} chunks)", m.file, m.chunk_count),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ggml_type::GgmlType;
    use crate::gguf::MetaValue;

    fn entry(name: &str, ty: GgmlType) -> TensorEntry {
        let n_bytes = (1024 / ty.block_size() * ty.type_size()) as u64;
        TensorEntry { name: name.into(), ty, dims: alloc::vec![256, 4], n_elements: 1024, n_bytes, file: 0, offset: 0 }
    }

    fn model(kvs: Vec<(String, OwnedValue)>, tensors: Vec<TensorEntry>) -> Model {
        Model { version: 3, kvs, tensors }
    }

    fn arch() -> Vec<(String, OwnedValue)> {
        alloc::vec![("general.architecture".into(), OwnedValue::string("llama"))]
    }

    #[test]
    fn a_pair_as_llama_quantize_writes_it_is_one_info() {
        let src = model(arch(), alloc::vec![entry("blk.0.ffn_up.weight", GgmlType::F16)]);
        let out_kvs = header_kvs(&src, &Params::new(Ftype::Q4_K_M), None);
        let out = model(out_kvs, alloc::vec![entry("blk.0.ffn_up.weight", GgmlType::Q4_K)]);
        let d = derivation(&out, &src, None, ("out.gguf", "src.gguf"));
        assert!(d.found.is_empty(), "{:?}", d.found);
        assert_eq!((d.tensors[0].1.from, d.tensors[0].1.to), (GgmlType::F16, GgmlType::Q4_K));
        let f = findings(&d, &[Outcome::Identical]);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].severity, Severity::Info);
        assert!(f[0].message.contains("Q4_K_M: all 1 tensors identical"), "{}", f[0].message);
    }

    #[test]
    fn a_differing_tensor_missing_tensors_and_keys_are_named() {
        let src = model(
            arch(),
            alloc::vec![entry("blk.0.ffn_up.weight", GgmlType::F16), entry("blk.0.ffn_down.weight", GgmlType::F16)],
        );
        let mut kvs = header_kvs(&src, &Params::new(Ftype::Q4_K_M), None);
        kvs.push(("quantize.imatrix.entries_count".into(), OwnedValue::Scalar(MetaValue::U32(7))));
        let out = model(kvs, alloc::vec![entry("blk.0.ffn_up.weight", GgmlType::Q4_K)]);
        let d = derivation(&out, &src, None, ("out.gguf", "src.gguf"));
        let f = findings(&d, &[Outcome::Differs { blocks: 1, of: 4, first: 2, rel_l2: 0.01 }]);
        let about = |s: &str| f.iter().find(|f| f.subject == s).map(|f| f.message.as_str()).unwrap_or("");
        assert!(about("blk.0.ffn_down.weight").contains("src.gguf has this tensor"), "{f:?}");
        assert!(about("quantize.imatrix.entries_count").contains("give it with --imatrix"), "{f:?}");
        assert!(about("blk.0.ffn_up.weight").contains("1 of 4 blocks, the first at block 2"), "{f:?}");
        assert!(
            f[0].message.starts_with("out.gguf is not src.gguf quantized with Q4_K_M: 1 of 1 tensors differ"),
            "{f:?}"
        );
        assert_eq!(f[0].severity, Severity::Error);
    }
}
