//! The HTTP surface: which request gets which answer.
//!
//! One fallback handler dispatches on method and path by hand, so every unknown route
//! (including `/tokenize`, whose absence tells the client the vocabulary is not shared)
//! gets the same OpenAI-style 404 rather than axum's plain-text defaults.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use axum::Router;
use serde_json::Value;
use tandem_wire::{Endpoint, ErrorBody};

use crate::fault::{self, Fault};
use crate::request::Asked;
use crate::response::{self, Answer};
use crate::state::{RecordedRequest, Shared};

/// The fake cloud's routes over `shared`.
pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new().fallback(dispatch).with_state(shared)
}

async fn dispatch(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok());
    match (&method, uri.path()) {
        (&Method::GET, "/v1/models") => {
            if shared.script.authorizes(authorization) {
                response::models(&shared.script.model)
            } else {
                fault::unauthorized()
            }
        }
        (&Method::POST, "/v1/completions") => {
            complete(
                &shared,
                Endpoint::Completions,
                uri.path(),
                authorization,
                &body,
            )
            .await
        }
        (&Method::POST, "/v1/chat/completions") => {
            complete(&shared, Endpoint::Chat, uri.path(), authorization, &body).await
        }
        (_, path) => response::error(
            StatusCode::NOT_FOUND,
            ErrorBody::new(
                format!("Unknown request URL: {method} {path}"),
                "invalid_request_error",
            ),
        ),
    }
}

async fn complete(
    shared: &Shared,
    endpoint: Endpoint,
    path: &str,
    authorization: Option<&str>,
    body: &[u8],
) -> Response {
    // Recorded as received, well-formed or not, so a test can see exactly what was sent.
    let received = serde_json::from_slice::<Value>(body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()));
    // A fault is framed as the client asked, even when the rest of the request is bad.
    let wants_stream = received
        .get("stream")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let (number, fault) = shared.admit(RecordedRequest {
        path: path.to_owned(),
        body: received,
        authorization: authorization.map(str::to_owned),
    });
    let distortion = fault.as_ref().map(Fault::distortion).unwrap_or_default();
    if let Some(fault) = fault {
        if let Some(failure) = fault.apply(wants_stream).await {
            return failure;
        }
    }
    if !shared.script.authorizes(authorization) {
        return fault::unauthorized();
    }
    let request = match Asked::parse(endpoint, body) {
        Ok(request) => request,
        Err(bad) => {
            return response::error(
                StatusCode::BAD_REQUEST,
                ErrorBody::new(bad.to_string(), "invalid_request_error"),
            )
        }
    };
    let answer = Answer {
        endpoint,
        number,
        model: &shared.script.model,
        tokens: shared.script.answer_after(
            request.continued.as_deref(),
            distortion.tokens.unwrap_or(request.max_tokens),
        ),
        prompt_tokens: request.prompt_tokens,
        cached_prompt_tokens: shared.cached_prompt(request.prompt_tokens),
        logprobs: request.logprobs,
        foreign_ids: distortion.foreign_ids,
    };
    if request.stream {
        answer.stream()
    } else {
        answer.whole()
    }
}
