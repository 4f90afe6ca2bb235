//! `organ lora …`: one module per operation.
pub mod merge;
