//! OpenAI-shaped answers: whole completions, Server-Sent Event streams, model lists, errors.
//!
//! Logprobs follow llama-server's `{"content": [...]}` layout rather than OpenAI's legacy
//! parallel arrays, because that is what the collaborative decoder reads from real servers.

use std::time::{SystemTime, UNIX_EPOCH};

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use crate::request::Endpoint;
use crate::script::ScriptToken;

/// The logprob reported for every scripted token: the fake is always confident.
const LOGPROB: f64 = -0.1;

/// An error response with OpenAI's `{"error": {...}}` body.
pub(crate) fn error(status: StatusCode, error: Value) -> Response {
    (status, Json(json!({ "error": error }))).into_response()
}

/// The answer to `GET /v1/models`.
pub(crate) fn models(model: &str) -> Response {
    Json(json!({
        "object": "list",
        "data": [{ "id": model, "object": "model", "owned_by": "tandem-fake-cloud" }],
    }))
    .into_response()
}

/// A successful answer to one completion request.
pub(crate) struct Answer<'a> {
    /// Decides the framing: `text` or `message`/`delta`.
    pub endpoint: Endpoint,
    /// Sequence number of the request, used in the completion id.
    pub number: usize,
    /// Model name echoed back.
    pub model: &'a str,
    /// The tokens answered, in order.
    pub tokens: Vec<&'a ScriptToken>,
    /// Prompt size reported in `usage`.
    pub prompt_tokens: usize,
    /// Whether to include logprobs.
    pub logprobs: bool,
}

impl Answer<'_> {
    /// The whole answer as one JSON body.
    pub fn whole(&self) -> Response {
        let object = match self.endpoint {
            Endpoint::Completions => "text_completion",
            Endpoint::Chat => "chat.completion",
        };
        let mut body = self.envelope(object, unix_now(), self.whole_choice());
        body["usage"] = self.usage();
        Json(body).into_response()
    }

    /// The answer as Server-Sent Events: one chunk per token, then a chunk with the finish
    /// reason and usage but no token, then `[DONE]`.
    pub fn stream(&self) -> Response {
        let object = match self.endpoint {
            Endpoint::Completions => "text_completion",
            Endpoint::Chat => "chat.completion.chunk",
        };
        let created = unix_now();
        let mut events: String = self
            .tokens
            .iter()
            .map(|token| self.envelope(object, created, self.token_chunk_choice(token)))
            .map(|chunk| format!("data: {chunk}\n\n"))
            .collect();
        let mut last = self.envelope(object, created, self.last_chunk_choice());
        last["usage"] = self.usage();
        events.push_str(&format!("data: {last}\n\ndata: [DONE]\n\n"));
        (
            [
                (header::CONTENT_TYPE, "text/event-stream"),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            events,
        )
            .into_response()
    }

    fn envelope(&self, object: &str, created: u64, choice: Value) -> Value {
        let id = match self.endpoint {
            Endpoint::Completions => format!("cmpl-{}", self.number),
            Endpoint::Chat => format!("chatcmpl-{}", self.number),
        };
        json!({
            "id": id,
            "object": object,
            "created": created,
            "model": self.model,
            "choices": [choice],
        })
    }

    fn whole_choice(&self) -> Value {
        let text: String = self
            .tokens
            .iter()
            .map(|token| token.text.as_str())
            .collect();
        let logprobs = self.logprobs_of(&self.tokens);
        match self.endpoint {
            Endpoint::Completions => json!({
                "index": 0, "text": text, "logprobs": logprobs, "finish_reason": "length",
            }),
            Endpoint::Chat => json!({
                "index": 0,
                "message": { "role": "assistant", "content": text },
                "logprobs": logprobs,
                "finish_reason": "length",
            }),
        }
    }

    fn token_chunk_choice(&self, token: &ScriptToken) -> Value {
        let logprobs = self.logprobs_of(&[token]);
        match self.endpoint {
            Endpoint::Completions => json!({
                "index": 0, "text": token.text, "logprobs": logprobs, "finish_reason": null,
            }),
            Endpoint::Chat => json!({
                "index": 0,
                "delta": { "content": token.text },
                "logprobs": logprobs,
                "finish_reason": null,
            }),
        }
    }

    fn last_chunk_choice(&self) -> Value {
        match self.endpoint {
            Endpoint::Completions => json!({
                "index": 0, "text": "", "logprobs": null, "finish_reason": "length",
            }),
            Endpoint::Chat => json!({
                "index": 0, "delta": {}, "logprobs": null, "finish_reason": "length",
            }),
        }
    }

    fn logprobs_of(&self, tokens: &[&ScriptToken]) -> Value {
        if self.logprobs {
            json!({ "content": tokens.iter().map(|token| logprob_entry(token)).collect::<Vec<_>>() })
        } else {
            Value::Null
        }
    }

    fn usage(&self) -> Value {
        let completion_tokens = self.tokens.len();
        json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": self.prompt_tokens + completion_tokens,
        })
    }
}

/// One llama-server style logprobs entry; the only candidate is the token itself.
fn logprob_entry(token: &ScriptToken) -> Value {
    let mut candidate = json!({
        "token": token.text,
        "bytes": token.text.as_bytes(),
        "logprob": LOGPROB,
    });
    if let Some(id) = token.id {
        candidate["id"] = json!(id);
    }
    let mut entry = candidate.clone();
    entry["top_logprobs"] = json!([candidate]);
    entry
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}
