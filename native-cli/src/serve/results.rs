//! A job's status and result as they are sent: the status from memory (small), the result
//! streamed from its report file, never read whole. `GET /api/jobs/{id}` and the SSE
//! stream's last event carry the report inline (without the whitespace between its tokens,
//! so an event stays one `data:` line); `GET /api/jobs/{id}/result` sends the file as the
//! CLI wrote it.

use super::job::{JobState, JobStatus, ResultFile};
use super::{ApiError, ApiResult, AppState};
use axum::body::{Body, Bytes};
use axum::extract::{Path as UrlPath, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, BoxStream, StreamExt};
use std::io;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// How much of a report is read (and sent) at a time.
const CHUNK: usize = 64 << 10;

/// SSE: a comment this often keeps a quiet stream (a long phase without progress) from
/// looking idle to proxies and to the server's own idle timeout.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// JSON without the whitespace between its tokens, a chunk at a time (a token may span
/// chunks). In valid JSON that whitespace never separates two values that would then run
/// together, and a string holds no raw newline, so the output is one line.
#[derive(Default)]
pub(super) struct Compactor {
    in_string: bool,
    escaped: bool,
}

impl Compactor {
    pub(super) fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(chunk.len());
        // Byte by byte: every byte of a multi-byte UTF-8 character is >= 0x80, never one of
        // the ASCII bytes looked at here.
        for &b in chunk {
            if self.in_string {
                out.push(b);
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                }
            } else if !matches!(b, b' ' | b'\n' | b'\r' | b'\t') {
                self.in_string = b == b'"';
                out.push(b);
            }
        }
        out
    }
}

type Chunks = BoxStream<'static, io::Result<Bytes>>;

/// The report file, opened and checked to be the length it had when the job ended (else
/// None: a result that changed is not sent).
async fn open(r: &ResultFile) -> Option<tokio::fs::File> {
    let f = tokio::fs::File::open(&r.path).await.ok()?;
    let meta = f.metadata().await.ok()?;
    (meta.is_file() && meta.len() == r.len).then_some(f)
}

/// `len` bytes of `file`, in chunks, compacted or not; an error if the file ends sooner.
fn read_chunks(file: tokio::fs::File, len: u64, compact: bool) -> Chunks {
    let start = (file, compact.then(Compactor::default), len);
    stream::unfold(Some(start), |state| async move {
        let (mut f, mut c, left) = state?;
        if left == 0 {
            return None;
        }
        let mut buf = vec![0u8; usize::try_from(left).unwrap_or(CHUNK).min(CHUNK)];
        match f.read(&mut buf).await {
            Ok(0) => {
                Some((Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the report shrank while it was sent")), None))
            }
            Ok(n) => {
                buf.truncate(n);
                let out = match &mut c {
                    Some(c) => c.push(&buf),
                    None => buf,
                };
                Some((Ok(Bytes::from(out)), Some((f, c, left - n as u64))))
            }
            Err(e) => Some((Err(e), None)),
        }
    })
    .boxed()
}

/// `prefix`, the status as JSON with its `result` (the report streamed from its file,
/// compacted, when there is one of at most `cap` bytes; else null), and `suffix`.
async fn status_chunks(st: JobStatus, cap: u64, prefix: &str, suffix: &'static str) -> Chunks {
    let mut head = serde_json::to_string(&st).unwrap_or_else(|_| "{}".into());
    head.pop(); // its closing brace: the result goes last
    head.insert_str(0, prefix);
    head.push_str(if head.ends_with('{') { "\"result\":" } else { ",\"result\":" });
    let file = match st.result.as_ref().filter(|r| r.len <= cap) {
        Some(r) => open(r).await.map(|f| (f, r.len)),
        None => None,
    };
    let body = match file {
        Some((f, len)) => read_chunks(f, len, true),
        None => stream::once(async { Ok(Bytes::from_static(b"null")) }).boxed(),
    };
    let head = stream::once(async move { Ok(Bytes::from(head)) });
    let tail = stream::once(async move { Ok(Bytes::from(format!("}}{suffix}"))) });
    head.chain(body).chain(tail).boxed()
}

/// `GET /api/jobs`: every job the server holds, without results (each is at
/// /api/jobs/{id}): running and queued first, then the finished, newest first. Ids are
/// what reaches a job's outputs, so the list is given only to a server started with
/// `--token` (every caller then holds the token, which reaches them all anyway).
pub(super) async fn jobs(State(s): State<Arc<AppState>>) -> ApiResult<Response> {
    if s.token.is_none() {
        let msg = "the job list is given only by a server started with --token: without one, a job's id is all that \
                   reaches its outputs, and a list would hand every id to every client";
        return Err(ApiError(StatusCode::FORBIDDEN, msg.into()));
    }
    let mut all: Vec<JobStatus> = {
        let table =
            s.jobs.lock().map_err(|_| ApiError(StatusCode::INTERNAL_SERVER_ERROR, "job table poisoned".into()))?;
        table.values().map(|j| j.status.borrow().clone()).collect()
    };
    // Unfinished first; then the latest to end first; ids break ties.
    all.sort_by(|a, b| {
        (a.state.finished(), std::cmp::Reverse(a.ended), &a.id).cmp(&(
            b.state.finished(),
            std::cmp::Reverse(b.ended),
            &b.id,
        ))
    });
    let body = serde_json::to_vec(&serde_json::json!({ "jobs": all }))
        .map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, format!("job list: {e}")))?;
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

/// `GET /api/jobs/{id}`: the status, with the result streamed in.
pub(super) async fn job_status(State(s): State<Arc<AppState>>, UrlPath(id): UrlPath<String>) -> ApiResult<Response> {
    let st = s.job(&id)?.status.borrow().clone();
    let body = Body::from_stream(status_chunks(st, s.inspect_max_bytes, "", "").await);
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

/// `GET /api/jobs/{id}/result`: the report file as the CLI wrote it, streamed.
pub(super) async fn job_result(State(s): State<Arc<AppState>>, UrlPath(id): UrlPath<String>) -> ApiResult<Response> {
    let st = s.job(&id)?.status.borrow().clone();
    if !st.state.finished() {
        let msg = format!("job {id:?} is {}: its result comes when it is done", state_name(st.state));
        return Err(ApiError(StatusCode::CONFLICT, msg));
    }
    let Some(r) = st.result.as_ref() else {
        let msg = format!("job {id:?} has no report to return (its outputs, if any, are files to download)");
        return Err(ApiError(StatusCode::NOT_FOUND, msg));
    };
    let Some(f) = open(r).await else {
        return Err(ApiError(StatusCode::GONE, format!("job {id:?}: its report is no longer there as it was")));
    };
    Ok((
        [(header::CONTENT_TYPE, "application/json".to_owned()), (header::CONTENT_LENGTH, r.len.to_string())],
        Body::from_stream(read_chunks(f, r.len, false)),
    )
        .into_response())
}

fn state_name(s: JobState) -> String {
    serde_json::to_value(s).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

/// Server-Sent Events: the job's status each time it changes, until it ends; the last
/// event carries the result, streamed from its file.
pub(super) async fn job_events(State(s): State<Arc<AppState>>, UrlPath(id): UrlPath<String>) -> ApiResult<Response> {
    let rx = s.job(&id)?.status.subscribe();
    let cap = s.inspect_max_bytes;
    // The state: the receiver, and whether the current status is still to be sent.
    let events = stream::unfold(Some((rx, true)), move |state| async move {
        let (mut rx, fresh) = state?;
        if !fresh {
            tokio::select! {
                changed = rx.changed() => {
                    if changed.is_err() {
                        return None;
                    }
                }
                () = tokio::time::sleep(KEEP_ALIVE) => {
                    let ping: Chunks = stream::once(async { Ok(Bytes::from_static(b":\n\n")) }).boxed();
                    return Some((ping, Some((rx, false))));
                }
            }
        }
        let st = rx.borrow_and_update().clone();
        let end = st.state.finished();
        let ev = status_chunks(st, cap, "event: status\ndata: ", "\n\n").await;
        Some((ev, (!end).then_some((rx, false))))
    })
    .flatten();
    Ok(([(header::CONTENT_TYPE, "text/event-stream"), (header::CACHE_CONTROL, "no-cache")], Body::from_stream(events))
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::Compactor;

    #[test]
    fn compacting_drops_whitespace_between_tokens_only_whatever_the_chunks() {
        let pretty =
            "{\n  \"a b\": [1, 2.5e-3, null],\n\t\"q\\\" \\\\\": \" x\\n \",\r\n  \"o\": { }, \"é\": \"ü \"\n}\n";
        let want = r#"{"a b":[1,2.5e-3,null],"q\" \\":" x\n ","o":{},"é":"ü "}"#;
        for size in 1..pretty.len() {
            let mut c = Compactor::default();
            let out: Vec<u8> = pretty.as_bytes().chunks(size).flat_map(|ch| c.push(ch)).collect();
            assert_eq!(String::from_utf8(out).unwrap(), want, "chunks of {size}");
        }
        let (x, y): (serde_json::Value, serde_json::Value) =
            (serde_json::from_str(pretty).unwrap(), serde_json::from_str(want).unwrap());
        assert_eq!(x, y);
    }
}
