//! Test-built models shared by the modules: tensors from values (quantized by organ) or
//! raw bytes, written with organ's GGUF writer; reproducible noise; SmolLM2's Q8_0 requant.

use crate::common::*;
use organ_core::gguf::writer::{plan, TensorSpec};
use organ_core::gguf::MetaValue;
use organ_core::quant::quantize::quantize;
use organ_core::GgmlType;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// SmolLM2 requantized to Q8_0 by llama.cpp (`llama-quantize --allow-requantize`), made
/// once per test process: the oracle, streaming and graft tests share it.
pub fn smollm2_q8_0(model: &Path) -> PathBuf {
    static Q8_0: OnceLock<PathBuf> = OnceLock::new();
    Q8_0.get_or_init(|| {
        let out = tmp("smollm2-q8_0.gguf");
        let mut q = llama_tool("llama-quantize");
        q.arg("--allow-requantize").arg(model).arg(&out).arg("Q8_0");
        ok(q);
        out
    })
    .clone()
}

/// A tensor of a test-built model: its values, written as `ty` (F32 as is, other types
/// through organ's quantizer).
pub struct T {
    pub name: String,
    pub dims: Vec<u64>,
    pub ty: GgmlType,
    pub values: Vec<f32>,
    /// Its bytes as they are, when set (`values` is then empty).
    pub raw: Option<Vec<u8>>,
}

pub fn t(name: &str, dims: &[u64], ty: GgmlType, values: Vec<f32>) -> T {
    assert_eq!(values.len() as u64, dims.iter().product::<u64>(), "{name}");
    T { name: name.to_owned(), dims: dims.to_vec(), ty, values, raw: None }
}

/// A tensor of a test-built model given by its bytes, written as they are.
pub fn raw(name: &str, dims: &[u64], ty: GgmlType, bytes: Vec<u8>) -> T {
    T { name: name.to_owned(), dims: dims.to_vec(), ty, values: Vec::new(), raw: Some(bytes) }
}

/// `n` reproducible values in [-1, 1) from `seed` (xorshift64*).
pub fn noise(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            let r = s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40;
            r as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// Writes a GGUF of `general.architecture` = `arch` holding `tensors`, with organ's writer.
pub fn write_model(name: &str, arch: &str, tensors: &[T]) -> PathBuf {
    write_model_kvs(name, &[("general.architecture", MetaValue::Str(arch.as_bytes()))], tensors)
}

/// Writes a GGUF with metadata `kvs` (in order) holding `tensors`, with organ's writer.
pub fn write_model_kvs(name: &str, kvs: &[(&str, MetaValue<'_>)], tensors: &[T]) -> PathBuf {
    let specs: Vec<TensorSpec> =
        tensors.iter().map(|t| TensorSpec { name: &t.name, dims: &t.dims, ty: t.ty }).collect();
    let layout = plan(3, kvs, &specs).unwrap();
    let mut f = layout.header.clone();
    f.resize(layout.file_len as usize, 0);
    for (t, &(offset, len)) in tensors.iter().zip(&layout.tensors) {
        let bytes = match (&t.raw, t.ty) {
            (Some(b), _) => b.clone(),
            (None, GgmlType::F32) => t.values.iter().flat_map(|v| v.to_le_bytes()).collect(),
            (None, ty) => {
                let mut out = Vec::new();
                quantize(ty, &t.values, &mut out).unwrap();
                out
            }
        };
        assert_eq!(bytes.len() as u64, len, "{}", t.name);
        let at = layout.header.len() + offset as usize;
        f[at..at + bytes.len()].copy_from_slice(&bytes);
    }
    let p = tmp(name);
    std::fs::write(&p, f).unwrap();
    p
}
