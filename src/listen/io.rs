//! The client socket with a write deadline: a client that stops reading cannot hold a
//! connection (and the run streaming to it) forever.

use std::future::Future;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// A socket whose writes fail with `TimedOut` once they have made no progress for `timeout`.
/// hyper then ends the connection, and the responses on it are dropped as on a disconnect.
pub(crate) struct WriteDeadline<T> {
    io: T,
    timeout: Duration,
    /// Made on the first stall and kept: a busy socket stalls often, and re-arming a timer is
    /// cheaper than allocating one each time.
    stall: Option<Pin<Box<Sleep>>>,
    /// Whether `stall` times the current stall (cleared by any write that goes through).
    armed: bool,
}

impl<T> WriteDeadline<T> {
    /// Wraps `io`.
    pub(crate) fn new(io: T, timeout: Duration) -> Self {
        Self {
            io,
            timeout,
            stall: None,
            armed: false,
        }
    }

    /// Sees a write's outcome: progress disarms the timer; `Pending` arms it (or finds it run
    /// out, which turns the write into an error).
    fn watch<R>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<R>>,
    ) -> Poll<io::Result<R>> {
        if polled.is_ready() {
            self.armed = false;
            return polled;
        }
        let deadline = Instant::now() + self.timeout;
        let stall = match &mut self.stall {
            Some(stall) => {
                if !self.armed {
                    stall.as_mut().reset(deadline);
                }
                stall
            }
            None => self
                .stall
                .insert(Box::pin(tokio::time::sleep_until(deadline))),
        };
        self.armed = true;
        match stall.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client read nothing within the write timeout",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for WriteDeadline<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write(cx, buf);
        this.watch(cx, polled)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.watch(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_flush(cx);
        this.watch(cx, polled)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_shutdown(cx);
        this.watch(cx, polled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn a_write_the_peer_never_reads_fails_after_the_timeout() {
        // A pipe with a small buffer stands in for a socket whose client reads nothing.
        let (client, _server) = tokio::io::duplex(64);
        let mut io = WriteDeadline::new(client, Duration::from_millis(200));
        let big = vec![b'x'; 4096];
        let err = tokio::time::timeout(Duration::from_secs(10), io.write_all(&big))
            .await
            .expect("the write must fail rather than wait forever")
            .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    }

    #[tokio::test]
    async fn a_slow_reader_that_keeps_reading_is_not_cut_off() {
        use tokio::io::AsyncReadExt;
        let (client, mut server) = tokio::io::duplex(64);
        let mut io = WriteDeadline::new(client, Duration::from_secs(1));
        let reader = tokio::spawn(async move {
            let mut got = 0;
            let mut buf = [0u8; 4];
            while got < 2048 {
                tokio::time::sleep(Duration::from_millis(5)).await;
                got += server.read(&mut buf).await.unwrap();
            }
        });
        // Far longer than the timeout in all, but never stalled for that long.
        io.write_all(&vec![b'x'; 2048]).await.unwrap();
        reader.await.unwrap();
    }
}
