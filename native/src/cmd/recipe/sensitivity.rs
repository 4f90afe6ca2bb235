//! `--from SENS.json`: the sensitivity reports `organ sensitivity` writes (measured truth:
//! each tensor's mean KL divergence from the unchanged model when it alone is requantized
//! to the report's type), read strictly and checked against the model.

use super::CurveSource;
use anyhow::{anyhow, bail, Context, Result};
use organ_core::ggml_type::GgmlType;
use organ_core::model::TensorEntry;
use organ_core::recipe::size::tensor_bytes;
use organ_core::sensitivity::report::{ReadBack, MAX_REPORT_BYTES};
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

/// One report: the type every tensor was requantized to, and each tensor's KL divergence.
pub struct Sensitivity {
    pub path: PathBuf,
    pub change: GgmlType,
    kld: HashMap<String, f64>,
}

impl Sensitivity {
    /// The measured KL divergence of tensor `name`, if it was measured.
    pub fn kld(&self, name: &str) -> Option<f64> {
        self.kld.get(name).copied()
    }
}

/// The reports, one per candidate type: measured single-tensor KL divergences.
pub struct Measured(pub Vec<Sensitivity>);

/// Reads the report at `path` and checks it against `model` (whose BLAKE3 is `blake3`).
///
/// # Errors
/// Not such a report (a field missing or mistyped, another version), an ablation
/// (`noise`, `zero`), another model, a tensor the model does not have or has in another
/// type or shape, a changed size that is not the type's, a KL divergence out of range
/// (negative or huge: [`organ_core::sensitivity::report::check_rows`]).
pub fn read(path: &Path, model: &[&TensorEntry], blake3: &str) -> Result<Sensitivity> {
    let mut text = String::new();
    crate::input::open(path)?
        .take(MAX_REPORT_BYTES + 1)
        .read_to_string(&mut text)
        .with_context(|| format!("{}: cannot read (UTF-8 JSON expected)", path.display()))?;
    if text.len() as u64 > MAX_REPORT_BYTES {
        bail!("{}: more than {MAX_REPORT_BYTES} bytes, not a sensitivity report", path.display());
    }
    let (r, kld) =
        ReadBack::read_checked(&text, model, Some(blake3)).map_err(|e| anyhow!("{}: {e}", path.display()))?;
    let kld: HashMap<String, f64> = kld.into_iter().collect();
    let at = |field: &str| format!("{}: {field}", path.display());
    let Some(change) = GgmlType::from_name(&r.change) else {
        bail!(
            "{}: {:?} is an ablation or no ggml type; a recipe needs a report whose tensors were requantized \
             to a type (organ sensitivity --to TYPE)",
            at("change"),
            r.change
        );
    };
    // Then what a recipe also needs: every row in the change's type (a row's dims are the
    // model's, checked).
    for (i, e) in r.tensors.iter().enumerate() {
        let here = |field: &str| at(&format!("tensors[{i}].{field} ({})", e.name));
        if !e.changed_type.eq_ignore_ascii_case(change.name()) {
            bail!("{}: {}, but the report's change is {change}", here("changed_type"), e.changed_type);
        }
        if let Some(b) = tensor_bytes(change, &e.dims).filter(|&b| b != e.changed_bytes) {
            bail!("{}: {}, but {change} of {:?} is {b} bytes", here("changed_bytes"), e.changed_bytes, e.dims);
        }
    }
    Ok(Sensitivity { path: path.to_owned(), change, kld })
}

impl Measured {
    /// Refuses two reports of the same type.
    ///
    /// # Errors
    /// Two reports of one type.
    pub fn new(reports: Vec<Sensitivity>) -> Result<Measured> {
        for (i, a) in reports.iter().enumerate() {
            if let Some(b) = reports[..i].iter().find(|b| b.change == a.change) {
                bail!(
                    "{} and {}: both measure {}; give one report per type",
                    b.path.display(),
                    a.path.display(),
                    a.change
                );
            }
        }
        Ok(Measured(reports))
    }
}

impl CurveSource for Measured {
    fn describe(&self) -> String {
        let each: Vec<String> = self.0.iter().map(|s| format!("{} ({})", s.path.display(), s.change)).collect();
        format!("measured single-tensor KL divergences: {}", each.join(", "))
    }

    fn types(&self) -> Vec<GgmlType> {
        self.0.iter().map(|s| s.change).collect()
    }

    fn cost(&self, tensor: &TensorEntry, ty: GgmlType) -> Option<f64> {
        self.0.iter().find(|s| s.change == ty)?.kld.get(&tensor.name).copied()
    }

    fn measured(&self) -> bool {
        true
    }
}
