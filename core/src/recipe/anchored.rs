//! A prediction anchored to a measurement (`organ recipe --from SENS.json --imatrix I` or
//! `--data-free`, docs/recipe.md): where a tensor was measured in a type, the measured KL
//! divergence; in every other type, the prediction scaled by what the measurement says of
//! that tensor, `measured / predicted` at the measured types (their geometric mean when
//! several). One sweep at one type thus gives every tensor its own scale, and the
//! prediction only says how its loss changes from type to type.

use super::choose::CurveSource;
use crate::ggml_type::GgmlType;
use crate::model::TensorEntry;
use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

/// Measured curves over predicted ones.
pub struct Anchored {
    measured: Box<dyn CurveSource>,
    predicted: Box<dyn CurveSource>,
}

impl Anchored {
    /// `measured` (reports of single-tensor KL divergences) anchoring `predicted`.
    pub fn new(measured: Box<dyn CurveSource>, predicted: Box<dyn CurveSource>) -> Anchored {
        Anchored { measured, predicted }
    }

    /// `tensor`'s measured over predicted KL divergence: the geometric mean over the
    /// measured types where both are positive; `None` where there is no such type.
    pub fn scale(&self, tensor: &TensorEntry) -> Option<f64> {
        let logs: Vec<f64> = (self.measured.types().into_iter())
            .filter_map(|ty| {
                let (m, p) = (self.measured.cost(tensor, ty)?, self.predicted.cost(tensor, ty)?);
                (m > 0.0 && p > 0.0 && m.is_finite() && p.is_finite()).then(|| libm::log(m / p))
            })
            .collect();
        (!logs.is_empty()).then(|| libm::exp(logs.iter().sum::<f64>() / logs.len() as f64))
    }
}

/// `types`, then each of `more` it lacks, in order: the types an anchored recipe predicts
/// (the candidates and the measured ones, where the scale is taken) and offers.
pub fn with_types(mut types: Vec<GgmlType>, more: Vec<GgmlType>) -> Vec<GgmlType> {
    for t in more {
        if !types.contains(&t) {
            types.push(t);
        }
    }
    types
}

impl CurveSource for Anchored {
    fn describe(&self) -> String {
        format!(
            "{}; other types predicted and scaled per tensor by its measured over predicted KL divergence ({})",
            self.measured.describe(),
            self.predicted.describe()
        )
    }

    fn types(&self) -> Vec<GgmlType> {
        with_types(self.predicted.types(), self.measured.types())
    }

    fn cost(&self, tensor: &TensorEntry, ty: GgmlType) -> Option<f64> {
        if let Some(m) = self.measured.cost(tensor, ty) {
            return Some(m);
        }
        let p = self.predicted.cost(tensor, ty)?;
        Some(self.scale(tensor).map_or(p, |s| p * s))
    }

    fn measured(&self) -> bool {
        false
    }

    /// The prediction's name with `, measured scale` where a measurement scaled it;
    /// `measured` for a tensor only measured (the embedding, the output head).
    fn predictor(&self, tensor: &TensorEntry) -> Option<&'static str> {
        let measured = self.measured.types().into_iter().any(|ty| self.measured.cost(tensor, ty).is_some());
        Some(match (self.predicted.predictor(tensor), self.scale(tensor).is_some()) {
            (Some("residual"), true) => "residual, measured scale",
            (Some("weighted_error"), true) => "weighted_error, measured scale",
            (Some(p), false) if p != "none" => p,
            _ if measured => "measured",
            _ => "none",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;

    /// A source of fixed costs per (tensor name, type).
    struct Fixed(Vec<(&'static str, GgmlType, f64)>, Option<&'static str>);

    impl CurveSource for Fixed {
        fn describe(&self) -> String {
            "fixed".into()
        }
        fn types(&self) -> Vec<GgmlType> {
            with_types(Vec::new(), self.0.iter().map(|c| c.1).collect())
        }
        fn cost(&self, tensor: &TensorEntry, ty: GgmlType) -> Option<f64> {
            self.0.iter().find(|c| c.0 == tensor.name && c.1 == ty).map(|c| c.2)
        }
        fn measured(&self) -> bool {
            self.1.is_none()
        }
        fn predictor(&self, _: &TensorEntry) -> Option<&'static str> {
            self.1
        }
    }

    fn tensor(name: &str) -> TensorEntry {
        TensorEntry {
            name: name.into(),
            ty: GgmlType::F16,
            dims: vec![64, 4],
            n_elements: 256,
            n_bytes: 512,
            file: 0,
            offset: 0,
        }
    }

    #[test]
    fn a_measured_type_scales_the_predicted_ones() {
        use GgmlType::{Q4_0, Q5_0, Q8_0};
        let measured = Fixed(vec![("a", Q4_0, 0.02), ("b", Q4_0, 0.0), ("a", Q8_0, 0.001)], None);
        let predicted = Fixed(
            vec![
                ("a", Q4_0, 0.01),
                ("a", Q5_0, 0.004),
                ("a", Q8_0, 0.002),
                ("b", Q4_0, 0.03),
                ("b", Q5_0, 0.01),
                ("c", Q5_0, 0.5),
            ],
            Some("residual"),
        );
        let s = Anchored::new(Box::new(measured), Box::new(predicted));
        let (a, b, c) = (tensor("a"), tensor("b"), tensor("c"));
        // a: measured twice, ×2 and ×0.5: the geometric mean is 1.
        assert_eq!(s.cost(&a, Q4_0), Some(0.02));
        assert_eq!(s.cost(&a, Q8_0), Some(0.001));
        assert!((s.scale(&a).unwrap() - 1.0).abs() < 1e-12);
        assert!((s.cost(&a, Q5_0).unwrap() - 0.004).abs() < 1e-12);
        // b: measured at 0, which gives no scale; c: never measured. Both as predicted.
        assert_eq!(s.cost(&b, Q4_0), Some(0.0));
        assert_eq!((s.scale(&b), s.cost(&b, Q5_0)), (None, Some(0.01)));
        assert_eq!((s.cost(&c, Q5_0), s.cost(&c, Q4_0)), (Some(0.5), None));
        assert_eq!(s.predictor(&a), Some("residual, measured scale"));
        assert_eq!(s.predictor(&c), Some("residual"));
        // Measured only: a tensor the prediction does not cover.
        let only = Anchored::new(
            Box::new(Fixed(vec![("e", Q4_0, 0.07)], None)),
            Box::new(Fixed(vec![("e", Q8_0, 0.0)], Some("none"))),
        );
        assert_eq!((only.predictor(&tensor("e")), only.cost(&tensor("e"), Q8_0)), (Some("measured"), Some(0.0)));
        assert!(!s.measured());
        assert_eq!(s.types(), vec![Q4_0, Q5_0, Q8_0]);
    }

    #[test]
    fn one_measured_type_carries_its_ratio_to_the_others() {
        use GgmlType::{Q4_0, Q6_K};
        let measured = Fixed(vec![("a", Q4_0, 0.06), ("a", GgmlType::Q2_0, 0.9)], None);
        let predicted = Fixed(vec![("a", Q4_0, 0.02), ("a", Q6_K, 0.001)], Some("weighted_error"));
        let s = Anchored::new(Box::new(measured), Box::new(predicted));
        // Q2_0 is measured but not predicted: no ratio there; it is still a choice.
        assert!((s.cost(&tensor("a"), Q6_K).unwrap() - 0.003).abs() < 1e-12);
        assert_eq!(s.cost(&tensor("a"), GgmlType::Q2_0), Some(0.9));
        assert_eq!(s.types(), vec![Q4_0, Q6_K, GgmlType::Q2_0]);
        assert_eq!(s.predictor(&tensor("a")), Some("weighted_error, measured scale"));
    }
}
