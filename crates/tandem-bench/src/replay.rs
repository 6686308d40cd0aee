//! A cloud with the stand-in's answers and a fast server's time.
//!
//! The stand-in (the 1.5B on one CPU thread of this machine) spends most of a second on each
//! request, and that, not the round trip, is most of what routing costs a reply on loopback;
//! a GPU server or a hosted API answers a short request in tens to hundreds of
//! milliseconds. `Replay` sits between the delaying proxy and the stand-in. A request it has
//! not seen is forwarded and its answer kept; while a server time is set, a request it has
//! seen is answered with the kept answer after that time. Under greedy decoding a reply sends
//! the same requests every time, so a replayed reply routes, splices and drafts exactly as
//! the recorded one did: only the cloud's own time changes. Requests that were not recorded
//! go to the stand-in and are counted ([`Replay::misses`]).

use anyhow::{Context, Result};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use std::collections::HashMap;
use std::future::IntoFuture;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// The replaying server on 127.0.0.1; it runs until the benchmark ends.
pub struct Replay {
    address: SocketAddr,
    shared: Arc<Shared>,
}

struct Shared {
    upstream: SocketAddr,
    client: reqwest::Client,
    kept: Mutex<HashMap<(String, Bytes), Kept>>,
    /// Milliseconds a replayed answer waits; `u64::MAX`: forward everything.
    server_ms: AtomicU64,
    replayed: AtomicU64,
    misses: AtomicU64,
}

#[derive(Clone)]
struct Kept {
    status: StatusCode,
    content_type: Option<String>,
    body: Bytes,
}

impl Replay {
    /// Starts in front of `upstream`, forwarding (and keeping) every answer.
    pub fn start(upstream: SocketAddr) -> Result<Self> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        let address = listener.local_addr()?;
        listener.set_nonblocking(true)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let listener = {
            let _context = runtime.enter();
            tokio::net::TcpListener::from_std(listener)?
        };
        let shared = Arc::new(Shared {
            upstream,
            client: reqwest::Client::new(),
            kept: Mutex::new(HashMap::new()),
            server_ms: AtomicU64::new(u64::MAX),
            replayed: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        });
        let app = axum::Router::new()
            .fallback(answer)
            .with_state(Arc::clone(&shared));
        std::thread::Builder::new()
            .name("tandem-bench-replay".into())
            .spawn(move || {
                let _ = runtime.block_on(axum::serve(listener, app).into_future());
            })
            .context("starting the replaying cloud")?;
        Ok(Self { address, shared })
    }

    /// Where the proxy should connect.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// From now on, answer seen requests from what was kept after `server_time`; `None`:
    /// forward every request to the stand-in (and keep its answer).
    pub fn set_server_time(&self, server_time: Option<Duration>) {
        let ms = server_time.map_or(u64::MAX, |t| t.as_millis() as u64);
        self.shared.server_ms.store(ms, Ordering::Relaxed);
    }

    /// Answers replayed since the last call, and requests in that time that should have been
    /// replayed but had not been recorded.
    pub fn counts(&self) -> (u64, u64) {
        (
            self.shared.replayed.swap(0, Ordering::Relaxed),
            self.shared.misses.swap(0, Ordering::Relaxed),
        )
    }
}

async fn answer(
    State(shared): State<Arc<Shared>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let key = (uri.to_string(), body.clone());
    let server_ms = shared.server_ms.load(Ordering::Relaxed);
    let kept = shared
        .kept
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&key)
        .cloned();
    let answer = match kept {
        Some(kept) if server_ms != u64::MAX => {
            tokio::time::sleep(Duration::from_millis(server_ms)).await;
            shared.replayed.fetch_add(1, Ordering::Relaxed);
            kept
        }
        _ => {
            if server_ms != u64::MAX {
                shared.misses.fetch_add(1, Ordering::Relaxed);
            }
            match forward(&shared, &uri, &headers, body).await {
                Ok(kept) => {
                    if kept.status.is_success() {
                        shared
                            .kept
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .insert(key, kept.clone());
                    }
                    kept
                }
                Err(e) => return (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
            }
        }
    };
    let mut response = (answer.status, answer.body).into_response();
    if let Some(value) = answer
        .content_type
        .and_then(|t| axum::http::HeaderValue::from_str(&t).ok())
    {
        response
            .headers_mut()
            .insert(axum::http::header::CONTENT_TYPE, value);
    }
    response
}

/// Sends the request on to the stand-in as it came (POST with a body, GET without).
async fn forward(
    shared: &Shared,
    uri: &Uri,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<Kept, reqwest::Error> {
    let url = format!("http://{}{uri}", shared.upstream);
    let mut request = if body.is_empty() {
        shared.client.get(url)
    } else {
        shared.client.post(url).body(body)
    };
    for name in [
        axum::http::header::CONTENT_TYPE,
        axum::http::header::AUTHORIZATION,
    ] {
        if let Some(value) = headers.get(&name).and_then(|v| v.to_str().ok()) {
            request = request.header(name.as_str(), value);
        }
    }
    let response = request.send().await?;
    let status = StatusCode::from_u16(response.status().as_u16()).unwrap_or(StatusCode::OK);
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    Ok(Kept {
        status,
        content_type,
        body: response.bytes().await?,
    })
}
