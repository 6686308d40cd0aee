//! OpenAI-shaped answers: whole completions, Server-Sent Event streams, model lists, errors.
//!
//! Logprobs follow llama-server's `{"content": [...]}` layout rather than OpenAI's legacy
//! parallel arrays, because that is what the collaborative decoder reads from real servers.

use std::time::{SystemTime, UNIX_EPOCH};

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use tandem_wire::{
    Candidate, Choice, Completion, Endpoint, ErrorBody, Logprobs, ModelList, ReplyMessage,
    TokenLogprob, Usage,
};

use crate::script::ScriptToken;

/// The logprob reported for every scripted token: the fake is always confident.
const LOGPROB: f32 = -0.1;

/// The id [`crate::Fault::ForeignIds`] reports for every token.
pub const FOREIGN_ID: tandem_wire::TokenId = 2_000_000_000;

/// The finish reason of every answer: the fake always stops at the token limit.
const FINISH_REASON: &str = "length";

/// An error response with OpenAI's `{"error": {...}}` body.
pub(crate) fn error(status: StatusCode, body: ErrorBody) -> Response {
    (status, Json(body)).into_response()
}

/// The answer to `GET /v1/models`.
pub(crate) fn models(model: &str) -> Response {
    Json(ModelList::one(model, "tandem-fake-cloud")).into_response()
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
    pub tokens: Vec<ScriptToken>,
    /// Prompt size reported in `usage`.
    pub prompt_tokens: usize,
    /// Of those, how many `usage` says came from a prompt cache (`None`: not reported).
    pub cached_prompt_tokens: Option<usize>,
    /// Whether to include logprobs.
    pub logprobs: bool,
    /// Whether logprobs report [`FOREIGN_ID`] instead of the tokens' ids.
    pub foreign_ids: bool,
}

impl Answer<'_> {
    /// The whole answer as one JSON body.
    pub fn whole(&self) -> Response {
        let text: String = self
            .tokens
            .iter()
            .map(|token| token.text.as_str())
            .collect();
        let choice = Choice {
            logprobs: self.logprobs_of(&self.tokens),
            finish_reason: Some(FINISH_REASON.into()),
            ..Choice::carrying(self.endpoint, false, text)
        };
        let body = Completion {
            usage: Some(self.usage()),
            ..self.envelope(false, unix_now(), choice)
        };
        Json(body).into_response()
    }

    /// The answer as Server-Sent Events: one chunk per token, then a chunk with the finish
    /// reason and usage but no token, then `[DONE]`.
    pub fn stream(&self) -> Response {
        let created = unix_now();
        let chunks = self.tokens.iter().map(|token| {
            let choice = Choice {
                logprobs: self.logprobs_of(std::slice::from_ref(token)),
                ..Choice::carrying(self.endpoint, true, token.text.clone())
            };
            self.envelope(true, created, choice)
        });
        let last = Completion {
            usage: Some(self.usage()),
            ..self.envelope(true, created, self.last_chunk_choice())
        };
        let mut events: String = chunks
            .chain([last])
            .map(|chunk| format!("data: {}\n\n", sse_json(&chunk)))
            .collect();
        events.push_str("data: [DONE]\n\n");
        (
            [
                (header::CONTENT_TYPE, "text/event-stream"),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            events,
        )
            .into_response()
    }

    fn envelope(&self, chunk: bool, created: u64, choice: Choice) -> Completion {
        Completion {
            id: format!("{}-{}", self.endpoint.id_prefix(), self.number),
            object: self.endpoint.object(chunk).into(),
            created,
            model: self.model.to_owned(),
            choices: vec![choice],
            ..Completion::default()
        }
    }

    /// The closing chunk: no token (an empty `delta` for chat), the finish reason.
    fn last_chunk_choice(&self) -> Choice {
        let empty = match self.endpoint {
            Endpoint::Completions => Choice::carrying(Endpoint::Completions, true, ""),
            Endpoint::Chat => Choice {
                delta: Some(ReplyMessage::default()),
                ..Choice::default()
            },
        };
        Choice {
            finish_reason: Some(FINISH_REASON.into()),
            ..empty
        }
    }

    fn logprobs_of(&self, tokens: &[ScriptToken]) -> Option<Logprobs> {
        self.logprobs.then(|| Logprobs {
            content: Some(
                tokens
                    .iter()
                    .map(|token| {
                        let id = match self.foreign_ids {
                            true => Some(FOREIGN_ID),
                            false => token.id,
                        };
                        logprob_entry(token, id)
                    })
                    .collect(),
            ),
        })
    }

    fn usage(&self) -> Usage {
        let usage = Usage::new(self.prompt_tokens as u64, self.tokens.len() as u64);
        match self.cached_prompt_tokens {
            Some(cached) => usage.with_cached(cached as u64),
            None => usage,
        }
    }
}

/// One llama-server style logprobs entry; the only candidate is the token itself.
fn logprob_entry(token: &ScriptToken, id: Option<tandem_wire::TokenId>) -> TokenLogprob {
    let candidate = Candidate {
        id,
        token: token.text.clone(),
        bytes: token.text.as_bytes().to_vec(),
        logprob: LOGPROB,
    };
    TokenLogprob {
        chosen: candidate.clone(),
        top_logprobs: vec![candidate],
    }
}

/// A chunk as the JSON of one event (the wire types always serialize).
fn sse_json(chunk: &Completion) -> String {
    serde_json::to_string(chunk).expect("wire types serialize")
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}
