//! Every dequantizable type against vectors that gguf-py 0.19.0 produced
//! (scripts/gen-dequant-vectors.py), or ggml's own C dequantizers for the types gguf-py
//! does not know (Q1_0, Q2_0: scripts/gen-ggml-dequant-vectors.sh): whole tensors, single
//! blocks and single elements must all be bit-identical to the reference.

use organ_core::quant::{dequantize, dequantize_block, ElementReader, MAX_BLOCK_SIZE};
use organ_core::{Error, GgmlType};
use std::path::PathBuf;

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/dequant")
}

fn load(ty: GgmlType) -> (Vec<u8>, Vec<u32>) {
    let d = data_dir();
    let input = std::fs::read(d.join(format!("{}.in", ty.name()))).unwrap_or_else(|e| panic!("{ty}: {e}"));
    let out = std::fs::read(d.join(format!("{}.out", ty.name()))).unwrap();
    let bits = out.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    (input, bits)
}

fn first_mismatch(got: &[f32], want: &[u32]) -> Option<(usize, u32, u32)> {
    got.iter().zip(want).enumerate().find(|(_, (g, w))| g.to_bits() != **w).map(|(i, (g, w))| (i, g.to_bits(), *w))
}

#[test]
fn every_dequantizable_type_has_vectors_and_matches_bit_for_bit() {
    let mut checked = 0;
    for &ty in GgmlType::ALL.iter().filter(|t| t.can_dequantize()) {
        let (input, want) = load(ty);
        let got = dequantize(ty, &input).unwrap();
        assert_eq!(got.len(), want.len(), "{ty}: length");
        assert_eq!(first_mismatch(&got, &want), None, "{ty}: (index, ours, gguf-py)");
        checked += 1;
    }
    assert_eq!(checked, 33, "the 31 types gguf-py dequantizes, and Q1_0, Q2_0");
}

#[test]
fn single_blocks_match_the_reference() {
    for &ty in GgmlType::ALL.iter().filter(|t| t.can_dequantize()) {
        let (input, want) = load(ty);
        let (ts, bs) = (ty.type_size(), ty.block_size());
        let mut buf = [0f32; MAX_BLOCK_SIZE];
        for (k, block) in input.chunks_exact(ts).enumerate() {
            dequantize_block(ty, block, &mut buf).unwrap();
            assert_eq!(first_mismatch(&buf[..bs], &want[k * bs..(k + 1) * bs]), None, "{ty} block {k}");
        }
    }
}

#[test]
fn single_elements_match_the_reference_in_any_order() {
    for &ty in GgmlType::ALL.iter().filter(|t| t.can_dequantize()) {
        let (input, want) = load(ty);
        let n = want.len() as u64;
        let mut r = ElementReader::new(ty, &input, n).unwrap();
        // Backwards with a stride, so the block cache is both hit and missed.
        let mut i = n - 1;
        for _ in 0..n {
            let v = r.get(i).unwrap();
            assert_eq!(v.to_bits(), want[i as usize], "{ty} element {i}");
            i = (i + n - 7) % n;
        }
        assert!(r.get(n).is_err(), "{ty}: index past the end must be refused");
    }
}

#[test]
fn types_without_a_reference_are_refused_by_name() {
    for ty in [GgmlType::Q8_1, GgmlType::Q8_K] {
        let bytes = vec![0u8; ty.type_size()];
        match dequantize(ty, &bytes) {
            Err(Error::NotDequantizable { ty: name }) => assert_eq!(name, ty.name()),
            other => panic!("{ty}: {other:?}"),
        }
    }
}

#[test]
fn partial_blocks_are_refused() {
    let err = dequantize(GgmlType::Q4_K, &[0u8; 143]).unwrap_err();
    assert!(matches!(err, Error::SizeMismatch { .. }), "{err}");
}

#[test]
fn gather_matches_get_for_every_type() {
    for &ty in GgmlType::ALL.iter().filter(|t| t.can_dequantize()) {
        let (input, want) = load(ty);
        let n = want.len() as u64;
        let idx: Vec<u64> = (0..3 * n).map(|k| (k * 2654435761) % n).collect();
        let got = ElementReader::new(ty, &input, n).unwrap().gather(&idx).unwrap();
        for (&i, v) in idx.iter().zip(&got) {
            assert_eq!(v.to_bits(), want[i as usize], "{ty} element {i}");
        }
        assert!(ElementReader::new(ty, &input, n).unwrap().gather(&[0, n]).is_err(), "{ty}");
    }
}

/// Regression (fuzz `dequant`, 2026-11-21): a Q5_1 block whose f16 scale and min are NaN
/// gave NaNs with different payloads through `gather` than through `dequantize`. Rust
/// leaves NaN payloads unspecified; what must hold is that every path agrees bit for bit
/// on non-NaN values and that a NaN stays a NaN. Checked here for every type.
#[test]
fn nan_scales_give_nan_on_every_path() {
    for &ty in GgmlType::ALL.iter().filter(|t| t.can_dequantize()) {
        let bytes = vec![0xFFu8; ty.type_size() * 3];
        let all = dequantize(ty, &bytes).unwrap();
        let n = all.len() as u64;
        let idx: Vec<u64> = (0..n).rev().collect();
        let gathered = ElementReader::new(ty, &bytes, n).unwrap().gather(&idx).unwrap();
        for (&i, g) in idx.iter().zip(&gathered) {
            let a = all[i as usize];
            assert!(a.to_bits() == g.to_bits() || (a.is_nan() && g.is_nan()), "{ty} element {i}: {a} vs {g}");
        }
    }
}
