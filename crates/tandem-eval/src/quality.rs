//! The quality proxy for open prompts, which have no answer to check: how likely the cloud
//! model (the judge) finds a reply, as its mean log-probability per token.
//!
//! A writing task or an instruction has no "correct", so routing is measured by how close a
//! reply stays to what the cloud would write: the judge reads the reply back in one
//! teacher-forced pass (as [`crate::judge`] does for labels) and the mean of `ln p(token)`
//! over the reply's tokens is its score. Cloud-only scores near the top by construction (the
//! judge's own greedy reply), edge-only lower; the share of that gap a router recovers is
//! the figure, read like accuracy's. The reply is tokenized with the judge's own vocabulary,
//! so any judge GGUF scores any edge's replies. Its end of turn is read too when the reply
//! ended by itself: a reply that stops halfway through an answer pays for it, one cut off at
//! the length limit is scored on its text alone.

use crate::judge;
use tandem_core::edge::TokenId;
use tandem_core::engine::ReplyError;
use tandem_core::local::{EdgeWeights, LocalModel};
use tandem_core::message::Message;
use tandem_core::sampling::{Sampler, SamplingParams};

/// The model that scores replies, loaded in-process.
pub struct Judge<'w> {
    /// Its name, recorded with the results.
    pub name: String,
    weights: &'w EdgeWeights,
    session: LocalModel<'w>,
    sampler: Sampler,
}

impl<'w> Judge<'w> {
    /// A judge reading with `session`, a session on `weights`.
    pub fn new(name: &str, weights: &'w EdgeWeights, session: LocalModel<'w>) -> Self {
        Self {
            name: name.to_owned(),
            weights,
            session,
            sampler: Sampler::new(SamplingParams::default()),
        }
    }

    /// The judge's mean log-probability per token of `reply` to the user message `user`
    /// (with its end of turn when `ended`). A reply of no tokens at all scores 0.
    pub fn mean_log_prob(
        &mut self,
        user: &str,
        reply: &str,
        ended: bool,
    ) -> Result<f64, ReplyError> {
        let chat = self.weights.chat_prompt(&[Message::user(user)])?;
        let prompt = self.weights.tokenize(&chat, true);
        let mut tokens: Vec<TokenId> = self.weights.tokenize(reply, false);
        if ended {
            tokens.push(self.weights.end_of_turn());
        }
        if tokens.is_empty() {
            return Ok(0.0);
        }
        let read = judge::read_back(&mut self.session, &mut self.sampler, &prompt, &tokens)?;
        let sum: f64 = read
            .iter()
            .map(|&(_, p)| f64::from(p.max(f32::MIN_POSITIVE)).ln())
            .sum();
        Ok(sum / read.len() as f64)
    }
}
