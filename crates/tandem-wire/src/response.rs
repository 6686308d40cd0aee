//! What servers answer: completions (whole or streamed), model lists, errors, `/tokenize`.
//!
//! Reading is lenient, because real servers differ: llama-server reports token ids in
//! `logprobs.content[].id`, vLLM and OpenAI use the legacy `logprobs.tokens` form without ids,
//! and fields they leave out (or send as `null`) read as their defaults. Ids are used only
//! when present for every token.

use crate::{Endpoint, TokenId};
use serde::{Deserialize, Deserializer, Serialize};

/// A `/v1/completions` or `/v1/chat/completions` response, or one chunk of its stream.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    /// `cmpl-…` or `chatcmpl-…`.
    #[serde(default)]
    pub id: String,
    /// See [`Endpoint::object`].
    #[serde(default)]
    pub object: String,
    /// Unix seconds.
    #[serde(default)]
    pub created: u64,
    /// The model that answered.
    #[serde(default)]
    pub model: String,
    /// The answers; Tandem asks for one.
    pub choices: Vec<Choice>,
    /// Tokens billed (in a stream: on the last chunk).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// llama-server: where the prompt's tokens went.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timings: Option<Timings>,
}

/// One answer of a completion. Exactly one of `text`, `message` and `delta` is set, by
/// endpoint and framing (see [`Choice::carrying`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Choice {
    /// Which answer (always 0 here).
    #[serde(default)]
    pub index: u32,
    /// `/v1/completions`: the text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// `/v1/chat/completions`, whole: the assistant's message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<ReplyMessage>,
    /// `/v1/chat/completions`, streamed: what this chunk adds to the message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta: Option<ReplyMessage>,
    /// Per-token logprobs, when asked for (`null` otherwise).
    #[serde(default)]
    pub logprobs: Option<Logprobs>,
    /// `stop` (the turn ended), `length` (the limit was reached); `null` mid-stream.
    #[serde(default)]
    pub finish_reason: Option<String>,
}

impl Choice {
    /// A choice carrying `text` the way `endpoint` frames it, whole or as a stream `chunk`;
    /// no logprobs, no finish reason yet.
    pub fn carrying(endpoint: Endpoint, chunk: bool, text: impl Into<String>) -> Choice {
        let text = text.into();
        match (endpoint, chunk) {
            (Endpoint::Completions, _) => Choice {
                text: Some(text),
                ..Choice::default()
            },
            (Endpoint::Chat, false) => Choice {
                message: Some(ReplyMessage {
                    role: Some("assistant".into()),
                    content: Some(text),
                }),
                ..Choice::default()
            },
            (Endpoint::Chat, true) => Choice {
                delta: Some(ReplyMessage {
                    role: None,
                    content: Some(text),
                }),
                ..Choice::default()
            },
        }
    }

    /// The returned text, from either endpoint.
    pub fn text(&self) -> String {
        self.text
            .clone()
            .or_else(|| self.message.as_ref().and_then(|m| m.content.clone()))
            .unwrap_or_default()
    }

    /// Token ids, if the server reported one for every token.
    pub fn ids(&self) -> Option<Vec<TokenId>> {
        let content = self.logprobs.as_ref()?.content.as_ref()?;
        content.iter().map(|t| t.chosen.id).collect()
    }
}

/// The assistant's message, or what a stream chunk adds to it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplyMessage {
    /// `assistant` (left out of stream deltas).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The text (`null` from servers answering with tool calls instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
}

/// `logprobs` of a choice, in llama-server's (and OpenAI chat's) `content` layout.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Logprobs {
    /// One entry per generated token; absent in the legacy `tokens` layout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Vec<TokenLogprob>>,
}

/// One generated token with its logprob and the most likely alternatives.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TokenLogprob {
    /// The token chosen.
    #[serde(flatten)]
    pub chosen: Candidate,
    /// The most likely tokens at this position, best first.
    #[serde(default, deserialize_with = "null_as_default")]
    pub top_logprobs: Vec<Candidate>,
}

/// A token and its logprob.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    /// The token id (llama-server and `tandem serve` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<TokenId>,
    /// The token as text (lossy where it holds part of a character).
    #[serde(default, deserialize_with = "null_as_default")]
    pub token: String,
    /// The token's bytes.
    #[serde(default, deserialize_with = "null_as_default")]
    pub bytes: Vec<u8>,
    /// Natural log of its probability.
    #[serde(default, deserialize_with = "null_as_default")]
    pub logprob: f32,
}

/// `usage` of a response: tokens as the server counts them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens in the prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u64>,
    /// Tokens generated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_tokens: Option<u64>,
    /// Both together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<u64>,
    /// What the prompt's tokens were: OpenAI's (and most hosts') count of those read from
    /// the provider's prompt cache, which are billed lower.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_details: Option<PromptTokensDetails>,
    /// DeepSeek's name for the same count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_cache_hit_tokens: Option<u64>,
}

/// `usage.prompt_tokens_details`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptTokensDetails {
    /// Prompt tokens read from the provider's prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
}

impl Usage {
    /// The usage of `prompt` prompt tokens and `completion` generated ones.
    pub fn new(prompt: u64, completion: u64) -> Usage {
        Usage {
            prompt_tokens: Some(prompt),
            completion_tokens: Some(completion),
            total_tokens: Some(prompt + completion),
            prompt_tokens_details: None,
            prompt_cache_hit_tokens: None,
        }
    }

    /// The same usage with `cached` of the prompt tokens read from a prompt cache.
    pub fn with_cached(self, cached: u64) -> Usage {
        Usage {
            prompt_tokens_details: Some(PromptTokensDetails {
                cached_tokens: Some(cached),
            }),
            ..self
        }
    }

    /// Prompt tokens the server says came from its prompt cache, under either name.
    pub fn cached_prompt_tokens(&self) -> Option<u64> {
        self.prompt_tokens_details
            .and_then(|details| details.cached_tokens)
            .or(self.prompt_cache_hit_tokens)
    }
}

/// llama-server's `timings`: `prompt_n` prompt tokens decoded, `cache_n` reused from the
/// previous request's KV cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Timings {
    /// Prompt tokens decoded.
    pub prompt_n: u32,
    /// Prompt tokens reused from the cache.
    pub cache_n: u32,
    /// Time spent on the prompt.
    pub prompt_ms: f64,
    /// Tokens generated.
    pub predicted_n: u32,
    /// Time spent generating.
    pub predicted_ms: f64,
}

/// `/v1/models`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelList {
    /// `list`.
    #[serde(default)]
    pub object: String,
    /// The served models.
    pub data: Vec<ModelCard>,
}

impl ModelList {
    /// The list of one served model.
    pub fn one(id: impl Into<String>, owned_by: impl Into<String>) -> ModelList {
        ModelList {
            object: "list".into(),
            data: vec![ModelCard {
                id: id.into(),
                object: "model".into(),
                owned_by: owned_by.into(),
            }],
        }
    }
}

/// One entry of `/v1/models`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelCard {
    /// The name requests use.
    pub id: String,
    /// `model`.
    #[serde(default)]
    pub object: String,
    /// Who serves it.
    #[serde(default)]
    pub owned_by: String,
}

/// An error response: `{"error": {"message": …, "type": …}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

impl ErrorBody {
    /// An error of OpenAI type `kind` (`invalid_request_error`, `server_error`, …).
    pub fn new(message: impl Into<String>, kind: impl Into<String>) -> ErrorBody {
        ErrorBody {
            error: ErrorDetail {
                message: message.into(),
                kind: kind.into(),
                code: None,
            },
        }
    }

    /// The same error with a machine-readable `code` (`invalid_api_key`, …).
    pub fn with_code(mut self, code: impl Into<String>) -> ErrorBody {
        self.error.code = Some(ErrorCode::Text(code.into()));
        self
    }
}

/// The inside of an [`ErrorBody`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// For people.
    pub message: String,
    /// OpenAI's error type.
    #[serde(rename = "type", default, deserialize_with = "null_as_default")]
    pub kind: String,
    /// A code, where the server gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<ErrorCode>,
}

/// An error's `code`: OpenAI sends a name, vLLM the HTTP status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ErrorCode {
    /// E.g. `rate_limit_exceeded`.
    Text(String),
    /// E.g. 400.
    Number(i64),
}

/// llama-server's `/tokenize` response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenizeResponse {
    /// The token ids.
    pub tokens: Vec<TokenId>,
}

/// llama-server's `/health` response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    /// `ok` once the model is loaded.
    pub status: String,
}

/// Reads `null` as the default, as servers send `null` for what they do not report.
fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer).map(Option::unwrap_or_default)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn llama_server_logprobs_give_ids() {
        let body = r#"{"choices":[{"text":" blue","index":0,"finish_reason":"length",
            "logprobs":{"content":[{"id":6303,"token":" blue","bytes":[32],"logprob":-0.1,"top_logprobs":[]}]}}],
            "usage":{"prompt_tokens":12,"completion_tokens":1,"total_tokens":13},
            "timings":{"prompt_n":12,"prompt_ms":3.5,"prompt_per_second":3000.1,"cache_n":0}}"#;
        let r: Completion = serde_json::from_str(body).unwrap();
        assert_eq!(r.choices[0].ids(), Some(vec![6303]));
        assert_eq!(r.choices[0].text(), " blue");
        assert_eq!(r.usage.unwrap().prompt_tokens, Some(12));
        assert_eq!(r.timings.unwrap().prompt_n, 12);
    }

    #[test]
    fn legacy_logprobs_and_chat_messages_parse_without_ids() {
        let legacy = r#"{"choices":[{"text":"ab","logprobs":{"tokens":["a","b"],"token_logprobs":[-1,-2]},"finish_reason":"stop"}]}"#;
        let r: Completion = serde_json::from_str(legacy).unwrap();
        assert_eq!(r.choices[0].ids(), None);
        assert_eq!(r.choices[0].finish_reason.as_deref(), Some("stop"));
        let chat = r#"{"choices":[{"message":{"role":"assistant","content":"hi"},"finish_reason":"length",
            "logprobs":{"content":[{"token":"hi","bytes":null,"logprob":-0.5,"top_logprobs":[]}]}}]}"#;
        let r: Completion = serde_json::from_str(chat).unwrap();
        assert_eq!(r.choices[0].text(), "hi");
        assert_eq!(r.choices[0].ids(), None);
    }

    #[test]
    fn partial_ids_are_not_trusted() {
        let body = r#"{"choices":[{"text":"ab","logprobs":{"content":[{"id":1},{"token":"b"}]}}]}"#;
        let r: Completion = serde_json::from_str(body).unwrap();
        assert_eq!(r.choices[0].ids(), None);
    }

    #[test]
    fn choices_are_framed_by_endpoint() {
        let json = |choice: Choice| serde_json::to_value(choice).unwrap();
        assert_eq!(
            json(Choice::carrying(Endpoint::Completions, true, "a")),
            json!({"index": 0, "text": "a", "logprobs": null, "finish_reason": null})
        );
        assert_eq!(
            json(Choice::carrying(Endpoint::Chat, false, "a"))["message"],
            json!({"role": "assistant", "content": "a"})
        );
        assert_eq!(
            json(Choice::carrying(Endpoint::Chat, true, "a"))["delta"],
            json!({"content": "a"})
        );
    }

    #[test]
    fn token_logprobs_write_llama_servers_shape() {
        let chosen = Candidate {
            id: Some(7),
            token: "é".into(),
            bytes: "é".into(),
            logprob: -0.1,
        };
        let entry = TokenLogprob {
            chosen: chosen.clone(),
            top_logprobs: vec![Candidate { id: None, ..chosen }],
        };
        let candidate = json!({"token": "é", "bytes": [0xc3, 0xa9], "logprob": -0.1});
        let mut expected = candidate.clone();
        expected["id"] = json!(7);
        expected["top_logprobs"] = json!([candidate]);
        // Through the text, as on the wire: an f32 is written with its shortest digits.
        let sent = serde_json::to_string(&entry).unwrap();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&sent).unwrap(),
            expected
        );
    }

    #[test]
    fn error_bodies_carry_a_code_by_name_or_number() {
        let body = ErrorBody::new("bad key", "invalid_request_error").with_code("invalid_api_key");
        assert_eq!(
            serde_json::to_value(&body).unwrap(),
            json!({"error": {"message": "bad key", "type": "invalid_request_error", "code": "invalid_api_key"}})
        );
        let vllm: ErrorBody =
            serde_json::from_str(r#"{"error":{"message":"no","type":null,"code":400}}"#).unwrap();
        assert_eq!(vllm.error.code, Some(ErrorCode::Number(400)));
    }

    /// OpenAI and most hosts name cached prompt tokens in `prompt_tokens_details`, DeepSeek at
    /// the top of `usage`; details a host adds beside them (audio tokens) are ignored.
    #[test]
    fn cached_prompt_tokens_are_read_under_either_name() {
        let usage = |json: &str| serde_json::from_str::<Usage>(json).unwrap();
        let openai = usage(
            r#"{"prompt_tokens":2006,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":1920,"audio_tokens":0}}"#,
        );
        assert_eq!(openai.cached_prompt_tokens(), Some(1920));
        let deepseek = usage(
            r#"{"prompt_tokens":90,"prompt_cache_hit_tokens":64,"prompt_cache_miss_tokens":26}"#,
        );
        assert_eq!(deepseek.cached_prompt_tokens(), Some(64));
        let plain = usage(r#"{"prompt_tokens":9,"prompt_tokens_details":null}"#);
        assert_eq!(plain.cached_prompt_tokens(), None);
        let written = serde_json::to_value(Usage::new(10, 2).with_cached(8)).unwrap();
        assert_eq!(
            written["prompt_tokens_details"],
            json!({"cached_tokens": 8})
        );
    }
}
