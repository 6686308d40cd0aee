//! What the history tests share: a routed reply's events.

use crate::event::{Event, FinishReason, Timings, TokenSource, Usage};

pub(crate) fn reply_events() -> Vec<Event> {
    vec![
        Event::Token {
            text: "Blue".into(),
            id: 1,
            source: TokenSource::Cloud,
            score: 0.9,
            edge_candidate: Some("Red".into()),
            request_ms: Some(120),
        },
        Event::Token {
            text: ".".into(),
            id: 2,
            source: TokenSource::Edge,
            score: 0.1,
            edge_candidate: None,
            request_ms: None,
        },
        Event::Finished {
            reason: FinishReason::Stop,
            usage: Usage {
                edge_tokens: 1,
                cloud_tokens: 1,
                cloud_requests: 1,
                ..Usage::default()
            },
            timings: Timings::default(),
        },
    ]
}
