//! `tandem serve` over real HTTP with a real model, driven by Tandem's own cloud client and
//! by plain requests, as any OpenAI-compatible client would.

use std::path::PathBuf;
use tandem_core::cloud::{Cloud, CloudClient, CloudConfig, CloudRequest, VOCAB_PROBE};
use tandem_core::local::{EdgeWeights, LocalOptions};
use tandem_core::message::Message;
use tandem_serve::{start, ModelThread, Running, ServeOptions};

fn model() -> Option<PathBuf> {
    tandem_test_peers::model(tandem_test_peers::SMOLLM2)
}

fn local() -> LocalOptions {
    LocalOptions {
        n_ctx: 1024,
        threads: 1,
        hidden_state: false,
    }
}

fn serve(path: PathBuf, prefix_reuse: bool) -> Running {
    serve_within(path, prefix_reuse, ServeOptions::DEFAULT_DEADLINE)
}

fn serve_within(path: PathBuf, prefix_reuse: bool, deadline: std::time::Duration) -> Running {
    let engine = ModelThread::start(ServeOptions {
        model_path: path,
        model_name: "smollm2".into(),
        local: local(),
        prefix_reuse,
        deadline,
    })
    .unwrap();
    start(
        engine,
        "127.0.0.1:0".parse().unwrap(),
        tandem_serve::Access::open(),
    )
    .unwrap()
}

fn post(url: &str, body: serde_json::Value) -> serde_json::Value {
    let response = reqwest::blocking::Client::new()
        .post(url)
        .json(&body)
        .send()
        .unwrap();
    assert!(
        response.status().is_success(),
        "{}",
        response.text().unwrap()
    );
    response.json().unwrap()
}

#[test]
fn completions_by_ids_match_local_greedy_decoding_and_report_ids() {
    let Some(path) = model() else { return };
    let server = serve(path.clone(), true);
    let weights = EdgeWeights::load(&path, "smollm2").unwrap();
    let prompt = weights
        .chat_prompt(&[Message::user("What is the capital of France?")])
        .unwrap();
    let ids = weights.tokenize(&prompt, true);

    let mut client = CloudClient::new(CloudConfig::new(server.base_url())).unwrap();
    let probe = weights.tokenize(VOCAB_PROBE, false);
    assert!(
        client.shares_vocab(&probe).unwrap(),
        "same model, same vocabulary"
    );
    let text = || unreachable!("ids are sent when the vocabulary is shared");
    let reply = client
        .complete(&CloudRequest {
            ids: &ids,
            text: &text,
            messages: &[],
            reply: &text,
            max_tokens: 6,
            stop: &|| false,
        })
        .unwrap();
    let served = reply.ids.expect("ids in logprobs");
    assert_eq!(served.len(), 6);

    // The same greedy continuation computed locally.
    use tandem_core::edge::{EdgeModel, Outputs};
    use tandem_core::sampling::{Sampler, SamplingParams};
    let mut edge = weights.session(&local()).unwrap();
    let mut sampler = Sampler::new(SamplingParams::default());
    let (mut step, _) = edge.sync(&ids, &mut sampler).unwrap();
    let mut expected = Vec::new();
    for _ in 0..6 {
        expected.push(step.token);
        step = edge
            .extend(&[step.token], Outputs::Last, &mut sampler)
            .unwrap()
            .remove(0);
    }
    assert_eq!(served, expected);
    assert_eq!(reply.prompt_tokens, Some(ids.len() as u64));
}

#[test]
fn prefix_reuse_decodes_only_the_new_suffix() {
    let Some(path) = model() else { return };
    let measure = |prefix_reuse: bool| {
        let server = serve(path.clone(), prefix_reuse);
        let url = format!("{}/completions", server.base_url());
        let base =
            "Once upon a time, in a village by the sea, there lived an old lighthouse keeper";
        post(&url, serde_json::json!({"prompt": base, "max_tokens": 1}));
        let second = post(
            &url,
            serde_json::json!({"prompt": format!("{base} who"), "max_tokens": 1}),
        );
        second["timings"]["prompt_n"].as_u64().unwrap()
    };
    let with_reuse = measure(true);
    let without = measure(false);
    assert!(
        with_reuse <= 3,
        "decoded {with_reuse} tokens for a one-word extension"
    );
    assert!(
        without > 15,
        "without reuse the whole prompt is decoded: {without}"
    );
}

#[test]
fn streaming_chat_and_models_and_errors_speak_openai() {
    let Some(path) = model() else { return };
    let server = serve(path, true);
    let base = server.base_url();
    let models: serde_json::Value = reqwest::blocking::get(format!("{base}/models"))
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(models["data"][0]["id"], "smollm2");

    let chat = post(
        &format!("{base}/chat/completions"),
        serde_json::json!({"messages": [{"role": "user", "content": "Say hi"}], "max_tokens": 5}),
    );
    assert_eq!(chat["object"], "chat.completion");
    assert!(!chat["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .is_empty());
    assert_eq!(chat["usage"]["completion_tokens"], 5);

    let sse = reqwest::blocking::Client::new()
        .post(format!("{base}/completions"))
        .json(&serde_json::json!({"prompt": "The sea is", "max_tokens": 4, "stream": true, "logprobs": 2}))
        .send()
        .unwrap()
        .text()
        .unwrap();
    let data: Vec<&str> = sse
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect();
    assert_eq!(data.last(), Some(&"[DONE]"));
    assert_eq!(
        data.len(),
        4 + 2,
        "four tokens, a closing chunk, [DONE]: {sse}"
    );
    let first: serde_json::Value = serde_json::from_str(data[0]).unwrap();
    assert_eq!(
        first["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let closing: serde_json::Value = serde_json::from_str(data[4]).unwrap();
    assert_eq!(closing["choices"][0]["finish_reason"], "length");

    let bad = reqwest::blocking::Client::new()
        .post(format!("{base}/completions"))
        .header("Content-Type", "application/json")
        .body("{not json")
        .send()
        .unwrap();
    assert_eq!(bad.status(), 400);
    let body: serde_json::Value = bad.json().unwrap();
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("invalid request body"));
    let out_of_vocab = reqwest::blocking::Client::new()
        .post(format!("{base}/completions"))
        .json(&serde_json::json!({"prompt": [1, 99999999], "max_tokens": 1}))
        .send()
        .unwrap();
    assert_eq!(out_of_vocab.status(), 400);
}

#[test]
fn a_burst_beyond_the_queue_is_told_to_retry_instead_of_waiting() {
    let Some(path) = model() else { return };
    let server = serve(path, true);
    let url = format!("{}/completions", server.base_url());
    let burst: Vec<_> = (0..16)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || {
                let response = reqwest::blocking::Client::new()
                    .post(&url)
                    .json(&serde_json::json!({"prompt": "Tell me a story.", "max_tokens": 48}))
                    .send()
                    .unwrap();
                let retry = response.headers().get("retry-after").cloned();
                (response.status().as_u16(), retry)
            })
        })
        .collect();
    let answers: Vec<_> = burst.into_iter().map(|t| t.join().unwrap()).collect();
    let busy: Vec<_> = answers.iter().filter(|(s, _)| *s == 503).collect();
    let served = answers.iter().filter(|(s, _)| *s == 200).count();
    assert!(!busy.is_empty(), "{answers:?}");
    assert!(busy.iter().all(|(_, retry)| retry.is_some()), "{answers:?}");
    assert!(served > tandem_serve::MAX_WAITING, "{answers:?}");
    assert_eq!(busy.len() + served, 16, "{answers:?}");
}

/// Tokenizing waits in the same bounded queue as completions: a burst of them behind a
/// running completion is told to retry like a burst of completions, instead of reaching the
/// model thread without bound.
#[test]
fn a_burst_of_tokenize_requests_waits_in_the_same_queue() {
    let Some(path) = model() else { return };
    let server = serve(path, true);
    let base = server.base_url();
    let long = {
        let url = format!("{base}/completions");
        std::thread::spawn(move || {
            reqwest::blocking::Client::new()
                .post(url)
                // Counting goes on to the last token asked for.
                .json(&serde_json::json!({"prompt": "1, 2, 3, 4, 5, 6, 7, 8,", "max_tokens": 300}))
                .send()
                .unwrap()
                .status()
                .as_u16()
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(300));
    let tokenize = base.trim_end_matches("/v1").to_owned() + "/tokenize";
    let burst: Vec<_> = (0..16)
        .map(|_| {
            let url = tokenize.clone();
            std::thread::spawn(move || {
                let response = reqwest::blocking::Client::new()
                    .post(url)
                    .json(&serde_json::json!({"content": "Hello there"}))
                    .send()
                    .unwrap();
                let retry = response.headers().contains_key("retry-after");
                (response.status().as_u16(), retry)
            })
        })
        .collect();
    let answers: Vec<_> = burst.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(long.join().unwrap(), 200);
    let busy = answers
        .iter()
        .filter(|(s, retry)| *s == 503 && *retry)
        .count();
    let served = answers.iter().filter(|(s, _)| *s == 200).count();
    assert!(busy > 0, "{answers:?}");
    assert!(served >= tandem_serve::MAX_WAITING - 1, "{answers:?}");
    assert_eq!(busy + served, 16, "{answers:?}");
}

#[test]
fn a_request_past_the_deadline_is_a_503_that_says_so() {
    let Some(path) = model() else { return };
    // A deadline every request has passed by the time the model takes it up.
    let server = serve_within(path, true, std::time::Duration::from_nanos(1));
    let url = format!("{}/completions", server.base_url());
    for stream in [false, true] {
        let late = reqwest::blocking::Client::new()
            .post(&url)
            .json(&serde_json::json!({"prompt": "Tell me a story.", "max_tokens": 8, "stream": stream}))
            .send()
            .unwrap();
        let text = if stream {
            late.text().unwrap()
        } else {
            assert_eq!(late.status().as_u16(), 503);
            late.text().unwrap()
        };
        assert!(text.contains("took longer than this server's"), "{text}");
    }
}

/// Requests as a stranger might send them: each route's real request with a byte changed,
/// dropped or cut off at random. Every answer is a reply or an error in OpenAI's shape
/// (never a 500, never a dropped connection), and the server goes on serving.
#[test]
fn damaged_requests_are_answered_in_openai_shape_and_the_server_goes_on() {
    use proptest::prelude::*;
    let Some(path) = model() else { return };
    // A short deadline bounds what a damaged `max_tokens` can ask for.
    let server = serve_within(path, true, std::time::Duration::from_secs(5));
    let base = server.base_url();
    let root = base.trim_end_matches("/v1").to_owned();
    let requests = [
        (
            format!("{base}/completions"),
            r#"{"prompt":"The sea is","max_tokens":4,"logprobs":2,"temperature":0.5}"#,
        ),
        (
            format!("{base}/completions"),
            r#"{"prompt":[1,2,3],"max_tokens":3,"stream":true}"#,
        ),
        (
            format!("{base}/chat/completions"),
            r#"{"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hel"}],"max_tokens":3,"continue_final_message":true,"add_generation_prompt":false}"#,
        ),
        (
            format!("{root}/tokenize"),
            r#"{"content":"Hello there","add_special":true}"#,
        ),
    ];
    let http = reqwest::blocking::Client::new();
    let config = ProptestConfig {
        cases: 48,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    proptest!(config, |(which in 0usize..4, at in 0usize..200, byte in any::<u8>(), how in 0u8..3)| {
        let (url, body) = &requests[which];
        let mut bytes = body.as_bytes().to_vec();
        let at = at % bytes.len();
        match how {
            0 => bytes[at] = byte,
            1 => { bytes.remove(at); }
            _ => bytes.truncate(at),
        }
        let response = http
            .post(url)
            .header("Content-Type", "application/json")
            .body(bytes)
            .send()
            .expect("the server answers");
        let status = response.status().as_u16();
        let streamed = response
            .headers()
            .get("content-type")
            .is_some_and(|t| t.to_str().unwrap_or("").starts_with("text/event-stream"));
        let text = response.text().expect("the body arrives whole");
        prop_assert!([200, 400, 413, 415, 422, 503].contains(&status), "{status}: {text}");
        if status != 200 {
            let error: serde_json::Value = serde_json::from_str(&text).expect("an error is JSON");
            prop_assert!(error["error"]["message"].is_string(), "{text}");
        } else if !streamed {
            prop_assert!(serde_json::from_str::<serde_json::Value>(&text).is_ok(), "{text}");
        }
    });
    let fine = post(
        &format!("{base}/completions"),
        serde_json::json!({"prompt": "The sea is", "max_tokens": 2}),
    );
    assert_eq!(fine["usage"]["completion_tokens"], 2);
}
