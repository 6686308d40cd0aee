//! The fault matrix: every way a cloud can fail, met as the app meets it (the engine on its
//! own thread, SmolLM2 on llama.cpp, a cloud on 127.0.0.1 that asks for every token), and
//! what the user gets each time: a finished reply, written locally where the cloud failed,
//! with at most one notice per failure streak saying why.
//!
//! The assertions are what a user would notice, never a time. The measured figures (wall
//! time, requests, notices, resident memory) are printed as the fault matrix in `docs/testing.md`:
//! `cargo test --workspace --test worker fault -- --nocapture`. (A module of the engine
//! thread's test binary: one binary less to link against llama.cpp.)

use crate::support::{model, SMOLLM2};
use std::time::{Duration, Instant};
use tandem_core::budget::{CloudBudget, Prices};
use tandem_core::config::Config;
use tandem_core::engine_thread::{EngineThread, ReplyHandle};
use tandem_core::event::{Event, FinishReason, NoticeKind, TokenSource};
use tandem_core::history::ReplyMode;
use tandem_core::message::Message;
use tandem_core::paths::Paths;
use tandem_core::router::RouterKind;
use tandem_core::startup::Settled;
use tandem_fake_cloud::{FakeCloud, Fault, Script};

/// The configured request timeout: every case must end within a few of these.
const TIMEOUT_SECS: f32 = 2.0;
const MAX_TOKENS: u32 = 12;

/// What a case does to the cloud, and what the user must see.
struct Case {
    name: &'static str,
    /// Sets the cloud up and returns its URL (the fake's, or one that cannot answer).
    cloud: Box<dyn Fn(&FakeCloud) -> String>,
    /// Changes the settings (a spend cap, say).
    settings: fn(&mut Config),
    /// Acts on the running reply after the first request reached the cloud.
    during: Option<fn(&EngineThread, &ReplyHandle)>,
    expect: Expect,
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Expect {
    /// The cloud writes the reply.
    Cloud,
    /// The edge writes it, with one notice naming the failure (and one giving up).
    Fallback,
    /// Some cloud tokens, then the edge, without an error notice (a limit the user set).
    CloudThenEdge,
    /// Some cloud tokens, then the edge, with one notice that the spend cap was reached.
    Capped,
    /// The user stopped it.
    Cancelled,
}

fn persistent(fake: &FakeCloud, fault: Fault) -> String {
    fake.push_faults(std::iter::repeat_n(fault, 40));
    fake.base_url()
}

fn cases() -> Vec<Case> {
    let plain = |_: &mut Config| {};
    let case = |name, cloud: Box<dyn Fn(&FakeCloud) -> String>, expect| Case {
        name,
        cloud,
        settings: plain,
        during: None,
        expect,
    };
    let fault = |f: Fault| -> Box<dyn Fn(&FakeCloud) -> String> {
        Box::new(move |fake| persistent(fake, f.clone()))
    };
    vec![
        case("healthy cloud", Box::new(|f| f.base_url()), Expect::Cloud),
        case(
            "connection refused",
            Box::new(|_| {
                let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                let url = format!("http://{}/v1", closed.local_addr().unwrap());
                drop(closed);
                url
            }),
            Expect::Fallback,
        ),
        case(
            "DNS failure",
            Box::new(|_| "http://tandem-no-such-host.invalid/v1".into()),
            Expect::Fallback,
        ),
        case(
            "connect timeout (the server's backlog is full)",
            Box::new(|_| {
                // A listener with room for one waiting connection, taken: the kernel drops
                // further handshakes, so a connect hangs as it does to a host that is down.
                use socket2::{Domain, Socket, Type};
                let full = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
                full.bind(
                    &"127.0.0.1:0"
                        .parse::<std::net::SocketAddr>()
                        .unwrap()
                        .into(),
                )
                .unwrap();
                full.listen(0).unwrap();
                let addr = full.local_addr().unwrap().as_socket().unwrap();
                for _ in 0..2 {
                    let taken =
                        std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200));
                    std::mem::forget(taken);
                }
                std::mem::forget(full);
                format!("http://{addr}/v1")
            }),
            Expect::Fallback,
        ),
        case(
            "accepts the connection, never answers",
            Box::new(|_| {
                let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                let url = format!("http://{}/v1", silent.local_addr().unwrap());
                std::mem::forget(silent); // the kernel accepts; nobody reads or writes
                url
            }),
            Expect::Fallback,
        ),
        case(
            "drip: one byte every 200 ms",
            fault(Fault::Drip(Duration::from_millis(200))),
            Expect::Fallback,
        ),
        case("endless body", fault(Fault::EndlessBody), Expect::Fallback),
        case(
            "500 tokens for a span of 4",
            fault(Fault::Overlong(500)),
            Expect::Cloud,
        ),
        case(
            "out-of-vocabulary ids",
            fault(Fault::ForeignIds),
            Expect::Cloud,
        ),
        case(
            "401 wrong key",
            fault(Fault::Unauthorized),
            Expect::Fallback,
        ),
        case("403 forbidden", fault(Fault::Status(403)), Expect::Fallback),
        case("404 not found", fault(Fault::Status(404)), Expect::Fallback),
        case(
            "429, Retry-After 1 s, once",
            Box::new(|fake| {
                fake.push_faults([Fault::TooManyRequests {
                    retry_after_secs: 1,
                }]);
                fake.base_url()
            }),
            Expect::Cloud,
        ),
        case(
            "429, Retry-After 120 s",
            fault(Fault::TooManyRequests {
                retry_after_secs: 120,
            }),
            Expect::Fallback,
        ),
        case(
            "500, every time",
            fault(Fault::ServerError),
            Expect::Fallback,
        ),
        case(
            "503, every time",
            fault(Fault::Status(503)),
            Expect::Fallback,
        ),
        case(
            "malformed JSON",
            fault(Fault::MalformedJson),
            Expect::Fallback,
        ),
        case(
            "body cut off in transit",
            fault(Fault::CutBody),
            Expect::Fallback,
        ),
        case(
            "307 to another origin",
            Box::new(|fake| {
                let elsewhere = FakeCloud::start(Script::cycle(&[" leaked"])).unwrap();
                let url = persistent(fake, Fault::Redirect(elsewhere.base_url()));
                std::mem::forget(elsewhere); // listening, never asked (checked by cloud_client.rs)
                url
            }),
            Expect::Fallback,
        ),
        Case {
            name: "daily spend cap reached mid-reply",
            cloud: Box::new(|f| f.base_url()),
            settings: |c| {
                c.budget.prices = Prices {
                    input_per_mtok: 0.0,
                    output_per_mtok: 1_000.0,
                    cached_input_per_mtok: None,
                };
                c.budget.daily_spend_cap_usd = Some(0.005); // five cloud tokens
            },
            during: None,
            expect: Expect::Capped,
        },
        Case {
            name: "cloud switched off mid-reply",
            cloud: Box::new(|f| f.base_url()),
            settings: plain,
            during: Some(|worker, _| worker.budget().set(CloudBudget::off())),
            expect: Expect::CloudThenEdge,
        },
        Case {
            name: "Stop while a request waits (cloud answers in 20 s)",
            cloud: Box::new(|f| persistent(f, Fault::Delay(Duration::from_secs(20)))),
            settings: plain,
            during: Some(|_, reply| reply.cancel()),
            expect: Expect::Cancelled,
        },
    ]
}

/// What one reply showed the user.
struct Seen {
    reason: FinishReason,
    edge: usize,
    cloud: usize,
    notices: Vec<(NoticeKind, String)>,
    seconds: f64,
}

fn run(edge: &std::path::Path, case: &Case) -> (Seen, usize) {
    let home = tempfile::tempdir().unwrap();
    let fake = FakeCloud::start(Script::cycle(&[" ocean", " waves"])).unwrap();
    let mut config = Config {
        edge: edge.to_str().unwrap().to_owned(),
        threads: Some(1),
        context: 1024,
        max_tokens: MAX_TOKENS,
        budget: CloudBudget::share(1.0),
        ..Config::default()
    };
    config.cloud.url = (case.cloud)(&fake);
    config.cloud.timeout_secs = TIMEOUT_SECS;
    config.router.kind = RouterKind::CloudOnly;
    (case.settings)(&mut config);
    let paths = Paths {
        config: home.path().join("config"),
        data: home.path().join("data"),
        cache: home.path().join("cache"),
    };
    let chat = config.chat_settings();
    let worker = EngineThread::spawn(Settled::new(config, &paths).unwrap(), paths).unwrap();
    let started = Instant::now();
    let reply = worker
        .reply(
            vec![Message::user("Tell me about the sea.")],
            ReplyMode::Routed,
            chat,
        )
        .unwrap();
    let mut seen = Seen {
        reason: FinishReason::Length,
        edge: 0,
        cloud: 0,
        notices: Vec::new(),
        seconds: 0.0,
    };
    let mut acted = false;
    loop {
        let event = match reply.events.recv_timeout(Duration::from_millis(20)) {
            Ok(event) => Some(event),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => None,
            Err(e) => panic!("{}: the reply ended without finishing: {e}", case.name),
        };
        // Acts once the cloud has answered a first token, or has held a request 300 ms.
        if let (Some(act), false) = (case.during, acted) {
            let waiting = fake.requests() > 0 && started.elapsed() > Duration::from_millis(300);
            if seen.cloud > 0 || waiting {
                act(&worker, &reply);
                acted = true;
            }
        }
        match event {
            Some(Event::Token { source, .. }) => match source {
                TokenSource::Edge => seen.edge += 1,
                _ => seen.cloud += 1,
            },
            Some(Event::Notice { kind, message }) => seen.notices.push((kind, message)),
            Some(Event::Finished { reason, .. }) => {
                seen.reason = reason;
                break;
            }
            _ => {}
        }
    }
    seen.seconds = started.elapsed().as_secs_f64();
    (seen, fake.requests())
}

#[test]
fn every_cloud_fault_ends_in_a_finished_reply_that_says_why() {
    let Some(edge) = model(SMOLLM2) else { return };
    let mut table = vec![
        "| case | reply | tokens edge/cloud | notices | requests seen | time | resident MiB |"
            .to_owned(),
        "|---|---|---|---|---|---|---|".to_owned(),
    ];
    for case in cases() {
        let (seen, requests) = run(&edge, &case);
        let errors = seen
            .notices
            .iter()
            .filter(|(k, _)| matches!(k, NoticeKind::CloudError | NoticeKind::CloudUnavailable))
            .count();
        let what = format!(
            "{}: {:?}, {}/{}, notices {:?}",
            case.name, seen.reason, seen.edge, seen.cloud, seen.notices
        );
        match case.expect {
            Expect::Cloud => {
                assert!(seen.cloud > 0 && errors == 0, "{what}");
                assert_eq!(seen.reason, FinishReason::Length, "{what}");
            }
            Expect::Fallback => {
                // Written locally to the end, with one notice for the streak and one
                // saying the reply gave up on the cloud.
                assert_eq!(seen.edge as u32, MAX_TOKENS, "{what}");
                assert_eq!(seen.reason, FinishReason::Length, "{what}");
                assert!((1..=2).contains(&errors), "{what}");
            }
            Expect::CloudThenEdge => {
                assert!(seen.cloud > 0 && seen.edge > 0 && errors == 0, "{what}");
            }
            Expect::Capped => {
                assert!(seen.cloud > 0 && seen.edge > 0 && errors == 0, "{what}");
                let capped = |(k, _): &&(NoticeKind, String)| *k == NoticeKind::SpendCapReached;
                assert_eq!(seen.notices.iter().filter(capped).count(), 1, "{what}");
            }
            Expect::Cancelled => assert_eq!(seen.reason, FinishReason::Cancelled, "{what}"),
        }
        // The kinds, and the first notice's sentence (the others repeat its reason).
        let said = match seen.notices.first() {
            None => String::new(),
            Some((_, first)) => {
                let kinds: Vec<String> =
                    seen.notices.iter().map(|(k, _)| format!("{k:?}")).collect();
                let short: String = first.chars().take(80).collect();
                format!("{}: \"{short}…\"", kinds.join(" + "))
            }
        };
        table.push(format!(
            "| {} | {:?} | {}/{} | {} | {} | {:.1} s | {} |",
            case.name,
            seen.reason,
            seen.edge,
            seen.cloud,
            if said.is_empty() { "–".into() } else { said },
            requests,
            seen.seconds,
            crate::support::engine::footprint().0 / 1024
        ));
    }
    println!(
        "\nfault matrix (timeout {TIMEOUT_SECS} s, {MAX_TOKENS} tokens, cloud-only):\n{}",
        table.join("\n")
    );
}
