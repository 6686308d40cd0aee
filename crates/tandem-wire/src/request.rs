//! What clients send: `/v1/completions`, `/v1/chat/completions` and llama-server's `/tokenize`.
//!
//! Optional fields are left out of the JSON when unset, so a request carries only what its
//! sender chose; a server reading one fills in its own defaults.

use crate::{TokenId, MAX_TOP_LOGPROBS};
use serde::{Deserialize, Serialize};

/// `prompt` of `/v1/completions`: token ids when the server shares the sender's vocabulary,
/// text otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Prompt {
    /// Plain text (servers parse control tokens such as `<|im_start|>`).
    Text(String),
    /// Token ids in the served model's vocabulary.
    Ids(Vec<TokenId>),
}

impl Default for Prompt {
    /// The empty text prompt.
    fn default() -> Self {
        Prompt::Text(String::new())
    }
}

/// `logprobs` of `/v1/completions`: OpenAI sends how many alternatives it wants, some clients
/// send `true`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum LogprobsRequest {
    /// `true`: one alternative; `false`: none.
    Flag(bool),
    /// This many alternatives (0 still reports the chosen token's logprob).
    Count(u32),
}

impl LogprobsRequest {
    /// How many alternatives to report per token; `None` when no logprobs are wanted.
    pub fn alternatives(self) -> Option<usize> {
        match self {
            LogprobsRequest::Flag(wanted) => wanted.then_some(1),
            LogprobsRequest::Count(n) => Some((n as usize).clamp(1, MAX_TOP_LOGPROBS)),
        }
    }
}

/// What both completion endpoints take besides the prompt: the model, the limit, sampling,
/// framing and caching.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Generation {
    /// Model name (servers with one model ignore it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Tokens to generate at most (chat requests may use `max_completion_tokens` instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Sampling temperature (0: greedy).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Nucleus sampling threshold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    /// Sampling seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Answer with Server-Sent Events.
    #[serde(default)]
    pub stream: bool,
    /// llama-server: keep the KV cache of the previous request, so a request that extends the
    /// previous prompt costs only its new suffix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_prompt: Option<bool>,
}

/// A `/v1/completions` request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CompletionRequest {
    /// The prompt to continue.
    pub prompt: Prompt,
    /// Report logprobs (with token ids, on llama-server and `tandem serve`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<LogprobsRequest>,
    /// The model, limit, sampling and framing.
    #[serde(flatten)]
    pub generation: Generation,
}

/// One chat message of a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// What was said.
    pub content: MessageContent,
}

impl ChatMessage {
    /// A message whose content is plain text.
    pub fn text(role: impl Into<String>, content: impl Into<String>) -> ChatMessage {
        ChatMessage {
            role: role.into(),
            content: MessageContent::Text(content.into()),
        }
    }
}

/// `content` of a chat message: a string, or OpenAI's list of typed parts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MessageContent {
    /// Plain text.
    Text(String),
    /// Typed parts; only `text` parts carry text.
    Parts(Vec<ContentPart>),
}

impl MessageContent {
    /// The text of each text part, in order (one for plain text).
    pub fn texts(&self) -> Vec<&str> {
        match self {
            MessageContent::Text(text) => vec![text],
            MessageContent::Parts(parts) => {
                parts.iter().filter_map(|p| p.text.as_deref()).collect()
            }
        }
    }
}

/// One part of a message's content, e.g. `{"type": "text", "text": "hello"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContentPart {
    /// `text`, `image_url`, …
    #[serde(rename = "type")]
    pub kind: String,
    /// The text of a `text` part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// A `/v1/chat/completions` request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The conversation so far.
    pub messages: Vec<ChatMessage>,
    /// Tokens to generate at most (OpenAI's current name for `max_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_completion_tokens: Option<u32>,
    /// Report logprobs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<bool>,
    /// Alternatives per token, with `logprobs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_logprobs: Option<u32>,
    /// vLLM and SGLang: continue the final assistant message instead of starting a new one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continue_final_message: Option<bool>,
    /// vLLM and SGLang: whether to open a new assistant turn (off when continuing one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_generation_prompt: Option<bool>,
    /// The model, limit, sampling and framing.
    #[serde(flatten)]
    pub generation: Generation,
}

impl ChatRequest {
    /// The token limit the request sets, under either of its names (the current one wins).
    pub fn token_limit(&self) -> Option<u32> {
        self.max_completion_tokens.or(self.generation.max_tokens)
    }

    /// How many alternatives to report per token; `None` when no logprobs are wanted.
    pub fn logprob_alternatives(&self) -> Option<usize> {
        self.logprobs
            .unwrap_or(false)
            .then(|| (self.top_logprobs.unwrap_or(1) as usize).clamp(1, MAX_TOP_LOGPROBS))
    }
}

/// llama-server's `/tokenize` request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenizeRequest {
    /// The text to tokenize.
    pub content: String,
    /// Add the model's special tokens (such as BOS).
    #[serde(default)]
    pub add_special: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn prompts_are_text_or_ids() {
        let r: CompletionRequest = serde_json::from_value(json!({"prompt": [1, 2]})).unwrap();
        assert_eq!(r.prompt, Prompt::Ids(vec![1, 2]));
        let r: CompletionRequest = serde_json::from_value(json!({"prompt": "hi"})).unwrap();
        assert_eq!(r.prompt, Prompt::Text("hi".into()));
        assert!(serde_json::from_value::<CompletionRequest>(json!({"prompt": ["a"]})).is_err());
        assert!(serde_json::from_value::<CompletionRequest>(json!({})).is_err());
    }

    #[test]
    fn logprobs_accept_counts_and_flags() {
        for (logprobs, expected) in [
            (json!(1), Some(1)),
            (json!(0), Some(1)),
            (json!(5), Some(5)),
            (json!(99), Some(MAX_TOP_LOGPROBS)),
            (json!(true), Some(1)),
            (json!(false), None),
            (json!(null), None),
        ] {
            let r: CompletionRequest =
                serde_json::from_value(json!({"prompt": "p", "logprobs": logprobs})).unwrap();
            assert_eq!(r.logprobs.and_then(LogprobsRequest::alternatives), expected);
        }
    }

    #[test]
    fn chat_content_may_be_parts_and_the_current_limit_wins() {
        let r: ChatRequest = serde_json::from_value(json!({
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "hello"}, {"type": "image_url"}]},
            ],
            "max_tokens": 9,
            "max_completion_tokens": 3,
            "logprobs": true,
        }))
        .unwrap();
        assert_eq!(r.messages[0].content.texts(), ["be brief"]);
        assert_eq!(r.messages[1].content.texts(), ["hello"]);
        assert_eq!(r.token_limit(), Some(3));
        assert_eq!(r.logprob_alternatives(), Some(1));
    }

    #[test]
    fn unset_fields_are_left_out() {
        let r = ChatRequest {
            messages: vec![ChatMessage::text("user", "hi")],
            ..ChatRequest::default()
        };
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({"messages": [{"role": "user", "content": "hi"}], "stream": false})
        );
    }
}
