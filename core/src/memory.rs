//! What llama.cpp (release 11434) allocates to run a model, from its header alone: the
//! weights (the host's memory-mapped buffer, and what goes to a device when layers are
//! offloaded), the KV cache as the architecture's attention lays it out, the output buffer
//! and the compute buffer. Pure functions of the metadata, the tensor list and the
//! [`Settings`], so a local file, a remote header, the browser and the API get one answer.
//!
//! Sources, all in llama.cpp's `src/`: `llama-model.cpp` (`load_tensors`: which layer goes
//! to which device, the mapped range of a buffer), `llama-kv-cache.cpp` (one K and one V
//! tensor per layer, `n_embd_k_gqa(il) × kv_size`, no V under MLA),
//! `llama-kv-cache-iswa.cpp` (the sliding-window cache's size), `llama-hparams.cpp` and
//! `llama-context.cpp` (context padding, batch clamping, the output buffer). The compute
//! buffer is ggml's allocator's peak over the graph, which only building the graph gives
//! exactly: it is approximated (see [`Estimate::compute`]).

use crate::model::{Model, TensorEntry};
use crate::GgmlType;
use alloc::borrow::Borrow;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use serde::Serialize;

mod hparams;
use hparams::Hparams;

/// The largest context organ estimates for (2²⁴ cells; llama.cpp's own checks come later).
pub const MAX_CTX: u32 = 1 << 24;
/// The largest logical or physical batch organ estimates for.
pub const MAX_BATCH: u32 = 1 << 20;
/// llama.cpp pads the context, and the sliding-window cache, to this many cells.
const CTX_PAD: u32 = 256;
/// llama.cpp's default logical batch (`-b`).
pub const DEFAULT_BATCH: u32 = 2048;
/// llama.cpp's default physical batch (`-ub`).
pub const DEFAULT_UBATCH: u32 = 512;

/// The KV cache types `--kv-type` takes (llama.cpp's `-ctk`/`-ctv`).
pub const KV_TYPES: [GgmlType; 5] = [GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::F32, GgmlType::BF16];

/// How llama.cpp is asked to run the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// Context length in tokens (`-c`); `None` is llama.cpp's 0, the model's training context.
    pub ctx: Option<u32>,
    /// The type of both K and V caches (`-ctk`, `-ctv`).
    pub kv_type: GgmlType,
    /// Logical batch (`-b`).
    pub batch: u32,
    /// Physical batch (`-ub`): the tokens one graph computes, what the compute buffer holds.
    pub ubatch: u32,
    /// Layers offloaded to one device (`-ngl`), counted as llama.cpp counts them: the
    /// output layer first, then the repeating layers from the last.
    pub gpu_layers: u32,
}

impl Settings {
    /// Whether the settings are in range, whatever the model ([`estimate`] checks the
    /// context the model gives when `ctx` is `None`).
    ///
    /// # Errors
    /// The first setting out of range.
    pub fn check(&self) -> Result<(), MemoryError> {
        if let Some(ctx) = self.ctx {
            check_range(Setting::Ctx, u64::from(ctx), 1, u64::from(MAX_CTX))?;
        }
        check_range(Setting::Batch, u64::from(self.batch), 1, u64::from(MAX_BATCH))?;
        check_range(Setting::Ubatch, u64::from(self.ubatch), 1, u64::from(MAX_BATCH))?;
        if !KV_TYPES.contains(&self.kv_type) {
            let names: Vec<String> = KV_TYPES.iter().map(|t| t.name().to_ascii_lowercase()).collect();
            return Err(MemoryError::Setting(Setting::KvType, u64::from(self.kv_type.id()), names.join(", ")));
        }
        Ok(())
    }
}

impl Default for Settings {
    fn default() -> Settings {
        Settings { ctx: None, kv_type: GgmlType::F16, batch: DEFAULT_BATCH, ubatch: DEFAULT_UBATCH, gpu_layers: 0 }
    }
}

/// A setting of [`Settings`], as an error names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// [`Settings::ctx`], or the model's training context when that is `None`.
    Ctx,
    /// [`Settings::batch`].
    Batch,
    /// [`Settings::ubatch`].
    Ubatch,
    /// [`Settings::kv_type`].
    KvType,
}

impl Setting {
    /// Its name: the field of [`Settings`], in the API's and the CLI's spelling (`kv-type`).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Setting::Ctx => "ctx",
            Setting::Batch => "batch",
            Setting::Ubatch => "ubatch",
            Setting::KvType => "kv-type",
        }
    }
}

/// Why a model's memory cannot be estimated.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MemoryError {
    /// The file is a LoRA adapter: llama.cpp loads it on a base model, not alone.
    Adapter,
    /// The header lacks what a model has (the key or tensor named).
    NotAModel(String),
    /// A metadata value is not what llama.cpp reads (key, what was expected).
    BadKey(String, &'static str),
    /// A setting is outside what organ estimates for (which, value, allowed range). It
    /// displays as `NAME VALUE is out of range (RANGE)`; a face that takes the setting
    /// under another name (a flag) says that name instead ([`Setting::name`]).
    Setting(Setting, u64, String),
    /// The estimate's bytes pass 64 bits (at the value named).
    Overflow(u64),
    /// llama.cpp refuses this KV type for this model's heads (type, which head size, size).
    KvType(GgmlType, &'static str, u64),
    /// The architecture keeps a recurrent state, which organ does not model.
    Recurrent(String),
}

impl core::fmt::Display for MemoryError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            MemoryError::Adapter => {
                write!(f, "is a LoRA adapter, not a model: llama.cpp loads it with --lora on its base model")
            }
            MemoryError::NotAModel(what) => write!(f, "is not a model llama.cpp can load: {what}"),
            MemoryError::BadKey(key, expected) => write!(f, "metadata key {key}: expected {expected}"),
            MemoryError::Setting(which, v, range) => write!(f, "{} {v} is out of range ({range})", which.name()),
            MemoryError::Overflow(v) => write!(f, "the estimate {v} is out of range (bytes that fit in 64 bits)"),
            MemoryError::KvType(t, which, n) => write!(
                f,
                "llama.cpp refuses a {} KV cache here: its block of {} does not divide the {which} head size {n}",
                t.name().to_ascii_lowercase(),
                t.block_size()
            ),
            MemoryError::Recurrent(arch) => {
                write!(f, "{arch} keeps a recurrent state, which the memory estimate does not model")
            }
        }
    }
}

/// One KV cache (llama.cpp has one, or two with sliding-window layers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct KvCache {
    /// Cells: the padded context, or the window's for the sliding-window cache.
    pub cells: u32,
    /// Layers it holds.
    pub layers: u32,
    /// Bytes of K.
    pub k: u64,
    /// Bytes of V (0 under MLA, where V is read from the compressed K).
    pub v: u64,
    /// Of `k + v`, the bytes of offloaded layers (on the device).
    pub device: u64,
}

impl KvCache {
    /// Its bytes, K and V.
    pub fn bytes(&self) -> u64 {
        self.k + self.v
    }
}

/// The weights' buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Weights {
    /// The host's memory-mapped model buffer (`CPU_Mapped model buffer size`): from the
    /// first byte of the first host tensor to the last byte of the last, per file.
    pub host_mapped: u64,
    /// Bytes copied to the device: the offloaded layers' tensors, and the output layer's
    /// (`token_embd` again when the output is tied to it).
    pub device: u64,
    /// Repeating layers on the device.
    pub layers_on_device: u32,
    /// Whether the output layer is on the device.
    pub output_on_device: bool,
}

/// What llama.cpp allocates, in bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Estimate {
    /// The context llama.cpp uses (asked, or the training context, padded to 256).
    pub ctx: u32,
    /// The logical batch, clamped to the context as llama.cpp does.
    pub batch: u32,
    /// The physical batch, clamped to the logical one.
    pub ubatch: u32,
    /// The KV cache type.
    pub kv_type: GgmlType,
    /// The repeating layers.
    pub n_layer: u32,
    /// Weights.
    pub weights: Weights,
    /// The KV cache of full-attention layers.
    pub kv: KvCache,
    /// The sliding-window layers' cache, if the model has such layers.
    pub kv_swa: Option<KvCache>,
    /// Whether K holds MLA's compressed latent (and there is no V).
    pub mla: bool,
    /// The host's output buffer (one token's logits, `CPU output buffer size`).
    pub output: u64,
    /// The compute buffer, approximated: the logits of a full physical batch
    /// (`n_vocab × ubatch` f32), flash attention's f16 mask per cache
    /// (`cells × ubatch`), and five `n_embd × ubatch` f32 activations live at the peak.
    /// Within 0.05 MiB of llama.cpp's on SmolLM2 and the test-built families (docs/surgery.md).
    pub compute: u64,
    /// Everything.
    pub total: u64,
}

/// One line of an estimate as every face shows it: the CLI's text, the browser's table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Line {
    /// Its key (`weights_host`, `weights_device`, `kv`, `kv_swa`, `output`, `compute`,
    /// `total`): the browser's `data-part`.
    pub part: &'static str,
    /// What it is, for people.
    pub what: &'static str,
    /// Its size.
    pub bytes: u64,
    /// What it holds (empty for the weights and the total).
    pub note: String,
}

/// Bytes in MiB as llama.cpp prints its buffers (two decimals).
pub fn mib(bytes: u64) -> String {
    format!("{:.2} MiB", bytes as f64 / 1048576.0)
}

impl Estimate {
    /// How llama.cpp was asked to run the model, as a phrase: `ctx 8192, KV f16, batch
    /// 2048, ubatch 512, 0 of 30 layers offloaded`.
    pub fn settings_text(&self) -> String {
        let w = &self.weights;
        format!(
            "ctx {}, KV {}, batch {}, ubatch {}, {} of {} layers{} offloaded",
            self.ctx,
            self.kv_type.name().to_ascii_lowercase(),
            self.batch,
            self.ubatch,
            w.layers_on_device,
            self.n_layer,
            if w.output_on_device { " and the output" } else { "" }
        )
    }

    /// One line per buffer (the device's weights only when layers are offloaded, the
    /// sliding-window cache only when there is one), then the total.
    pub fn lines(&self) -> Vec<Line> {
        let line = |part, what, bytes, note: String| Line { part, what, bytes, note };
        let cache = |c: &KvCache| {
            let mut note = format!("{} cells × {} layers, K {}", c.cells, c.layers, mib(c.k));
            if self.mla {
                note.push_str(" (MLA latent), no V");
            } else {
                note.push_str(&format!(", V {}", mib(c.v)));
            }
            if c.device > 0 {
                note.push_str(&format!("; {} on the device", mib(c.device)));
            }
            note
        };
        let mut lines = Vec::with_capacity(7);
        lines.push(line("weights_host", "weights, host (mapped)", self.weights.host_mapped, String::new()));
        if self.weights.device > 0 {
            lines.push(line("weights_device", "weights, device", self.weights.device, String::new()));
        }
        lines.push(line("kv", "KV cache", self.kv.bytes(), cache(&self.kv)));
        if let Some(c) = &self.kv_swa {
            lines.push(line("kv_swa", "KV cache, sliding window", c.bytes(), cache(c)));
        }
        lines.push(line("output", "output buffer", self.output, "one token's logits".into()));
        lines.push(line(
            "compute",
            "compute buffer (approx.)",
            self.compute,
            "a batch's logits, the attention mask, activations".into(),
        ));
        lines.push(line("total", "total", self.total, String::new()));
        lines
    }
}

/// The estimate for `m` run as `s` says.
///
/// # Errors
/// An adapter, a header without a model's keys, a setting out of range, a KV type whose
/// block does not divide the head size (llama.cpp refuses it), a recurrent architecture.
pub fn estimate<T: Borrow<TensorEntry>>(m: &Model<T>, s: &Settings) -> Result<Estimate, MemoryError> {
    if crate::lora::is_adapter(m) {
        return Err(MemoryError::Adapter);
    }
    let h = Hparams::read(m)?;
    s.check()?;
    let ctx_asked = s.ctx.unwrap_or(h.n_ctx_train);
    check_range(Setting::Ctx, u64::from(ctx_asked), 1, u64::from(MAX_CTX))?;
    let ctx = pad(ctx_asked);
    let batch = s.batch.min(ctx);
    let ubatch = s.ubatch.min(batch);
    let bs = s.kv_type.block_size() as u64;
    for (il, &kv) in h.head_kv.iter().enumerate() {
        if kv == 0 {
            continue;
        }
        let (k, v) = h.head_sizes(il);
        if k % bs != 0 {
            return Err(MemoryError::KvType(s.kv_type, "K", k));
        }
        if !h.mla && v % bs != 0 {
            return Err(MemoryError::KvType(s.kv_type, "V", v));
        }
    }

    // llama-model.cpp: i_gpu_start = n_layer + 1 - ngl; the output layer is index n_layer.
    let gpu_start = (u64::from(h.n_layer) + 1).saturating_sub(u64::from(s.gpu_layers));
    let on_device = |il: u64| il >= gpu_start;
    let weights = weights(m, &h, on_device)?;

    let swa_cells = pad_swa(ctx, h.n_swa, ubatch);
    let mut kv = KvCache { cells: ctx, ..KvCache::default() };
    let mut kv_swa = KvCache { cells: swa_cells, ..KvCache::default() };
    for il in 0..h.n_layer {
        let i = il as usize;
        let n_kv = h.head_kv.get(i).copied().unwrap_or(0);
        if n_kv == 0 {
            continue;
        }
        let swa = h.swa.get(i).copied().unwrap_or(false);
        let cache = if swa { &mut kv_swa } else { &mut kv };
        let (hk, hv) = h.head_sizes(i);
        let k = row_size(s.kv_type, mul(hk, n_kv)?)?;
        let k = mul(k, u64::from(cache.cells))?;
        let v = if h.mla { 0 } else { mul(row_size(s.kv_type, mul(hv, n_kv)?)?, u64::from(cache.cells))? };
        cache.layers += 1;
        cache.k = add(cache.k, k)?;
        cache.v = add(cache.v, v)?;
        if on_device(u64::from(il)) {
            cache.device = add(cache.device, add(k, v)?)?;
        }
    }
    let kv_swa = (kv_swa.layers > 0).then_some(kv_swa);

    let output = mul(h.n_vocab, 4)?;
    let t = u64::from(ubatch);
    let logits = mul(mul(h.n_vocab, t)?, 4)?;
    let mut mask = mul(mul(u64::from(ctx), t)?, 2)?;
    if let Some(c) = kv_swa {
        mask = add(mask, mul(mul(u64::from(c.cells), t)?, 2)?)?;
    }
    let activations = mul(mul(mul(h.n_embd, t)?, 4)?, 5)?;
    let compute = add(add(logits, mask)?, activations)?;

    let mut total = add(weights.host_mapped, weights.device)?;
    total = add(total, kv.bytes())?;
    total = add(total, kv_swa.map_or(0, |c| c.bytes()))?;
    total = add(add(total, output)?, compute)?;
    Ok(Estimate {
        ctx,
        batch,
        ubatch,
        kv_type: s.kv_type,
        n_layer: h.n_layer,
        weights,
        kv,
        kv_swa,
        mla: h.mla,
        output,
        compute,
        total,
    })
}

/// The weights' buffers: host tensors' mapped range per file, offloaded tensors' bytes.
fn weights<T: Borrow<TensorEntry>>(
    m: &Model<T>,
    h: &Hparams,
    on_device: impl Fn(u64) -> bool,
) -> Result<Weights, MemoryError> {
    let output_layer = u64::from(h.n_layer);
    let output_on_device = on_device(output_layer);
    let mut ranges: Vec<(usize, u64, u64)> = Vec::new();
    let mut device = 0u64;
    let mut has_output = false;
    let mut token_embd = 0u64;
    for t in &m.tensors {
        let t = t.borrow();
        let layer = match layer_of(&t.name) {
            Some(il) => Some(il),
            None if t.name.starts_with("output.") || t.name.starts_with("output_norm.") => Some(output_layer),
            None => None,
        };
        if t.name == "output.weight" {
            has_output = true;
        }
        if t.name == "token_embd.weight" {
            token_embd = t.n_bytes;
        }
        if layer.is_some_and(&on_device) {
            device = add(device, t.n_bytes)?;
            continue;
        }
        let end = add(t.offset, t.n_bytes)?;
        match ranges.iter_mut().find(|r| r.0 == t.file) {
            Some(r) => {
                r.1 = r.1.min(t.offset);
                r.2 = r.2.max(end);
            }
            None => ranges.push((t.file, t.offset, end)),
        }
    }
    // A tied output is token_embd created again in the output layer's buffer.
    if output_on_device && !has_output {
        device = add(device, token_embd)?;
    }
    let mut host_mapped = 0u64;
    for (_, first, last) in ranges {
        host_mapped = add(host_mapped, last.saturating_sub(first))?;
    }
    let layers_on_device = (0..h.n_layer).filter(|&il| on_device(u64::from(il))).count() as u32;
    Ok(Weights { host_mapped, device, layers_on_device, output_on_device })
}

/// The layer of a `blk.N.…` tensor.
fn layer_of(name: &str) -> Option<u64> {
    let rest = name.strip_prefix("blk.")?;
    rest.split('.').next()?.parse().ok()
}

fn check_range(name: Setting, v: u64, lo: u64, hi: u64) -> Result<(), MemoryError> {
    if v < lo || v > hi {
        return Err(MemoryError::Setting(name, v, format!("{lo} to {hi}")));
    }
    Ok(())
}

/// The context llama.cpp uses: padded to 256 cells (llama-context.cpp).
fn pad(ctx: u32) -> u32 {
    ctx.div_ceil(CTX_PAD).saturating_mul(CTX_PAD)
}

/// The sliding-window cache's cells (llama-kv-cache-iswa.cpp, one sequence):
/// `min(ctx, n_swa + ubatch)` padded to 256.
fn pad_swa(ctx: u32, n_swa: u64, ubatch: u32) -> u32 {
    let want = n_swa.saturating_add(u64::from(ubatch)).min(u64::from(ctx));
    pad(u32::try_from(want).unwrap_or(ctx))
}

/// ggml_row_size: bytes of `n` elements of `t`.
fn row_size(t: GgmlType, n: u64) -> Result<u64, MemoryError> {
    mul(n / t.block_size() as u64, t.type_size() as u64)
}

fn mul(a: u64, b: u64) -> Result<u64, MemoryError> {
    a.checked_mul(b).ok_or(MemoryError::Overflow(a))
}

fn add(a: u64, b: u64) -> Result<u64, MemoryError> {
    a.checked_add(b).ok_or(MemoryError::Overflow(a))
}

#[cfg(test)]
mod tests;
