//! Q2_0, which gguf-py 0.19.0 does not know, measured like any other type: a SmolLM2 that
//! llama-quantize turned into Q2_0 gets a θ for every Q2_0 tensor, and the values the
//! measure decodes are ggml's own `dequantize_row_q2_0` output, bit for bit (through the
//! C harness tests/oracle/ggml_dequant.c, as scripts/gen-ggml-dequant-vectors.sh builds
//! it). (llama-quantize cannot make a Q1_0 SmolLM2: its rows of 576 are not whole Q1_0
//! blocks of 128, and Q1_0 has no fallback type. Q1_0 has ggml's vectors in core's tests.)

use crate::common::*;
use organ_core::zmeasure::{measure_values, sample_indices, sample_values, SAMPLE_SIZE};
use organ_core::{GgmlType, Gguf};
use std::path::{Path, PathBuf};
use std::process::Command;

/// SmolLM2 requantized by llama-quantize to `ty`, made once per test process.
fn quantized(ty: &str) -> PathBuf {
    let out = tmp(&format!("smollm2-{ty}.gguf"));
    if !out.exists() {
        let part = tmp(&format!("smollm2-{ty}.gguf.part"));
        let mut q = llama_tool("llama-quantize");
        q.arg("--allow-requantize").arg(smollm2()).arg(&part).arg(ty);
        ok(q);
        std::fs::rename(&part, &out).unwrap();
    }
    out
}

/// ggml's dequantizer as a program: tests/oracle/ggml_dequant.c linked against the
/// libggml-base.a of scripts/build-llama.sh.
fn ggml_dequant() -> PathBuf {
    let exe = tmp("ggml_dequant");
    if !exe.exists() {
        let bin = llama_tool("llama-quantize").get_program().to_owned();
        let lib = Path::new(&bin).parent().unwrap().parent().unwrap().join("build/ggml/src/libggml-base.a");
        assert!(lib.exists(), "{} is missing: run scripts/build-llama.sh", lib.display());
        let mut c = Command::new("gcc");
        c.arg("-O2").arg("-o").arg(&exe).arg(repo().join("tests/oracle/ggml_dequant.c")).arg(&lib);
        c.args(["-lm", "-lpthread", "-lstdc++"]);
        ok(c);
    }
    exe
}

/// ggml's values for the blocks `data` of type `ty`.
fn ggml_values(ty: GgmlType, data: &[u8]) -> Vec<u32> {
    let (inp, out) = (tmp(&format!("{ty}.blocks")), tmp(&format!("{ty}.f32")));
    std::fs::write(&inp, data).unwrap();
    let mut c = Command::new(ggml_dequant());
    c.arg(ty.name()).arg(&inp).arg(&out);
    ok(c);
    std::fs::read(&out).unwrap().chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

fn measures_like_any_other(ty: GgmlType) {
    let model = quantized(ty.name());
    let file = std::fs::read(&model).unwrap();
    let g = Gguf::parse(&file, file.len() as u64).unwrap();
    let ours: Vec<_> = g.tensors.iter().filter(|t| t.ty == ty).collect();
    assert!(ours.len() >= 200, "{ty}: only {} tensors of the type", ours.len());

    let json = tmp(&format!("measure-{ty}.json"));
    let mut c = organ();
    c.arg("measure").arg(&model).arg("--json").arg(&json).args(["--no-cache", "--summary-only", "--force"]);
    ok(c);
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let tensors = report["models"][0]["tensors"].as_array().expect("models[0].tensors");
    let theta = |name: &str| {
        let t = tensors.iter().find(|t| t["name"] == name).unwrap_or_else(|| panic!("{name} not in the report"));
        assert_eq!(t["status"], "measured", "{name}: {t}");
        t["theta"].as_f64().unwrap_or_else(|| panic!("{name}: no θ in {t}"))
    };
    for t in &ours {
        theta(t.name);
    }

    // One tensor decoded by ggml: the whole tensor, the sample, and the θ agree.
    let t = g.tensor("blk.3.ffn_up.weight").unwrap();
    assert_eq!(t.ty, ty);
    let data = t.data(&file).unwrap();
    let want = ggml_values(ty, data);
    let got = organ_core::quant::dequantize(ty, data).unwrap();
    assert_eq!(got.len(), want.len());
    let bad = got.iter().zip(&want).position(|(g, w)| g.to_bits() != *w);
    assert_eq!(bad, None, "{ty}: first element where organ and ggml differ");
    let sample = sample_values(t.name, ty, t.n_elements, data).unwrap();
    let idx = sample_indices(t.name, t.n_elements, SAMPLE_SIZE);
    let ggml_sample: Vec<f32> = idx.iter().map(|&i| f32::from_bits(want[i as usize])).collect();
    assert!(sample.iter().map(|v| v.to_bits()).eq(ggml_sample.iter().map(|v| v.to_bits())), "{ty}: the sample");
    let m = measure_values(ggml_sample);
    assert_eq!(theta(t.name), m.theta, "{ty}: θ of ggml's values");
}

#[test]
fn q2_0_smollm2_measures_like_any_other_model() {
    if need::smollm2_and_llama().is_none() {
        return;
    }
    measures_like_any_other(GgmlType::Q2_0);
}
