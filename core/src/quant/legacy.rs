//! The 32-element formats: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4, and NVFP4 (64).
//! Each function ports the `dequantize_blocks` of gguf-py 0.19.0's class of the same name
//! (`dequantize_row_*` in ggml-quants.c), keeping its f32 operation order.

use super::float::{e8m0_to_f32_half, f16_le, ue4m3_to_f32_half};

/// `kvalues_iq4nl` in ggml.
pub(crate) const KVALUES_IQ4NL: [i8; 16] = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];
/// e2m1 values, doubled (`kvalues_mxfp4`).
pub(crate) const KVALUES_MXFP4: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

#[inline]
fn f16_at(b: &[u8], i: usize) -> f32 {
    f16_le([b[i], b[i + 1]])
}

/// Q4_0: `d * (q - 8)`.
pub fn q4_0(b: &[u8; 18], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    for j in 0..16 {
        let q = b[2 + j];
        y[j] = d * f32::from((q & 0xF) as i8 - 8);
        y[j + 16] = d * f32::from((q >> 4) as i8 - 8);
    }
}

/// Q4_1: `d * q + m`.
pub fn q4_1(b: &[u8; 20], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    let m = f16_at(b, 2);
    for j in 0..16 {
        let q = b[4 + j];
        y[j] = d * f32::from(q & 0xF) + m;
        y[j + 16] = d * f32::from(q >> 4) + m;
    }
}

/// Q5_0: `d * (q - 16)`, the fifth bit from a u32 mask.
pub fn q5_0(b: &[u8; 22], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    for j in 0..16 {
        let q = b[6 + j];
        let h0 = ((qh >> j) & 1) as u8;
        let h1 = ((qh >> (j + 16)) & 1) as u8;
        y[j] = d * f32::from(((q & 0xF) | (h0 << 4)) as i8 - 16);
        y[j + 16] = d * f32::from(((q >> 4) | (h1 << 4)) as i8 - 16);
    }
}

/// Q5_1: `d * q + m`.
pub fn q5_1(b: &[u8; 24], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    let m = f16_at(b, 2);
    let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    for j in 0..16 {
        let q = b[8 + j];
        let h0 = ((qh >> j) & 1) as u8;
        let h1 = ((qh >> (j + 16)) & 1) as u8;
        y[j] = d * f32::from((q & 0xF) | (h0 << 4)) + m;
        y[j + 16] = d * f32::from((q >> 4) | (h1 << 4)) + m;
    }
}

/// Q8_0: `q * d`.
pub fn q8_0(b: &[u8; 34], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    for j in 0..32 {
        y[j] = f32::from(b[2 + j] as i8) * d;
    }
}

/// IQ4_NL: `d * kvalues[q]`.
pub fn iq4_nl(b: &[u8; 18], y: &mut [f32; 32]) {
    let d = f16_at(b, 0);
    for j in 0..16 {
        let q = b[2 + j];
        y[j] = d * f32::from(KVALUES_IQ4NL[usize::from(q & 0xF)]);
        y[j + 16] = d * f32::from(KVALUES_IQ4NL[usize::from(q >> 4)]);
    }
}

/// MXFP4: e8m0 scale (halved) times doubled e2m1 values.
pub fn mxfp4(b: &[u8; 17], y: &mut [f32; 32]) {
    let d = e8m0_to_f32_half(b[0]);
    for j in 0..16 {
        let q = b[1 + j];
        y[j] = d * f32::from(KVALUES_MXFP4[usize::from(q & 0xF)]);
        y[j + 16] = d * f32::from(KVALUES_MXFP4[usize::from(q >> 4)]);
    }
}

/// NVFP4: four ue4m3 scales (halved), each over 16 doubled e2m1 values.
pub fn nvfp4(b: &[u8; 36], y: &mut [f32; 64]) {
    for s in 0..4 {
        let d = ue4m3_to_f32_half(b[s]);
        for j in 0..8 {
            let q = b[4 + s * 8 + j];
            y[s * 16 + j] = d * f32::from(KVALUES_MXFP4[usize::from(q & 0xF)]);
            y[s * 16 + 8 + j] = d * f32::from(KVALUES_MXFP4[usize::from(q >> 4)]);
        }
    }
}
