//! Routed generation end to end: the real edge model on llama.cpp, a real HTTP cloud on
//! 127.0.0.1 (the project's fake, for counting requests and injecting faults).

mod support;

use std::time::Duration;
use support::{load, options, route, SMOLLM2};
use tandem_core::budget::{CloudBudget, Prices};
use tandem_core::cloud::{CloudClient, CloudConfig};
use tandem_core::decode::DecodeOptions;
use tandem_core::edge::EdgeModel;
use tandem_core::event::{Event, FinishReason, NoticeKind, TokenSource, Usage};
use tandem_core::local::EdgeWeights;
use tandem_core::message::Message;
use tandem_core::router::{FixedRouter, MarginRouter, Router};
use tandem_fake_cloud::{FakeCloud, Script};

struct Run {
    events: Vec<Event>,
    usage: Usage,
    reason: FinishReason,
}

fn run(
    weights: &EdgeWeights,
    fake: &FakeCloud,
    router: &dyn Router,
    budget: CloudBudget,
    max_tokens: u32,
    on_token: &mut dyn FnMut(usize),
) -> Run {
    let mut edge = weights.session(&options()).unwrap();
    let mut config = CloudConfig::new(fake.base_url());
    config.request_timeout = Duration::from_millis(500);
    config.connect_timeout = Duration::from_millis(500);
    let mut cloud = CloudClient::new(config).unwrap();
    let prompt = weights
        .chat_prompt(&[Message::user(
            "Write a long story about a lighthouse keeper and the sea.",
        )])
        .unwrap();
    let prompt = edge.tokenize(&prompt, true);
    let mut events = Vec::new();
    let mut tokens = 0;
    let usage = route(
        &mut edge,
        &mut cloud,
        router,
        budget,
        &prompt,
        max_tokens,
        &mut |e| {
            if matches!(e, Event::Token { .. }) {
                on_token(tokens);
                tokens += 1;
            }
            events.push(e);
        },
    );
    let reason = match events.last() {
        Some(Event::Finished { reason, .. }) => *reason,
        other => panic!("no finished event: {other:?}"),
    };
    Run {
        events,
        usage,
        reason,
    }
}

fn sources(events: &[Event]) -> Vec<TokenSource> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Token { source, .. } => Some(*source),
            _ => None,
        })
        .collect()
}

#[test]
fn budget_zero_sends_no_request_at_all() {
    let Some(weights) = load(SMOLLM2) else { return };
    let fake = FakeCloud::start(Script::cycle(&[" cloud"])).unwrap();
    let r = run(
        &weights,
        &fake,
        &FixedRouter(1.0),
        CloudBudget::share(0.0),
        40,
        &mut |_| (),
    );
    assert_eq!(fake.requests(), 0);
    assert_eq!(r.usage.cloud_requests, 0);
    assert!(sources(&r.events).iter().all(|s| *s == TokenSource::Edge));
}

#[test]
fn a_fifteen_percent_budget_mixes_cloud_and_edge_within_the_share() {
    let Some(weights) = load(SMOLLM2) else { return };
    let fake = FakeCloud::start(Script::cycle(&[" ocean", " waves"])).unwrap();
    let r = run(
        &weights,
        &fake,
        &MarginRouter,
        CloudBudget::share(0.15),
        100,
        &mut |_| (),
    );
    let total = r.usage.edge_tokens + r.usage.cloud_tokens;
    assert!(
        total >= 40,
        "the reply is long enough to judge: {:?}",
        r.usage
    );
    let span = DecodeOptions::default().span;
    assert!(
        r.usage.cloud_tokens as f32 <= 0.15 * total as f32 + span as f32,
        "{:?}",
        r.usage
    );
    let sources = sources(&r.events);
    assert!(sources.contains(&TokenSource::Cloud) && sources.contains(&TokenSource::Edge));
    assert_eq!(r.usage.cloud_requests as usize, fake.requests());
    // What the fake sent is what the reply shows for cloud tokens.
    let cloud_text: String = r
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Token {
                text,
                source: TokenSource::Cloud,
                edge_candidate,
                request_ms,
                ..
            } => {
                assert!(edge_candidate.is_some() && request_ms.is_some());
                Some(text.clone())
            }
            _ => None,
        })
        .collect();
    assert!(cloud_text.contains("ocean"), "{cloud_text:?}");
    // Every request re-sent the conversation so far, as text (the fake cannot tokenize).
    let first = &fake.recorded()[0].body;
    assert!(first["prompt"]
        .as_str()
        .unwrap()
        .contains("lighthouse keeper"));
}

#[test]
fn killing_the_cloud_mid_reply_finishes_the_reply_locally_with_a_notice() {
    let Some(weights) = load(SMOLLM2) else { return };
    let fake = FakeCloud::start(Script::cycle(&[" ocean"])).unwrap();
    let r = run(
        &weights,
        &fake,
        &FixedRouter(1.0),
        CloudBudget::share(1.0),
        40,
        &mut |n| {
            if n == 8 {
                fake.stop();
            }
        },
    );
    assert_eq!(
        r.reason,
        FinishReason::Length,
        "the reply was not cut short"
    );
    assert_eq!(r.usage.edge_tokens + r.usage.cloud_tokens, 40);
    assert!(
        r.usage.cloud_tokens >= 8 && r.usage.edge_tokens >= 20,
        "{:?}",
        r.usage
    );
    let notices: Vec<&NoticeKind> = r
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Notice { kind, .. } => Some(kind),
            _ => None,
        })
        .collect();
    assert!(notices.contains(&&NoticeKind::CloudError), "{notices:?}");
    assert!(
        notices.contains(&&NoticeKind::CloudUnavailable),
        "{notices:?}"
    );
}

/// A provider that reads the re-sent conversation from its prompt cache says so in `usage`
/// (`prompt_tokens_details.cached_tokens`); the reply's cost prices those tokens at the
/// cached rate the user set, the rest at the input rate.
#[test]
fn prompt_tokens_the_cloud_cached_cost_the_cached_price() {
    let Some(weights) = load(SMOLLM2) else { return };
    let fake = FakeCloud::start(Script::cycle(&[" ocean"]).caching_prompts()).unwrap();
    let mut budget = CloudBudget::share(1.0);
    budget.prices = Prices {
        input_per_mtok: 1_000.0,
        output_per_mtok: 0.0,
        cached_input_per_mtok: Some(100.0),
    };
    let r = run(&weights, &fake, &FixedRouter(1.0), budget, 24, &mut |_| ());
    let u = &r.usage;
    assert!(u.cloud_requests >= 3, "{u:?}");
    // Every request after the first re-sends the one before it: cached, but not all of it.
    assert!(
        u.cloud_cached_prompt_tokens > 0 && u.cloud_cached_prompt_tokens < u.cloud_prompt_tokens,
        "{u:?}"
    );
    let fresh = u.cloud_prompt_tokens - u.cloud_cached_prompt_tokens;
    let expected = (fresh as f64 * 1_000.0 + u.cloud_cached_prompt_tokens as f64 * 100.0) / 1e6;
    assert!(
        (u.est_cost_usd - expected).abs() < 1e-9,
        "{u:?}, expected ${expected}"
    );
    let uncached = u.cloud_prompt_tokens as f64 * 1_000.0 / 1e6;
    assert!(u.est_cost_usd < 0.5 * uncached, "{u:?}");
}

/// While a request is away the edge drafts its own continuation, and asks ahead for the next
/// position the draft would route; under greedy decoding the reply is the one the loop writes
/// when it waits for every answer: the same tokens, from the same sources, with the same
/// scores. The cloud answers with the opening of the edge's own reply, so a span at the
/// reply's start agrees with the draft (kept) and later ones do not (rolled back).
#[test]
fn drafting_and_asking_ahead_while_the_cloud_is_away_change_nothing_the_user_sees() {
    use tandem_core::budget::LiveBudget;
    use tandem_core::cloud::Cloud;
    use tandem_core::decode::{generate, Collaboration};
    let Some(weights) = load(SMOLLM2) else { return };
    let prompt = weights
        .chat_prompt(&[Message::user("Name the planets of the solar system.")])
        .unwrap();
    let prompt = weights.tokenize(&prompt, true);
    let reply = |fake: Option<&FakeCloud>, (overlap, ask_ahead): (bool, bool)| {
        let mut edge = weights.session(&options()).unwrap();
        let mut cloud = fake.map(|f| CloudClient::new(CloudConfig::new(f.base_url())).unwrap());
        let live = LiveBudget::new(CloudBudget::share(0.3));
        let collaboration = Collaboration {
            edge: &mut edge,
            cloud: cloud.as_mut().map(|c| c as &mut dyn Cloud),
            router: &MarginRouter,
            budget: &live,
            messages: &[],
            spend: None,
        };
        let options = DecodeOptions {
            max_tokens: 40,
            overlap,
            ask_ahead,
            ..DecodeOptions::default()
        };
        let mut shown = Vec::new();
        generate(collaboration, &prompt, &options, &mut |e: Event| {
            if let Event::Token {
                text,
                id,
                source,
                score,
                edge_candidate,
                ..
            } = e
            {
                shown.push((text, id, source, score.to_bits(), edge_candidate));
            }
            true
        })
        .unwrap();
        shown
    };
    let own: Vec<String> = reply(None, (false, false))
        .into_iter()
        .map(|t| t.0)
        .collect();
    let pieces: Vec<&str> = own.iter().take(8).map(String::as_str).collect();
    let away = |way| {
        let fake = FakeCloud::start(Script::cycle(&pieces)).unwrap();
        fake.push_faults(std::iter::repeat_n(
            tandem_fake_cloud::Fault::Delay(Duration::from_millis(80)),
            80,
        ));
        let shown = reply(Some(&fake), way);
        (shown, fake.requests())
    };
    let (waited, requests) = away((false, false));
    let (drafted, drafted_requests) = away((true, false));
    let (asked_ahead, asked_requests) = away((true, true));
    assert!(requests > 1, "the reply asked the cloud more than once");
    assert!(waited.iter().any(|t| t.2 == TokenSource::Cloud));
    assert_eq!(drafted, waited);
    assert_eq!(drafted_requests, requests);
    assert_eq!(asked_ahead, waited);
    // A request asked ahead is used where the reply comes to it and paid for where it does
    // not, never saved on (both cases: `decode/tests.rs`).
    assert!(
        asked_requests >= requests,
        "asking ahead never asks less: {asked_requests} vs {requests}"
    );
}
