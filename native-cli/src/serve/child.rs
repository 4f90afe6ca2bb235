//! A child `organ` process: how it is started (confined to the root, killed with the
//! server, in a process group of its own, reporting in `--progress jsonl` events), how it
//! is stopped (the whole group: llama-perplexity under `organ eval` too), and what it says
//! on stderr, read in bounded lines and taken as typed events (crate::progress).

use super::AppState;
use crate::cli::{argv, Global, RemoteFlags};
use crate::progress::{Event, Format};
use std::ffi::OsStr;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// The most of one stderr line kept; the rest of a longer line is skipped.
const MAX_LINE: usize = 64 << 10;

/// `organ ARGS --progress jsonl` as a child for a request: argv (never a shell), confined
/// to the root (crate::input), its stdin closed, killed when dropped and when the server
/// dies, leading a new process group (so [`kill_group`] reaches what it starts). The flag
/// comes after ARGS, so the subcommand stays the first argument.
pub(super) fn child_command<A: AsRef<OsStr>>(
    s: &AppState,
    args: impl IntoIterator<Item = A>,
) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(&s.exe);
    // The server's own limits on remote reads, when it reads remote models at all.
    let remote = match s.allow_remote {
        true => {
            let c = crate::remote::config();
            RemoteFlags {
                remote_max_whole: Some(c.max_whole),
                remote_speed_limit: Some(c.speed.limit),
                remote_speed_time: Some(c.speed.time.as_secs()),
                ..Default::default()
            }
        }
        false => RemoteFlags::default(),
    };
    cmd.args(args)
        .args(argv(&Global { progress: Format::Jsonl, remote, ..Default::default() }))
        .env(crate::input::CONFINE_ENV, &s.root)
        .env_remove("ORGAN_CACHE")
        .env_remove(crate::input::ALLOW_REMOTE_ENV)
        .env_remove(crate::remote::policy::PRIVATE_ENV)
        .env_remove(crate::remote::policy::ALLOW_TO_ENV)
        .env(crate::input::MAX_HEADER_BYTES_ENV, organ_core::limits::max_header_bytes().to_string())
        .stdin(std::process::Stdio::null())
        .process_group(0)
        .kill_on_drop(true);
    if s.allow_remote {
        // The policy the job's connections are checked by (crate::remote::policy).
        cmd.envs(s.remote.to_env());
    }
    let parent = rustix::process::getpid();
    // SAFETY: between fork and exec this runs only raw system calls (prctl, getppid) through
    // rustix and libc, which allocate nothing and take no lock. The death signal follows the
    // thread that forks: a tokio worker thread, which lives as long as the server.
    unsafe {
        cmd.pre_exec(move || {
            // The server runs without transparent huge pages (super::no_huge_pages), a
            // setting children inherit; a measurement is faster with them.
            libc::prctl(libc::PR_SET_THP_DISABLE, 0, 0, 0, 0);
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
            // The server may have died before the prctl: then nobody is left to signal us.
            if rustix::process::getppid() != Some(parent) {
                return Err(std::io::Error::from_raw_os_error(3)); // ESRCH
            }
            Ok(())
        });
    }
    cmd
}

/// Caps the size of any file the child writes (RLIMIT_FSIZE): a write past `bytes` stops
/// it (SIGXFSZ). For a child whose only output is a file the server reads afterwards.
pub(super) fn limit_file_size(cmd: &mut tokio::process::Command, bytes: u64) {
    let limit = rustix::process::Rlimit { current: Some(bytes), maximum: Some(bytes) };
    // SAFETY: between fork and exec this runs one raw system call (setrlimit) through
    // rustix, which allocates nothing and takes no lock.
    unsafe {
        cmd.pre_exec(move || {
            rustix::process::setrlimit(rustix::process::Resource::Fsize, limit)?;
            Ok(())
        });
    }
}

/// Kills a child's process group (the child leads it: [`child_command`]) and waits for the
/// child.
pub(super) async fn kill_group(child: &mut tokio::process::Child) {
    let pid = child.id().and_then(|p| i32::try_from(p).ok()).and_then(rustix::process::Pid::from_raw);
    if let Some(pid) = pid {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
    let _ = child.kill().await;
}

/// A child's stderr, line by line, each cut at [`MAX_LINE`] bytes: a child writing without
/// newlines costs the server that much memory, not more.
pub(super) struct Lines<R> {
    inner: BufReader<R>,
    line: Vec<u8>,
    /// Bytes of the current line were read (an empty line is still a line).
    started: bool,
}

impl<R: AsyncRead + Unpin> Lines<R> {
    pub(super) fn new(r: R) -> Self {
        Lines { inner: BufReader::new(r), line: Vec::new(), started: false }
    }

    /// The next line, without its newline; None at the end. Cancel-safe (for `select!`):
    /// what was read of a line is kept for the next call.
    pub(super) async fn next(&mut self) -> std::io::Result<Option<Vec<u8>>> {
        loop {
            let buf = self.inner.fill_buf().await?;
            if buf.is_empty() {
                let last = std::mem::take(&mut self.started).then(|| std::mem::take(&mut self.line));
                return Ok(last);
            }
            let (chunk, used, ends) = match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (&buf[..i], i + 1, true),
                None => (buf, buf.len(), false),
            };
            let room = MAX_LINE.saturating_sub(self.line.len());
            self.line.extend_from_slice(&chunk[..chunk.len().min(room)]);
            self.started = true;
            self.inner.consume(used);
            if ends {
                self.started = false;
                return Ok(Some(std::mem::take(&mut self.line)));
            }
        }
    }
}

/// What a child has said so far: its error event, or else its last line of plain text (a
/// panic, a usage error from clap: anything not from crate::progress).
#[derive(Default)]
pub(super) struct Said {
    error: Option<String>,
    text: Option<String>,
}

impl Said {
    /// Takes one stderr line; returns the progress (done, total) it reports, if it does.
    pub(super) fn take(&mut self, line: &[u8]) -> Option<(u64, u64)> {
        let line = String::from_utf8_lossy(line);
        let line = line.trim();
        if line.is_empty() {
            return None;
        }
        match serde_json::from_str::<Event>(line) {
            Ok(Event::Progress { done, total }) => return Some((done, total)),
            Ok(Event::Error(e)) => self.error = Some(e.message),
            Ok(_) => {}
            // An event of a later organ: not text for people either.
            Err(_) if serde_json::from_str::<serde_json::Value>(line).is_ok_and(|v| v.get("event").is_some()) => {}
            Err(_) => self.text = Some(line.to_owned()),
        }
        None
    }

    /// Why the child failed, in its own words, if it said.
    pub(super) fn error(self) -> Option<String> {
        self.error.or(self.text)
    }
}
