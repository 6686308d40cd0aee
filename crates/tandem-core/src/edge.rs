//! What the collaborative loop needs from the local (edge) model.
//!
//! The loop is written against this trait, not against llama.cpp, so it runs the same on the
//! real engine ([`crate::local`]) and on a scripted model in tests; and the router never sees
//! a llama type.

use crate::router::Features;
use crate::sampling::Sampler;
use crate::signals::Signals;

/// A token id in the edge model's vocabulary.
pub type TokenId = i32;

/// The edge model's reading of one position: what it would emit next and how sure it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The token the sampler picked (the argmax when decoding greedily).
    pub token: TokenId,
    /// Confidence of the distribution at this position.
    pub signals: Signals,
    /// Last-layer hidden state, when the engine computes it.
    pub hidden: Option<Vec<f32>>,
}

impl Step {
    /// The router's view of this position, the `position`-th token of the reply.
    pub fn features(&self, position: u32) -> Features<'_> {
        Features {
            signals: self.signals,
            hidden: self.hidden.as_deref(),
            position,
        }
    }
}

/// Which positions of a decoded batch need a [`Step`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outputs {
    /// None (a prompt's head, whose last token is then decoded alone).
    None,
    /// Only the last one.
    Last,
    /// Every one (cloud spans, whose positions are all checked).
    All,
}

/// Why the edge model could not decode.
#[derive(Debug, thiserror::Error)]
pub enum EdgeError {
    /// The context window cannot hold more tokens.
    #[error("the context window is full ({capacity} tokens)")]
    ContextFull {
        /// Context size in tokens.
        capacity: usize,
    },
    /// llama.cpp refused the batch.
    #[error("the edge model failed to decode: {0}")]
    Decode(String),
}

/// A local model with a KV cache that the loop extends, rolls back and reads.
pub trait EdgeModel {
    /// A short name for events and logs.
    fn name(&self) -> &str;
    /// Tokenizes text; `special` parses control tokens such as `<|im_start|>`.
    fn tokenize(&self, text: &str, special: bool) -> Vec<TokenId>;
    /// The bytes a token stands for (control tokens rendered as their text).
    fn piece(&self, token: TokenId) -> Vec<u8>;
    /// Whether the token ends the model's turn.
    fn is_end_of_turn(&self, token: TokenId) -> bool;
    /// How many token ids the model knows (valid ids are `0..vocab_size`).
    fn vocab_size(&self) -> usize;
    /// Context window size in tokens.
    fn context_size(&self) -> usize;
    /// The tokens the KV cache holds, in order.
    fn tokens(&self) -> &[TokenId];
    /// Appends tokens to the cache and reads the requested positions.
    fn extend(
        &mut self,
        tokens: &[TokenId],
        outputs: Outputs,
        sampler: &mut Sampler,
    ) -> Result<Vec<Step>, EdgeError>;
    /// Drops every cached token from position `len` on.
    fn truncate(&mut self, len: usize);

    /// Appends `tokens` one at a time and reads every position, as a reply is decoded.
    /// llama.cpp's numbers depend on how many tokens a batch holds (on the CPU, Q4_K weights
    /// take another kernel from four tokens on: the 0.5B edge's top-1 probability 0.719
    /// alone, 0.712 in a batch of four), enough to move a router score across its bar; read
    /// this way, a position looks the same to the router however the loop came to it (a
    /// draft, a cloud span, a training label).
    fn extend_each(
        &mut self,
        tokens: &[TokenId],
        sampler: &mut Sampler,
    ) -> Result<Vec<Step>, EdgeError> {
        tokens
            .iter()
            .map(|&token| self.step_after(token, sampler))
            .collect()
    }

    /// Appends one token and reads the step after it: how a reply, a draft and a prompt's
    /// last token are decoded.
    fn step_after(&mut self, token: TokenId, sampler: &mut Sampler) -> Result<Step, EdgeError> {
        self.extend(&[token], Outputs::Last, sampler)?
            .pop()
            .ok_or_else(|| EdgeError::Decode("no output row".into()))
    }

    /// Makes the cache hold exactly `prompt`, decoding only what differs from what is
    /// cached (so a chat never re-reads its history). Returns the step after the prompt and
    /// how many tokens were decoded. The prompt's last token is decoded alone, after the
    /// rest: read at the end of a batch, its numbers would depend on how much of the prompt
    /// was cached (a new chat or a regenerated reply), enough to move the reply's first
    /// router score (see [`EdgeModel::extend_each`]).
    fn sync(
        &mut self,
        prompt: &[TokenId],
        sampler: &mut Sampler,
    ) -> Result<(Step, usize), EdgeError> {
        let cached = self.tokens();
        let mut common = cached
            .iter()
            .zip(prompt)
            .take_while(|(a, b)| a == b)
            .count();
        // The last prompt token is always decoded again: its logits are the next step.
        common = common.min(prompt.len().saturating_sub(1));
        self.truncate(common);
        let suffix = &prompt[common..];
        let Some((last, head)) = suffix.split_last() else {
            return Err(EdgeError::Decode("empty prompt".into()));
        };
        if !head.is_empty() {
            self.extend(head, Outputs::None, sampler)?;
        }
        Ok((self.step_after(*last, sampler)?, suffix.len()))
    }

    /// Text of a token for display (lossy for a token that ends mid-character).
    fn piece_text(&self, token: TokenId) -> String {
        String::from_utf8_lossy(&self.piece(token)).into_owned()
    }

    /// The cached tokens rendered as text, control tokens included (what a cloud that does
    /// not share the vocabulary is sent).
    fn text_of(&self, tokens: &[TokenId]) -> String {
        let bytes: Vec<u8> = tokens.iter().flat_map(|&t| self.piece(t)).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }
}
