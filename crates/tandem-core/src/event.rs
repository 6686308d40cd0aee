//! The one event stream that describes a generation from start to finish.
//!
//! The CLI (`--json` prints one event per line), the desktop app and the tests all consume
//! these same events, so what a user sees and what the tests assert cannot drift apart.

use serde::{Deserialize, Serialize};

/// Where a token of the reply came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenSource {
    /// The local (edge) model.
    Edge,
    /// The cloud model.
    Cloud,
}

/// What kind of notice the user gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoticeKind {
    /// A cloud request failed; the edge token was used instead.
    CloudError,
    /// The cloud is skipped for the rest of the reply after repeated failures.
    CloudUnavailable,
    /// The cloud's vocabulary differs from the edge's, so prompts are sent as text.
    TextPrompts,
    /// The reply hit the context window.
    ContextFull,
    /// Today's spend could not be written (the daily cap may undercount).
    SpendNotSaved,
    /// Today's spend record was unreadable: the daily cap counts as reached until tomorrow.
    SpendUnknown,
    /// The cloud's round trips are past the user's wait limit: the reply asks it only for
    /// its most uncertain positions.
    CloudSlow,
    /// A cloud request would pass today's spend cap: the edge writes on.
    SpendCapReached,
    /// The edge model failed; the reply ended early.
    EngineError,
    /// The conversation could not be saved (a full disk, say); the reply is still shown.
    NotSaved,
}

/// Why a reply ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// The model ended its turn.
    Stop,
    /// `max_tokens` was reached.
    Length,
    /// The user stopped it.
    Cancelled,
    /// The context window is full.
    ContextFull,
    /// The edge model failed (a `notice` says how).
    Error,
}

impl FinishReason {
    /// Every reason, in the order the docs list them.
    pub const ALL: [FinishReason; 5] = [
        FinishReason::Stop,
        FinishReason::Length,
        FinishReason::Cancelled,
        FinishReason::ContextFull,
        FinishReason::Error,
    ];

    /// The word users see (the same as in the JSON events).
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::Cancelled => "cancelled",
            FinishReason::ContextFull => "context_full",
            FinishReason::Error => "error",
        }
    }
}

/// Token and cost counts of one reply.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens the edge model produced.
    pub edge_tokens: u32,
    /// Tokens the cloud produced and the reply kept.
    pub cloud_tokens: u32,
    /// Requests sent to the cloud (failed ones included).
    pub cloud_requests: u32,
    /// Of those, requests asked ahead from the edge's draft whose answers the reply did not
    /// use (paid for all the same). Absent in replies saved before it was recorded.
    #[serde(default)]
    pub cloud_requests_unused: u32,
    /// Prompt tokens the cloud billed, over all requests.
    pub cloud_prompt_tokens: u64,
    /// Of those, the ones the cloud read from its prompt cache (billed at the cached price).
    /// Absent in replies saved before it was recorded.
    #[serde(default)]
    pub cloud_cached_prompt_tokens: u64,
    /// Completion tokens the cloud billed (kept or not).
    pub cloud_completion_tokens: u64,
    /// Estimated cost of the cloud requests, in USD.
    pub est_cost_usd: f64,
    /// The cloud share the budget allowed when the reply ended (0 with the cloud off or the
    /// chat local-only), so a reply can be read against its target. Absent in replies saved
    /// before it was recorded.
    #[serde(default)]
    pub target_share: Option<f32>,
    /// The cloud share of every reply since the share was last set, this one included: what
    /// the target promises ([`crate::budget`]: a reply may spend what earlier ones saved).
    /// Absent with the cloud off and in replies saved before it was recorded.
    #[serde(default)]
    pub session_share: Option<f32>,
}

impl Usage {
    /// Share of the reply's tokens that came from the cloud.
    pub fn cloud_share(&self) -> f32 {
        let total = self.edge_tokens + self.cloud_tokens;
        if total == 0 {
            0.0
        } else {
            self.cloud_tokens as f32 / total as f32
        }
    }
}

/// Where the time of one reply went, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Timings {
    /// Decoding the prompt (only the part not already cached).
    pub prefill_ms: u64,
    /// Prompt tokens that had to be decoded.
    pub prefill_tokens: u32,
    /// Waiting for the cloud.
    pub cloud_ms: u64,
    /// The whole reply, wall clock.
    pub total_ms: u64,
}

/// One event of a generation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// The reply has started.
    Started {
        /// Edge model name.
        edge_model: String,
        /// Cloud endpoint, when one is configured.
        cloud: Option<String>,
        /// Router name.
        router: String,
        /// Tokens in the prompt.
        prompt_tokens: u32,
    },
    /// One token of the reply.
    Token {
        /// Its text (empty when it ends mid-character; the next token completes it).
        text: String,
        /// Token id in the edge vocabulary.
        id: i32,
        /// Which model produced it.
        source: TokenSource,
        /// The router's score at this position.
        score: f32,
        /// For cloud tokens: the edge model's own top choice at this position.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        edge_candidate: Option<String>,
        /// For cloud tokens: latency of the request that returned it.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        request_ms: Option<u64>,
    },
    /// A cloud request returned (or failed); the cloud tokens it produced follow.
    CloudRequest {
        /// Exactly the text the request carried (prompt, or messages and the reply so far).
        sent: String,
        /// Whether it returned tokens.
        ok: bool,
        /// Latency, in milliseconds.
        ms: u64,
        /// Prompt tokens billed.
        prompt_tokens: u64,
        /// Completion tokens billed (kept or not).
        completion_tokens: u64,
        /// Estimated cost, in USD.
        cost_usd: f64,
        /// Asked ahead from the edge's draft, and the reply did not come to its position as
        /// drafted (or ended first): sent and billed, its answer not used. `ok` then says
        /// whether the answer had come back by the reply's end; one still away is no failure.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        unused: bool,
    },
    /// The conversation outgrew the context window: messages `from..to` of the history
    /// (oldest is 0) are out of both models' view for this reply. Sent before `started`.
    LeftOut {
        /// The first message left out.
        from: u32,
        /// The first message after them that the models see.
        to: u32,
    },
    /// Something the user should know; the reply goes on.
    Notice {
        /// What happened.
        kind: NoticeKind,
        /// A sentence for the user.
        message: String,
    },
    /// The reply has ended.
    Finished {
        /// Why.
        reason: FinishReason,
        /// Counts and cost.
        usage: Usage,
        /// Time spent.
        timings: Timings,
    },
}

/// Receives events; returning `false` asks the generation to stop (the user pressed stop).
pub trait EventSink {
    /// Takes one event.
    fn emit(&mut self, event: Event) -> bool;
    /// Whether the listener wants the reply stopped, asked while no token can be emitted
    /// (waiting for the cloud); `emit` answering false says the same at the next token.
    fn stop_requested(&self) -> bool {
        false
    }
}

impl<F: FnMut(Event) -> bool> EventSink for F {
    fn emit(&mut self, event: Event) -> bool {
        self(event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn token_event_json_shape() {
        let e = Event::Token {
            text: " sky".into(),
            id: 7,
            source: TokenSource::Cloud,
            score: 0.5,
            edge_candidate: Some(" air".into()),
            request_ms: Some(12),
        };
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            json!({"type": "token", "text": " sky", "id": 7, "source": "cloud", "score": 0.5,
                   "edge_candidate": " air", "request_ms": 12})
        );
        let edge = Event::Token {
            text: "a".into(),
            id: 1,
            source: TokenSource::Edge,
            score: 0.25,
            edge_candidate: None,
            request_ms: None,
        };
        assert_eq!(
            serde_json::to_value(&edge).unwrap(),
            json!({"type": "token", "text": "a", "id": 1, "source": "edge", "score": 0.25})
        );
    }

    #[test]
    fn finished_event_round_trips() {
        let e = Event::Finished {
            reason: FinishReason::Length,
            usage: Usage {
                edge_tokens: 90,
                cloud_tokens: 10,
                ..Usage::default()
            },
            timings: Timings::default(),
        };
        let text = serde_json::to_string(&e).unwrap();
        assert!(
            text.starts_with(r#"{"type":"finished","reason":"length""#),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<Event>(&text).unwrap(), e);

        // A reply saved before the target share was recorded still reads, without one.
        let saved = r#"{"type":"finished","reason":"stop","usage":{"edge_tokens":3,"cloud_tokens":1,"cloud_requests":1,"cloud_prompt_tokens":9,"cloud_completion_tokens":1,"est_cost_usd":0.0},"timings":{"prefill_ms":1,"prefill_tokens":2,"cloud_ms":3,"total_ms":4}}"#;
        match serde_json::from_str::<Event>(saved).unwrap() {
            Event::Finished { usage, .. } => assert_eq!(usage.target_share, None),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn finish_reasons_read_the_same_in_json_and_in_words() {
        for reason in FinishReason::ALL {
            assert_eq!(serde_json::to_value(reason).unwrap(), reason.as_str());
        }
    }

    #[test]
    fn cloud_share_of_an_empty_reply_is_zero() {
        assert_eq!(Usage::default().cloud_share(), 0.0);
        let u = Usage {
            edge_tokens: 3,
            cloud_tokens: 1,
            ..Usage::default()
        };
        assert_eq!(u.cloud_share(), 0.25);
    }
}
