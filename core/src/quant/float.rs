//! Scalar conversions: f16, bf16, e8m0 and ue4m3 to f32, and f32 to f16 and bf16.

/// IEEE half to single, exact for every bit pattern, NaN payloads kept (signalling NaNs
/// stay signalling), as numpy's `npy_halfbits_to_floatbits` does. (The `half` crate and
/// F16C quiet NaNs, which would break bit-identity with gguf-py on F16 tensors.)
#[inline]
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h & 0x8000) << 16;
    let exp = h & 0x7C00;
    let man = u32::from(h & 0x03FF);
    let bits = match exp {
        0 => {
            if man == 0 {
                sign
            } else {
                // Subnormal: man × 2^-24, exactly representable as a normal f32.
                return f32::from_bits(sign | (man as f32 * (1.0 / 16_777_216.0)).to_bits());
            }
        }
        0x7C00 => sign | 0x7F80_0000 | (man << 13),
        _ => sign | ((u32::from(h & 0x7FFF) + 0x1_C000) << 13),
    };
    f32::from_bits(bits)
}

/// Reads a little-endian f16 from two bytes.
#[inline]
pub fn f16_le(b: [u8; 2]) -> f32 {
    f16_to_f32(u16::from_le_bytes(b))
}

/// bfloat16 to f32: the top half of an f32 (gguf-py's `BF16.dequantize_blocks`).
#[inline]
pub fn bf16_to_f32(h: u16) -> f32 {
    f32::from_bits(u32::from(h) << 16)
}

/// e8m0 scale to f32, halved (`ggml_e8m0_to_fp32_half`, gguf-py's `MXFP4.e8m0_to_fp32_half`).
#[inline]
pub fn e8m0_to_f32_half(x: u8) -> f32 {
    let bits = if x < 2 { 0x0020_0000u32 << x } else { u32::from(x - 1) << 23 };
    f32::from_bits(bits)
}

/// Unsigned e4m3 (bias 7) to f32, halved, as gguf-py's `NVFP4.ue4m3_to_fp32` computes it:
/// bit 7 is ignored, 0 and 0x7F read as 0.
#[inline]
pub fn ue4m3_to_f32_half(x: u8) -> f32 {
    if x == 0 || x == 0x7F {
        return 0.0;
    }
    let exp = i32::from((x >> 3) & 0xF);
    let man = f32::from(x & 0x7);
    let raw = if exp == 0 {
        man * (1.0 / 512.0)
    } else {
        // Every step is exact in f32: (1 + man/8) has 4 significant bits, 2^(exp-7) is a power of two.
        (1.0 + man / 8.0) * f32::from_bits(((exp - 7 + 127) as u32) << 23)
    };
    raw * 0.5
}

/// f32 to IEEE half, round to nearest even, overflow to infinity, NaN kept as NaN with
/// its top payload bits: numpy's `npy_floatbits_to_halfbits` (`astype(np.float16)`).
pub fn f32_to_f16(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xFF) as i32;
    let man = b & 0x7F_FFFF;
    if exp == 0xFF {
        if man == 0 {
            return sign | 0x7C00;
        }
        let r = 0x7C00 | (man >> 13) as u16;
        return sign | if r == 0x7C00 { r + 1 } else { r };
    }
    let e = exp - 127 + 15;
    if e >= 0x1F {
        return sign | 0x7C00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        // Subnormal half: the value is m × 2^-24 with m = mantissa (with its implicit 1)
        // shifted right by 14 - e, rounded to nearest even.
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let rem = m & ((1u32 << shift) - 1);
        let mut r = m >> shift;
        if rem > half || (rem == half && r & 1 == 1) {
            r += 1;
        }
        return sign | r as u16;
    }
    let mut r = ((e as u32) << 10) | (man >> 13);
    let rem = man & 0x1FFF;
    if rem > 0x1000 || (rem == 0x1000 && r & 1 == 1) {
        r += 1; // a carry into the exponent is right, up to infinity
    }
    sign | r as u16
}

/// f32 to bfloat16 as gguf-py's `BF16.quantize_blocks` (ggml's `ggml_compute_fp32_to_bf16`):
/// NaNs made quiet, then round to nearest even.
pub fn f32_to_bf16(x: f32) -> u16 {
    let mut n = x.to_bits();
    if n & 0x7FFF_FFFF > 0x7F80_0000 {
        n = (n & 0xFFFF_0000) | (64 << 16);
    }
    ((u64::from(n) + u64::from(0x7FFF + ((n >> 16) & 1))) >> 16) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_specials() {
        assert_eq!(f16_to_f32(0x3C00), 1.0);
        assert_eq!(f16_to_f32(0xC000), -2.0);
        assert_eq!(f16_to_f32(0x7BFF), 65504.0);
        assert_eq!(f16_to_f32(0x0001), 5.960_464_5e-8);
        assert_eq!(f16_to_f32(0x8000).to_bits(), 0x8000_0000);
        assert_eq!(f16_to_f32(0x7C00), f32::INFINITY);
        // numpy keeps signalling NaN payloads.
        assert_eq!(f16_to_f32(0x7C01).to_bits(), 0x7F80_2000);
        assert_eq!(f16_to_f32(0xFC01).to_bits(), 0xFF80_2000);
    }

    #[test]
    fn small_float_formats() {
        assert_eq!(e8m0_to_f32_half(127), 0.5);
        assert_eq!(e8m0_to_f32_half(0).to_bits(), 0x0020_0000);
        assert_eq!(ue4m3_to_f32_half(0x38), 0.5); // exp 7, man 0 -> 1.0, halved
        assert_eq!(ue4m3_to_f32_half(0x7F), 0.0);
        assert_eq!(ue4m3_to_f32_half(0x01), 1.0 / 1024.0);
    }
}
