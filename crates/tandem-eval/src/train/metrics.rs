//! How well scores separate the classes, for the training report.

use crate::features::Record;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tandem_core::router::{EntropyRouter, MarginRouter, Router};

/// Per-reply shares at which [`reply_hits`] is reported.
pub const HIT_SHARES: [f32; 3] = [0.05, 0.10, 0.15];

/// Of the held-out replies with a critical position, the share whose `share` best-scored
/// positions (at least one, the token a reply may borrow) include one: what a per-reply
/// budget can buy with these scores, ignoring how routed tokens change what follows. The
/// confidence routers are scored on the same replies, so the trained router's figure has its
/// baselines beside it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplyHits {
    /// Share of each reply's positions.
    pub share: f32,
    /// The trained router.
    pub router: f32,
    /// Margin, scored on the same replies.
    pub margin: f32,
    /// Entropy, scored on the same replies.
    pub entropy: f32,
}

/// [`ReplyHits`] of `scores` (one per record) at each of [`HIT_SHARES`].
pub(super) fn reply_hits(records: &[&Record], scores: &[f32]) -> Vec<ReplyHits> {
    let confidence = |router: &dyn Router| -> Vec<f32> {
        records
            .iter()
            .map(|r| router.score(&r.router_features()))
            .collect()
    };
    let (margin, entropy) = (confidence(&MarginRouter), confidence(&EntropyRouter));
    HIT_SHARES
        .iter()
        .map(|&share| ReplyHits {
            share,
            router: hits(records, scores, share),
            margin: hits(records, &margin, share),
            entropy: hits(records, &entropy, share),
        })
        .collect()
}

fn hits(records: &[&Record], scores: &[f32], share: f32) -> f32 {
    let mut replies: BTreeMap<u32, Vec<(f32, bool)>> = BTreeMap::new();
    for (r, &s) in records.iter().zip(scores) {
        replies.entry(r.example).or_default().push((s, r.label));
    }
    let (mut critical, mut bought) = (0usize, 0usize);
    for positions in replies.values_mut() {
        if !positions.iter().any(|&(_, label)| label) {
            continue;
        }
        critical += 1;
        positions.sort_by(|a, b| b.0.total_cmp(&a.0));
        let k = ((share * positions.len() as f32).ceil() as usize).max(1);
        bought += usize::from(positions[..k].iter().any(|&(_, label)| label));
    }
    bought as f32 / critical.max(1) as f32
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
            signals: [0.5, 0.1, 1.0],
            hidden: Vec::new(),
        }
    }

    #[test]
    fn a_reply_counts_when_its_share_of_best_scored_positions_holds_a_critical_one() {
        // Reply 0: 20 positions, the critical one scored 2nd best. Reply 1: 10 positions, the
        // critical one scored 4th. Reply 2 has none and does not count.
        let mut records = Vec::new();
        let mut scores = Vec::new();
        for p in 0..20 {
            records.push(record(0, p, p == 7));
            scores.push(if p == 7 {
                0.8
            } else if p == 3 {
                0.9
            } else {
                0.1
            });
        }
        for p in 0..10 {
            records.push(record(1, p, p == 0));
            scores.push(match p {
                0 => 0.2,
                1..=3 => 1.0 - f32::from(p) * 0.1,
                _ => 0.05,
            });
        }
        for p in 0..5 {
            records.push(record(2, p, false));
            scores.push(0.5);
        }
        let refs: Vec<&Record> = records.iter().collect();
        // 5%: one position each (the borrowed token): neither. 10%: two of 20, one of 10: reply 0.
        assert_eq!(hits(&refs, &scores, 0.05), 0.0);
        assert_eq!(hits(&refs, &scores, 0.10), 0.5);
        assert_eq!(hits(&refs, &scores, 0.40), 1.0);
        let report = reply_hits(&refs, &scores);
        assert_eq!(report.len(), HIT_SHARES.len());
        assert_eq!(report[1].router, 0.5);
    }
}
