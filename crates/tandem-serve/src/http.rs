//! The HTTP face: OpenAI routes over the model thread, streaming or not.

use crate::engine::{EngineHandle, Finished, Job, JobPrompt, Output};
use crate::wire::{self, error_body, ChatRequest, CompletionRequest, Prompt, TokenizeRequest};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};
use tandem_core::message::Message;
use tandem_core::sampling::SamplingParams;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};
use tokio_stream::wrappers::UnboundedReceiverStream;

/// The routes, over a started model thread.
pub fn router(engine: EngineHandle) -> Router {
    Router::new()
        .route("/health", get(|| async { Json(json!({"status": "ok"})) }))
        .route("/v1/models", get(models))
        .route("/v1/completions", post(completions))
        .route("/v1/chat/completions", post(chat_completions))
        .route("/tokenize", post(tokenize))
        .route("/metrics", get(metrics))
        .fallback(|| async {
            error(
                StatusCode::NOT_FOUND,
                "no such endpoint",
                "invalid_request_error",
            )
        })
        .with_state(engine)
}

/// A server running on its own thread (for tests and the app's embedded stand-in).
pub struct Running {
    /// Where it listens.
    pub addr: SocketAddr,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    /// `http://ADDR/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Binds `addr` and serves on a background thread until the handle is dropped.
pub fn start(engine: EngineHandle, addr: SocketAddr) -> std::io::Result<Running> {
    let listener = std::net::TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("tandem-serve-http".into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a tokio runtime");
            runtime.block_on(async move {
                let listener =
                    tokio::net::TcpListener::from_std(listener).expect("a tokio listener");
                let _ = axum::serve(listener, router(engine))
                    .with_graceful_shutdown(async {
                        let _ = stopped.await;
                    })
                    .await;
            });
        })?;
    Ok(Running {
        addr,
        shutdown: Some(shutdown),
        thread: Some(thread),
    })
}

fn error(status: StatusCode, message: &str, kind: &str) -> Response {
    (status, Json(error_body(message, kind))).into_response()
}

fn bad_request(message: impl std::fmt::Display) -> Response {
    error(
        StatusCode::BAD_REQUEST,
        &message.to_string(),
        "invalid_request_error",
    )
}

fn parse<T: serde::de::DeserializeOwned>(body: &Bytes) -> Result<T, String> {
    serde_json::from_slice(body).map_err(|e| format!("invalid request body: {e}"))
}

async fn models(State(engine): State<EngineHandle>) -> Json<Value> {
    Json(
        json!({"object": "list", "data": [{"id": engine.model_name, "object": "model", "owned_by": "tandem"}]}),
    )
}

async fn tokenize(State(engine): State<EngineHandle>, body: Bytes) -> Response {
    let request: TokenizeRequest = match parse(&body) {
        Ok(r) => r,
        Err(message) => return bad_request(message),
    };
    match engine.tokenize(request.content, request.add_special).await {
        Ok(tokens) => Json(json!({"tokens": tokens})).into_response(),
        Err(e) => error(StatusCode::SERVICE_UNAVAILABLE, &e, "server_error"),
    }
}

async fn metrics(State(engine): State<EngineHandle>) -> String {
    let c = &engine.counters;
    let line = |name: &str, help: &str, value: u64| {
        format!(
            "# HELP tandem:{name} {help}\n# TYPE tandem:{name} counter\ntandem:{name} {value}\n"
        )
    };
    [
        line(
            "requests_total",
            "Completion requests served.",
            c.requests.load(Ordering::Relaxed),
        ),
        line(
            "prompt_tokens_total",
            "Prompt tokens received.",
            c.prompt_tokens.load(Ordering::Relaxed),
        ),
        line(
            "prompt_tokens_decoded_total",
            "Prompt tokens decoded (not reused from the previous request).",
            c.prompt_tokens_decoded.load(Ordering::Relaxed),
        ),
        line(
            "completion_tokens_total",
            "Tokens generated.",
            c.completion_tokens.load(Ordering::Relaxed),
        ),
    ]
    .concat()
}

fn sampling(temperature: Option<f32>, top_p: Option<f32>, seed: Option<u64>) -> SamplingParams {
    SamplingParams {
        temperature: temperature.unwrap_or(0.0).max(0.0),
        top_p: top_p.unwrap_or(1.0),
        top_k: 0,
        seed: seed.unwrap_or(0),
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Completion,
    Chat,
}

async fn completions(State(engine): State<EngineHandle>, body: Bytes) -> Response {
    let r: CompletionRequest = match parse(&body) {
        Ok(r) => r,
        Err(message) => return bad_request(message),
    };
    let prompt = match r.prompt {
        Prompt::Text(text) => JobPrompt::Text(text),
        Prompt::Ids(ids) => JobPrompt::Ids(ids),
    };
    let logprobs = wire::logprobs_count(&r.logprobs);
    let sampling = sampling(r.temperature, r.top_p, r.seed);
    run(
        engine,
        prompt,
        r.max_tokens.unwrap_or(16),
        sampling,
        logprobs,
        r.stream,
        Kind::Completion,
    )
    .await
}

async fn chat_completions(State(engine): State<EngineHandle>, body: Bytes) -> Response {
    let r: ChatRequest = match parse(&body) {
        Ok(r) => r,
        Err(message) => return bad_request(message),
    };
    let messages = match r
        .messages
        .into_iter()
        .map(|m| Ok(Message::new(m.role.parse()?, m.content)))
        .collect::<Result<Vec<_>, String>>()
    {
        Ok(messages) => messages,
        Err(message) => return bad_request(message),
    };
    let logprobs = r
        .logprobs
        .unwrap_or(false)
        .then(|| r.top_logprobs.unwrap_or(1).clamp(1, 20));
    let max_tokens = r.max_completion_tokens.or(r.max_tokens).unwrap_or(256);
    let sampling = sampling(r.temperature, r.top_p, r.seed);
    run(
        engine,
        JobPrompt::Chat(messages),
        max_tokens,
        sampling,
        logprobs,
        r.stream,
        Kind::Chat,
    )
    .await
}

async fn run(
    engine: EngineHandle,
    prompt: JobPrompt,
    max_tokens: u32,
    sampling: SamplingParams,
    logprobs: Option<usize>,
    stream: bool,
    kind: Kind,
) -> Response {
    let (output, outputs) = unbounded_channel();
    let job = Job {
        prompt,
        max_tokens,
        sampling,
        logprobs,
        output,
    };
    if let Err(e) = engine.complete(job) {
        return error(StatusCode::SERVICE_UNAVAILABLE, &e, "server_error");
    }
    let meta = Meta::new(&engine.model_name, kind);
    if stream {
        stream_response(outputs, meta).into_response()
    } else {
        collect_response(outputs, meta, logprobs.is_some()).await
    }
}

struct Meta {
    id: String,
    created: u64,
    model: String,
    kind: Kind,
}

impl Meta {
    fn new(model: &str, kind: Kind) -> Self {
        let created = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let prefix = if kind == Kind::Chat {
            "chatcmpl"
        } else {
            "cmpl"
        };
        Self {
            id: format!("{prefix}-{created}{:06}", std::process::id() % 1_000_000),
            created,
            model: model.to_owned(),
            kind,
        }
    }

    fn object(&self, chunk: bool) -> &'static str {
        match (self.kind, chunk) {
            (Kind::Completion, _) => "text_completion",
            (Kind::Chat, false) => "chat.completion",
            (Kind::Chat, true) => "chat.completion.chunk",
        }
    }

    fn body(&self, chunk: bool, choice: Value, extra: Option<(&str, Value)>) -> Value {
        let mut body = json!({
            "id": self.id, "object": self.object(chunk), "created": self.created,
            "model": self.model, "choices": [choice],
        });
        if let Some((key, value)) = extra {
            body[key] = value;
        }
        body
    }

    fn choice(
        &self,
        text: &str,
        logprobs: Option<Value>,
        finish: Option<&str>,
        chunk: bool,
    ) -> Value {
        let mut choice = match (self.kind, chunk) {
            (Kind::Completion, _) => json!({"index": 0, "text": text}),
            (Kind::Chat, false) => {
                json!({"index": 0, "message": {"role": "assistant", "content": text}})
            }
            (Kind::Chat, true) => json!({"index": 0, "delta": {"content": text}}),
        };
        choice["logprobs"] = logprobs.map_or(Value::Null, |content| json!({"content": content}));
        choice["finish_reason"] = finish.map_or(Value::Null, |f| json!(f));
        choice
    }
}

/// The `usage` and `timings` fields of a finished reply.
fn usage_and_timings(done: &Finished) -> (Value, Value) {
    let usage = wire::Usage {
        prompt_tokens: done.prompt_tokens,
        completion_tokens: done.completion_tokens,
        total_tokens: done.prompt_tokens + done.completion_tokens,
    };
    let timings = wire::Timings {
        prompt_n: done.prompt_decoded,
        cache_n: done.prompt_tokens - done.prompt_decoded,
        prompt_ms: done.prompt_ms,
        predicted_n: done.completion_tokens,
        predicted_ms: done.predicted_ms,
    };
    (json!(usage), json!(timings))
}

async fn collect_response(
    mut outputs: UnboundedReceiver<Output>,
    meta: Meta,
    with_logprobs: bool,
) -> Response {
    let mut text = String::new();
    let mut content = Vec::new();
    while let Some(output) = outputs.recv().await {
        match output {
            Output::Token {
                text: piece,
                logprob,
            } => {
                text.push_str(&piece);
                content.extend(logprob);
            }
            Output::Failed(message) => return bad_request(message),
            Output::Done(done) => {
                let (usage, timings) = usage_and_timings(&done);
                let logprobs = with_logprobs.then(|| json!(content));
                let mut body = meta.body(
                    false,
                    meta.choice(&text, logprobs, Some(done.finish_reason), false),
                    Some(("usage", usage)),
                );
                body["timings"] = timings;
                return Json(body).into_response();
            }
        }
    }
    error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "the model thread stopped mid-reply",
        "server_error",
    )
}

fn stream_response(
    mut outputs: UnboundedReceiver<Output>,
    meta: Meta,
) -> Sse<UnboundedReceiverStream<Result<SseEvent, Infallible>>> {
    let (events, stream) = unbounded_channel();
    // A client that disconnects drops the stream; the send fails, this task ends and drops
    // `outputs`, and the model thread stops at its next token.
    tokio::spawn(async move {
        while let Some(output) = outputs.recv().await {
            for data in sse_data(&output, &meta) {
                if events.send(Ok(SseEvent::default().data(data))).is_err() {
                    return;
                }
            }
        }
    });
    Sse::new(UnboundedReceiverStream::new(stream))
}

fn sse_data(output: &Output, meta: &Meta) -> Vec<String> {
    match output {
        Output::Token { text, logprob } => {
            let logprobs = logprob.as_ref().map(|lp| json!([lp]));
            vec![meta
                .body(true, meta.choice(text, logprobs, None, true), None)
                .to_string()]
        }
        Output::Failed(message) => {
            vec![
                error_body(message, "invalid_request_error").to_string(),
                "[DONE]".into(),
            ]
        }
        Output::Done(done) => {
            let (usage, timings) = usage_and_timings(done);
            let mut last = meta.body(
                true,
                meta.choice("", None, Some(done.finish_reason), true),
                Some(("usage", usage)),
            );
            last["timings"] = timings;
            vec![last.to_string(), "[DONE]".into()]
        }
    }
}
