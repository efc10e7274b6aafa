//! ml-commons' built-in connector processing functions, by name: a `pre_process_function`
//! turns `_predict`'s `text_docs` (or a rerank's `query_text` + `text_docs`) into the
//! parameters the connector's `request_body` names, and a `post_process_function` turns the
//! endpoint's answer into model tensors (`sentence_embedding`, `similarity`). Painless scripts
//! are not run: a connector naming one is refused when it is created.

use serde_json::{Map, Value, json};

/// What a pre-process function reads `_predict`'s input into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pre {
    /// `input`: the docs as an array (OpenAI, and ml-commons' default embedding input).
    OpenAiEmbedding,
    /// `inputText`: one doc per request (Bedrock Titan), with `dimensions`.
    BedrockEmbedding,
    /// `texts`: the docs as an array (Cohere embed, on Cohere or on Bedrock).
    CohereEmbedding,
    /// `inputText` and `inputImage` from the first two docs (Bedrock Titan multimodal).
    MultimodalEmbedding,
    /// `query`, `documents`, `top_n` (Cohere rerank, ml-commons' default rerank input).
    CohereRerank,
    /// `query`, `documents` (Bedrock's rerank input as ml-commons writes it).
    BedrockRerank,
    /// The remote-inference input passed through as parameters (ml-commons' ingest and search
    /// processors use these names; `_predict` already passes its parameters as they are).
    PassThrough,
}

/// ml-commons' pre-process function names and what each reads into.
pub const PRE_FUNCTIONS: &[(&str, Pre)] = &[
    (
        "connector.pre_process.openai.embedding",
        Pre::OpenAiEmbedding,
    ),
    (
        "connector.pre_process.default.embedding",
        Pre::OpenAiEmbedding,
    ),
    (
        "connector.pre_process.bedrock.embedding",
        Pre::BedrockEmbedding,
    ),
    (
        "connector.pre_process.cohere.embedding",
        Pre::CohereEmbedding,
    ),
    (
        "connector.pre_process.multimodal.embedding",
        Pre::MultimodalEmbedding,
    ),
    ("connector.pre_process.cohere.rerank", Pre::CohereRerank),
    ("connector.pre_process.default.rerank", Pre::CohereRerank),
    ("connector.pre_process.bedrock.rerank", Pre::BedrockRerank),
    (
        "pre_process_function.process_remote_inference_input",
        Pre::PassThrough,
    ),
    (
        "pre_process_function.convert_input_to_json_string",
        Pre::PassThrough,
    ),
];

/// What a post-process function makes of the part of the answer its JSONPath picks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Post {
    /// A list of vectors, one `sentence_embedding` tensor each.
    Embeddings,
    /// One vector (Bedrock Titan answers one per request), or a list of them.
    BedrockEmbedding,
    /// `[{index, relevance_score | relevanceScore}]`, one `similarity` tensor per document in
    /// the documents' order.
    Rerank,
}

/// ml-commons' post-process function names, the JSONPath each reads and what it makes of it.
pub const POST_FUNCTIONS: &[(&str, &str, Post)] = &[
    (
        "connector.post_process.openai.embedding",
        "$.data[*].embedding",
        Post::Embeddings,
    ),
    (
        "connector.post_process.cohere.embedding",
        "$.embeddings",
        Post::Embeddings,
    ),
    (
        "connector.post_process.cohere_v2.embedding.float",
        "$.embeddings.float",
        Post::Embeddings,
    ),
    (
        "connector.post_process.cohere_v2.embedding.int8",
        "$.embeddings.int8",
        Post::Embeddings,
    ),
    (
        "connector.post_process.cohere_v2.embedding.uint8",
        "$.embeddings.uint8",
        Post::Embeddings,
    ),
    (
        "connector.post_process.default.embedding",
        "$[*]",
        Post::Embeddings,
    ),
    (
        "connector.post_process.bedrock.embedding",
        "$.embedding",
        Post::BedrockEmbedding,
    ),
    (
        "connector.post_process.bedrock_v2.embedding.float",
        "$.embeddingsByType.float",
        Post::BedrockEmbedding,
    ),
    (
        "connector.post_process.cohere.rerank",
        "$.results",
        Post::Rerank,
    ),
    (
        "connector.post_process.bedrock.rerank",
        "$.results",
        Post::Rerank,
    ),
    (
        "connector.post_process.default.rerank",
        "$[*]",
        Post::Rerank,
    ),
];

/// The pre-process function `name`, or why it cannot be used.
pub fn pre(name: &str) -> Result<Pre, String> {
    PRE_FUNCTIONS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, p)| *p)
        .ok_or_else(|| unknown(name, PRE_FUNCTIONS.iter().map(|(n, _)| *n)))
}

/// The post-process function `name` (its JSONPath and kind), or why it cannot be used.
pub fn post(name: &str) -> Result<(&'static str, Post), String> {
    POST_FUNCTIONS
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, path, p)| (*path, *p))
        .ok_or_else(|| unknown(name, POST_FUNCTIONS.iter().map(|(n, _, _)| *n)))
}

fn unknown<'a>(name: &str, known: impl Iterator<Item = &'a str>) -> String {
    let known: Vec<&str> = known.collect();
    if name.contains('\n') || name.contains("params") || name.contains("return") {
        format!(
            "painless scripts are not supported; use one of ml-commons' built-in functions {known:?}"
        )
    } else {
        format!("{name:?} is not a built-in function; expected one of {known:?}")
    }
}

/// How many docs go into one request: the connector's `input_docs_processed_step_size`, else
/// one for functions that read a single doc (Bedrock Titan), else all of them.
pub fn step_size(pre: Pre, params: &Map<String, Value>, docs: usize) -> usize {
    let configured = params.get("input_docs_processed_step_size").and_then(|v| {
        v.as_u64()
            .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
    });
    match (configured, pre) {
        (Some(n), _) if n > 0 => n as usize,
        (_, Pre::BedrockEmbedding) => 1,
        _ => docs.max(1),
    }
}

/// The parameters `pre` makes of a batch of `docs` (and a rerank's `query`); `connector`
/// are the connector's parameters (Titan v2's `dimensions` defaults to 1024 from there).
pub fn pre_process(
    pre: Pre,
    docs: &[String],
    query: Option<&str>,
    connector: &Map<String, Value>,
) -> Map<String, Value> {
    let mut p = Map::new();
    match pre {
        Pre::OpenAiEmbedding | Pre::PassThrough => {
            p.insert("input".into(), json!(docs));
        }
        Pre::BedrockEmbedding => {
            p.insert(
                "inputText".into(),
                json!(docs.first().cloned().unwrap_or_default()),
            );
            let dims = connector
                .get("dimensions")
                .and_then(|v| v.as_u64().or_else(|| v.as_str()?.parse().ok()))
                .unwrap_or(1024);
            p.insert("dimensions".into(), json!(dims));
        }
        Pre::CohereEmbedding => {
            p.insert("texts".into(), json!(docs));
        }
        Pre::MultimodalEmbedding => {
            if let Some(t) = docs.first() {
                p.insert("inputText".into(), json!(t));
            }
            if let Some(i) = docs.get(1) {
                p.insert("inputImage".into(), json!(i));
            }
        }
        Pre::CohereRerank => {
            p.insert("query".into(), json!(query.unwrap_or_default()));
            p.insert("documents".into(), json!(docs));
            p.insert("top_n".into(), json!(docs.len()));
        }
        Pre::BedrockRerank => {
            p.insert("query".into(), json!(query.unwrap_or_default()));
            p.insert("documents".into(), json!(docs));
        }
    }
    p
}

/// One `sentence_embedding` tensor in ml-commons' shape.
pub fn embedding_tensor(v: &[f32]) -> Value {
    json!({
        "name": "sentence_embedding",
        "data_type": "FLOAT32",
        "shape": [v.len()],
        "data": v,
    })
}

fn vector(v: &Value) -> Option<Vec<f32>> {
    let a = v.as_array()?;
    if a.is_empty() {
        return None;
    }
    a.iter().map(|x| x.as_f64().map(|f| f as f32)).collect()
}

/// The vectors in what an embedding post-process function picked.
pub fn vectors(kind: Post, picked: &Value) -> Result<Vec<Vec<f32>>, String> {
    let bad = || {
        "the embedding endpoint's answer does not hold what the post-process function reads (a list of number lists)"
            .to_string()
    };
    match kind {
        Post::BedrockEmbedding => match vector(picked) {
            Some(v) => Ok(vec![v]),
            None => vectors(Post::Embeddings, picked),
        },
        Post::Embeddings => picked
            .as_array()
            .ok_or_else(bad)?
            .iter()
            .map(|v| vector(v).ok_or_else(bad))
            .collect(),
        Post::Rerank => Err("a rerank function answers scores, not vectors".into()),
    }
}

/// The vectors of an embedding answer when the connector names no post-process function:
/// the shapes OpenAI, Bedrock Titan and Cohere answer in.
pub fn guess_vectors(doc: &Value) -> Result<Vec<Vec<f32>>, String> {
    for (path, kind) in [
        ("$.data[*].embedding", Post::Embeddings),
        ("$.embedding", Post::BedrockEmbedding),
        ("$.embeddings", Post::Embeddings),
        ("$.embeddings.float", Post::Embeddings),
    ] {
        // A wildcard path matching nothing answers an empty list: not this shape.
        if let Ok(Some(v)) = super::jsonpath::select(doc, path)
            && let Ok(out) = vectors(kind, &v)
            && !out.is_empty()
        {
            return Ok(out);
        }
    }
    Err("the embedding endpoint's answer holds no embeddings; name a post_process_function".into())
}

/// `similarity` tensors, one per document in the documents' order, from a rerank answer.
pub fn rerank_tensors(picked: &Value, docs: usize) -> Result<Vec<Value>, String> {
    let items = picked
        .as_array()
        .ok_or("the rerank answer holds no results list")?;
    let mut scores = vec![None; docs];
    for it in items {
        let idx = it.get("index").and_then(Value::as_u64);
        let score = it
            .get("relevance_score")
            .or_else(|| it.get("relevanceScore"))
            .and_then(Value::as_f64);
        if let (Some(i), Some(s)) = (idx, score)
            && let Some(slot) = scores.get_mut(i as usize)
        {
            *slot = Some(s);
        }
    }
    Ok(scores
        .into_iter()
        .flatten()
        .map(|s| json!({"name": "similarity", "data_type": "FLOAT32", "shape": [1], "data": [s]}))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_and_unknown_ones_are_named() {
        assert_eq!(
            pre("connector.pre_process.openai.embedding"),
            Ok(Pre::OpenAiEmbedding)
        );
        assert_eq!(
            post("connector.post_process.bedrock.embedding").map(|p| p.0),
            Ok("$.embedding")
        );
        let e = pre("connector.pre_process.nope").unwrap_err();
        assert!(e.contains("not a built-in"), "{e}");
        let e = pre("\n def text = params.text_docs;\n return text;").unwrap_err();
        assert!(e.contains("painless"), "{e}");
    }

    #[test]
    fn titan_takes_one_doc_per_request_unless_configured() {
        let none = Map::new();
        assert_eq!(step_size(Pre::BedrockEmbedding, &none, 3), 1);
        assert_eq!(step_size(Pre::OpenAiEmbedding, &none, 3), 3);
        let mut p = Map::new();
        p.insert("input_docs_processed_step_size".into(), json!("2"));
        assert_eq!(step_size(Pre::OpenAiEmbedding, &p, 3), 2);
    }

    #[test]
    fn answers_become_vectors_and_scores() {
        let openai = json!({"data": [{"embedding": [0.1, 0.2]}, {"embedding": [0.3, 0.4]}]});
        let (path, kind) = post("connector.post_process.openai.embedding").unwrap();
        let picked = crate::connector::jsonpath::select(&openai, path)
            .unwrap()
            .unwrap();
        assert_eq!(vectors(kind, &picked).unwrap().len(), 2);
        assert_eq!(
            guess_vectors(&json!({"embedding": [1.0, 2.0]})).unwrap()[0],
            vec![1.0, 2.0]
        );
        assert!(guess_vectors(&json!({"x": 1})).is_err());
        let scores = rerank_tensors(
            &json!([{"index": 1, "relevance_score": 0.9}, {"index": 0, "relevance_score": 0.1}]),
            2,
        )
        .unwrap();
        assert_eq!(scores[0]["data"][0], 0.1);
        assert_eq!(scores[1]["data"][0], 0.9);
    }
}
