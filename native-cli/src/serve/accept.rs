//! The accept loop: hyper's HTTP/1 over TCP, with the timeouts and the connection cap
//! that axum::serve cannot set.

use super::Options;
use anyhow::Context;
use axum::Router;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

/// The address a connection was accepted on (a request extension), so `guard` accepts
/// `Host` naming it when the server listens on every address.
#[derive(Clone, Copy)]
pub(super) struct LocalAddr(pub(super) SocketAddr);

/// Serves connections as hyper's HTTP/1 (rather than axum::serve, which cannot time out a
/// client): at most `max_connections` at once (the rest wait in the kernel's backlog), a
/// header read timeout (also the keep-alive idle limit), and a watchdog closing any
/// connection on which nothing has moved for `idle_timeout`.
pub(super) async fn accept_loop(listener: tokio::net::TcpListener, app: Router, opts: &Options) -> anyhow::Result<()> {
    let slots = Arc::new(Semaphore::new(opts.max_connections.max(1)));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(hyper_util::rt::TokioTimer::new()).header_read_timeout(opts.header_timeout);
    let idle = opts.idle_timeout;
    loop {
        let slot = slots.clone().acquire_owned().await.context("connection slots closed")?;
        let (tcp, _peer) = match listener.accept().await {
            Ok(c) => c,
            Err(_) => {
                // Out of descriptors, or a connection reset before it was accepted: wait
                // a little rather than spin, and carry on.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let local = tcp.local_addr().ok();
        let last = Arc::new(AtomicU64::new(now_ms()));
        let io = hyper_util::rt::TokioIo::new(Watched { inner: tcp, last: last.clone() });
        let app = app.clone();
        let svc = hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
            if let Some(l) = local {
                req.extensions_mut().insert(LocalAddr(l));
            }
            tower_service::Service::call(&mut app.clone(), req)
        });
        let conn = http.serve_connection(io, svc);
        tokio::spawn(async move {
            let _slot = slot;
            tokio::pin!(conn);
            let watchdog = async {
                loop {
                    let quiet = Duration::from_millis(now_ms().saturating_sub(last.load(Ordering::Relaxed)));
                    if quiet >= idle {
                        return;
                    }
                    tokio::time::sleep(idle - quiet).await;
                }
            };
            // Either the connection ends, or it is dropped (closed) by the watchdog.
            tokio::select! {
                _ = &mut conn => {}
                () = watchdog => {}
            }
        });
    }
}

/// Milliseconds on a monotonic clock.
fn now_ms() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START.get_or_init(std::time::Instant::now).elapsed().as_millis() as u64
}

/// A socket that notes when bytes last moved, for the idle watchdog.
struct Watched {
    inner: tokio::net::TcpStream,
    last: Arc<AtomicU64>,
}

impl tokio::io::AsyncRead for Watched {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.last.store(now_ms(), Ordering::Relaxed);
        }
        r
    }
}

impl tokio::io::AsyncWrite for Watched {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let r = std::pin::Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(r, std::task::Poll::Ready(Ok(n)) if n > 0) {
            self.last.store(now_ms(), Ordering::Relaxed);
        }
        r
    }
    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
