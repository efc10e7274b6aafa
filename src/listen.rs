//! The accept loop: HTTP/1.x and HTTP/2 (prior knowledge) on one port, graceful shutdown.
//!
//! The protocol is told from a `peek` at the connection's first bytes, so nothing is consumed:
//! HTTP/2 goes to hyper's server, HTTP/1.x to the gateway's own ([`crate::http1`]).
//! (`axum::serve` reads those bytes through hyper-util's `auto` connection and hands them back
//! through a rewinding wrapper, which doubled hyper's HTTP/1.1 read buffer.)

use std::future::Future;
use std::io::ErrorKind;
use std::pin::pin;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// The client preface that opens an HTTP/2 connection without an upgrade (RFC 9113, 3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// How long a client may take to send its request head (or, for HTTP/2, its preface).
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);

/// Serves `app` on `listener` until `shutdown` resolves; then stops accepting, asks every
/// connection to close once its responses are done, and returns when all are closed.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    // Connections hold a receiver each: `closed()` tells when the last one has ended.
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut shutdown = pin!(shutdown);
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
        // Small frames leave at once: with Nagle's algorithm a frame written behind another
        // waits for the client's delayed ACK (up to 40 ms).
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
        tokio::spawn(connection(tcp, app.clone(), stop_rx.clone()));
    }
    drop(listener);
    drop(stop_rx);
    let _ = stop_tx.send(true);
    stop_tx.closed().await;
    Ok(())
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
async fn connection(tcp: TcpStream, app: Router, mut stop: watch::Receiver<bool>) {
    let h2 = tokio::select! {
        h2 = tokio::time::timeout(HEAD_TIMEOUT, is_h2(&tcp)) => match h2 {
            Ok(Ok(h2)) => h2,
            // Timed out, or gone before sending a byte.
            _ => return,
        },
        _ = stop.changed() => return,
    };
    if !h2 {
        return crate::http1::serve(tcp, app, stop).await;
    }
    // Boxed: the HTTP/1.1 connection of each browser does not carry room for it.
    let mut conn = Box::pin(
        hyper::server::conn::http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .serve_connection(TokioIo::new(tcp), TowerToHyperService::new(app)),
    );
    // Once the gateway stops: GOAWAY, then the open streams run to their end.
    let result = tokio::select! {
        result = conn.as_mut() => result,
        _ = stop.changed() => {
            conn.as_mut().graceful_shutdown();
            conn.await
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
