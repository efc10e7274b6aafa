//! What an HTTP/1.x client sends: any bytes give a parsed head, whose body then decodes to its
//! end, an error or a need for more bytes, or a refusal; never a panic. A chunked body decodes
//! to the same bytes whether it arrives at once or in two pieces.
#![no_main]

use agui_gateway::http1::parse::{BodyDecoder, Framing, parse_head};
use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;

/// Every piece decodable from `buf` so far.
fn drain(decoder: &mut BodyDecoder, buf: &mut BytesMut, out: &mut Vec<u8>) -> Result<(), &'static str> {
    while let Some(piece) = decoder.decode(buf)? {
        assert!(!piece.is_empty(), "a piece carries bytes");
        out.extend_from_slice(&piece);
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    if let Ok(Some(head)) = parse_head(data) {
        let mut decoder = BodyDecoder::new(head.body);
        let mut buf = BytesMut::from(&head.rest[..]);
        let mut body = Vec::new();
        let decoded = drain(&mut decoder, &mut buf, &mut body);
        if let Framing::Length(n) = head.body {
            assert!(decoded.is_ok());
            assert_eq!(body.len() as u64, n.min(head.rest.len() as u64));
            assert_eq!(decoder.is_complete(), head.rest.len() as u64 >= n);
        }
    }

    let mut whole = BodyDecoder::new(Framing::Chunked);
    let mut buf = BytesMut::from(data);
    let mut once = Vec::new();
    let at_once = drain(&mut whole, &mut buf, &mut once);

    let mut split = BodyDecoder::new(Framing::Chunked);
    let cut = data.len() / 2;
    let mut pieces = BytesMut::from(&data[..cut]);
    let mut twice = Vec::new();
    let mut in_two = drain(&mut split, &mut pieces, &mut twice);
    if in_two.is_ok() {
        pieces.extend_from_slice(&data[cut..]);
        in_two = drain(&mut split, &mut pieces, &mut twice);
    }
    match at_once {
        Ok(()) => {
            assert!(in_two.is_ok(), "split: {in_two:?}");
            assert_eq!(once, twice);
            assert_eq!(whole.is_complete(), split.is_complete());
            assert_eq!(buf, pieces, "what follows the body");
        }
        Err(_) => assert!(in_two.is_err(), "split decoded what whole refused"),
    }
});
