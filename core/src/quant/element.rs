//! Single elements out of a quantized tensor, for samplers that read a few values from
//! each of many blocks. Every type gguf-py can dequantize has a decoder for one element;
//! a type without one (none today) would dequantize the whole block, kept for neighbours
//! that land in the same block. Tests check every element against gguf-py's vectors and
//! the block kernels, which are the specification.

use super::float::{bf16_to_f32, e8m0_to_f32_half, f16_le, f16_to_f32, ue4m3_to_f32_half};
use super::iq::at as iq;
use super::legacy::{KVALUES_IQ4NL, KVALUES_MXFP4};
use super::{dequantize_block, is_plain, plain, MAX_BLOCK_SIZE};
use crate::error::{Error, Result};
use crate::ggml_type::GgmlType;
use alloc::vec::Vec;

/// Reads single elements of one tensor's data.
pub struct ElementReader<'d> {
    ty: GgmlType,
    data: &'d [u8],
    n_elements: u64,
    cached_block: u64,
    cache: [f32; MAX_BLOCK_SIZE],
}

impl<'d> ElementReader<'d> {
    /// A reader over `data`, the bytes of a tensor of `n_elements` elements of type `ty`.
    ///
    /// # Errors
    /// [`Error::NotDequantizable`] for types we cannot read; [`Error::SizeMismatch`] when
    /// `data` is not the tensor's size.
    pub fn new(ty: GgmlType, data: &'d [u8], n_elements: u64) -> Result<Self> {
        if !ty.can_dequantize() {
            return Err(Error::NotDequantizable { ty: ty.name() });
        }
        let bs = ty.block_size() as u64;
        let expected = n_elements / bs * ty.type_size() as u64;
        if n_elements % bs != 0 || data.len() as u64 != expected {
            return Err(Error::SizeMismatch { what: "tensor data", expected, got: data.len() as u64 });
        }
        Ok(ElementReader { ty, data, n_elements, cached_block: u64::MAX, cache: [0.0; MAX_BLOCK_SIZE] })
    }

    /// Element `i` (ggml order), as gguf-py's `dequantize` would give it.
    ///
    /// # Errors
    /// [`Error::SizeMismatch`] if `i` is out of range.
    pub fn get(&mut self, i: u64) -> Result<f32> {
        if i >= self.n_elements {
            return Err(Error::SizeMismatch { what: "element index", expected: self.n_elements, got: i });
        }
        let (ts, bs) = (self.ty.type_size(), self.ty.block_size());
        // i < n_elements <= data.len() / ts * bs, so these fit in usize.
        let block = (i / bs as u64) as usize;
        let j = (i % bs as u64) as usize;
        let b = &self.data[block * ts..(block + 1) * ts];
        if is_plain(self.ty) {
            return Ok(plain(self.ty, b));
        }
        if let Some(v) = fast(self.ty, b, j) {
            return Ok(v);
        }
        if self.cached_block != block as u64 {
            dequantize_block(self.ty, b, &mut self.cache)?;
            self.cached_block = block as u64;
        }
        Ok(self.cache[j])
    }

    /// The elements at `indices`, in that order: the same values as [`ElementReader::get`]
    /// on each, with the type dispatched once rather than per element.
    ///
    /// # Errors
    /// [`Error::SizeMismatch`] if an index is out of range.
    pub fn gather(&mut self, indices: &[u64]) -> Result<Vec<f32>> {
        let mut out = Vec::with_capacity(indices.len());
        self.gather_into(indices, &mut out)?;
        Ok(out)
    }

    /// [`ElementReader::gather`], appending to `out`: a sampler can gather its indices a
    /// chunk at a time, so they never need an array of their own.
    ///
    /// # Errors
    /// [`Error::SizeMismatch`] if an index is out of range (`out` is then unchanged).
    pub fn gather_into(&mut self, indices: &[u64], out: &mut Vec<f32>) -> Result<()> {
        if let Some(&i) = indices.iter().find(|&&i| i >= self.n_elements) {
            return Err(Error::SizeMismatch { what: "element index", expected: self.n_elements, got: i });
        }
        let data = self.data;
        // Every index is below n_elements, so every block lies inside `data`. Block size and
        // type size are constants per arm, so the divisions compile to shifts.
        macro_rules! each {
            ($f:expr, $ts:literal) => {
                out.extend(indices.iter().enumerate().map(|(k, &i)| {
                    if let Some(&ahead) = indices.get(k + PREFETCH_AHEAD) {
                        prefetch(data, ahead as usize * $ts);
                    }
                    let at = i as usize * $ts;
                    $f(&data[at..at + $ts])
                }))
            };
            ($f:expr, $ts:literal, $bs:literal) => {
                out.extend(indices.iter().enumerate().map(|(k, &i)| {
                    if let Some(&ahead) = indices.get(k + PREFETCH_AHEAD) {
                        prefetch(data, (ahead / $bs) as usize * $ts);
                    }
                    let blk = (i / $bs) as usize * $ts;
                    $f(&data[blk..blk + $ts], (i % $bs) as usize)
                }))
            };
        }
        let ty = self.ty;
        match ty {
            GgmlType::F32 => each!(|b: &[u8]| f32::from_le_bytes([b[0], b[1], b[2], b[3]]), 4),
            GgmlType::F16 => each!(|b: &[u8]| f16_to_f32(u16::from_le_bytes([b[0], b[1]])), 2),
            GgmlType::BF16 => each!(|b: &[u8]| bf16_to_f32(u16::from_le_bytes([b[0], b[1]])), 2),
            GgmlType::Q4_0 => each!(q4_0, 18, 32),
            GgmlType::Q4_1 => each!(q4_1, 20, 32),
            GgmlType::Q5_0 => each!(q5_0, 22, 32),
            GgmlType::Q5_1 => each!(q5_1, 24, 32),
            GgmlType::Q8_0 => each!(q8_0, 34, 32),
            GgmlType::IQ4_NL => each!(iq4_nl, 18, 32),
            GgmlType::MXFP4 => each!(mxfp4, 17, 32),
            GgmlType::Q2_K => each!(q2_k, 84, 256),
            GgmlType::Q3_K => each!(q3_k, 110, 256),
            GgmlType::IQ2_XXS => each!(iq::iq2_xxs, 66, 256),
            GgmlType::IQ2_XS => each!(iq::iq2_xs, 74, 256),
            GgmlType::IQ2_S => each!(iq::iq2_s, 82, 256),
            GgmlType::IQ3_XXS => each!(iq::iq3_xxs, 98, 256),
            GgmlType::IQ3_S => each!(iq::iq3_s, 110, 256),
            GgmlType::IQ1_S => each!(iq::iq1_s, 50, 256),
            GgmlType::IQ1_M => each!(iq::iq1_m, 56, 256),
            GgmlType::IQ4_XS => each!(iq::iq4_xs, 136, 256),
            GgmlType::TQ1_0 => each!(tq1_0, 54, 256),
            GgmlType::TQ2_0 => each!(tq2_0, 66, 256),
            GgmlType::NVFP4 => each!(nvfp4, 36, 64),
            GgmlType::Q4_K => each!(qk45::<false>, 144, 256),
            GgmlType::Q5_K => each!(qk45::<true>, 176, 256),
            GgmlType::Q6_K => each!(q6_k, 210, 256),
            _ => {
                for &i in indices {
                    let v = self.get(i)?;
                    out.push(v);
                }
            }
        }
        Ok(())
    }
}

/// How many samples ahead [`ElementReader::gather`] asks for a block: enough to keep
/// several cache misses in flight, as the samples land on scattered blocks.
const PREFETCH_AHEAD: usize = 16;

/// Asks the CPU to start loading `data[at]` into cache. A hint only: no effect on results.
#[inline(always)]
#[allow(unsafe_code)]
fn prefetch(data: &[u8], at: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(p) = data.get(at) {
        // SAFETY: prefetch never faults and has no architectural effect; the pointer comes
        // from a reference into `data` (bounds-checked by `get`). SSE is baseline on x86_64.
        unsafe {
            core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>((p as *const u8).cast::<i8>())
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (data, at);
}

#[inline(always)]
fn d16(b: &[u8], i: usize) -> f32 {
    f16_le([b[i], b[i + 1]])
}

/// The nibble of element `j` in a 32-element block whose 16 quant bytes start at `at`.
#[inline(always)]
fn nib(b: &[u8], at: usize, j: usize) -> u8 {
    (b[at + j % 16] >> (4 * (j / 16))) & 0xF
}

#[inline(always)]
fn bit5(qh: u32, j: usize) -> u8 {
    (((qh >> j) & 1) as u8) << 4
}

#[inline(always)]
fn q4_0(b: &[u8], j: usize) -> f32 {
    d16(b, 0) * f32::from(nib(b, 2, j) as i8 - 8)
}
#[inline(always)]
fn q4_1(b: &[u8], j: usize) -> f32 {
    d16(b, 0) * f32::from(nib(b, 4, j)) + d16(b, 2)
}
#[inline(always)]
fn q5_0(b: &[u8], j: usize) -> f32 {
    let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    d16(b, 0) * f32::from((nib(b, 6, j) | bit5(qh, j)) as i8 - 16)
}
#[inline(always)]
fn q5_1(b: &[u8], j: usize) -> f32 {
    let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    d16(b, 0) * f32::from(nib(b, 8, j) | bit5(qh, j)) + d16(b, 2)
}
#[inline(always)]
fn q8_0(b: &[u8], j: usize) -> f32 {
    f32::from(b[2 + j] as i8) * d16(b, 0)
}
#[inline(always)]
fn iq4_nl(b: &[u8], j: usize) -> f32 {
    d16(b, 0) * f32::from(KVALUES_IQ4NL[usize::from(nib(b, 2, j))])
}
#[inline(always)]
fn mxfp4(b: &[u8], j: usize) -> f32 {
    e8m0_to_f32_half(b[0]) * f32::from(KVALUES_MXFP4[usize::from(nib(b, 1, j))])
}
/// Q2_K: `d * (sc & 0xF) * q - dmin * (sc >> 4)`, one scale byte per 16 elements.
#[inline(always)]
fn q2_k(b: &[u8], j: usize) -> f32 {
    let (h, s, l) = (j / 128, (j / 32) % 4, j % 32);
    let q = (b[16 + h * 32 + l] >> (2 * s)) & 3;
    let sc = b[j / 16];
    let dl = d16(b, 80) * f32::from(sc & 0xF);
    let ml = d16(b, 82) * f32::from(sc >> 4);
    dl * f32::from(q) - ml
}
/// Q3_K: `d * (scale - 32) * q`, 6-bit scales per 16, the third bit of q in hmask.
#[inline(always)]
fn q3_k(b: &[u8], j: usize) -> f32 {
    let sub = j / 16;
    let lo = (b[96 + sub % 8] >> (4 * (sub / 8))) & 0x0F;
    let hi = (b[104 + sub % 4] >> (2 * (sub / 4))) & 0x03;
    let dl = d16(b, 108) * f32::from(((lo | (hi << 4)) as i8).wrapping_sub(32));
    let (h, s, l) = (j / 128, (j / 32) % 4, j % 32);
    let ql = ((b[32 + h * 32 + l] >> (2 * s)) & 3) as i8;
    // The high bit subtracts 4 when it is *clear*.
    let qh = (((b[l] >> (j / 32)) & 1) ^ 1) as i8;
    dl * f32::from(ql - (qh << 2))
}
/// TQ1_0: base-3 digits, five per byte of qs[0..48], four per byte of qh[48..52].
#[inline(always)]
fn tq1_0(b: &[u8], j: usize) -> f32 {
    use super::k_quants::TQ1_POW3 as POW3;
    let (byte, m) = match j {
        0..160 => (b[j % 32], POW3[j / 32]),
        160..240 => (b[32 + (j - 160) % 16], POW3[(j - 160) / 16]),
        _ => (b[48 + (j - 240) % 4], POW3[(j - 240) / 4]),
    };
    let t = byte.wrapping_mul(m);
    d16(b, 52) * f32::from(((u16::from(t) * 3) >> 8) as i8 - 1)
}
/// TQ2_0: 2-bit ternary, `d * (q - 1)`.
#[inline(always)]
fn tq2_0(b: &[u8], j: usize) -> f32 {
    let (h, s, l) = (j / 128, (j / 32) % 4, j % 32);
    let q = ((b[h * 32 + l] >> (2 * s)) & 3) as i8 - 1;
    d16(b, 64) * f32::from(q)
}
/// NVFP4: four halved ue4m3 scales, each over 16 e2m1 values (8 bytes).
#[inline(always)]
fn nvfp4(b: &[u8], j: usize) -> f32 {
    let (s, r) = (j / 16, j % 16);
    let q = b[4 + s * 8 + r % 8];
    let nib = if r < 8 { q & 0xF } else { q >> 4 };
    ue4m3_to_f32_half(b[s]) * f32::from(KVALUES_MXFP4[usize::from(nib)])
}
/// Q4_K (`Q5 = false`) and Q5_K (`Q5 = true`).
#[inline(always)]
fn qk45<const Q5: bool>(b: &[u8], j: usize) -> f32 {
    let sub = j / 32;
    let s = &b[4..16];
    let (sc, mn) = if sub < 4 {
        (s[sub] & 0x3F, s[4 + sub] & 0x3F)
    } else {
        let k = sub - 4;
        ((s[8 + k] & 0x0F) | ((s[k] >> 2) & 0x30), (s[8 + k] >> 4) | ((s[4 + k] >> 2) & 0x30))
    };
    let dj = d16(b, 0) * f32::from(sc);
    let mj = d16(b, 2) * f32::from(mn);
    let (c, l) = (sub / 2, j % 32);
    let q = if Q5 {
        ((b[48 + c * 32 + l] >> (4 * (sub % 2))) & 0xF) | (((b[16 + l] >> sub) & 1) << 4)
    } else {
        (b[16 + c * 32 + l] >> (4 * (sub % 2))) & 0xF
    };
    dj * f32::from(q) - mj
}
#[inline(always)]
fn q6_k(b: &[u8], j: usize) -> f32 {
    let (h, r) = (j / 128, j % 128);
    let lo = (b[h * 64 + r % 64] >> (4 * (r / 64))) & 0xF;
    let hi = (b[128 + h * 32 + r % 32] >> (2 * (r / 32))) & 3;
    let q = ((lo | (hi << 4)) as i8) - 32;
    let dl = f16_to_f32(u16::from_le_bytes([b[208], b[209]])) * f32::from(b[192 + j / 16] as i8);
    dl * f32::from(q)
}

/// Element `j` of block `b`, for the types with a direct decoding.
#[inline]
fn fast(ty: GgmlType, b: &[u8], j: usize) -> Option<f32> {
    Some(match ty {
        GgmlType::Q4_0 => q4_0(b, j),
        GgmlType::Q4_1 => q4_1(b, j),
        GgmlType::Q5_0 => q5_0(b, j),
        GgmlType::Q5_1 => q5_1(b, j),
        GgmlType::Q8_0 => q8_0(b, j),
        GgmlType::IQ4_NL => iq4_nl(b, j),
        GgmlType::MXFP4 => mxfp4(b, j),
        GgmlType::Q2_K => q2_k(b, j),
        GgmlType::Q3_K => q3_k(b, j),
        GgmlType::IQ2_XXS => iq::iq2_xxs(b, j),
        GgmlType::IQ2_XS => iq::iq2_xs(b, j),
        GgmlType::IQ2_S => iq::iq2_s(b, j),
        GgmlType::IQ3_XXS => iq::iq3_xxs(b, j),
        GgmlType::IQ3_S => iq::iq3_s(b, j),
        GgmlType::IQ1_S => iq::iq1_s(b, j),
        GgmlType::IQ1_M => iq::iq1_m(b, j),
        GgmlType::IQ4_XS => iq::iq4_xs(b, j),
        GgmlType::TQ1_0 => tq1_0(b, j),
        GgmlType::TQ2_0 => tq2_0(b, j),
        GgmlType::NVFP4 => nvfp4(b, j),
        GgmlType::Q4_K => qk45::<false>(b, j),
        GgmlType::Q5_K => qk45::<true>(b, j),
        GgmlType::Q6_K => q6_k(b, j),
        _ => return None,
    })
}
