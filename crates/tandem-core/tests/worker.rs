//! The engine on its own thread, driven as the desktop app will drive it.

mod fault_matrix;
mod support;

use support::{model, SMOLLM2};
use tandem_core::budget::CloudBudget;
use tandem_core::config::Config;
use tandem_core::engine::{OpenError, ReplyMode};
use tandem_core::engine_thread::{EngineThread, ReplyHandle};
use tandem_core::event::{Event, FinishReason, TokenSource};
use tandem_core::message::Message;
use tandem_core::paths::Paths;
use tandem_core::router::RouterKind;
use tandem_core::spend::SpendLedger;
use tandem_fake_cloud::{FakeCloud, Script};

fn paths(home: &std::path::Path) -> Paths {
    Paths {
        config: home.join("config"),
        data: home.join("data"),
        cache: home.join("cache"),
    }
}

fn config(edge: &std::path::Path, cloud: &FakeCloud) -> Config {
    let mut c = Config {
        edge: edge.to_str().unwrap().to_owned(),
        threads: Some(1),
        context: 1024,
        max_tokens: 40,
        budget: CloudBudget::share(1.0),
        ..Config::default()
    };
    c.cloud.url = cloud.base_url();
    c.router.kind = RouterKind::CloudOnly;
    c
}

/// A conversation of user turns only, ending with `last`.
fn asking(last: &str) -> Vec<Message> {
    vec![Message::user(last)]
}

/// Reads a reply to its end, calling `each` with every token's source.
fn drain(reply: &ReplyHandle, mut each: impl FnMut(usize, TokenSource)) -> FinishReason {
    let mut n = 0;
    for event in reply.events.iter() {
        match event {
            Event::Token { source, .. } => {
                each(n, source);
                n += 1;
            }
            Event::Finished { reason, .. } => return reason,
            _ => {}
        }
    }
    panic!("the reply ended without a finished event");
}

#[test]
fn replies_stream_from_the_engine_thread_and_can_be_cancelled_and_rebudgeted() {
    let Some(edge) = model(SMOLLM2) else { return };
    let home = tempfile::tempdir().unwrap();
    let fake = FakeCloud::start(Script::cycle(&[" ocean"])).unwrap();
    let config = config(&edge, &fake);
    let chat = config.chat_settings();
    let worker = EngineThread::spawn(config, paths(home.path())).unwrap();

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
    let worker = EngineThread::spawn(config, paths(home.path())).unwrap();
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
    let err = EngineThread::spawn(
        config(&home.path().join("absent.gguf"), &fake),
        paths(home.path()),
    )
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
    let worker = EngineThread::spawn(config, paths(home.path())).unwrap();
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

/// Resident memory (KiB) and open file descriptors of this process (also for the fault
/// matrix's table).
fn footprint() -> (u64, usize) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    let fds = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count());
    (rss, fds)
}

#[test]
fn two_hundred_replies_leave_memory_and_file_descriptors_flat() {
    let Some(edge) = model(SMOLLM2) else { return };
    let home = tempfile::tempdir().unwrap();
    let fake = FakeCloud::start(Script::cycle(&[" ocean"])).unwrap();
    let mut config = config(&edge, &fake);
    config.router.kind = RouterKind::Margin;
    config.budget = CloudBudget::share(0.3);
    config.max_tokens = 4;
    let chat = config.chat_settings();
    let worker = EngineThread::spawn(config, paths(home.path())).unwrap();
    let ask = |n: usize| {
        for i in 0..n {
            let reply = worker
                .reply(
                    asking(&format!("Say something about the sea, {i}.")),
                    ReplyMode::Routed,
                    chat.clone(),
                )
                .unwrap();
            drain(&reply, |_, _| {});
        }
    };
    ask(20); // allocator and connection pool warmed up
    let before = footprint();
    ask(200);
    let after = footprint();
    println!(
        "200 replies: resident {} → {} MiB, open file descriptors {} → {}, cloud requests {}",
        before.0 / 1024,
        after.0 / 1024,
        before.1,
        after.1,
        fake.requests()
    );
    assert!(fake.requests() > 200, "the cloud took part");
    assert!(
        after.1 <= before.1 + 2,
        "file descriptors leak: {before:?} → {after:?}"
    );
    assert!(
        after.0 < before.0 + 32 * 1024,
        "memory grows: {before:?} → {after:?}"
    );
}
