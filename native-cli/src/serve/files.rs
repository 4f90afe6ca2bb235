//! Files under the root: request paths resolved and confined, the model listing, and job
//! outputs streamed back.

use super::{bad, internal, ApiError, ApiResult, AppState, RESULTS};
use axum::body::Body;
use axum::extract::{Path as UrlPath, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub(super) fn not_found(rel: &str, what: &str) -> ApiError {
    ApiError(StatusCode::NOT_FOUND, format!("path {rel:?}: {what}"))
}

/// `rel` under `base` (canonical): a relative path without `..` (else 400), that exists
/// and, symlinks resolved, lies under `base` (else 404 with `what`, the same either way).
pub(super) fn resolve(base: &Path, rel: &str, what: &str) -> ApiResult<PathBuf> {
    let p = Path::new(rel);
    if rel.is_empty() || p.components().any(|c| !matches!(c, std::path::Component::Normal(_))) {
        return Err(bad(format!("path {rel:?} must be relative, without '..'")));
    }
    match base.join(p).canonicalize() {
        Ok(real) if real.starts_with(base) => Ok(real),
        _ => Err(not_found(rel, what)),
    }
}

/// Every model under the root (split models once, organ directories whole), excluding
/// job outputs.
///
/// The walk runs on a blocking thread, one at a time, and the answer gives up after the
/// inspect timeout (a walk stuck on a hung filesystem holds one thread, not the server).
pub(super) async fn models(State(s): State<Arc<AppState>>) -> ApiResult<Json<Value>> {
    let root = s.root.clone();
    let limit = s.inspect_timeout;
    let busy = || ApiError(StatusCode::SERVICE_UNAVAILABLE, format!("listing the models took longer than {limit:?}"));
    let deadline = tokio::time::Instant::now() + limit;
    let turn = tokio::time::timeout_at(deadline, s.walks.clone().acquire_owned())
        .await
        .map_err(|_| busy())?
        .map_err(internal)?;
    let walk = tokio::task::spawn_blocking(move || {
        let _turn = turn;
        // No model at all is an empty list, not an error.
        let paths = crate::discover::discover(&root).unwrap_or_default();
        let mut out = Vec::new();
        for p in paths {
            let rel = p.strip_prefix(&root).unwrap_or(&p);
            if rel.starts_with(RESULTS) || p == root {
                continue;
            }
            let (kind, files) = if p.is_dir() {
                ("organ_dir", vec![p.join("manifest.json")])
            } else if let Some(sh) = crate::paths::split_shards(&p) {
                ("split", sh)
            } else {
                ("gguf", vec![p.clone()])
            };
            let bytes: u64 = files.iter().filter_map(|f| std::fs::metadata(f).ok()).map(|m| m.len()).sum();
            out.push(json!({ "path": rel.to_string_lossy(), "kind": kind, "files": files.len(), "bytes": bytes }));
        }
        out
    });
    let found = tokio::time::timeout_at(deadline, walk).await.map_err(|_| busy())?.map_err(internal)?;
    Ok(Json(json!({ "models": found })))
}

/// A job output, streamed from under ROOT/results. Reaching one needs its job's id (128
/// random bits) or, with --token, the token.
pub(super) async fn download(State(s): State<Arc<AppState>>, UrlPath(rel): UrlPath<String>) -> ApiResult<Response> {
    let results = s.root.join(RESULTS);
    let path = resolve(&results, &rel, "no such result")?;
    // Opened without blocking (a FIFO put there would otherwise hold a thread), then
    // checked on the descriptor: a regular file that really lies under results/.
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(&path)
        .map_err(|_| not_found(&rel, "no such result"))?;
    let inside = crate::input::opened_path(&file).is_ok_and(|p| p.starts_with(&results));
    let meta = file.metadata().map_err(|_| not_found(&rel, "no such result"))?;
    if !inside {
        return Err(not_found(&rel, "no such result"));
    }
    if !meta.is_file() {
        return Err(not_found(&rel, "not a file (directories: download their files)"));
    }
    let len = meta.len();
    let body = Body::from_stream(tokio_util::io::ReaderStream::new(tokio::fs::File::from_std(file)));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    Ok((
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_owned()),
            (header::CONTENT_LENGTH, len.to_string()),
            (header::CONTENT_DISPOSITION, format!("attachment; filename=\"{}\"", name.replace('"', ""))),
        ],
        body,
    )
        .into_response())
}
