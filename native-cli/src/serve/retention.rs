//! Finished jobs go away: on request (`DELETE /api/jobs/{id}`, which cancels a job still
//! queued or running), after the retention (`--job-retention`), and the oldest first when
//! more than `--max-finished-jobs` are kept. Going away removes a job's entry and its
//! directory, ROOT/results/JOB, which that job created.

use super::job::{Job, JobState, JobStatus};
use super::{internal, ApiResult, AppState};
use axum::extract::{Path as UrlPath, State};
use axum::Json;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Removes the finished jobs past the retention, and the oldest finished ones beyond the
/// count: entries first (under the table's lock), then directories (blocking: run it off
/// the async threads).
pub(super) fn sweep(s: &AppState) {
    let now = Instant::now();
    let gone: Vec<Arc<Job>> = {
        let Ok(mut table) = s.jobs.lock() else { return };
        let mut finished: Vec<(Instant, String)> =
            table.iter().filter_map(|(id, j)| j.status.borrow().ended.map(|t| (t, id.clone()))).collect();
        finished.sort();
        let excess = finished.len().saturating_sub(s.max_finished_jobs);
        finished
            .iter()
            .enumerate()
            .filter(|(i, (ended, _))| *i < excess || now.saturating_duration_since(*ended) >= s.job_retention)
            .filter_map(|(_, (_, id))| table.remove(id))
            .collect()
    };
    for job in gone {
        let _ = std::fs::remove_dir_all(&job.dir);
    }
}

/// Starts the periodic sweep, once per server (from the first job, which runs inside the
/// server's runtime). It ends when the server's state is dropped.
pub(super) fn keep_sweeping(s: &Arc<AppState>) {
    if s.sweeping.swap(true, Ordering::AcqRel) {
        return;
    }
    let state = Arc::downgrade(s);
    let every = (s.job_retention / 4).clamp(Duration::from_secs(1), Duration::from_secs(60));
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(s) = state.upgrade() else { return };
            let _ = tokio::task::spawn_blocking(move || sweep(&s)).await;
        }
    });
}

/// `DELETE /api/jobs/{id}`: a queued or running job is cancelled (its process group
/// killed, its directory removed; the entry stays, "cancelled", until it expires or is
/// deleted in turn); a finished one is removed, entry and results, and the answer says
/// "deleted" (a later GET is a 404).
pub(super) async fn job_delete(
    State(s): State<Arc<AppState>>,
    UrlPath(id): UrlPath<String>,
) -> ApiResult<Json<JobStatus>> {
    let job = s.job(&id)?;
    let state = job.status.borrow().state;
    if !state.finished() {
        job.cancel.notify_one();
        // Wait (briefly) for the job to acknowledge, so the answer shows the final state.
        let mut rx = job.status.subscribe();
        let _ = tokio::time::timeout(Duration::from_secs(10), rx.wait_for(|st| st.state.finished())).await;
        let st = job.status.borrow().clone();
        return Ok(Json(st));
    }
    {
        let mut table = s.jobs.lock().map_err(|_| internal("job table poisoned"))?;
        // Only this very job (a concurrent DELETE may have removed it already).
        if table.get(&id).is_some_and(|j| Arc::ptr_eq(j, &job)) {
            table.remove(&id);
        }
    }
    let dir = job.dir.clone();
    tokio::task::spawn_blocking(move || std::fs::remove_dir_all(&dir))
        .await
        .map_err(internal)?
        .or_else(|e| if e.kind() == std::io::ErrorKind::NotFound { Ok(()) } else { Err(e) })
        .map_err(|e| internal(format!("{id}: its results could not all be removed: {}", e.kind())))?;
    let mut st = job.status.borrow().clone();
    st.state = JobState::Deleted;
    st.outputs.clear();
    st.result = None;
    Ok(Json(st))
}
