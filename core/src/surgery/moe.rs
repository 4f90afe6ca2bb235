//! Planning a mixture of experts from dense donors (`organ moe`, docs/moe.md), as
//! mergekit-moe does for safetensors: the base's skeleton (attention, embeddings, norms)
//! and, per layer, a router `blk.N.ffn_gate_inp.weight` (F32, `[n_embd, n_expert]`) and the
//! donors' FFNs stacked along a new last axis as `blk.N.ffn_{gate,up,down}_exps.weight`
//! (the llama architecture's Mixtral layout, which llama.cpp loads when
//! `llama.expert_count` is set).
//!
//! Stacking is concatenation: expert `e` of `[a, b, n_expert]` is the `e`-th run of `a * b`
//! values, so where the donors' types agree for a layer and FFN kind their bytes are copied
//! as they are (raw quant blocks). Where they do not, the caller's `--type` requantizes the
//! donors not already of that type ([`requantize`]); without it the plan is refused, naming
//! each mismatch. The plan only says where bytes come from; the caller moves them.

mod router;

pub use router::{cheap_embed, normal, Prompts, Router};

use super::graft::Mismatch;
use crate::ggml_type::GgmlType;
use crate::model::{Model, OwnedValue, TensorEntry};
use alloc::borrow::Borrow;
use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

/// The most experts llama.cpp loads (`LLAMA_MAX_EXPERTS`).
pub const MAX_EXPERTS: usize = 1024;

/// The architecture organ builds MoEs of.
pub const ARCH: &str = "llama";

/// The FFN kinds stacked, in the order their experts' tensors are written.
pub const KINDS: [&str; 3] = ["gate", "up", "down"];

/// How the router rows are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouterMode {
    /// All zero: every expert gets the same weight.
    Uniform,
    /// Standard normal values from a seed ([`normal`]).
    Random,
    /// mergekit's `cheap_embed`: from the token embeddings of each expert's prompts.
    Embed,
}

impl RouterMode {
    /// Its name on the command line and in `organ.moe.router`.
    pub fn name(self) -> &'static str {
        match self {
            RouterMode::Uniform => "uniform",
            RouterMode::Random => "random",
            RouterMode::Embed => "embed",
        }
    }

    /// The mode named `s`.
    pub fn parse(s: &str) -> Option<RouterMode> {
        [RouterMode::Uniform, RouterMode::Random, RouterMode::Embed].into_iter().find(|m| m.name() == s)
    }
}

/// One model given to [`plan`]: its name for messages, and the model.
pub struct Named<'a, T> {
    /// Its file name, for messages.
    pub label: &'a str,
    /// The model.
    pub model: &'a Model<T>,
}

/// Where an output tensor's bytes come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The base's tensor of this index, as it is.
    Base(usize),
    /// The router of layer `layer` (the n-th layer with an FFN: `ordinal`), made by
    /// [`Router::layer_bytes`].
    Router {
        /// The layer's number.
        layer: u64,
        /// Its position among the layers with an FFN.
        ordinal: usize,
    },
    /// Experts stacked: per donor in order, its tensor's index there, and whether it is
    /// requantized to the output type (else copied as it is).
    Stack(Vec<Part>),
}

/// One expert of a stacked tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    /// The tensor's index in its donor.
    pub tensor: usize,
    /// Requantized to the stack's type (its own differs).
    pub requantize: bool,
}

/// One tensor of the output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    /// Its name.
    pub name: String,
    /// Shape, ggml order.
    pub dims: Vec<u64>,
    /// Its type.
    pub ty: GgmlType,
    /// Bytes of data.
    pub n_bytes: u64,
    /// Where its bytes come from.
    pub source: Source,
}

/// A checked plan of the output's tensors, in the base's order (each layer's FFN replaced by
/// its router and stacks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MoePlan {
    /// Width of the residual stream (the routers' rows).
    pub n_embd: u64,
    /// Experts per layer (the donors' count).
    pub n_expert: u64,
    /// Experts used per token.
    pub n_used: u64,
    /// Layers with an FFN, in order.
    pub layers: Vec<u64>,
    /// The output's tensors, in order.
    pub tensors: Vec<Planned>,
}

impl MoePlan {
    /// The stacked tensors that requantize at least one donor.
    pub fn requantized(&self) -> impl Iterator<Item = &Planned> {
        self.tensors.iter().filter(|t| matches!(&t.source, Source::Stack(p) if p.iter().any(|p| p.requantize)))
    }
}

/// `blk.N.ffn_KIND.SUFFIX` as (N, kind index in [`KINDS`], suffix).
fn ffn_name(name: &str) -> Option<(u64, usize, &str)> {
    let rest = name.strip_prefix("blk.")?;
    let (n, rest) = rest.split_once('.')?;
    let (kind, suffix) = rest.strip_prefix("ffn_")?.split_once('.')?;
    Some((n.parse().ok()?, KINDS.iter().position(|k| *k == kind)?, suffix))
}

/// Whether `m` is already a mixture of experts (by its tensors or its metadata).
fn is_moe<T: Borrow<TensorEntry>>(m: &Model<T>) -> bool {
    let arch = m.architecture().unwrap_or_default();
    m.get(&format!("{arch}.expert_count")).and_then(OwnedValue::as_u64).is_some_and(|n| n > 0)
        || m.tensors.iter().any(|t| t.borrow().name.contains("_exps.") || t.borrow().name.contains(".ffn_gate_inp."))
}

/// Bytes of a tensor of `ty` and shape `dims` (whole blocks per row), checked.
fn tensor_bytes(ty: GgmlType, dims: &[u64]) -> Option<u64> {
    let row = *dims.first()?;
    let bs = ty.block_size() as u64;
    if bs == 0 || row % bs != 0 {
        return None;
    }
    dims[1..].iter().try_fold((row / bs).checked_mul(ty.type_size() as u64)?, |a, &d| a.checked_mul(d))
}

/// Plans the MoE of `donors`' FFNs on `base`'s skeleton, `experts_used` experts per token,
/// requantizing to `ty` where the donors' types disagree.
///
/// # Errors
/// Every problem found, not only the first: a base that is not a dense llama model, a donor
/// of another architecture, a tensor missing or of another shape, types that disagree
/// without `ty` (or that `ty` cannot hold), an expert count out of range.
pub fn plan<T: Borrow<TensorEntry>>(
    base: &Named<'_, T>,
    donors: &[Named<'_, T>],
    experts_used: u64,
    ty: Option<GgmlType>,
) -> Result<MoePlan, Vec<Mismatch>> {
    let mut bad = Vec::new();
    let mut fail = |tensor: &str, reason: String| bad.push(Mismatch { tensor: tensor.into(), reason });
    let arch = base.model.architecture().unwrap_or_default().to_string();
    if arch != ARCH {
        let shown = if arch.is_empty() { "unknown" } else { &arch };
        fail(
            "general.architecture",
            format!("base {} is {shown}; organ moe builds llama (Mixtral) models", base.label),
        );
    }
    if is_moe(base.model) {
        fail("(base)", format!("{} is already a mixture of experts; give a dense base", base.label));
    }
    let n = donors.len();
    if n == 0 || n > MAX_EXPERTS {
        fail("(experts)", format!("{n} experts given; 1 to {MAX_EXPERTS} (llama.cpp's limit) are possible"));
    }
    if experts_used == 0 || experts_used > n as u64 {
        fail("--experts-used", format!("{experts_used} experts used per token, of {n}: must be 1 to {n}"));
    }
    // Each model's tensors by name, so that matching them is n log n, not n².
    fn index<T: Borrow<TensorEntry>>(m: &Model<T>) -> BTreeMap<&str, usize> {
        let mut by_name = BTreeMap::new();
        for (i, t) in m.tensors.iter().enumerate() {
            by_name.entry(t.borrow().name.as_str()).or_insert(i);
        }
        by_name
    }
    let base_names = index(base.model);
    let donor_names: Vec<BTreeMap<&str, usize>> = donors.iter().map(|d| index(d.model)).collect();
    for (i, d) in donors.iter().enumerate() {
        let who = format!("expert {i} ({})", d.label);
        let da = d.model.architecture().unwrap_or_default().to_string();
        if da != arch {
            let shown = if da.is_empty() { "unknown" } else { &da };
            fail("general.architecture", format!("{who} is {shown}, the base {arch}"));
        }
        if is_moe(d.model) {
            fail("(expert)", format!("{who} is a mixture of experts; give dense donors"));
        }
        for t in base.model.tensors.iter().map(Borrow::borrow) {
            match donor_names[i].get(t.name.as_str()).map(|&j| d.model.tensors[j].borrow()) {
                None => fail(&t.name, format!("not in {who}")),
                Some(x) if x.dims != t.dims => {
                    fail(&t.name, format!("shape {:?} in {who}, {:?} in the base", x.dims, t.dims));
                }
                Some(_) => {}
            }
        }
    }
    let n_embd = base_names.get("token_embd.weight").map(|&i| base.model.tensors[i].borrow());
    let n_embd = match n_embd.map(|t| t.dims.as_slice()) {
        Some(&[e, _]) => e,
        _ => {
            fail("token_embd.weight", "missing or not 2-D in the base (the routers' width is its rows')".into());
            0
        }
    };
    let mut layers: Vec<u64> = Vec::new();
    let mut seen_layers = BTreeSet::new();
    let mut tensors = Vec::new();
    // Whether `ty` settled a stack whose donors' types differ: a --type that settles none
    // would be silently ignored.
    let mut type_used = false;
    for (bi, t) in base.model.tensors.iter().map(Borrow::borrow).enumerate() {
        let Some((layer, kind, suffix)) = ffn_name(&t.name) else {
            tensors.push(Planned {
                name: t.name.clone(),
                dims: t.dims.clone(),
                ty: t.ty,
                n_bytes: t.n_bytes,
                source: Source::Base(bi),
            });
            continue;
        };
        if suffix != "weight" {
            fail(&t.name, "the llama MoE layout has no FFN tensors but weights".into());
            continue;
        }
        if seen_layers.insert(layer) {
            for k in KINDS {
                let name = format!("blk.{layer}.ffn_{k}.weight");
                if !base_names.contains_key(name.as_str()) {
                    fail(&name, "not in the base (each layer needs gate, up and down)".into());
                }
            }
            tensors.push(Planned {
                name: format!("blk.{layer}.ffn_gate_inp.weight"),
                dims: vec![n_embd, n as u64],
                ty: GgmlType::F32,
                n_bytes: n_embd * n as u64 * 4,
                source: Source::Router { layer, ordinal: layers.len() },
            });
            layers.push(layer);
        }
        let found: Vec<Option<usize>> = (donors.iter())
            .zip(&donor_names)
            .map(|(d, names)| {
                names.get(t.name.as_str()).copied().filter(|&j| d.model.tensors[j].borrow().dims == t.dims)
            })
            .collect();
        let Some(found) =
            found.into_iter().collect::<Option<Vec<usize>>>().filter(|f| !f.is_empty() && t.dims.len() == 2)
        else {
            continue; // reported above (or below, for the rank)
        };
        let types: Vec<GgmlType> = donors.iter().zip(&found).map(|(d, &i)| d.model.tensors[i].borrow().ty).collect();
        let out_ty = if types.iter().all(|&x| x == types[0]) {
            types[0]
        } else if let Some(want) = ty {
            type_used = true;
            want
        } else {
            let each: Vec<String> = types.iter().enumerate().map(|(e, x)| format!("expert {e} {x}")).collect();
            fail(&t.name, format!("types differ ({}); give --type to requantize", each.join(", ")));
            continue;
        };
        let parts: Vec<Part> =
            found.iter().zip(&types).map(|(&tensor, &x)| Part { tensor, requantize: x != out_ty }).collect();
        if parts.iter().any(|p| p.requantize) {
            if !crate::quant::quantize::can_quantize(out_ty) {
                fail(&t.name, format!("organ cannot quantize to {out_ty}"));
            }
            for (e, x) in types.iter().enumerate().filter(|(_, x)| **x != out_ty && !x.can_dequantize()) {
                fail(&t.name, format!("expert {e}'s {x} cannot be dequantized to requantize it"));
            }
        }
        let dims = vec![t.dims[0], t.dims[1], n as u64];
        let Some(n_bytes) = tensor_bytes(out_ty, &dims) else {
            fail(&t.name, format!("rows of {} values are not whole {out_ty} blocks", t.dims[0]));
            continue;
        };
        tensors.push(Planned {
            name: format!("blk.{layer}.ffn_{}_exps.weight", KINDS[kind]),
            dims,
            ty: out_ty,
            n_bytes,
            source: Source::Stack(parts),
        });
    }
    if layers.is_empty() {
        fail("(base)", format!("{} has no FFN tensors (blk.N.ffn_{{gate,up,down}}.weight)", base.label));
    }
    for t in base.model.tensors.iter().map(Borrow::borrow).filter(|t| ffn_name(&t.name).is_some()) {
        if t.dims.len() != 2 {
            fail(&t.name, format!("shape {:?}: an FFN weight is 2-D", t.dims));
        }
    }
    if let (Some(want), false, false) = (ty, type_used, tensors.is_empty()) {
        fail(
            "(--type)",
            format!(
                "{want} would change nothing: --type settles the stacks whose donors' types differ, and the donors \
                 agree in every stack; leave it out (or requantize the donors first, with llama-quantize)"
            ),
        );
    }
    if bad.is_empty() {
        Ok(MoePlan { n_embd, n_expert: n as u64, n_used: experts_used, layers, tensors })
    } else {
        Err(bad)
    }
}

/// Who made the MoE, for its `organ.moe.*` metadata.
pub struct Provenance<'a> {
    /// The base's name and BLAKE3.
    pub base: (&'a str, &'a str),
    /// Each donor's name and BLAKE3, in expert order.
    pub experts: Vec<(String, String)>,
    /// How the routers were made.
    pub router: RouterMode,
    /// The random router's seed.
    pub seed: Option<u64>,
    /// `--type`, when given.
    pub ty: Option<GgmlType>,
}

/// The output's metadata: the base's, without an earlier MoE's keys, with the expert counts
/// and the provenance (docs/moe.md lists the keys).
///
/// # Errors
/// A donor name longer than a GGUF string may be.
pub fn metadata(
    base: &[(String, OwnedValue)],
    plan: &MoePlan,
    p: &Provenance<'_>,
) -> crate::error::Result<Vec<(String, OwnedValue)>> {
    let (count, used) = (format!("{ARCH}.expert_count"), format!("{ARCH}.expert_used_count"));
    let mut kvs: Vec<(String, OwnedValue)> =
        base.iter().filter(|(k, _)| !k.starts_with("organ.moe.") && *k != count && *k != used).cloned().collect();
    let u32v = |x: u64| OwnedValue::Scalar(crate::MetaValue::U32(u32::try_from(x).unwrap_or(u32::MAX)));
    kvs.push((count, u32v(plan.n_expert)));
    kvs.push((used, u32v(plan.n_used)));
    kvs.push(("organ.moe.base".into(), OwnedValue::string(p.base.0)));
    kvs.push(("organ.moe.base_blake3".into(), OwnedValue::string(p.base.1)));
    let names: Vec<String> = p.experts.iter().map(|e| e.0.clone()).collect();
    let digests: Vec<String> = p.experts.iter().map(|e| e.1.clone()).collect();
    kvs.push(("organ.moe.experts".into(), OwnedValue::strings(&names)?));
    kvs.push(("organ.moe.experts_blake3".into(), OwnedValue::strings(&digests)?));
    kvs.push(("organ.moe.router".into(), OwnedValue::string(p.router.name())));
    if let Some(seed) = p.seed {
        kvs.push(("organ.moe.seed".into(), OwnedValue::Scalar(crate::MetaValue::U64(seed))));
    }
    if let Some(ty) = p.ty {
        kvs.push(("organ.moe.type".into(), OwnedValue::string(ty.name())));
        let names: Vec<String> = plan.requantized().map(|t| t.name.clone()).collect();
        kvs.push(("organ.moe.requantized".into(), OwnedValue::strings(&names)?));
    }
    Ok(kvs)
}

/// `bytes` (whole blocks of `from`) as `to`: dequantized and quantized by organ's own
/// kernels ([`crate::quant`]).
///
/// # Errors
/// A type organ cannot dequantize or quantize, bytes that are not whole blocks, a row
/// length that is not whole blocks of `to`, non-finite values.
pub fn requantize(from: GgmlType, bytes: &[u8], to: GgmlType) -> crate::error::Result<Vec<u8>> {
    let values = crate::quant::dequantize(from, bytes)?;
    let mut out = Vec::new();
    crate::quant::quantize::quantize(to, &values, &mut out)?;
    Ok(out)
}

#[cfg(test)]
#[path = "moe_tests.rs"]
mod tests;
