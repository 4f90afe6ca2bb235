//! `--verdict FILE`: what running a model said, shown beside its θ_mean in the ranking.
//! FILE is the JSON of `organ eval MODEL --base PARENT` (its `"verdict"`) or of a graft,
//! purify, moe or experts run with `--judge` (its `"judge"`); the model is the one whose
//! bytes the evaluation scored (its `model_blake3`), whatever either file is named: a copy
//! under another name takes it, another model of the same name does not. Each file is read
//! and checked when the command starts, before any model is measured; a verdict whose
//! model was not measured is an error, as is a model given two.

use anyhow::{bail, Context, Result};
use organ_core::report::{Measured, Report};
use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The most a verdict file may hold: an eval report is a few kilobytes.
const MAX_BYTES: u64 = 1 << 20;

/// A verdict read from its file: the model it is about, and what it says.
#[derive(Debug, Clone, PartialEq)]
pub struct Given {
    /// The model as the evaluation named it.
    pub model: String,
    /// The BLAKE3 of the bytes it scored.
    pub blake3: String,
    pub measured: Measured,
}

/// Reads the verdict in `path`.
///
/// # Errors
/// The file cannot be read, is over 1 MiB, is not JSON, or holds no verdict of the forms
/// above (the error names the file and the field).
pub fn read(path: &Path) -> Result<Given> {
    let shown = path.display();
    let mut bytes = Vec::new();
    crate::input::open_regular(path)
        .with_context(|| format!("--verdict {shown}"))?
        .take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("--verdict {shown}: cannot read"))?;
    if bytes.len() as u64 > MAX_BYTES {
        bail!("--verdict {shown}: over {MAX_BYTES} bytes; an eval report is a few kilobytes");
    }
    let v: Value = serde_json::from_slice(&bytes)
        .with_context(|| format!("--verdict {shown}: not JSON (expected organ eval --base's --json)"))?;
    // organ eval: {"model": M, "verdict": {"verdict": G, "ppl_ratio": R}}; a surgery's
    // --judge: {"judge": {"verdict": G, "ppl_ratio": R, "evaluation": {"model": M}}}.
    let (verdict, model) = if v["verdict"].is_object() {
        (&v["verdict"], &v["model"])
    } else if v["judge"].is_object() {
        (&v["judge"], &v["judge"]["evaluation"]["model"])
    } else {
        bail!(
            "--verdict {shown}: no verdict in it (expected the --json of organ eval MODEL --base PARENT, or of a \
             surgery run with --judge)"
        );
    };
    let Some(model) = model.as_str() else { bail!("--verdict {shown}: the model it judged is not named (\"model\")") };
    let blake3 = match &evaluation(&v)["model_blake3"] {
        Value::String(h) if h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()) => h.to_ascii_lowercase(),
        Value::Null => bail!(
            "--verdict {shown}: no model_blake3, the identity of the model it judged (an evaluation of an organ \
             before 0.27 named the file only): evaluate it again"
        ),
        h => bail!("--verdict {shown}: model_blake3 {h}: expected 64 hex digits"),
    };
    if model.contains(" + lora ") {
        bail!("--verdict {shown}: a verdict on {model}, adapters applied, not on a model file measure reads");
    }
    let grade = verdict["verdict"].as_str().unwrap_or_default();
    if !matches!(grade, "close" | "changed" | "degraded" | "broken") {
        bail!("--verdict {shown}: verdict {:?}: expected close, changed, degraded or broken", verdict["verdict"]);
    }
    let ppl_ratio = match &verdict["ppl_ratio"] {
        Value::Null => None,
        r => Some(
            r.as_f64()
                .filter(|r| r.is_finite() && *r > 0.0)
                .with_context(|| format!("--verdict {shown}: ppl_ratio {r}: expected a positive number"))?,
        ),
    };
    let source = path.file_name().map_or_else(|| shown.to_string(), |n| n.to_string_lossy().into_owned());
    Ok(Given { model: model.to_owned(), blake3, measured: Measured { verdict: grade.to_owned(), ppl_ratio, source } })
}

/// The evaluation's figures in a verdict file: the document itself (`organ eval`), or its
/// judge's `evaluation` (a surgery's `--judge`).
fn evaluation(v: &Value) -> &Value {
    if v["verdict"].is_object() {
        v
    } else {
        &v["judge"]["evaluation"]
    }
}

/// Reads every file of `paths`.
pub fn read_all(paths: &[PathBuf]) -> Result<Vec<Given>> {
    paths.iter().map(|p| read(p)).collect()
}

/// Puts each verdict beside its model in `report`'s ranking: the models whose bytes have
/// the verdict's BLAKE3 (`identities`, one per model of the report, in its order; `None`
/// for a model whose bytes organ did not hash, one at a URL).
///
/// # Errors
/// A verdict on a model that is not in the report (naming the models that are), or two on
/// one model.
pub fn attach(report: &mut Report, identities: &[Option<String>], given: &[Given]) -> Result<()> {
    for g in given {
        let labels: Vec<&str> = report
            .models
            .iter()
            .zip(identities)
            .filter_map(|(m, id)| (id.as_deref() == Some(g.blake3.as_str())).then_some(m.model.as_str()))
            .collect();
        if labels.is_empty() {
            let names: Vec<&str> = report.ranking.iter().map(|r| r.model.as_str()).collect();
            bail!(
                "--verdict {}: a verdict on {} (BLAKE3 {}), whose bytes are none of the models measured ({})",
                g.measured.source,
                g.model,
                &g.blake3[..16],
                names.join(", ")
            );
        }
        for row in report.ranking.iter_mut().filter(|r| labels.contains(&r.model.as_str())) {
            if let Some(first) = &row.measured {
                bail!("--verdict {}: {} already has a verdict, from {}", g.measured.source, row.model, first.source);
            }
            row.measured = Some(g.measured.clone());
        }
    }
    Ok(())
}

/// The BLAKE3 of each model at `paths` that is on this machine (`None` at a URL, whose
/// bytes organ reads in part), for [`attach`].
///
/// # Errors
/// A model that cannot be opened.
pub fn identities(paths: &[std::path::PathBuf]) -> Result<Vec<Option<String>>> {
    paths
        .iter()
        .map(|p| match crate::location::Location::of(p) {
            crate::location::Location::Local(_) => Ok(Some(crate::model::Model::open(p)?.fingerprint(false)?.blake3)),
            crate::location::Location::Url(_) => Ok(None),
        })
        .collect()
}
