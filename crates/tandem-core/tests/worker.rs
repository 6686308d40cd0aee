//! The engine on its own thread, driven as the desktop app will drive it.

mod fault_matrix;
mod support;

use support::engine::{asking, config, drain, paths, spawn};
use support::{model, SMOLLM2};
use tandem_core::budget::CloudBudget;
use tandem_core::engine::OpenError;
use tandem_core::engine_thread::EngineThread;
use tandem_core::event::{Event, FinishReason, TokenSource};
use tandem_core::history::ReplyMode;
use tandem_core::message::Message;
use tandem_core::router::RouterKind;
use tandem_core::spend::SpendLedger;
use tandem_core::startup;
use tandem_fake_cloud::{FakeCloud, Script};

#[test]
fn replies_stream_from_the_engine_thread_and_can_be_cancelled_and_rebudgeted() {
    let Some(edge) = model(SMOLLM2) else { return };
    let home = tempfile::tempdir().unwrap();
    let fake = FakeCloud::start(Script::cycle(&[" ocean"])).unwrap();
    let config = config(&edge, &fake);
    let chat = config.chat_settings();
    let worker = spawn(config, home.path());

    // Cancelled after three tokens: it still finishes, as cancelled.
    let reply = worker
        .reply(
            asking("Tell me a long story about the sea."),
            ReplyMode::Routed,
            chat.clone(),
        )
        .unwrap();
    let reason = drain(&reply, |n, _| {
        if n == 2 {
            reply.cancel();
        }
    });
    assert_eq!(reason, FinishReason::Cancelled);

    // The next turn works; the budget handle is the one the engine thread reads (the decode
    // tests show a change landing mid-reply at the next token).
    let reply = worker
        .reply(asking("And then?"), ReplyMode::Routed, chat.clone())
        .unwrap();
    let mut sources = Vec::new();
    assert_eq!(
        drain(&reply, |_, source| sources.push(source)),
        FinishReason::Length
    );
    assert!(
        sources.iter().all(|s| *s == TokenSource::Cloud),
        "{sources:?}"
    );
    // Today's meter already counts the reply when `finished` arrives.
    let today = SpendLedger::new(&paths(home.path()).data).today();
    assert!(today.cloud_tokens >= 40, "{today:?}");
    worker.budget().set(CloudBudget::off());
    let requests = fake.requests();
    let reply = worker
        .reply(asking("Go on."), ReplyMode::Routed, chat.clone())
        .unwrap();
    let mut sources = Vec::new();
    drain(&reply, |_, source| sources.push(source));
    assert!(
        sources.iter().all(|s| *s == TokenSource::Edge),
        "{sources:?}"
    );
    assert_eq!(fake.requests(), requests);
}

#[test]
fn reply_modes_keep_everything_local_or_ask_the_cloud_for_every_token() {
    let Some(edge) = model(SMOLLM2) else { return };
    let home = tempfile::tempdir().unwrap();
    let fake = FakeCloud::start(Script::cycle(&[" ocean"])).unwrap();
    let mut config = config(&edge, &fake);
    config.router.kind = RouterKind::Entropy;
    config.budget = CloudBudget::share(0.1);
    config.max_tokens = 12;
    let chat = config.chat_settings();
    let worker = spawn(config, home.path());
    let history = vec![
        Message::user("Name a colour."),
        Message::assistant("Blue."),
        Message::user("Another one?"),
    ];

    let reply = worker
        .reply(history.clone(), ReplyMode::Edge, chat.clone())
        .unwrap();
    let mut sources = Vec::new();
    drain(&reply, |_, source| sources.push(source));
    assert!(sources.iter().all(|s| *s == TokenSource::Edge));
    assert_eq!(
        fake.requests(),
        0,
        "edge mode must not reach the cloud at all"
    );

    let reply = worker
        .reply(history, ReplyMode::Cloud, chat.clone())
        .unwrap();
    let mut sent = Vec::new();
    let mut sources = Vec::new();
    for event in reply.events.iter() {
        match event {
            Event::CloudRequest { sent: text, ok, .. } => sent.push((text, ok)),
            Event::Token { source, .. } => sources.push(source),
            _ => {}
        }
    }
    assert!(!sources.is_empty() && sources.iter().all(|s| *s == TokenSource::Cloud));
    // The privacy view shows the whole conversation as it was sent, earlier turns included.
    let (first, ok) = &sent[0];
    assert!(*ok);
    assert!(
        first.contains("Name a colour.") && first.contains("Another one?"),
        "{first}"
    );
    let completions = fake.recorded();
    let completions: Vec<_> = completions
        .iter()
        .filter(|r| r.path.ends_with("/completions"))
        .collect();
    assert_eq!(sent.len(), completions.len());
}

#[test]
fn a_missing_model_fails_the_spawn_with_the_reason() {
    let home = tempfile::tempdir().unwrap();
    let fake = FakeCloud::start(Script::cycle(&["x"])).unwrap();
    let paths = paths(home.path());
    let config = config(&home.path().join("absent.gguf"), &fake);
    let err = startup::start(config, &paths, |settled, paths| {
        EngineThread::spawn(settled.clone(), paths.clone())
    })
    .err()
    .unwrap();
    assert!(matches!(err, OpenError::Model(_)), "{err}");
    assert!(err.to_string().contains("absent.gguf"), "{err}");
}

#[test]
fn stop_ends_a_reply_that_is_waiting_for_a_stalled_cloud_at_once() {
    let Some(edge) = model(SMOLLM2) else { return };
    let home = tempfile::tempdir().unwrap();
    let fake = FakeCloud::start(Script::cycle(&[" ocean"])).unwrap();
    let mut config = config(&edge, &fake);
    config.cloud.timeout_secs = 30.0;
    let chat = config.chat_settings();
    let worker = spawn(config, home.path());
    fake.push_faults([tandem_fake_cloud::Fault::Delay(
        std::time::Duration::from_secs(20),
    )]);
    let reply = worker
        .reply(
            asking("Tell me about the sea."),
            ReplyMode::Routed,
            chat.clone(),
        )
        .unwrap();
    // The first token goes to the cloud, which takes 20 s to answer.
    while fake.requests() == 0 {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    let stopped = std::time::Instant::now();
    reply.cancel();
    let reason = drain(&reply, |_, _| {});
    assert_eq!(reason, FinishReason::Cancelled);
    // The client looks at Stop every 50 ms; the bound is loose for a loaded machine, and
    // far below the 20 s the cloud would have held the reply.
    assert!(
        stopped.elapsed() < std::time::Duration::from_secs(2),
        "Stop took {:?}",
        stopped.elapsed()
    );
}
