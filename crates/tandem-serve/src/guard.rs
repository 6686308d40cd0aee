//! What `tandem serve` refuses before a request reaches the model.
//!
//! It listens on 127.0.0.1, where any web page the user opens can also send requests. A page
//! can POST `text/plain`, a form or a body with no content type at all without asking first,
//! so only bodies declared `application/json` are read. Without a key, a request must name
//! this machine as its `Host` (a DNS-rebinding page names its own domain, 421) and, where a
//! browser says which page sent it (`Origin`), come from a page on this machine (403). A
//! bearer key from the environment closes the door to other local programs (compared in
//! constant time); bodies over 2 MiB are refused before they are read; and a burst that
//! would wait behind more than [`MAX_WAITING`] jobs is told to come back instead of queueing
//! without bound.

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use std::sync::Arc;
use tandem_core::cloud::is_on_this_machine;
use tandem_wire::ErrorBody;

/// The environment variable whose value, when set, every request must carry as
/// `Authorization: Bearer <value>` (`/health` aside).
pub use tandem_core::endpoint::SERVE_KEY_VAR as API_KEY_VAR;
/// The largest request body read.
pub const MAX_BODY: usize = 2 << 20;
/// Jobs (completions and tokenizations) that may wait behind the running one; more are
/// answered 503 with `Retry-After`.
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

/// Middleware: a request without the key (when one is set) gets a 401; without a key, one
/// from another site (by its `Host` or `Origin`) gets a 421 or a 403.
pub(crate) async fn authorize(
    State(access): State<Access>,
    request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    match &access.api_key {
        Some(key) => {
            let bearer = headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "));
            let holds_key = bearer.is_some_and(|b| same_secret(b.as_bytes(), key.as_bytes()));
            if request.uri().path() != "/health" && !holds_key {
                return error(
                    StatusCode::UNAUTHORIZED,
                    format!(
                        "missing or wrong API key (this server was started with {API_KEY_VAR})"
                    ),
                    "invalid_request_error",
                );
            }
        }
        None => {
            let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
            if !host.is_some_and(names_this_machine) {
                return error(
                    StatusCode::MISDIRECTED_REQUEST,
                    format!("this server answers only requests to 127.0.0.1, localhost or [::1] unless it has a key ({API_KEY_VAR})"),
                    "invalid_request_error",
                );
            }
            let origin = headers
                .get(header::ORIGIN)
                .map(|v| v.to_str().unwrap_or(""));
            if origin.is_some_and(|o| !from_this_machine(o)) {
                return error(
                    StatusCode::FORBIDDEN,
                    format!("requests from web pages on other sites are refused unless this server has a key ({API_KEY_VAR})"),
                    "invalid_request_error",
                );
            }
        }
    }
    next.run(request).await
}

/// Whether a `Host` header (`name[:port]`) names this machine by a loopback name.
fn names_this_machine(host: &str) -> bool {
    !host.is_empty() && is_on_this_machine(&format!("http://{host}"))
}

/// Whether an `Origin` header (`scheme://host[:port]`, or `null` for a sandboxed page or a
/// file) is a web page served from this machine.
fn from_this_machine(origin: &str) -> bool {
    (origin.starts_with("http://") || origin.starts_with("https://")) && is_on_this_machine(origin)
}

/// Compares a presented key with the server's in time that depends only on their lengths,
/// so a caller cannot find the key byte by byte from how fast it is refused.
fn same_secret(presented: &[u8], key: &[u8]) -> bool {
    presented.len() == key.len()
        && presented
            .iter()
            .zip(key)
            .fold(0u8, |differ, (a, b)| differ | (a ^ b))
            == 0
}

/// The 415 for a body that is not declared JSON: what a page may send without asking first
/// is `text/plain`, a form, or no content type at all.
pub(crate) fn not_json(headers: &HeaderMap) -> Option<Response> {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_names_are_this_machine() {
        for host in [
            "127.0.0.1:8081",
            "localhost:8081",
            "LOCALHOST",
            "[::1]:8081",
            "127.1.2.3",
        ] {
            assert!(names_this_machine(host), "{host}");
        }
        for host in [
            "evil.example:8081",
            "192.168.1.2:8081",
            "localhost.evil.example",
            "",
            "[::2]:1",
        ] {
            assert!(!names_this_machine(host), "{host}");
        }
    }

    #[test]
    fn only_pages_on_this_machine_are_from_it() {
        assert!(from_this_machine("http://127.0.0.1:1420"));
        assert!(from_this_machine("http://localhost"));
        for origin in [
            "https://evil.example",
            "null",
            "file://",
            "tauri://localhost",
            "",
        ] {
            assert!(!from_this_machine(origin), "{origin}");
        }
    }

    #[test]
    fn keys_match_only_exactly() {
        assert!(same_secret(b"sk-local", b"sk-local"));
        assert!(!same_secret(b"sk-locaX", b"sk-local"));
        assert!(!same_secret(b"sk-loc", b"sk-local"));
        assert!(!same_secret(b"", b"sk-local"));
    }

    #[test]
    fn a_body_without_a_json_content_type_is_refused() {
        let mut headers = HeaderMap::new();
        assert!(not_json(&headers).is_some(), "no content type");
        headers.insert(header::CONTENT_TYPE, "text/plain".parse().unwrap());
        assert!(not_json(&headers).is_some());
        headers.insert(
            header::CONTENT_TYPE,
            "application/json; charset=utf-8".parse().unwrap(),
        );
        assert!(not_json(&headers).is_none());
    }
}
