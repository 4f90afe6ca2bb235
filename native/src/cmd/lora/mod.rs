//! `organ lora …`: one module per operation.
pub mod extract;
pub mod merge;
