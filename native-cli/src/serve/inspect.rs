//! `GET /api/inspect`: `organ inspect --json` run as a child, bounded in time and size.

use super::{bad, child, internal, ApiError, ApiResult, AppState};
use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use std::ffi::OsStr;
use std::sync::Arc;
use tokio::io::AsyncReadExt;

#[derive(Deserialize)]
pub(super) struct PathQuery {
    path: String,
}

/// `organ inspect --json PATH`, run as a child: at most MAX_INSPECTS at once, and killed
/// after the inspect timeout (waiting for a turn counts), so a file that blocks its reader
/// (a FIFO, a hung mount) costs one child for a while, never a server thread for ever.
pub(super) async fn inspect(
    State(s): State<Arc<AppState>>,
    q: Result<Query<PathQuery>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Response> {
    let Query(q) = q.map_err(|e| bad(format!("query: {}", e.body_text())))?;
    let path = s.model(&q.path)?;
    let rel = q.path;
    let limit = s.inspect_timeout;
    let deadline = tokio::time::Instant::now() + limit;
    let _turn = tokio::time::timeout_at(deadline, s.inspects.acquire()).await.map_err(|_| {
        ApiError(StatusCode::SERVICE_UNAVAILABLE, format!("{rel}: too many inspects waiting; try again later"))
    })?;
    let mut cmd = child::child_command(&s, [OsStr::new("inspect"), OsStr::new("--json"), path.as_os_str()]);
    cmd.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| internal(format!("cannot start organ: {e}")))?;
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(internal("organ inspect: no output pipes"));
    };
    let max = s.inspect_max_bytes;
    let run = async {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let (mut stdout, mut stderr) = (stdout.take(max.saturating_add(1)), stderr.take(1 << 16));
        let read_out = async {
            let r = stdout.read_to_end(&mut out).await;
            // Over the cap, the child would block on its next write: stop it now.
            if out.len() as u64 > max {
                let _ = child.start_kill();
            }
            r
        };
        let (o, _) = tokio::join!(read_out, stderr.read_to_end(&mut err));
        let st = child.wait().await;
        (o.and(st), out, err)
    };
    let (status, out, err) = match tokio::time::timeout_at(deadline, run).await {
        Ok(r) => r,
        Err(_) => {
            let _ = child.kill().await;
            let msg = format!("{rel}: inspect took longer than {limit:?} and was stopped");
            return Err(ApiError(StatusCode::GATEWAY_TIMEOUT, msg));
        }
    };
    if out.len() as u64 > max {
        let msg = format!("{rel}: its inspect JSON is over {max} bytes, more than this server returns; run organ inspect --json on the machine itself");
        return Err(ApiError(StatusCode::UNPROCESSABLE_ENTITY, msg));
    }
    match status {
        Ok(st) if st.success() => Ok(([(header::CONTENT_TYPE, "application/json")], out).into_response()),
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
