//! Behaviour of the fake cloud as an OpenAI client sees it, over real HTTP.

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use reqwest::blocking::{Client, Response};
use reqwest::header::{CONTENT_TYPE, RETRY_AFTER};
use serde_json::{json, Value};
use tandem_fake_cloud::{FakeCloud, Fault, RecordedRequest, Script};

fn start(script: Script) -> FakeCloud {
    FakeCloud::start(script).expect("fake cloud starts")
}

fn post(cloud: &FakeCloud, path: &str, body: &Value) -> Response {
    Client::new()
        .post(format!("{}{path}", cloud.base_url()))
        .json(body)
        .send()
        .expect("request reaches the fake cloud")
}

fn post_ok(cloud: &FakeCloud, path: &str, body: &Value) -> Value {
    let response = post(cloud, path, body);
    assert_eq!(response.status(), 200);
    response.json().expect("JSON answer")
}

/// The `data:` payloads of a Server-Sent Events body, checking the framing on the way.
fn sse_events(response: Response) -> Vec<String> {
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()[CONTENT_TYPE], "text/event-stream");
    let body = response.text().expect("stream body");
    assert!(body.ends_with("\n\n"), "events end with a blank line");
    body.split_terminator("\n\n")
        .map(|event| {
            event
                .strip_prefix("data: ")
                .unwrap_or_else(|| panic!("not a data event: {event:?}"))
                .to_owned()
        })
        .collect()
}

/// The JSON chunks of a stream, which must end with `[DONE]`.
fn sse_chunks(response: Response) -> Vec<Value> {
    let mut events = sse_events(response);
    assert_eq!(events.pop().as_deref(), Some("[DONE]"));
    events
        .iter()
        .map(|event| serde_json::from_str(event).expect("JSON chunk"))
        .collect()
}

fn error_body(response: Response) -> Value {
    let body: Value = response.json().expect("JSON error body");
    assert!(body["error"]["message"].is_string(), "{body}");
    body
}

#[test]
fn completion_cycles_tokens_and_counts_prompt_words() {
    let cloud = start(Script::cycle(&["a", " b", " c"]));
    let answer = post_ok(
        &cloud,
        "/completions",
        &json!({"model": "x", "prompt": "one two  three", "max_tokens": 5, "temperature": 0}),
    );
    assert_eq!(answer["object"], "text_completion");
    assert_eq!(answer["id"], "cmpl-1");
    assert_eq!(answer["model"], "fake-cloud");
    assert!(answer["created"].as_u64().unwrap() > 1_600_000_000);
    let choice = &answer["choices"][0];
    assert_eq!(choice["index"], 0);
    assert_eq!(choice["text"], "a b ca b");
    assert_eq!(choice["finish_reason"], "length");
    assert_eq!(choice["logprobs"], Value::Null);
    assert_eq!(
        answer["usage"],
        json!({"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8})
    );
}

#[test]
fn every_request_restarts_the_cycle() {
    let cloud = start(Script::cycle(&["x", "y", "z"]));
    let request = json!({"prompt": "go", "max_tokens": 2});
    for _ in 0..2 {
        let answer = post_ok(&cloud, "/completions", &request);
        assert_eq!(answer["choices"][0]["text"], "xy");
    }
}

#[test]
fn id_prompt_counts_ids_and_max_tokens_defaults_to_16() {
    let cloud = start(Script::cycle(&["t"]));
    let answer = post_ok(
        &cloud,
        "/completions",
        &json!({"prompt": [5, 6, 7, 8, 9, 10]}),
    );
    assert_eq!(answer["choices"][0]["text"], "t".repeat(16));
    assert_eq!(
        answer["usage"],
        json!({"prompt_tokens": 6, "completion_tokens": 16, "total_tokens": 22})
    );
}

#[test]
fn logprobs_without_ids_leave_out_the_id() {
    let cloud = start(Script::cycle(&["é", "b"]));
    let answer = post_ok(
        &cloud,
        "/completions",
        &json!({"prompt": "p", "max_tokens": 2, "logprobs": 1}),
    );
    let candidate = json!({"token": "é", "bytes": [0xc3, 0xa9], "logprob": -0.1});
    let mut first = candidate.clone();
    first["top_logprobs"] = json!([candidate]);
    let content = &answer["choices"][0]["logprobs"]["content"];
    assert_eq!(content.as_array().unwrap().len(), 2);
    assert_eq!(content[0], first);
    assert_eq!(content[1]["token"], "b");
}

#[test]
fn logprobs_with_ids_carry_the_id() {
    let cloud = start(Script::cycle(&["a", "b"]).with_ids(&[11, 22]));
    let answer = post_ok(
        &cloud,
        "/completions",
        &json!({"prompt": "p", "max_tokens": 3, "logprobs": true}),
    );
    let content = &answer["choices"][0]["logprobs"]["content"];
    let ids: Vec<_> = content
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].clone())
        .collect();
    assert_eq!(ids, [json!(11), json!(22), json!(11)]);
    assert_eq!(content[1]["top_logprobs"][0]["id"], 22);
    assert_eq!(content[1]["top_logprobs"][0]["token"], "b");
}

#[test]
fn streamed_completion_sends_one_chunk_per_token_then_done() {
    let cloud = start(Script::cycle(&["a", "b"]).with_ids(&[1, 2]));
    let chunks = sse_chunks(post(
        &cloud,
        "/completions",
        &json!({"prompt": "one two", "max_tokens": 3, "stream": true, "logprobs": 1}),
    ));
    assert_eq!(chunks.len(), 4, "three tokens and a closing chunk");
    let texts: Vec<_> = chunks
        .iter()
        .map(|c| c["choices"][0]["text"].clone())
        .collect();
    assert_eq!(texts, [json!("a"), json!("b"), json!("a"), json!("")]);
    for chunk in &chunks[..3] {
        assert_eq!(chunk["object"], "text_completion");
        assert_eq!(chunk["choices"][0]["finish_reason"], Value::Null);
        let content = chunk["choices"][0]["logprobs"]["content"]
            .as_array()
            .unwrap();
        assert_eq!(content.len(), 1);
        assert_eq!(content[0]["token"], chunk["choices"][0]["text"]);
    }
    assert_eq!(chunks[1]["choices"][0]["logprobs"]["content"][0]["id"], 2);
    let last = &chunks[3];
    assert_eq!(last["choices"][0]["finish_reason"], "length");
    assert_eq!(
        last["usage"],
        json!({"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5})
    );
}

#[test]
fn chat_completion_answers_with_an_assistant_message() {
    let cloud = start(Script::cycle(&["Hi", " there"]));
    let answer = post_ok(
        &cloud,
        "/chat/completions",
        &json!({
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Say hello to me"},
            ],
            "max_tokens": 3,
        }),
    );
    assert_eq!(answer["object"], "chat.completion");
    assert_eq!(answer["id"], "chatcmpl-1");
    let choice = &answer["choices"][0];
    assert_eq!(
        choice["message"],
        json!({"role": "assistant", "content": "Hi thereHi"})
    );
    assert_eq!(choice["finish_reason"], "length");
    assert_eq!(
        answer["usage"],
        json!({"prompt_tokens": 6, "completion_tokens": 3, "total_tokens": 9})
    );
}

/// A chat request asking to continue `reply`, a final assistant message.
fn continue_request(reply: &str) -> Value {
    json!({
        "messages": [
            {"role": "user", "content": "Count from 1 to 20, separated by commas."},
            {"role": "assistant", "content": reply},
        ],
        "continue_final_message": true,
        "add_generation_prompt": false,
        "max_tokens": 3,
    })
}

fn chat_text(cloud: &FakeCloud, body: &Value) -> Value {
    post_ok(cloud, "/chat/completions", body)["choices"][0]["message"]["content"].clone()
}

#[test]
fn an_honouring_chat_endpoint_continues_a_count_and_scripts_the_rest() {
    let cloud = start(Script::cycle(&["Sure", "!"]));
    let count = continue_request("1, 2, 3, 4, 5, 6, 7, 8,");
    assert_eq!(chat_text(&cloud, &count), " 9, 10");
    // Without the flag the reply so far is a finished turn: a fresh (scripted) answer.
    let mut finished = count.clone();
    finished["continue_final_message"] = json!(false);
    assert_eq!(chat_text(&cloud, &finished), "Sure!Sure");
    assert_eq!(chat_text(&cloud, &continue_request("The sky")), "Sure!Sure");
}

#[test]
fn an_ignoring_chat_endpoint_answers_afresh_whatever_it_is_asked_to_continue() {
    let cloud = start(Script::cycle(&["1", ",", " 2"]).ignoring_continuation());
    let count = continue_request("1, 2, 3, 4, 5, 6, 7, 8,");
    assert_eq!(chat_text(&cloud, &count), "1, 2");
}

#[test]
fn streamed_chat_sends_deltas_then_done() {
    let cloud = start(Script::cycle(&["Hi", " there"]));
    let chunks = sse_chunks(post(
        &cloud,
        "/chat/completions",
        &json!({"messages": [{"role": "user", "content": "hello"}], "max_tokens": 2, "stream": true}),
    ));
    assert_eq!(chunks.len(), 3);
    assert_eq!(chunks[0]["object"], "chat.completion.chunk");
    assert_eq!(chunks[0]["choices"][0]["delta"]["content"], "Hi");
    assert_eq!(chunks[1]["choices"][0]["delta"]["content"], " there");
    assert_eq!(chunks[2]["choices"][0]["delta"], json!({}));
    assert_eq!(chunks[2]["choices"][0]["finish_reason"], "length");
    assert_eq!(chunks[2]["usage"]["completion_tokens"], 2);
}

#[test]
fn models_lists_the_scripted_model() {
    let cloud = start(Script::cycle(&["a"]));
    let models: Value = reqwest::blocking::get(format!("{}/models", cloud.base_url()))
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(
        models,
        json!({"object": "list", "data": [{"id": "fake-cloud", "object": "model", "owned_by": "tandem-fake-cloud"}]})
    );
    assert_eq!(cloud.requests(), 0, "only completion requests are counted");
}

#[test]
fn unknown_routes_get_an_openai_404() {
    let cloud = start(Script::cycle(&["a"]));
    let tokenize = Client::new()
        .post(format!("http://127.0.0.1:{}/tokenize", cloud.port()))
        .json(&json!({"content": "hello"}))
        .send()
        .unwrap();
    assert_eq!(tokenize.status(), 404);
    assert_eq!(
        error_body(tokenize)["error"]["type"],
        "invalid_request_error"
    );
    let wrong_method = reqwest::blocking::get(format!("{}/completions", cloud.base_url())).unwrap();
    assert_eq!(wrong_method.status(), 404);
    error_body(wrong_method);
}

#[test]
fn a_body_that_is_not_json_gets_400_and_is_recorded() {
    let cloud = start(Script::cycle(&["a"]));
    let response = Client::new()
        .post(format!("{}/completions", cloud.base_url()))
        .header(CONTENT_TYPE, "application/json")
        .body("{not json")
        .send()
        .unwrap();
    assert_eq!(response.status(), 400);
    assert_eq!(
        error_body(response)["error"]["type"],
        "invalid_request_error"
    );
    assert_eq!(cloud.recorded()[0].body, json!("{not json"));
}

#[test]
fn too_many_requests_has_retry_after_then_requests_succeed() {
    let cloud = start(Script::cycle(&["a"]));
    cloud.push_faults([Fault::TooManyRequests {
        retry_after_secs: 7,
    }]);
    let request = json!({"prompt": "p", "max_tokens": 1});
    let limited = post(&cloud, "/completions", &request);
    assert_eq!(limited.status(), 429);
    assert_eq!(limited.headers()[RETRY_AFTER], "7");
    assert_eq!(error_body(limited)["error"]["code"], "rate_limit_exceeded");
    assert_eq!(
        post_ok(&cloud, "/completions", &request)["choices"][0]["text"],
        "a"
    );
}

#[test]
fn faults_apply_one_per_request_in_order() {
    let cloud = start(Script::cycle(&["a"]));
    cloud.push_faults([
        Fault::ServerError,
        Fault::TooManyRequests {
            retry_after_secs: 1,
        },
    ]);
    let request = json!({"prompt": "p", "max_tokens": 1});
    let failed = post(&cloud, "/completions", &request);
    assert_eq!(failed.status(), 500);
    assert_eq!(error_body(failed)["error"]["type"], "server_error");
    assert_eq!(post(&cloud, "/chat/completions", &request).status(), 429);
    assert_eq!(post(&cloud, "/completions", &request).status(), 200);
}

#[test]
fn malformed_json_is_a_200_whose_body_does_not_parse() {
    let cloud = start(Script::cycle(&["a"]));
    cloud.push_faults([Fault::MalformedJson, Fault::MalformedJson]);
    let whole = post(&cloud, "/completions", &json!({"prompt": "p"}));
    assert_eq!(whole.status(), 200);
    let body = whole.text().unwrap();
    assert!(serde_json::from_str::<Value>(&body).is_err(), "{body}");

    let streamed = post(
        &cloud,
        "/completions",
        &json!({"prompt": "p", "stream": true}),
    );
    let events = sse_events(streamed);
    assert!(
        serde_json::from_str::<Value>(&events[0]).is_err(),
        "{events:?}"
    );
    assert!(!events.contains(&"[DONE]".to_owned()));
}

#[test]
fn unauthorized_fault_answers_401_even_without_a_required_key() {
    let cloud = start(Script::cycle(&["a"]));
    cloud.push_faults([Fault::Unauthorized]);
    let response = post(&cloud, "/completions", &json!({"prompt": "p"}));
    assert_eq!(response.status(), 401);
    assert_eq!(
        response.json::<Value>().unwrap(),
        json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}})
    );
}

#[test]
fn required_key_rejects_missing_or_wrong_keys() {
    let cloud = start(Script::cycle(&["a"]).requiring_key("sk-right"));
    let url = format!("{}/completions", cloud.base_url());
    let request = json!({"prompt": "p", "max_tokens": 1});
    let client = Client::new();
    let missing = client.post(&url).json(&request).send().unwrap();
    assert_eq!(missing.status(), 401);
    assert_eq!(error_body(missing)["error"]["code"], "invalid_api_key");
    let wrong = client
        .post(&url)
        .bearer_auth("sk-wrong")
        .json(&request)
        .send();
    assert_eq!(wrong.unwrap().status(), 401);
    let right = client
        .post(&url)
        .bearer_auth("sk-right")
        .json(&request)
        .send();
    assert_eq!(right.unwrap().status(), 200);
    let models = client.get(format!("{}/models", cloud.base_url())).send();
    assert_eq!(models.unwrap().status(), 401);
}

#[test]
fn delay_answers_normally_after_waiting() {
    let cloud = start(Script::cycle(&["a"]));
    cloud.push_faults([Fault::Delay(Duration::from_millis(200))]);
    let began = Instant::now();
    let answer = post_ok(
        &cloud,
        "/completions",
        &json!({"prompt": "p", "max_tokens": 1}),
    );
    assert!(began.elapsed() >= Duration::from_millis(200));
    assert_eq!(answer["choices"][0]["text"], "a");
}

#[test]
fn delay_trips_a_client_timeout() {
    let cloud = start(Script::cycle(&["a"]));
    cloud.push_faults([Fault::Delay(Duration::from_millis(300))]);
    let client = Client::builder()
        .timeout(Duration::from_millis(50))
        .build()
        .unwrap();
    let error = client
        .post(format!("{}/completions", cloud.base_url()))
        .json(&json!({"prompt": "p"}))
        .send()
        .expect_err("the answer comes after the client gave up");
    assert!(error.is_timeout(), "{error}");
}

#[test]
fn requests_and_recorded_count_every_completion_request() {
    let cloud = start(Script::cycle(&["a"]));
    cloud.push_faults([Fault::ServerError]);
    let client = Client::new();
    client
        .post(format!("{}/completions", cloud.base_url()))
        .bearer_auth("sk-1")
        .json(&json!({"prompt": "first"}))
        .send()
        .unwrap();
    post(&cloud, "/chat/completions", &json!({"messages": []}));
    post(&cloud, "/tokenize", &json!({"content": "not counted"}));
    assert_eq!(cloud.requests(), 2);
    assert_eq!(
        cloud.recorded(),
        [
            RecordedRequest {
                path: "/v1/completions".into(),
                body: json!({"prompt": "first"}),
                authorization: Some("Bearer sk-1".into()),
            },
            RecordedRequest {
                path: "/v1/chat/completions".into(),
                body: json!({"messages": []}),
                authorization: None,
            },
        ]
    );
}

#[test]
fn stop_refuses_later_connections_and_is_idempotent() {
    let cloud = start(Script::cycle(&["a"]));
    // A pooled keep-alive connection must not keep the fake reachable.
    let client = Client::new();
    let url = format!("{}/completions", cloud.base_url());
    let request = json!({"prompt": "p", "max_tokens": 1});
    assert_eq!(
        client.post(&url).json(&request).send().unwrap().status(),
        200
    );
    cloud.stop();
    let refused = TcpStream::connect(("127.0.0.1", cloud.port())).unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
    assert!(client.post(&url).json(&request).send().is_err());
    cloud.stop();
}

#[test]
fn drop_stops_the_server() {
    let port = start(Script::cycle(&["a"])).port();
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
}

#[test]
fn start_on_uses_the_given_port() {
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let cloud = FakeCloud::start_on(port, Script::cycle(&["a"])).unwrap();
    assert_eq!(cloud.port(), port);
    assert_eq!(cloud.base_url(), format!("http://127.0.0.1:{port}/v1"));
    post_ok(
        &cloud,
        "/completions",
        &json!({"prompt": "p", "max_tokens": 1}),
    );
    assert!(FakeCloud::start_on(port, Script::cycle(&["a"])).is_err());
}

#[test]
fn binary_prints_its_address_and_serves_the_script() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tandem-fake-cloud"))
        .args(["--token", "x", "--token", "y", "--api-key", "sk-bin"])
        .arg("--ignore-continuation")
        .stdout(Stdio::piped())
        .spawn()
        .expect("binary starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let outcome = std::panic::catch_unwind(|| {
        let base_url = line
            .trim_end()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line: {line:?}"));
        assert!(base_url.starts_with("http://127.0.0.1:") && base_url.ends_with("/v1"));
        let answer: Value = Client::new()
            .post(format!("{base_url}/completions"))
            .bearer_auth("sk-bin")
            .json(&json!({"prompt": "p", "max_tokens": 3}))
            .send()
            .unwrap()
            .json()
            .unwrap();
        assert_eq!(answer["choices"][0]["text"], "xyx");
        let fresh: Value = Client::new()
            .post(format!("{base_url}/chat/completions"))
            .bearer_auth("sk-bin")
            .json(&continue_request("1, 2, 3, 4, 5, 6, 7, 8,"))
            .send()
            .unwrap()
            .json()
            .unwrap();
        assert_eq!(fresh["choices"][0]["message"]["content"], "xyx");
    });
    child.kill().unwrap();
    child.wait().unwrap();
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}
