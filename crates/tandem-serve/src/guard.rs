//! What `tandem serve` refuses before a request reaches the model.
//!
//! It listens on 127.0.0.1, where any web page the user opens can also send requests. A page
//! can POST `text/plain` or a form without asking first, so only JSON (or no content type, as
//! some clients send) is read; a bearer key from the environment closes the door to other
//! local programs; bodies over 2 MiB are refused before they are read; and a burst that would
//! wait behind more than [`MAX_WAITING`] jobs is told to come back instead of queueing
//! without bound.

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use std::sync::Arc;
use tandem_wire::ErrorBody;

/// The environment variable whose value, when set, every request must carry as
/// `Authorization: Bearer <value>` (`/health` aside).
pub const API_KEY_VAR: &str = "TANDEM_SERVE_API_KEY";
/// The largest request body read.
pub const MAX_BODY: usize = 2 << 20;
/// Completions that may wait behind the running one; more are answered 503.
pub const MAX_WAITING: usize = 8;

/// Who may use the server.
#[derive(Clone, Default)]
pub struct Access {
    api_key: Option<Arc<str>>,
}

impl Access {
    /// Anyone on this machine (the app's stand-in, tests).
    pub fn open() -> Self {
        Self::default()
    }

    /// Only holders of `key` (an empty key means open).
    pub fn with_key(key: Option<String>) -> Self {
        Self {
            api_key: key.filter(|k| !k.trim().is_empty()).map(Into::into),
        }
    }

    /// The key from [`API_KEY_VAR`], if set.
    pub fn from_env() -> Self {
        Self::with_key(std::env::var(API_KEY_VAR).ok())
    }

    /// Whether requests need a key.
    pub fn needs_key(&self) -> bool {
        self.api_key.is_some()
    }
}

/// An OpenAI-shaped error answer.
pub(crate) fn error(status: StatusCode, message: impl std::fmt::Display, kind: &str) -> Response {
    (status, Json(ErrorBody::new(message.to_string(), kind))).into_response()
}

/// Middleware: a request without the key (when one is set) gets a 401.
pub(crate) async fn authorize(
    State(access): State<Access>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(key) = &access.api_key {
        let bearer = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if request.uri().path() != "/health" && bearer != Some(&**key) {
            return error(
                StatusCode::UNAUTHORIZED,
                format!("missing or wrong API key (this server was started with {API_KEY_VAR})"),
                "invalid_request_error",
            );
        }
    }
    next.run(request).await
}

/// The 415 for a body whose content type is not JSON (none at all is read as JSON).
pub(crate) fn not_json(headers: &HeaderMap) -> Option<Response> {
    let kind = headers.get(header::CONTENT_TYPE)?;
    let json = kind
        .to_str()
        .ok()
        .and_then(|v| v.split(';').next())
        .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"));
    (!json).then(|| {
        error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "request bodies must be JSON (Content-Type: application/json)",
            "invalid_request_error",
        )
    })
}

/// The answer to a request that would wait behind too many others.
pub(crate) fn busy() -> Response {
    let mut response = error(
        StatusCode::SERVICE_UNAVAILABLE,
        format!("the server is busy ({MAX_WAITING} requests are already waiting); retry shortly"),
        "server_error",
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
    response
}
