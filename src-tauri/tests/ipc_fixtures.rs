//! The JSON the UI receives, written from the real Rust types into
//! `ui/src/ipc/fixtures/`, where the UI's tests check their TypeScript types against it.
//! A change on either side without the other fails one of the two suites.
//!
//! After an intended change: `TANDEM_UPDATE_FIXTURES=1 cargo test -p tandem-app --test ipc_fixtures`.

use serde::Serialize;
use serde_json::{json, Value};
use std::path::PathBuf;
use tandem_app::error::{AppError, ErrorKind};
use tandem_app::views::{
    CloudInfo, KeyStatus, Meter, PullEvent, SettingsView, TestResult, CLOUD_PRESETS,
};
use tandem_core::budget::CloudBudget;
use tandem_core::config::Config;
use tandem_core::engine::ReplyMode;
use tandem_core::event::{Event, FinishReason, NoticeKind, Timings, TokenSource, Usage};
use tandem_core::history::{Conversation, Message, Role};
use tandem_core::spend::DayUse;

fn value(v: impl Serialize) -> Value {
    serde_json::to_value(v).unwrap()
}

fn events() -> Vec<Event> {
    let mut events = vec![
        Event::Started {
            edge_model: "qwen2.5-coder-0.5b".into(),
            cloud: Some("http://127.0.0.1:8081/v1".into()),
            router: "entropy".into(),
            prompt_tokens: 24,
        },
        Event::CloudRequest {
            sent: "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n".into(),
            ok: true,
            ms: 120,
            prompt_tokens: 12,
            completion_tokens: 4,
            cost_usd: 0.00002,
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
    ];
    for kind in [
        NoticeKind::CloudError,
        NoticeKind::CloudUnavailable,
        NoticeKind::TextPrompts,
        NoticeKind::ContextFull,
        NoticeKind::SpendNotSaved,
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
                cloud_prompt_tokens: 12,
                cloud_completion_tokens: 4,
                est_cost_usd: 0.00002,
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
        },
        &budget,
    );
    json!({
        "app_error": AppError::new(ErrorKind::ModelMissing, "model 'x' is not downloaded yet"),
        "conversation": conversation,
        "cloud_info": CloudInfo::new(&config, true),
        "key_status": KeyStatus { source: "keyring", masked: Some("…abcd".into()), keyring_problem: None },
        "meter": meter,
        "budget": budget,
        "settings": SettingsView::of(&config),
        "cloud_presets": CLOUD_PRESETS.to_vec(),
        "test_result": TestResult { ok: false, kind: "wrong_key", message: "cloud refused the API key (HTTP 401)".into(), models: Vec::new() },
        "pull_events": [
            value(PullEvent::Progress { done: 10, total: 100 }),
            value(PullEvent::Done),
            value(PullEvent::Failed { error: AppError::new(ErrorKind::Storage, "disk full") }),
        ],
        "reply_modes": [ReplyMode::Routed, ReplyMode::Edge, ReplyMode::Cloud],
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
        "{} differs from what the Rust types produce; if the change is intended, rerun with \
         TANDEM_UPDATE_FIXTURES=1 and update ui/src/ipc/types.ts to match",
        path.display()
    );
}

#[test]
fn every_event_shape_the_ui_receives_is_in_its_fixture() {
    check("events.json", value(events()));
}

#[test]
fn every_payload_shape_the_ui_receives_is_in_its_fixture() {
    check("payloads.json", payloads());
}
