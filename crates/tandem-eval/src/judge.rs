//! Judged labels: the edge writes its own reply, and the cloud model, read in-process, says at
//! every position how likely it finds the edge's token.
//!
//! The router runs on the edge's replies, not on the cloud's: these labels are collected
//! where it will run. The cloud reads the edge's reply back in one teacher-forced pass, which
//! gives at every position its own top token, its margin and the probability it gives the
//! token the edge wrote. A position is critical when the cloud would write another token *and*
//! finds the edge's unlikely (below [`UNLIKELY`]): the edge branch is one the cloud itself
//! would hardly take (R2R's "the outcome changes", judged by the cloud instead of by a
//! continuation). A token the cloud ranks second but still finds plausible is another wording
//! and stays neutral, however sure the cloud is of its own; so is a token the cloud finds
//! likely on a flat distribution. (The first collection with this judge marked "the cloud's
//! margin is at least 0.5" instead: mostly wording, and the letter of a multiple-choice reply,
//! where the cloud hesitates between two letters, was seldom critical.) Positions where the
//! edge ends its reply are neutral too: routing them buys a longer reply, and on the first
//! collection (continuation labels, csqa:dev) a third of the labels were "the edge stops, the
//! cloud goes on", on which the router spent its budget.
//!
//! Two prefills per question (the edge's decode, one pass of the cloud over the reply) and no
//! request at all: a question costs what its reply takes to write, so a mix of chat, math and
//! multiple choice fits the collection budget, where [`crate::labels`] needs one cloud
//! continuation per disagreement. The price: the cloud's weights must be on this machine
//! (the stand-in's are); a remote cloud is specialised to with [`crate::labels`].

use crate::features::{FeatureWriter, Record};
use crate::labels::{each_example, LabelError, LabelProgress, Questions};
use crate::task;
use tandem_core::edge::{EdgeError, EdgeModel, Step, TokenId};
use tandem_core::local::{EdgeWeights, LocalModel};
use tandem_core::message::Message;
use tandem_core::sampling::{Sampler, SamplingParams};

/// The cloud's probability of the edge's token below which a disagreement counts as the edge
/// being wrong rather than worded otherwise.
pub const UNLIKELY: f32 = 0.1;

/// Collects judged labels for `questions` (skipping the examples in `done`) into `writer`:
/// `edge` writes each reply greedily, `cloud` (the cloud model's weights, as a local session)
/// reads it back.
pub fn collect(
    weights: &EdgeWeights,
    edge: &mut dyn EdgeModel,
    cloud: &mut LocalModel<'_>,
    questions: Questions<'_>,
    done: &std::collections::BTreeSet<u32>,
    writer: &mut FeatureWriter,
    progress: &mut dyn FnMut(LabelProgress),
) -> Result<LabelProgress, LabelError> {
    let mut sampler = Sampler::new(SamplingParams::default());
    each_example(questions, done, writer, progress, |index, row, _| {
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
            .map(|(position, (step, (judge, p_edge)))| Record {
                example: index,
                position: position.min(usize::from(u16::MAX)) as u16,
                label: critical(
                    step.token,
                    judge.token,
                    p_edge,
                    edge.is_end_of_turn(step.token),
                ),
                edge_token: step.token,
                cloud_token: judge.token,
                cloud_margin: judge.signals.margin,
                cloud_prob: p_edge,
                signals: step.signals.features(),
                hidden: step.hidden.unwrap_or_default(),
            })
            .collect();
        Ok(Some(records))
    })
}

/// Whether the judge's reading of a position marks the edge's token there as one to route:
/// the judge would write another token and gives the edge's a probability under [`UNLIKELY`],
/// and the edge does not end its reply there.
fn critical(edge_token: TokenId, judge_token: TokenId, p_edge: f32, edge_ends_turn: bool) -> bool {
    judge_token != edge_token && p_edge < UNLIKELY && !edge_ends_turn
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
        step = edge.step_after(token, sampler)?;
    }
    Ok(steps)
}

/// The cloud's step at every position of `reply` after `prompt`, with the probability it
/// gives the token the edge wrote there: one pass over the reply.
pub(crate) fn read_back(
    cloud: &mut LocalModel<'_>,
    sampler: &mut Sampler,
    prompt: &[TokenId],
    reply: &[TokenId],
) -> Result<Vec<(Step, f32)>, EdgeError> {
    let Some((&last, head)) = prompt.split_last() else {
        return Err(EdgeError::Decode("empty prompt".into()));
    };
    if reply.is_empty() {
        return Ok(Vec::new());
    }
    // The cache holds the prompt but its last token, whose step reads the reply's first.
    cloud.sync(head, sampler)?;
    let read: Vec<TokenId> = std::iter::once(last).chain(reply.iter().copied()).collect();
    cloud.read_along(&read, sampler)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_unlikely_disagreement_before_the_end_of_the_reply_is_critical() {
        // " Sydney" where the judge would write " Canberra" and gives " Sydney" 2%.
        assert!(critical(7, 9, 0.02, false));
        // Wording: the judge would write another token, but finds the edge's plausible.
        assert!(!critical(7, 9, UNLIKELY, false));
        assert!(!critical(7, 9, 0.3, false));
        // Agreement, on however flat a distribution.
        assert!(!critical(7, 7, 0.05, false));
        // The edge ends its reply where the judge would go on.
        assert!(!critical(7, 9, 0.01, true));
    }
}
