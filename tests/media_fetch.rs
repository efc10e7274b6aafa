/// URL media a provider cannot fetch itself is downloaded by the gateway only under the media
/// policy (schemes, hosts, private addresses, size); refusals are reported as `content_dropped`.
mod common;

use common::*;
use serde_json::json;

fn doc_and_audio(addr: std::net::SocketAddr, doc: &str) -> serde_json::Value {
    run_input(
        "t-media",
        json!([{"id": "u", "role": "user", "content": [
            {"type": "text", "text": "summarise"},
            {"type": "document", "source": {"type": "url", "value": format!("http://{addr}/media/{doc}")}},
            {"type": "video", "source": {"type": "url", "value": "https://example.com/v.mp4"}}
        ]}]),
    )
}

#[tokio::test]
async fn allowed_urls_are_fetched_and_sent_as_bytes() {
    let up = FakeOpenAi::start(vec![
        Reply::Sse(text_chunks("A tiny PDF.")),
        Reply::Sse(text_chunks("No.")),
    ])
    .await;
    let media = "[media]\nallow_schemes = [\"http\", \"https\"]\nallow_hosts = [\"127.0.0.1\"]\nallow_private = true\nmax_bytes = 1048576\n";
    let gw = Gateway::start(&format!("{media}{}", up.config(""))).await;
    let events = gw.run("a", &doc_and_audio(up.addr, "notes.pdf")).await;
    let content = &up.requests()[0]["messages"][1]["content"];
    assert_eq!(content[1]["type"], "file");
    // "%PDF-1.4 tiny" in base64, with the media type from the response.
    assert_eq!(
        content[1]["file"]["file_data"],
        "data:application/pdf;base64,JVBERi0xLjQgdGlueQ=="
    );
    assert_eq!(content[1]["file"]["filename"], "notes.pdf");
    let dropped = of_type(&events, "CUSTOM")
        .into_iter()
        .find(|e| e["name"] == "content_dropped")
        .unwrap();
    assert_eq!(
        dropped["value"],
        json!([{"kind": "video", "reason": "OpenAI-compatible chat APIs take no video"}])
    );

    // Over the size limit: dropped with the reason, the run goes on.
    let events = gw.run("a", &doc_and_audio(up.addr, "big.bin")).await;
    let dropped = of_type(&events, "CUSTOM")
        .into_iter()
        .find(|e| e["name"] == "content_dropped")
        .unwrap();
    assert!(
        dropped["value"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("byte limit"),
        "{dropped}"
    );
    assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED");
}

#[tokio::test]
async fn loopback_urls_are_refused_by_default() {
    let up = FakeOpenAi::start(vec![Reply::Sse(text_chunks("ok"))]).await;
    let media = "[media]\nallow_schemes = [\"http\"]\n";
    let gw = Gateway::start(&format!("{media}{}", up.config(""))).await;
    let events = gw.run("a", &doc_and_audio(up.addr, "notes.pdf")).await;
    let dropped = of_type(&events, "CUSTOM")
        .into_iter()
        .find(|e| e["name"] == "content_dropped")
        .unwrap();
    assert!(
        dropped["value"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("private or loopback"),
        "{dropped}"
    );
    let content = &up.requests()[0]["messages"][1]["content"];
    assert_eq!(content, "summarise", "only the text reached the model");
}
