//! Asking ahead: the next request sent from the draft, before the reply comes to it.
//!
//! A request goes when the reply reaches its position, and the reply reaches it only once
//! the answer before it is in, so requests chain: a sentence that routes three positions
//! waits three round trips one after another, even where every answer agrees with what the
//! edge drafted meanwhile. While one request is away the draft runs ahead of the reply;
//! where it comes to a position the loop would route were the cloud to agree with the draft
//! so far, that position's request goes at once, its prompt the draft. If the reply gets
//! there on exactly those tokens and routes the position with the same span, the answer is
//! on its way or already in. Otherwise (the cloud disagreed and the draft was rolled back,
//! or the loop decided otherwise) the request was wasted: it is booked, billed and listed as
//! every request is, and its answer never reaches the reply. An answer is only ever used for
//! the very prompt and span it was asked for, so a reply is the same with or without asking
//! ahead; what asking ahead changes is when answers come and how many requests are paid for.

use crate::budget::{CloudBudget, ReplyBudget, RouteDecision, SpanToken};
use crate::cloud::InFlight;
use crate::edge::TokenId;
use crate::event::TokenSource;
use crate::spend::Reservation;
use std::time::Instant;

/// A request on its way, with what it may cost.
pub(super) struct Sent {
    pub in_flight: Box<dyn InFlight>,
    /// When it left.
    pub at: Instant,
    /// The text it carried, for the user's record of what left the machine.
    pub text: String,
    /// Its worst case in today's ledger.
    pub booked: Option<Reservation>,
    /// What it costs at most: the whole prompt re-sent and the whole span returned.
    pub worst_case: f64,
    /// Tokens of its prompt.
    pub prompt_len: u64,
}

/// A request sent for a position the reply has not reached.
pub(super) struct Ahead {
    /// The tokens its prompt ended with: the reply's, then the draft's.
    pub prompt: Vec<TokenId>,
    /// The span it asked for.
    pub max_tokens: u32,
    pub sent: Sent,
}

impl Ahead {
    /// Whether the reply, standing after `confirmed` and asking for `max_tokens`, would send
    /// this very request.
    pub fn is_for(&self, confirmed: &[TokenId], max_tokens: u32) -> bool {
        self.max_tokens == max_tokens && self.prompt == confirmed
    }

    /// Whether the reply, standing after `confirmed`, may still come to its position.
    pub fn is_ahead_of(&self, confirmed: &[TokenId]) -> bool {
        self.prompt.len() > confirmed.len() && self.prompt.starts_with(confirmed)
    }
}

/// The loop's decisions over a draft, made as they would be were the cloud to agree with it:
/// a copy of the reply's budget, taken at a routed position whose request asked for `asked`
/// tokens and the room paid `paid` of, and moved along the draft position by position.
pub(super) struct Lookahead {
    controller: ReplyBudget,
    paid: u32,
    asked: u32,
    /// The next draft position to decide (1: the one after the routed position).
    next: usize,
}

/// What the loop would do at the draft's positions.
pub(super) struct Course<'a> {
    /// The budget in force.
    pub budget: &'a CloudBudget,
    /// Tokens a request may ask for.
    pub span: u32,
    /// Tokens the reply may still write from the routed position on.
    pub room: usize,
}

impl Lookahead {
    /// Starts at a routed position, whose token counts as the cloud's.
    pub fn new(controller: &ReplyBudget, paid: u32, asked: u32) -> Self {
        let mut controller = controller.clone();
        controller.record(0, 1, 0.0);
        Self {
            controller,
            paid,
            asked,
            next: 1,
        }
    }

    /// The first draft position after those already decided that the loop would route:
    /// its offset from the routed position (the request's prompt holds that many drafted
    /// tokens) and the span it would ask for. `score(offset)` is the router's score at the
    /// position `offset` tokens past the routed one, if the draft reaches it.
    pub fn next_routed(
        &mut self,
        score: impl Fn(usize) -> Option<f32>,
        course: &Course<'_>,
    ) -> Option<(usize, u32)> {
        while let Some(score) = score(self.next) {
            let offset = self.next;
            self.next += 1;
            if offset < self.asked as usize {
                // Within the answer: the cloud's token, agreeing with the draft, so the span
                // goes on through it, the cloud's where paid for and wanted.
                let source = self.controller.span_token_source(SpanToken {
                    score,
                    edge_agrees: true,
                    continues_word: false,
                    paid: offset < self.paid as usize,
                    unchanged: true,
                    edge_ends: false,
                });
                let cloud = u32::from(source == Some(TokenSource::Cloud));
                self.controller.record(1 - cloud, cloud, 0.0);
                continue;
            }
            let remaining = course.room.saturating_sub(offset) as u32;
            if remaining == 0 {
                self.next = usize::MAX;
                return None;
            }
            let span = course.span.min(remaining);
            match self.controller.decide(course.budget, score, span) {
                RouteDecision::Cloud { ask, .. } => {
                    self.next = usize::MAX;
                    return Some((offset, ask));
                }
                RouteDecision::Edge => self.controller.record(1, 0, 0.0),
            }
        }
        None
    }
}
