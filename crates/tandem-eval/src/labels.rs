//! Label collection: one cloud request per training prompt, then the edge model
//! teacher-forced over the cloud's answer in one batched decode, then one short cloud
//! continuation per disagreement that comes before the answer is written.
//!
//! The cloud's greedy answer is what routing would have fetched. At each of its positions the
//! edge's own top token either agrees or not (R2R, Co-LLM); a disagreement is labelled "ask
//! the cloud" only where it changes the answer read from the reply (R2R's critical tokens).
//! Where one token settles the answer (a letter) that is read directly ([`task::decides`]).
//! Elsewhere the cloud continues from the edge's token for as many tokens as its own reply
//! took to write the answer, plus [`SLACK`]: if the answer read from that branch differs, the
//! edge's token sent the reply astray (the Sydney in "The capital of Australia is"); if the
//! cloud recovers, it was only wording. Positions after the answer is written are neutral
//! without asking. Measured on csqa:dev 0–599: trained on every disagreement, the router
//! spent its budget on wording and on "the edge ends the reply, the cloud goes on" (a third of
//! those labels) and lost to plain entropy at 5% and 10%.

use crate::data::Row;
use crate::features::{FeatureWriter, Record};
use crate::task::{self, ChoiceFormat};
use tandem_core::cloud::{Cloud, CloudError, CloudRequest, VOCAB_PROBE};
use tandem_core::edge::{EdgeError, EdgeModel, TokenId};
use tandem_core::local::{EdgeWeights, LoadError};
use tandem_core::message::Message;
use tandem_core::sampling::{Sampler, SamplingParams};

/// Why collection stopped.
#[derive(Debug, thiserror::Error)]
pub enum LabelError {
    /// The edge model failed.
    #[error(transparent)]
    Edge(#[from] EdgeError),
    /// The chat template failed.
    #[error(transparent)]
    Template(#[from] LoadError),
    /// The features file could not be written.
    #[error(transparent)]
    Features(#[from] crate::features::FeaturesError),
    /// The cloud failed on too many examples in a row (it is probably down).
    #[error("the cloud failed {0} times in a row, last: {1}")]
    Cloud(u32, CloudError),
}

/// Progress of a collection.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LabelProgress {
    /// Examples done (collected now or before a resume).
    pub done: usize,
    /// Examples in all.
    pub total: usize,
    /// Positions written so far in this run.
    pub positions: usize,
    /// Of which the edge's token would change the answer the cloud's gives (label 1).
    pub positives: usize,
    /// Examples skipped because the cloud failed on them.
    pub failed: usize,
    /// Cloud requests made in this run (one answer per example, one continuation per
    /// disagreement before the answer).
    pub requests: usize,
}

/// Consecutive cloud failures that end a collection.
const MAX_FAILURES_IN_A_ROW: u32 = 5;

/// The questions a collection asks, and how.
#[derive(Debug, Clone, Copy)]
pub struct Questions<'a> {
    /// The rows.
    pub rows: &'a [Row],
    /// How multiple-choice rows are asked.
    pub format: ChoiceFormat,
}

/// Collects labels for `questions` (skipping the examples in `done`) into `writer`.
pub fn collect(
    weights: &EdgeWeights,
    edge: &mut dyn EdgeModel,
    cloud: &mut dyn Cloud,
    questions: Questions<'_>,
    done: &std::collections::BTreeSet<u32>,
    writer: &mut FeatureWriter,
    progress: &mut dyn FnMut(LabelProgress),
) -> Result<LabelProgress, LabelError> {
    let mut sampler = Sampler::new(SamplingParams::default());
    // A cloud that cannot be reached fails the first request below, which says so.
    let as_ids = cloud
        .shares_vocab(&edge.tokenize(VOCAB_PROBE, false))
        .unwrap_or(false);
    let mut failures_in_a_row = 0;
    let format = questions.format;
    each_example(questions, done, writer, progress, |index, row, state| {
        let asked = Asked::new(weights, edge, row, format, as_ids)?;
        state.requests += 1;
        let labelled = asked.answer(edge, cloud).and_then(|answer| {
            let records = teacher_force(edge, &mut sampler, &asked.prompt, &answer, row, index)?;
            asked.continue_disagreements(edge, cloud, &answer, records, &mut state.requests)
        });
        match labelled {
            Ok(records) => {
                failures_in_a_row = 0;
                Ok(Some(records))
            }
            Err(Failure::Edge(e)) => Err(e.into()),
            Err(Failure::Cloud(e)) => {
                failures_in_a_row += 1;
                state.failed += 1;
                if failures_in_a_row >= MAX_FAILURES_IN_A_ROW {
                    return Err(LabelError::Cloud(failures_in_a_row, e));
                }
                Ok(None)
            }
        }
    })
}

/// The loop every collection shares: each question not yet `done`, in order, labelled by
/// `label` (`None`: skipped, already counted as failed), its records written as one example,
/// and progress told after each; a resumed collection goes on where the last one stopped.
pub(crate) fn each_example(
    questions: Questions<'_>,
    done: &std::collections::BTreeSet<u32>,
    writer: &mut FeatureWriter,
    progress: &mut dyn FnMut(LabelProgress),
    mut label: impl FnMut(u32, &Row, &mut LabelProgress) -> Result<Option<Vec<Record>>, LabelError>,
) -> Result<LabelProgress, LabelError> {
    let mut state = LabelProgress {
        done: done.len(),
        total: questions.rows.len(),
        positions: 0,
        positives: 0,
        failed: 0,
        requests: 0,
    };
    for (index, row) in questions.rows.iter().enumerate() {
        let index = index as u32;
        if done.contains(&index) {
            continue;
        }
        let Some(records) = label(index, row, &mut state)? else {
            continue;
        };
        state.positions += records.len();
        state.positives += records.iter().filter(|r| r.label).count();
        writer.write_example(&records)?;
        state.done += 1;
        progress(state);
    }
    Ok(state)
}

/// Why one example could not be labelled.
enum Failure {
    Edge(EdgeError),
    Cloud(CloudError),
}

impl From<EdgeError> for Failure {
    fn from(e: EdgeError) -> Self {
        Failure::Edge(e)
    }
}

impl From<CloudError> for Failure {
    fn from(e: CloudError) -> Self {
        Failure::Cloud(e)
    }
}

/// Tokens the cloud may take beyond the length its own reply needed to write the answer
/// before a branch that has not written it counts as astray.
const SLACK: usize = 8;
/// The longest continuation asked for one position; a disagreement further from the answer
/// (a math solution's early steps) stays neutral.
const MAX_CONTINUATION: usize = 64;

/// One question as the cloud is asked it.
struct Asked<'r> {
    row: &'r Row,
    format: ChoiceFormat,
    prompt: Vec<TokenId>,
    prompt_text: String,
    messages: [Message; 1],
    as_ids: bool,
}

impl<'r> Asked<'r> {
    fn new(
        weights: &EdgeWeights,
        edge: &dyn EdgeModel,
        row: &'r Row,
        format: ChoiceFormat,
        as_ids: bool,
    ) -> Result<Self, LoadError> {
        let user = task::prompt(row, format);
        let prompt_text = weights.chat_prompt(&[Message::user(&user)])?;
        Ok(Self {
            row,
            format,
            prompt: edge.tokenize(&prompt_text, true),
            prompt_text,
            messages: [Message::user(user)],
            as_ids,
        })
    }

    /// The cloud's reply after `reply` (edge tokens), at most `max_tokens`, cut at its end
    /// of turn.
    fn complete(
        &self,
        edge: &dyn EdgeModel,
        cloud: &mut dyn Cloud,
        reply: &[TokenId],
        max_tokens: u32,
    ) -> Result<Vec<TokenId>, CloudError> {
        let ids: Vec<TokenId> = if self.as_ids {
            self.prompt.iter().chain(reply).copied().collect()
        } else {
            Vec::new()
        };
        let answer = cloud.complete(&CloudRequest {
            ids: &ids,
            text: &|| format!("{}{}", self.prompt_text, edge.text_of(reply)),
            messages: &self.messages,
            reply: &|| edge.text_of(reply),
            max_tokens,
            stop: &|| false,
        })?;
        let mut tokens = match answer.ids {
            Some(ids) => ids,
            None => edge.tokenize(&answer.text, false),
        };
        if let Some(end) = tokens.iter().position(|&t| edge.is_end_of_turn(t)) {
            tokens.truncate(end);
        }
        Ok(tokens)
    }

    /// The cloud's whole answer.
    fn answer(&self, edge: &dyn EdgeModel, cloud: &mut dyn Cloud) -> Result<Vec<TokenId>, Failure> {
        let max_tokens = task::max_tokens(self.row, self.format);
        Ok(self.complete(edge, cloud, &[], max_tokens)?)
    }

    /// Labels the disagreements that come before `answer` (the cloud's reply) has written
    /// its answer and that no single token settles: the cloud continues from the edge's token,
    /// and the position is critical when the answer read from that branch differs.
    fn continue_disagreements(
        &self,
        edge: &dyn EdgeModel,
        cloud: &mut dyn Cloud,
        answer: &[TokenId],
        mut records: Vec<Record>,
        requests: &mut usize,
    ) -> Result<Vec<Record>, Failure> {
        let read = |tokens: &[TokenId]| task::answer(self.row, &edge.text_of(tokens));
        let outcome = read(answer);
        // A reply with no answer in it (a chat reply the cloud got wrong) gives no reason to
        // prefer either branch.
        if outcome.is_none() {
            return Ok(records);
        }
        let Some(written) = (1..=answer.len()).find(|&k| read(&answer[..k]) == outcome) else {
            return Ok(records);
        };
        for record in records.iter_mut() {
            let position = usize::from(record.position);
            if position >= written || record.label || record.edge_token == record.cloud_token {
                continue;
            }
            let mut branch = answer[..position].to_vec();
            if !edge.is_end_of_turn(record.edge_token) {
                let horizon = written - position + SLACK;
                if horizon > MAX_CONTINUATION {
                    continue;
                }
                branch.push(record.edge_token);
                *requests += 1;
                let rest = self.complete(edge, cloud, &branch, horizon as u32)?;
                branch.extend(rest);
            }
            record.label = read(&branch) != outcome;
        }
        Ok(records)
    }
}

/// The edge model's view of every position of `answer` after `prompt`.
fn teacher_force(
    edge: &mut dyn EdgeModel,
    sampler: &mut Sampler,
    prompt: &[TokenId],
    answer: &[TokenId],
    row: &Row,
    example: u32,
) -> Result<Vec<Record>, EdgeError> {
    if answer.is_empty() {
        return Ok(Vec::new());
    }
    let (first, _) = edge.sync(prompt, sampler)?;
    let mut steps = vec![first];
    // Position i is predicted by the step after token i-1; the last answer token predicts
    // nothing we need. One token at a time, as the app decodes a reply, so the router learns
    // from the numbers it will see.
    steps.extend(edge.extend_each(&answer[..answer.len() - 1], sampler)?);
    Ok(steps
        .into_iter()
        .zip(answer)
        .enumerate()
        .map(|(position, (step, &cloud_token))| Record {
            example,
            position: position.min(usize::from(u16::MAX)) as u16,
            label: step.token != cloud_token
                && task::decides(
                    row,
                    &edge.text_of(&answer[..position]),
                    &edge.piece_text(cloud_token),
                    &edge.piece_text(step.token),
                ),
            edge_token: step.token,
            cloud_token,
            cloud_margin: f32::NAN,
            cloud_prob: f32::NAN,
            signals: step.signals.features(),
            hidden: step.hidden.unwrap_or_default(),
        })
        .collect())
}
