//! Reading the parts of a completion request that shape the answer.
//!
//! Only the fields the fake acts on are read; everything else is ignored, as a lenient server
//! would. Fields of the wrong type are rejected so a client bug shows up as a 400, not as a
//! silently different answer.

use serde_json::Value;

/// The two completion endpoints; they share token generation and differ in framing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Endpoint {
    /// `POST /v1/completions`, the legacy text completion API.
    Completions,
    /// `POST /v1/chat/completions`.
    Chat,
}

/// Why a completion request was answered with 400.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BadRequest {
    /// The body is not JSON at all.
    #[error("We could not parse the JSON body of your request: {0}")]
    NotJson(#[from] serde_json::Error),
    /// `prompt` is missing or neither a string nor an array of token ids.
    #[error("'prompt' must be a string or an array of integer token ids")]
    Prompt,
    /// `messages` is missing or not an array of messages.
    #[error("'messages' must be an array of messages")]
    Messages,
    /// `max_tokens` is not a non-negative integer.
    #[error("'max_tokens' must be a non-negative integer")]
    MaxTokens,
}

/// The fields of a completion request that decide the answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CompletionRequest {
    /// Prompt size reported in `usage`: ids for id prompts, words otherwise.
    pub prompt_tokens: usize,
    /// How many scripted tokens to answer with.
    pub max_tokens: usize,
    /// Whether to answer with Server-Sent Events.
    pub stream: bool,
    /// Whether to include llama-server style logprobs.
    pub logprobs: bool,
}

/// `max_tokens` when the request leaves it out, as OpenAI's legacy API does.
const DEFAULT_MAX_TOKENS: usize = 16;

impl CompletionRequest {
    /// Reads a request body sent to `endpoint`.
    pub fn parse(endpoint: Endpoint, body: &Value) -> Result<CompletionRequest, BadRequest> {
        let prompt_tokens = match endpoint {
            Endpoint::Completions => prompt_tokens(body.get("prompt"))?,
            Endpoint::Chat => message_words(body.get("messages"))?,
        };
        let max_tokens = match body.get("max_tokens").or(body.get("max_completion_tokens")) {
            None | Some(Value::Null) => DEFAULT_MAX_TOKENS,
            Some(value) => value
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or(BadRequest::MaxTokens)?,
        };
        Ok(CompletionRequest {
            prompt_tokens,
            max_tokens,
            stream: body.get("stream").and_then(Value::as_bool).unwrap_or(false),
            logprobs: body.get("logprobs").is_some_and(truthy),
        })
    }
}

/// `logprobs` is an int in the legacy API and a bool in the chat API.
fn truthy(value: &Value) -> bool {
    match value {
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|n| n != 0.0),
        _ => false,
    }
}

fn prompt_tokens(prompt: Option<&Value>) -> Result<usize, BadRequest> {
    match prompt {
        Some(Value::String(text)) => Ok(words(text).max(1)),
        Some(Value::Array(ids)) if ids.iter().all(|id| id.is_i64() || id.is_u64()) => Ok(ids.len()),
        _ => Err(BadRequest::Prompt),
    }
}

fn message_words(messages: Option<&Value>) -> Result<usize, BadRequest> {
    let messages = messages
        .and_then(Value::as_array)
        .ok_or(BadRequest::Messages)?;
    Ok(messages
        .iter()
        .map(|message| match message.get("content") {
            Some(Value::String(text)) => words(text),
            // Content parts: only the text parts count.
            Some(Value::Array(parts)) => parts
                .iter()
                .filter_map(|part| part.get("text").and_then(Value::as_str))
                .map(words)
                .sum(),
            _ => 0,
        })
        .sum())
}

fn words(text: &str) -> usize {
    text.split_whitespace().count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(endpoint: Endpoint, body: Value) -> CompletionRequest {
        CompletionRequest::parse(endpoint, &body).expect("valid request")
    }

    #[test]
    fn string_prompt_counts_words_with_a_minimum_of_one() {
        let request = parse(Endpoint::Completions, json!({"prompt": "one two  three"}));
        assert_eq!(request.prompt_tokens, 3);
        let empty = parse(Endpoint::Completions, json!({"prompt": "   "}));
        assert_eq!(empty.prompt_tokens, 1);
    }

    #[test]
    fn id_prompt_counts_ids() {
        let request = parse(Endpoint::Completions, json!({"prompt": [1, 2, 3, 4]}));
        assert_eq!(request.prompt_tokens, 4);
    }

    #[test]
    fn defaults_apply_when_fields_are_absent() {
        let request = parse(Endpoint::Completions, json!({"prompt": "hi"}));
        assert_eq!(
            request,
            CompletionRequest {
                prompt_tokens: 1,
                max_tokens: 16,
                stream: false,
                logprobs: false,
            }
        );
    }

    #[test]
    fn logprobs_accepts_ints_and_bools() {
        for (logprobs, expected) in [
            (json!(1), true),
            (json!(0), false),
            (json!(true), true),
            (json!(false), false),
            (Value::Null, false),
        ] {
            let body = json!({"prompt": "hi", "logprobs": logprobs});
            assert_eq!(parse(Endpoint::Completions, body).logprobs, expected);
        }
    }

    #[test]
    fn chat_counts_words_across_messages() {
        let body = json!({
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "hello there you"}]},
            ],
            "max_completion_tokens": 3,
        });
        let request = parse(Endpoint::Chat, body);
        assert_eq!(request.prompt_tokens, 5);
        assert_eq!(request.max_tokens, 3);
    }

    #[test]
    fn ill_typed_fields_are_rejected() {
        for (endpoint, body) in [
            (Endpoint::Completions, json!({})),
            (Endpoint::Completions, json!({"prompt": ["a", "b"]})),
            (
                Endpoint::Completions,
                json!({"prompt": "a", "max_tokens": -1}),
            ),
            (Endpoint::Chat, json!({"prompt": "a"})),
        ] {
            assert!(CompletionRequest::parse(endpoint, &body).is_err(), "{body}");
        }
    }
}
