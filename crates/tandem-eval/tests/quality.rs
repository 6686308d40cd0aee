//! The open prompts' quality proxy on a real model: the judge's mean log-probability per
//! token ranks a fluent reply above the same words scrambled, and counts an end of turn
//! where the reply ended; without a judge an open set is refused by name.

use tandem_core::budget::Prices;
use tandem_core::edge::{EdgeModel, Outputs};
use tandem_core::local::{EdgeWeights, LocalOptions};
use tandem_core::message::Message;
use tandem_core::router::FixedRouter;
use tandem_core::sampling::{Sampler, SamplingParams};
use tandem_eval::data::{OpenRow, Row};
use tandem_eval::eval::{evaluate, EvalError, RunSpec, Setup};
use tandem_eval::quality::Judge;
use tandem_eval::task::ChoiceFormat;
use tandem_test_peers::{model, SMOLLM2};

/// SmolLM2 and one-thread session options, where the test models are present.
fn smollm2() -> Option<(EdgeWeights, LocalOptions)> {
    let weights = EdgeWeights::load(&model(SMOLLM2)?, "smollm2").unwrap();
    let options = LocalOptions {
        n_ctx: 1024,
        threads: 1,
        hidden_state: false,
    };
    Some((weights, options))
}

#[test]
fn the_judge_scores_its_own_reply_by_its_confidence_and_a_scrambled_one_far_lower() {
    let Some((weights, options)) = smollm2() else {
        return;
    };
    let user = "Describe a rainy day in a city in three sentences.";
    // The model's own greedy reply, 32 tokens, cut mid-text.
    let mut edge = weights.session(&options).unwrap();
    let mut sampler = Sampler::new(SamplingParams::default());
    let prompt = weights.tokenize(&weights.chat_prompt(&[Message::user(user)]).unwrap(), true);
    let (mut step, _) = edge.sync(&prompt, &mut sampler).unwrap();
    let mut reply = Vec::new();
    let mut confidence = Vec::new();
    for _ in 0..32 {
        assert!(
            !edge.is_end_of_turn(step.token),
            "a reply of 32 tokens or more"
        );
        reply.extend(edge.piece(step.token));
        confidence.push(f64::from(step.signals.top1_prob).ln());
        step = edge
            .extend(&[step.token], Outputs::Last, &mut sampler)
            .unwrap()
            .pop()
            .unwrap();
    }
    let reply = String::from_utf8_lossy(&reply).into_owned();

    let mut judge = Judge::new("smollm2", &weights, weights.session(&options).unwrap());
    let own = judge.mean_log_prob(user, &reply, false).unwrap();
    // The judge is the model that wrote the reply, greedily: each token is its top one, so
    // the score is its mean log top-1 probability (up to retokenizing the text, and a
    // batched read against one-by-one decodes).
    let expected = confidence.iter().sum::<f64>() / confidence.len() as f64;
    assert!(
        own < 0.0 && (own - expected).abs() < 0.1,
        "{own} vs {expected}"
    );
    let mut words: Vec<&str> = reply.split_whitespace().collect();
    words.reverse();
    let scrambled = judge.mean_log_prob(user, &words.join(" "), false).unwrap();
    assert!(own - scrambled > 1.0, "own {own}, scrambled {scrambled}");
    // Ending the turn mid-sentence is something the judge finds unlikely.
    let stopped = judge.mean_log_prob(user, &reply, true).unwrap();
    assert!(stopped < own, "ended {stopped}, cut off {own}");
    // Reading is deterministic: the same reply scores the same twice.
    let again = judge.mean_log_prob(user, &reply, false).unwrap();
    assert!((again - own).abs() < 1e-6, "{again} vs {own}");
}

#[test]
fn an_open_prompt_without_a_judge_is_refused_by_name() {
    let Some((weights, options)) = smollm2() else {
        return;
    };
    let mut edge = weights.session(&options).unwrap();
    let rows = [Row::Open(OpenRow {
        id: "rain".into(),
        question: "Describe a rainy day in one sentence.".into(),
    })];
    let setup = Setup {
        span: 1,
        prices: Prices::default(),
        format: ChoiceFormat::default(),
        max_wait_ms: None,
    };
    let edge_only = RunSpec::new(Box::new(FixedRouter(0.0)), 0.0);
    let error = evaluate(
        &weights,
        &mut edge,
        None,
        None,
        &rows,
        vec![edge_only],
        setup,
        &mut |_, _| {},
    )
    .err()
    .expect("an open prompt needs a judge");
    assert!(matches!(error, EvalError::NoJudge), "{error}");
    assert!(error.to_string().contains("judge model"), "{error}");
}
