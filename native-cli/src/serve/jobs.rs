//! Jobs started and run: each one a child `organ` under a permit, its events followed, its
//! time limited, its outputs kept or removed. What a job is ([`super::job`]) and when a
//! finished one goes away ([`super::retention`]) are theirs.

use super::child::{child_command, kill_group, Lines, Said};
use super::job::{Job, JobState, JobStatus, ResultFile};
use super::{internal, ApiResult, AppState, RESULTS};
use axum::http::StatusCode;
use axum::Json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// 128 random bits from the kernel, in hex: a job id nobody can guess, and no restart
/// repeats.
fn random_id() -> std::io::Result<String> {
    use std::io::Read;
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// Starts a job running `organ ARGS`; `outputs` are its output paths relative to the job
/// directory; `report` names a JSON file that is the job's result; `stdout` names the file
/// the child's standard output goes to (else it is thrown away).
pub(super) fn start_job(
    s: &Arc<AppState>,
    kind: &'static str,
    args: impl FnOnce(&Path) -> Vec<std::ffi::OsString>,
    outputs: Vec<String>,
    report: Option<&str>,
    stdout: Option<&str>,
) -> ApiResult<(StatusCode, Json<JobStatus>)> {
    super::retention::keep_sweeping(s);
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
        error: None,
        result: None,
        ended: None,
    };
    let (tx, _) = watch::channel(status.clone());
    let job = Arc::new(Job { status: tx, cancel: tokio::sync::Notify::new(), dir: dir.clone() });
    let table = s.jobs.lock().map_err(|_| internal("job table poisoned"));
    match table {
        Ok(mut t) => t.insert(id.clone(), job.clone()),
        Err(e) => {
            let _ = std::fs::remove_dir(&dir);
            return Err(e);
        }
    };
    let run = Run {
        s: s.clone(),
        job,
        argv,
        outputs,
        report: report.map(|r| dir.join(r)),
        stdout: stdout.map(|o| dir.join(o)),
    };
    tokio::spawn(async move {
        let s = run.s.clone();
        run.run().await;
        // A job that ended may put the table over its count of finished jobs.
        let _ = tokio::task::spawn_blocking(move || super::retention::sweep(&s)).await;
    });
    Ok((StatusCode::ACCEPTED, Json(status)))
}

/// What one job's task needs.
struct Run {
    s: Arc<AppState>,
    job: Arc<Job>,
    argv: Vec<std::ffi::OsString>,
    outputs: Vec<String>,
    report: Option<PathBuf>,
    stdout: Option<PathBuf>,
}

impl Run {
    async fn run(self) {
        let Run { s, job, argv, outputs, report, stdout } = self;
        let dir = &job.dir;
        let cancelled = async {
            job.cancel.notified().await;
        };
        tokio::pin!(cancelled);
        let permit = tokio::select! {
            p = s.permits.acquire() => p.ok(),
            () = &mut cancelled => None,
        };
        let Some(_permit) = permit else {
            let _ = std::fs::remove_dir_all(dir);
            job.end(JobState::Cancelled, |_| {});
            return;
        };
        job.status.send_modify(|st| st.state = JobState::Running);
        // The wall-clock limit counts from here: waiting in the queue is not running. A
        // limit too far off to add to the clock is none.
        let deadline = s.job_timeout.and_then(|t| tokio::time::Instant::now().checked_add(t));
        let mut cmd = child_command(&s, &argv);
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
                let _ = std::fs::remove_dir_all(dir);
                job.end(JobState::Failed, |st| st.error = Some(format!("cannot start organ: {e}")));
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
                    kill_group(&mut child).await;
                    let _ = std::fs::remove_dir_all(dir);
                    job.end(JobState::Cancelled, |st| st.outputs.clear());
                    return;
                }
                () = until(deadline) => {
                    kill_group(&mut child).await;
                    let _ = std::fs::remove_dir_all(dir);
                    let limit = s.job_timeout.unwrap_or_default();
                    job.end(JobState::Failed, |st| st.error = Some(over_time(limit)));
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
                Some(p) => tokio::task::spawn_blocking(move || check_report(p)).await.ok().flatten(),
                None => None,
            };
            let id = job.status.borrow().id.clone();
            let outs: Vec<String> =
                outputs.iter().filter(|o| dir.join(o).exists()).map(|o| format!("{RESULTS}/{id}/{o}")).collect();
            job.end(JobState::Done, |st| {
                st.outputs = outs;
                st.result = result;
            });
        } else {
            let _ = std::fs::remove_dir_all(dir);
            let msg = said.error().map(|m| s.hide_root(&m)).unwrap_or_else(|| "organ failed".into());
            job.end(JobState::Failed, |st| st.error = Some(msg));
        }
    }
}

/// Sleeps until `deadline`, or for ever without one.
async fn until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// The error of a job stopped by the server's wall-clock limit.
fn over_time(limit: Duration) -> String {
    format!(
        "the job ran longer than this server's limit of {} s per job (organ serve --job-timeout) and was stopped",
        limit.as_secs()
    )
}

/// A job's report file as its result: a regular file that reads through as one JSON value
/// (parsed as a stream, nothing kept), and its length.
fn check_report(path: PathBuf) -> Option<ResultFile> {
    use std::io::Read;
    let file = std::fs::File::open(&path).ok()?;
    let meta = file.metadata().ok().filter(std::fs::Metadata::is_file)?;
    let reader = std::io::BufReader::with_capacity(64 << 10, file.take(meta.len()));
    serde_json::from_reader::<_, serde::de::IgnoredAny>(reader).ok()?;
    Some(ResultFile { path, len: meta.len() })
}
