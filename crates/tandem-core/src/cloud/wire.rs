//! The JSON of OpenAI-compatible completions, as servers really send it.
//!
//! llama-server reports token ids in `logprobs.content[].id`; vLLM and OpenAI use the legacy
//! `logprobs.tokens` form without ids. Both parse; ids are used only when present.

use crate::edge::TokenId;
use serde::Deserialize;

/// A `/v1/completions` or `/v1/chat/completions` response body.
#[derive(Debug, Deserialize)]
pub(super) struct CompletionResponse {
    pub choices: Vec<Choice>,
    #[serde(default)]
    pub usage: Option<UsageBody>,
}

#[derive(Debug, Deserialize)]
pub(super) struct Choice {
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub message: Option<Message>,
    #[serde(default)]
    pub logprobs: Option<Logprobs>,
    #[serde(default)]
    pub finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(super) struct Message {
    #[serde(default)]
    pub content: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(super) struct Logprobs {
    #[serde(default)]
    pub content: Option<Vec<TokenLogprob>>,
}

#[derive(Debug, Deserialize)]
pub(super) struct TokenLogprob {
    #[serde(default)]
    pub id: Option<TokenId>,
}

#[derive(Debug, Deserialize)]
pub(super) struct UsageBody {
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    #[serde(default)]
    pub completion_tokens: Option<u64>,
}

/// An error body: `{"error": {"message": ...}}`.
#[derive(Debug, Deserialize)]
pub(super) struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Deserialize)]
pub(super) struct ErrorDetail {
    pub message: String,
}

/// `/tokenize` (llama-server, `tandem serve`) response.
#[derive(Debug, Deserialize)]
pub(super) struct TokenizeResponse {
    pub tokens: Vec<TokenId>,
}

impl Choice {
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
        content.iter().map(|t| t.id).collect()
    }
}

/// The message of an error body, or the body itself cut short.
pub(super) fn error_message(body: &str) -> String {
    serde_json::from_str::<ErrorBody>(body)
        .map(|b| b.error.message)
        .unwrap_or_else(|_| body.chars().take(200).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama_server_logprobs_give_ids() {
        let body = r#"{"choices":[{"text":" blue","index":0,"finish_reason":"length",
            "logprobs":{"content":[{"id":6303,"token":" blue","bytes":[32],"logprob":-0.1,"top_logprobs":[]}]}}],
            "usage":{"prompt_tokens":12,"completion_tokens":1,"total_tokens":13}}"#;
        let r: CompletionResponse = serde_json::from_str(body).unwrap();
        assert_eq!(r.choices[0].ids(), Some(vec![6303]));
        assert_eq!(r.choices[0].text(), " blue");
        assert_eq!(r.usage.unwrap().prompt_tokens, Some(12));
    }

    #[test]
    fn legacy_logprobs_and_chat_messages_parse_without_ids() {
        let legacy = r#"{"choices":[{"text":"ab","logprobs":{"tokens":["a","b"],"token_logprobs":[-1,-2]},"finish_reason":"stop"}]}"#;
        let r: CompletionResponse = serde_json::from_str(legacy).unwrap();
        assert_eq!(r.choices[0].ids(), None);
        assert_eq!(r.choices[0].finish_reason.as_deref(), Some("stop"));
        let chat = r#"{"choices":[{"message":{"role":"assistant","content":"hi"},"finish_reason":"length"}]}"#;
        let r: CompletionResponse = serde_json::from_str(chat).unwrap();
        assert_eq!(r.choices[0].text(), "hi");
    }

    #[test]
    fn partial_ids_are_not_trusted() {
        let body = r#"{"choices":[{"text":"ab","logprobs":{"content":[{"id":1},{"token":"b"}]}}]}"#;
        let r: CompletionResponse = serde_json::from_str(body).unwrap();
        assert_eq!(r.choices[0].ids(), None);
    }

    #[test]
    fn error_messages_are_extracted_or_cut() {
        assert_eq!(
            error_message(r#"{"error":{"message":"bad key","type":"x"}}"#),
            "bad key"
        );
        assert_eq!(error_message(&"x".repeat(500)).len(), 200);
    }
}
