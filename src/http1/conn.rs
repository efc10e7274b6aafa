//! HTTP/1.1 connections, served by the gateway itself.
//!
//! A browser (or a reverse proxy such as nginx) holds one HTTP/1.1 connection per streaming
//! run, for as long as the run lasts. hyper's HTTP/1.1 server keeps about 16 KiB of buffers
//! per connection for its whole life (an 8 KiB read buffer and an 8 KiB header write buffer),
//! more than the run itself. Here a connection holds no buffer while it waits or streams:
//! the request head is read into a buffer that is freed once parsed, the request body is
//! handed to the app through a one-slot channel as it arrives, and each response frame goes
//! to the socket as it comes. HTTP/2 stays with hyper (many runs share one connection).
//!
//! What is served: HTTP/1.0 and 1.1, keep-alive and pipelining, `Content-Length` and chunked
//! request bodies, `Expect: 100-continue`, `HEAD`, responses framed by length, chunked, or (for
//! HTTP/1.0) by closing. Ambiguous framing is refused (both `Content-Length` and
//! `Transfer-Encoding`, differing lengths, encodings other than `chunked`), so a proxy in front
//! cannot be made to read a request differently from the gateway.

use std::io::{self, Write as _};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use bytes::{Buf, Bytes, BytesMut};
use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode, Version};
use http_body::{Frame, SizeHint};
use http_body_util::BodyExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tower::ServiceExt;

use super::parse::{BodyDecoder, Framing, Head, MAX_HEAD, Refusal, parse_head, refuse};

/// How long a request head (once it has begun) or a pause in a request body may take.
const READ_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a kept-alive connection may wait for its next request.
const IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// After a response that did not read its whole request body, how long (and how much) the rest
/// is read and dropped before closing, so that the client sees the response rather than a reset.
const LINGER: Duration = Duration::from_secs(2);
const LINGER_BYTES: usize = 1 << 20;

/// Serves one HTTP/1.x connection with `app` until the client closes it, an error ends it, or
/// `stop` turns true (an idle connection closes at once, a busy one after its response).
pub(crate) async fn serve(mut tcp: TcpStream, app: Router, mut stop: watch::Receiver<bool>) {
    let mut leftover = BytesMut::new();
    loop {
        let head = match read_head(&mut tcp, leftover, &mut stop).await {
            Ok(Some(head)) => head,
            Ok(None) => return,
            Err(refusal) => {
                let _ = write_refusal(&mut tcp, &refusal).await;
                return;
            }
        };
        let Head {
            request,
            body: framing,
            rest,
            keep_alive,
            expect_continue,
        } = head;
        let version = request.version();
        let head_only = request.method() == Method::HEAD;
        let (request, mut feed) = attach_body(request, framing, rest, expect_continue);
        let response = {
            // Boxed: once it has answered, the app's future leaves nothing in this task.
            let mut call = Box::pin(app.clone().oneshot(request));
            let mut watch_client = true;
            loop {
                tokio::select! {
                    biased;
                    response = &mut call => break response,
                    side = meanwhile(&mut feed, &mut tcp, watch_client) => match side {
                        // The body broke (the app was told) or the client is gone.
                        Meanwhile::Fed(Err(Broken)) => feed.close(),
                        Meanwhile::Fed(Ok(())) => {}
                        // Gone before the answer: dropping the call cancels it.
                        Meanwhile::ClientLeft(true) => return,
                        Meanwhile::ClientLeft(false) => watch_client = false,
                    },
                }
            }
        };
        let Ok(response) = response;
        feed.skip_buffered();
        let body_done = feed.is_complete();
        leftover = feed.into_rest();
        let closing = !keep_alive || !body_done || *stop.borrow();
        let wrote = write_response(&mut tcp, response, version, head_only, closing).await;
        match wrote {
            Ok(Written::Complete) if !closing => continue,
            Ok(Written::Complete) if !body_done => {
                linger(&mut tcp).await;
                return;
            }
            _ => {
                let _ = tcp.shutdown().await;
                return;
            }
        }
    }
}

/// What happened on the connection while the app worked on a request.
enum Meanwhile {
    /// A piece of request body went to the app (or could not).
    Fed(Result<(), Broken>),
    /// The client closed the connection (`true`) or sent more (a pipelined request).
    ClientLeft(bool),
}

/// Feeds the request body while the app wants it; then watches for the client leaving.
async fn meanwhile(feed: &mut Feed, tcp: &mut TcpStream, watch_client: bool) -> Meanwhile {
    if feed.is_open() {
        Meanwhile::Fed(feed.step(tcp).await)
    } else if watch_client {
        Meanwhile::ClientLeft(client_left(tcp).await)
    } else {
        std::future::pending().await
    }
}

/// Reads the next request head. `None`: the client closed the connection, it stayed idle too
/// long, or the gateway is stopping.
async fn read_head(
    tcp: &mut TcpStream,
    leftover: BytesMut,
    stop: &mut watch::Receiver<bool>,
) -> Result<Option<Head>, Refusal> {
    // What the last request left (a pipelined request) is where this head starts.
    let mut buf = leftover;
    if buf.is_empty() {
        // Idle: wait without a buffer.
        tokio::select! {
            ready = tokio::time::timeout(IDLE_TIMEOUT, tcp.readable()) => {
                if !matches!(ready, Ok(Ok(()))) {
                    return Ok(None);
                }
            }
            _ = stop.changed() => return Ok(None),
        }
    }
    let deadline = tokio::time::Instant::now() + READ_TIMEOUT;
    loop {
        if !buf.is_empty()
            && let Some(head) = parse_head(&buf)?
        {
            return Ok(Some(head));
        }
        if buf.len() >= MAX_HEAD {
            return Err(refuse(
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                "The request head is too large.",
            ));
        }
        if buf.len() == buf.capacity() {
            // Doubling from 2 KiB, up to the limit.
            buf.reserve(buf.capacity().max(2048).min(MAX_HEAD - buf.len()));
        }
        let read = tokio::select! {
            read = tokio::time::timeout_at(deadline, tcp.read_buf(&mut buf)) => read,
            _ = stop.changed(), if buf.is_empty() => return Ok(None),
        };
        match read {
            Ok(Ok(n)) if n > 0 => {}
            Ok(Ok(_)) | Ok(Err(_)) => return Ok(None),
            Err(_) if buf.is_empty() => return Ok(None),
            Err(_) => {
                return Err(refuse(
                    StatusCode::REQUEST_TIMEOUT,
                    "The request head did not arrive in time.",
                ));
            }
        }
    }
}

/// Gives the request its body: empty, or fed from the connection as the app reads it.
fn attach_body(
    request: Request<()>,
    framing: Framing,
    rest: BytesMut,
    expect_continue: bool,
) -> (Request<Body>, Feed) {
    let (tx, body) = if framing == Framing::Empty {
        (None, Body::empty())
    } else {
        let (tx, rx) = mpsc::channel(1);
        let remaining = match framing {
            Framing::Length(n) => Some(n),
            _ => None,
        };
        (Some(tx), Body::new(Incoming { rx, remaining }))
    };
    let feed = Feed {
        tx,
        decoder: BodyDecoder::new(framing),
        buf: rest,
        expect_continue,
    };
    (request.map(|()| body), feed)
}

/// The request body as the app sees it.
struct Incoming {
    rx: mpsc::Receiver<io::Result<Bytes>>,
    /// Bytes still to come, when the length is known.
    remaining: Option<u64>,
}

impl http_body::Body for Incoming {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        let next = std::task::ready!(self.rx.poll_recv(cx));
        if let (Some(Ok(data)), Some(left)) = (&next, self.remaining.as_mut()) {
            *left = left.saturating_sub(data.len() as u64);
        }
        Poll::Ready(next.map(|r| r.map(Frame::data)))
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == Some(0)
    }

    fn size_hint(&self) -> SizeHint {
        self.remaining.map(SizeHint::with_exact).unwrap_or_default()
    }
}

/// The connection's side of a request body: reads it from the socket, a piece at a time, as
/// the app asks for it.
struct Feed {
    /// `None` once the body is complete or abandoned.
    tx: Option<mpsc::Sender<io::Result<Bytes>>>,
    decoder: BodyDecoder,
    /// Bytes read from the socket and not yet decoded.
    buf: BytesMut,
    expect_continue: bool,
}

/// The body cannot be read on: malformed, cut short or too slow (the app has been told), or
/// no longer wanted.
struct Broken;

impl Feed {
    fn is_open(&self) -> bool {
        self.tx.is_some()
    }

    /// Whether the whole body was read (so the connection can carry another request).
    fn is_complete(&self) -> bool {
        self.decoder.is_complete()
    }

    fn close(&mut self) {
        self.tx = None;
    }

    /// What was read past the body: the next pipelined request.
    fn into_rest(self) -> BytesMut {
        // An empty remainder would still hold its allocation (shared with the body's pieces)
        // through the response: let it go.
        if self.is_complete() && !self.buf.is_empty() {
            self.buf
        } else {
            BytesMut::new()
        }
    }

    /// Waits until the app wants more body, then hands it the next piece.
    async fn step(&mut self, tcp: &mut TcpStream) -> Result<(), Broken> {
        // Taken out while the piece is read: the permit borrows it.
        let tx = self.tx.take().ok_or(Broken)?;
        let permit = tx.reserve().await.map_err(|_| Broken)?;
        match self.next_piece(tcp).await {
            Ok(Some(data)) => permit.send(Ok(data)),
            Ok(None) => drop(permit),
            Err(e) => {
                permit.send(Err(e));
                return Err(Broken);
            }
        }
        if !self.is_complete() {
            self.tx = Some(tx);
        }
        Ok(())
    }

    /// The next piece of body, read from the socket if none is buffered; `None` at its end.
    async fn next_piece(&mut self, tcp: &mut TcpStream) -> io::Result<Option<Bytes>> {
        loop {
            match self.decoder.decode(&mut self.buf) {
                Ok(Some(data)) => return Ok(Some(data)),
                Ok(None) if self.is_complete() => return Ok(None),
                Ok(None) => {}
                Err(message) => return Err(io::Error::new(io::ErrorKind::InvalidData, message)),
            }
            if self.expect_continue {
                self.expect_continue = false;
                tcp.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
            }
            self.buf.reserve(8 * 1024);
            match tokio::time::timeout(READ_TIMEOUT, tcp.read_buf(&mut self.buf)).await {
                Ok(Ok(n)) if n > 0 => {}
                Ok(Ok(_)) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "request body cut short",
                    ));
                }
                Ok(Err(e)) => return Err(e),
                Err(_) => {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "request body too slow",
                    ));
                }
            }
        }
    }

    /// Skips the part of the body already read, which the app left unread, so that a request
    /// answered without reading its (small) body does not cost the connection.
    fn skip_buffered(&mut self) {
        self.tx = None;
        while let Ok(Some(_)) = self.decoder.decode(&mut self.buf) {}
    }
}

/// How a response went out.
enum Written {
    /// Whole, and correctly delimited.
    Complete,
    /// Cut off: the client left, or the body failed (the connection must close).
    Cut,
}

/// Writes `response`: its head at once, then each body frame as the app yields it. Gives up
/// (dropping the body, which ends a streaming run) when the client goes away.
async fn write_response(
    tcp: &mut TcpStream,
    response: Response<Body>,
    version: Version,
    head_only: bool,
    closing: bool,
) -> io::Result<Written> {
    let (parts, mut body) = response.into_parts();
    let status = parts.status;
    let bodiless = head_only
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED;
    let length = http_body::Body::size_hint(&body).exact();
    let chunked = !bodiless && length.is_none() && version == Version::HTTP_11;
    // An HTTP/1.0 client learns where a body of unknown length ends by the connection closing.
    let closing = closing || (!bodiless && length.is_none() && !chunked);
    let content_length = if head_only {
        // A HEAD response gives the length its GET would have, when it is known.
        let given = parts.headers.get(header::CONTENT_LENGTH);
        given.map(|v| v.as_bytes().to_vec()).or_else(|| {
            length
                .filter(|n| *n > 0)
                .map(|n| n.to_string().into_bytes())
        })
    } else if bodiless || chunked {
        None
    } else {
        length.map(|n| n.to_string().into_bytes())
    };
    let connection: Option<&[u8]> = if closing {
        Some(b"close")
    } else if version == Version::HTTP_10 {
        Some(b"keep-alive")
    } else {
        None
    };
    let head = response_head(&parts, chunked, content_length.as_deref(), connection);
    drop(parts);
    tcp.write_all(&head).await?;
    drop(head);
    if bodiless {
        return Ok(Written::Complete);
    }

    let mut sent: u64 = 0;
    // Watch for the client leaving while the body is quiet (a streaming run waiting on its
    // model): a closed connection reads as end of file.
    let mut watch_client = true;
    loop {
        let frame = tokio::select! {
            biased;
            frame = body.frame() => frame,
            gone = client_left(tcp), if watch_client => {
                if gone {
                    return Ok(Written::Cut);
                }
                // The client sent more (a pipelined request): stop watching; a write to a
                // closed connection still tells.
                watch_client = false;
                continue;
            }
        };
        let data = match frame {
            None => break,
            Some(Err(e)) => {
                tracing::debug!(error = %e, "response body failed; closing the connection");
                return Ok(Written::Cut);
            }
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) if !data.is_empty() => data,
                // Trailers (not sent) and empty frames.
                _ => continue,
            },
        };
        if chunked {
            let mut size = [0u8; 18];
            let size = chunk_size_line(data.len(), &mut size);
            let mut out = Buf::chain(Buf::chain(size, data), &b"\r\n"[..]);
            tcp.write_all_buf(&mut out).await?;
        } else {
            let mut data = data;
            if let Some(n) = length {
                // Never past the length announced.
                let room = n.saturating_sub(sent);
                if room < data.len() as u64 {
                    data.truncate(room as usize);
                }
            }
            sent += data.len() as u64;
            tcp.write_all_buf(&mut data).await?;
        }
    }
    if chunked {
        tcp.write_all(b"0\r\n\r\n").await?;
    }
    // A body shorter than its announced length leaves the client waiting for the rest.
    Ok(if length.is_some_and(|n| n != sent) {
        Written::Cut
    } else {
        Written::Complete
    })
}

/// A chunk's size line (hex digits and CRLF) written into `buf`, without allocating: it goes
/// out with every frame of a stream.
fn chunk_size_line(len: usize, buf: &mut [u8; 18]) -> &[u8] {
    buf[16..].copy_from_slice(b"\r\n");
    let mut start = 16;
    let mut n = len;
    loop {
        start -= 1;
        buf[start] = b"0123456789ABCDEF"[n & 0xF];
        n >>= 4;
        if n == 0 {
            break;
        }
    }
    &buf[start..]
}

/// The status line and header fields, with the framing and connection fields the
/// connection chose in place of any the app set.
fn response_head(
    parts: &http::response::Parts,
    chunked: bool,
    content_length: Option<&[u8]>,
    connection: Option<&[u8]>,
) -> Vec<u8> {
    let mut head = Vec::with_capacity(256);
    let status = parts.status;
    let reason = status.canonical_reason().unwrap_or("");
    let _ = write!(head, "HTTP/1.1 {} {reason}\r\n", status.as_u16());
    for (name, value) in &parts.headers {
        if name == header::CONNECTION
            || name == header::TRANSFER_ENCODING
            || name == header::CONTENT_LENGTH
        {
            continue;
        }
        put_header(&mut head, name.as_str().as_bytes(), value.as_bytes());
    }
    if !parts.headers.contains_key(header::DATE) {
        let date = httpdate::fmt_http_date(std::time::SystemTime::now());
        put_header(&mut head, b"date", date.as_bytes());
    }
    if chunked {
        put_header(&mut head, b"transfer-encoding", b"chunked");
    }
    if let Some(n) = content_length {
        put_header(&mut head, b"content-length", n);
    }
    if let Some(c) = connection {
        put_header(&mut head, b"connection", c);
    }
    head.extend_from_slice(b"\r\n");
    head
}

fn put_header(head: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    head.extend_from_slice(name);
    head.extend_from_slice(b": ");
    head.extend_from_slice(value);
    head.extend_from_slice(b"\r\n");
}

/// Resolves when the client closed its side (`true`) or sent more bytes (`false`), without
/// consuming them.
async fn client_left(tcp: &TcpStream) -> bool {
    let mut probe = [0u8; 1];
    !matches!(tcp.peek(&mut probe).await, Ok(n) if n > 0)
}

/// Closes after a response that left part of its request body unread: reads and drops what
/// the client still sends for a moment, so that the close does not reset the connection
/// before the client has read the response.
async fn linger(tcp: &mut TcpStream) {
    if tcp.shutdown().await.is_err() {
        return;
    }
    let mut sink = vec![0u8; 4096];
    let mut read = 0;
    let _ = tokio::time::timeout(LINGER, async {
        while read < LINGER_BYTES {
            match tcp.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => read += n,
            }
        }
    })
    .await;
}

/// Answers a request the connection cannot pass on, in the gateway's JSON error shape.
async fn write_refusal(tcp: &mut TcpStream, refusal: &Refusal) -> io::Result<()> {
    let kind = match refusal.status {
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => "headers_too_large",
        StatusCode::NOT_IMPLEMENTED => "not_implemented",
        StatusCode::REQUEST_TIMEOUT => "request_timeout",
        StatusCode::HTTP_VERSION_NOT_SUPPORTED => "version_not_supported",
        _ => "invalid_request",
    };
    let body =
        serde_json::json!({ "error": { "type": kind, "message": refusal.message } }).to_string();
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = refusal.status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    write_response(tcp, response, Version::HTTP_11, false, true).await?;
    tcp.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::super::parse::find_crlf;
    use super::*;
    use axum::routing::{get, post};
    use std::net::SocketAddr;
    use tokio::net::TcpListener;

    /// A gateway-like app: echo, a stream of frames released by the test, a refusal that
    /// does not read its body.
    fn app(
        frames: Option<mpsc::Receiver<&'static str>>,
        dropped: Option<tokio::sync::oneshot::Sender<()>>,
    ) -> Router {
        let frames = std::sync::Arc::new(std::sync::Mutex::new(frames));
        let dropped = std::sync::Arc::new(std::sync::Mutex::new(dropped));
        Router::new()
            .route("/echo", post(|body: Bytes| async move { body }))
            .route("/hello", get(|| async { "hello" }))
            .route(
                "/refuse",
                post(|| async { (StatusCode::UNAUTHORIZED, "no") }),
            )
            .route("/slow", {
                let dropped = dropped.clone();
                get(move || {
                    let guard = dropped.lock().unwrap().take();
                    async move {
                        let _guard = guard;
                        tokio::time::sleep(Duration::from_secs(60)).await;
                        "late"
                    }
                })
            })
            .route(
                "/stream",
                get(move || {
                    let rx = frames.lock().unwrap().take().expect("one stream");
                    let guard = dropped.lock().unwrap().take();
                    async move {
                        let stream =
                            futures::stream::unfold((rx, guard), |(mut rx, g)| async move {
                                let f = rx.recv().await?;
                                Some((Ok::<_, io::Error>(Bytes::from(f)), (rx, g)))
                            });
                        Body::from_stream(stream)
                    }
                }),
            )
    }

    async fn start(app: Router) -> (SocketAddr, watch::Sender<bool>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop_tx, stop_rx) = watch::channel(false);
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                tokio::spawn(serve(tcp, app.clone(), stop_rx.clone()));
            }
        });
        (addr, stop_tx)
    }

    /// One response as a client reads it: status, lower-cased head, body.
    struct Reply {
        status: u16,
        head: String,
        body: Vec<u8>,
    }

    /// Reads one response from `tcp` (bytes past it stay in `pending`).
    async fn reply(tcp: &mut TcpStream, pending: &mut Vec<u8>) -> Reply {
        loop {
            let mut fields = [httparse::EMPTY_HEADER; 32];
            let mut r = httparse::Response::new(&mut fields);
            if let httparse::Status::Complete(n) = r.parse(pending).unwrap() {
                let status = r.code.unwrap();
                let head = String::from_utf8_lossy(&pending[..n]).to_lowercase();
                pending.drain(..n);
                let body = if status == 100 {
                    Vec::new()
                } else if head.contains("transfer-encoding: chunked") {
                    let mut body = Vec::new();
                    loop {
                        while find_crlf(pending).is_none() {
                            more(tcp, pending).await;
                        }
                        let end = find_crlf(pending).unwrap();
                        let size = usize::from_str_radix(
                            std::str::from_utf8(&pending[..end]).unwrap(),
                            16,
                        )
                        .unwrap();
                        while pending.len() < end + 2 + size + 2 {
                            more(tcp, pending).await;
                        }
                        body.extend_from_slice(&pending[end + 2..end + 2 + size]);
                        pending.drain(..end + 2 + size + 2);
                        if size == 0 {
                            break body;
                        }
                    }
                } else if let Some(at) = head.find("content-length: ") {
                    let len: usize = head[at + 16..]
                        .split("\r\n")
                        .next()
                        .unwrap()
                        .parse()
                        .unwrap();
                    while pending.len() < len {
                        more(tcp, pending).await;
                    }
                    pending.drain(..len).collect()
                } else {
                    while tcp.read_buf(pending).await.unwrap() > 0 {}
                    std::mem::take(pending)
                };
                return Reply { status, head, body };
            }
            more(tcp, pending).await;
        }
    }

    async fn more(tcp: &mut TcpStream, pending: &mut Vec<u8>) {
        let n = tokio::time::timeout(Duration::from_secs(10), tcp.read_buf(pending))
            .await
            .expect("the server answers")
            .unwrap();
        assert!(
            n > 0,
            "connection closed early: {:?}",
            String::from_utf8_lossy(pending)
        );
    }

    /// Closes the connection; the app's future or body (holding the sender) must drop soon.
    async fn leave_and_see_dropped(tcp: TcpStream, dropped: tokio::sync::oneshot::Receiver<()>) {
        drop(tcp);
        tokio::time::timeout(Duration::from_secs(5), dropped)
            .await
            .expect("what the app was doing for the client is dropped when it leaves")
            .unwrap_err();
    }

    async fn closed(tcp: &mut TcpStream) -> bool {
        let mut b = [0u8; 1];
        matches!(
            tokio::time::timeout(Duration::from_secs(10), tcp.read(&mut b)).await,
            Ok(Ok(0)) | Ok(Err(_))
        )
    }

    #[tokio::test]
    async fn keep_alive_pipelining_and_chunked_bodies_on_one_connection() {
        let (addr, _stop) = start(app(None, None)).await;
        let mut tcp = TcpStream::connect(addr).await.unwrap();
        let mut pending = Vec::new();
        // Two requests in one write, the first with a length, the second chunked (with a
        // chunk extension and a trailer), then a third after the answers.
        tcp.write_all(
            b"POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\n\r\nhello\
              POST /echo HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n\
              3;ext=1\r\nabc\r\n0A\r\n0123456789\r\n0\r\nx-trailer: t\r\n\r\n",
        )
        .await
        .unwrap();
        let a = reply(&mut tcp, &mut pending).await;
        assert_eq!((a.status, a.body.as_slice()), (200, &b"hello"[..]));
        assert!(a.head.contains("content-length: 5") && a.head.contains("date: "));
        let b = reply(&mut tcp, &mut pending).await;
        assert_eq!(b.body, b"abc0123456789");
        tcp.write_all(b"GET /hello HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let c = reply(&mut tcp, &mut pending).await;
        assert_eq!(c.body, b"hello");
        assert!(!c.head.contains("connection: close"));

        // A body split across writes and an Expect: 100-continue.
        tcp.write_all(
            b"POST /echo HTTP/1.1\r\nhost: x\r\nexpect: 100-continue\r\ncontent-length: 6\r\n\r\n",
        )
        .await
        .unwrap();
        let go = reply(&mut tcp, &mut pending).await;
        assert_eq!(go.status, 100);
        tcp.write_all(b"abc").await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        tcp.write_all(b"def").await.unwrap();
        assert_eq!(reply(&mut tcp, &mut pending).await.body, b"abcdef");

        // An answer that leaves its (already received) body unread keeps the connection.
        tcp.write_all(b"POST /refuse HTTP/1.1\r\nhost: x\r\ncontent-length: 4\r\n\r\nbody")
            .await
            .unwrap();
        assert_eq!(reply(&mut tcp, &mut pending).await.status, 401);
        tcp.write_all(b"GET /hello HTTP/1.1\r\nconnection: close\r\n\r\n")
            .await
            .unwrap();
        let last = reply(&mut tcp, &mut pending).await;
        assert!(last.head.contains("connection: close"));
        assert!(closed(&mut tcp).await);
    }

    #[test]
    fn chunk_size_lines_are_hex_and_crlf() {
        let mut buf = [0u8; 18];
        for (len, line) in [
            (0, "0\r\n"),
            (9, "9\r\n"),
            (0xF, "F\r\n"),
            (0x10, "10\r\n"),
            (0xABC, "ABC\r\n"),
            (usize::MAX, "FFFFFFFFFFFFFFFF\r\n"),
        ] {
            assert_eq!(chunk_size_line(len, &mut buf), line.as_bytes());
        }
    }

    #[tokio::test]
    async fn a_body_past_the_apps_limit_gets_its_413_not_a_reset() {
        let app = Router::new()
            .route("/echo", post(|body: Bytes| async move { body }))
            .layer(axum::extract::DefaultBodyLimit::max(1024));
        let (addr, _stop) = start(app).await;
        let client = reqwest::Client::new();
        for size in [2048, 8 << 20] {
            let response = client
                .post(format!("http://{addr}/echo"))
                .body(vec![b'x'; size])
                .send()
                .await
                .expect("the client reads the answer");
            assert_eq!(response.status(), 413, "{size} bytes");
        }
        let ok = client
            .post(format!("http://{addr}/echo"))
            .body("small")
            .send()
            .await
            .unwrap();
        assert_eq!(ok.text().await.unwrap(), "small");
    }

    #[tokio::test]
    async fn ambiguous_or_oversized_requests_are_refused_with_json_and_closed() {
        let (addr, _stop) = start(app(None, None)).await;
        let big = format!(
            "GET /hello HTTP/1.1\r\nx-big: {}\r\n\r\n",
            "a".repeat(MAX_HEAD)
        );
        let cases: [(&[u8], u16); 6] = [
            (
                b"POST /echo HTTP/1.1\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\n",
                400,
            ),
            (
                b"POST /echo HTTP/1.1\r\ncontent-length: 3\r\ncontent-length: 4\r\n\r\nabcd",
                400,
            ),
            (b"POST /echo HTTP/1.1\r\ncontent-length: +3\r\n\r\nabc", 400),
            (
                b"POST /echo HTTP/1.1\r\ntransfer-encoding: gzip, chunked\r\n\r\n",
                501,
            ),
            (b"GET /hello HTTP/1.1\r\nbad header\r\n\r\n", 400),
            (big.as_bytes(), 431),
        ];
        for (request, status) in cases {
            let mut tcp = TcpStream::connect(addr).await.unwrap();
            tcp.write_all(request).await.unwrap();
            let mut pending = Vec::new();
            let r = reply(&mut tcp, &mut pending).await;
            assert_eq!(
                r.status,
                status,
                "{}",
                String::from_utf8_lossy(&request[..40])
            );
            let json: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
            assert!(json["error"]["message"].is_string());
            assert!(closed(&mut tcp).await);
        }
        // A chunked body that breaks mid-way reaches the app as an error; the connection closes.
        let mut tcp = TcpStream::connect(addr).await.unwrap();
        tcp.write_all(b"POST /echo HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n")
            .await
            .unwrap();
        let mut pending = Vec::new();
        assert_eq!(reply(&mut tcp, &mut pending).await.status, 400);
        assert!(closed(&mut tcp).await);
    }

    #[tokio::test]
    async fn a_stream_goes_out_frame_by_frame_and_ends_when_the_client_leaves() {
        let (frames_tx, frames_rx) = mpsc::channel(4);
        let (dropped_tx, dropped_rx) = tokio::sync::oneshot::channel();
        let (addr, _stop) = start(app(Some(frames_rx), Some(dropped_tx))).await;
        let mut tcp = TcpStream::connect(addr).await.unwrap();
        tcp.write_all(b"GET /stream HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let mut pending = Vec::new();
        while find_crlf(&pending).is_none() || !pending.windows(4).any(|w| w == b"\r\n\r\n") {
            more(&mut tcp, &mut pending).await;
        }
        let head = String::from_utf8_lossy(&pending).to_lowercase();
        assert!(
            head.starts_with("http/1.1 200") && head.contains("transfer-encoding: chunked"),
            "{head}"
        );
        frames_tx.send("data: 1\n\n").await.unwrap();
        while !pending.windows(9).any(|w| w == b"data: 1\n\n") {
            more(&mut tcp, &mut pending).await;
        }
        // The client goes away while the stream is quiet: the body is dropped at once.
        leave_and_see_dropped(tcp, dropped_rx).await;
    }

    #[tokio::test]
    async fn a_client_leaving_before_the_answer_cancels_the_call() {
        let (dropped_tx, dropped_rx) = tokio::sync::oneshot::channel();
        let (addr, _stop) = start(app(None, Some(dropped_tx))).await;
        let mut tcp = TcpStream::connect(addr).await.unwrap();
        tcp.write_all(b"GET /slow HTTP/1.1\r\n\r\n").await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        leave_and_see_dropped(tcp, dropped_rx).await;
    }

    #[tokio::test]
    async fn http_1_0_streams_end_by_closing_and_head_has_no_body() {
        let (frames_tx, frames_rx) = mpsc::channel(4);
        let (addr, _stop) = start(app(Some(frames_rx), None)).await;
        let mut tcp = TcpStream::connect(addr).await.unwrap();
        tcp.write_all(b"GET /stream HTTP/1.0\r\n\r\n")
            .await
            .unwrap();
        frames_tx.send("a").await.unwrap();
        frames_tx.send("b").await.unwrap();
        drop(frames_tx);
        let mut pending = Vec::new();
        let r = reply(&mut tcp, &mut pending).await;
        assert!(r.head.contains("connection: close") && !r.head.contains("chunked"));
        assert_eq!(r.body, b"ab");

        let mut tcp = TcpStream::connect(addr).await.unwrap();
        tcp.write_all(b"HEAD /hello HTTP/1.1\r\n\r\nGET /hello HTTP/1.1\r\n\r\n")
            .await
            .unwrap();
        let mut all = Vec::new();
        let mut pending = Vec::new();
        // The HEAD answer carries the length of the GET one but no body: the next bytes are
        // the GET's status line.
        while all.windows(5).filter(|w| w == b"HTTP/").count() < 2 || !all.ends_with(b"hello") {
            more(&mut tcp, &mut pending).await;
            all.append(&mut pending);
        }
        let text = String::from_utf8_lossy(&all).to_lowercase();
        let head_reply = text.split("http/1.1").nth(1).unwrap();
        assert!(
            head_reply.contains("content-length: 5") && head_reply.ends_with("\r\n\r\n"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn stopping_closes_idle_connections_and_lets_a_busy_one_finish() {
        let (frames_tx, frames_rx) = mpsc::channel(4);
        let (addr, stop) = start(app(Some(frames_rx), None)).await;
        let mut idle = TcpStream::connect(addr).await.unwrap();
        let mut pending = Vec::new();
        idle.write_all(b"GET /hello HTTP/1.1\r\n\r\n")
            .await
            .unwrap();
        reply(&mut idle, &mut pending).await;
        let mut busy = TcpStream::connect(addr).await.unwrap();
        busy.write_all(b"GET /stream HTTP/1.1\r\n\r\n")
            .await
            .unwrap();
        frames_tx.send("x").await.unwrap();
        let mut busy_pending = Vec::new();
        while !busy_pending.windows(3).any(|w| w == b"\r\nx") {
            more(&mut busy, &mut busy_pending).await;
        }
        stop.send(true).unwrap();
        assert!(closed(&mut idle).await, "an idle connection closes");
        frames_tx.send("y").await.unwrap();
        drop(frames_tx);
        let r = reply(&mut busy, &mut busy_pending).await;
        assert_eq!(r.body, b"xy");
        assert!(
            closed(&mut busy).await,
            "a busy connection closes after its response"
        );
    }
}
