//! Merging finetunes of one base (issue 33): linear, task arithmetic, TIES, DARE and SLERP
//! as mergekit's `merge_methods/` define them, tensor by tensor; and mergekit's `slices:`
//! (layer ranges of several models stacked, merged slice by slice, `passthrough` for
//! frankenmerges).
//!
//! [`config`] reads a mergekit-style configuration (its YAML as a JSON value, so any front
//! end parses the text) and says, for each tensor, every model's weight and density and
//! the merge's `t`; [`slices`] reads `slices:` and lays out the output (which input
//! tensors make each output tensor, the metadata of a model of another layer count);
//! [`math`] merges one tensor's f32 values. Reading, dequantizing, quantizing and writing
//! stay with the caller. docs/merge.md has the formulas.

pub mod config;
pub mod layout;
pub mod math;
pub mod setting;
pub mod slices;
#[cfg(test)]
mod slices_tests;
#[cfg(test)]
mod tests;

/// A merge method, by mergekit's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// `linear`: the weighted average of the models.
    Linear,
    /// `task_arithmetic`: the base plus the weighted sum of the deltas.
    TaskArithmetic,
    /// `ties`: magnitude-pruned deltas, sign election, normalized.
    Ties,
    /// `dare_linear`: randomly dropped deltas, rescaled.
    DareLinear,
    /// `dare_ties`: randomly dropped deltas, rescaled, sign election.
    DareTies,
    /// `slerp`: spherical interpolation from the base to one other model.
    Slerp,
    /// `passthrough`: one model's tensors as they are (times `scale` where given): with
    /// `slices:`, layers of several models stacked.
    Passthrough,
}

impl Method {
    /// Every method organ merges by.
    pub const ALL: [Method; 7] = [
        Method::Linear,
        Method::TaskArithmetic,
        Method::Ties,
        Method::DareLinear,
        Method::DareTies,
        Method::Slerp,
        Method::Passthrough,
    ];

    /// mergekit's name.
    pub fn name(self) -> &'static str {
        match self {
            Method::Linear => "linear",
            Method::TaskArithmetic => "task_arithmetic",
            Method::Ties => "ties",
            Method::DareLinear => "dare_linear",
            Method::DareTies => "dare_ties",
            Method::Slerp => "slerp",
            Method::Passthrough => "passthrough",
        }
    }

    /// The method of mergekit's name.
    pub fn from_name(name: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Whether a base model is required (all but linear and passthrough).
    pub fn needs_base(self) -> bool {
        !matches!(self, Method::Linear | Method::Passthrough)
    }

    /// Whether TIES's sign election ("sum" consensus) applies.
    pub fn consensus(self) -> bool {
        matches!(self, Method::Ties | Method::DareTies)
    }

    /// Whether the method merges deltas from the base (the task-arithmetic family).
    pub fn on_deltas(self) -> bool {
        !matches!(self, Method::Linear | Method::Slerp | Method::Passthrough)
    }

    /// `normalize`'s default (mergekit's `default_normalize`; linear's is true).
    pub fn default_normalize(self) -> bool {
        matches!(self, Method::Linear | Method::Ties)
    }

    /// `rescale`'s default (mergekit's `default_rescale`).
    pub fn default_rescale(self) -> bool {
        matches!(self, Method::DareLinear | Method::DareTies)
    }

    /// The parameters of the whole merge this method reads.
    pub fn merge_parameters(self) -> &'static [&'static str] {
        match self {
            Method::Linear => &["normalize"],
            Method::Slerp => &["t"],
            Method::Passthrough => &[],
            _ => &["int8_mask", "normalize", "rescale", "lambda"],
        }
    }

    /// The parameters of each model this method reads (which may also be given for the
    /// whole merge, as defaults).
    pub fn model_parameters(self) -> &'static [&'static str] {
        match self {
            Method::Linear => &["weight"],
            Method::Slerp => &[],
            Method::Passthrough => &["scale"],
            _ => &["weight", "density"],
        }
    }
}
