//! The JSON of the OpenAI-compatible API that Tandem speaks, typed once for every side of it.
//!
//! Tandem's cloud client (`tandem-core`) sends these requests and reads these responses,
//! `tandem serve` reads the requests and writes the responses, and the fake cloud used by the
//! tests does the same: one set of types keeps the three from drifting apart. Each type reads
//! leniently (what real servers leave out has a default) and writes exactly what Tandem sends.
//!
//! llama-server's extensions are included where Tandem relies on them: token ids in
//! `logprobs.content[].id`, `cache_prompt`, `timings`, and `/tokenize`.
//!
//! ```
//! use tandem_wire::{Completion, CompletionRequest, Endpoint, Generation, Prompt};
//!
//! let request = CompletionRequest {
//!     prompt: Prompt::Ids(vec![1, 2, 3]),
//!     logprobs: None,
//!     generation: Generation {
//!         max_tokens: Some(4),
//!         ..Generation::default()
//!     },
//! };
//! let sent = serde_json::to_string(&request)?;
//! assert_eq!(sent, r#"{"prompt":[1,2,3],"max_tokens":4,"stream":false}"#);
//!
//! let body = r#"{"choices":[{"text":" blue","logprobs":{"content":[{"id":6303}]}}]}"#;
//! let reply: Completion = serde_json::from_str(body)?;
//! assert_eq!(reply.choices[0].text(), " blue");
//! assert_eq!(reply.choices[0].ids(), Some(vec![6303]));
//! assert_eq!(Endpoint::Completions.path(), "/completions");
//! # Ok::<(), serde_json::Error>(())
//! ```

mod request;
mod response;

pub use request::{
    ChatMessage, ChatRequest, CompletionRequest, ContentPart, Generation, LogprobsRequest,
    MessageContent, Prompt, TokenizeRequest,
};
pub use response::{
    Candidate, Choice, Completion, ErrorBody, ErrorCode, ErrorDetail, Health, Logprobs, ModelCard,
    ModelList, PromptTokensDetails, ReplyMessage, Timings, TokenLogprob, TokenizeResponse, Usage,
};

/// A token id in the served model's vocabulary.
pub type TokenId = i32;

/// The most alternatives per token a server reports (OpenAI's limit for `top_logprobs`).
pub const MAX_TOP_LOGPROBS: usize = 20;

/// The two completion endpoints: they share token generation and differ in framing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `POST /v1/completions`: a prompt in, `text` out.
    Completions,
    /// `POST /v1/chat/completions`: messages in, an assistant `message` (or `delta`) out.
    Chat,
}

impl Endpoint {
    /// The path under `/v1`.
    pub fn path(self) -> &'static str {
        match self {
            Endpoint::Completions => "/completions",
            Endpoint::Chat => "/chat/completions",
        }
    }

    /// The `object` of a response, whole or one stream chunk.
    pub fn object(self, chunk: bool) -> &'static str {
        match (self, chunk) {
            (Endpoint::Completions, _) => "text_completion",
            (Endpoint::Chat, false) => "chat.completion",
            (Endpoint::Chat, true) => "chat.completion.chunk",
        }
    }

    /// The prefix of a response's `id`.
    pub fn id_prefix(self) -> &'static str {
        match self {
            Endpoint::Completions => "cmpl",
            Endpoint::Chat => "chatcmpl",
        }
    }
}
