//! The 4-bit codebook formats: IQ4_NL (ggml's non-linear 4-bit values, 32 per f16
//! scale), MXFP4 (OCP e2m1 values, e8m0 scale per 32) and NVFP4 (e2m1 values, four ue4m3
//! scales per 64). The block kernels port gguf-py 0.19.0's `dequantize_blocks` of the same
//! name, keeping its f32 operation order; [`at`] decodes one element alike.

use super::float::{e8m0_to_f32_half, f16_le, ue4m3_to_f32_half};

/// `kvalues_iq4nl` in ggml.
pub(crate) const KVALUES_IQ4NL: [i8; 16] = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];
/// e2m1 values, doubled (`kvalues_mxfp4`).
pub(crate) const KVALUES_MXFP4: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

#[inline]
fn f16_at(b: &[u8], i: usize) -> f32 {
    f16_le([b[i], b[i + 1]])
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

/// Single elements: element `j` of block `b`, as the block kernels give it.
pub mod at {
    use super::super::float::{e8m0_to_f32_half, ue4m3_to_f32_half};
    use super::super::legacy::at::{d16, nib};
    use super::{KVALUES_IQ4NL, KVALUES_MXFP4};

    #[inline(always)]
    pub fn iq4_nl(b: &[u8], j: usize) -> f32 {
        d16(b, 0) * f32::from(KVALUES_IQ4NL[usize::from(nib(b, 2, j))])
    }
    #[inline(always)]
    pub fn mxfp4(b: &[u8], j: usize) -> f32 {
        e8m0_to_f32_half(b[0]) * f32::from(KVALUES_MXFP4[usize::from(nib(b, 1, j))])
    }
    /// NVFP4: four halved ue4m3 scales, each over 16 e2m1 values (8 bytes).
    #[inline(always)]
    pub fn nvfp4(b: &[u8], j: usize) -> f32 {
        let (s, r) = (j / 16, j % 16);
        let q = b[4 + s * 8 + r % 8];
        let nib = if r < 8 { q & 0xF } else { q >> 4 };
        ue4m3_to_f32_half(b[s]) * f32::from(KVALUES_MXFP4[usize::from(nib)])
    }
}
