//! llama.cpp's file types (`llama_ftype`, `include/llama.h`) and the names
//! `llama-quantize` takes for them (`QUANT_OPTIONS`, `tools/quantize/quantize.cpp`).

use crate::ggml_type::GgmlType;

macro_rules! ftypes {
    ($($variant:ident = $id:literal, $default:ident;)*) => {
        /// A file type: what `general.file_type` records and what decides each tensor's
        /// type (`llama_tensor_get_type`).
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Ftype {
            $(#[doc = concat!("`", stringify!($variant), "` (file type ", stringify!($id), ").")] $variant,)*
        }

        impl Ftype {
            /// Every file type `llama-quantize` writes.
            pub const ALL: &'static [Ftype] = &[$(Ftype::$variant,)*];

            /// Its number, `general.file_type`.
            pub fn id(self) -> u32 {
                match self { $(Ftype::$variant => $id,)* }
            }

            /// The type of a tensor no rule changes (`llama_ftype_get_default_type`).
            pub fn default_type(self) -> GgmlType {
                match self { $(Ftype::$variant => GgmlType::$default,)* }
            }
        }
    };
}

ftypes! {
    F32 = 0, F32;
    F16 = 1, F16;
    Q4_0 = 2, Q4_0;
    Q4_1 = 3, Q4_1;
    Q8_0 = 7, Q8_0;
    Q5_0 = 8, Q5_0;
    Q5_1 = 9, Q5_1;
    Q2_K = 10, Q2_K;
    Q3_K_S = 11, Q3_K;
    Q3_K_M = 12, Q3_K;
    Q3_K_L = 13, Q3_K;
    Q4_K_S = 14, Q4_K;
    Q4_K_M = 15, Q4_K;
    Q5_K_S = 16, Q5_K;
    Q5_K_M = 17, Q5_K;
    Q6_K = 18, Q6_K;
    IQ2_XXS = 19, IQ2_XXS;
    IQ2_XS = 20, IQ2_XS;
    Q2_K_S = 21, Q2_K;
    IQ3_XS = 22, IQ3_S;
    IQ3_XXS = 23, IQ3_XXS;
    IQ1_S = 24, IQ1_S;
    IQ4_NL = 25, IQ4_NL;
    IQ3_S = 26, IQ3_S;
    IQ3_M = 27, IQ3_S;
    IQ2_S = 28, IQ2_XS;
    IQ2_M = 29, IQ2_S;
    IQ4_XS = 30, IQ4_XS;
    IQ1_M = 31, IQ1_M;
    BF16 = 32, BF16;
    TQ1_0 = 36, TQ1_0;
    TQ2_0 = 37, TQ2_0;
    MXFP4_MOE = 38, MXFP4;
    Q1_0 = 40, Q1_0;
    Q2_0 = 41, Q2_0;
}

/// The names `llama-quantize` takes, in its order (its help lists them so), each with
/// its file type: the aliases `Q3_K`, `Q4_K` and `Q5_K` are the `_M` mixes.
pub const NAMES: &[(&str, Ftype)] = &[
    ("Q1_0", Ftype::Q1_0),
    ("Q2_0", Ftype::Q2_0),
    ("Q4_0", Ftype::Q4_0),
    ("Q4_1", Ftype::Q4_1),
    ("MXFP4_MOE", Ftype::MXFP4_MOE),
    ("Q5_0", Ftype::Q5_0),
    ("Q5_1", Ftype::Q5_1),
    ("IQ2_XXS", Ftype::IQ2_XXS),
    ("IQ2_XS", Ftype::IQ2_XS),
    ("IQ2_S", Ftype::IQ2_S),
    ("IQ2_M", Ftype::IQ2_M),
    ("IQ1_S", Ftype::IQ1_S),
    ("IQ1_M", Ftype::IQ1_M),
    ("TQ1_0", Ftype::TQ1_0),
    ("TQ2_0", Ftype::TQ2_0),
    ("Q2_K", Ftype::Q2_K),
    ("Q2_K_S", Ftype::Q2_K_S),
    ("IQ3_XXS", Ftype::IQ3_XXS),
    ("IQ3_S", Ftype::IQ3_S),
    ("IQ3_M", Ftype::IQ3_M),
    ("Q3_K", Ftype::Q3_K_M),
    ("IQ3_XS", Ftype::IQ3_XS),
    ("Q3_K_S", Ftype::Q3_K_S),
    ("Q3_K_M", Ftype::Q3_K_M),
    ("Q3_K_L", Ftype::Q3_K_L),
    ("IQ4_NL", Ftype::IQ4_NL),
    ("IQ4_XS", Ftype::IQ4_XS),
    ("Q4_K", Ftype::Q4_K_M),
    ("Q4_K_S", Ftype::Q4_K_S),
    ("Q4_K_M", Ftype::Q4_K_M),
    ("Q5_K", Ftype::Q5_K_M),
    ("Q5_K_S", Ftype::Q5_K_S),
    ("Q5_K_M", Ftype::Q5_K_M),
    ("Q6_K", Ftype::Q6_K),
    ("Q8_0", Ftype::Q8_0),
    ("F16", Ftype::F16),
    ("BF16", Ftype::BF16),
    ("F32", Ftype::F32),
];

impl Ftype {
    /// Its name as `llama-quantize` prints it (the first in [`NAMES`] that is it).
    pub fn name(self) -> &'static str {
        NAMES.iter().find(|(_, f)| *f == self).map_or("?", |(n, _)| n)
    }

    /// The file type `llama-quantize` reads from `s` (`try_parse_ftype`): a name in any
    /// case, or a number; `None` otherwise (`COPY` is not one: organ does not copy).
    pub fn parse(s: &str) -> Option<Ftype> {
        if let Some((_, f)) = NAMES.iter().find(|(n, _)| n.eq_ignore_ascii_case(s)) {
            return Some(*f);
        }
        Ftype::from_id(s.parse().ok()?)
    }

    /// The file type whose number (`general.file_type`) is `id`, if llama-quantize writes it.
    pub fn from_id(id: u32) -> Option<Ftype> {
        Ftype::ALL.iter().copied().find(|f| f.id() == id)
    }

    /// The i-quant mixes below 3 bits, which share their rules in `llama_tensor_get_type`.
    pub(super) fn is_low_iq(self) -> bool {
        use Ftype::*;
        matches!(self, IQ2_XXS | IQ2_XS | IQ1_S | IQ2_S | IQ2_M | IQ1_M)
    }
}

impl core::fmt::Display for Ftype {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}
