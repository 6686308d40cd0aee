//! The edge's own continuation, written while a cloud request is in flight.
//!
//! A routed position used to stop the edge until the cloud answered: a round trip plus the
//! server's time per request, which over a real network is most of a routed reply's wall
//! time. Instead the edge goes on decoding its own tokens into its KV cache (the draft) while
//! it waits. The draft is exactly what the loop would decode next if the cloud agreed with the
//! edge, so when the cloud's tokens come, the draft is kept as far as it agrees with them and
//! rolled back from the first difference; later positions the reply keeps from the edge take
//! their steps from it too. Nothing is decoded twice, and the loop decides every position as
//! it would without a draft.
//!
//! The draft is never shown. The user sees confirmed tokens only, so nothing on screen is ever
//! taken back; the time the draft saves shows as the tokens after a request arriving at once.

use crate::edge::{EdgeError, EdgeModel, Step, TokenId};
use crate::sampling::Sampler;
use std::collections::VecDeque;

/// The most tokens drafted ahead: past a few round trips of decoding, a draft is rarely
/// still in agreement with the cloud, and every drafted token is work that may be thrown away.
const MAX_DRAFT: usize = 16;

/// Tokens the edge decoded ahead of the reply: they sit at the end of the edge's cache,
/// after the confirmed tokens.
#[derive(Default)]
pub(super) struct Draft {
    /// `steps[i]` is the edge's step after the `i`-th drafted token.
    steps: VecDeque<Step>,
}

impl Draft {
    /// How many drafted tokens the edge's cache holds after the confirmed ones.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// The edge's step after the `i`-th drafted token.
    pub fn step(&self, i: usize) -> Option<&Step> {
        self.steps.get(i)
    }

    /// The drafted tokens, in order.
    pub fn tokens<'e>(&self, edge: &'e dyn EdgeModel) -> &'e [TokenId] {
        let cached = edge.tokens();
        &cached[cached.len() - self.steps.len()..]
    }

    /// Drafts one more token after `confirmed` (the step the reply stands at), within `room`
    /// tokens of the reply. Returns whether it drafted; `false` means the draft is as long as
    /// it may grow (the edge ended its turn, the limit, the reply or the context is full).
    pub fn grow(
        &mut self,
        edge: &mut dyn EdgeModel,
        sampler: &mut Sampler,
        confirmed: &Step,
        room: usize,
    ) -> Result<bool, EdgeError> {
        let token = self.steps.back().unwrap_or(confirmed).token;
        let full = self.steps.len() >= MAX_DRAFT.min(room)
            || edge.tokens().len() + 2 >= edge.context_size();
        if full || edge.is_end_of_turn(token) {
            return Ok(false);
        }
        self.steps.push_back(edge.step_after(token, sampler)?);
        Ok(true)
    }

    /// The steps after the longest start of `tokens` the draft agrees with, which become
    /// confirmed; the rest of the draft, from its first difference from `tokens` on, is rolled
    /// back (so fewer steps than `tokens` means the caller decodes the others).
    pub fn take(&mut self, edge: &mut dyn EdgeModel, tokens: &[TokenId]) -> Vec<Step> {
        let agreed = self
            .tokens(edge)
            .iter()
            .zip(tokens)
            .take_while(|(a, b)| a == b)
            .count();
        let steps = self.steps.drain(..agreed).collect();
        if agreed < tokens.len() {
            self.discard(edge);
        }
        steps
    }

    /// Rolls the edge's cache back to the confirmed tokens.
    pub fn discard(&mut self, edge: &mut dyn EdgeModel) {
        if !self.steps.is_empty() {
            let confirmed = edge.tokens().len() - self.steps.len();
            edge.truncate(confirmed);
            self.steps.clear();
        }
    }
}
