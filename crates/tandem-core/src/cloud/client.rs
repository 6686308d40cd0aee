//! An HTTP client for OpenAI-compatible servers (vLLM, SGLang, llama-server, OpenRouter, …).
//!
//! Routed decoding makes many short requests in the middle of a reply, so the client is tuned
//! for that: short timeouts, a couple of retries for 429/5xx that honour `Retry-After` only
//! while it is short, and a typed error for everything else so the loop can fall back to
//! the edge token at once.

use super::continuation::{self, Continuation};
use super::{
    Answered, ApiKey, Arrival, Cloud, CloudError, CloudMode, CloudReply, CloudRequest, InFlight,
    STOP_POLL,
};
use crate::edge::TokenId;
use reqwest::blocking::{Client, RequestBuilder, Response};
use reqwest::header::CONTENT_TYPE;
use reqwest::StatusCode;
use std::io::Read;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tandem_wire::{
    ChatMessage, ChatRequest, Choice, Completion, CompletionRequest, Endpoint, ErrorBody,
    Generation, LogprobsRequest, ModelList, Prompt, TokenizeRequest, TokenizeResponse, Usage,
};

/// The largest answer read from the cloud: a span of a few tokens with logprobs is a few KiB.
const MAX_BODY: usize = 4 << 20;
/// The longest server error message kept (it is shown and saved with the reply).
const MAX_MESSAGE_CHARS: usize = 300;
/// Same-origin redirects followed before giving up.
const MAX_REDIRECTS: usize = 3;

/// Where and how to reach the cloud.
#[derive(Debug, Clone)]
pub struct CloudConfig {
    /// Base URL including `/v1`, e.g. `http://127.0.0.1:8081/v1`.
    pub base_url: String,
    /// Model name sent in requests (servers with one model ignore it).
    pub model: Option<String>,
    /// Endpoint to use.
    pub mode: CloudMode,
    /// Bearer token.
    pub api_key: Option<ApiKey>,
    /// Temperature sent to the cloud (0 = its greedy choice).
    pub temperature: f32,
    /// Limit for establishing a connection.
    pub connect_timeout: Duration,
    /// Limit for a whole request.
    pub request_timeout: Duration,
    /// Retries after a 429 or 5xx.
    pub max_retries: u32,
    /// A `Retry-After` longer than this fails the request instead of stalling the reply.
    pub max_retry_wait: Duration,
}

impl CloudConfig {
    /// Defaults for a base URL.
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into().trim_end_matches('/').to_owned(),
            model: None,
            mode: CloudMode::Completions,
            api_key: None,
            temperature: 0.0,
            connect_timeout: Duration::from_secs(3),
            request_timeout: Duration::from_secs(20),
            max_retries: 2,
            max_retry_wait: Duration::from_secs(2),
        }
    }
}

/// A blocking client for one endpoint; remembers whether the endpoint shares the edge
/// vocabulary and, in chat mode, whether it continues a partial reply. Clones share their
/// connections and what they learnt of the endpoint, so every conversation after the first
/// starts without a new connection or a check: on a real network each would cost the first
/// token a round trip.
#[derive(Clone)]
pub struct CloudClient {
    exchange: Exchange,
    shares_vocab: Arc<OnceLock<bool>>,
    continuation: Arc<OnceLock<Continuation>>,
}

/// What an HTTP exchange with the endpoint needs, owned, so a completion can run on a thread
/// of its own while the reply waits for it or for Stop.
#[derive(Clone)]
struct Exchange {
    http: Client,
    config: CloudConfig,
}

impl CloudClient {
    /// Builds a client; fails only if the TLS backend cannot start.
    pub fn new(config: CloudConfig) -> Result<Self, CloudError> {
        let mut builder = Client::builder()
            .connect_timeout(config.connect_timeout)
            .timeout(config.request_timeout)
            .redirect(same_origin_redirects());
        if super::is_on_this_machine(&config.base_url) {
            // The stand-in or a server on this machine: a proxy from the environment would
            // only carry the prompt (and the key) off the machine.
            builder = builder.no_proxy();
        }
        let http = builder.build().map_err(|e| CloudError::Unreachable {
            endpoint: config.base_url.clone(),
            detail: e.to_string(),
        })?;
        Ok(Self {
            exchange: Exchange { http, config },
            shares_vocab: Arc::default(),
            continuation: Arc::default(),
        })
    }

    /// The configuration in use.
    pub fn config(&self) -> &CloudConfig {
        &self.exchange.config
    }

    /// Lists the served models: a cheap check that the endpoint, key and model are right.
    pub fn check(&self) -> Result<Vec<String>, CloudError> {
        let x = &self.exchange;
        let models: ModelList = parse(&x.send(|| x.authorized(x.http.get(x.url("/models"))))?)?;
        let ids: Vec<String> = models.data.into_iter().map(|m| m.id).collect();
        if let Some(model) = &self.config().model {
            if !ids.iter().any(|id| id == model) {
                return Err(CloudError::NotFound {
                    message: format!("model '{model}' is not served (served: {})", ids.join(", ")),
                });
            }
        }
        Ok(ids)
    }

    /// Checks that the endpoint continues a partial reply sent as a final assistant message,
    /// as chat mode needs: asked once with a probe whose continuation is certain, then
    /// remembered. [`CloudError::NoContinuation`] when it writes a fresh answer instead; any
    /// other error when the probe got no answer to judge (nothing is remembered then, so the
    /// next call asks again). `stop` ends the wait as it does for a completion.
    pub fn check_continuation(&self, stop: &dyn Fn() -> bool) -> Result<(), CloudError> {
        self.continuation(stop).map(|_| ())
    }

    /// What the endpoint does with a partial reply ([`Self::check_continuation`]); never
    /// [`Continuation::Restarts`].
    fn continuation(&self, stop: &dyn Fn() -> bool) -> Result<Continuation, CloudError> {
        let verdict = match self.continuation.get() {
            Some(known) => known.clone(),
            None => {
                let probe = continuation::probe_request(self.config().model.clone());
                let answered = self.dispatch(Endpoint::Chat, &probe);
                let body = wait_for(|wait| receive(&answered, wait).map(|a| a.0), stop)?;
                let answer = read_reply(&body, continuation::PROBE_TOKENS as usize, false)?;
                self.continuation
                    .get_or_init(|| Continuation::judge(&answer.text))
                    .clone()
            }
        };
        match verdict {
            Continuation::Continues | Continuation::Repeats => Ok(verdict),
            Continuation::Restarts { answered } => Err(CloudError::NoContinuation {
                endpoint: self.config().base_url.clone(),
                answered,
            }),
        }
    }

    /// The chat request for `request`, once the endpoint is known to continue a reply when
    /// the request carries one to continue (a request for a reply's first tokens asks for a
    /// fresh answer, which every chat endpoint gives), and the reply so far where the endpoint
    /// repeats it before its continuation.
    fn continuing_chat_request(
        &self,
        request: &CloudRequest<'_>,
    ) -> Result<(ChatRequest, Option<String>), CloudError> {
        let chat = self.chat_request(request);
        if chat.continue_final_message != Some(true) {
            return Ok((chat, None));
        }
        let repeated = match self.continuation(request.stop)? {
            Continuation::Repeats => Some((request.reply)()),
            _ => None,
        };
        Ok((chat, repeated))
    }

    /// The completion request for `request`, its prompt as edge token ids when `as_ids`.
    fn completion_request(&self, request: &CloudRequest<'_>, as_ids: bool) -> CompletionRequest {
        CompletionRequest {
            prompt: if as_ids {
                Prompt::Ids(request.ids.to_vec())
            } else {
                Prompt::Text((request.text)())
            },
            logprobs: Some(LogprobsRequest::Count(1)),
            generation: self.generation(request),
        }
    }

    /// The chat request for `request`: the messages, and the reply so far as a final
    /// assistant message to continue.
    fn chat_request(&self, request: &CloudRequest<'_>) -> ChatRequest {
        let mut messages: Vec<ChatMessage> = request
            .messages
            .iter()
            .map(|m| ChatMessage::text(m.role.as_str(), &m.content))
            .collect();
        let reply = (request.reply)();
        let continues = !reply.is_empty();
        if continues {
            messages.push(ChatMessage::text("assistant", reply));
        }
        ChatRequest {
            messages,
            continue_final_message: continues.then_some(true),
            add_generation_prompt: continues.then_some(false),
            generation: self.generation(request),
            ..ChatRequest::default()
        }
    }

    /// What every request carries: the model, the span, the temperature, one whole answer.
    fn generation(&self, request: &CloudRequest<'_>) -> Generation {
        Generation {
            model: self.config().model.clone(),
            max_tokens: Some(request.max_tokens),
            temperature: Some(self.config().temperature),
            stream: false,
            // llama-server: keep the KV cache of the previous request, so each call costs only the new suffix.
            cache_prompt: Some(true),
            ..Generation::default()
        }
    }

    /// Posts `body` to `endpoint` on a thread of its own and returns at once: the answer
    /// (the body, or why there is none) arrives on the returned channel with the time it came.
    /// An abandoned request runs out on its own within its deadline.
    fn dispatch(&self, endpoint: Endpoint, body: &impl serde::Serialize) -> Receiver<Answer> {
        let x = self.exchange.clone();
        let url = x.url(endpoint.path());
        let body = serde_json::to_vec(body).expect("requests serialize");
        let (answer, answered) = mpsc::channel();
        std::thread::spawn(move || {
            let json = |b: RequestBuilder| b.header(CONTENT_TYPE, "application/json");
            let body = x.send(|| x.authorized(json(x.http.post(&url)).body(body.clone())));
            let _ = answer.send((body, Instant::now()));
        });
        answered
    }
}

/// A body read off the network (or why there is none), and when.
type Answer = (Result<String, CloudError>, Instant);

/// A completion on its way, read into a reply when it comes.
struct Pending {
    answered: Receiver<Answer>,
    max_tokens: usize,
    as_ids: bool,
    /// The reply so far, where the endpoint answers with it before its continuation.
    repeated: Option<String>,
}

impl InFlight for Pending {
    fn poll(&mut self, wait: Duration) -> Option<Arrival> {
        let (body, at) = receive(&self.answered, wait)?;
        let mut result = body.and_then(|body| read_reply(&body, self.max_tokens, self.as_ids));
        if let Some(repeated) = &self.repeated {
            result = result.and_then(|reply| without_repeat(reply, repeated));
        }
        Some(Arrival { result, at })
    }
}

/// An answer from an endpoint that repeats the reply so far before its continuation, with
/// the repeat cut off; an answer that does not begin with the reply is not used at all.
fn without_repeat(mut reply: CloudReply, repeated: &str) -> Result<CloudReply, CloudError> {
    let Some(continuation) = reply.text.strip_prefix(repeated) else {
        return Err(CloudError::Malformed {
            detail: "the chat endpoint did not repeat the reply so far before going on, as it \
                     did when checked, so its answer was not used"
                .into(),
        });
    };
    reply.text = continuation.to_owned();
    Ok(reply)
}

/// The answer on `answered`, if it comes within `wait`.
fn receive(answered: &Receiver<Answer>, wait: Duration) -> Option<Answer> {
    match answered.recv_timeout(wait) {
        Ok(answer) => Some(answer),
        Err(RecvTimeoutError::Timeout) => None,
        Err(RecvTimeoutError::Disconnected) => Some((
            Err(CloudError::Malformed {
                detail: "the request ended without an answer".into(),
            }),
            Instant::now(),
        )),
    }
}

/// Polls for an answer every [`STOP_POLL`] until it comes or the user presses Stop.
fn wait_for<T>(
    mut poll: impl FnMut(Duration) -> Option<Result<T, CloudError>>,
    stop: &dyn Fn() -> bool,
) -> Result<T, CloudError> {
    loop {
        if let Some(answer) = poll(STOP_POLL) {
            return answer;
        }
        if stop() {
            return Err(CloudError::Stopped);
        }
    }
}

impl Exchange {
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.config.base_url)
    }

    /// The server root (`/tokenize` lives beside `/v1`, not under it).
    fn root_url(&self, path: &str) -> String {
        let base = &self.config.base_url;
        format!("{}{path}", base.strip_suffix("/v1").unwrap_or(base))
    }

    fn authorized(&self, request: RequestBuilder) -> RequestBuilder {
        match &self.config.api_key {
            Some(key) => request.bearer_auth(key.expose()),
            None => request,
        }
    }

    /// Sends with retries for 429 and 5xx and reads the body, all within one deadline (the
    /// request timeout: connect, headers, body and the waits between retries); maps every
    /// failure to a [`CloudError`].
    fn send(&self, build: impl Fn() -> RequestBuilder) -> Result<String, CloudError> {
        let deadline = Instant::now() + self.config.request_timeout;
        let mut attempt = 0;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(self.timeout());
            }
            let response = build()
                .timeout(left)
                .send()
                .map_err(|e| self.transport_error(&e))?;
            let status = response.status();
            if status.is_success() {
                return self.read_body(response, deadline);
            }
            if status.is_redirection() {
                return Err(CloudError::Server {
                    status: status.as_u16(),
                    message: "the server redirected the request to another origin; Tandem does \
                              not send the conversation there"
                        .into(),
                });
            }
            let retry_after = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs);
            let retryable = status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error();
            if retryable && attempt < self.config.max_retries {
                let backoff = Duration::from_millis(200 << attempt);
                let wait = retry_after.unwrap_or(backoff);
                if wait <= self.config.max_retry_wait && Instant::now() + wait < deadline {
                    std::thread::sleep(wait);
                    attempt += 1;
                    continue;
                }
            }
            let message = error_message(&self.read_body(response, deadline).unwrap_or_default());
            return Err(match status.as_u16() {
                401 | 403 => CloudError::Unauthorized {
                    status: status.as_u16(),
                },
                404 => CloudError::NotFound { message },
                429 => CloudError::RateLimited,
                code => CloudError::Server {
                    status: code,
                    message,
                },
            });
        }
    }

    /// Reads a body of at most [`MAX_BODY`] bytes before `deadline`: a server that drips
    /// bytes or never ends its answer costs one request timeout, not the reply or the memory.
    fn read_body(&self, mut response: Response, deadline: Instant) -> Result<String, CloudError> {
        let mut body = Vec::new();
        let mut chunk = [0u8; 16 * 1024];
        loop {
            if Instant::now() >= deadline {
                return Err(self.timeout());
            }
            let n = response.read(&mut chunk).map_err(|e| {
                if e.kind() == std::io::ErrorKind::TimedOut
                    || e.get_ref()
                        .and_then(|inner| inner.downcast_ref::<reqwest::Error>())
                        .is_some_and(reqwest::Error::is_timeout)
                {
                    self.timeout()
                } else {
                    CloudError::Malformed {
                        detail: format!("reading the body: {}", root_cause(&e)),
                    }
                }
            })?;
            if n == 0 {
                break;
            }
            if body.len() + n > MAX_BODY {
                return Err(CloudError::Malformed {
                    detail: format!(
                        "the answer is larger than {} MiB; a span is a few tokens",
                        MAX_BODY >> 20
                    ),
                });
            }
            body.extend_from_slice(&chunk[..n]);
        }
        String::from_utf8(body).map_err(|_| CloudError::Malformed {
            detail: "the answer is not UTF-8".into(),
        })
    }

    fn timeout(&self) -> CloudError {
        CloudError::Timeout {
            seconds: self.config.request_timeout.as_secs_f32(),
        }
    }

    fn transport_error(&self, e: &reqwest::Error) -> CloudError {
        if e.is_timeout() {
            self.timeout()
        } else {
            CloudError::Unreachable {
                endpoint: self.config.base_url.clone(),
                detail: root_cause(e),
            }
        }
    }
}

impl Cloud for CloudClient {
    fn endpoint(&self) -> &str {
        &self.config().base_url
    }

    fn shares_vocab(&mut self, probe_ids: &[TokenId]) -> Result<bool, CloudError> {
        if self.config().mode == CloudMode::Chat {
            // Chat templates are applied by the server: only text goes out.
            return Ok(false);
        }
        if let Some(&known) = self.shares_vocab.get() {
            return Ok(known);
        }
        // Within the request deadline and body cap, like any request.
        let x = &self.exchange;
        let url = x.root_url("/tokenize");
        let body = serde_json::to_vec(&TokenizeRequest {
            content: super::VOCAB_PROBE.into(),
            add_special: false,
        })
        .expect("requests serialize");
        let post = || {
            let request = x.http.post(&url).header(CONTENT_TYPE, "application/json");
            x.authorized(request.body(body.clone()))
        };
        let shares = match x.send(post) {
            Ok(answer) => serde_json::from_str::<TokenizeResponse>(&answer)
                .is_ok_and(|t| t.tokens == probe_ids),
            // Nothing answered: a failure like a request's, so a dead cloud costs a reply
            // two deadlines, not three.
            Err(e @ (CloudError::Unreachable { .. } | CloudError::Timeout { .. })) => {
                return Err(e)
            }
            // It answered without a tokenizer like the edge's (404, 401…): text prompts.
            Err(_) => false,
        };
        let _ = self.shares_vocab.set(shares);
        Ok(shares)
    }

    fn sent_text(&self, request: &CloudRequest<'_>) -> String {
        match self.config().mode {
            CloudMode::Completions => (request.text)(),
            CloudMode::Chat => {
                let mut sent: String = request
                    .messages
                    .iter()
                    .map(|m| format!("[{}]\n{}\n\n", m.role.as_str(), m.content))
                    .collect();
                let reply = (request.reply)();
                if !reply.is_empty() {
                    sent.push_str(&format!("[assistant, continued]\n{reply}"));
                }
                sent
            }
        }
    }

    /// Waits for the answer, asking every [`STOP_POLL`] whether the user pressed Stop.
    fn complete(&mut self, request: &CloudRequest<'_>) -> Result<CloudReply, CloudError> {
        let mut in_flight = self.send(request);
        wait_for(|wait| in_flight.poll(wait).map(|a| a.result), request.stop)
    }

    fn send(&mut self, request: &CloudRequest<'_>) -> Box<dyn InFlight> {
        let as_ids = self.shares_vocab.get() == Some(&true);
        let mut repeated = None;
        let answered = match self.config().mode {
            CloudMode::Completions => self.dispatch(
                Endpoint::Completions,
                &self.completion_request(request, as_ids),
            ),
            CloudMode::Chat => match self.continuing_chat_request(request) {
                Ok((chat, reply)) => {
                    repeated = reply;
                    self.dispatch(Endpoint::Chat, &chat)
                }
                Err(error) => {
                    return Box::new(Answered(Some(Arrival {
                        result: Err(error),
                        at: Instant::now(),
                    })))
                }
            },
        };
        Box::new(Pending {
            answered,
            max_tokens: request.max_tokens as usize,
            as_ids,
            repeated,
        })
    }
}

/// What a completion body says, cut to the `max_tokens` asked for; ids only when they were
/// asked for (`as_ids`). Whatever the server sent, the answer is a reply or an error.
fn read_reply(body: &str, max_tokens: usize, as_ids: bool) -> Result<CloudReply, CloudError> {
    let parsed: Completion = parse(body)?;
    let choice = parsed
        .choices
        .into_iter()
        .next()
        .ok_or(CloudError::Malformed {
            detail: "no choices in the reply".into(),
        })?;
    let usage = parsed.usage;
    let (text, ids) = cut_to_span(&choice, max_tokens);
    Ok(CloudReply {
        ids: if as_ids { ids } else { None },
        text,
        stopped: choice.finish_reason.as_deref() == Some("stop"),
        prompt_tokens: usage.as_ref().and_then(|u| u.prompt_tokens),
        cached_prompt_tokens: usage.as_ref().and_then(Usage::cached_prompt_tokens),
        completion_tokens: usage.as_ref().and_then(|u| u.completion_tokens),
    })
}

/// The message of an error body, or the body itself, cut short either way: it ends up in
/// notices and saved history.
fn error_message(body: &str) -> String {
    let message = serde_json::from_str::<ErrorBody>(body)
        .map(|b| b.error.message)
        .unwrap_or_else(|_| body.to_owned());
    match message.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((cut, _)) => format!("{}…", &message[..cut]),
        None => message,
    }
}

/// Redirects are followed only within the origin of the request (scheme, host and port): a
/// 307/308 re-sends the body, which is the user's conversation.
fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let first = attempt.previous().first();
        let same = first.is_some_and(|from| {
            from.scheme() == attempt.url().scheme()
                && from.host_str() == attempt.url().host_str()
                && from.port_or_known_default() == attempt.url().port_or_known_default()
        });
        if same && attempt.previous().len() <= MAX_REDIRECTS {
            attempt.follow()
        } else {
            attempt.stop()
        }
    })
}

/// The choice's text and ids, no longer than the span asked for: a server that answers past
/// `max_tokens` must not push the reply past its budget or the context window. Without
/// per-token logprobs the text is whole; the decoder cuts it after tokenizing.
fn cut_to_span(choice: &Choice, max_tokens: usize) -> (String, Option<Vec<TokenId>>) {
    let text = choice.text();
    let tokens = choice.logprobs.as_ref().and_then(|l| l.content.as_ref());
    match tokens {
        Some(tokens) if tokens.len() > max_tokens => {
            let kept = &tokens[..max_tokens];
            let text = kept.iter().map(|t| t.chosen.token.as_str()).collect();
            let ids = kept.iter().map(|t| t.chosen.id).collect();
            (text, ids)
        }
        _ => (text, choice.ids()),
    }
}

fn parse<T: serde::de::DeserializeOwned>(body: &str) -> Result<T, CloudError> {
    serde_json::from_str(body).map_err(|e| CloudError::Malformed {
        detail: format!("{e} in {:?}", body.chars().take(80).collect::<String>()),
    })
}

/// The innermost error message: reqwest's own message is just "error sending request".
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut current = e;
    while let Some(next) = current.source() {
        current = next;
    }
    current.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_messages_are_extracted_or_cut() {
        assert_eq!(
            error_message(r#"{"error":{"message":"bad key","type":"x"}}"#),
            "bad key"
        );
        assert_eq!(error_message(&"x".repeat(500)).chars().count(), 301);
    }

    /// A llama-server completion with per-token logprobs (ids), as the fuzzer's seed.
    const REPLY: &str = r#"{"choices":[{"text":" Paris is","finish_reason":"length","logprobs":{"content":[{"id":12366,"token":" Paris","logprob":-0.1,"top_logprobs":[]},{"id":374,"token":" is","logprob":-0.2,"top_logprobs":[]}]}}],"usage":{"prompt_tokens":9,"completion_tokens":2}}"#;

    #[test]
    fn the_seed_reply_reads_as_the_fuzzer_assumes() {
        let reply = read_reply(REPLY, 1, true).unwrap();
        assert_eq!(
            (reply.text.as_str(), reply.ids),
            (" Paris", Some(vec![12366]))
        );
    }

    proptest::proptest! {
        /// Any body a server sends is a reply or an error, never a panic; a reply holds no
        /// more tokens than asked for.
        #[test]
        fn any_body_is_a_reply_or_an_error(body in ".{0,400}", max in 0usize..6, as_ids: bool) {
            if let Ok(reply) = read_reply(&body, max, as_ids) {
                proptest::prop_assert!(reply.ids.is_none_or(|ids| ids.len() <= max));
            }
            proptest::prop_assert!(error_message(&body).chars().count() <= MAX_MESSAGE_CHARS + 1);
        }

        /// Near-misses of a real reply (a byte changed, dropped or cut) fail as clearly.
        #[test]
        fn a_damaged_reply_is_a_reply_or_an_error(
            at in 0usize..REPLY.len(),
            damage in crate::damage::kind(),
            max in 0usize..4,
        ) {
            let bytes = crate::damage::apply(REPLY.as_bytes().to_vec(), at, damage);
            let body = String::from_utf8_lossy(&bytes);
            let _ = read_reply(&body, max, true);
            let _ = error_message(&body);
        }
    }
}
