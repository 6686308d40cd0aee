//! How well scores separate the classes, for the training report.

use crate::features::Record;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tandem_core::budget::{CloudBudget, LiveBudget, ReplyBudget, RouteDecision, SpanToken};
use tandem_core::config::CloudSettings;
use tandem_core::event::TokenSource;
use tandem_core::router::{EntropyRouter, MarginRouter, Router};

/// Per-reply shares at which [`reply_hits`] is reported.
pub const HIT_SHARES: [f32; 3] = [0.05, 0.10, 0.15];

/// Of the held-out replies with a critical position, the share in which the app's budget
/// fed a router's scores routes the first critical position: the replies in turn through
/// one account ([`LiveBudget`], as a session's replies share one) at a share, with the app's
/// span and its rule for a span's later tokens. What a router buys depends on the controller
/// as much as on its ranking (the bar falls as a reply's room grows, so a router whose scores
/// sit low everywhere spends its share early, and a reply that spends the account leaves the
/// next without), so the figure is measured through the controller; it ignores only how a
/// routed token changes what follows. The confidence routers are scored on the same replies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplyHits {
    /// Share of each reply's tokens.
    pub share: f32,
    /// The trained router.
    pub router: f32,
    /// Margin, on the same replies.
    pub margin: f32,
    /// Entropy, on the same replies.
    pub entropy: f32,
}

/// [`ReplyHits`] of `trained` on `records` at each of [`HIT_SHARES`].
pub(super) fn reply_hits(records: &[&Record], trained: &dyn Router) -> Vec<ReplyHits> {
    let mut replies: BTreeMap<u32, Vec<&Record>> = BTreeMap::new();
    for &r in records {
        replies.entry(r.example).or_default().push(r);
    }
    let replies: Vec<Vec<&Record>> = replies
        .into_values()
        .filter(|reply| reply.iter().any(|r| r.label))
        .map(|mut reply| {
            reply.sort_by_key(|r| r.position);
            reply
        })
        .collect();
    HIT_SHARES
        .iter()
        .map(|&share| ReplyHits {
            share,
            router: hits(&replies, trained, share),
            margin: hits(&replies, &MarginRouter, share),
            entropy: hits(&replies, &EntropyRouter, share),
        })
        .collect()
}

/// The share of `replies` (each with a critical position) whose first critical position
/// `router` routes at `share`, the replies taken in turn as a session's.
fn hits(replies: &[Vec<&Record>], router: &dyn Router, share: f32) -> f32 {
    let span = CloudSettings::default().span;
    let live = LiveBudget::new(CloudBudget::share(share));
    let routed = replies
        .iter()
        .filter(|reply| {
            let mut controller = live.open_reply(router);
            let hit = routes_first_critical(reply, router, &mut controller, &live.get(), span);
            live.settle(&controller);
            hit
        })
        .count();
    routed as f32 / replies.len().max(1) as f32
}

/// Replays `controller` along the whole of `reply` (positions in order), as the decoder
/// drives it: one decision per position the edge writes, and a request's span kept while
/// [`ReplyBudget::span_token_source`] says so. Whether it routed the first critical position.
/// A record holds token ids, not their text, so a span is not kept for finishing a word
/// here (an under-count); nor does it know which id ends the edge's turn, so a span that
/// only confirmed the edge may be counted going on past the edge's end, where the decoder
/// stops it (an over-count, at a reply's last position only).
fn routes_first_critical(
    reply: &[&Record],
    router: &dyn Router,
    controller: &mut ReplyBudget,
    budget: &CloudBudget,
    span: u32,
) -> bool {
    let first = reply.iter().position(|r| r.label);
    let score = |r: &Record| router.score(&r.router_features());
    let mut hit = false;
    let mut at = 0;
    while at < reply.len() {
        let RouteDecision::Cloud { max_tokens, .. } =
            controller.decide(budget, score(reply[at]), span)
        else {
            controller.record(1, 0, 0.0);
            at += 1;
            continue;
        };
        hit |= first == Some(at);
        let (mut edge, mut cloud) = (0, 1);
        let mut unchanged = reply[at].edge_token == reply[at].cloud_token;
        let mut end = at + 1;
        while end < reply.len() && end - at < max_tokens as usize {
            let r = reply[end];
            let edge_agrees = r.edge_token == r.cloud_token;
            let source = controller.span_token_source(SpanToken {
                score: score(r),
                edge_agrees,
                continues_word: false,
                paid: true,
                unchanged,
                edge_ends: false,
            });
            unchanged &= edge_agrees;
            match source {
                Some(TokenSource::Cloud) => {
                    hit |= first == Some(end);
                    cloud += 1;
                }
                Some(TokenSource::Edge) => edge += 1,
                None => break,
            }
            end += 1;
        }
        controller.record(edge, cloud, 0.0);
        at = end;
    }
    hit
}

/// Area under the ROC curve from ranks (ties count half); `None` without both classes.
pub(super) fn auc(scores: &[f32], labels: &[bool]) -> Option<f32> {
    let positives = labels.iter().filter(|&&l| l).count();
    let negatives = labels.len() - positives;
    if positives == 0 || negatives == 0 {
        return None;
    }
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]));
    let mut positive_rank_sum = 0f64;
    let mut start = 0;
    while start < order.len() {
        let end = start
            + order[start..]
                .iter()
                .take_while(|&&i| scores[i] == scores[order[start]])
                .count();
        // Tied scores share the mean of 1-based ranks start+1 ..= end.
        let rank = (start + 1 + end) as f64 / 2.0;
        let tied_positives = order[start..end].iter().filter(|&&i| labels[i]).count();
        positive_rank_sum += rank * tied_positives as f64;
        start = end;
    }
    let p = positives as f64;
    Some(((positive_rank_sum - p * (p + 1.0) / 2.0) / (p * negatives as f64)) as f32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auc_counts_ties_as_half() {
        let labels = [false, true, false, true];
        assert_eq!(auc(&[0.1, 0.9, 0.2, 0.8], &labels), Some(1.0));
        assert_eq!(auc(&[0.9, 0.1, 0.8, 0.2], &labels), Some(0.0));
        assert_eq!(auc(&[0.5; 4], &labels), Some(0.5));
        assert_eq!(auc(&[0.1, 0.2], &[true, true]), None);
    }

    fn record(example: u32, position: u16, label: bool) -> Record {
        Record {
            example,
            position,
            label,
            edge_token: 0,
            cloud_token: 1,
            cloud_margin: f32::NAN,
            cloud_prob: f32::NAN,
            signals: [0.5, 0.1, 1.0],
            hidden: Vec::new(),
        }
    }

    /// A reply of `n` positions whose critical one is `critical` (if any), as margin scores
    /// it: `scores[i]` is `1 - margin`.
    fn reply(example: u32, scores: &[f32], critical: Option<usize>) -> Vec<Record> {
        scores
            .iter()
            .enumerate()
            .map(|(i, &score)| Record {
                signals: [0.5, 1.0 - score, 1.0],
                // Only the critical position disagrees with the cloud.
                cloud_token: if Some(i) == critical { 1 } else { 0 },
                ..record(example, i as u16, Some(i) == critical)
            })
            .collect()
    }

    #[test]
    fn a_reply_counts_when_the_apps_controller_routes_its_first_critical_position() {
        // Reply 0: the critical position is the only uncertain one: routed at any share.
        // Reply 1: the critical position is the surest one: never routed (a score of 0 never
        // clears the bar). Reply 2 has none and does not count.
        let mut sure = vec![0.0; 30];
        sure[12] = 0.9;
        let mut unsure = vec![0.9; 30];
        unsure[12] = 0.0;
        let records: Vec<Record> = [
            reply(0, &sure, Some(12)),
            reply(1, &unsure, Some(12)),
            reply(2, &[0.5; 10], None),
        ]
        .concat();
        let refs: Vec<&Record> = records.iter().collect();
        let report = reply_hits(&refs, &MarginRouter);
        assert_eq!(report.len(), HIT_SHARES.len());
        for hits in &report {
            assert_eq!((hits.router, hits.margin), (0.5, 0.5), "{hits:?}");
        }
    }

    #[test]
    fn a_span_that_reaches_the_critical_position_routes_it_where_wanted_or_first_to_differ() {
        // Position 0 is routed (with a token the reply borrows); its span runs over position
        // 1 (agreeing, not wanted) into the critical position 2, where only the cloud's token
        // differs from the edge's unless `changed`, where position 0's differed too.
        let routed = |scores: &[f32], changed: bool| {
            let mut records = reply(0, scores, Some(2));
            records[0].cloud_token = i32::from(changed);
            let refs: Vec<&Record> = records.iter().collect();
            let live = LiveBudget::new(CloudBudget::share(0.5));
            let mut controller = live.open_reply(&MarginRouter);
            routes_first_critical(&refs, &MarginRouter, &mut controller, &live.get(), 4)
        };
        assert!(routed(&[0.95, 0.0, 0.95, 0.0, 0.0, 0.0], true));
        // Not wanted there: a span that only confirmed the edge takes the cloud's first
        // different token; one that already changed the reply ends before it, and the bar,
        // which the request raised, keeps a score of 0 out.
        assert!(routed(&[0.95, 0.0, 0.0, 0.0, 0.0, 0.0], false));
        assert!(!routed(&[0.95, 0.0, 0.0, 0.0, 0.0, 0.0], true));
    }
}
