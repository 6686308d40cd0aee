//! The JSON the UI receives, written from the real Rust types and the real commands into
//! `ui/src/ipc/fixtures/`: the UI's tests check their TypeScript types against it, and the
//! browser tests' mock backend answers from the recorded transcript instead of re-stating the
//! backend's rules. A change on either side without the other fails one of the two suites.
//!
//! After an intended change:
//! `TANDEM_UPDATE_FIXTURES=1 cargo test --workspace --test ipc_fixtures`.

mod support;

use serde::Serialize;
use serde_json::{json, Value};
use std::path::PathBuf;
use support::{App, CHANNEL};
use tandem_app::error::{AppError, ErrorKind};
use tandem_app::views::{
    CloudInfo, KeyStatus, Meter, PullEvent, SettingsView, TestResult, CLOUD_PRESETS,
};
use tandem_core::budget::{CloudBudget, Prices};
use tandem_core::chat_settings::ChatSettings;
use tandem_core::config::Config;
use tandem_core::event::{Event, FinishReason, NoticeKind, Timings, TokenSource, Usage};
use tandem_core::history::ReplyMode;
use tandem_core::history::{Conversation, Message, Role};
use tandem_core::router::RouterKind;
use tandem_core::spend::DayUse;
use tandem_core::window::ContextPolicy;

fn value(v: impl Serialize) -> Value {
    serde_json::to_value(v).unwrap()
}

fn events() -> Vec<Event> {
    let mut events = vec![
        Event::LeftOut { from: 0, to: 4 },
        Event::Started {
            edge_model: "qwen2.5-coder-0.5b".into(),
            cloud: Some("http://127.0.0.1:8081/v1".into()),
            router: "blend".into(),
            prompt_tokens: 24,
        },
        Event::CloudRequest {
            sent: "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n".into(),
            ok: true,
            ms: 120,
            prompt_tokens: 12,
            completion_tokens: 4,
            cost_usd: 0.00002,
            unused: false,
        },
        Event::Token {
            text: "Hello".into(),
            id: 9707,
            source: TokenSource::Cloud,
            score: 0.81,
            edge_candidate: Some("Hi".into()),
            request_ms: Some(120),
        },
        Event::Token {
            text: "!".into(),
            id: 0,
            source: TokenSource::Edge,
            score: 0.05,
            edge_candidate: None,
            request_ms: None,
        },
        // Asked ahead from the draft; the reply ended before its answer came back.
        Event::CloudRequest {
            sent: "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!".into(),
            ok: false,
            ms: 90,
            prompt_tokens: 0,
            completion_tokens: 0,
            cost_usd: 0.00003,
            unused: true,
        },
    ];
    for kind in [
        NoticeKind::CloudError,
        NoticeKind::CloudUnavailable,
        NoticeKind::TextPrompts,
        NoticeKind::ContextFull,
        NoticeKind::SpendNotSaved,
        NoticeKind::SpendUnknown,
        NoticeKind::CloudSlow,
        NoticeKind::SpendCapReached,
        NoticeKind::EngineError,
        NoticeKind::NotSaved,
    ] {
        events.push(Event::Notice {
            kind,
            message: "a sentence for the user".into(),
        });
    }
    for reason in [
        FinishReason::Stop,
        FinishReason::Length,
        FinishReason::Cancelled,
        FinishReason::ContextFull,
        FinishReason::Error,
    ] {
        events.push(Event::Finished {
            reason,
            usage: Usage {
                edge_tokens: 1,
                cloud_tokens: 1,
                cloud_requests: 1,
                cloud_requests_unused: 0,
                cloud_prompt_tokens: 12,
                cloud_cached_prompt_tokens: 0,
                cloud_completion_tokens: 4,
                est_cost_usd: 0.00002,
                target_share: Some(0.15),
                session_share: Some(0.15),
            },
            timings: Timings {
                prefill_ms: 40,
                prefill_tokens: 24,
                cloud_ms: 120,
                total_ms: 300,
            },
        });
    }
    events
}

fn payloads() -> Value {
    let config = Config::default();
    let budget = CloudBudget::default();
    let mut conversation = Conversation {
        id: "19a-1-0".into(),
        title: "Hi".into(),
        created_ms: 1_764_000_000_000,
        updated_ms: 1_764_000_000_500,
        local_only: false,
        settings: Some(ChatSettings::default()),
        messages: vec![Message {
            role: Role::User,
            content: "Hi".into(),
            mode: None,
            events: Vec::new(),
        }],
    };
    conversation.push_reply(ReplyMode::Routed, events()[..4].to_vec());
    let meter = Meter::new(
        DayUse {
            day: 20_000,
            usd: 0.01,
            edge_tokens: 900,
            cloud_tokens: 100,
            unknown_before: false,
            ..DayUse::default()
        },
        &budget,
    );
    json!({
        "app_error": AppError::new(ErrorKind::ModelMissing, "model 'x' is not downloaded yet"),
        "conversation_summary": conversation.summary(),
        "conversation": conversation,
        "cloud_info": CloudInfo::new(&config, true),
        "key_status": KeyStatus { source: "keyring", masked: Some("…abcd".into()), origin: Some("https://openrouter.ai".into()), keyring_problem: None },
        "meter": meter,
        "budget": budget,
        "settings": SettingsView::of(&config),
        "cloud_presets": CLOUD_PRESETS.to_vec(),
        "test_result": TestResult { ok: false, kind: Some(ErrorKind::CloudWrongKey), message: "cloud refused the API key (HTTP 401)".into(), models: Vec::new() },
        "pull_events": [
            value(PullEvent::Progress { done: 10, total: 100 }),
            value(PullEvent::Done),
            value(PullEvent::Failed { error: AppError::new(ErrorKind::Storage, "disk full") }),
        ],
        "reply_modes": [ReplyMode::Routed, ReplyMode::Edge, ReplyMode::Cloud],
        "router_kinds": RouterKind::ALL,
        "context_policies": ContextPolicy::ALL,
    })
}

fn check(name: &str, actual: Value) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../ui/src/ipc/fixtures")
        .join(name);
    let text = serde_json::to_string_pretty(&actual).unwrap() + "\n";
    if std::env::var_os("TANDEM_UPDATE_FIXTURES").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == text,
        "{} differs from what the Rust types and commands produce; if the change is intended, \
         rerun with TANDEM_UPDATE_FIXTURES=1 and update ui/src/ipc/types.ts to match",
        path.display()
    );
}

/// One command as the UI calls it and what the real backend answered.
#[derive(Serialize)]
struct Exchange {
    cmd: &'static str,
    /// The arguments, without channels, conversation ids written as `{id}`.
    args: Value,
    #[serde(flatten)]
    answer: Answer,
}

#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
enum Answer {
    Ok(Value),
    Error(Value),
}

/// Calls the real commands and keeps each exchange, with what changes from run to run (ids,
/// clocks) written the same way every time.
struct Recorder {
    app: App,
    ids: Vec<String>,
    exchanges: Vec<Exchange>,
}

impl Recorder {
    fn call(&mut self, cmd: &'static str, args: Value) -> Result<Value, Value> {
        let answer = self.app.call(cmd, args.clone());
        if let (Ok(created), "conversation_create") = (&answer, cmd) {
            self.ids.push(created["id"].as_str().unwrap().to_owned());
        }
        let mut args = self.steady(args);
        if let Value::Object(fields) = &mut args {
            fields.retain(|_, v| *v != CHANNEL);
        }
        let recorded = match &answer {
            Ok(v) => Answer::Ok(self.steady(v.clone())),
            Err(e) => Answer::Error(self.steady(e.clone())),
        };
        self.exchanges.push(Exchange {
            cmd,
            args,
            answer: recorded,
        });
        answer
    }

    fn steady(&self, value: Value) -> Value {
        match value {
            Value::String(s) if self.ids.contains(&s) => Value::String("{id}".into()),
            Value::String(s) => Value::String(
                self.ids
                    .iter()
                    .fold(s, |s, id| s.replace(id.as_str(), "{id}")),
            ),
            Value::Array(items) => items.into_iter().map(|v| self.steady(v)).collect(),
            Value::Object(fields) => fields
                .into_iter()
                .map(|(k, v)| match k.as_str() {
                    "created_ms" | "updated_ms" => (k, json!(0)),
                    _ => (k, self.steady(v)),
                })
                .collect(),
            v => v,
        }
    }
}

/// `v` as the UI sends it: JSON text, so an `f32` reads 0.15 rather than its `f64` widening.
fn sent(v: impl Serialize) -> Value {
    serde_json::from_str(&serde_json::to_string(&v).unwrap()).unwrap()
}

/// The budget of the browser tests' user (the mock backend starts from it): a dollar a day at
/// $0.15/$0.60 per million tokens.
fn priced_budget() -> CloudBudget {
    CloudBudget {
        daily_spend_cap_usd: Some(1.0),
        prices: Prices {
            input_per_mtok: 0.15,
            output_per_mtok: 0.6,
            cached_input_per_mtok: None,
        },
        ..CloudBudget::default()
    }
}

/// The real commands, from a fresh home (no model: nothing here needs the engine), through
/// what the browser tests do: the defaults, the presets, naming and renaming chats, and the
/// inputs the backend refuses, with its own words.
fn transcript() -> Vec<Exchange> {
    let home = tempfile::tempdir().unwrap();
    let mut r = Recorder {
        app: App::start(home.path()),
        ids: Vec::new(),
        exchanges: Vec::new(),
    };
    let settings = r.call("settings_get", json!({})).unwrap();
    r.call("cloud_presets", json!({})).unwrap();

    let id = r.call("conversation_create", json!({})).unwrap()["id"].clone();
    r.call(
        "reply_send",
        json!({"id": id, "text": "  ", "onEvent": CHANNEL}),
    )
    .unwrap_err();
    r.call(
        "conversation_rename",
        json!({"id": id, "title": "  Strings, reversed "}),
    )
    .unwrap();
    r.call("conversation_rename", json!({"id": id, "title": " "}))
        .unwrap_err();
    r.call(
        "conversation_export_save",
        json!({"id": id, "format": "pdf"}),
    )
    .unwrap_err();
    let chat = ChatSettings {
        system_prompt: "Answer in one sentence.".into(),
        temperature: 0.8,
        top_p: 0.9,
        max_tokens: 128,
        context_policy: ContextPolicy::DropMiddle,
    };
    r.call(
        "conversation_set_settings",
        json!({"id": id, "settings": sent(&chat)}),
    )
    .unwrap();
    let too_hot = ChatSettings {
        temperature: 3.0,
        ..chat
    };
    r.call(
        "conversation_set_settings",
        json!({"id": id, "settings": sent(too_hot)}),
    )
    .unwrap_err();

    let off = CloudBudget {
        enabled: false,
        ..priced_budget()
    };
    let mut too_much = sent(priced_budget());
    too_much["max_share"] = json!(1.5);
    let negative_cap = CloudBudget {
        daily_spend_cap_usd: Some(-1.0),
        ..priced_budget()
    };
    for accepted in [priced_budget(), off] {
        r.call("budget_set", json!({ "budget": sent(accepted) }))
            .unwrap();
    }
    for refused in [too_much, sent(negative_cap)] {
        r.call("budget_set", json!({ "budget": refused }))
            .unwrap_err();
    }

    let mut no_edge = settings.clone();
    no_edge["edge"] = json!(" ");
    r.call("settings_set", json!({ "settings": no_edge }))
        .unwrap_err();
    let mut untidy = settings;
    untidy["cloud"] =
        json!({"url": " http://127.0.0.1:8080/v1/ ", "model": " ", "mode": "completions"});
    untidy["threads"] = json!(0);
    r.call("settings_set", json!({ "settings": untidy }))
        .unwrap();
    r.call(
        "key_set",
        json!({"url": "https://openrouter.ai/api/v1", "key": "  "}),
    )
    .unwrap_err();
    r.exchanges
}

/// The messages the browser tests send, chat by chat (each test opens a fresh app).
const CHATS: &[&[&str]] = &[
    &["Write a Python function that reverses a string."],
    &["Write a Python function that reverses a string, then explain how it works."],
    &["reverse a string", "and again"],
    &["show me xss"],
    &["xss again"],
    &["hello"],
    &[
        "A long conversation about strings",
        "And one more question?",
    ],
];

/// A chat's title before and after a message.
#[derive(Serialize)]
struct Retitle {
    before: String,
    message: &'static str,
    after: String,
}

/// The titles the backend gives the browser tests' chats. Sending needs the engine, so these
/// come from the conversation rule `reply_send` applies rather than from the command.
fn titles() -> Vec<Retitle> {
    let mut titles = Vec::new();
    for chat in CHATS {
        let mut conversation = Conversation::new("c".into(), 0);
        for &message in *chat {
            let before = conversation.title.clone();
            conversation.push_user(message);
            titles.push(Retitle {
                before,
                message,
                after: conversation.title.clone(),
            });
        }
    }
    titles
}

#[test]
fn every_event_shape_the_ui_receives_is_in_its_fixture() {
    check("events.json", value(events()));
}

#[test]
fn every_payload_shape_the_ui_receives_is_in_its_fixture() {
    check("payloads.json", payloads());
}

#[test]
fn the_mock_backend_answers_what_the_real_commands_answered() {
    check(
        "transcript.json",
        json!({ "exchanges": transcript(), "titles": titles() }),
    );
}
