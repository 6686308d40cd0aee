//! The cloud client against the project's fake OpenAI server on 127.0.0.1: every failure a
//! user can meet becomes a typed error, and retries happen only where they help.

use std::time::Duration;
use tandem_core::cloud::{
    ApiKey, Cloud, CloudClient, CloudConfig, CloudError, CloudErrorKind, CloudMode, CloudRequest,
};
use tandem_core::message::Message;
use tandem_fake_cloud::{FakeCloud, Fault, Script};

fn client(fake: &FakeCloud) -> CloudClient {
    let mut config = CloudConfig::new(fake.base_url());
    config.request_timeout = Duration::from_millis(800);
    CloudClient::new(config).unwrap()
}

fn ask(
    client: &mut CloudClient,
    max_tokens: u32,
) -> Result<tandem_core::cloud::CloudReply, CloudError> {
    let text = || "<|im_start|>user\nhi<|im_end|>\n".to_owned();
    let reply = || "The sky".to_owned();
    let messages = [Message::user("hi")];
    client.complete(&CloudRequest {
        ids: &[1, 2, 3],
        text: &text,
        messages: &messages,
        reply: &reply,
        max_tokens,
        stop: &|| false,
    })
}

#[test]
fn text_prompts_go_out_when_the_server_cannot_tokenize() {
    let fake = FakeCloud::start(Script::cycle(&[" sky", " blue"])).unwrap();
    let mut c = client(&fake);
    assert!(
        !c.shares_vocab(&[1, 2]).unwrap(),
        "no /tokenize: vocab not shared"
    );
    let reply = ask(&mut c, 3).unwrap();
    assert_eq!(reply.text, " sky blue sky");
    assert_eq!(reply.ids, None);
    assert_eq!(reply.completion_tokens, Some(3));
    let sent = &fake.recorded()[0].body;
    assert_eq!(sent["prompt"], "<|im_start|>user\nhi<|im_end|>\n");
    assert_eq!(sent["max_tokens"], 3);
    assert_eq!(sent["temperature"], 0.0);
}

#[test]
fn a_retry_after_429_and_a_500_are_retried_then_succeed() {
    let fake = FakeCloud::start(Script::cycle(&["x"])).unwrap();
    fake.push_faults([
        Fault::TooManyRequests {
            retry_after_secs: 0,
        },
        Fault::ServerError,
    ]);
    let reply = ask(&mut client(&fake), 1).unwrap();
    assert_eq!(reply.text, "x");
    assert_eq!(fake.requests(), 3);
}

#[test]
fn a_long_retry_after_fails_fast_instead_of_stalling_the_reply() {
    let fake = FakeCloud::start(Script::cycle(&["x"])).unwrap();
    fake.push_faults([Fault::TooManyRequests {
        retry_after_secs: 30,
    }]);
    assert_eq!(
        ask(&mut client(&fake), 1).unwrap_err(),
        CloudError::RateLimited
    );
    assert_eq!(fake.requests(), 1);
}

#[test]
fn persistent_server_errors_give_up_after_the_retries() {
    let fake = FakeCloud::start(Script::cycle(&["x"])).unwrap();
    fake.push_faults([Fault::ServerError, Fault::ServerError, Fault::ServerError]);
    let err = ask(&mut client(&fake), 1).unwrap_err();
    assert!(
        matches!(err, CloudError::Server { status: 500, .. }),
        "{err}"
    );
    assert_eq!(fake.requests(), 3, "one try and two retries");
}

#[test]
fn malformed_replies_timeouts_and_refused_connections_are_named() {
    let fake = FakeCloud::start(Script::cycle(&["x"])).unwrap();
    let mut c = client(&fake);
    fake.push_faults([Fault::MalformedJson]);
    assert!(matches!(
        ask(&mut c, 1).unwrap_err(),
        CloudError::Malformed { .. }
    ));
    fake.push_faults([Fault::Delay(Duration::from_secs(3))]);
    let err = ask(&mut c, 1).unwrap_err();
    assert!(matches!(err, CloudError::Timeout { .. }), "{err}");
    fake.stop();
    let err = ask(&mut c, 1).unwrap_err();
    assert!(matches!(err, CloudError::Unreachable { .. }), "{err}");
    assert!(err.to_string().contains(&fake.base_url()), "{err}");
}

#[test]
fn a_wrong_key_is_reported_as_such_and_the_key_is_sent_as_bearer() {
    let fake = FakeCloud::start(Script::cycle(&["x"]).requiring_key("sk-right")).unwrap();
    let mut config = CloudConfig::new(fake.base_url());
    config.api_key = ApiKey::new("sk-wrong");
    let err = CloudClient::new(config.clone())
        .unwrap()
        .check()
        .unwrap_err();
    assert!(
        matches!(err, CloudError::Unauthorized { status: 401 }),
        "{err}"
    );
    assert!(
        !err.to_string().contains("sk-wrong"),
        "the key never appears in messages"
    );
    assert!(
        !format!("{config:?}").contains("sk-wrong"),
        "nor in debug output"
    );
    config.api_key = ApiKey::new("sk-right");
    let mut c = CloudClient::new(config).unwrap();
    assert_eq!(c.check().unwrap(), vec!["fake-cloud".to_string()]);
    ask(&mut c, 1).unwrap();
    let auth = fake.recorded().last().unwrap().authorization.clone();
    assert_eq!(auth.as_deref(), Some("Bearer sk-right"));
}

#[test]
fn an_unknown_model_is_reported_with_what_is_served() {
    let fake = FakeCloud::start(Script::cycle(&["x"])).unwrap();
    let mut config = CloudConfig::new(fake.base_url());
    config.model = Some("gpt-9".into());
    let err = CloudClient::new(config)
        .unwrap()
        .check()
        .unwrap_err()
        .to_string();
    assert!(err.contains("gpt-9") && err.contains("fake-cloud"), "{err}");
}

fn chat_client(fake: &FakeCloud) -> CloudClient {
    let mut config = CloudConfig::new(fake.base_url());
    config.mode = CloudMode::Chat;
    config.request_timeout = Duration::from_millis(800);
    CloudClient::new(config).unwrap()
}

#[test]
fn chat_mode_continues_the_reply_as_a_final_assistant_message() {
    let fake = FakeCloud::start(Script::cycle(&[" is", " blue"])).unwrap();
    let mut c = chat_client(&fake);
    assert!(!c.shares_vocab(&[1, 2]).unwrap(), "chat mode sends text");
    let reply = ask(&mut c, 2).unwrap();
    assert_eq!(reply.text, " is blue");
    // First the probe: a count to continue, greedy, three tokens.
    let probe = &fake.recorded()[0];
    assert_eq!(probe.path, "/v1/chat/completions");
    assert_eq!(
        probe.body["messages"],
        serde_json::json!([
            {"role": "user", "content": "Count from 1 to 20, separated by commas."},
            {"role": "assistant", "content": "1, 2, 3, 4, 5, 6, 7, 8,"},
        ])
    );
    assert_eq!(
        (&probe.body["max_tokens"], &probe.body["temperature"]),
        (&serde_json::json!(3), &serde_json::json!(0.0))
    );
    assert_eq!(probe.body["continue_final_message"], true);
    assert_eq!(probe.body["add_generation_prompt"], false);
    let sent = &fake.recorded()[1];
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(
        sent.body["messages"],
        serde_json::json!([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "The sky"}])
    );
    assert_eq!(sent.body["continue_final_message"], true);
    assert_eq!(sent.body["add_generation_prompt"], false);
    // The verdict is remembered: later requests go out alone.
    assert_eq!(ask(&mut c, 1).unwrap().text, " is");
    assert_eq!(fake.requests(), 3);
    assert_eq!(c.check_continuation(&|| false), Ok(()));
    assert_eq!(fake.requests(), 3);
}

#[test]
fn a_chat_endpoint_that_answers_afresh_never_has_its_answer_spliced_into_a_reply() {
    let fake = FakeCloud::start(Script::cycle(&["1", ",", " 2"]).ignoring_continuation()).unwrap();
    let mut c = chat_client(&fake);
    let err = ask(&mut c, 3).unwrap_err();
    assert_eq!(
        err,
        CloudError::NoContinuation {
            endpoint: fake.base_url(),
            answered: "1, 2".into()
        }
    );
    assert!(err.is_permanent());
    assert_eq!(err.kind(), CloudErrorKind::NoContinuation);
    let message = err.to_string();
    for words in [
        "does not continue a reply",
        "a fresh answer",
        "completions mode",
        "continue_final_message",
    ] {
        assert!(message.contains(words), "{message}");
    }
    // Only the probe went out, and the verdict holds for every later request.
    assert_eq!(fake.requests(), 1);
    assert_eq!(ask(&mut c, 3).unwrap_err(), err);
    assert_eq!(fake.requests(), 1);
    assert_eq!(c.check_continuation(&|| false), Err(err));
    // A reply's first tokens are a fresh answer by nature: they are still asked for.
    let messages = [Message::user("hi")];
    let first = c.complete(&CloudRequest {
        ids: &[],
        text: &String::new,
        messages: &messages,
        reply: &String::new,
        max_tokens: 2,
        stop: &|| false,
    });
    assert_eq!(first.unwrap().text, "1,");
    assert_eq!(fake.recorded()[1].body.get("continue_final_message"), None);
}

#[test]
fn a_probe_without_an_answer_is_an_error_not_a_verdict() {
    let fake = FakeCloud::start(Script::cycle(&["x"]).ignoring_continuation()).unwrap();
    fake.push_faults([Fault::Delay(Duration::from_secs(2))]);
    let mut c = chat_client(&fake);
    let err = ask(&mut c, 1).unwrap_err();
    assert!(matches!(err, CloudError::Timeout { .. }), "{err:?}");
    assert!(!err.is_permanent());
    // Nothing was remembered: the next request probes again, and gets its verdict.
    assert!(matches!(
        ask(&mut c, 1).unwrap_err(),
        CloudError::NoContinuation { .. }
    ));
    assert_eq!(fake.requests(), 2);
}

#[test]
fn a_dripping_server_is_given_up_on_at_the_deadline_not_per_byte() {
    let fake = FakeCloud::start(Script::cycle(&["x"])).unwrap();
    fake.push_faults([Fault::Drip(Duration::from_millis(100))]);
    let started = std::time::Instant::now();
    let err = ask(&mut client(&fake), 1).unwrap_err();
    assert!(matches!(err, CloudError::Timeout { .. }), "{err:?}");
    // One deadline of 0.8 s for connect, headers and body: a byte every 0.1 s keeps no
    // read waiting long enough for a per-read timeout, so only a whole-request one ends it.
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn an_endless_body_is_cut_at_the_cap_with_a_clear_error() {
    let fake = FakeCloud::start(Script::cycle(&["x"])).unwrap();
    fake.push_faults([Fault::EndlessBody]);
    let mut config = CloudConfig::new(fake.base_url());
    config.request_timeout = Duration::from_secs(30);
    let err = ask(&mut CloudClient::new(config).unwrap(), 1).unwrap_err();
    assert!(
        matches!(&err, CloudError::Malformed { detail } if detail.contains("MiB")),
        "{err:?}"
    );
}

#[test]
fn a_redirect_to_another_origin_is_not_followed_with_the_conversation() {
    let elsewhere = FakeCloud::start(Script::cycle(&["leaked"])).unwrap();
    let fake = FakeCloud::start(Script::cycle(&["x"])).unwrap();
    fake.push_faults([Fault::Redirect(format!(
        "{}/completions",
        elsewhere.base_url()
    ))]);
    let err = ask(&mut client(&fake), 1).unwrap_err();
    assert!(err.to_string().contains("redirect"), "{err}");
    assert_eq!(elsewhere.requests(), 0, "the prompt went to another origin");
}

#[test]
fn a_huge_error_message_is_cut_short() {
    let fake = FakeCloud::start(Script::cycle(&["x"])).unwrap();
    let mut config = CloudConfig::new(fake.base_url());
    config.max_retries = 0;
    fake.push_faults([Fault::LongError(100_000)]);
    let err = ask(&mut CloudClient::new(config).unwrap(), 1).unwrap_err();
    assert!(
        err.to_string().len() < 400,
        "{} bytes",
        err.to_string().len()
    );
}

#[test]
fn an_answer_longer_than_the_span_is_cut_to_it() {
    let fake = FakeCloud::start(Script::cycle(&[" a", " b"]).with_ids(&[5, 6])).unwrap();
    fake.push_faults([Fault::Overlong(6000)]);
    let mut c = client(&fake);
    let reply = ask(&mut c, 4).unwrap();
    assert_eq!(reply.text, " a b a b");
}
