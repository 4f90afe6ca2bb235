//! `organ inspect`.

use super::{Argv, Exit, Out, SelectArgs, ToArgs};
use anyhow::Result;
use organ_core::memory::{Settings, KV_TYPES};
use organ_core::surgery::select::Selection;
use organ_core::GgmlType;
use std::path::PathBuf;

#[derive(clap::Args, Debug, Clone, Default, PartialEq)]
pub struct InspectArgs {
    /// The model: a GGUF file, a split GGUF (any shard), or an organ directory (shown as
    /// the GGUF `organ assemble` writes from it, offsets included).
    pub model: PathBuf,
    /// Print everything as JSON (arrays in full) instead of a summary.
    #[arg(long)]
    pub json: bool,
    /// Show only the tensors of these layers: ranges and lists, e.g. 5-20 or 3,7,9-11.
    #[arg(long, help_heading = "Tensors shown")]
    pub layers: Option<String>,
    /// Show only the tensors of these anatomy groups: organ, skeleton, embed, norm,
    /// adapter, other (repeat or comma-separate). Also spelt --type, as graft and purify
    /// spell it.
    #[arg(long = "group", visible_alias = "type", value_name = "GROUP", help_heading = "Tensors shown")]
    pub groups: Vec<String>,
    /// Show only the tensors whose name matches one of these patterns, `*` matching
    /// anything (repeatable).
    #[arg(long = "name", value_name = "PATTERN", help_heading = "Tensors shown")]
    pub names: Vec<String>,
    /// Estimate what llama.cpp allocates to run the model (weights, KV cache, compute
    /// buffer), from the header alone: shown instead of the metadata and tensors, and as
    /// `memory` in --json.
    #[arg(long, help_heading = "Memory")]
    pub memory: bool,
    /// Context length in tokens (llama.cpp's -c); the model's training context when absent.
    #[arg(long, value_name = "N", requires = "memory", help_heading = "Memory")]
    pub ctx: Option<u32>,
    /// The KV cache's type (llama.cpp's -ctk and -ctv): f16, q8_0, q4_0, f32 or bf16.
    #[arg(long = "kv-type", value_name = "TYPE", requires = "memory", help_heading = "Memory")]
    pub kv_type: Option<String>,
    /// Logical batch (llama.cpp's -b, default 2048).
    #[arg(long, value_name = "N", requires = "memory", help_heading = "Memory")]
    pub batch: Option<u32>,
    /// Physical batch (llama.cpp's -ub, default 512): the tokens the compute buffer holds.
    #[arg(long, value_name = "N", requires = "memory", help_heading = "Memory")]
    pub ubatch: Option<u32>,
    /// Layers offloaded to a device (llama.cpp's -ngl): the output layer first, then the
    /// repeating layers from the last.
    #[arg(long = "gpu-layers", value_name = "N", requires = "memory", help_heading = "Memory")]
    pub gpu_layers: Option<u32>,
}

impl InspectArgs {
    /// `inspect MODEL`, every tensor shown.
    pub fn new(model: PathBuf, json: bool) -> InspectArgs {
        InspectArgs { model, json, ..InspectArgs::default() }
    }

    /// The selection, through graft's and purify's seam ([`SelectArgs`]); inspect calls
    /// its group option `--group`, since `--type` would read as the ggml type column.
    fn selection(&self) -> Result<Selection> {
        let s = SelectArgs { layers: self.layers.clone(), types: self.groups.clone(), names: self.names.clone() };
        Selection::try_from(&s)
    }

    /// The memory estimate's settings, when `--memory` asks for one.
    ///
    /// # Errors
    /// A `--kv-type` that is not one llama.cpp caches in.
    pub fn memory_settings(&self) -> Result<Option<Settings>> {
        if !self.memory {
            return Ok(None);
        }
        Ok(Some(memory_settings(self.ctx, self.kv_type.as_deref(), self.batch, self.ubatch, self.gpu_layers)?))
    }
}

/// The estimate's settings from the flags (or the API's query), llama.cpp's defaults for
/// those absent.
///
/// # Errors
/// A KV type that is not one of [`KV_TYPES`].
pub fn memory_settings(
    ctx: Option<u32>,
    kv_type: Option<&str>,
    batch: Option<u32>,
    ubatch: Option<u32>,
    gpu_layers: Option<u32>,
) -> Result<Settings> {
    let d = Settings::default();
    let kv_type = match kv_type {
        None => d.kv_type,
        Some(name) => GgmlType::from_name(name).filter(|t| KV_TYPES.contains(t)).ok_or_else(|| {
            let names: Vec<String> = KV_TYPES.iter().map(|t| t.name().to_ascii_lowercase()).collect();
            anyhow::anyhow!("--kv-type {name}: not a KV cache type llama.cpp takes ({})", names.join(", "))
        })?,
    };
    Ok(Settings {
        ctx,
        kv_type,
        batch: batch.unwrap_or(d.batch),
        ubatch: ubatch.unwrap_or(d.ubatch),
        gpu_layers: gpu_layers.unwrap_or(d.gpu_layers),
    })
}

pub(super) fn run(a: &InspectArgs, out: &mut Out) -> Result<Exit> {
    let o = crate::cmd::inspect::Options {
        model: &a.model,
        json: a.json,
        selection: a.selection()?,
        memory: a.memory_settings()?,
    };
    crate::cmd::inspect::run(&o, out.stdout())?;
    Ok(Exit::Done)
}

impl ToArgs for InspectArgs {
    fn to_args(&self, a: &mut Argv) {
        a.arg("inspect")
            .arg(&self.model)
            .switch("--json", self.json)
            .opt("--layers", self.layers.as_ref())
            .each("--group", &self.groups)
            .each("--name", &self.names)
            .switch("--memory", self.memory)
            .opt("--ctx", self.ctx.map(|n| n.to_string()))
            .opt("--kv-type", self.kv_type.as_ref())
            .opt("--batch", self.batch.map(|n| n.to_string()))
            .opt("--ubatch", self.ubatch.map(|n| n.to_string()))
            .opt("--gpu-layers", self.gpu_layers.map(|n| n.to_string()));
    }
}
