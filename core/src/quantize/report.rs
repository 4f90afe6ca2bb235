//! `organ quantize`'s report: the plan's types and sizes, as [`super::plan`] made them, and
//! what the run wrote. The report registry renders it ([`crate::report::quantize`]): its
//! text is what llama-quantize prints at the end (the sizes), its JSON every tensor.

use super::{weights_for, Params, Plan};
use crate::ggml_type::GgmlType;
use alloc::string::String;
use alloc::vec::Vec;
use serde::Serialize;

/// The report's schema version.
pub const SCHEMA: u32 = 1;

/// One tensor, in the order it is written.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Its name.
    pub name: String,
    /// Its shape as written.
    pub dims: Vec<u64>,
    /// Its type in the input.
    pub from: GgmlType,
    /// Its type in the output (`from`: copied as it is).
    #[serde(rename = "type")]
    pub to: GgmlType,
    /// Its data's bytes in the output.
    pub bytes: u64,
    /// Whether its values were weighted by the importance matrix.
    pub imatrix: bool,
}

/// What `organ quantize` planned and wrote.
#[derive(Debug, Clone, Serialize)]
pub struct QuantizeReport {
    /// The schema's version.
    pub organ_quantize: u32,
    /// The input, as the face names it.
    pub input: String,
    /// The files written (one, or a shard each with `--keep-split`); none for a dry run.
    pub outputs: Vec<String>,
    /// The file type asked for, by its `llama_ftype` name (`Q4_K_M`).
    #[serde(rename = "type")]
    pub ftype: String,
    /// Its number (`general.file_type`).
    pub file_type: u32,
    /// The importance matrix's path, when one steered the quantizers.
    pub imatrix: Option<String>,
    /// Elements of every tensor.
    pub n_elements: u64,
    /// Data bytes in the input's types.
    pub bytes_in: u64,
    /// Data bytes in the output's types.
    pub bytes_out: u64,
    /// The output's header bytes (metadata and tensor infos, padded; every shard's).
    pub header_bytes: u64,
    /// The output's size: headers and data, padded.
    pub file_bytes: u64,
    /// Tensors whose type fell back for their row length.
    pub n_fallback: u32,
    /// Every tensor, in the order written.
    pub tensors: Vec<Row>,
}

impl QuantizeReport {
    /// The report of `plan`, made with `p`; `outputs` the files written (none for a dry
    /// run), `n_elements` the model's elements (as [`Self::n_elements`]).
    pub fn new(plan: &Plan, p: &Params, input: String, outputs: Vec<String>, n_elements: u64) -> QuantizeReport {
        let tensors = plan
            .tensors
            .iter()
            .zip(plan.tensor_bytes())
            .map(|(t, bytes)| Row {
                name: t.name.clone(),
                dims: t.dims.clone(),
                from: t.from,
                to: t.to,
                bytes,
                imatrix: matches!(weights_for(p, t), Ok(Some(_))),
            })
            .collect();
        QuantizeReport {
            organ_quantize: SCHEMA,
            input,
            outputs,
            ftype: alloc::format!("{:?}", p.ftype),
            file_type: p.ftype.id(),
            imatrix: p.active_imatrix().map(|m| m.file.clone()),
            n_elements,
            bytes_in: plan.bytes_in,
            bytes_out: plan.bytes_out,
            header_bytes: plan.header_len(),
            file_bytes: plan.file_len(),
            n_fallback: plan.n_fallback,
            tensors,
        }
    }

    /// Bits per weight of `bytes` over the model's elements.
    pub fn bpw(&self, bytes: u64) -> f64 {
        bytes as f64 * 8.0 / self.n_elements.max(1) as f64
    }
}
