//! Routed replies over a cloud a round trip away: what a user's network costs a reply.
//!
//! Through the app's own path (an [`Engine`] from the app's default settings, one
//! conversation per prompt, so each opens a connection and checks the vocabulary as a new
//! chat does), the stand-in model behind [`DelayProxy`] at several round-trip times. For each
//! prompt of each set (every `k`-th row), interleaved: edge-only, routed waiting for each
//! request (drafting off), routed with the edge drafting while it waits, and routed drafting
//! and asking ahead (the default: the draft's next routed position is asked for at once).
//! Ratios are medians of per-prompt ratios, so a noisy machine moves both sides alike. The
//! sets differ in what a round trip weighs: `chat:dev`'s factual questions get replies of a
//! sentence, where one request is a large part of the reply's time, `open:dev`'s (MT-bench)
//! get replies of a hundred tokens and more.
//!
//! The cloud's own time is measured two ways: the stand-in computing every answer on this
//! machine's CPU, and the same answers replayed after a fixed server time ([`Replay`]), as a
//! GPU server or a hosted API would give them; the replayed rows come after the stand-in's,
//! which recorded every request they send. With `--max-wait-ms` the routed replies run again
//! under each wait limit, to show what a limit saves a far cloud's user and what it costs.

use crate::delay_proxy::{DelayProxy, Distance};
use crate::replay::Replay;
use anyhow::{Context, Result};
use std::path::Path;
use std::time::{Duration, Instant};
use tandem_core::chat_settings::ChatSettings;
use tandem_core::config::Config;
use tandem_core::engine::Engine;
use tandem_core::event::{Event, TokenSource};
use tandem_core::history::ReplyMode;
use tandem_core::message::Message;
use tandem_core::paths::Paths;
use tandem_core::startup::Settled;
use tandem_eval::data::{self, Row};
use tandem_eval::task::{self, ChoiceFormat};

/// What one run measures.
pub struct Setup<'a> {
    /// Edge GGUF.
    pub edge: &'a Path,
    /// Where the cloud (`tandem serve` with the stand-in model) listens.
    pub cloud: std::net::SocketAddr,
    /// Round-trip times to measure at, in milliseconds.
    pub rtts: &'a [u64],
    /// Server times to replay the stand-in's answers at, in milliseconds (after the rows
    /// with the stand-in computing them).
    pub server_times: &'a [u64],
    /// Wait limits for the routed replies to run with after the rows without one, in
    /// milliseconds.
    pub wait_limits: &'a [u32],
    /// Prompt sets (`chat:dev`, `open:dev`, …).
    pub sets: &'a [String],
    /// Prompts of each set per round-trip time.
    pub prompts: usize,
    /// Tokens per reply at most.
    pub max_tokens: u32,
}

/// One reply as the user meets it.
#[derive(Debug, Clone, PartialEq)]
struct Measured {
    wall: Duration,
    first_token: Duration,
    tokens: u32,
    requests: u32,
    cloud_tokens: u32,
    /// Answers that changed the reply (a kept cloud token the edge would not have written),
    /// and their round trips in all: no draft hides these waits, since the edge cannot draft
    /// what the cloud will say.
    changed: u32,
    changed_wait: Duration,
    text: String,
}

/// The ways one prompt was answered at one distance.
struct Prompted {
    edge: Measured,
    waiting: Measured,
    drafting: Measured,
    ahead: Measured,
}

/// Runs the network benchmark and renders its table.
pub fn run(setup: &Setup<'_>) -> Result<String> {
    let home = std::env::temp_dir().join(format!("tandem-bench-network-{}", std::process::id()));
    let paths = Paths {
        config: home.join("config"),
        data: home.join("data"),
        cache: home.join("cache"),
    };
    let sets = setup
        .sets
        .iter()
        .map(|set| Ok((set.as_str(), questions(set, setup.prompts)?)))
        .collect::<Result<Vec<_>>>()?;
    let replay = Replay::start(setup.cloud)?;
    let rtts: Vec<String> = setup.rtts.iter().map(u64::to_string).collect();
    let mut out = format!(
        "Network (RTTs {} ms; {} prompts of each of {}, replies of up to {} tokens; the app's defaults, one thread each for the edge and the stand-in; cloud = `tandem serve` behind a delaying proxy on 127.0.0.1, then its recorded answers replayed):\n\n",
        rtts.join(", "),
        setup.prompts,
        setup.sets.join(", "),
        setup.max_tokens,
    );
    out.push_str(
        "| prompts (median reply, edge-only) | cloud's own time | RTT (± 10% jitter) | routed ÷ edge-only wall time: waiting / drafting / asking ahead (default) | answers that change the reply, per reply (edge-only + their waits) | first token: edge-only → waiting → drafting → asking ahead | requests per reply: drafting / asking ahead | cloud tokens per reply | tokens shown per s: edge-only / waiting / drafting / asking ahead | replies identical to waiting's: drafting, asking ahead | connections opened |\n|---|---|---|---|---|---|---|---|---|---|---|\n"
    );
    let servers = std::iter::once(None).chain(setup.server_times.iter().copied().map(Some));
    let limits: Vec<_> = std::iter::once(None)
        .chain(setup.wait_limits.iter().copied().map(Some))
        .collect();
    for server_ms in servers {
        replay.set_server_time(server_ms.map(Duration::from_millis));
        for (set, questions) in &sets {
            for &limit in &limits {
                for &rtt in setup.rtts {
                    let case = Case {
                        server_ms,
                        limit,
                        rtt,
                    };
                    out.push_str(&measure(setup, &paths, &replay, set, questions, case)?);
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&home);
    Ok(out)
}

/// One row's conditions: the cloud's own time (`None`: the stand-in computing), the wait
/// limit and the round trip.
#[derive(Clone, Copy)]
struct Case {
    server_ms: Option<u64>,
    limit: Option<u32>,
    rtt: u64,
}

/// One row of the table: `questions` of `set` answered under `case`.
fn measure(
    setup: &Setup<'_>,
    paths: &Paths,
    replay: &Replay,
    set: &str,
    questions: &[String],
    case: Case,
) -> Result<String> {
    let distance = Distance {
        rtt: Duration::from_millis(case.rtt),
        jitter: Duration::from_millis(case.rtt / 10),
    };
    let (answers, connections) = at_distance(
        setup,
        paths,
        questions,
        replay.address(),
        distance,
        case.limit,
    )?;
    let (replayed, missed) = replay.counts();
    let mut server = match case.server_ms {
        None => "stand-in on this CPU".to_owned(),
        Some(ms) => format!("{ms} ms (replayed: {replayed} answers, {missed} not recorded)"),
    };
    if let Some(limit) = case.limit {
        server.push_str(&format!(", wait limit {limit} ms"));
    }
    eprintln!(
        "   {set}, {server}, RTT {} ms: {} replies each way",
        case.rtt,
        answers.len()
    );
    Ok(row(set, &server, case.rtt, &answers, connections))
}

/// Every question at one distance, edge-only, waiting, drafting and asking ahead, routed
/// under the wait limit `limit`; with the connections the proxy opened.
fn at_distance(
    setup: &Setup<'_>,
    paths: &Paths,
    questions: &[String],
    cloud: std::net::SocketAddr,
    distance: Distance,
    limit: Option<u32>,
) -> Result<(Vec<Prompted>, u64)> {
    let proxy = DelayProxy::start(cloud, distance)?;
    let settings = config(setup, &proxy, Way::AskingAhead, limit).chat_settings();
    let open = |way| -> Result<Engine> {
        let settled = Settled::new(config(setup, &proxy, way, limit), paths)?;
        Engine::open(&settled, paths).context("opening the engine")
    };
    let waiting = open(Way::Waiting)?;
    let drafting = open(Way::Drafting)?;
    let ahead = open(Way::AskingAhead)?;
    let mut answers = Vec::new();
    for question in questions {
        let ask = |engine, mode| reply(engine, &settings, question, mode);
        answers.push(Prompted {
            edge: ask(&ahead, ReplyMode::Edge)?,
            waiting: ask(&waiting, ReplyMode::Routed)?,
            drafting: ask(&drafting, ReplyMode::Routed)?,
            ahead: ask(&ahead, ReplyMode::Routed)?,
        });
    }
    Ok((answers, proxy.connections()))
}

/// Every `k`-th question of `set`, `count` in all, as the app sends them.
fn questions(set: &str, count: usize) -> Result<Vec<String>> {
    let rows = data::load(set, &data::dir(), None)?;
    let every = (rows.len() / count.max(1)).max(1);
    Ok(rows
        .iter()
        .step_by(every)
        .take(count)
        .map(|row: &Row| task::prompt(row, ChoiceFormat::default()))
        .collect())
}

/// How a routed reply meets the round trips.
#[derive(Clone, Copy)]
enum Way {
    /// Waits for each answer.
    Waiting,
    /// Drafts while it waits.
    Drafting,
    /// Drafts and asks ahead (the default).
    AskingAhead,
}

/// The app's default settings, its cloud behind `proxy`, meeting round trips `way`.
fn config(setup: &Setup<'_>, proxy: &DelayProxy, way: Way, limit: Option<u32>) -> Config {
    let mut config = Config {
        edge: setup.edge.display().to_string(),
        // The stand-in shares the machine's two cores: one thread each.
        threads: Some(1),
        max_tokens: setup.max_tokens,
        ..Config::default()
    };
    config.cloud.url = proxy.url("/v1");
    config.cloud.overlap = !matches!(way, Way::Waiting);
    config.cloud.ask_ahead = matches!(way, Way::AskingAhead);
    config.budget.max_wait_ms = limit;
    config
}

/// One reply in a new conversation, timed from the user's send.
fn reply(
    engine: &Engine,
    settings: &ChatSettings,
    question: &str,
    mode: ReplyMode,
) -> Result<Measured> {
    let mut chat = engine.chat()?;
    let sent = Instant::now();
    let mut first_token = None;
    let mut text = String::new();
    let (mut tokens, mut cloud_tokens) = (0, 0);
    let mut changes = Changes::default();
    let mut sink = |event: Event| {
        changes.see(&event);
        if let Event::Token {
            text: piece,
            source,
            ..
        } = event
        {
            first_token.get_or_insert_with(|| sent.elapsed());
            text.push_str(&piece);
            tokens += 1;
            cloud_tokens += u32::from(source == TokenSource::Cloud);
        }
        true
    };
    let usage = chat.reply(&[Message::user(question)], mode, settings, &mut sink)?;
    Ok(Measured {
        wall: sent.elapsed(),
        first_token: first_token.unwrap_or_default(),
        tokens,
        requests: usage.cloud_requests,
        cloud_tokens,
        changed: changes.count,
        changed_wait: changes.wait,
        text,
    })
}

/// Counts a reply's answers that changed it, from its events.
#[derive(Default)]
struct Changes {
    count: u32,
    wait: Duration,
    /// The latest answer's round trip, until one of its tokens changes the reply.
    answer: Option<Duration>,
}

impl Changes {
    fn see(&mut self, event: &Event) {
        match event {
            Event::CloudRequest { ok, ms, .. } => {
                self.answer = ok.then(|| Duration::from_millis(*ms));
            }
            Event::Token {
                text,
                source: TokenSource::Cloud,
                edge_candidate: Some(edge),
                ..
            } if edge != text => {
                if let Some(wait) = self.answer.take() {
                    self.count += 1;
                    self.wait += wait;
                }
            }
            _ => {}
        }
    }
}

fn row(set: &str, server: &str, rtt: u64, answers: &[Prompted], connections: u64) -> String {
    let ratio = |pick: fn(&Prompted) -> &Measured| {
        median(
            answers
                .iter()
                .map(|a| pick(a).wall.as_secs_f64() / a.edge.wall.as_secs_f64()),
        )
    };
    let first = |pick: fn(&Prompted) -> &Measured| {
        median(answers.iter().map(|a| pick(a).first_token.as_secs_f64()))
    };
    let rate = |pick: fn(&Prompted) -> &Measured| {
        median(
            answers
                .iter()
                .map(|a| f64::from(pick(a).tokens) / pick(a).wall.as_secs_f64()),
        )
    };
    let per_reply = |pick: fn(&Prompted) -> &Measured, count: fn(&Measured) -> u32| {
        answers
            .iter()
            .map(|a| f64::from(count(pick(a))))
            .sum::<f64>()
            / answers.len() as f64
    };
    let identical = |pick: fn(&Prompted) -> &Measured| {
        answers
            .iter()
            .filter(|a| pick(a).text == a.waiting.text)
            .count()
    };
    // Edge-only plus every wait for an answer that changed the reply: what a reply would
    // take if every other round trip were hidden.
    let unhideable = median(answers.iter().map(|a| {
        let edge = a.edge.wall.as_secs_f64();
        (edge + a.ahead.changed_wait.as_secs_f64()) / edge
    }));
    let reply_tokens = median(answers.iter().map(|a| f64::from(a.edge.tokens)));
    format!(
        "| {set} ({:.0} tokens) | {server} | {rtt} ms | {:.2}× / {:.2}× / {:.2}× | {:.1} ({:.2}×) | {:.2} → {:.2} → {:.2} → {:.2} s | {:.1} / {:.1} | {:.1} | {:.1} / {:.1} / {:.1} / {:.1} | {}, {} of {} | {connections} |\n",
        reply_tokens,
        ratio(|a| &a.waiting),
        ratio(|a| &a.drafting),
        ratio(|a| &a.ahead),
        per_reply(|a| &a.ahead, |m| m.changed),
        unhideable,
        first(|a| &a.edge),
        first(|a| &a.waiting),
        first(|a| &a.drafting),
        first(|a| &a.ahead),
        per_reply(|a| &a.drafting, |m| m.requests),
        per_reply(|a| &a.ahead, |m| m.requests),
        per_reply(|a| &a.ahead, |m| m.cloud_tokens),
        rate(|a| &a.edge),
        rate(|a| &a.waiting),
        rate(|a| &a.drafting),
        rate(|a| &a.ahead),
        identical(|a| &a.drafting),
        identical(|a| &a.ahead),
        answers.len(),
    )
}

fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.collect();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(ms: u64) -> Event {
        Event::CloudRequest {
            sent: String::new(),
            ok: true,
            ms,
            prompt_tokens: 10,
            completion_tokens: 2,
            cost_usd: 0.0,
            unused: false,
        }
    }

    fn token(text: &str, edge: Option<&str>) -> Event {
        Event::Token {
            text: text.into(),
            id: 1,
            source: match edge {
                Some(_) => TokenSource::Cloud,
                None => TokenSource::Edge,
            },
            score: 0.5,
            edge_candidate: edge.map(Into::into),
            request_ms: None,
        }
    }

    #[test]
    fn an_answer_counts_once_where_one_of_its_tokens_is_not_the_edges() {
        let mut changes = Changes::default();
        let events = [
            // Agrees with the edge: hidden behind the draft.
            answer(250),
            token(" Paris", Some(" Paris")),
            token(" is", None),
            // Two tokens the edge would not have written, one answer.
            answer(300),
            token(" Lyon", Some(" Paris")),
            token("nais", Some(".")),
            // A failed request changes nothing.
            Event::CloudRequest {
                sent: String::new(),
                ok: false,
                ms: 900,
                prompt_tokens: 0,
                completion_tokens: 0,
                cost_usd: 0.0,
                unused: false,
            },
            token(" city", None),
        ];
        for event in &events {
            changes.see(event);
        }
        assert_eq!(changes.count, 1);
        assert_eq!(changes.wait, Duration::from_millis(300));
    }
}
