//! Scalar conversions: f16, bf16, e8m0 and ue4m3 to f32, and f32 to f16 and bf16.

/// IEEE half to single, exact for every bit pattern: `half`'s conversion for every value
/// but NaNs, whose payload [`f16_nan_to_f32`] keeps, as gguf-py (numpy) does.
#[inline]
pub fn f16_to_f32(h: u16) -> f32 {
    if h & 0x7C00 == 0x7C00 && h & 0x03FF != 0 {
        return f16_nan_to_f32(h);
    }
    half::f16::from_bits(h).to_f32()
}

/// An f16 NaN to f32 with its payload kept: signalling NaNs stay signalling, as numpy's
/// `npy_halfbits_to_floatbits` has it and gguf-py's F16 vectors require. `half` (like
/// F16C) sets the quiet bit, which would change the bits of an F16 tensor holding NaNs.
#[inline(never)]
#[cold]
fn f16_nan_to_f32(h: u16) -> f32 {
    f32::from_bits((u32::from(h & 0x8000) << 16) | 0x7F80_0000 | (u32::from(h & 0x03FF) << 13))
}

/// Reads a little-endian f16 from two bytes.
#[inline]
pub fn f16_le(b: [u8; 2]) -> f32 {
    f16_to_f32(u16::from_le_bytes(b))
}

/// bfloat16 to f32: the top half of an f32 (gguf-py's `BF16.dequantize_blocks`). `half`
/// for every value but NaNs, which keep their payload (`half` would quiet them).
#[inline]
pub fn bf16_to_f32(h: u16) -> f32 {
    if h & 0x7FFF > 0x7F80 {
        return f32::from_bits(u32::from(h) << 16);
    }
    half::bf16::from_bits(h).to_f32()
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

/// f32 to IEEE half as numpy's `npy_floatbits_to_halfbits` (`astype(np.float16)`):
/// `half`'s round to nearest even (overflow to infinity, subnormals, ±0) for every value
/// but NaNs, which [`f32_nan_to_f16`] keeps as numpy does.
pub fn f32_to_f16(x: f32) -> u16 {
    if x.is_nan() {
        return f32_nan_to_f16(x.to_bits());
    }
    half::f16::from_f32(x).to_bits()
}

/// An f32 NaN to f16 keeping its top payload bits and quietness, numpy's way: a payload
/// whose top bits are all zero becomes 1, so the NaN stays a NaN. (`half` sets the quiet
/// bit instead.)
#[cold]
fn f32_nan_to_f16(b: u32) -> u16 {
    let sign = ((b >> 16) & 0x8000) as u16;
    let r = 0x7C00 | ((b & 0x7F_FFFF) >> 13) as u16;
    sign | if r == 0x7C00 { r + 1 } else { r }
}

/// f32 to bfloat16 as gguf-py's `BF16.quantize_blocks` (ggml's `ggml_compute_fp32_to_bf16`):
/// NaNs made quiet (top bits kept, bit 22 set), then round to nearest even. `half` does
/// exactly this, NaNs included (tested against ggml's expression).
pub fn f32_to_bf16(x: f32) -> u16 {
    half::bf16::from_f32(x).to_bits()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// numpy's `npy_halfbits_to_floatbits`, ported (organ's own code before `half`).
    fn numpy_f16_to_f32(h: u16) -> f32 {
        let sign = u32::from(h & 0x8000) << 16;
        let exp = h & 0x7C00;
        let man = u32::from(h & 0x03FF);
        let bits = match exp {
            0 if man == 0 => sign,
            0 => return f32::from_bits(sign | (man as f32 * (1.0 / 16_777_216.0)).to_bits()),
            0x7C00 => sign | 0x7F80_0000 | (man << 13),
            _ => sign | ((u32::from(h & 0x7FFF) + 0x1_C000) << 13),
        };
        f32::from_bits(bits)
    }

    /// numpy's `npy_floatbits_to_halfbits`, ported bit by bit (organ's own code before `half`).
    fn numpy_f32_to_f16(x: f32) -> u16 {
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

    /// ggml's `ggml_compute_fp32_to_bf16`.
    fn ggml_f32_to_bf16(x: f32) -> u16 {
        let mut n = x.to_bits();
        if n & 0x7FFF_FFFF > 0x7F80_0000 {
            n = (n & 0xFFFF_0000) | (64 << 16);
        }
        ((u64::from(n) + u64::from(0x7FFF + ((n >> 16) & 1))) >> 16) as u16
    }

    #[test]
    fn every_f16_and_bf16_converts_as_numpy_and_ggml() {
        for h in 0..=u16::MAX {
            assert_eq!(f16_to_f32(h).to_bits(), numpy_f16_to_f32(h).to_bits(), "f16 {h:#06x}");
            assert_eq!(bf16_to_f32(h).to_bits(), u32::from(h) << 16, "bf16 {h:#06x}");
        }
    }

    /// f32s around every f16 and bf16 rounding boundary: each 16-bit pattern's f32,
    /// and its neighbours at the tie (half an f16/bf16 ulp away) and one f32 ulp either
    /// side of it, for every exponent (normals, subnormals, underflow to ±0, overflow to
    /// ±inf) and both signs; plus NaNs with every payload shape, and a stride over all.
    fn boundary_f32s() -> impl Iterator<Item = u32> {
        let around = |b: u32| [b.wrapping_sub(1), b, b.wrapping_add(1)];
        let f16_ties = (0..=u16::MAX).flat_map(move |h| {
            let x = numpy_f16_to_f32(h).to_bits();
            // The tie with the next f16 up, in f32 bits, where that is finite.
            let next = numpy_f16_to_f32(h.wrapping_add(1)).to_bits();
            let tie =
                if h & 0x7FFF < 0x7C00 { (f32::from_bits(x) / 2.0 + f32::from_bits(next) / 2.0).to_bits() } else { x };
            around(x).into_iter().chain(around(tie))
        });
        let bf16_ties = (0..=u16::MAX).flat_map(move |h| {
            let x = u32::from(h) << 16;
            around(x).into_iter().chain(around(x | 0x8000))
        });
        let tiny = (0..=0x3400_0000u32)
            .step_by(0x1_0000)
            .flat_map(move |b| around(b).into_iter().chain(around(b | 0x8000_0000)));
        let nans = [0x7F80_0001, 0x7F80_2000, 0x7F80_1FFF, 0x7FC0_0000, 0x7FFF_FFFF, 0xFF80_0001, 0xFFC0_1234];
        f16_ties.chain(bf16_ties).chain(tiny).chain(nans).chain((0..=u32::MAX).step_by(65_537))
    }

    #[test]
    fn f32_to_f16_and_bf16_are_numpy_and_ggml_at_every_boundary() {
        for b in boundary_f32s() {
            let x = f32::from_bits(b);
            assert_eq!(f32_to_f16(x), numpy_f32_to_f16(x), "f16 of {b:#010x}");
            assert_eq!(f32_to_bf16(x), ggml_f32_to_bf16(x), "bf16 of {b:#010x}");
        }
    }

    /// All 2^32 f32s (a minute in release): `cargo test --release -p organ-core --lib
    /// float -- --ignored`. Run when `half` is upgraded.
    #[test]
    #[ignore]
    fn f32_to_f16_and_bf16_are_numpy_and_ggml_for_every_f32() {
        for b in 0..=u32::MAX {
            let x = f32::from_bits(b);
            assert_eq!(f32_to_f16(x), numpy_f32_to_f16(x), "f16 of {b:#010x}");
            assert_eq!(f32_to_bf16(x), ggml_f32_to_bf16(x), "bf16 of {b:#010x}");
        }
    }

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
