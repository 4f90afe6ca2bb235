//! Per-tensor sensitivity (docs/sensitivity.md): what happens to a model when ONE tensor is
//! changed, measured by llama.cpp as the mean KL divergence of the changed model's
//! next-token distribution from the unchanged one's. This module holds what is pure: the
//! changes ([`Change`]), which tensors are measured by default ([`is_weight`]), the
//! ablated values ([`ablated`]), the report ([`report`]) and rank correlation ([`spearman`]).
//! Making the changed models and running llama.cpp are the CLI's (`organ sensitivity`).

pub mod predicted;
pub mod report;
pub mod run;
pub mod sweep;

use crate::ggml_type::GgmlType;
use crate::random::normal;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

/// What is done to each measured tensor, all others left byte for byte as they are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// Requantized to this type (from its values as stored).
    To(GgmlType),
    /// Replaced by Gaussian noise of the tensor's own mean and standard deviation, from a
    /// seeded stream (the seed mixed with the tensor's name), stored in the tensor's type:
    /// "does this organ carry knowledge?"
    Noise {
        /// The stream's seed.
        seed: u64,
    },
    /// Replaced by zeros, in the tensor's type.
    Zero,
}

impl Change {
    /// The change's name in reports and cache keys: the type's name (`Q2_0`), `noise`
    /// (with its seed when not the default), or `zero`.
    pub fn label(self) -> String {
        match self {
            Change::To(t) => t.name().to_string(),
            Change::Noise { seed: DEFAULT_SEED } => "noise".to_string(),
            Change::Noise { seed } => alloc::format!("noise:{seed}"),
            Change::Zero => "zero".to_string(),
        }
    }
}

/// The noise's seed when none is given.
pub const DEFAULT_SEED: u64 = 0x5e_5171_71ce;

/// Whether a tensor is measured when no selection is given: every 2-D weight matrix
/// (`*.weight` with two dimensions of more than one element: the linear layers, the
/// embedding and the output head; not norms, biases or routers' 1-D vectors).
pub fn is_weight(name: &str, dims: &[u64]) -> bool {
    name.ends_with(".weight") && dims.len() == 2 && dims.iter().all(|&d| d > 1)
}

pub use crate::anatomy::kind;

/// The values a tensor is replaced by under `change` (`Noise` or `Zero`), from its values:
/// noise of their mean and (population) standard deviation, or zeros. `None` for
/// [`Change::To`], whose values come from a quantizer.
pub fn ablated(change: Change, name: &str, values: &[f32]) -> Option<Vec<f32>> {
    match change {
        Change::To(_) => None,
        Change::Zero => Some(alloc::vec![0.0; values.len()]),
        Change::Noise { seed } => {
            let (mean, std) = mean_std(values);
            let seed = seed ^ crate::random::seed_of(name);
            Some((0..values.len() as u64).map(|i| (mean + std * f64::from(normal(seed, i))) as f32).collect())
        }
    }
}

/// Mean and population standard deviation of the finite values, in f64 (0, 0 for none).
pub fn mean_std(values: &[f32]) -> (f64, f64) {
    let (mut n, mut sum, mut sq) = (0u64, 0.0f64, 0.0f64);
    for &v in values.iter().filter(|v| v.is_finite()) {
        n += 1;
        sum += f64::from(v);
        sq += f64::from(v) * f64::from(v);
    }
    if n == 0 {
        return (0.0, 0.0);
    }
    let mean = sum / n as f64;
    (mean, libm::sqrt((sq / n as f64 - mean * mean).max(0.0)))
}

/// FNV-1a of a name: each tensor's noise differs, reproducibly.
/// Spearman's rank correlation of two paired samples (ties get their mean rank), or `None`
/// when fewer than 3 pairs or either side is constant. Pairs with a non-finite side are left
/// out. The ranking is the predictor's ([`crate::predict::spearman`]), one for both.
pub fn spearman(a: &[f64], b: &[f64]) -> Option<f64> {
    let (x, y): (Vec<f64>, Vec<f64>) =
        a.iter().zip(b).filter(|(p, q)| p.is_finite() && q.is_finite()).map(|(p, q)| (*p, *q)).unzip();
    if x.len() < 3 {
        return None;
    }
    Some(crate::predict::spearman(&x, &y)).filter(|r| r.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spearman_of_monotone_and_reversed_and_ties() {
        let a = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(spearman(&a, &[10.0, 20.0, 35.0, 100.0]), Some(1.0));
        assert_eq!(spearman(&a, &[4.0, 3.0, 2.0, 1.0]), Some(-1.0));
        // Ties: ranks 1, 2.5, 2.5, 4 against 1..4: ρ = 4.5 / sqrt(5 * 4.5).
        let r = spearman(&a, &[1.0, 2.0, 2.0, 3.0]).unwrap();
        assert!((r - 4.5 / libm::sqrt(22.5)).abs() < 1e-12, "{r}");
        assert_eq!(spearman(&a, &[1.0, 1.0, 1.0, 1.0]), None);
        assert_eq!(spearman(&[1.0, 2.0], &[1.0, 2.0]), None);
        // A non-finite pair is left out.
        assert_eq!(spearman(&[1.0, 2.0, 3.0, f64::NAN], &[1.0, 2.0, 3.0, 0.0]), Some(1.0));
    }

    #[test]
    fn a_divergence_below_zero_or_past_the_cap_is_refused_with_its_field() {
        use crate::model::TensorEntry;
        use report::{check_rows, MeasuredRow, KLD_TOLERANCE, MAX_KLD};
        let t = TensorEntry {
            name: "w".into(),
            ty: crate::ggml_type::GgmlType::F16,
            dims: alloc::vec![32, 2],
            n_elements: 64,
            n_bytes: 128,
            file: 0,
            offset: 0,
        };
        let row = |kld| MeasuredRow { name: "w", ty: "f16", dims: &[32, 2], kld };
        let check = |kld| check_rows([row(kld)], core::slice::from_ref(&t));
        // What rounding gives for a change that changes nothing is read as printed.
        assert_eq!(check(-KLD_TOLERANCE / 2.0).unwrap(), [("w".into(), -KLD_TOLERANCE / 2.0)]);
        assert_eq!(check(MAX_KLD).unwrap(), [("w".into(), MAX_KLD)]);
        for bad in [-1.0, -1e308, MAX_KLD * 2.0, 1e308] {
            let e = check(bad).unwrap_err();
            assert_eq!((e.index, e.field), (0, "kld.value"), "{bad}: {e}");
            assert!(e.to_string().contains("a mean KL divergence is ≥ 0"), "{e}");
        }
    }

    #[test]
    fn kinds_and_default_selection() {
        assert_eq!(kind("blk.12.ffn_down.weight"), "ffn_down");
        assert_eq!(kind("token_embd.weight"), "token_embd");
        assert!(is_weight("blk.0.attn_q.weight", &[576, 576]));
        assert!(!is_weight("blk.0.attn_norm.weight", &[576]));
        assert!(!is_weight("blk.0.attn_q.bias", &[576, 1]));
    }

    #[test]
    fn noise_has_the_tensors_mean_and_std_and_is_reproducible() {
        let values: Vec<f32> = (0..20_000).map(|i| ((i % 97) as f32 - 40.0) * 0.01).collect();
        let (m, s) = mean_std(&values);
        let n = ablated(Change::Noise { seed: DEFAULT_SEED }, "blk.0.attn_q.weight", &values).unwrap();
        let (nm, ns) = mean_std(&n);
        assert!((nm - m).abs() < 0.02 * s && (ns - s).abs() < 0.02 * s, "{nm} {ns} against {m} {s}");
        assert_eq!(n, ablated(Change::Noise { seed: DEFAULT_SEED }, "blk.0.attn_q.weight", &values).unwrap());
        assert_ne!(n, ablated(Change::Noise { seed: DEFAULT_SEED }, "blk.1.attn_q.weight", &values).unwrap());
        assert!(ablated(Change::Zero, "x", &values).unwrap().iter().all(|&v| v == 0.0));
        assert_eq!(ablated(Change::To(GgmlType::Q4_0), "x", &values), None);
    }
}
