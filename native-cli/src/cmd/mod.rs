//! One module per subcommand.
pub mod assemble;
pub mod check;
pub mod diff;
pub mod dissect;
pub mod eval;
pub mod experts;
pub mod graft;
pub mod inspect;
pub mod measure;
pub mod moe;
pub mod purify;
