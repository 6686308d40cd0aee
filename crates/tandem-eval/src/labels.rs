//! Label collection: one cloud request per training prompt, then the edge model
//! teacher-forced over the cloud's answer in one batched decode.
//!
//! The cloud's greedy answer is what routing would have fetched. At each of its positions the
//! edge's own top token either agrees or not (R2R, Co-LLM); a disagreement is labelled "ask
//! the cloud" only where it changes the answer read from the reply (R2R's critical tokens,
//! [`task::decides`]). Measured on csqa:dev 0–599: trained on every disagreement, the router
//! spent its budget on wording and on "the edge ends the reply, the cloud goes on" (a third of
//! those labels) and lost to plain entropy at 5% and 10%. One request per example, not per
//! token, and every position's hidden state comes from the same decode that reads the labels.

use crate::data::Row;
use crate::features::{FeatureWriter, Record};
use crate::task::{self, ChoiceFormat};
use tandem_core::cloud::{Cloud, CloudError, CloudRequest, VOCAB_PROBE};
use tandem_core::edge::{EdgeError, EdgeModel, Outputs, TokenId};
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
    let mut state = LabelProgress {
        done: done.len(),
        total: questions.rows.len(),
        positions: 0,
        positives: 0,
        failed: 0,
    };
    let mut failures_in_a_row = 0;
    let format = questions.format;
    for (index, row) in questions.rows.iter().enumerate() {
        if done.contains(&(index as u32)) {
            continue;
        }
        let user = task::prompt(row, format);
        let prompt_text = weights.chat_prompt(&[Message::user(&user)])?;
        let prompt = edge.tokenize(&prompt_text, true);
        let messages = [Message::user(user)];
        let answer = cloud.complete(&CloudRequest {
            ids: if as_ids { &prompt } else { &[] },
            text: &|| prompt_text.clone(),
            messages: &messages,
            reply: &String::new,
            max_tokens: task::max_tokens(row, format),
            stop: &|| false,
        });
        let answer = match answer {
            Ok(answer) => {
                failures_in_a_row = 0;
                answer
            }
            Err(e) => {
                failures_in_a_row += 1;
                state.failed += 1;
                if failures_in_a_row >= MAX_FAILURES_IN_A_ROW {
                    return Err(LabelError::Cloud(failures_in_a_row, e));
                }
                continue;
            }
        };
        let mut cloud_tokens: Vec<TokenId> = match answer.ids {
            Some(ids) => ids,
            None => edge.tokenize(&answer.text, false),
        };
        if let Some(end) = cloud_tokens.iter().position(|&t| edge.is_end_of_turn(t)) {
            cloud_tokens.truncate(end);
        }
        let records = teacher_force(
            edge,
            &mut sampler,
            &prompt,
            &cloud_tokens,
            row,
            index as u32,
        )?;
        state.positions += records.len();
        state.positives += records.iter().filter(|r| r.label).count();
        writer.write_example(&records)?;
        state.done += 1;
        progress(state);
    }
    Ok(state)
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
    // nothing we need.
    steps.extend(edge.extend(&answer[..answer.len() - 1], Outputs::All, sampler)?);
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
            signals: step.signals.features(),
            hidden: step.hidden.unwrap_or_default(),
        })
        .collect())
}
