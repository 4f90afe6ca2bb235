//! A job as the server keeps it: its state, its status as the API shows it, and its entry
//! in the table (the channel its status goes out on, its cancel signal, its directory).
//! What a job holds in memory is small (ids, state, progress, output names, an error
//! sentence): its report stays in its file, and [`super::results`] streams it from there.

use std::path::PathBuf;
use std::time::Instant;
use tokio::sync::watch;

#[derive(Clone, Copy, Debug, serde::Serialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub(super) enum JobState {
    Queued,
    Running,
    Done,
    Failed,
    Cancelled,
    /// Only in the answer to `DELETE` of a finished job: its entry and results are gone.
    Deleted,
}

impl JobState {
    pub(super) fn finished(self) -> bool {
        !matches!(self, JobState::Queued | JobState::Running)
    }
}

#[derive(Clone, Debug, serde::Serialize)]
pub(super) struct JobStatus {
    pub(super) id: String,
    pub(super) kind: &'static str,
    pub(super) state: JobState,
    /// Units done and total (tensors, for measure; comparable pairs, for diff), when the
    /// operation reports them.
    pub(super) progress: Option<(u64, u64)>,
    /// The operation's output files, relative to the root (download: /api/results/…).
    pub(super) outputs: Vec<String>,
    pub(super) error: Option<String>,
    /// The report that is the job's result (measure's, diff's, purify's…), once the job is
    /// done and the file was read through as JSON: never held here, sent from the file
    /// ([`super::results`]).
    #[serde(skip)]
    pub(super) result: Option<ResultFile>,
    /// When the job reached its final state (the retention counts from there).
    #[serde(skip)]
    pub(super) ended: Option<Instant>,
}

/// A job's report on disk: its path and the length it had when the job ended (a file of
/// another length is not sent).
#[derive(Clone, Debug)]
pub(super) struct ResultFile {
    pub(super) path: PathBuf,
    pub(super) len: u64,
}

pub(super) struct Job {
    pub(super) status: watch::Sender<JobStatus>,
    pub(super) cancel: tokio::sync::Notify,
    /// ROOT/results/JOB, which this job created and is the only one to remove.
    pub(super) dir: PathBuf,
}

impl Job {
    /// Ends the job in `state`, stamping the time (for the retention).
    pub(super) fn end(&self, state: JobState, f: impl FnOnce(&mut JobStatus)) {
        self.status.send_modify(|st| {
            st.state = state;
            st.ended = Some(Instant::now());
            f(st);
        });
    }
}
