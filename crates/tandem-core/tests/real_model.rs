//! The real llama.cpp engine on real GGUF files.

mod support;

use support::{load, options, SMOLLM2, TINY};
use tandem_core::edge::{EdgeModel, Outputs};
use tandem_core::local::{EdgeWeights, LoadError, LocalOptions};
use tandem_core::message::Message;
use tandem_core::sampling::{Sampler, SamplingParams};
use tandem_core::utf8_stream::Utf8Stream;

fn greedy() -> Sampler {
    Sampler::new(SamplingParams::default())
}

/// Greedy continuation of `prompt` for `n` tokens, as text.
fn continue_text(weights: &EdgeWeights, prompt: &str, n: usize) -> String {
    let mut edge = weights.session(&options()).unwrap();
    let prompt = edge.tokenize(prompt, true);
    let mut sampler = greedy();
    let (mut step, _) = edge.sync(&prompt, &mut sampler).unwrap();
    let mut text = Utf8Stream::default();
    let mut out = String::new();
    for _ in 0..n {
        if edge.is_end_of_turn(step.token) {
            break;
        }
        out.push_str(&text.push(&edge.piece(step.token)));
        step = edge
            .extend(&[step.token], Outputs::Last, &mut sampler)
            .unwrap()
            .remove(0);
    }
    out
}

#[test]
fn smollm2_answers_a_question_in_words() {
    let Some(weights) = load(SMOLLM2) else { return };
    let prompt = weights
        .chat_prompt(&[Message::user("What is the capital of France?")])
        .unwrap();
    assert!(
        prompt.contains("<|im_start|>assistant"),
        "ChatML template applied: {prompt}"
    );
    let answer = continue_text(&weights, &prompt, 24);
    assert!(answer.contains("Paris"), "{answer:?}");
    assert_eq!(
        answer,
        continue_text(&weights, &prompt, 24),
        "greedy decoding is deterministic"
    );
}

#[test]
fn tiny_model_loads_and_generates() {
    let Some(weights) = load(TINY) else { return };
    let prompt = weights.chat_prompt(&[Message::user("hello")]).unwrap();
    let mut edge = weights.session(&options()).unwrap();
    let tokens = edge.tokenize(&prompt, true);
    let mut sampler = greedy();
    let (step, decoded) = edge.sync(&tokens, &mut sampler).unwrap();
    assert_eq!(decoded, tokens.len());
    assert!(step.signals.top1_prob > 0.0 && step.signals.entropy >= 0.0);
    let steps = edge
        .extend(&[step.token, step.token], Outputs::All, &mut sampler)
        .unwrap();
    assert_eq!(steps.len(), 2);
    assert_eq!(edge.tokens().len(), tokens.len() + 2);
}

#[test]
fn a_cloud_token_in_the_cache_reads_like_a_fresh_prefill_of_the_same_text() {
    let Some(weights) = load(SMOLLM2) else { return };
    let prompt = weights
        .chat_prompt(&[Message::user("Name a colour.")])
        .unwrap();
    let mut routed = weights.session(&options()).unwrap();
    let prompt = routed.tokenize(&prompt, true);
    let inserted = routed.tokenize(" Blue is", false);
    let mut sampler = greedy();
    routed.sync(&prompt, &mut sampler).unwrap();
    // A span the edge did not choose, decoded in one batch, then one token rolled back.
    let mut span = inserted.clone();
    span.push(inserted[0]);
    let after_span = routed.extend(&span, Outputs::All, &mut sampler).unwrap();
    routed.truncate(prompt.len() + inserted.len());
    let routed_step = &after_span[inserted.len() - 1];

    let mut fresh = weights.session(&options()).unwrap();
    let mut all = prompt.clone();
    all.extend(&inserted);
    let (fresh_step, _) = fresh.sync(&all, &mut sampler).unwrap();
    assert_eq!(routed_step.token, fresh_step.token);
    let (a, b) = (routed_step.signals, fresh_step.signals);
    assert!((a.entropy - b.entropy).abs() < 1e-3, "{a:?} vs {b:?}");
    assert!((a.top1_prob - b.top1_prob).abs() < 1e-3, "{a:?} vs {b:?}");

    // After the rollback the next token continues exactly as from scratch.
    let next_routed = routed
        .extend(&[routed_step.token], Outputs::Last, &mut sampler)
        .unwrap();
    let next_fresh = fresh
        .extend(&[fresh_step.token], Outputs::Last, &mut sampler)
        .unwrap();
    assert_eq!(next_routed[0].token, next_fresh[0].token);
    assert!((next_routed[0].signals.entropy - next_fresh[0].signals.entropy).abs() < 1e-3);
}

#[test]
fn hidden_states_come_from_the_same_decode() {
    let Some(weights) = load(SMOLLM2) else { return };
    let mut edge = weights
        .session(&LocalOptions {
            hidden_state: true,
            ..options()
        })
        .unwrap();
    let tokens = edge.tokenize("The sky is", true);
    let (step, _) = edge.sync(&tokens, &mut greedy()).unwrap();
    let hidden = step.hidden.expect("hidden state requested");
    assert_eq!(hidden.len(), weights.hidden_size());
    assert!(hidden.iter().all(|v| v.is_finite()) && hidden.iter().any(|v| *v != 0.0));
    let mut plain = weights.session(&options()).unwrap();
    let (plain_step, _) = plain.sync(&tokens, &mut greedy()).unwrap();
    assert_eq!(
        plain_step.token, step.token,
        "embeddings do not change the logits"
    );
    assert!(plain_step.hidden.is_none());
}

#[test]
fn a_chat_turn_decodes_only_the_new_tokens() {
    let Some(weights) = load(SMOLLM2) else { return };
    let mut edge = weights.session(&options()).unwrap();
    let first = weights.chat_prompt(&[Message::user("Hi")]).unwrap();
    let first = edge.tokenize(&first, true);
    let (_, decoded) = edge.sync(&first, &mut greedy()).unwrap();
    assert_eq!(decoded, first.len());
    let second = weights
        .chat_prompt(&[
            Message::user("Hi"),
            Message::assistant("Hello!"),
            Message::user("How are you?"),
        ])
        .unwrap();
    let second = edge.tokenize(&second, true);
    let (_, decoded) = edge.sync(&second, &mut greedy()).unwrap();
    assert!(
        decoded < second.len() - first.len() + 8,
        "decoded {decoded} of {}",
        second.len()
    );
}

#[test]
fn multibyte_text_streams_back_intact_through_real_pieces() {
    let Some(weights) = load(SMOLLM2) else { return };
    let edge = weights.session(&options()).unwrap();
    let text = "Grüße 👋🏽 東京 — ok";
    let mut stream = Utf8Stream::default();
    let mut out = String::new();
    for token in edge.tokenize(text, false) {
        out.push_str(&stream.push(&edge.piece(token)));
    }
    out.push_str(&stream.finish());
    assert_eq!(out, text);
}

#[test]
fn missing_and_corrupt_files_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.gguf");
    let err = EdgeWeights::load(&missing, "nope").err().unwrap();
    assert!(matches!(err, LoadError::Missing(_)), "{err}");
    let garbage = dir.path().join("garbage.gguf");
    std::fs::write(&garbage, b"this is not a model").unwrap();
    let err = EdgeWeights::load(&garbage, "garbage")
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("GGUF magic"), "{err}");
    // Right magic, truncated body: llama.cpp refuses it and we say so instead of crashing.
    let truncated = dir.path().join("truncated.gguf");
    std::fs::write(&truncated, b"GGUF\x03\x00\x00\x00garbage").unwrap();
    let err = EdgeWeights::load(&truncated, "truncated")
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("not a usable GGUF"), "{err}");
}

#[test]
fn a_long_prompt_handed_over_from_the_prefill_context_reads_the_same() {
    let Some(weights) = load(SMOLLM2) else { return };
    let hidden = LocalOptions {
        hidden_state: true,
        ..options()
    };
    let text = "The lighthouse keeper climbed the stairs every evening, counting each step, \
                listening to the waves below and the gulls above, until the lamp was lit and its \
                beam swept across the dark water towards the fishing boats coming home.";
    let tokens = weights.tokenize(text, true);
    assert!(
        tokens.len() > 40,
        "long enough for the handoff: {}",
        tokens.len()
    );

    // One call: decoded in the prefill context, state handed over, last token read here.
    let mut handed = weights.session(&hidden).unwrap();
    let (step, _) = handed.sync(&tokens, &mut greedy()).unwrap();

    // Pieces shorter than the handoff threshold: everything decoded with embeddings on.
    let mut direct = weights.session(&hidden).unwrap();
    let mut sampler = greedy();
    let mut last = None;
    for piece in tokens.chunks(8) {
        last = direct
            .extend(piece, Outputs::Last, &mut sampler)
            .unwrap()
            .pop();
    }
    let reference = last.unwrap();
    assert_eq!(step.token, reference.token);
    let (a, b) = (step.hidden.unwrap(), reference.hidden.unwrap());
    let max_diff = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, f32::max);
    assert!(max_diff < 1e-2, "hidden states differ by {max_diff}");
    assert!((step.signals.entropy - reference.signals.entropy).abs() < 1e-3);
    assert_eq!(handed.tokens(), direct.tokens());

    // And the handed-over cache keeps working: the next token matches too.
    let next_a = handed
        .extend(&[step.token], Outputs::Last, &mut greedy())
        .unwrap();
    let next_b = direct
        .extend(&[reference.token], Outputs::Last, &mut greedy())
        .unwrap();
    assert_eq!(next_a[0].token, next_b[0].token);
}
