//! The cloud side of collaborative decoding: any OpenAI-compatible server.
//!
//! [`Cloud`] is what the decode loop calls; [`client::CloudClient`] implements it over HTTP
//! (the only module that talks to the network for inference). Failures are values, never
//! panics: the loop turns each one into a notice and keeps the edge token.

mod client;
mod continuation;
mod presets;
mod settings;

pub use crate::endpoint::{is_on_this_machine, ApiKey, CloudMode};
pub use client::{CloudClient, CloudConfig};
pub use presets::{CloudPreset, CLOUD_PRESETS};

use crate::edge::TokenId;
use crate::message::Message;
use std::time::{Duration, Instant};

/// Text whose tokenization tells whether the cloud shares the edge vocabulary: words,
/// digits, whitespace runs and multibyte characters exercise the pre-tokenizer.
pub const VOCAB_PROBE: &str = "Tandem probe: naïve café, 12345 + 678 = 13023;\n\tδ ≥ 0 — 東京 🚀";

/// How often a wait for the cloud asks whether the user pressed Stop.
pub const STOP_POLL: Duration = Duration::from_millis(50);

/// What the loop asks the cloud for: the next tokens after the edge's exact prompt so far.
pub struct CloudRequest<'a> {
    /// The prompt as edge token ids (sent as ids when the vocabularies match).
    pub ids: &'a [TokenId],
    /// The same prompt as text, computed only when the cloud needs text.
    pub text: &'a dyn Fn() -> String,
    /// The conversation as messages, for chat-mode clouds.
    pub messages: &'a [Message],
    /// The reply so far, for chat-mode clouds (continued as a final assistant message).
    pub reply: &'a dyn Fn() -> String,
    /// Maximum tokens to return (the span).
    pub max_tokens: u32,
    /// Whether the user pressed Stop: asked while the request is in flight, so a slow cloud
    /// never holds a stopped reply.
    pub stop: &'a dyn Fn() -> bool,
}

/// What the cloud returned.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CloudReply {
    /// Token ids, when the cloud shares the edge vocabulary and reported them.
    pub ids: Option<Vec<TokenId>>,
    /// The returned text.
    pub text: String,
    /// The cloud ended its turn (finish reason `stop`).
    pub stopped: bool,
    /// Prompt tokens billed, as the server reported them.
    pub prompt_tokens: Option<u64>,
    /// Of those, the ones the server says it read from its prompt cache (billed lower).
    pub cached_prompt_tokens: Option<u64>,
    /// Completion tokens billed, as the server reported them.
    pub completion_tokens: Option<u64>,
}

/// Why a cloud request failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CloudError {
    /// Nothing answers at the endpoint.
    #[error("cloud unreachable at {endpoint}: {detail}")]
    Unreachable {
        /// The base URL.
        endpoint: String,
        /// What the connection said.
        detail: String,
    },
    /// No answer within the time limit.
    #[error("cloud did not answer within {seconds:.1} s")]
    Timeout {
        /// The limit.
        seconds: f32,
    },
    /// The API key was refused.
    #[error("cloud refused the API key (HTTP {status})")]
    Unauthorized {
        /// 401 or 403.
        status: u16,
    },
    /// The model or endpoint does not exist there.
    #[error("cloud has no such model or endpoint (HTTP 404): {message}")]
    NotFound {
        /// The server's message.
        message: String,
    },
    /// Too many requests, still after retrying.
    #[error("cloud is rate limiting requests (HTTP 429)")]
    RateLimited,
    /// The server failed, still after retrying.
    #[error("cloud server error (HTTP {status}): {message}")]
    Server {
        /// HTTP status.
        status: u16,
        /// The server's message.
        message: String,
    },
    /// The reply was not the JSON an OpenAI-compatible server sends.
    #[error("cloud sent a malformed reply: {detail}")]
    Malformed {
        /// What was wrong.
        detail: String,
    },
    /// The user stopped the reply while the request was in flight.
    #[error("stopped while waiting for the cloud")]
    Stopped,
    /// A chat endpoint answers a partial reply with something other than what comes next: a
    /// fresh answer (it ignores `continue_final_message`) or the reply so far again, so its
    /// tokens cannot be spliced into a reply.
    #[error(
        "the cloud at {endpoint} does not continue a reply as chat mode needs: asked to go on \
         after \"{partial}\", it answered {answered:?} (a fresh answer, or the reply so far \
         again, instead of what comes next), so Tandem will not splice its tokens into a reply \
         once begun and replies go on locally; use completions mode, or a chat server that \
         continues a final assistant message with `continue_final_message` (such as vLLM or \
         SGLang)",
        partial = continuation::PARTIAL_REPLY
    )]
    NoContinuation {
        /// The base URL.
        endpoint: String,
        /// What it answered to the continuation probe (cut short).
        answered: String,
    },
}

/// What a failure means for the user, whatever the transport said: the vocabulary front
/// ends branch on (the app's error kinds, "test connection").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloudErrorKind {
    /// Nothing answers there, or not in time.
    Unreachable,
    /// The API key was refused.
    WrongKey,
    /// The server has no such model or endpoint.
    ModelNotFound,
    /// A chat endpoint answers a partial reply afresh (or repeats it) instead of continuing it.
    NoContinuation,
    /// Anything else (rate limits, server errors, malformed replies).
    Other,
}

impl CloudError {
    /// What the failure means for the user.
    pub fn kind(&self) -> CloudErrorKind {
        match self {
            CloudError::Unreachable { .. } | CloudError::Timeout { .. } => {
                CloudErrorKind::Unreachable
            }
            CloudError::Unauthorized { .. } => CloudErrorKind::WrongKey,
            CloudError::NotFound { .. } => CloudErrorKind::ModelNotFound,
            CloudError::NoContinuation { .. } => CloudErrorKind::NoContinuation,
            CloudError::RateLimited
            | CloudError::Server { .. }
            | CloudError::Malformed { .. }
            | CloudError::Stopped => CloudErrorKind::Other,
        }
    }

    /// Whether asking this cloud again, within this reply or any other, cannot help: a
    /// verdict about the endpoint itself, reached by the client's own probe, rather than
    /// the failure of one request, so the decode loop can stop asking at once instead of
    /// counting failures.
    pub fn is_permanent(&self) -> bool {
        matches!(self, CloudError::NoContinuation { .. })
    }

    /// Whether the provider may bill the failed request: it was received and may have been
    /// answered (no answer in time, an answer that did not arrive whole or readable, or one
    /// the user stopped waiting for), so its worst case stays in today's spend. A refusal by
    /// status (401, 404, 429, 5xx) or no connection at all bills nothing.
    pub fn may_be_billed(&self) -> bool {
        matches!(
            self,
            CloudError::Timeout { .. } | CloudError::Malformed { .. } | CloudError::Stopped
        )
    }
}

/// An OpenAI-compatible model the loop can ask for the next tokens.
pub trait Cloud {
    /// The endpoint, for events (never includes the key).
    fn endpoint(&self) -> &str;
    /// Whether prompts can be sent as edge token ids; `probe_ids` is the edge tokenization of
    /// [`VOCAB_PROBE`]. Implementations check once and remember. An error means the cloud
    /// could not be reached at all (it counts as a failed request).
    fn shares_vocab(&mut self, probe_ids: &[TokenId]) -> Result<bool, CloudError>;
    /// Exactly the text a request carries, for the user's privacy view.
    fn sent_text(&self, request: &CloudRequest<'_>) -> String {
        (request.text)()
    }
    /// Asks for the next tokens and waits for them.
    fn complete(&mut self, request: &CloudRequest<'_>) -> Result<CloudReply, CloudError>;
    /// Sends the request and returns at once, so the caller can work while it is in flight
    /// (the decode loop drafts the edge's own continuation). The request's `stop` is not
    /// asked: the caller polls and may drop the answer. By default the request is made here
    /// and the answer is ready at the first poll.
    fn send(&mut self, request: &CloudRequest<'_>) -> Box<dyn InFlight> {
        Box::new(Answered(Some(Arrival {
            result: self.complete(request),
            at: Instant::now(),
        })))
    }
}

/// A cloud request on its way.
pub trait InFlight {
    /// The answer, if it comes within `wait` (zero: only if it is already here). Once it has
    /// been returned, later polls return `None`.
    fn poll(&mut self, wait: Duration) -> Option<Arrival>;
}

/// A cloud answer and when it came (not when it was noticed: the latency a user reads is
/// the cloud's, not the draft step the loop was busy with).
#[derive(Debug)]
pub struct Arrival {
    /// The answer.
    pub result: Result<CloudReply, CloudError>,
    /// When it was read off the network.
    pub at: Instant,
}

/// A request that was answered before [`Cloud::send`] returned.
struct Answered(Option<Arrival>);

impl InFlight for Answered {
    fn poll(&mut self, _: Duration) -> Option<Arrival> {
        self.0.take()
    }
}
