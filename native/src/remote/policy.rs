//! Where an API job's remote reads may go (`organ serve --allow-remote`, docs/api.md): the
//! schemes the operator allows, never a URL carrying credentials, and only destinations
//! that are not this machine's own network: loopback, link-local, private, unspecified,
//! multicast and reserved addresses (IPv4-mapped and embedding IPv6 forms included) and
//! the server's own addresses are refused unless `--allow-remote-private`, or named one by
//! one (`--allow-remote-to ADDR:PORT`). The cloud instance-metadata addresses are refused
//! always.
//!
//! The check is made on the address a name resolves to, when the connection is made: by a
//! [`ureq::Resolver`] for http(s) URLs and the Hub (so every redirect's new host is checked
//! as it is connected to), and by reqwest's resolver and a check of every request's and
//! redirect's literal address for the stores ([`super::store`]). A name that resolves to a
//! refused address fails as an unreachable host does, in one sentence that does not say
//! which it was.
//!
//! The server holds a [`Policy`] for the requests' own checks; its children, the jobs, get
//! it in the environment ([`Policy::to_env`]) and take it back by [`active`].

// Redaction is done by progress (every line written passes there, below remote); the
// server's answers use it from here.
pub use crate::progress::redact;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::sync::OnceLock;

/// The schemes an API job may read, comma-separated (set by `organ serve --allow-remote`
/// for its children; unset: none).
pub const SCHEMES_ENV: &str = crate::input::ALLOW_REMOTE_ENV;
/// Set to `1`: private destinations allowed (`--allow-remote-private`).
pub const PRIVATE_ENV: &str = "ORGAN_REMOTE_PRIVATE";
/// Destinations allowed although private, `ADDR:PORT` comma-separated (`--allow-remote-to`).
pub const ALLOW_TO_ENV: &str = "ORGAN_REMOTE_ALLOW_TO";
/// The prefix of the variables that hold what the operator gave API jobs to reach stores
/// and the Hub with (`ORGAN_API_AWS_ACCESS_KEY_ID`, `ORGAN_API_HF_TOKEN`, …): under
/// `organ serve`, the plain `AWS_*`, `GOOGLE_*`, `AZURE_*` and `HF_*` ones are not read.
pub const API_PREFIX: &str = "ORGAN_API_";

/// The one sentence for a destination refused or not reached: a client of the API cannot
/// tell a closed port from an open one, or either from a refused address.
pub const UNREACHABLE: &str =
    "no HTTP answer (the host is unreachable, did not answer in HTTP, or is one this server does not read from)";

/// What an API job may read.
#[derive(Clone, Debug, Default)]
pub struct Policy {
    /// Schemes allowed, lowercase (`https`, `http`, `hf`, `s3`, `gs`, `az`).
    pub schemes: Vec<String>,
    /// Loopback, private, link-local and the server's own addresses allowed.
    pub private: bool,
    /// Destinations allowed although private (port 0: any port of that address).
    pub allow_to: Vec<SocketAddr>,
}

/// The policy of this process: set under `organ serve` (its children get it in the
/// environment along with `ORGAN_CONFINE`), none on the command line.
pub fn active() -> Option<&'static Policy> {
    static P: OnceLock<Option<Policy>> = OnceLock::new();
    P.get_or_init(|| {
        std::env::var_os(crate::input::CONFINE_ENV)?;
        let list = |k: &str| -> Vec<String> {
            let v = std::env::var(k).unwrap_or_default();
            v.split(',').map(|s| s.trim().to_ascii_lowercase()).filter(|s| !s.is_empty()).collect()
        };
        Some(Policy {
            schemes: list(SCHEMES_ENV),
            private: std::env::var(PRIVATE_ENV).is_ok_and(|v| v == "1"),
            allow_to: list(ALLOW_TO_ENV).iter().filter_map(|s| s.parse().ok()).collect(),
        })
    })
    .as_ref()
}

/// The variable `name` (`HF_TOKEN`, `AWS_REGION`, …) as this process is to read it: under
/// `organ serve`, `ORGAN_API_NAME`, what the operator gave API jobs for that purpose; else
/// `NAME` itself.
pub fn var(name: &str) -> Option<String> {
    match active() {
        Some(_) => std::env::var(format!("{API_PREFIX}{name}")).ok(),
        None => std::env::var(name).ok(),
    }
}

impl Policy {
    /// The variables a child is given to hold this policy ([`active`]).
    pub fn to_env(&self) -> Vec<(&'static str, String)> {
        let to: Vec<String> = self.allow_to.iter().map(SocketAddr::to_string).collect();
        vec![
            (SCHEMES_ENV, self.schemes.join(",")),
            (PRIVATE_ENV, if self.private { "1" } else { "0" }.into()),
            (ALLOW_TO_ENV, to.join(",")),
        ]
    }

    /// Checks a URL a request names, before anything is fetched: an allowed scheme, no
    /// credentials, and a literal address (if the host is one) that may be read from.
    /// Names are checked when they are resolved, at connect time.
    ///
    /// # Errors
    /// A sentence that never repeats the URL's credentials.
    pub fn check_url(&self, u: &url::Url) -> Result<(), String> {
        let scheme = u.scheme();
        if !self.schemes.iter().any(|s| s == scheme) {
            let allowed = if self.schemes.is_empty() { "none".into() } else { self.schemes.join(", ") };
            return Err(format!(
                "this server reads no {scheme}:// URLs (allowed: {allowed}; the operator names them with \
                 --allow-remote-schemes)"
            ));
        }
        if !u.username().is_empty() || u.password().is_some() {
            return Err("a URL with credentials in it (user:password@): refused, and not repeated here".into());
        }
        let port = u.port_or_known_default().unwrap_or(0);
        let ip = match u.host() {
            Some(url::Host::Ipv4(a)) => IpAddr::V4(a),
            Some(url::Host::Ipv6(a)) => IpAddr::V6(a),
            _ => return Ok(()),
        };
        if !self.permits(SocketAddr::new(ip, port)) {
            return Err(format!(
                "{ip} is an address this server does not read from (loopback, private, link-local, \
                 multicast, reserved or its own; the operator allows them with --allow-remote-private)"
            ));
        }
        Ok(())
    }

    /// Whether a connection to `addr` may be made.
    pub fn permits(&self, addr: SocketAddr) -> bool {
        let ip = addr.ip().to_canonical();
        if is_metadata(ip) {
            return false;
        }
        // Port 0 on either side: any port (an entry for the whole address; a name a store's
        // client resolves before it says the port).
        let port = |a: &SocketAddr| a.port() == 0 || addr.port() == 0 || a.port() == addr.port();
        let named = |a: &SocketAddr| a.ip().to_canonical() == ip && port(a);
        if self.allow_to.iter().any(named) {
            return true;
        }
        self.private || !(is_private(ip) || is_own(ip))
    }
}

/// The addresses of cloud instance-metadata services (AWS, GCP, Azure; ECS task
/// credentials): never connected to by an API job.
fn is_metadata(ip: IpAddr) -> bool {
    const AWS_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254);
    matches!(ip, IpAddr::V4(a) if a == Ipv4Addr::new(169, 254, 169, 254) || a == Ipv4Addr::new(169, 254, 170, 2))
        || ip == IpAddr::V6(AWS_V6)
}

/// Loopback, private, link-local, shared (CGNAT), unspecified, multicast, broadcast and
/// reserved addresses, and IPv6 addresses that embed one of them (mapped, compatible,
/// NAT64, 6to4), or ULA, link-local, site-local or Teredo ones.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(a) => is_private_v4(a),
        IpAddr::V6(a) => is_private_v6(a),
    }
}

fn is_private_v4(a: Ipv4Addr) -> bool {
    let [x, y, ..] = a.octets();
    x == 0                                  // "this network", 0.0.0.0 included
        || x == 10                          // RFC 1918
        || x == 127                         // loopback
        || (x == 100 && (64..128).contains(&y)) // shared address space (CGNAT), RFC 6598
        || (x == 169 && y == 254)           // link-local
        || (x == 172 && (16..32).contains(&y)) // RFC 1918
        || (x == 192 && y == 168)           // RFC 1918
        || (x == 192 && y == 0 && a.octets()[2] == 0) // IETF protocol assignments
        || (x == 198 && (18..20).contains(&y)) // benchmarking
        || x >= 224 // multicast, reserved, broadcast
}

fn is_private_v6(a: Ipv6Addr) -> bool {
    let s = a.segments();
    let embedded = |hi: u16, lo: u16| is_private_v4(Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo)));
    a.is_unspecified()
        || a.is_loopback()
        || (s[0] & 0xfe00) == 0xfc00      // ULA fc00::/7
        || (s[0] & 0xffc0) == 0xfe80      // link-local
        || (s[0] & 0xffc0) == 0xfec0      // site-local (deprecated)
        || (s[0] & 0xff00) == 0xff00      // multicast
        || (s[0] == 0x2001 && s[1] == 0)  // Teredo
        || (s[..5] == [0; 5] && (s[5] == 0xffff || s[5] == 0) && embedded(s[6], s[7])) // mapped, compatible
        || (s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] && embedded(s[6], s[7])) // NAT64
        || (s[0] == 0x2002 && embedded(s[1], s[2])) // 6to4
}

/// Whether `ip` is one of this machine's own addresses: the kernel lets a socket bind
/// only to those.
fn is_own(ip: IpAddr) -> bool {
    std::net::UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
}

/// The resolver of API jobs' http(s) clients: a name's addresses that may not be read
/// from are dropped; none left, and the connection fails as an unreachable host's does.
pub(super) struct Guard(pub &'static Policy);

impl ureq::Resolver for Guard {
    fn resolve(&self, netloc: &str) -> std::io::Result<Vec<SocketAddr>> {
        let ok: Vec<SocketAddr> = netloc.to_socket_addrs()?.filter(|a| self.0.permits(*a)).collect();
        if ok.is_empty() {
            return Err(std::io::Error::new(std::io::ErrorKind::ConnectionRefused, UNREACHABLE));
        }
        Ok(ok)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(private: bool, allow_to: &[&str]) -> Policy {
        Policy {
            schemes: vec!["https".into(), "http".into()],
            private,
            allow_to: allow_to.iter().map(|s| s.parse().unwrap()).collect(),
        }
    }

    #[test]
    fn private_addresses_are_refused_in_every_form() {
        let p = policy(false, &[]);
        for a in [
            "127.0.0.1:80",
            "127.3.2.1:8080",
            "0.0.0.0:80",
            "10.1.2.3:443",
            "172.16.0.1:80",
            "172.31.255.255:80",
            "192.168.1.1:80",
            "100.64.0.1:80",
            "100.127.255.254:80",
            "169.254.169.254:80",
            "169.254.1.1:80",
            "224.0.0.1:80",
            "255.255.255.255:80",
            "[::1]:80",
            "[::]:80",
            "[fc00::1]:80",
            "[fd12:3456::1]:80",
            "[fe80::1]:80",
            "[ff02::1]:80",
            "[::ffff:127.0.0.1]:80",
            "[::ffff:10.0.0.1]:80",
            "[::ffff:169.254.169.254]:80",
            "[::127.0.0.1]:80",
            "[64:ff9b::a00:1]:80",
            "[2002:7f00:1::]:80",
            "[fd00:ec2::254]:80",
        ] {
            assert!(!p.permits(a.parse().unwrap()), "{a} permitted");
        }
        for a in ["93.184.216.34:443", "8.8.8.8:80", "[2606:4700::1111]:443", "100.128.0.1:80", "172.32.0.1:80"] {
            assert!(p.permits(a.parse().unwrap()), "{a} refused");
        }
    }

    #[test]
    fn allow_private_and_allow_to_open_what_they_name_but_never_metadata() {
        let open = policy(true, &[]);
        assert!(open.permits("127.0.0.1:8080".parse().unwrap()));
        assert!(open.permits("[::1]:8080".parse().unwrap()));
        assert!(!open.permits("169.254.169.254:80".parse().unwrap()));
        assert!(!open.permits("[::ffff:169.254.169.254]:80".parse().unwrap()));
        assert!(!open.permits("[fd00:ec2::254]:80".parse().unwrap()));
        let one = policy(false, &["127.0.0.1:8080", "10.0.0.5:0"]);
        assert!(one.permits("127.0.0.1:8080".parse().unwrap()));
        assert!(!one.permits("127.0.0.1:8081".parse().unwrap()), "another port of an allowed address");
        assert!(one.permits("10.0.0.5:9000".parse().unwrap()));
        assert!(!one.permits("10.0.0.6:9000".parse().unwrap()));
    }

    /// A name is checked on what it resolves to: `localhost` resolves to loopback, so it is
    /// refused, as is a redirect's new host when it is connected to (same resolver).
    #[test]
    fn names_are_checked_on_their_resolved_addresses() {
        let p: &'static Policy = Box::leak(Box::new(policy(false, &[])));
        let err = ureq::Resolver::resolve(&Guard(p), "localhost:80").unwrap_err();
        assert_eq!(err.to_string(), UNREACHABLE);
        let open: &'static Policy = Box::leak(Box::new(policy(true, &[])));
        assert!(!ureq::Resolver::resolve(&Guard(open), "localhost:80").unwrap().is_empty());
        let agent = ureq::AgentBuilder::new().resolver(Guard(p)).build();
        let err = agent.get("http://localhost:9/x").call().unwrap_err();
        assert!(err.to_string().contains(UNREACHABLE), "{err}");
    }

    #[test]
    fn urls_are_checked_before_any_fetch() {
        let p = policy(false, &[]);
        let check = |s: &str| p.check_url(&url::Url::parse(s).unwrap());
        assert!(check("https://example.com/m.gguf").is_ok());
        assert!(check("s3://bucket/m.gguf").unwrap_err().contains("no s3:// URLs"));
        assert!(check("hf://o/r/m.gguf").unwrap_err().contains("no hf:// URLs"));
        let cred = check("http://user:hunter2@example.com/m.gguf").unwrap_err();
        assert!(cred.contains("credentials") && !cred.contains("hunter2"), "{cred}");
        assert!(check("http://127.0.0.1:8935/api/models").unwrap_err().contains("--allow-remote-private"));
        assert!(check("http://[::ffff:7f00:1]/m.gguf").is_err());
        assert!(check("http://169.254.169.254/latest/meta-data/").is_err());
    }
}
