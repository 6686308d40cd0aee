//! A conversation three times longer than the context window goes on as its policy says,
//! through the engine thread the app uses, with a real model and a cloud on 127.0.0.1.

mod support;

use support::{model, SMOLLM2};
use tandem_core::budget::CloudBudget;
use tandem_core::chat_settings::ChatSettings;
use tandem_core::config::Config;
use tandem_core::engine_thread::EngineThread;
use tandem_core::event::{Event, FinishReason, NoticeKind};
use tandem_core::history::ReplyMode;
use tandem_core::message::Message;
use tandem_core::paths::Paths;
use tandem_core::router::RouterKind;
use tandem_core::startup::Settled;
use tandem_core::window::ContextPolicy;
use tandem_fake_cloud::{FakeCloud, Script};

const CONTEXT: u32 = 512;

/// `exchanges` questions and answers of about 40 tokens each (three times the window at 20),
/// then `last`.
fn long_talk(exchanges: usize, last: &str) -> Vec<Message> {
    let mut turns = Vec::new();
    for i in 0..exchanges {
        turns.push(Message::user(format!(
            "Question {i}: what can you tell me about the number {i}, its divisors, and \
             whether it is prime or a perfect square?"
        )));
        turns.push(Message::assistant(format!(
            "Answer {i}: the number {i} has a few divisors; whether it is prime depends on \
             them, and it is a perfect square only if its root is whole."
        )));
    }
    turns.push(Message::user(last));
    turns
}

/// What one reply said about itself.
#[derive(Default)]
struct Seen {
    left_out: Option<(u32, u32)>,
    sent: Vec<String>,
    text: String,
    prefill_tokens: u32,
    notices: Vec<(NoticeKind, String)>,
    started: bool,
    reason: Option<FinishReason>,
}

struct Chat {
    worker: EngineThread,
    _fake: FakeCloud,
    _home: tempfile::TempDir,
}

impl Chat {
    fn start() -> Option<Chat> {
        let edge = model(SMOLLM2)?;
        let home = tempfile::tempdir().unwrap();
        let fake = FakeCloud::start(Script::cycle(&[" Four", "."])).unwrap();
        let mut config = Config {
            edge: edge.to_str().unwrap().to_owned(),
            threads: Some(1),
            context: CONTEXT,
            budget: CloudBudget::share(1.0),
            ..Config::default()
        };
        config.cloud.url = fake.base_url();
        config.router.kind = RouterKind::CloudOnly;
        let paths = Paths {
            config: home.path().join("config"),
            data: home.path().join("data"),
            cache: home.path().join("cache"),
        };
        let worker = EngineThread::spawn(Settled::new(config, &paths).unwrap(), paths).unwrap();
        Some(Chat {
            worker,
            _fake: fake,
            _home: home,
        })
    }

    fn reply(&self, history: &[Message], policy: ContextPolicy) -> Seen {
        let settings = ChatSettings {
            max_tokens: 8,
            context_policy: policy,
            ..ChatSettings::default()
        };
        let reply = (self.worker)
            .reply(history.to_vec(), ReplyMode::Routed, settings)
            .unwrap();
        let mut seen = Seen::default();
        for event in reply.events.iter() {
            match event {
                Event::LeftOut { from, to } => {
                    assert!(!seen.started, "left_out comes before started");
                    seen.left_out = Some((from, to));
                }
                Event::Started { .. } => seen.started = true,
                Event::CloudRequest { sent, .. } => seen.sent.push(sent),
                Event::Token { text, .. } => seen.text.push_str(&text),
                Event::Notice { kind, message } => seen.notices.push((kind, message)),
                Event::Finished {
                    reason, timings, ..
                } => {
                    seen.prefill_tokens = timings.prefill_tokens;
                    seen.reason = Some(reason);
                    break;
                }
            }
        }
        seen
    }
}

#[test]
fn a_conversation_three_times_the_window_rolls_on_and_rebuilds_the_cache_once() {
    let Some(chat) = Chat::start() else { return };
    let mut history = long_talk(20, "Last question: what is two plus two?");

    let first = chat.reply(&history, ContextPolicy::Rolling);
    assert_eq!(
        first.reason,
        Some(FinishReason::Length),
        "{:?}",
        first.notices
    );
    let (from, to) = first.left_out.expect("earlier turns are left out");
    assert_eq!(from, 0);
    assert!(
        to > 30 && to % 2 == 0,
        "the view starts at a question: {to}"
    );
    // The cloud is sent the same window as the edge: the last question, not the first ones.
    let sent = &first.sent[0];
    assert!(sent.contains("Last question") && !sent.contains("Question 0:"));
    assert!(sent.contains(&format!("Question {}:", to / 2)), "{sent}");
    assert!(!sent.contains(&format!("Question {}:", to / 2 - 1)));

    // The next turn keeps the same window and decodes only what it adds.
    history.push(Message::assistant(first.text.clone()));
    history.push(Message::user("And three plus three?"));
    let second = chat.reply(&history, ContextPolicy::Rolling);
    assert_eq!(second.reason, Some(FinishReason::Length));
    assert_eq!(second.left_out, Some((from, to)));
    assert!(
        second.prefill_tokens < 60 && first.prefill_tokens > 150,
        "prefill {} then {}",
        first.prefill_tokens,
        second.prefill_tokens
    );
}

#[test]
fn stop_ends_at_once_and_drop_middle_keeps_the_first_exchange() {
    let Some(chat) = Chat::start() else { return };
    let history = long_talk(20, "Last question: what is two plus two?");

    let stopped = chat.reply(&history, ContextPolicy::Stop);
    assert_eq!(stopped.reason, Some(FinishReason::ContextFull));
    assert!(!stopped.started && stopped.sent.is_empty());
    assert_eq!(stopped.notices[0].0, NoticeKind::ContextFull);
    assert!(stopped.notices[0].1.contains("start a new one"));

    let kept = chat.reply(&history, ContextPolicy::DropMiddle);
    assert_eq!(kept.reason, Some(FinishReason::Length));
    let (from, to) = kept.left_out.unwrap();
    assert_eq!(from, 2);
    let sent = &kept.sent[0];
    assert!(sent.contains("Question 0:") && sent.contains("Answer 0:"));
    assert!(!sent.contains("Question 1:") && sent.contains(&format!("Question {}:", to / 2)));

    let huge = vec![Message::user("many words ".repeat(600))];
    let refused = chat.reply(&huge, ContextPolicy::Rolling);
    assert_eq!(refused.reason, Some(FinishReason::ContextFull));
    assert!(
        refused.notices[0].1.contains("does not fit"),
        "{:?}",
        refused.notices
    );
}
