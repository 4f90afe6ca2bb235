//! Jobs: the table of them, each one's run (a child `organ` under a permit, its events
//! followed, its outputs kept or removed), and the endpoints that show and cancel them.

use super::child::{child_command, Lines, Said};
use super::{internal, ApiResult, AppState, RESULTS};
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::IntoResponse;
use axum::Json;
use serde_json::value::RawValue;
use std::path::Path;
use std::sync::Arc;
use tokio::sync::watch;

#[derive(Clone, Debug, serde::Serialize, PartialEq)]
#[serde(rename_all = "snake_case")]
enum JobState {
    Queued,
    Running,
    Done,
    Failed,
    Cancelled,
}

#[derive(Clone, Debug, serde::Serialize)]
pub(super) struct JobStatus {
    id: String,
    kind: &'static str,
    state: JobState,
    /// Units done and total (tensors, for measure; comparable pairs, for diff), when the
    /// operation reports them.
    progress: Option<(u64, u64)>,
    /// The operation's output files, relative to the root (download: /api/results/…).
    outputs: Vec<String>,
    /// measure: the report (`organ measure --json`'s); diff: the compare report (`organ
    /// diff --json`'s); purify: its per-tensor report. Held as the file's text, checked to
    /// be JSON and compacted ([`compact`]): the client gets the CLI's bytes but for the
    /// whitespace between tokens (keys in its order, numbers as it wrote them), and a
    /// report costs its size, not a tree's.
    result: Option<Box<RawValue>>,
    error: Option<String>,
}

pub(super) struct Job {
    status: watch::Sender<JobStatus>,
    cancel: tokio::sync::Notify,
}

/// 128 random bits from the kernel, in hex: a job id nobody can guess, and no restart
/// repeats.
fn random_id() -> std::io::Result<String> {
    use std::io::Read;
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// Starts a job running `organ ARGS`; `outputs` are its output paths relative to the job
/// directory; `report` names a JSON file whose content becomes the job's result; `stdout`
/// names the file the child's standard output goes to (else it is thrown away).
pub(super) fn start_job(
    s: &Arc<AppState>,
    kind: &'static str,
    args: impl FnOnce(&Path) -> Vec<std::ffi::OsString>,
    outputs: Vec<String>,
    report: Option<&str>,
    stdout: Option<&str>,
) -> ApiResult<(StatusCode, Json<JobStatus>)> {
    let id = format!("job-{}", random_id().map_err(|e| internal(format!("cannot draw a job id: {e}")))?);
    let dir = s.root.join(RESULTS).join(&id);
    // New, or an error: a job never writes into (or later removes) a directory it did not
    // create itself.
    std::fs::create_dir(&dir).map_err(|e| internal(format!("{RESULTS}/{id}: cannot create: {e}")))?;
    let argv = args(&dir);
    let status = JobStatus {
        id: id.clone(),
        kind,
        state: JobState::Queued,
        progress: None,
        outputs: Vec::new(),
        result: None,
        error: None,
    };
    let (tx, _) = watch::channel(status.clone());
    let job = Arc::new(Job { status: tx, cancel: tokio::sync::Notify::new() });
    let table = s.jobs.lock().map_err(|_| internal("job table poisoned"));
    match table {
        Ok(mut t) => t.insert(id.clone(), job.clone()),
        Err(e) => {
            let _ = std::fs::remove_dir(&dir);
            return Err(e);
        }
    };
    let s2 = s.clone();
    let report = report.map(|r| dir.join(r));
    let stdout = stdout.map(|o| dir.join(o));
    tokio::spawn(async move {
        let cancelled = async {
            job.cancel.notified().await;
        };
        tokio::pin!(cancelled);
        let permit = tokio::select! {
            p = s2.permits.acquire() => p.ok(),
            () = &mut cancelled => None,
        };
        let Some(_permit) = permit else {
            let _ = std::fs::remove_dir_all(&dir);
            job.status.send_modify(|st| st.state = JobState::Cancelled);
            return;
        };
        job.status.send_modify(|st| st.state = JobState::Running);
        let mut cmd = child_command(&s2, &argv);
        cmd.stderr(std::process::Stdio::piped());
        // A new file in the job's own directory (create_new: never one put there).
        let out = match &stdout {
            Some(p) => std::fs::File::create_new(p).map(std::process::Stdio::from),
            None => Ok(std::process::Stdio::null()),
        };
        let spawned = out.and_then(|o| cmd.stdout(o).spawn());
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                job.status.send_modify(|st| {
                    st.state = JobState::Failed;
                    st.error = Some(format!("cannot start organ: {e}"));
                });
                return;
            }
        };
        let mut lines = child.stderr.take().map(Lines::new);
        let mut said = Said::default();
        let heard = |said: &mut Said, line: &[u8]| {
            if let Some(p) = said.take(line) {
                job.status.send_modify(|st| st.progress = Some(p));
            }
        };
        let exit = loop {
            tokio::select! {
                line = async { match &mut lines { Some(l) => l.next().await, None => std::future::pending().await } } => {
                    match line {
                        Ok(Some(l)) => heard(&mut said, &l),
                        _ => lines = None,
                    }
                }
                st = child.wait() => break st.ok(),
                () = &mut cancelled => {
                    let _ = child.kill().await;
                    let _ = std::fs::remove_dir_all(&dir);
                    job.status.send_modify(|st| { st.state = JobState::Cancelled; st.outputs.clear(); });
                    return;
                }
            }
        };
        // The process ended: read what is left of its stderr (the error event comes last).
        if let Some(l) = &mut lines {
            while let Ok(Some(line)) = l.next().await {
                heard(&mut said, &line);
            }
        }
        if exit.is_some_and(|e| e.success()) {
            let result = match report {
                Some(p) => {
                    let cap = s2.inspect_max_bytes;
                    tokio::task::spawn_blocking(move || load_report(&p, cap)).await.ok().flatten()
                }
                None => None,
            };
            let rel = |o: &String| format!("{RESULTS}/{id}/{o}", id = job.status.borrow().id);
            let outs: Vec<String> = outputs.iter().filter(|o| dir.join(o).exists()).map(rel).collect();
            job.status.send_modify(|st| {
                st.state = JobState::Done;
                st.outputs = outs;
                st.result = result;
            });
        } else {
            let _ = std::fs::remove_dir_all(&dir);
            let msg = said.error().map(|m| s2.hide_root(&m)).unwrap_or_else(|| "organ failed".into());
            job.status.send_modify(|st| {
                st.state = JobState::Failed;
                st.error = Some(msg);
            });
        }
    });
    Ok((StatusCode::ACCEPTED, Json(status)))
}

/// A job's report file as its result: checked to be JSON, compacted. The report stays a
/// download either way; it is held in the job's state (and sent with every status) only up
/// to `cap` bytes (inspect's cap).
fn load_report(path: &Path, cap: u64) -> Option<Box<RawValue>> {
    let bytes = std::fs::metadata(path).ok().filter(|m| m.len() <= cap).and_then(|_| std::fs::read(path).ok())?;
    let raw = serde_json::from_slice::<Box<RawValue>>(&bytes).ok()?;
    drop(bytes);
    RawValue::from_string(compact(raw.get())).ok()
}

/// Valid JSON without the whitespace between its tokens (which, in valid JSON, never
/// separates two values that would then run together). A status goes out as one SSE
/// `data:` line only when it holds no newline.
fn compact(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in json.chars() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if !matches!(c, ' ' | '\n' | '\r' | '\t') {
            in_string = c == '"';
            out.push(c);
        }
    }
    out
}

pub(super) async fn job_status(
    State(s): State<Arc<AppState>>,
    UrlPath(id): UrlPath<String>,
) -> ApiResult<Json<JobStatus>> {
    let job = s.job(&id)?;
    let st = job.status.borrow().clone();
    Ok(Json(st))
}

pub(super) async fn job_cancel(
    State(s): State<Arc<AppState>>,
    UrlPath(id): UrlPath<String>,
) -> ApiResult<Json<JobStatus>> {
    let job = s.job(&id)?;
    let state = job.status.borrow().state.clone();
    if matches!(state, JobState::Queued | JobState::Running) {
        job.cancel.notify_one();
        // Wait (briefly) for the job to acknowledge, so the answer shows the final state.
        let mut rx = job.status.subscribe();
        let _ = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            rx.wait_for(|st| !matches!(st.state, JobState::Queued | JobState::Running)),
        )
        .await;
    }
    let st = job.status.borrow().clone();
    Ok(Json(st))
}

/// Server-Sent Events: the job's status each time it changes, until it ends.
pub(super) async fn job_events(
    State(s): State<Arc<AppState>>,
    UrlPath(id): UrlPath<String>,
) -> ApiResult<impl IntoResponse> {
    let rx = s.job(&id)?.status.subscribe();
    let stream = futures_util::stream::unfold((rx, false), |(mut rx, done)| async move {
        if done {
            return None;
        }
        let st = rx.borrow_and_update().clone();
        let end = !matches!(st.state, JobState::Queued | JobState::Running);
        if !end && rx.changed().await.is_err() {
            return None;
        }
        let ev = Event::default().event("status").json_data(&st).unwrap_or_default();
        Some((Ok::<_, std::convert::Infallible>(ev), (rx, end)))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

#[cfg(test)]
mod tests {
    use super::compact;

    #[test]
    fn compact_drops_whitespace_between_tokens_only() {
        let pretty = "{\n  \"a b\": [1, 2.5e-3, null],\n\t\"q\\\" \\\\\": \" x\\n \",\r\n  \"o\": { }\n}\n";
        let c = compact(pretty);
        assert_eq!(c, r#"{"a b":[1,2.5e-3,null],"q\" \\":" x\n ","o":{}}"#);
        let (x, y): (serde_json::Value, serde_json::Value) =
            (serde_json::from_str(pretty).unwrap(), serde_json::from_str(&c).unwrap());
        assert_eq!(x, y);
    }
}
