//! The 256-element k-quants Q2_K … Q6_K: [`decode`] turns blocks into f32 values (all
//! five types), [`encode`] turns f32 values into Q4_K, Q5_K and Q6_K blocks.

pub mod decode;
pub mod encode;
