//! Surgery on GGUF models, as pure functions: selections of tensors by layer, anatomy group
//! and name, and graft planning with the checks that refuse what llama.cpp would not load,
//! expert extraction and pruning. The CLI does the I/O.

pub mod experts;
pub mod graft;
pub mod layers;
pub mod list;
pub mod meta;
pub mod moe;
pub mod purify;
pub mod select;
