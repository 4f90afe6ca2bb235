//! The ggml tensor types a GGUF may name, with their block geometry
//! (`GGML_QUANT_SIZES` in gguf-py 0.19.0, `ggml_type_traits` in ggml). Which of them organ
//! can decode is the quant table's to say (`GgmlType::can_dequantize`, in `quant::table`).

use serde::Serialize;

/// Elements per super-block of the k-quants and i-quants (`QK_K`).
pub const QK_K: usize = 256;

macro_rules! ggml_types {
    ($( $(#[$doc:meta])* $name:ident = $id:literal, $block:expr, $size:expr; )*) => {
        /// A ggml tensor type. The discriminant is the id stored in GGUF tensor infos.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        #[allow(non_camel_case_types)]
        #[non_exhaustive]
        pub enum GgmlType {
            $( $(#[$doc])* $name = $id, )*
        }

        impl GgmlType {
            /// Every type the format defines, in id order.
            pub const ALL: &'static [GgmlType] = &[$(GgmlType::$name),*];

            /// The type with this GGUF id, or `None` for ids ggml does not (or no longer) define.
            pub fn from_id(id: u32) -> Option<GgmlType> {
                match id {
                    $( $id => Some(GgmlType::$name), )*
                    _ => None,
                }
            }

            /// The id stored in GGUF tensor infos.
            pub fn id(self) -> u32 {
                self as u32
            }

            /// ggml's name for the type (`Q4_K`, `IQ2_XXS`, …).
            pub fn name(self) -> &'static str {
                match self { $( GgmlType::$name => stringify!($name), )* }
            }

            /// The type with this name (as [`GgmlType::name`] spells it, any case).
            pub fn from_name(name: &str) -> Option<GgmlType> {
                Self::ALL.iter().copied().find(|t| t.name().eq_ignore_ascii_case(name))
            }

            /// Elements per block.
            pub const fn block_size(self) -> usize {
                match self { $( GgmlType::$name => $block, )* }
            }

            /// Bytes per block.
            pub const fn type_size(self) -> usize {
                match self { $( GgmlType::$name => $size, )* }
            }
        }
    };
}

ggml_types! {
    /// 32-bit IEEE float.
    F32 = 0, 1, 4;
    /// 16-bit IEEE float.
    F16 = 1, 1, 2;
    /// 4-bit, one f16 scale per 32.
    Q4_0 = 2, 32, 2 + 16;
    /// 4-bit, f16 scale and min per 32.
    Q4_1 = 3, 32, 2 + 2 + 16;
    /// 5-bit, one f16 scale per 32.
    Q5_0 = 6, 32, 2 + 4 + 16;
    /// 5-bit, f16 scale and min per 32.
    Q5_1 = 7, 32, 2 + 2 + 4 + 16;
    /// 8-bit, one f16 scale per 32.
    Q8_0 = 8, 32, 2 + 32;
    /// 8-bit with f16 scale and sum (an intermediate for dot products).
    Q8_1 = 9, 32, 4 + 4 + 32;
    /// 2-bit k-quant.
    Q2_K = 10, QK_K, 2 + 2 + QK_K / 16 + QK_K / 4;
    /// 3-bit k-quant.
    Q3_K = 11, QK_K, 2 + QK_K / 4 + QK_K / 8 + 12;
    /// 4-bit k-quant.
    Q4_K = 12, QK_K, 2 + 2 + QK_K / 2 + 12;
    /// 5-bit k-quant.
    Q5_K = 13, QK_K, 2 + 2 + QK_K / 2 + QK_K / 8 + 12;
    /// 6-bit k-quant.
    Q6_K = 14, QK_K, 2 + QK_K / 2 + QK_K / 4 + QK_K / 16;
    /// 8-bit k-quant (an intermediate for dot products).
    Q8_K = 15, QK_K, 4 + QK_K + QK_K / 8;
    /// 2.06 bpw i-quant.
    IQ2_XXS = 16, QK_K, 2 + QK_K / 4;
    /// 2.31 bpw i-quant.
    IQ2_XS = 17, QK_K, 2 + QK_K / 4 + QK_K / 32;
    /// 3.06 bpw i-quant.
    IQ3_XXS = 18, QK_K, 2 + QK_K / 4 + QK_K / 8;
    /// 1.56 bpw i-quant.
    IQ1_S = 19, QK_K, 2 + QK_K / 8 + QK_K / 16;
    /// 4-bit non-linear, blocks of 32.
    IQ4_NL = 20, 32, 2 + 16;
    /// 3.44 bpw i-quant.
    IQ3_S = 21, QK_K, 2 + QK_K / 4 + QK_K / 8 + QK_K / 32 + 4;
    /// 2.5 bpw i-quant.
    IQ2_S = 22, QK_K, 2 + QK_K / 4 + QK_K / 16;
    /// 4.25 bpw non-linear.
    IQ4_XS = 23, QK_K, 2 + 2 + QK_K / 2 + QK_K / 64;
    /// 8-bit integer.
    I8 = 24, 1, 1;
    /// 16-bit integer.
    I16 = 25, 1, 2;
    /// 32-bit integer.
    I32 = 26, 1, 4;
    /// 64-bit integer.
    I64 = 27, 1, 8;
    /// 64-bit IEEE float.
    F64 = 28, 1, 8;
    /// 1.75 bpw i-quant.
    IQ1_M = 29, QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32;
    /// bfloat16.
    BF16 = 30, 1, 2;
    /// Ternary, 1.69 bpw.
    TQ1_0 = 34, QK_K, 2 + 4 * 13;
    /// Ternary, 2.06 bpw.
    TQ2_0 = 35, QK_K, 2 + 64;
    /// OCP microscaling FP4 (e2m1 values, e8m0 scale per 32).
    MXFP4 = 39, 32, 1 + 16;
    /// NVIDIA FP4 (e2m1 values, ue4m3 scale per 16, 64 per block).
    NVFP4 = 40, 64, 4 + 32;
    /// 1-bit, f16 scale per 128.
    Q1_0 = 41, 128, 2 + 16;
    /// 2-bit (-1, 0, 1, 2 times an f16 scale) per 64.
    Q2_0 = 42, 64, 2 + 16;
}

impl core::fmt::Display for GgmlType {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_sizes_are_sane() {
        for &t in GgmlType::ALL {
            assert_eq!(GgmlType::from_id(t.id()), Some(t));
            assert_eq!(GgmlType::from_name(t.name()), Some(t));
            assert!(t.block_size() > 0 && t.type_size() > 0, "{t}");
        }
        assert_eq!(GgmlType::ALL.len(), 35);
        // Ids ggml retired (Q4_2, Q4_3, the repacked Q4_0_4_4 family…) are unknown.
        for id in [4, 5, 31, 32, 33, 36, 37, 38, 43, u32::MAX] {
            assert_eq!(GgmlType::from_id(id), None, "{id}");
        }
    }
}
