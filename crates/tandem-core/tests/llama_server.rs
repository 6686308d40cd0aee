//! Tandem against llama.cpp's own `llama-server`, an independent OpenAI-compatible peer.

mod support;

use support::{load, options, route, LlamaServer, SMOLLM2};
use tandem_core::budget::CloudBudget;
use tandem_core::cloud::{Cloud, CloudClient, CloudConfig, CloudMode, CloudRequest, VOCAB_PROBE};
use tandem_core::edge::EdgeModel;
use tandem_core::event::{Event, TokenSource};
use tandem_core::local::EdgeWeights;
use tandem_core::message::Message;
use tandem_core::router::FixedRouter;

fn edge_probe(weights: &EdgeWeights) -> Vec<i32> {
    weights.tokenize(VOCAB_PROBE, false)
}

#[test]
fn cloud_tokens_are_exactly_what_llama_server_returns_for_the_prompt() {
    let Some(weights) = load(SMOLLM2) else { return };
    let Some(server) = LlamaServer::start(&support::model(SMOLLM2).unwrap()) else {
        return;
    };
    let mut edge = weights.session(&options()).unwrap();
    let prompt = weights
        .chat_prompt(&[Message::user("List three colours of the rainbow.")])
        .unwrap();
    let prompt = edge.tokenize(&prompt, true);

    // Cloud-only, spans of 4: every token of the reply comes from llama-server.
    let mut cloud = CloudClient::new(CloudConfig::new(&server.base_url)).unwrap();
    let mut routed = Vec::new();
    let usage = route(
        &mut edge,
        &mut cloud,
        &FixedRouter(1.0),
        CloudBudget::share(1.0),
        &prompt,
        12,
        &mut |e| {
            if let Event::Token { id, source, .. } = e {
                assert_eq!(source, TokenSource::Cloud);
                routed.push(id);
            }
        },
    );
    // 12 tokens in spans of 4, and any request asked ahead from a draft the answer changed.
    assert!(usage.cloud_requests >= 3, "{usage:?}");
    let probe = edge_probe(&weights);
    assert!(
        cloud.shares_vocab(&probe).unwrap(),
        "same vocabulary: prompts went as token ids"
    );

    // The same prompt asked of llama-server in one request, greedy.
    let direct: serde_json::Value = reqwest::blocking::Client::new()
        .post(format!("{}/completions", server.base_url))
        .json(&serde_json::json!({"prompt": prompt, "max_tokens": routed.len(), "temperature": 0, "logprobs": 1}))
        .send()
        .unwrap()
        .json()
        .unwrap();
    let expected: Vec<i32> = direct["choices"][0]["logprobs"]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_i64().unwrap() as i32)
        .collect();
    assert_eq!(routed, expected);
    // llama-server reused its cache: a routed request decoded only the new suffix.
    let requests = usage.cloud_requests as usize;
    assert!(server.metric("llamacpp:prompt_tokens_total") < (prompt.len() * requests) as f64);
}

#[test]
fn budget_zero_never_reaches_llama_server() {
    let Some(weights) = load(SMOLLM2) else { return };
    let Some(server) = LlamaServer::start(&support::model(SMOLLM2).unwrap()) else {
        return;
    };
    let mut edge = weights.session(&options()).unwrap();
    let prompt = edge.tokenize(&weights.chat_prompt(&[Message::user("Hi")]).unwrap(), true);
    let mut cloud = CloudClient::new(CloudConfig::new(&server.base_url)).unwrap();
    let usage = route(
        &mut edge,
        &mut cloud,
        &FixedRouter(1.0),
        CloudBudget::share(0.0),
        &prompt,
        16,
        &mut |_| {},
    );
    assert_eq!(usage.cloud_requests, 0);
    assert_eq!(server.metric("llamacpp:tokens_predicted_total"), 0.0);
}

/// llama.cpp's server (b11434) reads a final assistant message as the start of the reply
/// (a prefill, with or without `continue_final_message`) and goes on from it, but the
/// message it answers holds the reply so far before the new tokens. The check sees that, and
/// chat mode cuts the repeat off, so a continued reply gets only what comes next.
#[test]
fn llama_servers_chat_endpoint_repeats_the_reply_so_far_and_chat_mode_cuts_it_off() {
    let Some(model) = support::model(SMOLLM2) else {
        return;
    };
    let Some(server) = LlamaServer::start(&model) else {
        return;
    };
    let mut config = CloudConfig::new(&server.base_url);
    config.mode = CloudMode::Chat;
    let mut cloud = CloudClient::new(config).unwrap();
    assert_eq!(cloud.check_continuation(&|| false), Ok(()));
    let messages = [Message::user("Count from 1 to 10, separated by commas.")];
    let reply = || "1, 2, 3, 4,".to_owned();
    let answer = cloud
        .complete(&CloudRequest {
            ids: &[],
            text: &String::new,
            messages: &messages,
            reply: &reply,
            max_tokens: 3,
            stop: &|| false,
        })
        .unwrap();
    assert!(
        answer.text.trim_start().starts_with('5'),
        "only what comes next: {:?}",
        answer.text
    );
}
