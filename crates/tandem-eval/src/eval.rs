//! Accuracy against cloud share: every router at every budget on the same questions. Open
//! prompts, which have no answer, are scored by the judge's mean log-probability per token
//! instead ([`crate::quality`]); a set is one or the other ([`Metric`]).
//!
//! Runs go question by question, all runs of one question back to back: the edge's KV cache
//! then holds the question's prompt for every run (each decodes only its own reply), and a
//! cloud with prefix caching (llama-server, `tandem serve`) re-reads nothing either. The order
//! of runs rotates per question so that no run pays every prompt's first decode.
//!
//! The budget works as in the app: each run is one user's session, a controller per reply
//! drawing on the run's account ([`tandem_core::budget`]), so a 5% budget means 5% of the
//! run's tokens, a reply spending what earlier replies saved.

use crate::data::Row;
use crate::quality::Judge;
use crate::stats::{self, Interval};
use crate::task::{self, ChoiceFormat};
use serde::{Deserialize, Serialize};
use std::time::Instant;
use tandem_core::budget::{CloudBudget, LiveBudget, Prices};
use tandem_core::cloud::Cloud;
use tandem_core::decode::{generate, Collaboration, DecodeOptions};
use tandem_core::edge::{EdgeError, EdgeModel};
use tandem_core::engine::ReplyError;
use tandem_core::event::{Event, FinishReason, TokenSource};
use tandem_core::local::{EdgeWeights, LoadError};
use tandem_core::message::Message;
use tandem_core::router::{Features, FixedRouter, Router, RouterKind};

/// What a run's score is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Metric {
    /// The share of replies whose answer is right (multiple choice, math, checkable chat).
    Accuracy,
    /// The judge's mean log-probability per token of each reply, averaged over replies (open
    /// prompts); higher is closer to what the judge would write.
    JudgeLogProb,
}

impl Metric {
    /// The metric of `rows`: accuracy when every row has an answer, the judge's log-prob
    /// when none has; a mix is refused, since the two do not average.
    pub fn of(rows: &[Row]) -> Result<Metric, String> {
        let graded = rows.iter().filter(|r| r.is_graded()).count();
        match graded {
            0 => Ok(Metric::JudgeLogProb),
            n if n == rows.len() => Ok(Metric::Accuracy),
            n => Err(format!(
                "{n} of {} rows have an answer and the rest are open prompts: evaluate them apart \
                 (accuracy and the judge's log-probability do not average)",
                rows.len()
            )),
        }
    }

    /// The axis and column name.
    pub fn label(self) -> &'static str {
        match self {
            Metric::Accuracy => "accuracy",
            Metric::JudgeLogProb => "judge log-prob/token",
        }
    }

    /// A score as shown: accuracy in percent, a log-probability as it is.
    pub fn show(self, score: f64) -> String {
        match self {
            Metric::Accuracy => format!("{:.1}%", score * 100.0),
            Metric::JudgeLogProb => format!("{score:.3}"),
        }
    }
}

/// The name a run of the app's default router is recorded under ([`RunSpec::named`]); every
/// other router is compared with it too, so a candidate's "better than the default" is read
/// off `results.json`.
pub const DEFAULT_ROUTER: &str = "default";

/// One router at one budget. Budget 0 is edge-only and 1 cloud-only, whatever the router.
pub struct RunSpec {
    /// The router's name in the results.
    pub router: String,
    /// The router it resolved to, when the name is an alias (`default`).
    pub resolved: Option<String>,
    /// Maximum cloud share of the run's tokens (the budget of the run's account).
    pub budget: f32,
    /// The router (ignored at budgets 0 and 1).
    pub scorer: Box<dyn Router>,
}

impl RunSpec {
    /// A run of `scorer` at `budget`; budgets 0 and 1 become the edge-only and cloud-only
    /// references.
    pub fn new(scorer: Box<dyn Router>, budget: f32) -> Self {
        let budget = budget.clamp(0.0, 1.0);
        let scorer: Box<dyn Router> = if budget <= 0.0 {
            Box::new(FixedRouter(0.0))
        } else if budget >= 1.0 {
            Box::new(FixedRouter(1.0))
        } else {
            scorer
        };
        let router = scorer.name().to_owned();
        Self {
            router,
            resolved: None,
            budget,
            scorer,
        }
    }

    /// The same run recorded under `alias` (e.g. `default`), with the router's own name kept
    /// in [`RunResult::resolved`].
    pub fn named(mut self, alias: &str) -> Self {
        if self.budget > 0.0 && self.budget < 1.0 {
            self.resolved = Some(std::mem::replace(&mut self.router, alias.to_owned()));
        }
        self
    }
}

/// What one run measured (the `runs` entries of `results.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// Router name.
    pub router: String,
    /// The router an alias (`default`) resolved to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved: Option<String>,
    /// Target cloud share.
    pub budget: f32,
    /// Questions answered.
    pub n: usize,
    /// The mean score per reply ([`Results::metric`]): the share answered correctly, or the
    /// judge's mean log-probability per token.
    pub score: f64,
    /// 95% bootstrap interval of the score.
    pub score_interval: Interval,
    /// The paired difference in score to each baseline run and to the default router's run
    /// at the same budget (and to edge-only and cloud-only), with its 95% interval.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub versus: Vec<PairedDifference>,
    /// Replies this run answered wrong that edge-only and cloud-only both answered right:
    /// each model right alone, wrong spliced together (a cloud word the edge then contradicts,
    /// a span cut mid-word), as against the replies it broke only by taking a cloud token
    /// that was itself wrong. Checked answers, where both ran in the same evaluation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broken_splices: Option<u32>,
    /// What the cloud billed (prompt and completion tokens at the evaluation's prices) as a
    /// share of what cloud-only billed.
    pub cost_vs_cloud_only: Option<f64>,
    /// Share of reply tokens that came from the cloud.
    pub cloud_share: f64,
    /// Cloud requests made.
    pub cloud_requests: u64,
    /// Of those, requests asked ahead whose answers went unused (paid for all the same).
    #[serde(default)]
    pub cloud_requests_unused: u64,
    /// Prompt tokens the cloud billed.
    pub cloud_prompt_tokens: u64,
    /// Of those, the ones the cloud read from its prompt cache (billed at the cached price).
    #[serde(default)]
    pub cloud_cached_prompt_tokens: u64,
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

/// How a run compares with a baseline on the same questions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairedDifference {
    /// The baseline run's router.
    pub baseline: String,
    /// Score of this run minus the baseline's.
    pub difference: f64,
    /// Its 95% paired bootstrap interval: above 0 means this run is better.
    pub interval: Interval,
    /// Questions the baseline answered right and this run wrong, and the reverse (checked
    /// answers only; 0 on open prompts). Against edge-only, the first are the replies routing
    /// broke.
    #[serde(default)]
    pub right_to_wrong: u32,
    /// Questions the baseline answered wrong and this run right.
    #[serde(default)]
    pub wrong_to_right: u32,
}

/// The whole evaluation (`results.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Results {
    /// What was evaluated.
    pub data: String,
    /// What the runs' scores are.
    pub metric: Metric,
    /// The model that scored the replies, for [`Metric::JudgeLogProb`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<String>,
    /// The budget rule the runs spent under ([`tandem_core::budget::RULE`]).
    #[serde(default = "per_reply_rule")]
    pub budget_rule: String,
    /// Tokens asked for per cloud request.
    pub span: u32,
    /// The wait limit the runs ran under, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_wait_ms: Option<u32>,
    /// The multiple-choice prompt format ([`ChoiceFormat::name`]).
    pub prompt_format: String,
    /// Prices the costs are computed at.
    pub prices: Prices,
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
    /// The answer read from it (none for an open prompt).
    pub answer: Option<String>,
    /// What it scored: 1 for a right answer and 0 for a wrong one, or the judge's mean
    /// log-probability per token for an open prompt.
    pub outcome: f64,
    /// Reply tokens from the cloud.
    pub cloud_tokens: u32,
    /// The router's score at each token of the reply, to see which positions a router ranks
    /// first (the answer's letter, or the wording around it).
    #[serde(default)]
    pub scores: Vec<f32>,
    /// The positions of the reply whose token the cloud wrote, to see where a router spent
    /// its share (the answer's letter, or the words after it).
    #[serde(default)]
    pub cloud_positions: Vec<u32>,
    /// What the router saw at each position it scored: `[position in the reply, top-1
    /// probability, top-1 − top-2 margin, entropy in nats]`, so that other scores of the same
    /// positions can be ranked offline: one row per position of the reply as it stands (a
    /// span's token the reply did not keep gives way to the edge's, scored there again), and
    /// the position where the edge ended its turn.
    #[serde(default)]
    pub signals: Vec<[f32; 4]>,
}

/// Passes a router's scores through and keeps the signals of every position it scores, the
/// last time it scores it.
struct Recorder<'a> {
    inner: &'a dyn Router,
    seen: std::sync::Mutex<Vec<[f32; 4]>>,
}

impl Recorder<'_> {
    fn take(&self) -> Vec<[f32; 4]> {
        std::mem::take(&mut *self.seen.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl Router for Recorder<'_> {
    fn kind(&self) -> RouterKind {
        self.inner.kind()
    }

    fn score(&self, f: &Features<'_>) -> f32 {
        let round = |x: f32| (x * 1e4).round() / 1e4;
        let s = f.signals;
        let row = [
            f.position as f32,
            round(s.top1_prob),
            round(s.margin),
            round(s.entropy),
        ];
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        // A span's token the reply did not keep is scored again once the edge writes that
        // position: one row per position of the reply as it stands.
        while seen.last().is_some_and(|r| r[0] >= row[0]) {
            seen.pop();
        }
        seen.push(row);
        drop(seen);
        self.inner.score(f)
    }

    fn needs_hidden_state(&self) -> bool {
        self.inner.needs_hidden_state()
    }

    fn threshold_for_share(&self, share: f32) -> f32 {
        self.inner.threshold_for_share(share)
    }
}

/// The rule of results written before the account: two tokens borrowed per reply.
fn per_reply_rule() -> String {
    "per-reply/2".into()
}

/// What [`evaluate`] measured.
pub struct Evaluation {
    /// One result per run, in the order of the specs.
    pub runs: Vec<RunResult>,
    /// Every reply, question by question.
    pub replies: Vec<ReplyRecord>,
}

struct RunState {
    spec: RunSpec,
    live: LiveBudget,
    result: RunResult,
    outcomes: Vec<f64>,
}

/// How an evaluation asks the cloud and counts the budget.
#[derive(Debug, Clone, Copy)]
pub struct Setup {
    /// Tokens asked for per cloud request (1 measures the router alone: every cloud token is
    /// one it chose).
    pub span: u32,
    /// Prices for the cost column.
    pub prices: Prices,
    /// How multiple-choice questions are asked.
    pub format: ChoiceFormat,
    /// The wait limit the runs' budgets carry (Settings' "Slow after"), in milliseconds:
    /// what a user whose cloud is slower gets. None, as the app's default.
    pub max_wait_ms: Option<u32>,
}

/// Why an evaluation stopped.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// An open prompt has no answer to check, so its reply needs a judge to be scored.
    #[error("open prompts are scored by a judge model, and none was given")]
    NoJudge,
    /// A reply could not be written (its chat rendered, or the edge model decoded).
    #[error(transparent)]
    Reply(#[from] ReplyError),
}

// Each failure has one shape: the edge's and the template's are a reply's failures.
impl From<EdgeError> for EvalError {
    fn from(e: EdgeError) -> Self {
        EvalError::Reply(e.into())
    }
}

impl From<LoadError> for EvalError {
    fn from(e: LoadError) -> Self {
        EvalError::Reply(e.into())
    }
}

/// Evaluates every run of `specs` on `rows`; open prompts are scored by `judge` (an error
/// without one); `progress(done, total)` after each question.
#[allow(clippy::too_many_arguments)]
pub fn evaluate(
    weights: &EdgeWeights,
    edge: &mut dyn EdgeModel,
    mut cloud: Option<&mut dyn Cloud>,
    mut judge: Option<&mut Judge<'_>>,
    rows: &[Row],
    specs: Vec<RunSpec>,
    setup: Setup,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Evaluation, EvalError> {
    let mut runs: Vec<RunState> = specs
        .into_iter()
        .map(|spec| RunState {
            live: LiveBudget::new(CloudBudget {
                prices: setup.prices,
                max_wait_ms: setup.max_wait_ms,
                ..CloudBudget::share(spec.budget)
            }),
            result: RunResult {
                router: spec.router.clone(),
                resolved: spec.resolved.clone(),
                budget: spec.budget,
                n: 0,
                score: 0.0,
                score_interval: Interval {
                    low: 0.0,
                    high: 0.0,
                },
                versus: Vec::new(),
                broken_splices: None,
                cost_vs_cloud_only: None,
                cloud_share: 0.0,
                cloud_requests: 0,
                cloud_requests_unused: 0,
                cloud_prompt_tokens: 0,
                cloud_cached_prompt_tokens: 0,
                cloud_completion_tokens: 0,
                seconds: 0.0,
                edge_tokens: 0,
                cloud_tokens: 0,
                cloud_failures: 0,
            },
            outcomes: Vec::with_capacity(rows.len()),
            spec,
        })
        .collect();
    let count = runs.len();
    let mut replies = Vec::with_capacity(rows.len() * count);
    for (q, row) in rows.iter().enumerate() {
        let user = task::prompt(row, setup.format);
        let prompt = edge.tokenize(&weights.chat_prompt(&[Message::user(&user)])?, true);
        let messages = [Message::user(user)];
        let options = DecodeOptions {
            max_tokens: task::max_tokens(row, setup.format),
            span: setup.span.max(1),
            ..DecodeOptions::default()
        };
        for k in 0..count {
            let run = &mut runs[(q + k) % count];
            let mut reply = String::new();
            let mut scores = Vec::new();
            let mut cloud_positions = Vec::new();
            let mut failures = 0u64;
            let mut ended = false;
            let mut sink = |event: Event| {
                match event {
                    Event::Token {
                        text,
                        score,
                        source,
                        ..
                    } => {
                        if source == TokenSource::Cloud {
                            cloud_positions.push(scores.len() as u32);
                        }
                        reply.push_str(&text);
                        // Four decimals keep replies.jsonl small.
                        scores.push((score * 1e4).round() / 1e4);
                    }
                    Event::CloudRequest {
                        ok: false,
                        unused: false,
                        ..
                    } => failures += 1,
                    Event::Finished { reason, .. } => ended = reason == FinishReason::Stop,
                    _ => {}
                }
                true
            };
            let recorder = Recorder {
                inner: run.spec.scorer.as_ref(),
                seen: Default::default(),
            };
            let collaboration = Collaboration {
                // Casts shorten the trait objects' lifetimes to this one reply.
                edge: &mut *edge as &mut dyn EdgeModel,
                cloud: cloud.as_mut().map(|c| &mut **c as &mut dyn Cloud),
                router: &recorder,
                budget: &run.live,
                messages: &messages,
                spend: None,
            };
            let started = Instant::now();
            let usage = generate(collaboration, &prompt, &options, &mut sink)?;
            let r = &mut run.result;
            r.seconds += started.elapsed().as_secs_f64();
            r.n += 1;
            r.edge_tokens += u64::from(usage.edge_tokens);
            r.cloud_tokens += u64::from(usage.cloud_tokens);
            r.cloud_requests += u64::from(usage.cloud_requests);
            r.cloud_requests_unused += u64::from(usage.cloud_requests_unused);
            r.cloud_prompt_tokens += usage.cloud_prompt_tokens;
            r.cloud_cached_prompt_tokens += usage.cloud_cached_prompt_tokens;
            r.cloud_completion_tokens += usage.cloud_completion_tokens;
            r.cloud_failures += failures;
            let outcome = if row.is_graded() {
                f64::from(u8::from(task::is_correct(row, &reply)))
            } else {
                let judge = judge.as_mut().ok_or(EvalError::NoJudge)?;
                judge.mean_log_prob(&messages[0].content, &reply, ended)?
            };
            run.outcomes.push(outcome);
            replies.push(ReplyRecord {
                question: row.id().to_owned(),
                router: run.spec.router.clone(),
                budget: run.spec.budget,
                answer: task::answer(row, &reply),
                reply,
                outcome,
                cloud_tokens: usage.cloud_tokens,
                scores,
                cloud_positions,
                signals: recorder.take(),
            });
        }
        progress(q + 1, rows.len());
    }
    let runs = compare(runs, setup.prices, Metric::of(rows).ok());
    Ok(Evaluation { runs, replies })
}

/// Fills in each run's accuracy, share and cost, its paired differences to the baselines
/// and the default router, and (for checked answers) its broken splices.
fn compare(runs: Vec<RunState>, prices: Prices, metric: Option<Metric>) -> Vec<RunResult> {
    let cost = |r: &RunResult| {
        prices.cost(
            r.cloud_prompt_tokens,
            r.cloud_cached_prompt_tokens,
            r.cloud_completion_tokens,
        )
    };
    let cloud_only_cost = runs
        .iter()
        .find(|run| run.result.router == RouterKind::CloudOnly.name())
        .map(|run| cost(&run.result));
    let versus = |run: &RunState| -> Vec<PairedDifference> {
        // Edge-only and cloud-only at any budget; the other baselines and the default at
        // the run's own.
        let is_reference = |other: &RunState| {
            let name = other.result.router.as_str();
            let kind = RouterKind::BASELINES.into_iter().find(|k| k.name() == name);
            matches!(kind, Some(RouterKind::EdgeOnly | RouterKind::CloudOnly))
                || ((kind.is_some() || name == DEFAULT_ROUTER)
                    && other.spec.budget == run.spec.budget)
        };
        runs.iter()
            .filter(|other| other.result.router != run.result.router && is_reference(other))
            .map(|other| {
                let flips = |from: f64, to: f64| {
                    let flipped = |(&ours, &theirs): (&f64, &f64)| theirs == from && ours == to;
                    run.outcomes
                        .iter()
                        .zip(&other.outcomes)
                        .filter(|p| flipped(*p))
                        .count() as u32
                };
                PairedDifference {
                    baseline: other.result.router.clone(),
                    difference: mean(&run.outcomes) - mean(&other.outcomes),
                    interval: stats::paired_difference_interval(&run.outcomes, &other.outcomes),
                    right_to_wrong: flips(1.0, 0.0),
                    wrong_to_right: flips(0.0, 1.0),
                }
            })
            .collect()
    };
    let outcomes_of = |kind: RouterKind| {
        runs.iter()
            .find(|run| run.result.router == kind.name())
            .map(|run| &run.outcomes)
    };
    let both_right: Option<Vec<bool>> = match (
        metric,
        outcomes_of(RouterKind::EdgeOnly),
        outcomes_of(RouterKind::CloudOnly),
    ) {
        (Some(Metric::Accuracy), Some(edge), Some(cloud)) => Some(
            edge.iter()
                .zip(cloud)
                .map(|(&e, &c)| e == 1.0 && c == 1.0)
                .collect(),
        ),
        _ => None,
    };
    let broken_splices = |run: &RunState| {
        both_right.as_ref().map(|both| {
            both.iter()
                .zip(&run.outcomes)
                .filter(|(&both, &ours)| both && ours == 0.0)
                .count() as u32
        })
    };
    let compared: Vec<(Vec<PairedDifference>, Option<u32>)> = runs
        .iter()
        .map(|run| (versus(run), broken_splices(run)))
        .collect();
    runs.into_iter()
        .zip(compared)
        .map(|(run, (versus, broken_splices))| {
            let mut r = run.result;
            r.score = mean(&run.outcomes);
            r.score_interval = stats::mean_interval(&run.outcomes);
            r.versus = versus;
            r.broken_splices = broken_splices;
            r.cost_vs_cloud_only = cloud_only_cost.filter(|&c| c > 0.0).map(|c| cost(&r) / c);
            r.cloud_share = r.cloud_tokens as f64 / (r.edge_tokens + r.cloud_tokens).max(1) as f64;
            r
        })
        .collect()
}

fn mean(outcomes: &[f64]) -> f64 {
    outcomes.iter().sum::<f64>() / outcomes.len().max(1) as f64
}

/// Share of the edge→cloud gap in score a run recovers (1 = as good as cloud-only); `None`
/// when the cloud is not ahead of the edge, so there is no gap to recover.
pub fn gap_recovered(
    run: &RunResult,
    edge_only: &RunResult,
    cloud_only: &RunResult,
) -> Option<f64> {
    let gap = cloud_only.score - edge_only.score;
    (gap > 1e-12).then(|| (run.score - edge_only.score) / gap)
}
