//! Judged labels: the edge writes its own reply, and the cloud model, read in-process, says at
//! every position how sure it is that the edge's token is wrong.
//!
//! The router runs on the edge's replies, not on the cloud's: these labels are collected
//! where it will run. At each position the cloud's distribution over the same prefix gives
//! its own top token and its margin (`p(top1) − p(top2)`); a position is critical when the
//! cloud's top token differs from the edge's *and* the cloud is sure of it (margin at least
//! [`SURE_MARGIN`]): the edge branch is one the cloud itself finds unlikely (R2R's "the
//! outcome changes", judged by the cloud instead of by a continuation). Wording the cloud
//! could go either way on stays neutral. Positions where the edge ends its reply are neutral
//! too: routing them buys a longer reply, and on the first collection (continuation labels,
//! csqa:dev) a third of the labels were "the edge stops, the cloud goes on", on which the
//! router spent its budget.
//!
//! Two prefills per question (the edge's decode, one pass of the cloud over the reply) and no
//! request at all: a question costs what its reply takes to write, so a mix of chat, math and
//! multiple choice fits the collection budget, where [`crate::labels`] needs one cloud
//! continuation per disagreement. The price: the cloud's weights must be on this machine
//! (the stand-in's are); a remote cloud is specialised to with [`crate::labels`].

use crate::features::{FeatureWriter, Record};
use crate::labels::{LabelError, LabelProgress, Questions};
use crate::task;
use tandem_core::edge::{EdgeError, EdgeModel, Outputs, Step, TokenId};
use tandem_core::local::EdgeWeights;
use tandem_core::message::Message;
use tandem_core::sampling::{Sampler, SamplingParams};

/// The cloud's margin (probability of its top token minus its second's) from which a
/// disagreement counts as the edge being wrong rather than worded otherwise.
pub const SURE_MARGIN: f32 = 0.5;

/// Collects judged labels for `questions` (skipping the examples in `done`) into `writer`:
/// `edge` writes each reply greedily, `cloud` (the cloud model's weights, as a local session)
/// reads it back.
pub fn collect(
    weights: &EdgeWeights,
    edge: &mut dyn EdgeModel,
    cloud: &mut dyn EdgeModel,
    questions: Questions<'_>,
    done: &std::collections::BTreeSet<u32>,
    writer: &mut FeatureWriter,
    progress: &mut dyn FnMut(LabelProgress),
) -> Result<LabelProgress, LabelError> {
    let mut sampler = Sampler::new(SamplingParams::default());
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
        let user = task::prompt(row, questions.format);
        let prompt = edge.tokenize(&weights.chat_prompt(&[Message::user(user)])?, true);
        let max_tokens = task::max_tokens(row, questions.format) as usize;
        let steps = write_reply(edge, &mut sampler, &prompt, max_tokens)?;
        let reply: Vec<TokenId> = steps.iter().map(|s| s.token).collect();
        let judged = read_back(cloud, &mut sampler, &prompt, &reply)?;
        let records: Vec<Record> = steps
            .into_iter()
            .zip(judged)
            .enumerate()
            .map(|(position, (step, judge))| Record {
                example: index,
                position: position.min(usize::from(u16::MAX)) as u16,
                label: critical(step.token, &judge, edge.is_end_of_turn(step.token)),
                edge_token: step.token,
                cloud_token: judge.token,
                cloud_margin: judge.signals.margin,
                signals: step.signals.features(),
                hidden: step.hidden.unwrap_or_default(),
            })
            .collect();
        state.positions += records.len();
        state.positives += records.iter().filter(|r| r.label).count();
        writer.write_example(&records)?;
        state.done += 1;
        progress(state);
    }
    Ok(state)
}

/// Whether the judge's reading of a position marks the edge's token there as one to route:
/// the judge would write another token and is sure of it, and the edge does not end its reply
/// there.
fn critical(edge_token: TokenId, judge: &Step, edge_ends_turn: bool) -> bool {
    judge.token != edge_token && judge.signals.margin >= SURE_MARGIN && !edge_ends_turn
}

/// The edge's greedy reply to `prompt`, one step per token, its end of turn included.
fn write_reply(
    edge: &mut dyn EdgeModel,
    sampler: &mut Sampler,
    prompt: &[TokenId],
    max_tokens: usize,
) -> Result<Vec<Step>, EdgeError> {
    let (mut step, _) = edge.sync(prompt, sampler)?;
    let mut steps = Vec::new();
    while steps.len() < max_tokens {
        let token = step.token;
        steps.push(step);
        if edge.is_end_of_turn(token) || steps.len() == max_tokens {
            break;
        }
        step = edge
            .extend(&[token], Outputs::Last, sampler)?
            .pop()
            .ok_or_else(|| EdgeError::Decode("no step after a token".into()))?;
    }
    Ok(steps)
}

/// The cloud's step at every position of `reply` after `prompt`: one pass over the reply.
fn read_back(
    cloud: &mut dyn EdgeModel,
    sampler: &mut Sampler,
    prompt: &[TokenId],
    reply: &[TokenId],
) -> Result<Vec<Step>, EdgeError> {
    if reply.is_empty() {
        return Ok(Vec::new());
    }
    let (first, _) = cloud.sync(prompt, sampler)?;
    let mut steps = vec![first];
    // Position i is read after token i-1; the last token predicts nothing we label.
    steps.extend(cloud.extend(&reply[..reply.len() - 1], Outputs::All, sampler)?);
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tandem_core::signals::Signals;

    fn judge(token: TokenId, margin: f32) -> Step {
        Step {
            token,
            signals: Signals {
                top1_prob: margin,
                margin,
                entropy: 1.0,
            },
            hidden: None,
        }
    }

    #[test]
    fn only_a_sure_disagreement_before_the_end_of_the_reply_is_critical() {
        // " Sydney" where the judge says " Canberra" with a margin of 0.8.
        assert!(critical(7, &judge(9, 0.8), false));
        assert!(critical(7, &judge(9, SURE_MARGIN), false));
        // Wording: the judge would write another token, but could go either way.
        assert!(!critical(7, &judge(9, 0.2), false));
        // Agreement, however sure.
        assert!(!critical(7, &judge(7, 0.9), false));
        // The edge ends its reply where the judge would go on.
        assert!(!critical(7, &judge(9, 0.9), true));
    }
}
