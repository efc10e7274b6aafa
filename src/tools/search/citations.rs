//! Search results as a `citations` activity: what a search tool found, sent into the run
//! before the tool returns, so a UI can draw the sources beside the answer (the model still
//! gets the full result). Kept small: snippets and titles are capped, and only what a UI draws
//! is sent.

use serde_json::{Map, Value, json};

use super::embedded::Hit;
use crate::protocol::events::Event;
use crate::tools::ToolContext;

/// Longest snippet sent (characters).
const MAX_SNIPPET_CHARS: usize = 300;
/// Longest title or query sent (characters).
const MAX_TITLE_CHARS: usize = 200;
/// Most results sent.
const MAX_RESULTS: usize = 50;
/// Fields of an OpenSearch document taken as its snippet, in this order.
const TEXT_FIELDS: &[&str] = &[
    "snippet",
    "text",
    "content",
    "body",
    "passage",
    "passage_text",
    "description",
    "summary",
];

fn cap(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max).collect();
    out.push('…');
    out
}

/// A URL from a document's metadata or source, if it has an http(s) one a UI may link to:
/// without the credentials a URL may carry (`user:password@`), and none rather than a cut one.
fn url_of(fields: &Map<String, Value>) -> Option<String> {
    let text = ["url", "link", "source_url", "href"]
        .iter()
        .find_map(|k| fields.get(*k).and_then(Value::as_str))?;
    let mut url = url::Url::parse(text).ok()?;
    if !matches!(url.scheme(), "http" | "https") {
        return None;
    }
    url.set_username("").ok()?;
    url.set_password(None).ok()?;
    Some(url.to_string()).filter(|u| u.chars().count() <= 2 * MAX_TITLE_CHARS)
}

/// One embedded hit as a citation.
pub fn from_hit(hit: &Hit) -> Value {
    let mut c = json!({
        "id": hit.id,
        "index": hit.index,
        "title": cap(hit.title.as_deref().unwrap_or(&hit.id), MAX_TITLE_CHARS),
        "snippet": cap(&hit.snippet, MAX_SNIPPET_CHARS),
    });
    // As the tool's result prints it (an f32's shortest form, not its f64 expansion).
    if let Ok(score) = hit.score.to_string().parse::<f64>()
        && score.is_finite()
    {
        c["score"] = json!(score);
    }
    if let Some(url) = hit.metadata.as_object().and_then(url_of) {
        c["url"] = json!(url);
    }
    c
}

/// One OpenSearch hit (`{_index, _id, _score, _source}`) as a citation: the title from the
/// document's `title` (else its id), the snippet from its first text field (else its source).
pub fn from_opensearch_hit(hit: &Value) -> Value {
    let id = match hit.get("_id") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    };
    let empty = Map::new();
    let source = hit
        .get("_source")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let title = ["title", "name", "headline"]
        .iter()
        .find_map(|k| source.get(*k).and_then(Value::as_str))
        .unwrap_or(&id);
    let snippet = TEXT_FIELDS
        .iter()
        .find_map(|k| source.get(*k).and_then(Value::as_str))
        .map(str::to_string)
        .unwrap_or_else(|| {
            if source.is_empty() {
                String::new()
            } else {
                Value::Object(source.clone()).to_string()
            }
        });
    let mut c = json!({
        "title": cap(title, MAX_TITLE_CHARS),
        "snippet": cap(&snippet, MAX_SNIPPET_CHARS),
    });
    if !id.is_empty() {
        c["id"] = json!(id);
    }
    if let Some(i) = hit.get("_index").and_then(Value::as_str) {
        c["index"] = json!(i);
    }
    if let Some(s) = hit.get("_score").and_then(Value::as_f64) {
        c["score"] = json!(s);
    }
    if let Some(url) = url_of(source) {
        c["url"] = json!(url);
    }
    c
}

/// Sends the results of call `tool_call_id` for `query` into the run as one
/// `ACTIVITY_SNAPSHOT` (`activityType: "citations"`). Nothing when the run does not stream
/// what tools send, or nothing was found; gives up when the call is cancelled.
pub async fn send(ctx: &ToolContext, query: &str, results: Vec<Value>) {
    if ctx.side.is_none() {
        return;
    }
    if results.is_empty() {
        return;
    }
    let results: Vec<Value> = results.into_iter().take(MAX_RESULTS).collect();
    let event = Event::ActivitySnapshot {
        message_id: crate::protocol::new_id("citations"),
        activity_type: "citations".into(),
        content: json!({
            "toolCallId": ctx.tool_call_id,
            "query": cap(query, MAX_TITLE_CHARS),
            "results": results,
        }),
        replace: None,
    };
    ctx.emit(event).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cited_url_keeps_no_credentials_and_is_never_cut() {
        let of = |u: &str| url_of(json!({ "url": u }).as_object().unwrap());
        assert_eq!(
            of("https://reader:s3cret@docs.example/a?b=1").as_deref(),
            Some("https://docs.example/a?b=1")
        );
        assert_eq!(of("ftp://docs.example/a"), None);
        assert_eq!(of("not a url"), None);
        assert_eq!(of(&format!("https://x.example/{}", "a".repeat(1000))), None);
    }

    #[test]
    fn opensearch_hits_become_small_citations() {
        let long = "word ".repeat(200);
        let c = from_opensearch_hit(&json!({"_index": "kb", "_id": "d1", "_score": 1.5,
            "_source": {"title": "Doc one", "text": long, "url": "https://example.com/d1"}}));
        assert_eq!(c["title"], "Doc one");
        assert_eq!(c["id"], "d1");
        assert_eq!(c["index"], "kb");
        assert_eq!(c["score"], 1.5);
        assert_eq!(c["url"], "https://example.com/d1");
        assert!(c["snippet"].as_str().unwrap().chars().count() <= MAX_SNIPPET_CHARS + 1);
        // No title or text field: the id and the source stand in; no nulls anywhere.
        let c = from_opensearch_hit(
            &json!({"_id": 7, "_score": null, "_source": {"n": 1, "url": "javascript:x"}}),
        );
        assert_eq!(
            c,
            json!({"title": "7", "id": "7", "snippet": "{\"n\":1,\"url\":\"javascript:x\"}"})
        );
    }
}
