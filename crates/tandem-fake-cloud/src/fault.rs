//! Injected failures, one per completion request, so client error paths can be tested
//! without a misbehaving real cloud.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use tandem_wire::ErrorBody;

use crate::response;

/// A failure applied to one completion request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Answer normally, but only after this delay (to exercise client timeouts).
    Delay(Duration),
    /// 429 with a `Retry-After` header and an OpenAI rate-limit error body.
    TooManyRequests {
        /// Value of the `Retry-After` header, in seconds.
        retry_after_secs: u64,
    },
    /// 500 with an OpenAI server error body.
    ServerError,
    /// 200 with a body that is not JSON (for a streaming request: an event that is not JSON).
    MalformedJson,
    /// 401 with OpenAI's `invalid_api_key` error body, whatever key was sent.
    Unauthorized,
    /// 200 with JSON headers, then one byte of body every interval, never ending: a stalled
    /// server that a per-read timeout alone never gives up on.
    Drip(Duration),
    /// 200 with JSON headers, then body bytes as fast as the client reads, never ending.
    EndlessBody,
    /// 307 to this URL (which keeps the method and the body: the conversation).
    Redirect(String),
    /// 500 whose error message is this many characters long.
    LongError(usize),
    /// A normal answer of this many tokens, whatever `max_tokens` asked for.
    Overlong(usize),
    /// A normal answer whose logprobs carry ids far outside any vocabulary.
    ForeignIds,
    /// This status (403, 404, 503…) with an OpenAI error body.
    Status(u16),
    /// 200 announcing a longer body than it sends, then the connection closes: a reply cut
    /// off in transit.
    CutBody,
}

/// How a fault changes an answer that is otherwise given normally.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Distortion {
    /// Tokens to answer instead of `max_tokens`.
    pub tokens: Option<usize>,
    /// Whether ids are replaced by [`response::FOREIGN_ID`].
    pub foreign_ids: bool,
}

impl Fault {
    /// Applies the fault: `Some` is the response that replaces the answer, `None` means
    /// answer normally (after waiting, for [`Fault::Delay`]).
    pub(crate) async fn apply(self, stream: bool) -> Option<Response> {
        match self {
            Fault::Delay(delay) => {
                tokio::time::sleep(delay).await;
                None
            }
            Fault::TooManyRequests { retry_after_secs } => {
                let mut rate_limited = response::error(
                    StatusCode::TOO_MANY_REQUESTS,
                    ErrorBody::new("Rate limit reached for requests", "requests")
                        .with_code("rate_limit_exceeded"),
                );
                rate_limited
                    .headers_mut()
                    .insert(header::RETRY_AFTER, retry_after_secs.into());
                Some(rate_limited)
            }
            Fault::ServerError => Some(response::error(
                StatusCode::INTERNAL_SERVER_ERROR,
                ErrorBody::new(
                    "The server had an error while processing your request.",
                    "server_error",
                ),
            )),
            Fault::MalformedJson => Some(malformed(stream)),
            Fault::Unauthorized => Some(unauthorized()),
            Fault::Drip(interval) => Some(endless(Some(interval))),
            Fault::EndlessBody => Some(endless(None)),
            Fault::Redirect(location) => Some(
                (
                    StatusCode::TEMPORARY_REDIRECT,
                    [(header::LOCATION, location)],
                )
                    .into_response(),
            ),
            Fault::LongError(len) => Some(response::error(
                StatusCode::INTERNAL_SERVER_ERROR,
                ErrorBody::new("e".repeat(len), "server_error"),
            )),
            Fault::Status(code) => Some(response::error(
                StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                ErrorBody::new(format!("injected status {code}"), "fake_cloud_error"),
            )),
            Fault::CutBody => Some(cut_body()),
            Fault::Overlong(_) | Fault::ForeignIds => None,
        }
    }

    /// What the fault changes in a normal answer.
    pub(crate) fn distortion(&self) -> Distortion {
        match self {
            Fault::Overlong(tokens) => Distortion {
                tokens: Some(*tokens),
                foreign_ids: false,
            },
            Fault::ForeignIds => Distortion {
                tokens: None,
                foreign_ids: true,
            },
            _ => Distortion::default(),
        }
    }
}

/// A 200 whose JSON body never ends: one byte per `interval`, or as fast as it is read.
fn endless(interval: Option<Duration>) -> Response {
    use tokio_stream::StreamExt;
    let chunk = match interval {
        Some(_) => Bytes::from_static(b" "),
        None => Bytes::from(vec![b' '; 64 * 1024]),
    };
    let ticks = tokio_stream::iter(std::iter::repeat(())).throttle(interval.unwrap_or_default());
    let body =
        Body::from_stream(ticks.map(move |()| Ok::<_, std::convert::Infallible>(chunk.clone())));
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// The start of a JSON answer, then an error in the body stream: the server drops the
/// connection before the announced length arrives.
fn cut_body() -> Response {
    let start = Bytes::from_static(br#"{"id": "cmpl-cut", "choices": [{"text": " oce"#);
    let announced = (start.len() * 4).to_string();
    let chunks = [
        Ok(start),
        Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            "dropped mid-body",
        )),
    ];
    let body = Body::from_stream(tokio_stream::iter(chunks));
    (
        [
            (header::CONTENT_TYPE, "application/json".to_owned()),
            (header::CONTENT_LENGTH, announced),
        ],
        body,
    )
        .into_response()
}

/// The 401 answer to a missing or wrong API key.
pub(crate) fn unauthorized() -> Response {
    response::error(
        StatusCode::UNAUTHORIZED,
        ErrorBody::new("Incorrect API key provided", "invalid_request_error")
            .with_code("invalid_api_key"),
    )
}

/// A truncated body, framed the way the client expects so that only JSON parsing fails.
fn malformed(stream: bool) -> Response {
    const TRUNCATED: &str = r#"{"id": "cmpl-broken", "choices": [{"text": "#;
    if stream {
        (
            [(header::CONTENT_TYPE, "text/event-stream")],
            format!("data: {TRUNCATED}\n\n"),
        )
            .into_response()
    } else {
        ([(header::CONTENT_TYPE, "application/json")], TRUNCATED).into_response()
    }
}
