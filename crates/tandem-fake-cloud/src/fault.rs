//! Injected failures, one per completion request, so client error paths can be tested
//! without a misbehaving real cloud.

use std::time::Duration;

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
        }
    }
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
