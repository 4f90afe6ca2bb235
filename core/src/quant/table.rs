//! The one table of quant types: a row per dequantizable type names its block geometry,
//! its block kernel, its element decoder, its quantizer (if any) and its decoding costs.
//! Every dispatch (whole tensors, single blocks, single elements, gathers, quantization,
//! the measure's whole-or-single choice) goes through [`kernels`], whose per-type loops
//! the [`quant_table!`] macro generates, so a new type is one row plus its kernels.

use super::{codebook4, iq, iq1_quant, iq2_quant, iq3_quant, k_quants, legacy, low_bit, plain, ternary};
use crate::ggml_type::GgmlType;
use alloc::vec::Vec;

/// Everything organ knows how to do with one quant type.
pub(crate) struct Kernels {
    /// Elements per block (equal to [`GgmlType::block_size`], checked at compile time).
    pub block_size: usize,
    /// Bytes per block (equal to [`GgmlType::type_size`], checked at compile time).
    pub type_size: usize,
    /// Dequantizes whole blocks. The caller passes `k` whole blocks and `k * block_size`
    /// outputs; anything else leaves `out` partly unwritten (never panics).
    pub dequantize: fn(&[u8], &mut [f32]),
    /// Element `j` (below `block_size`) of the block `b` (`type_size` bytes).
    pub element: fn(&[u8], usize) -> f32,
    /// Appends the elements at `indices` of a tensor whose bytes are `data`. The caller
    /// checks that every index lies inside `data`.
    pub gather: fn(&[u8], &[u64], &mut Vec<f32>),
    /// Quantizes whole blocks of finite values, appending the bytes.
    pub quantize: Option<QuantizeFn>,
    /// What decoding costs, for the measure's choice between whole and single decoding.
    pub cost: Cost,
}

/// Quantizes whole blocks of finite values, appending their bytes.
pub(crate) type QuantizeFn = fn(&[f32], &mut Vec<u8>);

/// Decoding costs in picoseconds, from `cargo bench -p organ-core --bench dequant` on the
/// 2-core x86-64 machine of the README, rounded: group `dequantize` per element of a
/// 1 Mi-element tensor, and drawing plus decoding 100 000 single samples from it.
#[derive(Clone, Copy)]
pub(crate) struct Cost {
    /// Whole-tensor dequantization, per element.
    pub whole_ps: u64,
    /// Single-element decoding, per sample.
    pub single_ps: u64,
}

/// The table's row for `ty`, or `None` for types organ cannot dequantize.
#[inline]
pub(crate) fn kernels(ty: GgmlType) -> Option<&'static Kernels> {
    quant_rows(ty)
}

impl GgmlType {
    /// Whether organ can turn this type into f32 values (every type gguf-py 0.19.0 can,
    /// and the types checked against ggml's own C code).
    pub fn can_dequantize(self) -> bool {
        kernels(self).is_some()
    }
}

/// How many samples ahead a gather asks for a block: enough to keep several cache misses
/// in flight, as the samples land on scattered blocks.
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

/// Generates [`quant_rows`] from the rows: per type, a static [`Kernels`] whose loops call
/// that type's kernels directly (block size and type size are constants in each, so
/// divisions become shifts and the kernels inline), and a compile-time check that the
/// row's geometry is [`GgmlType`]'s.
macro_rules! quant_table {
    ($( $ty:ident: $bs:literal x $ts:literal, $block:path, $elem:path, $quant:expr, ($whole:literal, $single:literal); )*) => {
        fn quant_rows(ty: GgmlType) -> Option<&'static Kernels> {
            match ty {
                $( GgmlType::$ty => {
                    const _: () = assert!(GgmlType::$ty.block_size() == $bs && GgmlType::$ty.type_size() == $ts);
                    fn dequantize(bytes: &[u8], out: &mut [f32]) {
                        for (b, y) in bytes.chunks_exact($ts).zip(out.chunks_exact_mut($bs)) {
                            // chunks_exact gives exact sizes, so both conversions succeed.
                            if let (Ok(b), Ok(y)) = (<&[u8; $ts]>::try_from(b), <&mut [f32; $bs]>::try_from(y)) {
                                $block(b, y)
                            }
                        }
                    }
                    // With one-element blocks, `/ 1` and `% 1` are the general code's.
                    #[allow(clippy::modulo_one, clippy::identity_op)]
                    fn gather(data: &[u8], indices: &[u64], out: &mut Vec<f32>) {
                        out.extend(indices.iter().enumerate().map(|(k, &i)| {
                            if let Some(&ahead) = indices.get(k + PREFETCH_AHEAD) {
                                prefetch(data, (ahead / $bs) as usize * $ts);
                            }
                            let at = (i / $bs) as usize * $ts;
                            $elem(&data[at..at + $ts], (i % $bs) as usize)
                        }))
                    }
                    const QUANTIZE_BLOCK: Option<QuantizeFn> = $quant;
                    fn quantize(values: &[f32], out: &mut Vec<u8>) {
                        if let Some(f) = QUANTIZE_BLOCK {
                            values.chunks_exact($bs).for_each(|x| f(x, out));
                        }
                    }
                    static ROW: Kernels = Kernels {
                        block_size: $bs,
                        type_size: $ts,
                        dequantize,
                        element: $elem,
                        gather,
                        quantize: match QUANTIZE_BLOCK {
                            Some(_) => Some(quantize),
                            None => None,
                        },
                        cost: Cost { whole_ps: $whole, single_ps: $single },
                    };
                    Some(&ROW)
                } )*
                _ => None,
            }
        }
    };
}

use codebook4 as cb;
use codebook4::encode as cbenc;
use iq1_quant as iq1q;
use iq2_quant as iq2q;
use iq3_quant::encode as i3enc;
use k_quants::decode as kq;
use k_quants::encode as kenc;
use k_quants::encode_low as klow;
use legacy::encode as lenc;
use low_bit::encode as lbenc;
use plain::encode as penc;
use ternary::encode as tenc;

quant_table! {
//  type   elements x bytes  block kernel   element decoder  quantizer            cost (whole, single) ps
    F32:     1 x 4,          plain::f32,    plain::at::f32,  Some(penc::f32),     (250, 2_900);
    F16:     1 x 2,          plain::f16,    plain::at::f16,  Some(penc::f16),     (3_400, 4_300);
    BF16:    1 x 2,          plain::bf16,   plain::at::bf16, Some(penc::bf16),    (1_800, 2_900);
    F64:     1 x 8,          plain::f64,    plain::at::f64,  None,                (3_900, 15_500);
    I8:      1 x 1,          plain::i8,     plain::at::i8,   None,                (2_400, 6_600);
    I16:     1 x 2,          plain::i16,    plain::at::i16,  None,                (2_400, 6_600);
    I32:     1 x 4,          plain::i32,    plain::at::i32,  None,                (2_400, 6_600);
    I64:     1 x 8,          plain::i64,    plain::at::i64,  None,                (3_700, 15_600);
    Q4_0:    32 x 18,        legacy::q4_0,  legacy::at::q4_0, Some(lenc::q4_0),   (200, 5_700);
    Q4_1:    32 x 20,        legacy::q4_1,  legacy::at::q4_1, Some(lenc::q4_1),   (230, 8_100);
    Q5_0:    32 x 22,        legacy::q5_0,  legacy::at::q5_0, Some(lenc::q5_0),   (540, 6_400);
    Q5_1:    32 x 24,        legacy::q5_1,  legacy::at::q5_1, Some(lenc::q5_1),   (540, 8_800);
    Q8_0:    32 x 34,        legacy::q8_0,  legacy::at::q8_0, Some(lenc::q8_0),   (180, 5_400);
    IQ4_NL:  32 x 18,        cb::iq4_nl,    cb::at::iq4_nl,  Some(cbenc::iq4_nl), (460, 5_800);
    MXFP4:   32 x 17,        cb::mxfp4,     cb::at::mxfp4,   Some(cbenc::mxfp4),  (1_030, 6_500);
    NVFP4:   64 x 36,        cb::nvfp4,     cb::at::nvfp4,   Some(cbenc::nvfp4),  (490, 5_400);
    Q2_K:    256 x 84,       kq::q2_k,      kq::at::q2_k,    Some(klow::q2_k),    (1_100, 11_300);
    Q3_K:    256 x 110,      kq::q3_k,      kq::at::q3_k,    Some(klow::q3_k),    (1_900, 9_100);
    Q4_K:    256 x 144,      kq::q4_k,      kq::at::q4_k,    Some(kenc::q4_k),    (200, 14_200);
    Q5_K:    256 x 176,      kq::q5_k,      kq::at::q5_k,    Some(kenc::q5_k),    (270, 14_100);
    Q6_K:    256 x 210,      kq::q6_k,      kq::at::q6_k,    Some(kenc::q6_k),    (2_500, 8_400);
    TQ1_0:   256 x 54,       ternary::tq1_0, ternary::at::tq1_0, Some(tenc::tq1_0), (340, 8_600);
    TQ2_0:   256 x 66,       ternary::tq2_0, ternary::at::tq2_0, Some(tenc::tq2_0), (1_280, 6_300);
    IQ2_XXS: 256 x 66,       iq::iq2_xxs,   iq::at::iq2_xxs, None,                (650, 16_000);
    IQ2_XS:  256 x 74,       iq::iq2_xs,    iq::at::iq2_xs,  None,                (830, 12_400);
    IQ2_S:   256 x 82,       iq::iq2_s,     iq::at::iq2_s,   Some(iq2q::iq2_s_block), (800, 11_900);
    IQ3_XXS: 256 x 98,       iq::iq3_xxs,   iq::at::iq3_xxs, Some(i3enc::iq3_xxs), (540, 15_300);
    IQ3_S:   256 x 110,      iq::iq3_s,     iq::at::iq3_s,   Some(i3enc::iq3_s),  (2_300, 11_700);
    IQ1_S:   256 x 50,       iq::iq1_s,     iq::at::iq1_s,   None,                (700, 7_900);
    IQ1_M:   256 x 56,       iq::iq1_m,     iq::at::iq1_m,   Some(iq1q::iq1_m_block), (600, 13_500);
    IQ4_XS:  256 x 136,      iq::iq4_xs,    iq::at::iq4_xs,  Some(cbenc::iq4_xs), (410, 8_600);
    Q1_0:    128 x 18,       low_bit::q1_0, low_bit::at::q1_0, Some(lbenc::q1_0), (800, 5_400);
    Q2_0:    64 x 18,        low_bit::q2_0, low_bit::at::q2_0, Some(lbenc::q2_0), (1_000, 5_400);
}
