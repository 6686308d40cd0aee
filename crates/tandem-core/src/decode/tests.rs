//! The loop on a scripted edge model and an in-process scripted cloud.

use super::*;
use crate::budget::CloudBudget;
use crate::cloud::CloudReply;
use crate::edge::Outputs;
use crate::router::EntropyRouter;
use crate::signals::Signals;
use std::cell::Cell;
use std::rc::Rc;

/// Token 0 ends the turn; the edge predicts `last + 1`; its entropy at position `p` is
/// `entropy(p)`. A token reads " w<id>" (a word of its own), except from [`WORD_PIECES`] on,
/// where it reads as bare digits that go on with the word before it.
const WORD_PIECES: TokenId = 100_000;

/// What a batch of [`GEMM_BATCH`] tokens or more adds to every entropy it outputs: like
/// llama.cpp's CPU backend, whose Q4_K weights take another kernel from four tokens a batch
/// on, the scripted edge's numbers depend on how many tokens it decodes at once.
const GEMM_DRIFT: f32 = 1e-3;
const GEMM_BATCH: usize = 4;

struct ScriptedEdge {
    cached: Vec<TokenId>,
    entropy: fn(usize) -> f32,
    capacity: usize,
    /// Tokens decoded, in all.
    decoded: usize,
    /// Set while a [`Distant`] cloud request is in flight.
    waiting: Rc<Cell<bool>>,
    /// Tokens decoded while `waiting` was set.
    decoded_while_waiting: usize,
    /// The token after which it ends its turn (elsewhere it writes the token after).
    ends_after: Option<TokenId>,
}

impl ScriptedEdge {
    fn new(entropy: fn(usize) -> f32) -> Self {
        Self {
            cached: Vec::new(),
            entropy,
            capacity: 4096,
            decoded: 0,
            waiting: Rc::default(),
            decoded_while_waiting: 0,
            ends_after: None,
        }
    }
}

impl EdgeModel for ScriptedEdge {
    fn name(&self) -> &str {
        "scripted"
    }
    fn tokenize(&self, text: &str, _: bool) -> Vec<TokenId> {
        text.split_whitespace()
            .filter_map(|w| w.strip_prefix('w')?.parse().ok())
            .collect()
    }
    fn piece(&self, token: TokenId) -> Vec<u8> {
        match token {
            WORD_PIECES.. => token.to_string().into_bytes(),
            _ => format!(" w{token}").into_bytes(),
        }
    }
    fn is_end_of_turn(&self, token: TokenId) -> bool {
        token == 0
    }
    fn vocab_size(&self) -> usize {
        1 << 20
    }
    fn context_size(&self) -> usize {
        self.capacity
    }
    fn tokens(&self) -> &[TokenId] {
        &self.cached
    }
    fn extend(
        &mut self,
        tokens: &[TokenId],
        outputs: Outputs,
        _: &mut Sampler,
    ) -> Result<Vec<Step>, EdgeError> {
        let mut steps = Vec::new();
        self.decoded += tokens.len();
        if self.waiting.get() {
            self.decoded_while_waiting += tokens.len();
        }
        let drift = if tokens.len() >= GEMM_BATCH {
            GEMM_DRIFT
        } else {
            0.0
        };
        for (i, &t) in tokens.iter().enumerate() {
            self.cached.push(t);
            if outputs == Outputs::All || (outputs == Outputs::Last && i + 1 == tokens.len()) {
                let entropy = (self.entropy)(self.cached.len()) + drift;
                steps.push(Step {
                    token: if self.ends_after == Some(t) { 0 } else { t + 1 },
                    signals: Signals {
                        top1_prob: 0.5,
                        margin: 0.1,
                        entropy,
                    },
                    hidden: None,
                });
            }
        }
        Ok(steps)
    }
    fn truncate(&mut self, len: usize) {
        self.cached.truncate(len);
    }
}

/// Answers `offset + last`, `offset + last + 1`, … ; fails while `failures` > 0.
struct ScriptedCloud {
    offset: TokenId,
    requests: u32,
    failures: u32,
    stop_after: Option<u32>,
    /// Tokens answered beyond the span asked for.
    overrun: u32,
    /// Answers ids no vocabulary has.
    foreign_ids: bool,
}

impl ScriptedCloud {
    fn new(offset: TokenId) -> Self {
        Self {
            offset,
            requests: 0,
            failures: 0,
            stop_after: None,
            overrun: 0,
            foreign_ids: false,
        }
    }
}

impl Cloud for ScriptedCloud {
    fn endpoint(&self) -> &str {
        "scripted://cloud"
    }
    fn shares_vocab(&mut self, _: &[TokenId]) -> Result<bool, CloudError> {
        Ok(true)
    }
    fn complete(&mut self, request: &CloudRequest<'_>) -> Result<CloudReply, CloudError> {
        self.requests += 1;
        if self.failures > 0 {
            self.failures -= 1;
            return Err(CloudError::Unreachable {
                endpoint: "scripted".into(),
                detail: "refused".into(),
            });
        }
        if self.stop_after.is_some_and(|n| self.requests > n) {
            return Ok(CloudReply {
                ids: Some(vec![0]),
                stopped: true,
                ..CloudReply::default()
            });
        }
        let last = *request.ids.last().unwrap();
        let ids: Vec<TokenId> = (0..(request.max_tokens + self.overrun) as TokenId)
            .map(|i| match self.foreign_ids {
                true => TokenId::MAX - i,
                false => self.offset + last + i,
            })
            .collect();
        Ok(CloudReply {
            ids: Some(ids.clone()),
            text: String::new(),
            stopped: false,
            prompt_tokens: Some(request.ids.len() as u64),
            cached_prompt_tokens: None,
            completion_tokens: Some(ids.len() as u64),
        })
    }
}

/// A reply in progress over a three-token prompt, sending ids.
fn reply_over<'a, 'b>(
    edge: &'a mut ScriptedEdge,
    cloud: &'a mut dyn Cloud,
    router: &'a dyn Router,
    live: &'a LiveBudget,
    controller: &'b mut ReplyBudget,
) -> Reply<'a, 'b> {
    Reply {
        edge,
        cloud: Some(cloud),
        router,
        budget: live,
        messages: &[],
        spend: None,
        reply_start: 3,
        controller,
        sampler: Sampler::new(SamplingParams::default()),
        text: Utf8Stream::default(),
        usage: Usage::default(),
        timings: Timings::default(),
        cloud_failures: 0,
        told_spend_capped: false,
        told_spend_not_saved: false,
        told_slow: false,
        as_ids: true,
        draft: Draft::default(),
        ask_ahead: false,
        ahead: None,
        wasted: Vec::new(),
    }
}

/// Asks the cloud for `max_tokens` at `step` (routed with score 1), waiting without drafting:
/// what came of it, and the tokens shown.
fn ask(reply: &mut Reply<'_, '_>, step: &Step, max_tokens: u32) -> (CloudOutcome, Vec<Event>) {
    ask_paid(reply, step, max_tokens, max_tokens)
}

/// As [`ask`], the budget's room paying for `paid` of the tokens asked for.
fn ask_paid(
    reply: &mut Reply<'_, '_>,
    step: &Step,
    max_tokens: u32,
    paid: u32,
) -> (CloudOutcome, Vec<Event>) {
    let mut events = Vec::new();
    let mut sink = |e: Event| {
        if matches!(e, Event::Token { .. }) {
            events.push(e);
        }
        true
    };
    let sent = reply.send(reply.confirmed_len(), max_tokens, None, &sink);
    let wait = Wait {
        paid,
        asked: max_tokens,
        ..waiting(step)
    };
    let outcome = reply.ask_cloud(wait, 1.0, sent, &mut sink).unwrap();
    (outcome, events)
}

/// Waits for a request without drafting, at a step with room to spare.
fn waiting(step: &Step) -> Wait<'_> {
    Wait {
        confirmed: step,
        room: 100,
        draft: false,
        paid: 4,
        asked: 4,
        span: 4,
    }
}

fn run(
    edge: &mut ScriptedEdge,
    cloud: Option<&mut dyn Cloud>,
    budget: CloudBudget,
    max_tokens: u32,
) -> Vec<Event> {
    run_in(edge, cloud, &LiveBudget::new(budget), max_tokens)
}

/// As [`run`], the reply spending from `live` (a session's account).
fn run_in(
    edge: &mut ScriptedEdge,
    cloud: Option<&mut dyn Cloud>,
    live: &LiveBudget,
    max_tokens: u32,
) -> Vec<Event> {
    let mut events = Vec::new();
    let collaboration = Collaboration {
        edge,
        cloud: cloud.map(|c| c as &mut dyn Cloud),
        router: &EntropyRouter,
        budget: live,
        messages: &[],
        spend: None,
    };
    let options = DecodeOptions {
        max_tokens,
        ..DecodeOptions::default()
    };
    generate(collaboration, &[5, 6, 7], &options, &mut |e: Event| {
        events.push(e);
        true
    })
    .unwrap();
    events
}

fn tokens(events: &[Event]) -> Vec<(TokenId, TokenSource)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Token { id, source, .. } => Some((*id, *source)),
            _ => None,
        })
        .collect()
}

fn finished(events: &[Event]) -> (FinishReason, Usage) {
    match events.last() {
        Some(Event::Finished { reason, usage, .. }) => (*reason, *usage),
        other => panic!("last event is not finished: {other:?}"),
    }
}

#[test]
fn budget_off_never_calls_the_cloud() {
    let mut cloud = ScriptedCloud::new(1000);
    let events = run(
        &mut ScriptedEdge::new(|_| 5.0),
        Some(&mut cloud),
        CloudBudget::off(),
        50,
    );
    assert_eq!(cloud.requests, 0);
    let (reason, usage) = finished(&events);
    assert_eq!(reason, FinishReason::Length);
    assert_eq!((usage.edge_tokens, usage.cloud_tokens), (50, 0));
    assert_eq!(usage.target_share, Some(0.0), "the footer reads: cloud off");
    assert!(tokens(&events).iter().all(|(_, s)| *s == TokenSource::Edge));
}

#[test]
fn routed_share_stays_within_the_budget_plus_the_two_borrowed_tokens() {
    let mut cloud = ScriptedCloud::new(1000);
    // Uncertain everywhere, so the budget alone limits the cloud.
    let events = run(
        &mut ScriptedEdge::new(|p| (p % 7) as f32),
        Some(&mut cloud),
        CloudBudget::share(0.15),
        100,
    );
    let (_, usage) = finished(&events);
    assert_eq!(usage.edge_tokens + usage.cloud_tokens, 100);
    // Spans shrink to the room left: over by at most the two borrowed tokens.
    assert!(usage.cloud_tokens <= 15 + 2, "{usage:?}");
    assert_eq!(usage.target_share, Some(0.15));
    assert!(
        usage.cloud_tokens >= 5 && usage.edge_tokens > 0,
        "{usage:?}"
    );
    assert_eq!(usage.cloud_requests, cloud.requests);
    assert!(usage.cloud_prompt_tokens > 0);
}

#[test]
fn cloud_tokens_carry_the_replaced_edge_token_and_latency() {
    let mut cloud = ScriptedCloud::new(1000);
    let events = run(
        &mut ScriptedEdge::new(|_| 5.0),
        Some(&mut cloud),
        CloudBudget::share(1.0),
        8,
    );
    let first = events
        .iter()
        .find(|e| matches!(e, Event::Token { .. }))
        .unwrap();
    match first {
        Event::Token {
            id,
            source,
            edge_candidate,
            request_ms,
            text,
            ..
        } => {
            assert_eq!(*source, TokenSource::Cloud);
            assert_eq!(*id, 1007, "cloud continues from the last prompt token 7");
            assert_eq!(
                edge_candidate.as_deref(),
                Some(" w8"),
                "the edge would have said 8"
            );
            assert!(request_ms.is_some());
            assert_eq!(text, " w1007");
        }
        _ => unreachable!(),
    }
}

#[test]
fn span_keeps_tokens_the_edge_agrees_with_as_its_own_and_decodes_none_of_the_rest() {
    // Confident edge (entropy 0): span positions are kept only where the edge agrees.
    // The cloud answers last+1000, last+1001, ...: after the first cloud token t the edge
    // predicts t+1, which is exactly the cloud's next token, so the whole span is kept.
    let mut edge = ScriptedEdge::new(|_| 0.0);
    let mut cloud = ScriptedCloud::new(1000);
    let live = LiveBudget::new(CloudBudget::share(1.0));
    let mut controller = ReplyBudget::new(0.5);
    let mut reply = reply_over(
        &mut edge,
        &mut cloud,
        &crate::router::FixedRouter(1.0),
        &live,
        &mut controller,
    );
    let (step, _) = reply.edge.sync(&[1, 2, 3], &mut reply.sampler).unwrap();
    let (outcome, shown) = ask(&mut reply, &step, 4);
    let CloudOutcome::Continued { shown: 4, next } = outcome else {
        panic!("the cloud's span was kept")
    };
    assert_eq!(
        tokens(&shown),
        [1003, 1004, 1005, 1006].map(|id| (id, TokenSource::Cloud))
    );
    assert_eq!(next.token, 1007);

    // The same span where the router wants none of the later positions (a confident edge
    // under entropy): the edge writes them itself, so they are its tokens, shown as local
    // and not spent from the budget; only the token asked for is the cloud's.
    let mut edge = ScriptedEdge::new(|_| 0.0);
    let mut cloud = ScriptedCloud::new(1000);
    let mut controller = ReplyBudget::new(0.5);
    let mut reply = reply_over(
        &mut edge,
        &mut cloud,
        &EntropyRouter,
        &live,
        &mut controller,
    );
    let (step, _) = reply.edge.sync(&[1, 2, 3], &mut reply.sampler).unwrap();
    let (outcome, shown) = ask(&mut reply, &step, 4);
    assert!(matches!(outcome, CloudOutcome::Continued { shown: 4, .. }));
    assert_eq!(
        tokens(&shown),
        vec![
            (1003, TokenSource::Cloud),
            (1004, TokenSource::Edge),
            (1005, TokenSource::Edge),
            (1006, TokenSource::Edge)
        ]
    );
    assert!(shown[1..].iter().all(|e| matches!(
        e,
        Event::Token {
            edge_candidate: None,
            request_ms: None,
            ..
        }
    )));
    assert_eq!((reply.usage.cloud_tokens, reply.usage.edge_tokens), (1, 3));

    // A cloud that jumps (offset grows per token) disagrees with a confident edge: only the
    // first token survives, and it is the only one the edge decodes.
    struct Jumping;
    impl Cloud for Jumping {
        fn endpoint(&self) -> &str {
            "jumping"
        }
        fn shares_vocab(&mut self, _: &[TokenId]) -> Result<bool, CloudError> {
            Ok(true)
        }
        fn complete(&mut self, _: &CloudRequest<'_>) -> Result<CloudReply, CloudError> {
            Ok(CloudReply {
                ids: Some(vec![50, 60, 70, 80]),
                ..CloudReply::default()
            })
        }
    }
    let mut edge = ScriptedEdge::new(|_| 0.0);
    let mut jumping = Jumping;
    let mut controller = ReplyBudget::new(0.5);
    let mut reply = reply_over(
        &mut edge,
        &mut jumping,
        &EntropyRouter,
        &live,
        &mut controller,
    );
    let (step, _) = reply.edge.sync(&[1, 2, 3], &mut reply.sampler).unwrap();
    let (outcome, shown) = ask(&mut reply, &step, 4);
    let CloudOutcome::Continued { shown: 1, next } = outcome else {
        panic!("the cloud's first token was kept")
    };
    assert_eq!(tokens(&shown), [(50, TokenSource::Cloud)]);
    assert_eq!(reply.edge.tokens(), &[1, 2, 3, 50]);
    assert_eq!(
        next.token, 51,
        "the next step is the edge's reading after the kept token"
    );
    assert_eq!(
        reply.usage.cloud_completion_tokens, 4,
        "rejected tokens were still billed"
    );
    assert_eq!(
        edge.decoded, 4,
        "the prompt and the kept token: no rejected token was decoded"
    );
}

/// A cloud that answers every request, asked for three tokens, with the same ids.
struct Answers(Vec<TokenId>);

impl Cloud for Answers {
    fn endpoint(&self) -> &str {
        "answers"
    }
    fn shares_vocab(&mut self, _: &[TokenId]) -> Result<bool, CloudError> {
        Ok(true)
    }
    fn complete(&mut self, request: &CloudRequest<'_>) -> Result<CloudReply, CloudError> {
        assert_eq!(request.max_tokens, 3);
        Ok(CloudReply {
            ids: Some(self.0.clone()),
            ..CloudReply::default()
        })
    }
}

#[test]
fn a_word_the_cloud_began_is_finished_by_the_cloud_where_the_edge_would_go_another_way() {
    // A confident edge (entropy 0, so the router wants none of the span's later positions)
    // disagrees with all of it. The cloud's second token goes on with the word its first
    // began (" H" then "g"), so it is kept as the cloud's; its third starts a new word, so
    // the span ends there and the edge goes on after "g".
    let mut cloud = Answers(vec![50, WORD_PIECES + 60, 70]);
    let mut edge = ScriptedEdge::new(|_| 0.0);
    let live = LiveBudget::new(CloudBudget::share(1.0));
    let mut controller = ReplyBudget::new(0.5);
    let mut reply = reply_over(
        &mut edge,
        &mut cloud,
        &EntropyRouter,
        &live,
        &mut controller,
    );
    let (step, _) = reply.edge.sync(&[1, 2, 3], &mut reply.sampler).unwrap();
    let (outcome, shown) = ask(&mut reply, &step, 3);
    let CloudOutcome::Continued { shown: 2, next } = outcome else {
        panic!("the cloud's word was kept")
    };
    assert_eq!(
        tokens(&shown),
        vec![
            (50, TokenSource::Cloud),
            (WORD_PIECES + 60, TokenSource::Cloud)
        ]
    );
    assert!(
        matches!(&shown[1], Event::Token { edge_candidate: Some(w), .. } if w == " w51"),
        "the user sees what the edge would have written"
    );
    assert_eq!(reply.edge.tokens(), &[1, 2, 3, 50, WORD_PIECES + 60]);
    assert_eq!(next.token, WORD_PIECES + 61);
    assert_eq!(
        reply.usage.cloud_tokens, 2,
        "both are spent from the budget"
    );
}

/// Asks `cloud` for three tokens at the start of a reply whose budget's room pays for `paid`
/// of them, the router wanting the cloud everywhere (entropy 5): what came of it, the tokens
/// shown and the edge's tokens after.
fn room_of(paid: u32, cloud: &mut Answers) -> (CloudOutcome, Vec<Event>, Vec<TokenId>) {
    room_over(ScriptedEdge::new(|_| 5.0), paid, cloud)
}

/// As [`room_of`], over `edge`.
fn room_over(
    mut edge: ScriptedEdge,
    paid: u32,
    cloud: &mut Answers,
) -> (CloudOutcome, Vec<Event>, Vec<TokenId>) {
    let live = LiveBudget::new(CloudBudget::share(1.0));
    let mut controller = ReplyBudget::new(0.5);
    let mut reply = reply_over(&mut edge, cloud, &EntropyRouter, &live, &mut controller);
    let (step, _) = reply.edge.sync(&[1, 2, 3], &mut reply.sampler).unwrap();
    let (outcome, shown) = ask_paid(&mut reply, &step, 3, paid);
    let tokens = reply.edge.tokens().to_vec();
    (outcome, shown, tokens)
}

#[test]
fn a_room_of_one_token_still_lets_the_cloud_finish_its_word() {
    // The room pays for " H" alone; "g" goes on with the word, so it is kept, on credit;
    // the next word is the edge's again, wanted or not.
    let mut cloud = Answers(vec![50, WORD_PIECES + 60, 70]);
    let (outcome, shown, cache) = room_of(1, &mut cloud);
    let CloudOutcome::Continued { shown: 2, .. } = outcome else {
        panic!("the word was finished and nothing past it kept")
    };
    assert_eq!(
        tokens(&shown),
        vec![
            (50, TokenSource::Cloud),
            (WORD_PIECES + 60, TokenSource::Cloud)
        ]
    );
    assert_eq!(cache, &[1, 2, 3, 50, WORD_PIECES + 60]);
}

#[test]
fn an_answer_that_confirms_the_edge_brings_its_first_different_word() {
    // The edge would write 4 then 5 then 6: the cloud's " w4" (and " w5" past the room) change
    // nothing, so its " w9" where the edge had " w6" is kept, on credit; the next new word the
    // edge disagrees with ends the span, as after any change.
    let mut cloud = Answers(vec![4, 5, 9]);
    let (outcome, shown, cache) = room_of(1, &mut cloud);
    assert!(matches!(outcome, CloudOutcome::Continued { shown: 3, .. }));
    assert_eq!(
        tokens(&shown),
        vec![
            (4, TokenSource::Cloud),
            (5, TokenSource::Edge),
            (9, TokenSource::Cloud)
        ]
    );
    assert_eq!(cache, &[1, 2, 3, 4, 5, 9]);
    let mut cloud = Answers(vec![4, 9, 70]);
    let (_, shown, cache) = room_of(1, &mut cloud);
    assert_eq!(
        tokens(&shown),
        vec![(4, TokenSource::Cloud), (9, TokenSource::Cloud)]
    );
    assert_eq!(cache, &[1, 2, 3, 4, 9]);
}

#[test]
fn an_answer_that_confirms_the_edge_does_not_go_on_past_the_edges_end() {
    // The edge would write " w4" and end its reply; the cloud's " w4" confirms it, and its
    // " w70" after is no different word but more words ("Answer: E" then ". Explanation"),
    // which a router that wants none of them does not pay for.
    let mut edge = ScriptedEdge::new(|_| 0.0);
    edge.ends_after = Some(4);
    let mut cloud = Answers(vec![4, 70, 71]);
    let (outcome, shown, cache) = room_over(edge, 1, &mut cloud);
    let CloudOutcome::Continued { shown: 1, next } = outcome else {
        panic!("the span ended where the edge ends")
    };
    assert_eq!(next.token, 0, "the edge's end of turn comes next");
    assert_eq!(tokens(&shown), vec![(4, TokenSource::Cloud)]);
    assert_eq!(cache, &[1, 2, 3, 4]);
}

#[test]
fn the_clouds_end_of_turn_ends_the_reply_within_the_room_only() {
    let mut cloud = Answers(vec![50, 0]);
    let (outcome, shown, _) = room_of(2, &mut cloud);
    assert!(matches!(outcome, CloudOutcome::EndedReply));
    assert_eq!(tokens(&shown), vec![(50, TokenSource::Cloud)]);
    // Past the room the edge decides whether the reply ends ("Answer: E" then its reason).
    let (outcome, shown, cache) = room_of(1, &mut cloud);
    assert!(matches!(outcome, CloudOutcome::Continued { shown: 1, .. }));
    assert_eq!(tokens(&shown), vec![(50, TokenSource::Cloud)]);
    assert_eq!(cache, &[1, 2, 3, 50]);
}

#[test]
fn a_failing_cloud_falls_back_to_the_edge_and_says_so() {
    let mut cloud = ScriptedCloud::new(1000);
    cloud.failures = 100;
    let events = run(
        &mut ScriptedEdge::new(|_| 5.0),
        Some(&mut cloud),
        CloudBudget::share(1.0),
        30,
    );
    let (reason, usage) = finished(&events);
    assert_eq!(reason, FinishReason::Length);
    assert_eq!(usage.edge_tokens, 30, "the reply finished locally");
    assert_eq!(
        cloud.requests, MAX_CLOUD_FAILURES,
        "stopped asking after repeated failures"
    );
    let notices: Vec<(NoticeKind, &str)> = events
        .iter()
        .filter_map(|e| match e {
            Event::Notice { kind, message } => Some((*kind, message.as_str())),
            _ => None,
        })
        .collect();
    // The streak is told once when it starts and once when the reply gives up on the cloud,
    // with the reason; the failure in between is not a third notice.
    let kinds: Vec<NoticeKind> = notices.iter().map(|n| n.0).collect();
    assert_eq!(
        kinds,
        vec![NoticeKind::CloudError, NoticeKind::CloudUnavailable]
    );
    assert!(
        notices[1].1.contains("in a row (") && notices[1].1.contains("locally"),
        "{}",
        notices[1].1
    );
}

#[test]
fn one_failure_then_recovery_keeps_using_the_cloud() {
    let mut cloud = ScriptedCloud::new(1000);
    cloud.failures = 1;
    let events = run(
        &mut ScriptedEdge::new(|_| 5.0),
        Some(&mut cloud),
        CloudBudget::share(1.0),
        20,
    );
    let (_, usage) = finished(&events);
    assert!(usage.cloud_tokens >= 16, "{usage:?}");
    assert_eq!(
        usage.edge_tokens, 1,
        "only the failed position used the edge token"
    );
}

#[test]
fn the_cloud_can_end_the_reply() {
    let mut cloud = ScriptedCloud::new(1000);
    cloud.stop_after = Some(1);
    let events = run(
        &mut ScriptedEdge::new(|_| 5.0),
        Some(&mut cloud),
        CloudBudget::share(1.0),
        50,
    );
    let (reason, usage) = finished(&events);
    assert_eq!(reason, FinishReason::Stop);
    assert_eq!(usage.cloud_tokens, 4);
}

#[test]
fn the_edge_end_of_turn_stops_the_reply() {
    let mut edge = ScriptedEdge::new(|_| 0.0);
    let live = LiveBudget::new(CloudBudget::off());
    let mut events = Vec::new();
    let c = Collaboration {
        edge: &mut edge,
        cloud: None,
        router: &EntropyRouter,
        budget: &live,
        messages: &[],
        spend: None,
    };
    // The edge predicts last + 1: from -3 it reaches 0 (end of turn) after -2, -1.
    generate(c, &[-3], &DecodeOptions::default(), &mut |e: Event| {
        events.push(e);
        true
    })
    .unwrap();
    assert_eq!(tokens(&events).len(), 2);
    assert_eq!(finished(&events).0, FinishReason::Stop);
}

#[test]
fn a_sink_that_says_stop_cancels_the_reply() {
    let mut edge = ScriptedEdge::new(|_| 0.0);
    let live = LiveBudget::new(CloudBudget::off());
    let mut events = Vec::new();
    let c = Collaboration {
        edge: &mut edge,
        cloud: None,
        router: &EntropyRouter,
        budget: &live,
        messages: &[],
        spend: None,
    };
    generate(c, &[1], &DecodeOptions::default(), &mut |e: Event| {
        let is_token = matches!(e, Event::Token { .. });
        events.push(e);
        !is_token || tokens(&events).len() < 3
    })
    .unwrap();
    assert_eq!(tokens(&events).len(), 3);
    assert_eq!(finished(&events).0, FinishReason::Cancelled);
}

#[test]
fn turning_the_budget_off_mid_reply_stops_cloud_requests_at_the_next_token() {
    let mut edge = ScriptedEdge::new(|_| 5.0);
    let mut cloud = ScriptedCloud::new(1000);
    let live = LiveBudget::new(CloudBudget::share(1.0));
    let switch = live.clone();
    let mut events = Vec::new();
    let c = Collaboration {
        edge: &mut edge,
        cloud: Some(&mut cloud),
        router: &EntropyRouter,
        budget: &live,
        messages: &[],
        spend: None,
    };
    let options = DecodeOptions {
        max_tokens: 40,
        ..DecodeOptions::default()
    };
    generate(c, &[1], &options, &mut |e: Event| {
        if matches!(e, Event::Token { .. }) && tokens(&events).len() == 7 {
            switch.set(CloudBudget::off());
        }
        events.push(e);
        true
    })
    .unwrap();
    let sources: Vec<TokenSource> = tokens(&events).into_iter().map(|(_, s)| s).collect();
    assert!(sources[..8].iter().all(|s| *s == TokenSource::Cloud));
    assert!(
        sources[8..].iter().all(|s| *s == TokenSource::Edge),
        "{sources:?}"
    );
    assert_eq!(cloud.requests, 2);
}

#[test]
fn a_full_context_ends_the_reply_with_a_notice() {
    let mut edge = ScriptedEdge::new(|_| 0.0);
    edge.capacity = 20;
    let events = run(&mut edge, None, CloudBudget::off(), 100);
    assert_eq!(finished(&events).0, FinishReason::ContextFull);
    assert!(events.iter().any(|e| matches!(
        e,
        Event::Notice {
            kind: NoticeKind::ContextFull,
            ..
        }
    )));
}

#[test]
fn an_answer_past_the_span_is_cut_to_it() {
    let mut cloud = ScriptedCloud::new(1000);
    cloud.overrun = 500;
    let events = run(
        &mut ScriptedEdge::new(|_| 5.0),
        Some(&mut cloud),
        CloudBudget::share(1.0),
        10,
    );
    let (reason, usage) = finished(&events);
    assert_eq!(reason, FinishReason::Length);
    assert_eq!((usage.edge_tokens, usage.cloud_tokens), (0, 10));
    assert_eq!(cloud.requests, 3, "spans of 4, 4 and the last 2");
}

#[test]
fn ids_the_edge_does_not_know_fall_back_to_the_edge_token_with_a_notice() {
    let mut cloud = ScriptedCloud::new(1000);
    cloud.foreign_ids = true;
    let events = run(
        &mut ScriptedEdge::new(|_| 5.0),
        Some(&mut cloud),
        CloudBudget::share(1.0),
        6,
    );
    let (reason, usage) = finished(&events);
    assert_eq!(reason, FinishReason::Length);
    assert_eq!((usage.edge_tokens, usage.cloud_tokens), (6, 0));
    assert!(events.iter().any(|e| matches!(
        e,
        Event::Notice { kind: NoticeKind::CloudError, message } if message.contains("does not know")
    )));
}

/// A [`ScriptedCloud`] a round trip away: its answer comes at the `polls`-th poll, and
/// `waiting` is set while it is in flight.
struct Distant {
    near: ScriptedCloud,
    polls: u32,
    waiting: Rc<Cell<bool>>,
    /// Requests on their way now.
    away: Rc<Cell<u32>>,
    /// The most requests that were on their way at once.
    most_away: u32,
}

impl Distant {
    fn new(offset: TokenId, polls: u32, edge: &ScriptedEdge) -> Self {
        Self {
            near: ScriptedCloud::new(offset),
            polls,
            waiting: edge.waiting.clone(),
            away: Rc::default(),
            most_away: 0,
        }
    }
}

struct Arriving {
    answer: Option<Result<CloudReply, CloudError>>,
    polls: u32,
    waiting: Rc<Cell<bool>>,
    away: Rc<Cell<u32>>,
}

impl InFlight for Arriving {
    fn poll(&mut self, _: Duration) -> Option<Arrival> {
        if self.polls > 0 {
            self.polls -= 1;
            return None;
        }
        if self.answer.is_some() {
            self.away.set(self.away.get() - 1);
        }
        self.waiting.set(false);
        let result = self.answer.take()?;
        Some(Arrival {
            result,
            at: Instant::now(),
        })
    }
}

impl Cloud for Distant {
    fn endpoint(&self) -> &str {
        self.near.endpoint()
    }
    fn shares_vocab(&mut self, probe: &[TokenId]) -> Result<bool, CloudError> {
        self.near.shares_vocab(probe)
    }
    fn complete(&mut self, request: &CloudRequest<'_>) -> Result<CloudReply, CloudError> {
        self.near.complete(request)
    }
    fn send(&mut self, request: &CloudRequest<'_>) -> Box<dyn InFlight> {
        self.waiting.set(true);
        self.away.set(self.away.get() + 1);
        self.most_away = self.most_away.max(self.away.get());
        Box::new(Arriving {
            answer: Some(self.near.complete(request)),
            polls: self.polls,
            waiting: self.waiting.clone(),
            away: self.away.clone(),
        })
    }
}

/// What a user sees of a reply: each token with its source, score and the edge token it
/// replaced, and how it ended.
type Shown = (
    Vec<(TokenId, TokenSource, u32, Option<String>)>,
    FinishReason,
    u32,
);

/// How a reply meets a distant cloud's round trips.
#[derive(Clone, Copy)]
enum Way {
    /// The edge waits for each answer.
    Waiting,
    /// The edge drafts while it waits.
    Drafting,
    /// The edge drafts, and the draft's next routed position is asked for at once.
    AskingAhead,
}

/// A reply over a distant cloud (answering at its `polls`-th poll) answering
/// `offset + last`, …, at `share`; the edge and the cloud are returned for their counters,
/// with how many requests the reply listed and how many it said went unused.
fn distant_reply_at(
    offset: TokenId,
    way: Way,
    entropy: fn(usize) -> f32,
    share: f32,
    polls: u32,
) -> (Shown, ScriptedEdge, Distant, (usize, u32)) {
    let mut edge = ScriptedEdge::new(entropy);
    let mut cloud = Distant::new(offset, polls, &edge);
    let live = LiveBudget::new(CloudBudget::share(share));
    let mut events = Vec::new();
    let c = Collaboration {
        edge: &mut edge,
        cloud: Some(&mut cloud),
        router: &EntropyRouter,
        budget: &live,
        messages: &[],
        spend: None,
    };
    let options = DecodeOptions {
        max_tokens: 60,
        overlap: !matches!(way, Way::Waiting),
        ask_ahead: matches!(way, Way::AskingAhead),
        ..DecodeOptions::default()
    };
    generate(c, &[5, 6, 7], &options, &mut |e: Event| {
        events.push(e);
        true
    })
    .unwrap();
    let tokens = events
        .iter()
        .filter_map(|e| match e {
            Event::Token {
                id,
                source,
                score,
                edge_candidate,
                ..
            } => Some((*id, *source, score.to_bits(), edge_candidate.clone())),
            _ => None,
        })
        .collect();
    let (reason, usage) = finished(&events);
    let listed = events
        .iter()
        .filter(|e| matches!(e, Event::CloudRequest { .. }))
        .count();
    let marked = events
        .iter()
        .filter(|e| matches!(e, Event::CloudRequest { unused: true, .. }))
        .count();
    assert_eq!(
        marked, usage.cloud_requests_unused as usize,
        "each request not used is listed as such, not as a failure"
    );
    let counts = (listed, usage.cloud_requests_unused);
    ((tokens, reason, usage.cloud_requests), edge, cloud, counts)
}

/// [`distant_reply_at`] a round trip of six polls away, the edge and its counters.
fn distant_reply(
    offset: TokenId,
    overlap: bool,
    entropy: fn(usize) -> f32,
    share: f32,
) -> (Shown, ScriptedEdge) {
    let way = if overlap { Way::Drafting } else { Way::Waiting };
    let (shown, edge, _, _) = distant_reply_at(offset, way, entropy, share, 6);
    (shown, edge)
}

/// Uncertain every seventh position, sure elsewhere: a few requests per reply.
fn now_and_then(position: usize) -> f32 {
    if position.is_multiple_of(7) {
        5.0
    } else {
        0.1
    }
}

#[test]
fn a_draft_the_cloud_agrees_with_is_kept_and_the_reply_is_unchanged() {
    let (waited, plain) = distant_reply(1, false, now_and_then, 0.3);
    let (drafted, edge) = distant_reply(1, true, now_and_then, 0.3);
    assert!(waited.2 > 0, "the reply asked the cloud");
    assert_eq!(drafted, waited, "the user sees the same reply");
    assert_eq!(
        edge.cached, plain.cached,
        "the cache holds the reply, no draft"
    );
    assert!(
        edge.decoded_while_waiting > 0,
        "the edge decoded while the cloud was away"
    );
    assert_eq!(edge.decoded, plain.decoded, "every drafted token was used");
    assert_eq!(plain.decoded_while_waiting, 0);
}

#[test]
fn a_draft_the_cloud_contradicts_is_rolled_back_and_the_reply_is_unchanged() {
    let (waited, plain) = distant_reply(1000, false, now_and_then, 0.3);
    let (drafted, edge) = distant_reply(1000, true, now_and_then, 0.3);
    assert!(waited.0.iter().any(|t| t.1 == TokenSource::Cloud));
    assert_eq!(drafted, waited, "the user sees the same reply");
    assert_eq!(edge.cached, plain.cached, "the draft was rolled back");
    assert!(
        edge.decoded > plain.decoded,
        "the draft was written, then dropped"
    );
}

#[test]
fn a_reply_is_the_same_whether_the_cloud_answers_before_the_draft_or_after_it() {
    // Every position goes to the cloud, four tokens a request, and the cloud agrees with the
    // edge: drafting keeps the steps the edge drafted one token at a time, waiting decodes
    // the answer. The edge's numbers depend on how many tokens it decodes at once, as
    // llama.cpp's do, so the reply's tokens are decoded one at a time either way.
    let (waited, plain) = distant_reply(1, false, |_| 5.0, 1.0);
    let (drafted, edge) = distant_reply(1, true, |_| 5.0, 1.0);
    assert!(waited.2 > 1, "the reply asked the cloud for spans");
    assert!(edge.decoded_while_waiting > 0, "the edge drafted");
    assert_eq!(drafted, waited, "the same tokens, sources and scores");
    assert_eq!(edge.cached, plain.cached);
}

#[test]
fn a_request_asked_ahead_from_the_draft_is_used_where_the_reply_comes_to_it() {
    // The cloud agrees with the edge: every request asked ahead is the one the reply makes
    // when it gets there, so two are away at once and none is wasted.
    let (waited, _, one_at_a_time, _) = distant_reply_at(1, Way::Waiting, now_and_then, 0.3, 10);
    let (ahead, edge, cloud, listed) = distant_reply_at(1, Way::AskingAhead, now_and_then, 0.3, 10);
    assert!(waited.2 > 2, "the reply asked the cloud several times");
    assert_eq!(
        ahead, waited,
        "the same tokens, sources, scores and requests"
    );
    assert_eq!(one_at_a_time.most_away, 1);
    assert_eq!(
        cloud.most_away, 2,
        "the next request went before the answer came"
    );
    assert_eq!(
        listed,
        (waited.2 as usize, 0),
        "every request listed once, none unused"
    );
    assert_eq!(edge.cached.len(), 3 + ahead.0.len(), "no draft left");
}

#[test]
fn a_request_asked_ahead_of_an_answer_that_differs_is_paid_for_listed_and_unused() {
    // The cloud disagrees with the edge: a request asked from the draft carries tokens the
    // reply never writes, so it is wasted; the reply is what it is without asking ahead.
    let (waited, plain, _, _) = distant_reply_at(1000, Way::Waiting, now_and_then, 0.3, 10);
    let (ahead, edge, cloud, listed) =
        distant_reply_at(1000, Way::AskingAhead, now_and_then, 0.3, 10);
    assert_eq!(
        (&ahead.0, ahead.1),
        (&waited.0, waited.1),
        "the user sees the same reply"
    );
    assert!(
        cloud.most_away >= 2,
        "a request went before the answer came"
    );
    assert!(ahead.2 > waited.2, "the wasted requests count: {ahead:?}");
    assert_eq!(
        listed,
        (ahead.2 as usize, ahead.2 - waited.2),
        "wasted requests are listed too, and said to be unused"
    );
    assert_eq!(edge.cached, plain.cached);
}

#[test]
fn stop_while_the_cloud_is_away_ends_the_reply_without_its_answer() {
    let mut edge = ScriptedEdge::new(|_| 5.0);
    let mut cloud = Distant::new(1000, u32::MAX, &edge);
    struct StopWhileWaiting(Rc<Cell<bool>>, Vec<Event>);
    impl EventSink for StopWhileWaiting {
        fn emit(&mut self, event: Event) -> bool {
            self.1.push(event);
            true
        }
        fn stop_requested(&self) -> bool {
            self.0.get()
        }
    }
    let mut sink = StopWhileWaiting(edge.waiting.clone(), Vec::new());
    let live = LiveBudget::new(CloudBudget::share(1.0));
    let c = Collaboration {
        edge: &mut edge,
        cloud: Some(&mut cloud),
        router: &EntropyRouter,
        budget: &live,
        messages: &[],
        spend: None,
    };
    generate(c, &[5, 6, 7], &DecodeOptions::default(), &mut sink).unwrap();
    assert_eq!(finished(&sink.1).0, FinishReason::Cancelled);
    assert!(tokens(&sink.1).is_empty());
    assert_eq!(edge.cached, [5, 6, 7], "nothing drafted stays in the cache");
}

#[test]
fn an_endpoint_that_cannot_continue_is_asked_once_and_the_reply_goes_on_locally() {
    struct Restarting(u32);
    impl Cloud for Restarting {
        fn endpoint(&self) -> &str {
            "scripted://chat"
        }
        fn shares_vocab(&mut self, _: &[TokenId]) -> Result<bool, CloudError> {
            Ok(false)
        }
        fn complete(&mut self, _: &CloudRequest<'_>) -> Result<CloudReply, CloudError> {
            self.0 += 1;
            Err(CloudError::NoContinuation {
                endpoint: "scripted://chat".into(),
                answered: "1, 2, 3".into(),
            })
        }
    }
    let mut edge = ScriptedEdge::new(|_| 5.0);
    let mut cloud = Restarting(0);
    let live = LiveBudget::new(CloudBudget::share(1.0));
    let mut events = Vec::new();
    let c = Collaboration {
        edge: &mut edge,
        cloud: Some(&mut cloud),
        router: &EntropyRouter,
        budget: &live,
        messages: &[],
        spend: None,
    };
    generate(c, &[1], &DecodeOptions::default(), &mut |e: Event| {
        events.push(e);
        true
    })
    .unwrap();
    assert_eq!(cloud.0, 1, "no second request");
    assert!(tokens(&events).iter().all(|(_, s)| *s == TokenSource::Edge));
    let notices: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::Notice { kind, message } => Some((*kind, message.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert_eq!(notices[0].0, NoticeKind::CloudUnavailable);
    assert!(notices[0].1.contains("finishing this reply locally"));
}

/// A cloud that takes `delay` to answer.
struct Slow {
    near: ScriptedCloud,
    delay: Duration,
}

impl Cloud for Slow {
    fn endpoint(&self) -> &str {
        self.near.endpoint()
    }
    fn shares_vocab(&mut self, probe: &[TokenId]) -> Result<bool, CloudError> {
        self.near.shares_vocab(probe)
    }
    fn complete(&mut self, request: &CloudRequest<'_>) -> Result<CloudReply, CloudError> {
        std::thread::sleep(self.delay);
        self.near.complete(request)
    }
}

/// Very uncertain every seventh position, somewhat uncertain three later, sure elsewhere.
fn sometimes_very_uncertain(position: usize) -> f32 {
    match position % 7 {
        0 => 5.0,
        3 => 2.0,
        _ => 0.1,
    }
}

#[test]
fn a_cloud_past_the_wait_limit_is_asked_less_and_the_user_is_told() {
    let reply = |max_wait_ms| {
        let mut edge = ScriptedEdge::new(sometimes_very_uncertain);
        let mut cloud = Slow {
            near: ScriptedCloud::new(1),
            delay: Duration::from_millis(20),
        };
        let budget = CloudBudget {
            max_wait_ms,
            ..CloudBudget::share(0.15)
        };
        let events = run(&mut edge, Some(&mut cloud), budget, 80);
        let told: Vec<String> = events
            .iter()
            .filter_map(|e| match e {
                Event::Notice {
                    kind: NoticeKind::CloudSlow,
                    message,
                } => Some(message.clone()),
                _ => None,
            })
            .collect();
        (finished(&events).1.cloud_requests, told)
    };
    let (patient, told) = reply(None);
    assert!(told.is_empty());
    let (limited, told) = reply(Some(5));
    assert!(limited >= 1, "the first request measures the wait");
    assert!(
        limited < patient,
        "{limited} requests, {patient} without a limit"
    );
    assert_eq!(told.len(), 1, "said once: {told:?}");
    assert!(told[0].contains("past your 5 ms limit"), "{told:?}");
}

#[test]
fn a_reply_that_opens_with_the_cloud_past_the_wait_limit_says_so_before_its_first_token() {
    let live = LiveBudget::new(CloudBudget {
        max_wait_ms: Some(5),
        ..CloudBudget::share(0.15)
    });
    let reply = || {
        let mut edge = ScriptedEdge::new(sometimes_very_uncertain);
        let mut cloud = Slow {
            near: ScriptedCloud::new(1),
            delay: Duration::from_millis(20),
        };
        run_in(&mut edge, Some(&mut cloud), &live, 80)
    };
    let first = reply();
    assert!(finished(&first).1.cloud_requests >= 1, "measures the wait");
    // The next reply in the session remembers it: the notice comes before any token.
    let second = reply();
    let slow = second.iter().position(|e| {
        matches!(
            e,
            Event::Notice {
                kind: NoticeKind::CloudSlow,
                ..
            }
        )
    });
    let token = second.iter().position(|e| matches!(e, Event::Token { .. }));
    assert!(slow.is_some() && slow < token, "{second:?}");
    // With the cloud switched off nothing is said.
    live.set(CloudBudget {
        enabled: false,
        max_wait_ms: Some(5),
        ..CloudBudget::share(0.15)
    });
    assert!(!reply().iter().any(|e| matches!(
        e,
        Event::Notice {
            kind: NoticeKind::CloudSlow,
            ..
        }
    )));
}

#[test]
fn a_prompt_reads_the_same_whether_it_was_cached_or_not() {
    // A new chat decodes its whole prompt; a regenerated reply only the prompt's last token.
    // The scripted edge, like llama.cpp on the CPU, reads a batch of four or more tokens with
    // other numbers: the reply's first step must not depend on which of the two it was.
    let mut edge = ScriptedEdge::new(|_| 1.0);
    let mut sampler = Sampler::new(SamplingParams::default());
    let prompt = [5, 6, 7, 8, 9, 10];
    let (fresh, decoded) = edge.sync(&prompt, &mut sampler).unwrap();
    assert_eq!(decoded, prompt.len());
    edge.extend(&[fresh.token], Outputs::Last, &mut sampler)
        .unwrap();
    let (again, decoded) = edge.sync(&prompt, &mut sampler).unwrap();
    assert_eq!(decoded, 1, "only the last prompt token is read again");
    assert_eq!(edge.cached, prompt);
    assert_eq!(again.token, fresh.token);
    assert_eq!(
        again.signals.entropy.to_bits(),
        fresh.signals.entropy.to_bits()
    );
}
