//! An adapter's check: its metadata and pairs as llama.cpp reads them
//! ([`crate::lora::Adapter::read`]), and with a base, the pairs against the base's weights
//! ([`crate::lora::Adapter::against`]). An adapter has none of a model's architecture
//! tensors, tokenizer or chat template, so those checks do not run on it.

use super::{Finding, Kind, Severity};
use crate::lora::{self, Adapter, Problem};
use crate::model::{Model, TensorEntry};
use alloc::format;
use alloc::vec::Vec;
use core::borrow::Borrow;

/// The findings of adapter `m` alone.
pub(super) fn check<T: Borrow<TensorEntry>>(m: &Model<T>, out: &mut Vec<Finding>) {
    let a = Adapter::read(m);
    out.extend(a.problems.iter().map(finding));
    let ranks = a.ranks();
    if ranks.len() > 1 {
        let list: Vec<_> = ranks.iter().map(|r| format!("{r}")).collect();
        out.push(Finding::new(
            Severity::Info,
            Kind::Adapter,
            "",
            format!("pairs of ranks {}: a rank per weight, as PEFT's rank_pattern makes", list.join(", ")),
        ));
    }
}

/// The findings of applying adapter `m` to `base`.
pub fn against_base<T: Borrow<TensorEntry>, U: Borrow<TensorEntry>>(m: &Model<T>, base: &Model<U>) -> Vec<Finding> {
    Adapter::read(m).against(base).iter().map(finding).collect()
}

fn finding(p: &Problem) -> Finding {
    let severity = match p.severity {
        lora::Severity::Error => Severity::Error,
        lora::Severity::Warning => Severity::Warning,
    };
    Finding::new(severity, Kind::Adapter, &p.subject, p.message.clone())
}
