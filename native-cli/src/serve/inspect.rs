//! `GET /api/inspect`: `organ inspect --json` run as a child, bounded in time and size, its
//! JSON written to an unnamed file under ROOT/results and streamed from there: the server
//! holds none of it (a vocabulary of millions of tokens is tens of MB per inspect).

use super::{bad, child, internal, ApiError, ApiResult, AppState, RESULTS};
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde::Deserialize;
use std::io::{Seek, SeekFrom};
use std::sync::Arc;
use tokio::io::AsyncReadExt;

#[derive(Deserialize)]
pub(super) struct PathQuery {
    path: String,
    /// `memory=true` adds inspect --memory's estimate; the settings below need it.
    #[serde(default)]
    memory: bool,
    ctx: Option<u32>,
    kv_type: Option<String>,
    batch: Option<u32>,
    ubatch: Option<u32>,
    gpu_layers: Option<u32>,
}

impl PathQuery {
    /// `organ inspect --json` of `path` with the query's memory settings, checked here so
    /// a bad one is a 400 before any child starts.
    fn args(&self, path: std::path::PathBuf) -> ApiResult<crate::cli::InspectArgs> {
        let any = self.ctx.is_some()
            || self.kv_type.is_some()
            || self.batch.is_some()
            || self.ubatch.is_some()
            || self.gpu_layers.is_some();
        if any && !self.memory {
            return Err(bad("ctx, kv_type, batch, ubatch and gpu_layers are memory settings: add memory=true"));
        }
        if self.memory {
            let s = crate::cli::memory_settings(
                self.ctx,
                self.kv_type.as_deref(),
                self.batch,
                self.ubatch,
                self.gpu_layers,
            )
            .map_err(|e| bad(format!("{e:#}")))?;
            s.check().map_err(|e| bad(crate::cmd::inspect::memory_error(&e)))?;
        }
        Ok(crate::cli::InspectArgs {
            memory: self.memory,
            ctx: self.ctx,
            kv_type: self.kv_type.clone(),
            batch: self.batch,
            ubatch: self.ubatch,
            gpu_layers: self.gpu_layers,
            ..crate::cli::InspectArgs::new(path, true)
        })
    }
}

/// `organ inspect --json PATH`, run as a child: at most MAX_INSPECTS at once, and killed
/// after the inspect timeout (waiting for a turn counts), so a file that blocks its reader
/// (a FIFO, a hung mount) costs one child for a while, never a server thread for ever.
/// The child writes its JSON into an unnamed file (at most the cap: past it the kernel
/// stops the child, RLIMIT_FSIZE); the answer streams that file, and the turn is held
/// until it has been sent, so at most MAX_INSPECTS such files exist at once.
pub(super) async fn inspect(
    State(s): State<Arc<AppState>>,
    q: Result<Query<PathQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Response> {
    let Query(q) = q.map_err(|e| bad(format!("query: {}", e.body_text())))?;
    let inspect = q.args(s.model(&q.path)?)?;
    let rel = q.path;
    let limit = s.inspect_timeout;
    let deadline = tokio::time::Instant::now() + limit;
    let turn = tokio::time::timeout_at(deadline, s.inspects.clone().acquire_owned())
        .await
        .map_err(|_| {
            ApiError(StatusCode::SERVICE_UNAVAILABLE, format!("{rel}: too many inspects waiting; try again later"))
        })?
        .map_err(internal)?;
    let results = s.root.join(RESULTS);
    let out = tokio::task::spawn_blocking(move || tempfile::tempfile_in(results))
        .await
        .map_err(internal)?
        .map_err(|e| internal(format!("{RESULTS}/: cannot make a file for the answer: {}", e.kind())))?;
    let stdout = out.try_clone().map_err(|e| internal(format!("inspect: {e}")))?;
    let max = s.inspect_max_bytes;
    let mut cmd = child::child_command(&s, crate::cli::argv(&inspect));
    cmd.stdout(stdout).stderr(std::process::Stdio::piped());
    child::limit_file_size(&mut cmd, max.saturating_add(1));
    let mut child = cmd.spawn().map_err(|e| internal(format!("cannot start organ: {e}")))?;
    let Some(stderr) = child.stderr.take() else {
        return Err(internal("organ inspect: no error pipe"));
    };
    let run = async {
        let mut err = Vec::new();
        let r = stderr.take(1 << 16).read_to_end(&mut err).await;
        let st = child.wait().await;
        (r.and(st), err)
    };
    let (status, err) = match tokio::time::timeout_at(deadline, run).await {
        Ok(r) => r,
        Err(_) => {
            child::kill_group(&mut child).await;
            let msg = format!("{rel}: inspect took longer than {limit:?} and was stopped");
            return Err(ApiError(StatusCode::GATEWAY_TIMEOUT, msg));
        }
    };
    let len = out.metadata().map_err(|e| internal(format!("inspect: {e}")))?.len();
    if len > max {
        let msg = format!("{rel}: its inspect JSON is over {max} bytes, more than this server returns; run organ inspect --json on the machine itself");
        return Err(ApiError(StatusCode::UNPROCESSABLE_ENTITY, msg));
    }
    match status {
        Ok(st) if st.success() => {
            let mut out = out;
            out.seek(SeekFrom::Start(0)).map_err(|e| internal(format!("inspect: {e}")))?;
            let file = tokio::fs::File::from_std(out).take(len);
            let body = tokio_util::io::ReaderStream::with_capacity(file, 64 << 10).map(move |chunk| {
                let _turn = &turn;
                chunk
            });
            Ok((
                [(header::CONTENT_TYPE, "application/json".to_owned()), (header::CONTENT_LENGTH, len.to_string())],
                Body::from_stream(body),
            )
                .into_response())
        }
        Ok(_) => {
            let mut said = child::Said::default();
            for line in err.split(|&b| b == b'\n') {
                said.take(line);
            }
            let msg = said.error().unwrap_or_else(|| "organ inspect failed".into());
            Err(ApiError(StatusCode::UNPROCESSABLE_ENTITY, s.hide_root(&format!("{rel}: {msg}"))))
        }
        Err(e) => Err(internal(format!("{rel}: organ inspect: {e}"))),
    }
}
