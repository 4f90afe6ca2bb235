//! Quantizers against gguf-py 0.19.0's `gguf.quants.quantize`, bit for bit (vectors:
//! scripts/gen-quantize-vectors.py); Q4_K, Q5_K and Q6_K, which gguf-py cannot quantize,
//! against ggml's own C reference quantizers, bit for bit (scripts/gen-kquant-vectors.sh,
//! re-checked against ggml in CI); quantize → dequantize round trips, and ggml's own
//! error thresholds (tests/test-quantize-fns.cpp).

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

/// The types whose reference is ggml's C code (gguf-py has no quantizer for them).
const K_TYPES: [GgmlType; 3] = [GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K];

#[test]
fn every_quantizer_matches_its_reference_bit_for_bit() {
    for ty in TYPES.into_iter().chain(K_TYPES) {
        let x = f32s(&read(&format!("{}.in", ty.name())));
        let want = read(&format!("{}.out", ty.name()));
        let mut got = Vec::new();
        quantize(ty, &x, &mut got).unwrap();
        assert_eq!(got.len(), want.len(), "{ty}");
        let ts = ty.type_size();
        if let Some(k) = (0..got.len() / ts).find(|&k| got[k * ts..(k + 1) * ts] != want[k * ts..(k + 1) * ts]) {
            panic!(
                "{ty} block {k}: ours {:02x?} reference {:02x?} input {:?}",
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

/// ggml's test-quantize-fns: 4096 values `0.1 + 2 cos(i)`, quantized and dequantized;
/// `sqrt(Σ diff²) / n` must stay below `MAX_QUANTIZATION_TOTAL_ERROR` (0.002) for every
/// type we quantize. Computed as ggml does: data in f32 from a double sum, error in f64.
#[test]
fn round_trip_error_is_within_ggml_s_own_threshold() {
    let n = 32 * 128;
    let x: Vec<f32> = (0..n).map(|i| (0.1 + f64::from(2.0 * (i as f32).cos())) as f32).collect();
    for ty in [GgmlType::F32].into_iter().chain(TYPES).chain(K_TYPES) {
        let mut q = Vec::new();
        quantize(ty, &x, &mut q).unwrap();
        assert_eq!(q.len(), n / ty.block_size() * ty.type_size(), "{ty}");
        let y = dequantize(ty, &q).unwrap();
        let sum: f64 = x.iter().zip(&y).map(|(a, b)| f64::from(a - b).powi(2)).sum();
        let err = sum.sqrt() as f32 / n as f32;
        assert!(err < 0.002, "{ty}: total quantization error {err} ≥ ggml's 0.002");
    }
}

/// The k-quants keep their block's shape: zero super-blocks stay zero, a constant or
/// one-hot sub-block comes back close, and the round trip is within a step of the
/// sub-block's own range.
#[test]
fn k_quant_round_trips_stay_within_a_sub_block_step() {
    let x = f32s(&read("Q4_K.in"));
    for ty in K_TYPES {
        let mut q = Vec::new();
        quantize(ty, &x, &mut q).unwrap();
        let y = dequantize(ty, &q).unwrap();
        let levels = match ty {
            GgmlType::Q4_K => 15.0,
            GgmlType::Q5_K => 31.0,
            _ => 32.0,
        };
        let sub = if ty == GgmlType::Q6_K { 16 } else { 32 };
        for (b, (xs, ys)) in x.chunks(256).zip(y.chunks(256)).enumerate() {
            let amax = xs.iter().fold(0f32, |m, v| m.max(v.abs()));
            if !(1e-4..=6e4 * 63.0 / 2.0).contains(&amax) {
                continue; // the f16 super-scales underflow or overflow: covered bit for bit above
            }
            if xs.iter().all(|&v| v == 0.0) {
                assert!(ys.iter().all(|&v| v == 0.0), "{ty} block {b}");
            }
            for (s, (xs, ys)) in xs.chunks(sub).zip(ys.chunks(sub)).enumerate() {
                let (lo, hi) = xs.iter().fold((0f32, 0f32), |(l, h), &v| (l.min(v), h.max(v)));
                // A sub-block's step, its 6-bit scale's rounding against the super-block's
                // largest, and the f16 rounding of that.
                let tol = (hi - lo) / levels + amax / 63.0 * 1.01 + amax * 2e-3;
                for (a, b2) in xs.iter().zip(ys) {
                    assert!((a - b2).abs() <= tol, "{ty} block {b} sub {s}: {a} -> {b2} (tol {tol})");
                }
            }
        }
    }
}

#[test]
fn types_without_a_quantizer_and_bad_input_are_refused_by_name() {
    let mut out = Vec::new();
    for ty in [GgmlType::Q3_K, GgmlType::IQ2_XS, GgmlType::Q8_1] {
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
