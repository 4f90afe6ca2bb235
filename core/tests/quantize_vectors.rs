//! Quantizers against gguf-py 0.19.0's `gguf.quants.quantize`, bit for bit
//! (vectors: scripts/gen-quantize-vectors.py), and quantize → dequantize round trips.

use organ_core::quant::quantize::{can_quantize, f32_to_bf16, f32_to_f16, quantize};
use organ_core::quant::{dequantize, float::f16_to_f32};
use organ_core::GgmlType;
use std::path::PathBuf;

fn read(name: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/quantize").join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

const TYPES: [GgmlType; 7] =
    [GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1];

#[test]
fn every_quantizer_matches_gguf_py_bit_for_bit() {
    for ty in TYPES {
        let x = f32s(&read(&format!("{}.in", ty.name())));
        let want = read(&format!("{}.out", ty.name()));
        let mut got = Vec::new();
        quantize(ty, &x, &mut got).unwrap();
        assert_eq!(got.len(), want.len(), "{ty}");
        let ts = ty.type_size();
        if let Some(k) = (0..got.len() / ts).find(|&k| got[k * ts..(k + 1) * ts] != want[k * ts..(k + 1) * ts]) {
            panic!(
                "{ty} block {k}: ours {:02x?} gguf-py {:02x?} input {:?}",
                &got[k * ts..(k + 1) * ts],
                &want[k * ts..(k + 1) * ts],
                &x[k * ty.block_size()..(k + 1) * ty.block_size()]
            );
        }
    }
}

#[test]
fn half_and_bfloat_conversions_match_numpy_on_every_special_pattern() {
    for (name, f) in [("f16_bits", f32_to_f16 as fn(f32) -> u16), ("bf16_bits", f32_to_bf16)] {
        let input = read(&format!("{name}.in"));
        let want = read(&format!("{name}.out"));
        for (i, c) in input.chunks_exact(4).enumerate() {
            let x = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            let w = u16::from_le_bytes([want[2 * i], want[2 * i + 1]]);
            assert_eq!(f(x), w, "{name}: input bits {:#010x}", x.to_bits());
        }
    }
    // Every half survives half -> f32 -> half.
    for h in 0..=u16::MAX {
        let back = f32_to_f16(f16_to_f32(h));
        assert!(back == h || (h & 0x7C00 == 0x7C00 && h & 0x3FF != 0), "{h:#06x} -> {back:#06x}");
    }
}

#[test]
fn round_trips_stay_within_the_format_s_step() {
    let x = f32s(&read("Q4_1.in"));
    for ty in TYPES {
        let mut q = Vec::new();
        quantize(ty, &x, &mut q).unwrap();
        let y = dequantize(ty, &q).unwrap();
        for (b, (xs, ys)) in x.chunks(ty.block_size().max(32)).zip(y.chunks(ty.block_size().max(32))).enumerate() {
            let (lo, hi) = xs.iter().fold((f32::INFINITY, f32::NEG_INFINITY), |(l, h), &v| (l.min(v), h.max(v)));
            let amax = xs.iter().fold(0f32, |m, v| m.max(v.abs()));
            let step = match ty {
                GgmlType::Q8_0 => amax / 127.0,
                GgmlType::Q4_0 => amax / 8.0,
                GgmlType::Q5_0 => amax / 16.0,
                GgmlType::Q4_1 => (hi - lo) / 15.0,
                GgmlType::Q5_1 => (hi - lo) / 31.0,
                _ => amax * 2f32.powi(-7),
            };
            for (a, b2) in xs.iter().zip(ys) {
                // A step plus the f16 rounding of the block's scale (and min).
                let tol = step * 1.01 + amax * 2e-3 + 1e-30;
                assert!((a - b2).abs() <= tol, "{ty} block {b}: {a} -> {b2} (step {step})");
            }
        }
    }
}

#[test]
fn types_without_a_quantizer_and_bad_input_are_refused_by_name() {
    let mut out = Vec::new();
    for ty in [GgmlType::Q4_K, GgmlType::IQ2_XS, GgmlType::Q8_1] {
        assert!(!can_quantize(ty));
        let e = quantize(ty, &[0.0; 256], &mut out).unwrap_err();
        assert!(e.to_string().contains(ty.name()), "{e}");
    }
    assert!(quantize(GgmlType::Q8_0, &[0.0; 31], &mut out).is_err());
    let mut x = vec![1.0f32; 32];
    x[3] = f32::NAN;
    assert!(quantize(GgmlType::Q8_0, &x, &mut out).unwrap_err().to_string().contains("value 3"));
    assert!(out.is_empty(), "nothing written on refusal");
}
