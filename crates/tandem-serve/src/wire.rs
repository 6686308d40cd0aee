//! Request and response bodies of the OpenAI API subset Tandem serves.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `prompt` of `/v1/completions`: text or token ids.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Prompt {
    /// Plain text (control tokens such as `<|im_start|>` are parsed).
    Text(String),
    /// Token ids in the served model's vocabulary.
    Ids(Vec<i32>),
}

/// `/v1/completions` request.
#[derive(Debug, Clone, Deserialize)]
pub struct CompletionRequest {
    pub prompt: Prompt,
    #[serde(default)]
    pub max_tokens: Option<u32>,
    #[serde(default)]
    pub temperature: Option<f32>,
    #[serde(default)]
    pub top_p: Option<f32>,
    #[serde(default)]
    pub seed: Option<u64>,
    #[serde(default)]
    pub stream: bool,
    /// OpenAI sends an integer; some clients send `true`.
    #[serde(default)]
    pub logprobs: Option<Value>,
}

/// One chat message.
#[derive(Debug, Clone, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

/// `/v1/chat/completions` request.
#[derive(Debug, Clone, Deserialize)]
pub struct ChatRequest {
    pub messages: Vec<ChatMessage>,
    #[serde(default)]
    pub max_tokens: Option<u32>,
    #[serde(default)]
    pub max_completion_tokens: Option<u32>,
    #[serde(default)]
    pub temperature: Option<f32>,
    #[serde(default)]
    pub top_p: Option<f32>,
    #[serde(default)]
    pub seed: Option<u64>,
    #[serde(default)]
    pub stream: bool,
    #[serde(default)]
    pub logprobs: Option<bool>,
    #[serde(default)]
    pub top_logprobs: Option<usize>,
}

/// `/tokenize` request (llama-server's shape).
#[derive(Debug, Clone, Deserialize)]
pub struct TokenizeRequest {
    pub content: String,
    #[serde(default)]
    pub add_special: bool,
}

/// How many alternatives a `logprobs` field asks for (`None`: no logprobs).
pub fn logprobs_count(value: &Option<Value>) -> Option<usize> {
    match value {
        Some(Value::Bool(true)) => Some(1),
        Some(Value::Number(n)) => n.as_u64().map(|n| (n as usize).clamp(1, 20)),
        _ => None,
    }
}

/// One alternative in `top_logprobs`.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TopLogprob {
    pub id: i32,
    pub token: String,
    pub bytes: Vec<u8>,
    pub logprob: f32,
}

/// One generated token in `logprobs.content` (llama-server's shape, ids included).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TokenLogprob {
    pub id: i32,
    pub token: String,
    pub bytes: Vec<u8>,
    pub logprob: f32,
    pub top_logprobs: Vec<TopLogprob>,
}

/// `usage` of a response.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Default)]
pub struct Usage {
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
    pub total_tokens: u32,
}

/// Where the prompt's tokens went (llama-server's `timings` names): `prompt_n` decoded,
/// `cache_n` reused from the previous request.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Default)]
pub struct Timings {
    pub prompt_n: u32,
    pub cache_n: u32,
    pub prompt_ms: f64,
    pub predicted_n: u32,
    pub predicted_ms: f64,
}

/// An OpenAI error body.
pub fn error_body(message: &str, kind: &str) -> Value {
    serde_json::json!({"error": {"message": message, "type": kind}})
}
