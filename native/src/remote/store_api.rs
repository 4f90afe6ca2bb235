//! Stores as API jobs reach them (`organ serve --allow-remote-schemes …,s3`): with what the
//! operator gave for that purpose, never the machine's ambient credentials.
//!
//! - Settings and credentials come only from `ORGAN_API_AWS_*`, `ORGAN_API_GOOGLE_*` and
//!   `ORGAN_API_AZURE_*` (each the variable object_store reads, prefixed): the server's own
//!   `AWS_*`, `GOOGLE_*`, `AZURE_*` are not read.
//! - Without a credential among them (an access key, a service account, an account key, a
//!   SAS, a bearer token, a client secret, the emulator), requests go unsigned
//!   (`skip_signature`): object_store's fallbacks to an instance-metadata service (IMDS,
//!   the GCE metadata server, Azure managed identity) are never asked.
//! - The HTTP client is organ's: no proxy from the environment, every name resolved
//!   through the server's policy ([`super::policy`]), every literal address of a request
//!   or a redirect checked, and the metadata addresses refused whatever the policy.

use super::policy::{Policy, UNREACHABLE};
use object_store::client::{ClientConfigKey, ClientOptions, HttpClient};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

/// The `ORGAN_API_`-prefixed variables that start with `store` (`AWS_`, `GOOGLE_`,
/// `AZURE_`), prefix dropped and lowercased, as object_store's config keys are spelled.
fn vars(store: &str) -> Vec<(String, String)> {
    let prefix = format!("{}{store}", super::policy::API_PREFIX);
    std::env::vars()
        .filter_map(|(k, v)| {
            let rest = k.strip_prefix(super::policy::API_PREFIX)?;
            k.starts_with(&prefix).then(|| (rest.to_ascii_lowercase(), v))
        })
        .collect()
}

/// Whether the operator gave one of `keys` (lowercased, unprefixed names).
fn gave(vars: &[(String, String)], keys: &[&str]) -> bool {
    vars.iter().any(|(k, v)| !v.is_empty() && keys.contains(&k.as_str()))
}

/// An S3 builder for an API job: the operator's `ORGAN_API_AWS_*` only; unsigned without
/// an access key.
pub(super) fn s3() -> object_store::aws::AmazonS3Builder {
    let vars = vars("AWS_");
    let mut b = object_store::aws::AmazonS3Builder::new();
    for (k, v) in &vars {
        if let Ok(key) = k.parse() {
            b = b.with_config(key, v);
        }
    }
    b.with_skip_signature(!gave(&vars, &["aws_access_key_id"]))
}

/// A GCS builder for an API job: the operator's `ORGAN_API_GOOGLE_*` only; unsigned
/// without a service account.
pub(super) fn gcs() -> object_store::gcp::GoogleCloudStorageBuilder {
    let vars = vars("GOOGLE_");
    let mut b = object_store::gcp::GoogleCloudStorageBuilder::new();
    for (k, v) in &vars {
        if let Ok(key) = k.parse() {
            b = b.with_config(key, v);
        }
    }
    let signed = ["google_service_account", "google_service_account_path", "google_service_account_key"];
    let signed = gave(&vars, &signed) || gave(&vars, &["google_application_credentials"]);
    b.with_skip_signature(!signed)
}

/// An Azure builder for an API job: the operator's `ORGAN_API_AZURE_*` only; unsigned
/// without a key, SAS, token, client secret or the emulator.
pub(super) fn azure() -> object_store::azure::MicrosoftAzureBuilder {
    let vars = vars("AZURE_");
    let mut b = object_store::azure::MicrosoftAzureBuilder::new();
    for (k, v) in &vars {
        if let Ok(key) = k.parse() {
            b = b.with_config(key, v);
        }
    }
    let signed = [
        "azure_storage_account_key",
        "azure_storage_access_key",
        "azure_storage_master_key",
        "azure_storage_sas_key",
        "azure_storage_sas_token",
        "azure_storage_token",
        "azure_client_secret",
        "azure_storage_use_emulator",
    ];
    b.with_skip_signature(!gave(&vars, &signed))
}

/// The literal address of `url`'s host, if it is one, with its port.
fn literal(url: &url::Url) -> Option<SocketAddr> {
    let ip = match url.host()? {
        url::Host::Ipv4(a) => IpAddr::V4(a),
        url::Host::Ipv6(a) => IpAddr::V6(a),
        url::Host::Domain(_) => return None,
    };
    Some(SocketAddr::new(ip, url.port_or_known_default().unwrap_or(0)))
}

/// Whether a request to `uri` may be sent: a literal address must be permitted (a name is
/// checked when it is resolved, by [`Guarded`]).
pub(super) fn may_send(p: &Policy, uri: &http::Uri) -> bool {
    let Ok(u) = url::Url::parse(&uri.to_string()) else { return false };
    literal(&u).is_none_or(|a| p.permits(a))
}

/// reqwest's resolver for API jobs: a name's refused addresses dropped, none left an error.
struct Guarded(&'static Policy);

impl reqwest::dns::Resolve for Guarded {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let (p, host) = (self.0, name.as_str().to_owned());
        Box::pin(async move {
            let found = tokio::net::lookup_host((host.as_str(), 0)).await?;
            let ok: Vec<SocketAddr> = found.filter(|a| p.permits(*a)).collect();
            if ok.is_empty() {
                return Err(UNREACHABLE.into());
            }
            Ok::<reqwest::dns::Addrs, Box<dyn std::error::Error + Send + Sync>>(Box::new(ok.into_iter()))
        })
    }
}

/// The HTTP client of an API job's store: see the module's docs. Timeouts as the plain
/// URLs' (a read that waits `--remote-speed-time` is a stall); plain http only where the
/// store's options allow it.
pub(super) fn client(p: &'static Policy, options: &ClientOptions) -> object_store::Result<HttpClient> {
    let allow_http = options.get_config_value(&ClientConfigKey::AllowHttp).is_some_and(|v| v == "true");
    let redirects = reqwest::redirect::Policy::custom(move |a| match literal(a.url()) {
        Some(addr) if !p.permits(addr) => a.error(UNREACHABLE),
        _ if a.previous().len() >= 10 => a.stop(),
        _ => a.follow(),
    });
    let client = reqwest::Client::builder()
        .user_agent(concat!("organ/", env!("CARGO_PKG_VERSION")))
        .no_proxy()
        .dns_resolver(Arc::new(Guarded(p)))
        .redirect(redirects)
        .connect_timeout(std::time::Duration::from_secs(10))
        .read_timeout(super::pace::Pace::read_timeout(super::config().speed))
        .no_gzip()
        .no_brotli()
        .no_zstd()
        .no_deflate()
        .https_only(!allow_http)
        .build()
        .map_err(|e| object_store::Error::Generic { store: "HTTP", source: Box::new(e) })?;
    Ok(HttpClient::new(client))
}
