//! Accuracy against cloud share: every router at every budget on the same questions.
//!
//! Runs go question by question, all runs of one question back to back: the edge's KV cache
//! then holds the question's prompt for every run (each decodes only its own reply), and a
//! cloud with prefix caching (llama-server, `tandem serve`) re-reads nothing either. Each run
//! keeps its own budget controller across questions, so a 5% budget means 5% of the run's
//! tokens, not 5% of each short reply. The order of runs rotates per question so that no run
//! pays every prompt's first decode.

use crate::data::Row;
use crate::task;
use serde::{Deserialize, Serialize};
use std::time::Instant;
use tandem_core::budget::{CloudBudget, LiveBudget, ReplyBudget};
use tandem_core::cloud::Cloud;
use tandem_core::decode::{generate_with, Collaboration, DecodeOptions};
use tandem_core::edge::{EdgeError, EdgeModel};
use tandem_core::event::Event;
use tandem_core::local::{EdgeWeights, LoadError};
use tandem_core::router::{FixedRouter, Router};

/// One router at one budget. Budget 0 is edge-only and 1 cloud-only, whatever the router.
pub struct RunSpec {
    /// The router's name in the results.
    pub router: String,
    /// Maximum cloud share of the run's tokens.
    pub budget: f32,
    /// The router (ignored at budgets 0 and 1).
    pub scorer: Box<dyn Router>,
}

impl RunSpec {
    /// A run of `scorer` at `budget`; budgets 0 and 1 become the edge-only and cloud-only
    /// references.
    pub fn new(scorer: Box<dyn Router>, budget: f32) -> Self {
        let budget = budget.clamp(0.0, 1.0);
        let (router, scorer): (String, Box<dyn Router>) = if budget <= 0.0 {
            ("edge-only".into(), Box::new(FixedRouter(0.0)))
        } else if budget >= 1.0 {
            ("cloud-only".into(), Box::new(FixedRouter(1.0)))
        } else {
            (scorer.name().to_owned(), scorer)
        };
        Self {
            router,
            budget,
            scorer,
        }
    }
}

/// What one run measured (the `runs` entries of `results.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// Router name.
    pub router: String,
    /// Target cloud share.
    pub budget: f32,
    /// Questions answered.
    pub n: usize,
    /// Share answered correctly.
    pub accuracy: f64,
    /// Share of reply tokens that came from the cloud.
    pub cloud_share: f64,
    /// Cloud requests made.
    pub cloud_requests: u64,
    /// Prompt tokens the cloud billed.
    pub cloud_prompt_tokens: u64,
    /// Completion tokens the cloud billed.
    pub cloud_completion_tokens: u64,
    /// Wall time of this run's replies.
    pub seconds: f64,
    /// Reply tokens from the edge.
    pub edge_tokens: u64,
    /// Reply tokens from the cloud.
    pub cloud_tokens: u64,
    /// Cloud requests that failed (their tokens came from the edge).
    pub cloud_failures: u64,
}

/// The whole evaluation (`results.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Results {
    /// What was evaluated.
    pub data: String,
    /// Edge model.
    pub edge: String,
    /// Cloud identity.
    pub cloud: String,
    /// One entry per run.
    pub runs: Vec<RunResult>,
}

/// One reply of one run (a line of `replies.jsonl`): what each router changed, question by
/// question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplyRecord {
    /// The question's id.
    pub question: String,
    /// Router name.
    pub router: String,
    /// Target cloud share.
    pub budget: f32,
    /// The reply as generated.
    pub reply: String,
    /// The answer read from it.
    pub answer: Option<String>,
    /// Whether that answer is right.
    pub correct: bool,
    /// Reply tokens from the cloud.
    pub cloud_tokens: u32,
}

/// What [`evaluate`] measured.
pub struct Evaluation {
    /// One result per run, in the order of the specs.
    pub runs: Vec<RunResult>,
    /// Every reply, question by question.
    pub replies: Vec<ReplyRecord>,
}

/// Why an evaluation stopped.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// The edge model failed.
    #[error(transparent)]
    Edge(#[from] EdgeError),
    /// The chat template failed.
    #[error(transparent)]
    Template(#[from] LoadError),
}

struct RunState {
    spec: RunSpec,
    controller: ReplyBudget,
    live: LiveBudget,
    result: RunResult,
    correct: usize,
}

/// Evaluates every run of `specs` on `rows`, asking the cloud for `span` tokens per request
/// (1 measures the router alone: every cloud token is one it chose); `progress(done, total)`
/// after each question.
pub fn evaluate(
    weights: &EdgeWeights,
    edge: &mut dyn EdgeModel,
    mut cloud: Option<&mut dyn Cloud>,
    rows: &[Row],
    specs: Vec<RunSpec>,
    span: u32,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Evaluation, EvalError> {
    let mut runs: Vec<RunState> = specs
        .into_iter()
        .map(|spec| {
            let budget = CloudBudget::share(spec.budget);
            RunState {
                controller: ReplyBudget::new(spec.scorer.threshold_for_share(spec.budget), 0.0),
                live: LiveBudget::new(budget),
                result: RunResult {
                    router: spec.router.clone(),
                    budget: spec.budget,
                    n: 0,
                    accuracy: 0.0,
                    cloud_share: 0.0,
                    cloud_requests: 0,
                    cloud_prompt_tokens: 0,
                    cloud_completion_tokens: 0,
                    seconds: 0.0,
                    edge_tokens: 0,
                    cloud_tokens: 0,
                    cloud_failures: 0,
                },
                correct: 0,
                spec,
            }
        })
        .collect();
    let count = runs.len();
    let mut replies = Vec::with_capacity(rows.len() * count);
    for (q, row) in rows.iter().enumerate() {
        let user = task::prompt(row);
        let prompt = edge.tokenize(&weights.chat_prompt(&[("user", &user)])?, true);
        let messages = [("user".to_owned(), user)];
        let options = DecodeOptions {
            max_tokens: task::max_tokens(row),
            span: span.max(1),
            ..DecodeOptions::default()
        };
        for k in 0..count {
            let run = &mut runs[(q + k) % count];
            let mut reply = String::new();
            let mut failures = 0u64;
            let mut sink = |event: Event| {
                match event {
                    Event::Token { text, .. } => reply.push_str(&text),
                    Event::CloudRequest { ok: false, .. } => failures += 1,
                    _ => {}
                }
                true
            };
            let started = Instant::now();
            let usage = generate_with(
                Collaboration {
                    // Casts shorten the trait objects' lifetimes to this one reply.
                    edge: &mut *edge as &mut dyn EdgeModel,
                    cloud: cloud.as_mut().map(|c| &mut **c as &mut dyn Cloud),
                    router: run.spec.scorer.as_ref(),
                    budget: &run.live,
                    messages: &messages,
                },
                &prompt,
                &options,
                &mut run.controller,
                &mut sink,
            )?;
            let r = &mut run.result;
            r.seconds += started.elapsed().as_secs_f64();
            r.n += 1;
            r.edge_tokens += u64::from(usage.edge_tokens);
            r.cloud_tokens += u64::from(usage.cloud_tokens);
            r.cloud_requests += u64::from(usage.cloud_requests);
            r.cloud_prompt_tokens += usage.cloud_prompt_tokens;
            r.cloud_completion_tokens += usage.cloud_completion_tokens;
            r.cloud_failures += failures;
            let correct = task::is_correct(row, &reply);
            run.correct += usize::from(correct);
            replies.push(ReplyRecord {
                question: row.id().to_owned(),
                router: run.spec.router.clone(),
                budget: run.spec.budget,
                answer: task::answer(row, &reply),
                reply,
                correct,
                cloud_tokens: usage.cloud_tokens,
            });
        }
        progress(q + 1, rows.len());
    }
    let runs = runs
        .into_iter()
        .map(|run| {
            let mut r = run.result;
            r.accuracy = run.correct as f64 / r.n.max(1) as f64;
            r.cloud_share = r.cloud_tokens as f64 / (r.edge_tokens + r.cloud_tokens).max(1) as f64;
            r
        })
        .collect();
    Ok(Evaluation { runs, replies })
}

/// Share of the edge→cloud accuracy gap a run recovers (1 = as accurate as cloud-only).
pub fn gap_recovered(run: &RunResult, edge_only: &RunResult, cloud_only: &RunResult) -> f64 {
    let gap = cloud_only.accuracy - edge_only.accuracy;
    if gap.abs() < 1e-12 {
        return 0.0;
    }
    (run.accuracy - edge_only.accuracy) / gap
}
