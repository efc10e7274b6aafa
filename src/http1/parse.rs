//! Parsing what an HTTP/1.x client sends: the request head (with `httparse`), how its body
//! is delimited, and length or chunked bodies. Pure functions over bytes (no I/O), so they are
//! unit-tested piece by piece and fuzzed (`fuzz/fuzz_targets/http1_request.rs`).

use bytes::{Buf, Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, StatusCode, Uri, Version};

/// The largest request head (request line and headers) accepted: room for large cookies
/// (nginx allows 32 KiB; hyper about 400 KiB). Only held while a head is read.
pub const MAX_HEAD: usize = 64 * 1024;
/// The most header fields in a request head.
pub const MAX_HEADERS: usize = 100;
/// The longest chunk-size line (with extensions) of a chunked request body.
pub const MAX_CHUNK_LINE: usize = 1024;

/// A parsed request head and what came with it.
pub struct Head {
    pub request: Request<()>,
    pub body: Framing,
    /// Bytes read past the head: the start of the body, or of pipelined requests.
    pub rest: BytesMut,
    pub keep_alive: bool,
    pub expect_continue: bool,
}

/// How a request's body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    Empty,
    Length(u64),
    Chunked,
}

/// A request the connection answers itself, then closes.
#[derive(Debug)]
pub struct Refusal {
    pub status: StatusCode,
    pub message: &'static str,
}

pub fn refuse(status: StatusCode, message: &'static str) -> Refusal {
    Refusal { status, message }
}

/// Parses a complete head at the start of `buf`; `None` while it is incomplete.
pub fn parse_head(buf: &[u8]) -> Result<Option<Head>, Refusal> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut parsed = httparse::Request::new(&mut fields);
    let len = match parsed.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(refuse(
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                "The request has too many header fields.",
            ));
        }
        Err(httparse::Error::Version) => {
            return Err(refuse(
                StatusCode::HTTP_VERSION_NOT_SUPPORTED,
                "Only HTTP/1.0, HTTP/1.1 and HTTP/2 are served.",
            ));
        }
        Err(_) => return Err(bad("The request head is malformed.")),
    };
    let method = Method::from_bytes(parsed.method.unwrap_or_default().as_bytes())
        .map_err(|_| bad("The request method is malformed."))?;
    let uri: Uri = parsed
        .path
        .unwrap_or_default()
        .parse()
        .map_err(|_| bad("The request target is malformed."))?;
    let version = if parsed.version == Some(0) {
        Version::HTTP_10
    } else {
        Version::HTTP_11
    };
    let mut headers = HeaderMap::with_capacity(parsed.headers.len());
    for field in parsed.headers.iter() {
        let name = HeaderName::from_bytes(field.name.as_bytes())
            .map_err(|_| bad("A header field name is malformed."))?;
        let value = HeaderValue::from_bytes(field.value)
            .map_err(|_| bad("A header field value is malformed."))?;
        headers.append(name, value);
    }
    let body = framing(&headers, version)?;
    let keep_alive = match version {
        Version::HTTP_10 => has_token(&headers, header::CONNECTION, "keep-alive"),
        _ => !has_token(&headers, header::CONNECTION, "close"),
    };
    let expect_continue = version == Version::HTTP_11
        && body != Framing::Empty
        && has_token(&headers, header::EXPECT, "100-continue");
    let mut request = Request::new(());
    *request.method_mut() = method;
    *request.uri_mut() = uri;
    *request.version_mut() = version;
    *request.headers_mut() = headers;
    // Whatever follows the head is copied out, so the head's buffer is freed now.
    let rest = BytesMut::from(&buf[len..]);
    Ok(Some(Head {
        request,
        body,
        rest,
        keep_alive,
        expect_continue,
    }))
}

fn bad(message: &'static str) -> Refusal {
    refuse(StatusCode::BAD_REQUEST, message)
}

/// How the body is delimited (RFC 9112, section 6.3), refusing every ambiguous case.
fn framing(headers: &HeaderMap, version: Version) -> Result<Framing, Refusal> {
    if headers.contains_key(header::TRANSFER_ENCODING) {
        if headers.contains_key(header::CONTENT_LENGTH) {
            return Err(bad(
                "A request may not have both Content-Length and Transfer-Encoding.",
            ));
        }
        if version == Version::HTTP_10 {
            return Err(bad("Transfer-Encoding is not allowed in HTTP/1.0."));
        }
        let mut codings = list_items(headers, header::TRANSFER_ENCODING).filter(|c| !c.is_empty());
        return match (codings.next(), codings.next()) {
            (Some(c), None) if c.eq_ignore_ascii_case(b"chunked") => Ok(Framing::Chunked),
            _ => Err(refuse(
                StatusCode::NOT_IMPLEMENTED,
                "Only the chunked transfer coding is accepted.",
            )),
        };
    }
    let mut length = None;
    // Strict: every element (even an empty one) must be the same decimal number.
    for part in list_items(headers, header::CONTENT_LENGTH) {
        let n = std::str::from_utf8(part)
            .ok()
            .filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|p| p.parse::<u64>().ok())
            .ok_or_else(|| bad("Content-Length is malformed."))?;
        if length.is_some_and(|l| l != n) {
            return Err(bad("The request has differing Content-Length values."));
        }
        length = Some(n);
    }
    Ok(match length {
        None | Some(0) => Framing::Empty,
        Some(n) => Framing::Length(n),
    })
}

/// The elements of a comma-separated header field, over all its lines, trimmed.
fn list_items(headers: &HeaderMap, name: HeaderName) -> impl Iterator<Item = &[u8]> {
    headers
        .get_all(name)
        .into_iter()
        .flat_map(|v| v.as_bytes().split(|b| *b == b','))
        .map(<[u8]>::trim_ascii)
}

/// Whether a comma-separated header lists `token` (case-insensitive).
fn has_token(headers: &HeaderMap, name: HeaderName, token: &str) -> bool {
    list_items(headers, name).any(|t| t.eq_ignore_ascii_case(token.as_bytes()))
}

/// Decodes a request body delimited by its length or chunked, from the bytes read so far.
#[derive(Debug)]
pub struct BodyDecoder {
    kind: Kind,
    /// Bytes of trailer fields seen (bounded like a head).
    trailer_bytes: usize,
}

#[derive(Debug)]
enum Kind {
    Length(u64),
    Chunked(Chunk),
}

/// Where a chunked body's decoder is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    Size,
    Data(u64),
    DataEnd,
    Trailers,
    Done,
}

impl BodyDecoder {
    pub fn new(framing: Framing) -> BodyDecoder {
        let kind = match framing {
            Framing::Empty => Kind::Length(0),
            Framing::Length(n) => Kind::Length(n),
            Framing::Chunked => Kind::Chunked(Chunk::Size),
        };
        BodyDecoder {
            kind,
            trailer_bytes: 0,
        }
    }

    /// Whether the whole body has been decoded.
    pub fn is_complete(&self) -> bool {
        match self.kind {
            Kind::Length(n) => n == 0,
            Kind::Chunked(c) => c == Chunk::Done,
        }
    }

    /// The next piece of body at the start of `buf` (taken out of it), or `None` when more
    /// bytes are needed or the body is complete; what follows the body stays in `buf`.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Bytes>, &'static str> {
        match &mut self.kind {
            Kind::Length(left) => {
                let take = (*left).min(buf.len() as u64) as usize;
                if take == 0 {
                    return Ok(None);
                }
                *left -= take as u64;
                Ok(Some(buf.split_to(take).freeze()))
            }
            Kind::Chunked(state) => decode_chunked(state, buf, &mut self.trailer_bytes),
        }
    }
}

/// Steps a chunked body's decoder over `buf` (RFC 9112, section 7.1): the next data, or
/// `None` when more bytes are needed or the body is done.
fn decode_chunked(
    state: &mut Chunk,
    buf: &mut BytesMut,
    trailer_bytes: &mut usize,
) -> Result<Option<Bytes>, &'static str> {
    loop {
        match *state {
            Chunk::Size => {
                // The same limit whether the line came whole or in pieces (the last byte of
                // a piece may be the line's CR).
                let Some(end) = find_crlf(buf) else {
                    return if buf.len() > MAX_CHUNK_LINE + 1 {
                        Err("chunk size line too long")
                    } else {
                        Ok(None)
                    };
                };
                if end > MAX_CHUNK_LINE {
                    return Err("chunk size line too long");
                }
                let line = buf.split_to(end + 2);
                let digits = line[..end]
                    .split(|b| *b == b';')
                    .next()
                    .unwrap_or_default()
                    .trim_ascii_end();
                if digits.is_empty()
                    || digits.len() > 16
                    || !digits.iter().all(u8::is_ascii_hexdigit)
                {
                    return Err("malformed chunk size");
                }
                let size = digits.iter().fold(0u64, |n, d| {
                    n << 4 | u64::from((*d as char).to_digit(16).unwrap_or(0))
                });
                *state = if size == 0 {
                    Chunk::Trailers
                } else {
                    Chunk::Data(size)
                };
            }
            Chunk::Data(left) => {
                if buf.is_empty() {
                    return Ok(None);
                }
                let take = left.min(buf.len() as u64) as usize;
                *state = if take as u64 == left {
                    Chunk::DataEnd
                } else {
                    Chunk::Data(left - take as u64)
                };
                return Ok(Some(buf.split_to(take).freeze()));
            }
            Chunk::DataEnd => {
                if buf.len() < 2 {
                    return Ok(None);
                }
                if &buf[..2] != b"\r\n" {
                    return Err("chunk data not followed by CRLF");
                }
                buf.advance(2);
                *state = Chunk::Size;
            }
            Chunk::Trailers => {
                let Some(end) = find_crlf(buf) else {
                    return if *trailer_bytes + buf.len() > MAX_HEAD {
                        Err("trailer section too large")
                    } else {
                        Ok(None)
                    };
                };
                *trailer_bytes += end + 2;
                if *trailer_bytes > MAX_HEAD {
                    return Err("trailer section too large");
                }
                buf.advance(end + 2);
                if end == 0 {
                    *state = Chunk::Done;
                }
            }
            Chunk::Done => return Ok(None),
        }
    }
}

pub(crate) fn find_crlf(buf: &[u8]) -> Option<usize> {
    buf.windows(2).position(|w| w == b"\r\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(text: &str) -> Result<Option<Head>, Refusal> {
        parse_head(text.as_bytes())
    }

    #[test]
    fn a_chunked_body_decodes_the_same_one_byte_at_a_time() {
        let wire = b"4;name=value\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nx-t: 1\r\n\r\nNEXT";
        let mut whole = BodyDecoder::new(Framing::Chunked);
        let mut buf = BytesMut::from(&wire[..]);
        let mut all = Vec::new();
        while let Some(piece) = whole.decode(&mut buf).unwrap() {
            all.extend_from_slice(&piece);
        }
        assert!(whole.is_complete());
        assert_eq!(all, b"Wikipedia in\r\n\r\nchunks.");
        assert_eq!(&buf[..], b"NEXT", "what follows the body stays");

        let mut bytewise = BodyDecoder::new(Framing::Chunked);
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        for b in wire {
            buf.extend_from_slice(&[*b]);
            while let Some(piece) = bytewise.decode(&mut buf).unwrap() {
                got.extend_from_slice(&piece);
            }
        }
        assert_eq!(got, all);
    }

    #[test]
    fn malformed_chunks_are_errors() {
        for wire in [
            &b"g\r\n"[..],
            b" 1\r\na\r\n",
            b"1\r\nabc",
            b"11111111111111111\r\n",
        ] {
            let mut d = BodyDecoder::new(Framing::Chunked);
            let mut buf = BytesMut::from(wire);
            let mut result = Ok(None);
            for _ in 0..3 {
                result = d.decode(&mut buf);
                if result.is_err() {
                    break;
                }
            }
            assert!(result.is_err(), "{:?}", String::from_utf8_lossy(wire));
        }
        let long = format!("1;{}", "x".repeat(MAX_CHUNK_LINE + 1));
        let mut d = BodyDecoder::new(Framing::Chunked);
        assert!(d.decode(&mut BytesMut::from(long.as_bytes())).is_err());
    }

    #[test]
    fn heads_name_their_framing_and_connection() {
        let h = head(
            "POST /a?b=1 HTTP/1.1\r\nContent-Length: 3\r\nConnection: keep-alive, Close\r\n\r\nabc",
        )
        .unwrap()
        .unwrap();
        assert_eq!((h.body, h.keep_alive), (Framing::Length(3), false));
        assert_eq!(h.request.uri().query(), Some("b=1"));
        assert_eq!(&h.rest[..], b"abc");
        let h = head("GET / HTTP/1.0\r\nconnection: keep-alive\r\n\r\n")
            .unwrap()
            .unwrap();
        assert!(h.keep_alive && h.request.version() == Version::HTTP_10);
        let h = head("POST / HTTP/1.1\r\ncontent-length: 7, 7\r\nexpect: 100-continue\r\n\r\n")
            .unwrap()
            .unwrap();
        assert_eq!((h.body, h.expect_continue), (Framing::Length(7), true));
        assert!(
            head("GET / HTTP/1.1\r\nhost: x\r\n").unwrap().is_none(),
            "incomplete"
        );
        let refused = |t: &str| head(t).err().map(|r| r.status.as_u16());
        assert_eq!(
            refused("POST / HTTP/1.0\r\ntransfer-encoding: chunked\r\n\r\n"),
            Some(400)
        );
        assert_eq!(
            refused("POST / HTTP/1.1\r\ntransfer-encoding: chunked, gzip\r\n\r\n"),
            Some(501)
        );
        assert_eq!(refused("GET / HTTP/2.0\r\n\r\n"), Some(505));
        let many: String = (0..=MAX_HEADERS).map(|i| format!("h{i}: v\r\n")).collect();
        assert_eq!(refused(&format!("GET / HTTP/1.1\r\n{many}\r\n")), Some(431));
    }
}
