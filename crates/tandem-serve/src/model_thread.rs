//! The model thread: owns the weights and the single KV cache, runs one job at a time.
//!
//! llama contexts cannot cross threads, so HTTP handlers send jobs here and read tokens
//! back from a channel. Jobs run in arrival order; a client that goes away stops its job
//! at the next token.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};
use tandem_core::edge::{EdgeError, EdgeModel};
use tandem_core::local::{EdgeWeights, LoadError, LocalOptions};
use tandem_core::message::Message;
use tandem_core::sampling::{Sampler, SamplingParams};
use tandem_core::utf8_stream::Utf8Stream;
use tandem_wire::{Candidate, TokenLogprob};
use tokio::sync::mpsc::UnboundedSender;

/// How the server runs its model.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// GGUF file.
    pub model_path: PathBuf,
    /// Name reported by `/v1/models`.
    pub model_name: String,
    /// Context, threads.
    pub local: LocalOptions,
    /// Keep the previous request's KV cache and decode only the new suffix.
    pub prefix_reuse: bool,
    /// How long a completion may take from the moment it is queued, waiting included;
    /// past it the request is answered with an error and the model moves on.
    pub deadline: Duration,
}

impl ServeOptions {
    /// The deadline `tandem serve` and the stand-in use unless told otherwise: long enough
    /// for a few hundred tokens of a 1.5B model on two cores, short enough that an
    /// abandoned burst clears.
    pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(300);
}

/// What a job's prompt is.
#[derive(Debug, Clone)]
pub enum JobPrompt {
    /// Token ids as sent.
    Ids(Vec<i32>),
    /// Text, tokenized with control tokens parsed.
    Text(String),
    /// Chat messages, rendered with the model's template.
    Chat(Vec<Message>),
}

/// One completion to run.
#[derive(Debug)]
pub struct Job {
    pub prompt: JobPrompt,
    pub max_tokens: u32,
    pub sampling: SamplingParams,
    pub logprobs: Option<usize>,
    pub output: UnboundedSender<Output>,
}

/// What a job streams back.
#[derive(Debug)]
pub enum Output {
    /// One token.
    Token {
        text: String,
        logprob: Option<TokenLogprob>,
    },
    /// The job ended.
    Done(Finished),
    /// The job failed; the message is for the client.
    Failed(JobError),
}

/// Why the model thread could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The operating system refused a new thread.
    #[error("cannot start the model thread: {0}")]
    Spawn(#[from] std::io::Error),
    /// The model or its context could not be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The thread ended before saying whether the model loaded (it panicked).
    #[error("the model thread stopped while loading")]
    Stopped,
}

/// The model thread has stopped, so nothing more can run.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the model thread has stopped")]
pub struct Stopped;

/// Why a completion was not queued.
#[derive(Debug, Clone, Copy, thiserror::Error)]
pub enum Refused {
    /// [`crate::MAX_WAITING`] completions already wait behind the running one.
    #[error("too many requests are waiting")]
    Busy,
    /// The model thread has stopped.
    #[error(transparent)]
    Stopped(#[from] Stopped),
}

/// Why a job produced no reply; its message is for the client.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// A prompt id is not a token of the served model.
    #[error("token id {id} is outside the vocabulary (0..{vocab})")]
    OutsideVocabulary {
        /// The id sent.
        id: i32,
        /// The vocabulary size.
        vocab: i32,
    },
    /// Nothing to continue from.
    #[error("the prompt is empty")]
    EmptyPrompt,
    /// The prompt and the reply cannot both fit.
    #[error(
        "prompt ({prompt} tokens) plus max_tokens ({max_tokens}) exceeds the context window ({context} tokens)"
    )]
    TooLong {
        /// Prompt tokens.
        prompt: usize,
        /// Tokens asked for.
        max_tokens: u32,
        /// The context window.
        context: usize,
    },
    /// The chat could not be rendered with the model's template.
    #[error(transparent)]
    Template(LoadError),
    /// The model failed to decode.
    #[error(transparent)]
    Decode(#[from] EdgeError),
    /// The request was not done within the server's deadline (waiting in the queue counts).
    #[error("the request took longer than this server's {} s limit (waiting included); ask for fewer tokens or retry", .0.as_secs_f32())]
    Deadline(Duration),
}

/// How a job ended.
#[derive(Debug, Clone, Copy)]
pub struct Finished {
    pub finish_reason: &'static str,
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
    /// Prompt tokens decoded (the rest were reused from the previous request's cache).
    pub prompt_decoded: u32,
    pub prompt_ms: f64,
    pub predicted_ms: f64,
}

/// Counters for `/metrics`.
#[derive(Debug, Default)]
pub struct Counters {
    pub requests: AtomicU64,
    pub prompt_tokens: AtomicU64,
    pub prompt_tokens_decoded: AtomicU64,
    pub completion_tokens: AtomicU64,
}

enum ThreadRequest {
    Complete(Job, Instant),
    Tokenize {
        text: String,
        add_special: bool,
        reply: tokio::sync::oneshot::Sender<Vec<i32>>,
    },
}

/// One place in the model thread's queue, held by the job it queued and given back however
/// that job ends: answered, never sent (the thread gone), or the thread panicking on it. A
/// place lost would shrink the queue for good, until every request is refused as busy.
struct Place(Arc<AtomicUsize>);

impl Place {
    /// A place, unless [`crate::MAX_WAITING`] jobs already wait behind the running one.
    fn take(pending: &Arc<AtomicUsize>) -> Option<Place> {
        let ahead = pending.fetch_add(1, Ordering::SeqCst);
        let place = Place(pending.clone());
        (ahead <= crate::MAX_WAITING).then_some(place)
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A cheap, cloneable way to reach the model thread.
#[derive(Clone)]
pub struct ModelThread {
    sender: mpsc::Sender<(Place, ThreadRequest)>,
    /// Jobs (completions and tokenizations) queued or running.
    pending: Arc<AtomicUsize>,
    pub(crate) counters: Arc<Counters>,
    pub(crate) model_name: String,
    deadline: Duration,
}

impl ModelThread {
    /// Loads the model on a new thread; returns once it is ready (or failed to load).
    pub fn start(options: ServeOptions) -> Result<ModelThread, StartError> {
        let (sender, receiver) = mpsc::channel();
        let (ready_tx, ready_rx) = mpsc::channel();
        let counters = Arc::new(Counters::default());
        let thread_counters = counters.clone();
        let pending = Arc::new(AtomicUsize::new(0));
        let model_name = options.model_name.clone();
        let deadline = options.deadline;
        std::thread::Builder::new()
            .name("tandem-serve-model".into())
            .spawn(move || {
                let weights = match EdgeWeights::load(&options.model_path, &options.model_name) {
                    Ok(w) => w,
                    Err(e) => return ready_tx.send(Err(e)).unwrap_or(()),
                };
                let mut edge = match weights.session(&options.local) {
                    Ok(s) => s,
                    Err(e) => return ready_tx.send(Err(e)).unwrap_or(()),
                };
                let _ = ready_tx.send(Ok(()));
                // The place is given back at the end of each turn, or as the thread unwinds.
                for (_place, message) in receiver {
                    match message {
                        ThreadRequest::Tokenize {
                            text,
                            add_special,
                            reply,
                        } => {
                            let _ = reply.send(edge.tokenize(&text, add_special));
                        }
                        ThreadRequest::Complete(job, deadline) => {
                            if !options.prefix_reuse {
                                edge.truncate(0);
                            }
                            let limit = (options.deadline, deadline);
                            run_job(&weights, &mut edge, job, limit, &thread_counters);
                        }
                    }
                }
            })?;
        ready_rx.recv().map_err(|_| StartError::Stopped)??;
        Ok(ModelThread {
            deadline,
            sender,
            pending,
            counters,
            model_name,
        })
    }

    /// Queues a completion, unless [`crate::MAX_WAITING`] jobs already wait behind the
    /// running one.
    pub fn complete(&self, job: Job) -> Result<(), Refused> {
        self.queue(ThreadRequest::Complete(job, Instant::now() + self.deadline))
    }

    /// Tokenizes text with the served model's vocabulary, in the same queue as completions
    /// (a flood of tokenizations waits or is refused like one of completions).
    pub async fn tokenize(&self, text: String, add_special: bool) -> Result<Vec<i32>, Refused> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.queue(ThreadRequest::Tokenize {
            text,
            add_special,
            reply,
        })?;
        answer.await.map_err(|_| Refused::Stopped(Stopped))
    }

    /// Sends a job to the model thread, unless [`crate::MAX_WAITING`] already wait.
    fn queue(&self, request: ThreadRequest) -> Result<(), Refused> {
        let place = Place::take(&self.pending).ok_or(Refused::Busy)?;
        self.sender
            .send((place, request))
            .map_err(|_| Refused::Stopped(Stopped))
    }
}

fn run_job(
    weights: &EdgeWeights,
    edge: &mut tandem_core::local::LocalModel<'_>,
    job: Job,
    (limit, deadline): (Duration, Instant),
    counters: &Counters,
) {
    let fail = |e: JobError| {
        let _ = job.output.send(Output::Failed(e));
    };
    // Its client gave up while it waited: nobody would read the answer.
    if job.output.is_closed() {
        return;
    }
    let late = || Instant::now() >= deadline;
    if late() {
        return fail(JobError::Deadline(limit));
    }
    let prompt = match job.prompt {
        JobPrompt::Ids(ids) => {
            let vocab = weights.vocab_size() as i32;
            if let Some(bad) = ids.iter().find(|&&id| id < 0 || id >= vocab) {
                return fail(JobError::OutsideVocabulary { id: *bad, vocab });
            }
            ids
        }
        JobPrompt::Text(text) => edge.tokenize(&text, true),
        JobPrompt::Chat(messages) => match weights.chat_prompt(&messages) {
            Ok(text) => edge.tokenize(&text, true),
            Err(e) => return fail(JobError::Template(e)),
        },
    };
    if prompt.is_empty() {
        return fail(JobError::EmptyPrompt);
    }
    if prompt.len() + job.max_tokens as usize > edge.context_size() {
        return fail(JobError::TooLong {
            prompt: prompt.len(),
            max_tokens: job.max_tokens,
            context: edge.context_size(),
        });
    }
    counters.requests.fetch_add(1, Ordering::Relaxed);
    counters
        .prompt_tokens
        .fetch_add(prompt.len() as u64, Ordering::Relaxed);
    let mut sampler = Sampler::new(job.sampling);
    let prefill = Instant::now();
    let (mut step, decoded) = match edge.sync(&prompt, &mut sampler) {
        Ok(r) => r,
        Err(e) => return fail(e.into()),
    };
    let prompt_ms = prefill.elapsed().as_secs_f64() * 1e3;
    counters
        .prompt_tokens_decoded
        .fetch_add(decoded as u64, Ordering::Relaxed);
    let predicting = Instant::now();
    let mut text = Utf8Stream::default();
    let mut completion_tokens = 0;
    let mut finish_reason = "length";
    while completion_tokens < job.max_tokens {
        let token = step.token;
        if edge.is_end_of_turn(token) {
            finish_reason = "stop";
            break;
        }
        let logprob = job.logprobs.map(|n| {
            let (logprob, top) = edge.logprobs(token, n);
            let candidate = |id: i32, logprob: f32| {
                let bytes = edge.piece(id);
                Candidate {
                    id: Some(id),
                    token: String::from_utf8_lossy(&bytes).into_owned(),
                    bytes,
                    logprob,
                }
            };
            TokenLogprob {
                chosen: candidate(token, logprob),
                top_logprobs: top
                    .into_iter()
                    .map(|(id, logprob)| candidate(id, logprob))
                    .collect(),
            }
        });
        let piece = text.push(&edge.piece(token));
        completion_tokens += 1;
        if job
            .output
            .send(Output::Token {
                text: piece,
                logprob,
            })
            .is_err()
        {
            // The client went away: stop decoding for nobody.
            return;
        }
        if completion_tokens == job.max_tokens {
            break;
        }
        if late() {
            return fail(JobError::Deadline(limit));
        }
        step = match edge.step_after(token, &mut sampler) {
            Ok(step) => step,
            Err(e) => return fail(e.into()),
        };
    }
    // The last sampled token was sent but not decoded: the cache holds prompt + the rest,
    // and the next request re-decodes from wherever it first differs.
    counters
        .completion_tokens
        .fetch_add(u64::from(completion_tokens), Ordering::Relaxed);
    let _ = job.output.send(Output::Done(Finished {
        finish_reason,
        prompt_tokens: prompt.len() as u32,
        completion_tokens,
        prompt_decoded: decoded as u32,
        prompt_ms,
        predicted_ms: predicting.elapsed().as_secs_f64() * 1e3,
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// However a queued job ends, its place comes back: the queue is as long after a send
    /// to a stopped thread and after a panic as it was before.
    #[test]
    fn a_place_comes_back_however_its_job_ends() {
        let pending = Arc::new(AtomicUsize::new(0));
        let full: Vec<Place> = (0..=crate::MAX_WAITING)
            .map(|_| Place::take(&pending).expect("room"))
            .collect();
        assert!(Place::take(&pending).is_none(), "one past the queue");
        drop(full);
        assert_eq!(pending.load(Ordering::SeqCst), 0);

        let (sender, receiver) = mpsc::channel::<Place>();
        drop(receiver);
        assert!(sender.send(Place::take(&pending).unwrap()).is_err());
        assert_eq!(pending.load(Ordering::SeqCst), 0, "never sent");

        let place = Place::take(&pending).unwrap();
        let crashed = std::thread::spawn(move || {
            let _place = place;
            panic!("a job that panics");
        })
        .join();
        assert!(crashed.is_err());
        assert_eq!(pending.load(Ordering::SeqCst), 0, "the thread panicked");
    }
}
