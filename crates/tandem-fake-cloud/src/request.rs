//! Reading the parts of a completion request that shape the answer.
//!
//! Requests are read as the shared wire types (`tandem-wire`), so the fake accepts exactly
//! what Tandem's client sends; fields it does not act on are ignored, and fields of the wrong
//! type are rejected, so a client bug shows up as a 400, not as a silently different answer.

use serde_json::error::Category;
use tandem_wire::{ChatRequest, CompletionRequest, Endpoint, MessageContent, Prompt};

/// Why a completion request was answered with 400.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BadRequest {
    /// The body is not JSON at all.
    #[error("We could not parse the JSON body of your request: {0}")]
    NotJson(serde_json::Error),
    /// The JSON is not a request of the endpoint: a field is missing or of the wrong type.
    #[error("invalid request body: {0}")]
    Shape(serde_json::Error),
}

impl From<serde_json::Error> for BadRequest {
    fn from(e: serde_json::Error) -> Self {
        match e.classify() {
            Category::Syntax | Category::Eof | Category::Io => BadRequest::NotJson(e),
            Category::Data => BadRequest::Shape(e),
        }
    }
}

/// What a completion request asks the fake for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Asked {
    /// Prompt size reported in `usage`: ids for id prompts, words otherwise.
    pub prompt_tokens: usize,
    /// How many scripted tokens to answer with.
    pub max_tokens: usize,
    /// Whether to answer with Server-Sent Events.
    pub stream: bool,
    /// Whether to include llama-server style logprobs.
    pub logprobs: bool,
    /// The reply so far, when a chat request asks to continue it: the text of its final
    /// message, sent as an assistant message with `continue_final_message`.
    pub continued: Option<String>,
}

/// `max_tokens` when the request leaves it out, as OpenAI's legacy API does.
const DEFAULT_MAX_TOKENS: u32 = 16;

impl Asked {
    /// Reads a request body sent to `endpoint`.
    pub fn parse(endpoint: Endpoint, body: &[u8]) -> Result<Asked, BadRequest> {
        let asked = match endpoint {
            Endpoint::Completions => {
                let request: CompletionRequest = serde_json::from_slice(body)?;
                Asked {
                    prompt_tokens: match &request.prompt {
                        Prompt::Text(text) => words(text).max(1),
                        Prompt::Ids(ids) => ids.len(),
                    },
                    max_tokens: request.generation.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)
                        as usize,
                    stream: request.generation.stream,
                    logprobs: request.logprobs.and_then(|l| l.alternatives()).is_some(),
                    continued: None,
                }
            }
            Endpoint::Chat => {
                let request: ChatRequest = serde_json::from_slice(body)?;
                Asked {
                    prompt_tokens: request
                        .messages
                        .iter()
                        .map(|message| content_words(&message.content))
                        .sum(),
                    max_tokens: request.token_limit().unwrap_or(DEFAULT_MAX_TOKENS) as usize,
                    stream: request.generation.stream,
                    logprobs: request.logprob_alternatives().is_some(),
                    continued: reply_to_continue(&request),
                }
            }
        };
        Ok(asked)
    }
}

/// The final message's text when `request` asks to continue it: an assistant message, sent
/// with `continue_final_message: true`.
fn reply_to_continue(request: &ChatRequest) -> Option<String> {
    let last = request.messages.last()?;
    let continues = request.continue_final_message == Some(true) && last.role == "assistant";
    continues.then(|| last.content.texts().concat())
}

fn content_words(content: &MessageContent) -> usize {
    content.texts().into_iter().map(words).sum()
}

fn words(text: &str) -> usize {
    text.split_whitespace().count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn parse(endpoint: Endpoint, body: Value) -> Asked {
        Asked::parse(endpoint, body.to_string().as_bytes()).expect("valid request")
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
            Asked {
                prompt_tokens: 1,
                max_tokens: 16,
                stream: false,
                logprobs: false,
                continued: None,
            }
        );
    }

    #[test]
    fn logprobs_accepts_ints_and_bools() {
        for (logprobs, expected) in [
            (json!(1), true),
            (json!(0), true),
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
    fn only_a_final_assistant_message_sent_with_the_flag_is_continued() {
        let count = json!({"role": "assistant", "content": "1, 2,"});
        let user = json!({"role": "user", "content": "count"});
        for (messages, flag, expected) in [
            (json!([user, count]), json!(true), Some("1, 2,")),
            (json!([user, count]), json!(false), None),
            (json!([user, count]), Value::Null, None),
            (json!([count, user]), json!(true), None),
            (json!([]), json!(true), None),
        ] {
            let body = json!({"messages": messages, "continue_final_message": flag});
            let request = parse(Endpoint::Chat, body.clone());
            assert_eq!(request.continued.as_deref(), expected, "{body}");
        }
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
            let parsed = Asked::parse(endpoint, body.to_string().as_bytes());
            assert!(matches!(parsed, Err(BadRequest::Shape(_))), "{body}");
        }
        let not_json = Asked::parse(Endpoint::Completions, b"{not json");
        assert!(matches!(not_json, Err(BadRequest::NotJson(_))));
    }
}
