//! The i-quants (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ4_XS). Each
//! function ports gguf-py 0.19.0's `dequantize_blocks` of the same name (ggml's
//! `dequantize_row_*`), keeping its f32 operation order: `db * grid * sign`.

use super::codebook4::KVALUES_IQ4NL;
use super::float::{f16_le, f16_to_f32};
use super::iq_grids::{IQ1S_GRID, IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID};

/// `ksigns_iq2xs`: the low 7 bits, and bit 7 set so that the byte has even parity.
const KSIGNS: [u8; 128] = {
    let mut t = [0u8; 128];
    let mut i = 0;
    while i < 128 {
        t[i] = i as u8 | (((i as u8).count_ones() as u8 & 1) << 7);
        i += 1;
    }
    t
};

const IQ1S_DELTA: f32 = 0.125;

#[inline]
fn f16_at(b: &[u8], i: usize) -> f32 {
    f16_le([b[i], b[i + 1]])
}

#[inline]
fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

#[inline]
fn u16_at(b: &[u8], i: usize) -> u16 {
    u16::from_le_bytes([b[i], b[i + 1]])
}

#[inline]
fn sign(bits: u8, j: usize) -> f32 {
    if (bits >> j) & 1 == 0 {
        1.0
    } else {
        -1.0
    }
}

/// Byte `j` of a grid row, as the value it stands for.
#[inline]
fn grid8(row: u64, j: usize) -> f32 {
    f32::from((row >> (8 * j)) as u8)
}

/// IQ2_XXS: d, then 8 × (4 grid indices in a u32, 4 × 7 sign bits + 4-bit scale in a u32).
pub fn iq2_xxs(b: &[u8; 66], y: &mut [f32; 256]) {
    let d = f16_at(b, 0);
    for ib in 0..8 {
        let aux0 = u32_at(b, 2 + 8 * ib);
        let aux1 = u32_at(b, 6 + 8 * ib);
        let db = d * (0.5 + (aux1 >> 28) as f32) * 0.25;
        for l in 0..4 {
            let row = IQ2XXS_GRID[((aux0 >> (8 * l)) & 0xFF) as usize];
            let signs = KSIGNS[((aux1 >> (7 * l)) & 0x7F) as usize];
            for j in 0..8 {
                y[ib * 32 + l * 8 + j] = db * grid8(row, j) * sign(signs, j);
            }
        }
    }
}

/// IQ2_XS: d, 32 × u16 (9-bit grid index, 7-bit sign index), 8 bytes of 4-bit scales.
pub fn iq2_xs(b: &[u8; 74], y: &mut [f32; 256]) {
    let d = f16_at(b, 0);
    for k in 0..32 {
        let q = u16_at(b, 2 + 2 * k);
        let sc = (b[66 + k / 4] >> (4 * ((k / 2) % 2))) & 0x0F;
        let db = d * (0.5 + f32::from(sc)) * 0.25;
        let row = IQ2XS_GRID[usize::from(q & 511)];
        let signs = KSIGNS[usize::from(q >> 9)];
        for j in 0..8 {
            y[k * 8 + j] = db * grid8(row, j) * sign(signs, j);
        }
    }
}

/// IQ2_S: d, qs[32], signs[32], qh[8], scales[8].
pub fn iq2_s(b: &[u8; 82], y: &mut [f32; 256]) {
    let d = f16_at(b, 0);
    let (qs, signs, qh, scales) = (&b[2..34], &b[34..66], &b[66..74], &b[74..82]);
    for k in 0..32 {
        let sc = (scales[k / 4] >> (4 * ((k / 2) % 2))) & 0x0F;
        let db = d * (0.5 + f32::from(sc)) * 0.25;
        let hi = u16::from((qh[k / 4] >> (2 * (k % 4))) & 3);
        let row = IQ2S_GRID[usize::from(u16::from(qs[k]) | (hi << 8))];
        for j in 0..8 {
            y[k * 8 + j] = db * grid8(row, j) * sign(signs[k], j);
        }
    }
}

/// IQ3_XXS: d, qs[64] (grid indices, 4 values each), 8 × u32 (4 × 7 sign bits + scale).
pub fn iq3_xxs(b: &[u8; 98], y: &mut [f32; 256]) {
    let d = f16_at(b, 0);
    let qs = &b[2..66];
    for ib in 0..8 {
        let aux = u32_at(b, 66 + 4 * ib);
        let db = d * (0.5 + (aux >> 28) as f32) * 0.5;
        for l in 0..4 {
            let signs = KSIGNS[((aux >> (7 * l)) & 0x7F) as usize];
            for j in 0..8 {
                let row = IQ3XXS_GRID[usize::from(qs[ib * 8 + l * 2 + j / 4])];
                let g = f32::from((row >> (8 * (j % 4))) as u8);
                y[ib * 32 + l * 8 + j] = db * g * sign(signs, j);
            }
        }
    }
}

/// IQ3_S: d, qs[64], qh[8], signs[32], scales[4]; `d * (1 + 2 * scale)`.
pub fn iq3_s(b: &[u8; 110], y: &mut [f32; 256]) {
    let d = f16_at(b, 0);
    let (qs, qh, signs, scales) = (&b[2..66], &b[66..74], &b[74..106], &b[106..110]);
    for (e, out) in y.iter_mut().enumerate() {
        let ib = e / 32;
        let sc = (scales[ib / 2] >> (4 * (ib % 2))) & 0x0F;
        let db = d * f32::from(1 + 2 * sc);
        let k = e / 4;
        let hi = u16::from((qh[k / 8] >> (k % 8)) & 1);
        let row = IQ3S_GRID[usize::from(u16::from(qs[k]) | (hi << 8))];
        let g = f32::from((row >> (8 * (e % 4))) as u8);
        *out = db * g * sign(signs[e / 8], e % 8);
    }
}

/// IQ1_S: d, qs[32], qh 8 × u16 (3 × 3 index bits, 3-bit scale, delta sign).
pub fn iq1_s(b: &[u8; 50], y: &mut [f32; 256]) {
    let d = f16_at(b, 0);
    let qs = &b[2..34];
    for ib in 0..8 {
        let qh = u16_at(b, 34 + 2 * ib);
        let dl = d * f32::from(2 * ((qh >> 12) & 7) + 1);
        let delta = if qh & 0x8000 == 0 { IQ1S_DELTA } else { -IQ1S_DELTA };
        for l in 0..4 {
            let idx = u16::from(qs[ib * 4 + l]) | (((qh >> (3 * l)) & 7) << 8);
            let row = IQ1S_GRID[usize::from(idx)];
            for j in 0..8 {
                let g = f32::from((row >> (8 * j)) as u8 as i8);
                y[ib * 32 + l * 8 + j] = dl * (g + delta);
            }
        }
    }
}

/// IQ1_M: qs[32], qh[16], scales 4 × u16 (3-bit scales; the f16 d in their top nibbles).
pub fn iq1_m(b: &[u8; 56], y: &mut [f32; 256]) {
    let (qs, qh) = (&b[0..32], &b[32..48]);
    let sc = [u16_at(b, 48), u16_at(b, 50), u16_at(b, 52), u16_at(b, 54)];
    let d = f16_to_f32((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) | ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000));
    for k in 0..32 {
        let s = (sc[k / 8] >> (3 * ((k / 2) % 4))) & 7;
        let dl = d * f32::from(2 * s + 1);
        let v = qh[k / 2] >> (4 * (k % 2));
        let idx = u16::from(qs[k]) | (u16::from(v & 7) << 8);
        let delta = if v & 8 == 0 { IQ1S_DELTA } else { -IQ1S_DELTA };
        let row = IQ1S_GRID[usize::from(idx)];
        for j in 0..8 {
            let g = f32::from((row >> (8 * j)) as u8 as i8);
            y[k * 8 + j] = dl * (g + delta);
        }
    }
}

/// IQ4_XS: d, scales_h (u16), scales_l[4], qs[128]; `d * (scale - 32) * kvalues[q]`.
pub fn iq4_xs(b: &[u8; 136], y: &mut [f32; 256]) {
    let d = f16_at(b, 0);
    let sh = u16_at(b, 2);
    let (sl, qs) = (&b[4..8], &b[8..136]);
    for ib in 0..8 {
        let lo = (sl[ib / 2] >> (4 * (ib % 2))) & 0x0F;
        let hi = ((sh >> (2 * ib)) as u8) & 3;
        let ls = ((lo | (hi << 4)) as i8) - 32;
        let dl = d * f32::from(ls);
        for l in 0..16 {
            let q = qs[ib * 16 + l];
            y[ib * 32 + l] = dl * f32::from(KVALUES_IQ4NL[usize::from(q & 0xF)]);
            y[ib * 32 + 16 + l] = dl * f32::from(KVALUES_IQ4NL[usize::from(q >> 4)]);
        }
    }
}

/// Single elements of the i-quants: element `e` (0..256) of block `b`, with the same
/// expressions and f32 operation order as the block kernels above, which stay the
/// specification (tests check every element against gguf-py's vectors). A sampler that
/// reads one element of a block costs one element, not 256.
pub mod at {
    use super::*;

    pub fn iq2_xxs(b: &[u8], e: usize) -> f32 {
        let (ib, l, j) = (e / 32, (e / 8) % 4, e % 8);
        let aux0 = u32_at(b, 2 + 8 * ib);
        let aux1 = u32_at(b, 6 + 8 * ib);
        let db = f16_at(b, 0) * (0.5 + (aux1 >> 28) as f32) * 0.25;
        let row = IQ2XXS_GRID[((aux0 >> (8 * l)) & 0xFF) as usize];
        let signs = KSIGNS[((aux1 >> (7 * l)) & 0x7F) as usize];
        db * grid8(row, j) * sign(signs, j)
    }

    pub fn iq2_xs(b: &[u8], e: usize) -> f32 {
        let (k, j) = (e / 8, e % 8);
        let q = u16_at(b, 2 + 2 * k);
        let sc = (b[66 + k / 4] >> (4 * ((k / 2) % 2))) & 0x0F;
        let db = f16_at(b, 0) * (0.5 + f32::from(sc)) * 0.25;
        let row = IQ2XS_GRID[usize::from(q & 511)];
        let signs = KSIGNS[usize::from(q >> 9)];
        db * grid8(row, j) * sign(signs, j)
    }

    pub fn iq2_s(b: &[u8], e: usize) -> f32 {
        let (k, j) = (e / 8, e % 8);
        let sc = (b[74 + k / 4] >> (4 * ((k / 2) % 2))) & 0x0F;
        let db = f16_at(b, 0) * (0.5 + f32::from(sc)) * 0.25;
        let hi = u16::from((b[66 + k / 4] >> (2 * (k % 4))) & 3);
        let row = IQ2S_GRID[usize::from(u16::from(b[2 + k]) | (hi << 8))];
        db * grid8(row, j) * sign(b[34 + k], j)
    }

    pub fn iq3_xxs(b: &[u8], e: usize) -> f32 {
        let (ib, l, j) = (e / 32, (e / 8) % 4, e % 8);
        let aux = u32_at(b, 66 + 4 * ib);
        let db = f16_at(b, 0) * (0.5 + (aux >> 28) as f32) * 0.5;
        let signs = KSIGNS[((aux >> (7 * l)) & 0x7F) as usize];
        let row = IQ3XXS_GRID[usize::from(b[2 + ib * 8 + l * 2 + j / 4])];
        let g = f32::from((row >> (8 * (j % 4))) as u8);
        db * g * sign(signs, j)
    }

    pub fn iq3_s(b: &[u8], e: usize) -> f32 {
        let ib = e / 32;
        let sc = (b[106 + ib / 2] >> (4 * (ib % 2))) & 0x0F;
        let db = f16_at(b, 0) * f32::from(1 + 2 * sc);
        let k = e / 4;
        let hi = u16::from((b[66 + k / 8] >> (k % 8)) & 1);
        let row = IQ3S_GRID[usize::from(u16::from(b[2 + k]) | (hi << 8))];
        let g = f32::from((row >> (8 * (e % 4))) as u8);
        db * g * sign(b[74 + e / 8], e % 8)
    }

    pub fn iq1_s(b: &[u8], e: usize) -> f32 {
        let (ib, l, j) = (e / 32, (e / 8) % 4, e % 8);
        let qh = u16_at(b, 34 + 2 * ib);
        let dl = f16_at(b, 0) * f32::from(2 * ((qh >> 12) & 7) + 1);
        let delta = if qh & 0x8000 == 0 { IQ1S_DELTA } else { -IQ1S_DELTA };
        let idx = u16::from(b[2 + ib * 4 + l]) | (((qh >> (3 * l)) & 7) << 8);
        let row = IQ1S_GRID[usize::from(idx)];
        let g = f32::from((row >> (8 * j)) as u8 as i8);
        dl * (g + delta)
    }

    pub fn iq1_m(b: &[u8], e: usize) -> f32 {
        let (k, j) = (e / 8, e % 8);
        let sc = [u16_at(b, 48), u16_at(b, 50), u16_at(b, 52), u16_at(b, 54)];
        let d = f16_to_f32((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) | ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000));
        let s = (sc[k / 8] >> (3 * ((k / 2) % 4))) & 7;
        let dl = d * f32::from(2 * s + 1);
        let v = b[32 + k / 2] >> (4 * (k % 2));
        let idx = u16::from(b[k]) | (u16::from(v & 7) << 8);
        let delta = if v & 8 == 0 { IQ1S_DELTA } else { -IQ1S_DELTA };
        let row = IQ1S_GRID[usize::from(idx)];
        let g = f32::from((row >> (8 * j)) as u8 as i8);
        dl * (g + delta)
    }

    pub fn iq4_xs(b: &[u8], e: usize) -> f32 {
        let (ib, l) = (e / 32, e % 32);
        let lo = (b[4 + ib / 2] >> (4 * (ib % 2))) & 0x0F;
        let hi = ((u16_at(b, 2) >> (2 * ib)) as u8) & 3;
        let ls = ((lo | (hi << 4)) as i8) - 32;
        let dl = f16_at(b, 0) * f32::from(ls);
        let q = b[8 + ib * 16 + l % 16];
        let nib = if l < 16 { q & 0xF } else { q >> 4 };
        dl * f32::from(KVALUES_IQ4NL[usize::from(nib)])
    }
}
