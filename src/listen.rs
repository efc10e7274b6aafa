//! The accept loop: HTTP/1.x and HTTP/2 (prior knowledge) on one port, both served by hyper;
//! the connection cap, every connection's timeouts, and graceful shutdown.
//!
//! The protocol is told from a `peek` at the connection's first bytes, so nothing is consumed
//! and each connection goes straight to hyper's HTTP/1.1 or HTTP/2 server. (hyper-util's
//! `auto` connection reads those bytes and hands them back through a rewinding wrapper, which
//! doubles hyper's HTTP/1.1 read buffer for the life of the connection.)
//!
//! Timeouts, so that no client can hold a socket without using it:
//! - the request head (HTTP/1.x) or the preface (HTTP/2) within `header_read_timeout_secs`
//!   (hyper also runs this timer while an HTTP/1.1 connection waits for its next request);
//! - a connection with no request in flight is closed after `idle_timeout_secs`;
//! - a request body must arrive whole within `body_timeout_secs` of its head (else 408);
//! - a write that makes no progress for `write_timeout_secs` ends the connection
//!   ([`io::WriteDeadline`]);
//! - HTTP/2: PINGs after `http2_keepalive_secs` of silence, unanswered ones close the
//!   connection, and at most `http2_max_streams` streams at once.

mod io;
mod service;

use std::future::Future;
use std::io::ErrorKind;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::config::ServerSettings;
use service::{Activity, ConnService};

/// The client preface that opens an HTTP/2 connection without an upgrade (RFC 9113, 3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// How long a connection closed for idleness may take to say goodbye (an HTTP/2 GOAWAY)
/// before it is dropped.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// The fewest file descriptors kept out of the connection cap, for everything else the process
/// opens (upstream requests, the store, search indexes, logs, tool processes).
const FD_RESERVE_MIN: u64 = 256;

/// What each connection is held to (from the `[server]` settings).
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    max_connections: usize,
    header_read: Duration,
    idle: Duration,
    body: Duration,
    write: Duration,
    h2_keepalive: Duration,
    h2_max_streams: u32,
    max_body_bytes: u64,
}

impl Limits {
    /// The limits of `s`.
    pub(crate) fn new(s: &ServerSettings) -> Self {
        Self {
            max_connections: s.max_connections,
            header_read: Duration::from_secs(s.header_read_timeout_secs),
            idle: Duration::from_secs(s.idle_timeout_secs),
            body: Duration::from_secs(s.body_timeout_secs),
            write: Duration::from_secs(s.write_timeout_secs),
            h2_keepalive: Duration::from_secs(s.http2_keepalive_secs),
            h2_max_streams: s.http2_max_streams,
            max_body_bytes: u64::try_from(s.max_body_bytes).unwrap_or(u64::MAX),
        }
    }
}

/// Serves `app` on `listener` until `shutdown` resolves; then stops accepting, asks every
/// connection to close once its responses are done, and returns when all are closed.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let limits = Arc::new(limits);
    let cap = connection_cap(limits.max_connections);
    // Connections hold a receiver each: their number is the receiver count less the loop's
    // own, and `closed()` tells when the last one has ended.
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut shutdown = pin!(shutdown);
    let mut warned: Option<Instant> = None;
    loop {
        let tcp = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => tcp,
                Err(e) => {
                    accept_failed(e).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        if stop_tx.receiver_count() > cap {
            // At the cap: the new connection is closed at once, which a client sees at once
            // (rather than waiting in the backlog); idle ones are closed by the timeouts.
            drop(tcp);
            if warned.is_none_or(|t| t.elapsed() > Duration::from_secs(10)) {
                tracing::warn!(cap, "at the connection cap; closing new connections");
                warned = Some(Instant::now());
            }
            continue;
        }
        // Small frames leave at once: with Nagle's algorithm a frame written behind another
        // waits for the client's delayed ACK (up to 40 ms).
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
        tokio::spawn(connection(
            tcp,
            app.clone(),
            Arc::clone(&limits),
            stop_rx.clone(),
        ));
    }
    drop(listener);
    drop(stop_rx);
    let _ = stop_tx.send(true);
    stop_tx.closed().await;
    Ok(())
}

/// The most connections served at once: the configured maximum, lowered so that a quarter of
/// the open-file limit (at least [`FD_RESERVE_MIN`]) is left for upstream requests and the rest:
/// an idle flood then never takes the descriptors that accepting and answering need. The soft
/// limit is first raised to the hard one, as most servers do.
fn connection_cap(configured: usize) -> usize {
    let nofile = raise_nofile_limit();
    let cap = cap_for(configured, nofile);
    tracing::info!(cap, open_file_limit = nofile, "connection cap");
    cap
}

fn cap_for(configured: usize, nofile: u64) -> usize {
    let reserve = (nofile / 4).max(FD_RESERVE_MIN);
    let fit = usize::try_from(nofile.saturating_sub(reserve)).unwrap_or(usize::MAX);
    configured.min(fit).max(1)
}

/// Raises the soft open-file limit to the hard one; returns the limit in force.
fn raise_nofile_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed to them.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 1024;
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                lim.rlim_cur = lim.rlim_max;
            }
        }
    }
    #[allow(clippy::useless_conversion)] // rlim_t is u64 on Linux, not everywhere
    u64::try_from(lim.rlim_cur).unwrap_or(u64::MAX)
}

/// Errors of one connection (reset before it was taken) are passed over; running out of file
/// descriptors or memory pauses accepting for a second rather than spinning.
async fn accept_failed(e: std::io::Error) {
    if matches!(
        e.kind(),
        ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset | ErrorKind::Interrupted
    ) {
        return;
    }
    tracing::error!(error = %e, "accepting a connection failed; retrying in 1 s");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// Serves one connection with the protocol its first bytes name.
async fn connection(
    tcp: TcpStream,
    app: Router,
    limits: Arc<Limits>,
    mut stop: watch::Receiver<bool>,
) {
    let h2 = tokio::select! {
        h2 = tokio::time::timeout(limits.header_read, is_h2(&tcp)) => match h2 {
            Ok(Ok(h2)) => h2,
            // Timed out, or gone before sending a byte.
            _ => return,
        },
        _ = stop.changed() => return,
    };
    let activity = Arc::new(Activity::default());
    let service = ConnService {
        app,
        activity: Arc::clone(&activity),
        max_body_bytes: limits.max_body_bytes,
        body_timeout: limits.body,
    };
    let io = TokioIo::new(io::WriteDeadline::new(tcp, limits.write));
    // Each connection is pinned where it is made: moved into `drive`, it would take its room in
    // this task twice. The HTTP/2 one is boxed, so the HTTP/1.1 connection of each browser
    // does not carry room for it.
    if h2 {
        let conn = Box::pin(
            hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .timer(TokioTimer::new())
                .keep_alive_interval(limits.h2_keepalive)
                .keep_alive_timeout(limits.h2_keepalive)
                .max_concurrent_streams(limits.h2_max_streams)
                .serve_connection(io, service),
        );
        drive(conn, stop, &activity, limits.idle, |c| {
            c.graceful_shutdown()
        })
        .await;
    } else {
        let conn = pin!(
            hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_read)
                .serve_connection(io, service)
        );
        drive(conn, stop, &activity, limits.idle, |c| {
            c.graceful_shutdown()
        })
        .await;
    }
}

/// Runs a connection to its end. Once the gateway stops, or the connection has been idle too
/// long, asks it to close gracefully (an HTTP/1.1 connection after its current response,
/// HTTP/2 with GOAWAY after its open streams); an idle one that does not close soon after
/// is dropped.
async fn drive<C, P, E>(
    mut conn: Pin<P>,
    mut stop: watch::Receiver<bool>,
    activity: &Activity,
    idle: Duration,
    graceful: impl Fn(Pin<&mut C>),
) where
    P: std::ops::DerefMut<Target = C>,
    C: Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    let mut idle_for = pin!(activity.idle_for(idle));
    let mut closing = false;
    let mut drop_at: Option<Instant> = None;
    let result = loop {
        tokio::select! {
            result = conn.as_mut() => break result,
            _ = stop.changed(), if !closing => {
                closing = true;
                graceful(conn.as_mut());
            }
            () = &mut idle_for, if drop_at.is_none() => {
                if !closing {
                    closing = true;
                    graceful(conn.as_mut());
                }
                drop_at = Some(Instant::now() + CLOSE_GRACE);
            }
            () = tokio::time::sleep_until(drop_at.unwrap_or_else(Instant::now)), if drop_at.is_some() => {
                tracing::debug!("idle connection did not close; dropped");
                return;
            }
        }
    };
    if let Err(e) = result {
        tracing::trace!(error = %e, "connection ended with an error");
    }
}

/// Whether the client opened with the HTTP/2 preface, read without consuming it. Waits only
/// while the bytes so far are a prefix of the preface: a method name differs from it by the
/// second byte at the latest.
async fn is_h2(tcp: &TcpStream) -> std::io::Result<bool> {
    let mut buf = [0u8; H2_PREFACE.len()];
    loop {
        let n = tcp.peek(&mut buf).await?;
        if n == 0 {
            return Err(ErrorKind::UnexpectedEof.into());
        }
        if buf[..n] != H2_PREFACE[..n] {
            return Ok(false);
        }
        if n == H2_PREFACE.len() {
            return Ok(true);
        }
        // A prefix of the preface (real clients send it in one write): `peek` returns at
        // once while any bytes are queued, so look again after a growing pause.
        let had = n;
        let mut pause = Duration::from_millis(1);
        while tcp.peek(&mut buf).await? == had {
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(100));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    async fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = TcpStream::connect(addr).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        (client, server)
    }

    #[test]
    fn the_cap_leaves_a_quarter_of_the_open_files_for_the_rest() {
        // The bench's limit: room for its 10,000 connections.
        assert_eq!(cap_for(20_000, 20_000), 15_000);
        assert_eq!(cap_for(20_000, 1024), 768);
        assert_eq!(cap_for(4, 1 << 20), 4);
        assert_eq!(cap_for(100, 100), 1);
    }

    #[tokio::test]
    async fn tells_http2_preface_from_http1_even_split_across_writes() {
        let (mut client, server) = pair().await;
        client.write_all(b"POST /x HTTP/1.1\r\n").await.unwrap();
        assert!(!is_h2(&server).await.unwrap());

        let (mut client, server) = pair().await;
        let detect = tokio::spawn(async move { is_h2(&server).await.unwrap() });
        client.write_all(&H2_PREFACE[..3]).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !detect.is_finished(),
            "three bytes of the preface decide nothing"
        );
        client.write_all(&H2_PREFACE[3..]).await.unwrap();
        assert!(detect.await.unwrap());

        // "PRI" followed by something else is HTTP/1.1 (and hyper answers it with an error).
        let (mut client, server) = pair().await;
        client.write_all(b"PRI /x HTTP/1.1\r\n").await.unwrap();
        assert!(!is_h2(&server).await.unwrap());

        let (client, server) = pair().await;
        drop(client);
        assert!(is_h2(&server).await.is_err());
    }
}
