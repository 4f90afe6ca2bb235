//! A child `organ` process: how it is started (confined to the root, killed with the
//! server).

use super::AppState;

/// `organ` itself as a child for a request: argv (never a shell), confined to the root
/// (crate::input), its stdin closed, killed when dropped and when the server dies.
pub(super) fn child_command(s: &AppState) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(&s.exe);
    cmd.env(crate::input::CONFINE_ENV, &s.root)
        .env_remove("ORGAN_CACHE")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let parent = rustix::process::getpid();
    // SAFETY: between fork and exec this runs only two raw system calls (prctl, getppid)
    // through rustix, which allocate nothing and take no lock. The death signal follows the
    // thread that forks: a tokio worker thread, which lives as long as the server.
    unsafe {
        cmd.pre_exec(move || {
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
