//! Token accounting of one run: every model call (turn) recorded, summed per model for
//! `RUN_FINISHED.usage`, and reported per turn and per model in the shape of ml-commons'
//! `include_token_usage` (`CUSTOM {name: "token_usage"}`).

use serde_json::{Value, json};

use crate::model::Usage;
use crate::protocol::events::TokenUsage;

#[derive(Debug, Clone)]
struct Turn {
    provider: String,
    model: String,
    /// The gateway's id of the registered model, when the call went through one.
    model_ref: Option<String>,
    usage: Usage,
}

/// The usage ledger of a run.
#[derive(Debug, Default)]
pub struct Ledger {
    turns: Vec<Turn>,
}

fn fields(u: &Usage) -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    m.insert("input_tokens".into(), json!(u.input_tokens));
    m.insert("output_tokens".into(), json!(u.output_tokens));
    m.insert(
        "total_tokens".into(),
        json!(u.input_tokens + u.output_tokens),
    );
    m.insert(
        "cache_read_input_tokens".into(),
        json!(u.cached_input_tokens.unwrap_or(0)),
    );
    m.insert(
        "cache_creation_input_tokens".into(),
        json!(u.cache_write_input_tokens.unwrap_or(0)),
    );
    if let Some(r) = u.reasoning_tokens {
        m.insert("reasoning_tokens".into(), json!(r));
    }
    m
}

impl Turn {
    /// `model_id` (the registered model's id, else the provider's model), `model_name` and
    /// `provider` of a report entry.
    fn name_into(&self, m: &mut serde_json::Map<String, Value>) {
        m.insert(
            "model_id".into(),
            json!(self.model_ref.as_deref().unwrap_or(&self.model)),
        );
        m.insert("model_name".into(), json!(self.model));
        m.insert("provider".into(), json!(self.provider));
    }
}

impl Ledger {
    /// Records one model call: the provider's model name and, when the call went through a
    /// registered model, its gateway id (`model_id` of the report, streamed or not).
    pub fn record(&mut self, provider: &str, model: &str, model_ref: Option<&str>, usage: Usage) {
        crate::metrics::tokens(provider, model, usage.input_tokens, usage.output_tokens);
        self.turns.push(Turn {
            provider: provider.to_string(),
            model: model.to_string(),
            model_ref: model_ref.map(str::to_string),
            usage,
        });
    }

    /// Takes over the calls another ledger recorded (a nested run's), already counted in the
    /// metrics.
    pub fn absorb(&mut self, other: Ledger) {
        self.turns.extend(other.turns);
    }

    /// Whether any call was recorded.
    pub fn is_empty(&self) -> bool {
        self.turns.is_empty()
    }

    /// Sums per (provider, model), in order of first use, with their call counts.
    fn per_model(&self) -> Vec<(&Turn, u32, Usage)> {
        let mut out: Vec<(&Turn, u32, Usage)> = Vec::new();
        for t in &self.turns {
            match out.iter_mut().find(|(f, _, _)| {
                f.provider == t.provider && f.model == t.model && f.model_ref == t.model_ref
            }) {
                Some((_, n, u)) => {
                    *n += 1;
                    u.add(&t.usage);
                }
                None => out.push((t, 1, t.usage)),
            }
        }
        out
    }

    /// `RUN_FINISHED.usage` / `RUN_ERROR.usage`: one entry per provider and model.
    pub fn ag_ui(&self) -> Vec<TokenUsage> {
        self.per_model()
            .into_iter()
            .map(|(t, _, u)| TokenUsage {
                provider: Some(t.provider.clone()),
                model: Some(t.model.clone()),
                input_tokens: Some(u.input_tokens),
                output_tokens: Some(u.output_tokens),
                total_tokens: Some(u.input_tokens + u.output_tokens),
                reasoning_tokens: u.reasoning_tokens,
                cached_input_tokens: u.cached_input_tokens,
                cache_write_input_tokens: u.cache_write_input_tokens,
            })
            .collect()
    }

    /// The `token_usage` report: `per_turn_usage` and `per_model_usage`.
    pub fn report(&self) -> Value {
        let per_turn: Vec<Value> = self
            .turns
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let mut m = fields(&t.usage);
                m.insert("turn".into(), json!(i + 1));
                t.name_into(&mut m);
                Value::Object(m)
            })
            .collect();
        let per_model: Vec<Value> = self
            .per_model()
            .into_iter()
            .map(|(t, n, u)| {
                let mut m = fields(&u);
                t.name_into(&mut m);
                m.insert("call_count".into(), json!(n));
                Value::Object(m)
            })
            .collect();
        json!({ "per_turn_usage": per_turn, "per_model_usage": per_model })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_sum_per_model() {
        let mut l = Ledger::default();
        let u = |i, o| Usage {
            input_tokens: i,
            output_tokens: o,
            cached_input_tokens: Some(1),
            ..Default::default()
        };
        l.record("bedrock", "claude", Some("m-1"), u(10, 2));
        l.record("bedrock", "claude", Some("m-1"), u(20, 3));
        let r = l.report();
        assert_eq!(r["per_turn_usage"][0]["model_id"], "m-1");
        assert_eq!(r["per_model_usage"][0]["model_name"], "claude");
        assert_eq!(r["per_turn_usage"][1]["turn"], 2);
        assert_eq!(r["per_turn_usage"][1]["total_tokens"], 23);
        assert_eq!(r["per_model_usage"][0]["call_count"], 2);
        assert_eq!(r["per_model_usage"][0]["input_tokens"], 30);
        assert_eq!(r["per_model_usage"][0]["cache_read_input_tokens"], 2);
        let a = l.ag_ui();
        assert_eq!(
            (a.len(), a[0].total_tokens, a[0].cached_input_tokens),
            (1, Some(35), Some(2))
        );
    }
}
