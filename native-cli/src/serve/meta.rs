//! The `meta` job: `organ meta MODEL --set … --set-file … --rm … --rename …
//! --rename-tensor … --remove-tensor … --retype-tensor … --out OUT --json meta.json`
//! (docs/surgery.md), its report as the job's result. Each field is checked here as the
//! command checks its flag, so a bad one is a 400, not a failed job.

use super::job::JobStatus;
use super::jobs::start_job;
use super::surgery::out_name;
use super::{bad, ApiResult, AppState};
use crate::cli::{self, argv, Force};
use axum::extract::rejection::JsonRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use organ_core::surgery::meta;
use serde::Deserialize;
use serde_json::Value;
use std::sync::Arc;

/// Edits one request may ask for (a header is rewritten once, whatever their number).
const MAX_EDITS: usize = 4096;

/// Tensor edits one request may ask for: each is a pattern run over every tensor name.
const MAX_TENSOR_EDITS: usize = 256;

/// One key set to a value.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SetReq {
    key: String,
    /// The CLI's VALUE: a string as it is; a number, a bool or an array as its JSON text.
    value: Value,
    /// The CLI's TYPE (`u32`, `arr[str]`…); absent: the key's type, else inferred.
    #[serde(default, rename = "type")]
    ty: Option<String>,
}

/// One key set to the text of a file under the root.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SetFileReq {
    key: String,
    path: String,
}

/// One key renamed.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RenameReq {
    from: String,
    to: String,
}

/// Tensors renamed by a regular expression.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RenameTensorReq {
    pattern: String,
    replacement: String,
}

/// Tensors converted to another type.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RetypeTensorReq {
    pattern: String,
    #[serde(rename = "type")]
    ty: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct MetaReq {
    /// The model: one GGUF file under the root.
    path: String,
    #[serde(default)]
    set: Vec<SetReq>,
    #[serde(default)]
    set_file: Vec<SetFileReq>,
    #[serde(default)]
    rm: Vec<String>,
    #[serde(default)]
    rename: Vec<RenameReq>,
    #[serde(default)]
    rename_tensor: Vec<RenameTensorReq>,
    #[serde(default)]
    remove_tensor: Vec<String>,
    #[serde(default)]
    retype_tensor: Vec<RetypeTensorReq>,
    #[serde(default)]
    out: Option<String>,
}

/// The tensor edits of `r` as the CLI's flag values, each checked as the command parses
/// it (and a rename's pattern compiled), in the order of [`cli::MetaArgs`]' fields.
fn tensor_specs(r: &MetaReq) -> ApiResult<(Vec<String>, Vec<String>, Vec<String>)> {
    use organ_core::surgery::meta::TensorEdit;
    let n = r.rename_tensor.len() + r.remove_tensor.len() + r.retype_tensor.len();
    if n > MAX_TENSOR_EDITS {
        return Err(bad(format!("{n} tensor edits, at most {MAX_TENSOR_EDITS}")));
    }
    let checked = |e: organ_core::Result<TensorEdit>| -> ApiResult<String> {
        let e = e.and_then(|e| e.check().map(|()| e)).map_err(|e| bad(format!("{e}")))?;
        Ok(e.spec())
    };
    let mut rename = Vec::with_capacity(r.rename_tensor.len());
    for x in &r.rename_tensor {
        if x.pattern.contains('=') {
            return Err(bad(format!(
                "rename_tensor {:?}: a pattern with '=' in it (organ meta reads REGEX=REPLACEMENT up to the first '='; \
                 write \\x3d for it)",
                super::shown(&x.pattern)
            )));
        }
        rename.push(checked(TensorEdit::rename(&format!("{}={}", x.pattern, x.replacement)))?);
    }
    let remove = r.remove_tensor.iter().map(|p| checked(TensorEdit::remove(p))).collect::<ApiResult<_>>()?;
    let mut retype = Vec::with_capacity(r.retype_tensor.len());
    for x in &r.retype_tensor {
        // The type is checked alone: the command splits NAME=TYPE at the last '='.
        if organ_core::GgmlType::from_name(&x.ty).is_none() {
            return Err(bad(format!("retype_tensor {:?}: {:?} is not a ggml type", super::shown(&x.pattern), x.ty)));
        }
        retype.push(checked(TensorEdit::retype(&format!("{}={}", x.pattern, x.ty)))?);
    }
    Ok((rename, remove, retype))
}

/// Checks a key the child reads from `KEY=…` (a set, a set-file, a rename's old name): a
/// GGUF key, without the '=' the child splits at (`a=b` would name key `a`).
fn paired_key(field: &str, key: &str) -> ApiResult<()> {
    meta::check_key(key).map_err(|e| bad(format!("{field} {key:?}: {e}")))?;
    if key.contains('=') {
        return Err(bad(format!(
            "{field} {:?}: a key with '=' in it (organ meta reads KEY=… up to the first '=')",
            super::shown(key)
        )));
    }
    Ok(())
}

/// A `set` as the CLI's `KEY=VALUE[:TYPE]`, checked as the command parses it.
fn set_spec(r: &SetReq) -> ApiResult<String> {
    let field = |e: organ_core::Error| bad(format!("set {:?}: {e}", r.key));
    paired_key("set", &r.key)?;
    let text = match &r.value {
        Value::String(s) => s.clone(),
        v @ (Value::Number(_) | Value::Bool(_) | Value::Array(_)) => v.to_string(),
        v => return Err(bad(format!("set {:?}: value {v}: give a string, a number, a bool or an array", r.key))),
    };
    let spec = match &r.ty {
        Some(t) => {
            // Typed, the value means the same whatever the model: checked whole here.
            let ty = meta::Ty::parse(t).map_err(field)?;
            meta::parse_value(&r.key, &text, Some(&ty), None).map_err(field)?;
            format!("{}={text}:{t}", r.key)
        }
        None => format!("{}={text}", r.key),
    };
    // Without a type, a value ending in ':WORD' would be read as typed: it needs its type.
    match meta::parse_set(&spec) {
        Ok((_, _, Some(_))) if r.ty.is_none() => {
            Err(bad(format!("set {:?}: a value ending in ':WORD' needs its \"type\" (\"str\" for a string)", r.key)))
        }
        Ok(_) => Ok(spec),
        Err(e) => Err(field(e)),
    }
}

/// `organ meta PATH … --out OUT --json meta.json`.
pub(super) async fn meta(
    State(s): State<Arc<AppState>>,
    body: Result<Json<MetaReq>, JsonRejection>,
) -> ApiResult<(StatusCode, Json<JobStatus>)> {
    let Json(r) = body?;
    let n = r.set.len() + r.set_file.len() + r.rm.len() + r.rename.len();
    if n > MAX_EDITS {
        return Err(bad(format!("{n} edits, at most {MAX_EDITS}")));
    }
    let (rename_tensor, remove_tensor, retype_tensor) = tensor_specs(&r)?;
    let model = s.path(&r.path)?;
    let set = r.set.iter().map(set_spec).collect::<ApiResult<Vec<_>>>()?;
    let mut set_file = Vec::with_capacity(r.set_file.len());
    for f in &r.set_file {
        paired_key("set_file", &f.key)?;
        let path = s.path(&f.path)?;
        let shown =
            path.to_str().ok_or_else(|| bad(format!("set_file {:?}: a path that is not UTF-8", f.path)))?.to_owned();
        set_file.push(format!("{}={shown}", f.key));
    }
    for x in &r.rename {
        paired_key("rename", &x.from)?;
    }
    for key in r.rm.iter().chain(r.rename.iter().flat_map(|x| [&x.from, &x.to])) {
        meta::check_key(key).map_err(|e| bad(format!("{e}")))?;
        if let Some(why) = meta::refusal(key, None) {
            return Err(bad(format!("key {key:?}: organ does not change it: {why}")));
        }
    }
    let rename = r.rename.iter().map(|x| format!("{}={}", x.from, x.to)).collect();
    let out = out_name(r.out.as_deref(), "meta.gguf")?;
    let outputs = written(&model, &out);
    let mut args = cli::MetaArgs {
        model,
        set,
        set_typed: Vec::new(),
        set_file,
        rm: r.rm,
        rename,
        rename_tensor,
        remove_tensor,
        retype_tensor,
        out: Some(out.clone().into()),
        in_place: false,
        json: None,
        force: Force::default(),
    };
    // The out name (.gguf), the pairs and the --set-file values' sizes against the header
    // budget the child holds them to are checked here: a 400, not a failed job.
    let o = crate::cmd::meta::Options::try_from(&args).map_err(|e| bad(format!("{e:#}")))?;
    crate::cmd::meta::check_value_files(&o, organ_core::limits::max_header_bytes())
        .map_err(|e| bad(s.hide_root(&format!("{e:#}"))))?;
    start_job(
        &s,
        "meta",
        move |dir| {
            args.out = args.out.as_ref().map(|o| dir.join(o));
            args.json = Some(dir.join("meta.json"));
            argv(&args)
        },
        outputs,
        Some("meta.json"),
        None,
    )
}

/// The files `organ meta MODEL --out OUT` writes, as the command names them: OUT for one
/// file; for a shard of a split model (its set known by the name), one file per shard,
/// OUT's own set of names when it is one, else `OUT-0000i-of-0000N.gguf`; and meta.json.
fn written(model: &std::path::Path, out: &str) -> Vec<String> {
    let n = crate::paths::split_shards(model).map_or(1, |v| v.len());
    let out_path = std::path::Path::new(out);
    let shards = match crate::paths::split_shards(out_path) {
        _ if n == 1 => vec![out_path.to_owned()],
        Some(named) => named,
        None => crate::write::gguf_split::shard_paths(out_path, n),
    };
    let names = shards.iter().filter_map(|p| p.file_name()).map(|f| f.to_string_lossy().into_owned());
    names.chain(["meta.json".to_owned()]).collect()
}
