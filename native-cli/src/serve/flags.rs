//! `organ serve`'s flags ([`crate::cli::ServeArgs`]) to its options, checked.

use crate::cli::ServeArgs;
use anyhow::Result;
use std::net::SocketAddr;
use std::time::Duration;

/// Runs `organ serve` as its flags say (what [`crate::cli::run`] is handed for it).
///
/// # Errors
/// A flag is refused, or the server cannot start.
pub fn run_args(a: &ServeArgs) -> Result<()> {
    super::run(a.try_into()?)
}

impl TryFrom<&ServeArgs> for super::Options {
    type Error = anyhow::Error;

    fn try_from(a: &ServeArgs) -> Result<Self> {
        // clap takes an empty ORGAN_TOKEN for no token at all; serve refuses it instead.
        let token = a.token.clone().or_else(|| std::env::var("ORGAN_TOKEN").ok());
        let ms = Duration::from_millis;
        Ok(super::Options {
            root: a.root.clone(),
            addr: a.addr,
            token,
            jobs: a.jobs,
            web: a.web.clone(),
            max_body: a.max_body,
            allow_hosts: a.allow_hosts.clone(),
            inspect_timeout: ms(a.inspect_timeout_ms.max(1)),
            inspect_max_bytes: a.inspect_max_bytes,
            header_timeout: ms(a.header_timeout_ms.max(1)),
            body_timeout: ms(a.body_timeout_ms.max(1)),
            idle_timeout: ms(a.idle_timeout_ms.max(1)),
            max_connections: a.max_connections,
            allow_remote: a.allow_remote,
            job_timeout: (a.job_timeout > 0).then(|| Duration::from_secs(a.job_timeout)),
            job_retention: Duration::from_secs(a.job_retention),
            max_finished_jobs: usize::try_from(a.max_finished_jobs).unwrap_or(usize::MAX),
            remote: remote_policy(&a.allow_remote_schemes, a.allow_remote_private, &a.allow_remote_to)?,
        })
    }
}

/// The serve flags' remote policy: schemes checked against those organ reads.
fn remote_policy(schemes: &[String], private: bool, allow_to: &[SocketAddr]) -> Result<crate::remote::policy::Policy> {
    let schemes: Vec<String> =
        schemes.iter().map(|s| s.trim().to_ascii_lowercase()).filter(|s| !s.is_empty()).collect();
    if let Some(bad) = schemes.iter().find(|s| !["https", "http", "hf", "s3", "gs", "az"].contains(&s.as_str())) {
        anyhow::bail!("--allow-remote-schemes: {bad} is not one of https, http, hf, s3, gs, az");
    }
    Ok(crate::remote::policy::Policy { schemes, private, allow_to: allow_to.to_vec() })
}
