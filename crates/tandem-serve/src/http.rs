//! The HTTP face: OpenAI routes over the model thread, streaming or not.

use crate::guard::{self, error, Access, MAX_BODY};
use crate::listen;
use crate::model_thread::{Finished, Job, JobError, JobPrompt, ModelThread, Output, Refused};
use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::extract::{FromRequest, Request, State};
use axum::http::StatusCode;
use axum::middleware;
use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};
use tandem_core::message::Message;
use tandem_core::sampling::SamplingParams;
use tandem_wire::{
    ChatRequest, Choice, Completion, CompletionRequest, Endpoint, ErrorBody, Generation, Health,
    Logprobs, MessageContent, ModelList, Prompt, Timings, TokenLogprob, TokenizeRequest,
    TokenizeResponse, Usage,
};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};
use tokio_stream::wrappers::UnboundedReceiverStream;

/// The routes, over a started model thread, for those `access` lets in.
pub fn router(model: ModelThread, access: Access) -> Router {
    Router::new()
        .route(
            "/health",
            get(|| async {
                Json(Health {
                    status: "ok".into(),
                })
            }),
        )
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
        .with_state(model)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(middleware::from_fn_with_state(access, guard::authorize))
}

/// A server running on its own thread of this process (tests and benchmarks).
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

/// Binds `addr` and serves on a background thread, for those `access` lets in, until the
/// handle is dropped (the app's stand-in, tests, benchmarks).
pub fn start(model: ModelThread, addr: SocketAddr, access: Access) -> std::io::Result<Running> {
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
                let _ = listen::serve(listener, router(model, access), async {
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

/// When a server started by [`serve_until`] stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopWhen {
    /// On SIGINT or SIGTERM (`tandem serve` run by a user).
    Interrupted,
    /// On those, or when standard input ends: the process that started it (the local
    /// stand-in's front end) has let it go or died.
    ParentGone,
}

/// Serves on `addr` on this thread until `stop` says; `listening` is told the bound address
/// first.
pub fn serve_until(
    model: ModelThread,
    addr: SocketAddr,
    access: Access,
    stop: StopWhen,
    listening: impl FnOnce(SocketAddr) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await?;
        listening(listener.local_addr()?)?;
        let parent_gone = async move {
            match stop {
                StopWhen::ParentGone => input_ended().await,
                StopWhen::Interrupted => std::future::pending().await,
            }
        };
        let shutdown = async move {
            tokio::select! {
                _ = interrupted() => {}
                _ = parent_gone => {}
            }
        };
        listen::serve(listener, router(model, access), shutdown).await
    })
}

async fn interrupted() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .expect("a SIGTERM handler");
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
}

/// Resolves when standard input reaches its end (or cannot be read).
async fn input_ended() {
    let (ended, on_end) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        let _ = ended.send(());
    });
    let _ = on_end.await;
}

fn bad_request(message: impl std::fmt::Display) -> Response {
    error(StatusCode::BAD_REQUEST, message, "invalid_request_error")
}

/// A job the model could not do: the request's fault (400), or the server's deadline (503).
fn job_failed(e: JobError) -> Response {
    match e {
        JobError::Deadline(_) => unavailable(e),
        e => bad_request(e),
    }
}

/// A job the model thread did not take: too many wait, or it has stopped (503 either way).
fn refused(refused: Refused) -> Response {
    match refused {
        Refused::Busy => guard::busy(),
        Refused::Stopped(stopped) => unavailable(stopped),
    }
}

/// The model thread is gone, or a request ran past the deadline: nothing more to serve for it.
fn unavailable(message: impl std::fmt::Display) -> Response {
    error(StatusCode::SERVICE_UNAVAILABLE, message, "server_error")
}

/// A request body read as JSON (declared so); another content type, or none, is a 415, a body over [`MAX_BODY`] a 413, one that cannot be read a 400, all
/// in OpenAI's error shape.
struct WireBody<T>(T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned> FromRequest<S> for WireBody<T> {
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Self, Response> {
        if let Some(refused) = guard::not_json(request.headers()) {
            return Err(refused);
        }
        let body = Bytes::from_request(request, state)
            .await
            .map_err(|e| error(e.status(), e.body_text(), "invalid_request_error"))?;
        serde_json::from_slice(&body)
            .map(WireBody)
            .map_err(|e| bad_request(format!("invalid request body: {e}")))
    }
}

async fn models(State(model): State<ModelThread>) -> Json<ModelList> {
    Json(ModelList::one(model.model_name, "tandem"))
}

async fn tokenize(
    State(model): State<ModelThread>,
    WireBody(request): WireBody<TokenizeRequest>,
) -> Response {
    match model.tokenize(request.content, request.add_special).await {
        Ok(tokens) => Json(TokenizeResponse { tokens }).into_response(),
        Err(refused) => self::refused(refused),
    }
}

async fn metrics(State(model): State<ModelThread>) -> String {
    let c = &model.counters;
    let counters = [
        ("requests_total", "Completion requests served.", &c.requests),
        (
            "prompt_tokens_total",
            "Prompt tokens received.",
            &c.prompt_tokens,
        ),
        (
            "prompt_tokens_decoded_total",
            "Prompt tokens decoded (not reused from the previous request).",
            &c.prompt_tokens_decoded,
        ),
        (
            "completion_tokens_total",
            "Tokens generated.",
            &c.completion_tokens,
        ),
    ];
    counters
        .iter()
        .map(|(name, help, value)| {
            let value = value.load(Ordering::Relaxed);
            format!("# HELP tandem:{name} {help}\n# TYPE tandem:{name} counter\ntandem:{name} {value}\n")
        })
        .collect()
}

fn sampling(generation: &Generation) -> SamplingParams {
    SamplingParams {
        temperature: generation.temperature.unwrap_or(0.0).max(0.0),
        top_p: generation.top_p.unwrap_or(1.0),
        top_k: 0,
        seed: generation.seed.unwrap_or(0),
    }
}

async fn completions(
    State(model): State<ModelThread>,
    WireBody(r): WireBody<CompletionRequest>,
) -> Response {
    let prompt = match r.prompt {
        Prompt::Text(text) => JobPrompt::Text(text),
        Prompt::Ids(ids) => JobPrompt::Ids(ids),
    };
    let (output, outputs) = unbounded_channel();
    let job = Job {
        prompt,
        max_tokens: r.generation.max_tokens.unwrap_or(16),
        sampling: sampling(&r.generation),
        logprobs: r.logprobs.and_then(|l| l.alternatives()),
        output,
    };
    run(
        model,
        job,
        outputs,
        r.generation.stream,
        Endpoint::Completions,
    )
    .await
}

async fn chat_completions(
    State(model): State<ModelThread>,
    WireBody(r): WireBody<ChatRequest>,
) -> Response {
    let mut messages = Vec::with_capacity(r.messages.len());
    for message in &r.messages {
        match &message.content {
            MessageContent::Text(text) => match message.role.parse() {
                Ok(role) => messages.push(Message::new(role, text.clone())),
                Err(unknown) => return bad_request(unknown),
            },
            MessageContent::Parts(_) => {
                return bad_request("message content must be a string (parts are not supported)")
            }
        }
    }
    let (output, outputs) = unbounded_channel();
    let job = Job {
        prompt: JobPrompt::Chat(messages),
        max_tokens: r.token_limit().unwrap_or(256),
        sampling: sampling(&r.generation),
        logprobs: r.logprob_alternatives(),
        output,
    };
    run(model, job, outputs, r.generation.stream, Endpoint::Chat).await
}

/// Queues `job` and answers with what it sends to `outputs`, whole or streamed.
async fn run(
    model: ModelThread,
    job: Job,
    outputs: UnboundedReceiver<Output>,
    stream: bool,
    endpoint: Endpoint,
) -> Response {
    let with_logprobs = job.logprobs.is_some();
    if let Err(not_queued) = model.complete(job) {
        return refused(not_queued);
    }
    let meta = Meta::new(&model.model_name, endpoint);
    if stream {
        stream_response(outputs, meta).into_response()
    } else {
        collect_response(outputs, meta, with_logprobs).await
    }
}

/// What every body of one reply repeats.
struct Meta {
    id: String,
    created: u64,
    model: String,
    endpoint: Endpoint,
}

impl Meta {
    fn new(model: &str, endpoint: Endpoint) -> Self {
        let created = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Self {
            id: format!(
                "{}-{created}{:06}",
                endpoint.id_prefix(),
                std::process::id() % 1_000_000
            ),
            created,
            model: model.to_owned(),
            endpoint,
        }
    }

    /// A body (whole, or a stream `chunk`) carrying `text`.
    fn body(
        &self,
        chunk: bool,
        text: &str,
        logprobs: Option<Vec<TokenLogprob>>,
        finished: Option<&Finished>,
    ) -> Completion {
        let choice = Choice {
            logprobs: logprobs.map(|content| Logprobs {
                content: Some(content),
            }),
            finish_reason: finished.map(|done| done.finish_reason.to_owned()),
            ..Choice::carrying(self.endpoint, chunk, text)
        };
        Completion {
            id: self.id.clone(),
            object: self.endpoint.object(chunk).to_owned(),
            created: self.created,
            model: self.model.clone(),
            choices: vec![choice],
            usage: finished.map(usage),
            timings: finished.map(timings),
        }
    }
}

fn usage(done: &Finished) -> Usage {
    Usage::new(done.prompt_tokens.into(), done.completion_tokens.into())
}

fn timings(done: &Finished) -> Timings {
    Timings {
        prompt_n: done.prompt_decoded,
        cache_n: done.prompt_tokens - done.prompt_decoded,
        prompt_ms: done.prompt_ms,
        predicted_n: done.completion_tokens,
        predicted_ms: done.predicted_ms,
    }
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
            Output::Failed(e) => return job_failed(e),
            Output::Done(done) => {
                let logprobs = with_logprobs.then_some(content);
                return Json(meta.body(false, &text, logprobs, Some(&done))).into_response();
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
            for data in sse_data(output, &meta) {
                if events.send(Ok(SseEvent::default().data(data))).is_err() {
                    return;
                }
            }
        }
    });
    Sse::new(UnboundedReceiverStream::new(stream))
}

fn sse_data(output: Output, meta: &Meta) -> Vec<String> {
    match output {
        Output::Token { text, logprob } => {
            let logprobs = logprob.map(|lp| vec![lp]);
            vec![json(&meta.body(true, &text, logprobs, None))]
        }
        Output::Failed(e) => {
            let kind = match e {
                JobError::Deadline(_) => "server_error",
                _ => "invalid_request_error",
            };
            vec![json(&ErrorBody::new(e.to_string(), kind)), "[DONE]".into()]
        }
        Output::Done(done) => {
            vec![
                json(&meta.body(true, "", None, Some(&done))),
                "[DONE]".into(),
            ]
        }
    }
}

/// The JSON of one event (the wire types always serialize).
fn json(body: &impl serde::Serialize) -> String {
    serde_json::to_string(body).expect("wire types serialize")
}
