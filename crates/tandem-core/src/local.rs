//! The local (edge) model on llama.cpp: the only module that touches `llama_cpp_2`.
//!
//! [`EdgeWeights`] is a loaded GGUF; [`LocalModel`] is one KV cache over it (a chat or a
//! server slot) and implements [`EdgeModel`]. The context borrows the weights, so whoever
//! owns a `LocalModel` keeps it on one thread (llama contexts are `!Send`): the CLI in its
//! main thread, the app and `tandem serve` in an engine thread.

use crate::edge::{EdgeError, EdgeModel, Outputs, Step, TokenId};
use crate::message::Message;
use crate::sampling::Sampler;
use crate::signals;
use llama_cpp_2::context::params::{LlamaContextParams, LlamaPoolingType};
use llama_cpp_2::context::session::LlamaStateSeqFlags;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaModel};
use llama_cpp_2::token::LlamaToken;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Why a model could not be loaded or a context created.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file is not there.
    #[error("model file not found: {0}")]
    Missing(PathBuf),
    /// The file is there but is not a GGUF model llama.cpp can load.
    #[error("{path} is not a usable GGUF model ({reason})")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What was seen.
        reason: String,
    },
    /// llama.cpp could not start.
    #[error("llama.cpp backend failed to start: {0}")]
    Backend(String),
    /// The context (KV cache) could not be created, usually for lack of memory.
    #[error("could not create a {n_ctx}-token context: {reason}")]
    Context {
        /// Requested size.
        n_ctx: u32,
        /// llama.cpp's error.
        reason: String,
    },
    /// The chat could not be rendered with the model's template.
    #[error("chat template failed: {0}")]
    Template(String),
}

/// How a [`LocalModel`] is set up.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LocalOptions {
    /// Context window in tokens.
    pub n_ctx: u32,
    /// CPU threads for decoding.
    pub threads: u32,
    /// Compute last-layer hidden states (for the MLP router); makes prefill slower.
    pub hidden_state: bool,
}

impl Default for LocalOptions {
    fn default() -> Self {
        Self {
            n_ctx: 4096,
            threads: default_threads(),
            hidden_state: false,
        }
    }
}

/// Half the cores, at least one: llama.cpp's threads spin-wait, and when every core is
/// busy elsewhere (the app's UI, a browser) a full-width decode slows down many times over.
pub fn default_threads() -> u32 {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cores / 2).max(1) as u32
}

fn backend() -> Result<&'static LlamaBackend, LoadError> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            let mut backend = LlamaBackend::init().map_err(|e| e.to_string())?;
            // llama.cpp logs every tensor it loads; Tandem reports errors itself.
            if std::env::var_os("TANDEM_LLAMA_LOG").is_none() {
                backend.void_logs();
            }
            Ok(backend)
        })
        .as_ref()
        .map_err(|e| LoadError::Backend(e.clone()))
}

/// A loaded GGUF model.
pub struct EdgeWeights {
    model: LlamaModel,
    name: String,
}

impl EdgeWeights {
    /// Loads a GGUF file; `name` is what events call it.
    pub fn load(path: &Path, name: &str) -> Result<Self, LoadError> {
        check_gguf(path)?;
        let model = LlamaModel::load_from_file(backend()?, path, &LlamaModelParams::default())
            .map_err(|e| LoadError::Corrupt {
                path: path.to_owned(),
                reason: format!("llama.cpp refused it: {e}"),
            })?;
        Ok(Self {
            model,
            name: name.to_owned(),
        })
    }

    /// A fresh KV cache over these weights.
    pub fn session(&self, options: &LocalOptions) -> Result<LocalModel<'_>, LoadError> {
        let n_ctx = options.n_ctx.min(self.model.n_ctx_train()).max(64);
        let threads = options.threads.max(1) as i32;
        let params = LlamaContextParams::default()
            .with_n_ctx(NonZeroU32::new(n_ctx))
            .with_n_batch(512)
            .with_n_threads(threads)
            .with_n_threads_batch(threads);
        let new_context = |params: LlamaContextParams| {
            self.model
                .new_context(backend()?, params)
                .map_err(|e| LoadError::Context {
                    n_ctx,
                    reason: e.to_string(),
                })
        };
        let (context, prefill) = if options.hidden_state {
            let with_hidden = params
                .clone()
                .with_embeddings(true)
                .with_pooling_type(LlamaPoolingType::None);
            (new_context(with_hidden)?, Some(new_context(params)?))
        } else {
            (new_context(params)?, None)
        };
        Ok(LocalModel {
            weights: self,
            context,
            prefill,
            cached: Vec::new(),
            hidden_state: options.hidden_state,
            n_ctx: n_ctx as usize,
        })
    }

    /// Renders a chat with the model's own template, ending with the assistant's turn.
    /// Models without a template get a plain `role: text` transcript.
    pub fn chat_prompt(&self, messages: &[Message]) -> Result<String, LoadError> {
        let template = match self.model.chat_template(None) {
            Ok(template) => template,
            Err(_) => return Ok(plain_transcript(messages)),
        };
        let chat = messages
            .iter()
            .map(|m| LlamaChatMessage::new(m.role.as_str().to_owned(), m.content.clone()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| LoadError::Template(e.to_string()))?;
        self.model
            .apply_chat_template(&template, &chat, true)
            .map_err(|e| LoadError::Template(e.to_string()))
    }

    /// Width of the hidden state.
    pub fn hidden_size(&self) -> usize {
        self.model.n_embd() as usize
    }

    /// Vocabulary size.
    pub fn vocab_size(&self) -> usize {
        self.model.n_vocab() as usize
    }

    /// The token that ends the model's turn: its end-of-turn token (`<|im_end|>` in ChatML
    /// templates), or its end of sequence where it names none.
    pub fn end_of_turn(&self) -> TokenId {
        let vocab = self.model.vocab();
        let eot = vocab.eot();
        if eot.0 >= 0 {
            eot.0
        } else {
            vocab.eos().0
        }
    }

    /// Tokenizes text; `special` adds BOS where the model wants one and parses control tokens.
    pub fn tokenize(&self, text: &str, special: bool) -> Vec<TokenId> {
        self.model
            .vocab()
            .tokenize(text.as_bytes(), special, special)
            .into_iter()
            .map(|t| t.0)
            .collect()
    }
}

fn plain_transcript(messages: &[Message]) -> String {
    let mut text: String = messages
        .iter()
        .map(|m| format!("{}: {}\n", m.role.as_str(), m.content))
        .collect();
    text.push_str("assistant:");
    text
}

/// Fails early, with a clear message, on a file that cannot be a GGUF model.
pub fn check_gguf(path: &Path) -> Result<(), LoadError> {
    use std::io::Read;
    let mut magic = [0u8; 4];
    let mut file = std::fs::File::open(path).map_err(|_| LoadError::Missing(path.to_owned()))?;
    let corrupt = |reason: &str| LoadError::Corrupt {
        path: path.to_owned(),
        reason: reason.to_owned(),
    };
    file.read_exact(&mut magic)
        .map_err(|_| corrupt("the file is shorter than a GGUF header"))?;
    if &magic != b"GGUF" {
        return Err(corrupt("it does not start with the GGUF magic bytes"));
    }
    Ok(())
}

/// One KV cache over loaded weights: a chat, or a server's single slot.
pub struct LocalModel<'w> {
    weights: &'w EdgeWeights,
    context: LlamaContext<'w>,
    /// With hidden states on, llama.cpp outputs a row (logits and hidden state) for every
    /// token of a batch, which makes long prefills ~1.4× slower. Long prompts are decoded
    /// here instead, without embeddings, and the sequence's KV state handed to `context`.
    prefill: Option<LlamaContext<'w>>,
    cached: Vec<TokenId>,
    hidden_state: bool,
    n_ctx: usize,
}

/// Prompts at least this long go through the prefill context (the state handoff costs a
/// copy of the sequence's KV cache, which only pays off over many tokens).
const HANDOFF_MIN_TOKENS: usize = 32;

impl LocalModel<'_> {
    /// The weights this cache runs on.
    pub fn weights(&self) -> &EdgeWeights {
        self.weights
    }

    /// At the last decoded position: the log-probability of `token` and the `n` most likely
    /// tokens with theirs (what an OpenAI `logprobs` field reports).
    pub fn logprobs(&self, token: TokenId, n: usize) -> (f32, Vec<(TokenId, f32)>) {
        let logits = self.context.get_logits_ith(-1);
        let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let log_z = max + logits.iter().map(|l| (l - max).exp()).sum::<f32>().ln();
        let chosen = logits
            .get(token as usize)
            .map_or(f32::NEG_INFINITY, |l| l - log_z);
        let mut best: Vec<(TokenId, f32)> = logits
            .iter()
            .enumerate()
            .map(|(i, &l)| (i as TokenId, l - log_z))
            .collect();
        let n = n.min(best.len());
        if n == 0 {
            return (chosen, Vec::new());
        }
        best.select_nth_unstable_by(n - 1, |a, b| b.1.total_cmp(&a.1));
        best.truncate(n);
        best.sort_by(|a, b| b.1.total_cmp(&a.1));
        (chosen, best)
    }

    /// Appends `tokens` as they are (teacher forcing) and returns, for every one but the last,
    /// the step after it and the probability this model gives the token that follows it in
    /// `tokens`: how likely it finds a text another model wrote, token by token, in one
    /// batched decode.
    pub fn read_along(
        &mut self,
        tokens: &[TokenId],
        sampler: &mut Sampler,
    ) -> Result<Vec<(Step, f32)>, EdgeError> {
        self.room_for(tokens.len())?;
        let hidden_state = self.hidden_state;
        let mut read = Vec::new();
        let mut row_of_tokens = 0;
        self.decode_cached(tokens, Outputs::All, |context, row| {
            let next = tokens.get(row_of_tokens + 1);
            row_of_tokens += 1;
            if let Some(&next) = next {
                let step = read_step(context, row, hidden_state, sampler)?;
                let p = probability(context.get_logits_ith(row), next, step.signals.top1_prob);
                read.push((step, p));
            }
            Ok(())
        })?;
        Ok(read)
    }

    /// Whether the context window holds `n` more tokens.
    fn room_for(&self, n: usize) -> Result<(), EdgeError> {
        if self.cached.len() + n > self.n_ctx {
            return Err(EdgeError::ContextFull {
                capacity: self.n_ctx,
            });
        }
        Ok(())
    }

    /// Decodes `tokens` after the cached ones (there must be room: [`Self::room_for`]), calling
    /// `read` with every requested output row, and records them as cached; on an error the
    /// cache is left as it was.
    fn decode_cached(
        &mut self,
        tokens: &[TokenId],
        outputs: Outputs,
        read: impl FnMut(&LlamaContext<'_>, i32) -> Result<(), EdgeError>,
    ) -> Result<(), EdgeError> {
        let start = self.cached.len();
        match decode_chunks(&mut self.context, start, tokens, outputs, read) {
            Ok(()) => {
                self.cached.extend_from_slice(tokens);
                Ok(())
            }
            Err(e) => {
                // Keep the cache and our record of it in step: drop what was decoded.
                let _ = self
                    .context
                    .clear_kv_cache_seq(Some(0), Some(start as u32), None);
                Err(e)
            }
        }
    }

    /// Decodes `head` in the prefill context and hands the KV state back (see `prefill`).
    fn prefill_elsewhere(&mut self, head: &[TokenId]) -> Result<(), EdgeError> {
        let prefill = self
            .prefill
            .as_mut()
            .expect("called only with a prefill context");
        let state = self
            .context
            .state_seq_get(0, LlamaStateSeqFlags::empty())
            .map_err(decode_error)?;
        prefill.clear_kv_cache();
        prefill.state_seq_set(&state, 0).map_err(decode_error)?;
        decode_chunks(prefill, self.cached.len(), head, Outputs::Last, |_, _| {
            Ok(())
        })?;
        let state = prefill
            .state_seq_get(0, LlamaStateSeqFlags::empty())
            .map_err(decode_error)?;
        self.context.clear_kv_cache();
        if let Err(e) = self.context.state_seq_set(&state, 0) {
            self.cached.clear();
            return Err(decode_error(e));
        }
        self.cached.extend_from_slice(head);
        Ok(())
    }
}

fn decode_error(e: impl std::fmt::Display) -> EdgeError {
    EdgeError::Decode(e.to_string())
}

/// Decodes `tokens` at positions `start..` in batches of the context's size, calling `read`
/// with each requested output row right after its batch (the next batch overwrites it).
fn decode_chunks(
    context: &mut LlamaContext<'_>,
    start: usize,
    tokens: &[TokenId],
    outputs: Outputs,
    mut read: impl FnMut(&LlamaContext<'_>, i32) -> Result<(), EdgeError>,
) -> Result<(), EdgeError> {
    let size = context.n_batch() as usize;
    let last_chunk = tokens.len().saturating_sub(1) / size;
    for (c, chunk) in tokens.chunks(size).enumerate() {
        let wanted = |i: usize| match outputs {
            Outputs::None => false,
            Outputs::Last => c == last_chunk && i + 1 == chunk.len(),
            Outputs::All => true,
        };
        let mut batch = LlamaBatch::new(chunk.len(), 1);
        for (i, &token) in chunk.iter().enumerate() {
            batch
                .add(
                    LlamaToken(token),
                    (start + c * size + i) as i32,
                    &[0],
                    wanted(i),
                )
                .map_err(decode_error)?;
        }
        context.decode(&mut batch).map_err(decode_error)?;
        for i in (0..chunk.len()).filter(|&i| wanted(i)) {
            read(context, i as i32)?;
        }
    }
    Ok(())
}

/// The edge's reading of one output row: sampled token, signals, hidden state.
fn read_step(
    context: &LlamaContext<'_>,
    row: i32,
    hidden_state: bool,
    sampler: &mut Sampler,
) -> Result<Step, EdgeError> {
    let logits = context.get_logits_ith(row);
    let reading = signals::read(logits)
        .ok_or_else(|| EdgeError::Decode("the model produced no usable logits".into()))?;
    let hidden = if hidden_state {
        let values = context
            .embeddings_ith(row)
            .map_err(|e| EdgeError::Decode(format!("no hidden state: {e}")))?;
        Some(values.to_vec())
    } else {
        None
    };
    Ok(Step {
        token: sampler.pick(logits, reading.argmax) as TokenId,
        signals: reading.signals,
        hidden,
    })
}

/// The probability a logits row gives `token`, from the row's top probability (its softmax
/// is already summed: this is one more pass for the maximum, not another sum).
fn probability(logits: &[f32], token: TokenId, top1_prob: f32) -> f32 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    logits
        .get(token as usize)
        .map_or(0.0, |&l| (l - max).exp() * top1_prob)
}

impl EdgeModel for LocalModel<'_> {
    fn name(&self) -> &str {
        &self.weights.name
    }

    fn tokenize(&self, text: &str, special: bool) -> Vec<TokenId> {
        self.weights.tokenize(text, special)
    }

    fn piece(&self, token: TokenId) -> Vec<u8> {
        self.weights
            .model
            .vocab()
            .token_to_piece(LlamaToken(token), true, None)
    }

    fn is_end_of_turn(&self, token: TokenId) -> bool {
        self.weights.model.vocab().is_eog(LlamaToken(token))
    }

    fn vocab_size(&self) -> usize {
        self.weights.vocab_size()
    }

    fn context_size(&self) -> usize {
        self.n_ctx
    }

    fn tokens(&self) -> &[TokenId] {
        &self.cached
    }

    fn extend(
        &mut self,
        tokens: &[TokenId],
        outputs: Outputs,
        sampler: &mut Sampler,
    ) -> Result<Vec<Step>, EdgeError> {
        self.room_for(tokens.len())?;
        if outputs != Outputs::All && self.prefill.is_some() && tokens.len() >= HANDOFF_MIN_TOKENS {
            if outputs == Outputs::None {
                self.prefill_elsewhere(tokens)?;
                return Ok(Vec::new());
            }
            let (head, last) = tokens.split_at(tokens.len() - 1);
            self.prefill_elsewhere(head)?;
            return self.extend(last, outputs, sampler);
        }
        let hidden_state = self.hidden_state;
        let mut steps = Vec::new();
        self.decode_cached(tokens, outputs, |context, row| {
            steps.push(read_step(context, row, hidden_state, sampler)?);
            Ok(())
        })?;
        Ok(steps)
    }

    fn truncate(&mut self, len: usize) {
        if len < self.cached.len() {
            // Positions must stay consecutive: remove the tail before decoding again.
            let _ = self
                .context
                .clear_kv_cache_seq(Some(0), Some(len as u32), None);
            self.cached.truncate(len);
        }
    }
}
