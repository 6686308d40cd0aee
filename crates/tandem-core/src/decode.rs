//! The collaborative loop: the edge model decodes, the router scores every position, the
//! budget decides, and the cloud supplies the tokens that matter.
//!
//! Every token is shown as soon as it is chosen, then fed into the edge's KV cache, one at a
//! time (a reply does not depend on how its tokens were batched), so the edge continues from
//! exactly the text the user sees. A span of several cloud tokens is kept only while
//! the edge would have routed those positions too, already agrees with the cloud, or would
//! otherwise finish a word the cloud began in its own way; the rest is never decoded. A kept
//! token the router did not want and the edge would have written
//! itself is the edge's token: it changes nothing the user reads, so it is shown as local and
//! does not spend the budget, which stays for the positions the router does want (in chat,
//! most span tokens past the first are such agreements). A cloud failure never ends a reply:
//! the edge token is used and the user gets a notice. While a request is in flight the edge
//! drafts its own continuation ([`draft`]), so a round trip costs the reply only what the
//! cloud changes.

use crate::budget::{LiveBudget, ReplyBudget, RouteDecision, SpanToken};
use crate::cloud::{
    Arrival, Cloud, CloudError, CloudReply, CloudRequest, InFlight, STOP_POLL, VOCAB_PROBE,
};
use crate::edge::{EdgeError, EdgeModel, Step, TokenId};
use crate::event::{Event, EventSink, FinishReason, NoticeKind, Timings, TokenSource, Usage};
use crate::message::Message;
use crate::router::Router;
use crate::sampling::{Sampler, SamplingParams};
use crate::spend::{Refusal, Reservation, SpendLedger};
use crate::utf8_stream::Utf8Stream;
use ahead::{Ahead, Course, Lookahead, Sent};
use draft::Draft;
use std::time::{Duration, Instant};

mod ahead;
mod draft;

/// Consecutive cloud failures after which a reply stops asking.
const MAX_CLOUD_FAILURES: u32 = 2;

/// Per-reply settings.
#[derive(Debug, Clone, Copy)]
pub struct DecodeOptions {
    /// Maximum tokens in the reply.
    pub max_tokens: u32,
    /// Tokens asked for per cloud request.
    pub span: u32,
    /// How the edge picks its tokens.
    pub sampling: SamplingParams,
    /// Whether the edge drafts its own continuation while a cloud request is in flight
    /// (off: it waits, as the loop did before drafts; the benchmark's baseline).
    pub overlap: bool,
    /// Whether a request goes as soon as the draft comes to a position the reply would
    /// route ([`ahead`]; needs `overlap`).
    pub ask_ahead: bool,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        Self {
            max_tokens: 256,
            span: 4,
            sampling: SamplingParams::default(),
            overlap: true,
            ask_ahead: true,
        }
    }
}

/// What the loop works with.
pub struct Collaboration<'a> {
    /// The local model.
    pub edge: &'a mut dyn EdgeModel,
    /// The cloud, if one is configured.
    pub cloud: Option<&'a mut dyn Cloud>,
    /// Scores positions.
    pub router: &'a dyn Router,
    /// Read before every decision, so changes apply mid-reply.
    pub budget: &'a LiveBudget,
    /// The conversation as messages, for chat-mode clouds (may be empty otherwise).
    pub messages: &'a [Message],
    /// Today's spend, where every request is booked before it is sent and the daily cap is
    /// kept (`None`: nothing is booked and no daily cap applies, as in an evaluation).
    pub spend: Option<&'a SpendLedger>,
}

/// Generates one reply to `prompt` (already templated and tokenized), pushing events into
/// `sink`. Returns the usage also sent in the `finished` event. Only an edge failure is an
/// error; everything else ends in a `finished` event. The reply spends from and is booked
/// to the budget's account, however it ends ([`LiveBudget::settle`]).
pub fn generate(
    c: Collaboration<'_>,
    prompt: &[TokenId],
    options: &DecodeOptions,
    sink: &mut dyn EventSink,
) -> Result<Usage, EdgeError> {
    let started = Instant::now();
    let mut controller = c.budget.open_reply(c.router);
    let mut reply = Reply {
        edge: c.edge,
        cloud: c.cloud,
        router: c.router,
        budget: c.budget,
        messages: c.messages,
        spend: c.spend,
        reply_start: prompt.len(),
        controller: &mut controller,
        sampler: Sampler::new(options.sampling),
        text: Utf8Stream::default(),
        usage: Usage::default(),
        timings: Timings::default(),
        cloud_failures: 0,
        told_spend_capped: false,
        told_spend_not_saved: false,
        told_slow: false,
        as_ids: false,
        draft: Draft::default(),
        ask_ahead: options.overlap && options.ask_ahead,
        ahead: None,
        wasted: Vec::new(),
    };
    let keep_going = sink.emit(Event::Started {
        edge_model: reply.edge.name().to_owned(),
        cloud: reply.cloud.as_ref().map(|c| c.endpoint().to_owned()),
        router: reply.router.name().to_owned(),
        prompt_tokens: prompt.len() as u32,
    });
    let reason = if keep_going {
        // A reply that opens with the cloud already past the wait limit says so first: it
        // may ask the cloud nothing, and the user should know why.
        reply.tell_slow(sink);
        let reason = reply.run(prompt, options, sink);
        // What the edge drafted past the end of the reply is not part of it.
        reply.draft.discard(reply.edge);
        reason
    } else {
        Ok(FinishReason::Cancelled)
    };
    // Requests asked ahead and not used were still sent: they are paid for and listed.
    reply.settle_wasted(sink);
    // The account books the reply's tokens however it ended.
    let session = reply.budget.settle(reply.controller);
    let reason = reason?;
    reply.timings.total_ms = started.elapsed().as_millis() as u64;
    reply.usage.est_cost_usd = reply.controller.spent_usd();
    let target = reply.target_share();
    reply.usage.target_share = Some(target);
    reply.usage.session_share = (target > 0.0).then_some(session);
    sink.emit(Event::Finished {
        reason,
        usage: reply.usage,
        timings: reply.timings,
    });
    Ok(reply.usage)
}

struct Reply<'a, 'b> {
    edge: &'a mut dyn EdgeModel,
    cloud: Option<&'a mut dyn Cloud>,
    router: &'a dyn Router,
    budget: &'a LiveBudget,
    messages: &'a [Message],
    spend: Option<&'a SpendLedger>,
    /// Where the reply starts in the edge's tokens.
    reply_start: usize,
    controller: &'b mut ReplyBudget,
    sampler: Sampler,
    text: Utf8Stream,
    usage: Usage,
    timings: Timings,
    cloud_failures: u32,
    /// Whether the user was told that the spend cap keeps the cloud out (once per reply).
    told_spend_capped: bool,
    /// Whether the user was told that spend could not be recorded (once per reply).
    told_spend_not_saved: bool,
    /// Whether the user was told that the cloud is past the wait limit (once per reply).
    told_slow: bool,
    as_ids: bool,
    /// Tokens the edge decoded ahead while waiting for the cloud, after the reply's own.
    draft: Draft,
    /// Whether requests go as soon as the draft comes to their position.
    ask_ahead: bool,
    /// The request sent for a position the reply has not reached, if any.
    ahead: Option<Ahead>,
    /// Requests asked ahead whose answers the reply did not use.
    wasted: Vec<Ahead>,
}

/// One token ready to be shown.
struct Emitted {
    id: TokenId,
    source: TokenSource,
    score: f32,
    edge_candidate: Option<TokenId>,
    request_ms: Option<u64>,
}

impl Reply<'_, '_> {
    /// The share of the reply the cloud may write now: 0 when there is no cloud or the
    /// budget keeps it off.
    fn target_share(&self) -> f32 {
        let budget = self.budget.get();
        if self.cloud.is_some() && budget.allows_cloud() {
            budget.max_share.get()
        } else {
            0.0
        }
    }

    /// How many of the edge's cached tokens are the prompt and the reply (the rest is draft).
    fn confirmed_len(&self) -> usize {
        self.edge.tokens().len() - self.draft.len()
    }

    fn run(
        &mut self,
        prompt: &[TokenId],
        options: &DecodeOptions,
        sink: &mut dyn EventSink,
    ) -> Result<FinishReason, EdgeError> {
        let prefill = Instant::now();
        let (mut step, decoded) = self.edge.sync(prompt, &mut self.sampler)?;
        self.timings.prefill_ms = prefill.elapsed().as_millis() as u64;
        self.timings.prefill_tokens = decoded as u32;
        if let Some(cloud) = self.cloud.as_deref_mut() {
            if self.budget.get().allows_cloud() {
                let probe = self.edge.tokenize(VOCAB_PROBE, false);
                match cloud.shares_vocab(&probe) {
                    Ok(shares) => self.as_ids = shares,
                    Err(error) => self.cloud_failed(&error, sink),
                }
            }
        }
        let capacity = self.edge.context_size();
        let mut generated = 0u32;
        while generated < options.max_tokens {
            if self.confirmed_len() + options.span as usize + 1 >= capacity {
                sink.emit(Event::Notice {
                    kind: NoticeKind::ContextFull,
                    message: format!("the conversation filled the {capacity}-token context window"),
                });
                return Ok(FinishReason::ContextFull);
            }
            let position = (self.confirmed_len() - self.reply_start) as u32;
            let score = self.router.score(&step.features(position));
            let remaining = options.max_tokens - generated;
            let decision = if self.cloud.is_some() && self.cloud_failures < MAX_CLOUD_FAILURES {
                self.controller
                    .decide(&self.budget.get(), score, options.span.min(remaining))
            } else {
                RouteDecision::Edge
            };
            let outcome = match decision {
                RouteDecision::Cloud { max_tokens, ask } => match self.request(ask, sink) {
                    Ok(sent) => {
                        let wait = Wait {
                            confirmed: &step,
                            room: remaining as usize,
                            draft: options.overlap,
                            paid: max_tokens,
                            asked: ask,
                            span: options.span,
                        };
                        self.ask_cloud(wait, score, sent, sink)?
                    }
                    Err(refusal) => {
                        self.tell_spend_capped(&refusal, sink);
                        CloudOutcome::UseEdge
                    }
                },
                RouteDecision::Edge => {
                    self.drop_passed_ahead();
                    CloudOutcome::UseEdge
                }
            };
            let (shown, next) = match outcome {
                CloudOutcome::Continued { shown, next } => (shown, next),
                CloudOutcome::EndedReply => return Ok(FinishReason::Stop),
                CloudOutcome::Stopped => return Ok(FinishReason::Cancelled),
                CloudOutcome::UseEdge => {
                    if self.edge.is_end_of_turn(step.token) {
                        return Ok(FinishReason::Stop);
                    }
                    let token = Emitted {
                        id: step.token,
                        source: TokenSource::Edge,
                        score,
                        edge_candidate: None,
                        request_ms: None,
                    };
                    // Shown as soon as it is chosen; decoding it is for the next position.
                    if !self.show(token, 0.0, sink) {
                        return Ok(FinishReason::Cancelled);
                    }
                    (1, self.decode(step.token)?)
                }
            };
            generated += shown;
            step = next;
        }
        Ok(FinishReason::Length)
    }

    /// The edge's step after `token`, taken from the draft where the draft wrote the same
    /// token, decoded otherwise, as the draft decodes it, so a reply is the same whether the
    /// cloud answered before the draft was written or after ([`EdgeModel::step_after`]).
    fn decode(&mut self, token: TokenId) -> Result<Step, EdgeError> {
        if let Some(step) = self.draft.take(&mut *self.edge, &[token]).pop() {
            return Ok(step);
        }
        self.edge.step_after(token, &mut self.sampler)
    }

    /// Waits for `in_flight`, drafting the edge's continuation meanwhile and asking ahead
    /// where the draft comes to a position the reply would route; `None` when the user
    /// stopped the reply.
    fn wait(
        &mut self,
        in_flight: &mut dyn InFlight,
        wait: Wait<'_>,
        sink: &mut dyn EventSink,
    ) -> Result<Option<Arrival>, EdgeError> {
        let mut drafting = wait.draft;
        let mut lookahead = (drafting && self.may_ask_ahead())
            .then(|| Lookahead::new(self.controller, wait.paid, wait.asked));
        loop {
            let patience = if drafting { Duration::ZERO } else { STOP_POLL };
            if let Some(arrival) = in_flight.poll(patience) {
                return Ok(Some(arrival));
            }
            if sink.stop_requested() {
                return Ok(None);
            }
            if drafting {
                let edge = &mut *self.edge;
                drafting = self
                    .draft
                    .grow(edge, &mut self.sampler, wait.confirmed, wait.room)?;
                if let Some(found) = lookahead.as_mut().and_then(|l| self.look(l, &wait)) {
                    self.ask_ahead(found, wait.span, sink);
                    lookahead = None;
                }
            }
        }
    }

    /// Whether the reply may send a request for a position it has not reached: asking ahead
    /// is on, no such request is out, and the cloud has not just failed.
    fn may_ask_ahead(&self) -> bool {
        self.ask_ahead && self.ahead.is_none() && self.cloud_failures == 0
    }

    /// The next drafted position the reply would route, were the cloud to agree with the
    /// draft: how many drafted tokens its prompt holds and the span it would ask for.
    fn look(&self, lookahead: &mut Lookahead, wait: &Wait<'_>) -> Option<(usize, u32)> {
        let budget = self.budget.get();
        let course = Course {
            budget: &budget,
            span: wait.span,
            room: wait.room,
        };
        let position = self.confirmed_len() - self.reply_start;
        let score = |offset: usize| {
            let step = self.draft.step(offset.checked_sub(1)?)?;
            Some(
                self.router
                    .score(&step.features((position + offset) as u32)),
            )
        };
        lookahead.next_routed(score, &course)
    }

    /// Sends the request for the position `drafted` tokens into the draft, asking for
    /// `max_tokens`, unless the context window or the daily cap would stop the reply there.
    fn ask_ahead(
        &mut self,
        (drafted, max_tokens): (usize, u32),
        span: u32,
        sink: &mut dyn EventSink,
    ) {
        let prompt_len = self.confirmed_len() + drafted;
        if prompt_len + span as usize + 1 >= self.edge.context_size() {
            return;
        }
        let Ok(booked) = self.book(prompt_len, max_tokens, sink) else {
            return;
        };
        let sent = self.send(prompt_len, max_tokens, booked, sink);
        self.ahead = Some(Ahead {
            prompt: self.edge.tokens()[..prompt_len].to_vec(),
            max_tokens,
            sent,
        });
    }

    /// The request for the position the reply stands at, asking for `max_tokens`: the one
    /// asked ahead where it is this very request, else sent now (its worst case booked first).
    fn request(&mut self, max_tokens: u32, sink: &mut dyn EventSink) -> Result<Sent, Refusal> {
        let confirmed_len = self.confirmed_len();
        if let Some(ahead) = self.ahead.take() {
            let confirmed = &self.edge.tokens()[..confirmed_len];
            if ahead.is_for(confirmed, max_tokens) {
                return Ok(ahead.sent);
            }
            self.keep_or_waste(ahead);
        }
        let booked = self.book(confirmed_len, max_tokens, sink)?;
        Ok(self.send(confirmed_len, max_tokens, booked, sink))
    }

    /// Drops the request asked ahead once the reply has passed its position or left the
    /// tokens it was asked on (the loop decided otherwise, or the cloud disagreed with the
    /// draft it was asked from).
    fn drop_passed_ahead(&mut self) {
        if let Some(ahead) = self.ahead.take() {
            self.keep_or_waste(ahead);
        }
    }

    fn keep_or_waste(&mut self, ahead: Ahead) {
        let confirmed = &self.edge.tokens()[..self.confirmed_len()];
        if ahead.is_ahead_of(confirmed) {
            self.ahead = Some(ahead);
        } else {
            self.wasted.push(ahead);
        }
    }

    /// Books, bills and lists the requests asked ahead that the reply did not use: what
    /// each billed where its answer is in, its worst case where it is still away.
    fn settle_wasted(&mut self, sink: &mut dyn EventSink) {
        self.wasted.extend(self.ahead.take());
        self.usage.cloud_requests_unused = self.wasted.len() as u32;
        for mut ahead in std::mem::take(&mut self.wasted) {
            let sent = &mut ahead.sent;
            let arrival = sent.in_flight.poll(Duration::ZERO);
            let ms = arrival.as_ref().map_or_else(Instant::now, |a| a.at);
            let ms = ms.saturating_duration_since(sent.at).as_millis() as u64;
            let (billed, answer) = match arrival.map(|a| a.result) {
                Some(Ok(reply)) => {
                    let answer = self.read_answer(reply, ahead.max_tokens, sent.prompt_len);
                    (Some(answer.cost), Some(answer))
                }
                Some(Err(error)) if !error.may_be_billed() => (Some(0.0), None),
                _ => (None, None),
            };
            self.controller
                .record(0, 0, billed.unwrap_or(sent.worst_case));
            self.settle(sent.booked.take(), billed, sink);
            sink.emit(Event::CloudRequest {
                sent: std::mem::take(&mut sent.text),
                ok: answer.is_some(),
                ms,
                prompt_tokens: answer.as_ref().map_or(0, |a| a.prompt_tokens),
                completion_tokens: answer.as_ref().map_or(0, |a| a.completion_tokens),
                cost_usd: billed.unwrap_or(sent.worst_case),
                unused: true,
            });
        }
    }

    /// What a request for `max_tokens` after `prompt_len` tokens costs at most: the whole
    /// prompt re-sent, none of it cached, and the whole span returned, at the user's prices.
    fn worst_case_usd(&self, prompt_len: usize, max_tokens: u32) -> f64 {
        let prices = self.budget.get().prices;
        prices.cost(prompt_len as u64, 0, u64::from(max_tokens))
    }

    /// Books a request's worst case in today's ledger before it is sent. Refused when the
    /// daily cap leaves no room, or when the ledger cannot be written while a cap is set;
    /// without a cap an unwritable ledger only costs the record (the user is told).
    fn book(
        &mut self,
        prompt_len: usize,
        max_tokens: u32,
        sink: &mut dyn EventSink,
    ) -> Result<Option<Reservation>, Refusal> {
        let Some(ledger) = self.spend else {
            return Ok(None);
        };
        let cap = self.budget.get().daily_spend_cap_usd;
        match ledger.reserve(self.worst_case_usd(prompt_len, max_tokens), cap) {
            Ok(booked) => Ok(Some(booked)),
            Err(Refusal::Unwritable(e)) if cap.is_none() => {
                self.tell_spend_not_saved(&e, sink);
                Ok(None)
            }
            Err(refusal) => Err(refusal),
        }
    }

    /// Settles a booked request at what it billed; `None` keeps the worst case booked (the
    /// provider may bill a request it received and did not answer in full).
    fn settle(
        &mut self,
        booked: Option<Reservation>,
        billed_usd: Option<f64>,
        sink: &mut dyn EventSink,
    ) {
        let Some(booked) = booked else { return };
        let billed = billed_usd.unwrap_or(booked.usd());
        if let Err(e) = booked.settle(billed) {
            self.tell_spend_not_saved(&e, sink);
        }
    }

    /// Says once per reply that the cap keeps the cloud out.
    fn tell_spend_capped(&mut self, refusal: &Refusal, sink: &mut dyn EventSink) {
        if std::mem::replace(&mut self.told_spend_capped, true) {
            return;
        }
        let cap = self.budget.get().daily_spend_cap_usd.unwrap_or_default();
        let message = match refusal {
            Refusal::CapReached => format!(
                "today's cloud spend reached its cap (${cap}); the edge model writes the rest until the cap is raised or the day ends (UTC)"
            ),
            Refusal::Unwritable(e) => format!(
                "could not record today's cloud spend ({e}), so the daily cap (${cap}) cannot be kept; the edge model writes the rest until it can be recorded"
            ),
        };
        sink.emit(Event::Notice {
            kind: NoticeKind::SpendCapReached,
            message,
        });
    }

    /// Says once per reply that the cloud is past the user's wait limit, so the reply asks
    /// it only for its most uncertain positions.
    fn tell_slow(&mut self, sink: &mut dyn EventSink) {
        let budget = self.budget.get();
        let (Some(wait), Some(limit)) = (self.controller.slow_wait(&budget), budget.max_wait_ms)
        else {
            return;
        };
        if self.cloud.is_none() || !budget.allows_cloud() {
            return;
        }
        if !std::mem::replace(&mut self.told_slow, true) {
            sink.emit(Event::Notice {
                kind: NoticeKind::CloudSlow,
                message: format!(
                    "the cloud takes {wait:.0} ms per request lately, past your {limit} ms limit: this reply asks it only for its most uncertain tokens"
                ),
            });
        }
    }

    /// Says once per reply that spend could not be recorded.
    fn tell_spend_not_saved(&mut self, error: &std::io::Error, sink: &mut dyn EventSink) {
        if !std::mem::replace(&mut self.told_spend_not_saved, true) {
            sink.emit(Event::Notice {
                kind: NoticeKind::SpendNotSaved,
                message: format!("could not record today's cloud spend: {error}"),
            });
        }
    }

    /// Sends the request for the position after the cache's first `prompt_len` tokens (the
    /// reply's, and where it is asked ahead, the draft's), asking for `max_tokens`, its worst
    /// case `booked` in the ledger.
    fn send(
        &mut self,
        prompt_len: usize,
        max_tokens: u32,
        booked: Option<Reservation>,
        sink: &dyn EventSink,
    ) -> Sent {
        let worst_case = self.worst_case_usd(prompt_len, max_tokens);
        let cloud = self.cloud.as_deref_mut().expect("decided with a cloud");
        let edge = &*self.edge;
        let prompt = &edge.tokens()[..prompt_len];
        let text = || edge.text_of(prompt);
        let reply_start = self.reply_start;
        let reply = || edge.text_of(&prompt[reply_start..]);
        let request = CloudRequest {
            ids: if self.as_ids { prompt } else { &[] },
            text: &text,
            messages: self.messages,
            reply: &reply,
            max_tokens,
            // Asked only while a chat endpoint's continuation is checked, before sending.
            stop: &|| sink.stop_requested(),
        };
        let text = cloud.sent_text(&request);
        let at = Instant::now();
        let in_flight = cloud.send(&request);
        self.usage.cloud_requests += 1;
        Sent {
            in_flight,
            at,
            text,
            booked,
            worst_case,
            prompt_len: prompt_len as u64,
        }
    }

    /// Waits for a request at the position the reply stands at; the outcome says how the
    /// reply goes on.
    fn ask_cloud(
        &mut self,
        wait: Wait<'_>,
        score: f32,
        sent: Sent,
        sink: &mut dyn EventSink,
    ) -> Result<CloudOutcome, EdgeError> {
        let Sent {
            mut in_flight,
            at: sent,
            text: sent_text,
            booked,
            worst_case,
            prompt_len,
        } = sent;
        let (step, asked) = (wait.confirmed, wait.asked);
        let arrival = match self.wait(in_flight.as_mut(), wait, sink) {
            Ok(Some(arrival)) => arrival,
            stopped_or_failed => {
                // Stopped while the request was away, or the edge failed: it may be billed.
                self.controller.record(0, 0, worst_case);
                self.settle(booked, None, sink);
                return stopped_or_failed.map(|_| CloudOutcome::Stopped);
            }
        };
        let result = arrival.result;
        let request_ms = arrival.at.saturating_duration_since(sent).as_millis() as u64;
        self.timings.cloud_ms += request_ms;
        self.controller.record_wait(request_ms);
        self.tell_slow(sink);
        let reply = match result {
            Ok(reply) => reply,
            Err(error) => {
                let billed = if error.may_be_billed() {
                    worst_case
                } else {
                    0.0
                };
                self.controller.record(0, 0, billed);
                self.settle(booked, Some(billed), sink);
                if error == CloudError::Stopped {
                    return Ok(CloudOutcome::Stopped);
                }
                sink.emit(Event::CloudRequest {
                    sent: sent_text,
                    ok: false,
                    ms: request_ms,
                    prompt_tokens: 0,
                    completion_tokens: 0,
                    cost_usd: 0.0,
                    unused: false,
                });
                self.cloud_failed(&error, sink);
                return Ok(CloudOutcome::UseEdge);
            }
        };
        let answer = self.read_answer(reply, asked, prompt_len);
        self.settle(booked, Some(answer.cost), sink);
        // Cancellation is noticed at the next token; a request record is never the last word.
        sink.emit(Event::CloudRequest {
            sent: sent_text,
            ok: !answer.foreign && (!answer.tokens.is_empty() || answer.ends_turn),
            ms: request_ms,
            prompt_tokens: answer.prompt_tokens,
            completion_tokens: answer.completion_tokens,
            cost_usd: answer.cost,
            unused: false,
        });
        if answer.tokens.is_empty() {
            self.controller.record(0, 0, answer.cost);
            if answer.ends_turn && !answer.foreign {
                return Ok(CloudOutcome::EndedReply);
            }
            let detail = if answer.foreign {
                "the reply held token ids the local model does not know"
            } else {
                "the reply held no tokens"
            };
            self.cloud_failed(
                &CloudError::Malformed {
                    detail: detail.into(),
                },
                sink,
            );
            return Ok(CloudOutcome::UseEdge);
        }
        self.cloud_failures = 0;
        let first = Emitted {
            id: answer.tokens[0],
            source: TokenSource::Cloud,
            score,
            edge_candidate: Some(step.token),
            request_ms: Some(request_ms),
        };
        self.accept_span(&answer, first, wait.paid as usize, sink)
    }

    /// What an answer holds for the reply: its tokens (never more than the span asked for,
    /// the cloud's end of turn kept apart, none if any id is foreign to the edge) and what
    /// it billed.
    fn read_answer(&mut self, reply: CloudReply, max_tokens: u32, prompt_len: u64) -> Answer {
        let mut tokens = match reply.ids {
            Some(ids) => ids,
            None => self.edge.tokenize(&reply.text, false),
        };
        let vocab = self.edge.vocab_size();
        let foreign = tokens
            .iter()
            .any(|&t| usize::try_from(t).map_or(true, |t| t >= vocab));
        // Never more than the span asked for: past it lie the budget, `max_cloud_tokens`
        // and the end of the context window.
        tokens.truncate(max_tokens as usize);
        let prompt_tokens = reply.prompt_tokens.unwrap_or(prompt_len);
        let completion_tokens = reply.completion_tokens.unwrap_or(tokens.len() as u64);
        let cached_tokens = reply.cached_prompt_tokens.unwrap_or(0).min(prompt_tokens);
        let cost = self
            .budget
            .get()
            .prices
            .cost(prompt_tokens, cached_tokens, completion_tokens);
        self.usage.cloud_prompt_tokens += prompt_tokens;
        self.usage.cloud_cached_prompt_tokens += cached_tokens;
        self.usage.cloud_completion_tokens += completion_tokens;
        // The cloud's end of turn is kept apart: it is never decoded, it ends the reply.
        let end = tokens.iter().position(|&t| self.edge.is_end_of_turn(t));
        let ends_turn = end.is_some() || (reply.stopped && tokens.len() < max_tokens as usize);
        tokens.truncate(end.unwrap_or(tokens.len()));
        if foreign {
            tokens.clear();
        }
        Answer {
            tokens,
            foreign,
            ends_turn,
            prompt_tokens,
            completion_tokens,
            cost,
        }
    }

    /// Shows the answer's tokens as far as the budget lets the span go on (`first` is the
    /// cloud's token at the routed position, kept whatever follows; past the `paid` tokens
    /// the budget's room allowed, only what finishes the cloud's word): each token is shown as
    /// soon as it is decided, before the edge decodes it, and the edge decodes only the tokens
    /// kept, so a span cut short costs no decoding and leaves the draft, the edge's own way
    /// on from there, in place.
    fn accept_span(
        &mut self,
        answer: &Answer,
        first: Emitted,
        paid: usize,
        sink: &mut dyn EventSink,
    ) -> Result<CloudOutcome, EdgeError> {
        let (start, request_ms) = (self.confirmed_len(), first.request_ms);
        let mut unchanged = first.edge_candidate == Some(first.id);
        let (mut token, mut cost, mut shown) = (first, answer.cost, 0);
        loop {
            let id = token.id;
            if !self.show(token, cost, sink) {
                return Ok(CloudOutcome::Stopped);
            }
            (cost, shown) = (0.0, shown + 1);
            // The cloud's end of turn after every token it sent was kept ends the reply within
            // the room; past it the edge decides, as when the room alone was asked for (the
            // cloud's end of turn after "Answer: E" ended replies before their reasons, whose
            // share the next letters needed: `docs/eval/log.md`, "The whole span asked for").
            if shown == answer.tokens.len() && answer.ends_turn && shown < paid {
                return Ok(CloudOutcome::EndedReply);
            }
            let before = self.decode(id)?;
            let kept = answer.tokens.get(shown).and_then(|&next| {
                let at = Place {
                    at: start + shown,
                    paid: shown < paid,
                    unchanged,
                };
                self.span_token(at, &before, next, request_ms)
            });
            match kept {
                Some(next) => {
                    unchanged &= next.id == before.token;
                    token = next;
                }
                None => {
                    return Ok(CloudOutcome::Continued {
                        shown: shown as u32,
                        next: before,
                    })
                }
            }
        }
    }

    /// The span's `token` at `place`, if the span goes on to it (`before` is the edge's step
    /// after the token before it, which predicted this position).
    fn span_token(
        &self,
        place: Place,
        before: &Step,
        token: TokenId,
        request_ms: Option<u64>,
    ) -> Option<Emitted> {
        let position = (place.at - self.reply_start) as u32;
        let score = self.router.score(&before.features(position));
        let source = self.controller.span_token_source(SpanToken {
            score,
            edge_agrees: before.token == token,
            continues_word: continues_word(&self.edge.piece_text(token)),
            paid: place.paid,
            unchanged: place.unchanged,
            edge_ends: self.edge.is_end_of_turn(before.token),
        })?;
        let wanted = source == TokenSource::Cloud;
        Some(Emitted {
            id: token,
            source,
            score,
            edge_candidate: wanted.then_some(before.token),
            request_ms: request_ms.filter(|_| wanted),
        })
    }

    /// A failure streak is told once when it starts (what went wrong, the local token was
    /// used) and once if it makes the reply give up on the cloud (with the reason again), so
    /// the give-up is not preceded by a copy of the same error.
    fn cloud_failed(&mut self, error: &CloudError, sink: &mut dyn EventSink) {
        if error.is_permanent() {
            // Asking again would fail the same way: the rest of the reply is local at once.
            self.cloud_failures = MAX_CLOUD_FAILURES;
            sink.emit(Event::Notice {
                kind: NoticeKind::CloudUnavailable,
                message: format!("{error}; finishing this reply locally"),
            });
            return;
        }
        self.cloud_failures += 1;
        if self.cloud_failures == MAX_CLOUD_FAILURES {
            sink.emit(Event::Notice {
                kind: NoticeKind::CloudUnavailable,
                message: format!(
                    "the cloud failed {MAX_CLOUD_FAILURES} times in a row ({error}); finishing this reply locally"
                ),
            });
        } else if self.cloud_failures == 1 {
            sink.emit(Event::Notice {
                kind: NoticeKind::CloudError,
                message: format!("{error}; used the local token instead"),
            });
        }
    }

    /// Counts a token about to be shown by its source, in the reply's usage and in its
    /// budget, with what its request cost (`cost_usd` comes with a request's first token), and
    /// shows it: the one place a token's source becomes spend. False when the user stopped.
    fn show(&mut self, token: Emitted, cost_usd: f64, sink: &mut dyn EventSink) -> bool {
        let from_cloud = u32::from(token.source == TokenSource::Cloud);
        self.usage.cloud_tokens += from_cloud;
        self.usage.edge_tokens += 1 - from_cloud;
        self.controller.record(1 - from_cloud, from_cloud, cost_usd);
        let text = self.text.push(&self.edge.piece(token.id));
        sink.emit(Event::Token {
            text,
            id: token.id,
            source: token.source,
            score: token.score,
            edge_candidate: token.edge_candidate.map(|t| self.edge.piece_text(t)),
            request_ms: token.request_ms,
        })
    }
}

/// Where a span's later token stands.
#[derive(Clone, Copy)]
struct Place {
    /// Its cache position.
    at: usize,
    /// Within the span the budget's room allowed.
    paid: bool,
    /// Every token the span kept before it is the edge's own choice.
    unchanged: bool,
}

/// How a request is waited for.
#[derive(Clone, Copy)]
struct Wait<'s> {
    /// The step the reply stands at (its token is the edge's own choice there).
    confirmed: &'s Step,
    /// Tokens the reply may still write: a draft never runs past them.
    room: usize,
    /// Whether the edge drafts while it waits.
    draft: bool,
    /// The span the budget's room paid for (past it an answer only finishes its word, or
    /// brings the first word that differs from the edge's).
    paid: u32,
    /// Tokens the request asked for.
    asked: u32,
    /// Tokens a request may ask for.
    span: u32,
}

/// Whether a token's text goes on with the word before it: it starts with a letter or a
/// digit, not a space or punctuation (tokenizers mark a word's start with its space, and
/// split numbers digit by digit, so a number is one word).
fn continues_word(piece: &str) -> bool {
    piece.chars().next().is_some_and(char::is_alphanumeric)
}

/// What an answer holds for the reply, read once.
struct Answer {
    /// The tokens to decode: within the span, without the cloud's end of turn.
    tokens: Vec<TokenId>,
    /// Some id was outside the edge's vocabulary (then `tokens` is empty).
    foreign: bool,
    /// The cloud ended its turn.
    ends_turn: bool,
    prompt_tokens: u64,
    completion_tokens: u64,
    /// What it billed, at the user's prices.
    cost: f64,
}

/// What one cloud request means for the reply.
enum CloudOutcome {
    /// No cloud tokens: the request failed (already reported) or was not made; the edge's
    /// token is used.
    UseEdge,
    /// The cloud's tokens were kept, shown and decoded; the reply goes on from `next`.
    Continued {
        /// How many tokens were shown.
        shown: u32,
        /// The edge's step after the last kept token.
        next: Step,
    },
    /// The cloud ended its turn (its tokens, if any, were already shown): the reply is done.
    EndedReply,
    /// The user stopped the reply while the request was in flight or its tokens were shown.
    Stopped,
}

#[cfg(test)]
mod tests;
