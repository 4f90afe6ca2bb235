//! Who may ask: `Host` must name this server and browsers' requests must come from it
//! (against DNS rebinding and cross-site requests), `/api` needs the token when there is
//! one; and the isolation headers the browser app's page needs.

use super::accept::LocalAddr;
use super::{ApiError, ApiResult, AppState};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::net::IpAddr;
use std::sync::Arc;

/// The host part of a `Host` header or an origin's authority, lowercased, without port or
/// IPv6 brackets; None when it is not of that form.
fn host_part(authority: &str) -> Option<String> {
    let a = authority.trim().to_ascii_lowercase();
    let host = if let Some(rest) = a.strip_prefix('[') {
        let (h, tail) = rest.split_once(']')?;
        if !(tail.is_empty() || tail.strip_prefix(':').is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()))) {
            return None;
        }
        h.to_owned()
    } else {
        match a.split_once(':') {
            Some((h, p)) if p.bytes().all(|b| b.is_ascii_digit()) => h.to_owned(),
            Some(_) => return None,
            None => a,
        }
    };
    (!host.is_empty()).then_some(host)
}

/// Whether `host` (from host_part) names this server.
fn host_allowed(s: &AppState, host: &str, local: Option<IpAddr>) -> bool {
    if s.hosts.iter().any(|h| h == host) {
        return true;
    }
    match host.parse::<IpAddr>() {
        Ok(ip) => local == Some(ip) || s.hosts.iter().any(|h| h.parse::<IpAddr>().ok() == Some(ip)),
        Err(_) => false,
    }
}

/// Against DNS rebinding and cross-site requests, on every request: `Host` must name this
/// server (else 421); a browser request from another site gets 403 (an `Origin` that is not
/// http(s)://ALLOWED-HOST[:port], or `Sec-Fetch-Site: cross-site`), except a plain
/// navigation (a link followed to the app's page, which the other site cannot read).
pub(super) async fn guard(State(s): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    if let Err(e) = check_site(&s, &req) {
        return e.into_response();
    }
    next.run(req).await
}

fn check_site(s: &AppState, req: &Request) -> ApiResult<()> {
    let local = req.extensions().get::<LocalAddr>().map(|l| l.0.ip());
    let header = |name: &str| req.headers().get(name).map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let host = header("host").or_else(|| req.uri().authority().map(|a| a.to_string()));
    let Some(host) = host else {
        return Err(ApiError(StatusCode::MISDIRECTED_REQUEST, "no Host header: name this server in Host".into()));
    };
    if !host_part(&host).is_some_and(|h| host_allowed(s, &h, local)) {
        let msg = format!(
            "Host {host:?} does not name this server: use localhost, 127.0.0.1 or [::1], or start it with --allow-host NAME"
        );
        return Err(ApiError(StatusCode::MISDIRECTED_REQUEST, msg));
    }
    let navigation = matches!(req.method(), &axum::http::Method::GET | &axum::http::Method::HEAD)
        && header("sec-fetch-mode").as_deref() == Some("navigate");
    if navigation {
        return Ok(());
    }
    if let Some(origin) = header("origin") {
        let authority = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://"));
        let ok = authority.filter(|a| !a.contains('/')).and_then(host_part).is_some_and(|h| host_allowed(s, &h, local));
        if !ok {
            let msg = format!("cross-site request refused: Origin {origin:?} is not this server");
            return Err(ApiError(StatusCode::FORBIDDEN, msg));
        }
    }
    if header("sec-fetch-site").as_deref() == Some("cross-site") {
        return Err(ApiError(StatusCode::FORBIDDEN, "cross-site request refused (Sec-Fetch-Site: cross-site)".into()));
    }
    Ok(())
}

/// COOP/COEP on every answer, so the app's page is cross-origin isolated (threads).
pub(super) async fn isolation_headers(req: Request, next: Next) -> Response {
    let mut res = next.run(req).await;
    let h = res.headers_mut();
    h.insert("cross-origin-opener-policy", HeaderValue::from_static("same-origin"));
    h.insert("cross-origin-embedder-policy", HeaderValue::from_static("require-corp"));
    res
}

pub(super) async fn auth(State(s): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    if let Some(token) = &s.token {
        let given = req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
        let ok = given
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|t| constant_time_eq(t.as_bytes(), token.as_bytes()));
        if !ok {
            let msg = if given.is_none() { "missing token: send Authorization: Bearer TOKEN" } else { "wrong token" };
            return ApiError(StatusCode::UNAUTHORIZED, msg.into()).into_response();
        }
    }
    next.run(req).await
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
