//! The 256-element k-quants Q2_K … Q6_K: [`decode`] turns blocks into f32 values (all
//! five types), [`encode`] turns f32 values into Q4_K, Q5_K and Q6_K blocks and
//! [`encode_low`] into Q2_K and Q3_K blocks, on ggml's scale searches in [`super::search`].

pub mod decode;
pub mod encode;
pub mod encode_low;
