//! The calibration table: which score threshold sends a given share of positions to the
//! cloud.
//!
//! A user sets a cloud share ("about 5% of tokens"), not a score, and a router's scores
//! mean nothing on their own. So the trainer scores positions it did not learn from and
//! records, for a ladder of shares, the score that that share of them reaches; the runtime
//! ([`tandem_core::router::MlpRouter`]) interpolates linearly between these rungs and the
//! budget controller starts from the result.

/// The cloud shares a trained router's table lists: dense at the low end, where users
/// budget, and up to 1.0 so that "everything to the cloud" has an exact threshold.
pub const CLOUD_SHARES: [f32; 14] = [
    0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0,
];

/// For each of `shares` (ascending), the threshold such that that share of `scores` is at
/// or above it: `[(share, threshold), ...]`, thresholds falling as shares rise.
///
/// The threshold is the k-th highest score with k = share · n rounded, at least 1, so every
/// share routes at least one position and 1.0 routes all. Ties can route more than the
/// share; a threshold cannot split equal scores. Empty `scores` give an empty table, which
/// the runtime reads as "no calibration".
pub fn calibrate(scores: &[f32], shares: &[f32]) -> Vec<(f32, f32)> {
    if scores.is_empty() {
        return Vec::new();
    }
    let mut descending = scores.to_vec();
    descending.sort_by(|a, b| b.total_cmp(a));
    let n = descending.len();
    shares
        .iter()
        .map(|&share| {
            let k = ((f64::from(share) * n as f64).round() as usize).clamp(1, n);
            (share, descending[k - 1])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routed(scores: &[f32], threshold: f32) -> usize {
        scores.iter().filter(|&&s| s >= threshold).count()
    }

    #[test]
    fn each_threshold_routes_its_share_of_the_scores() {
        // 0.00, 0.01, ..., 0.99 shuffled: the table must not depend on the order.
        let scores: Vec<f32> = (0..100).map(|i| ((i * 37) % 100) as f32 / 100.0).collect();
        let table = calibrate(&scores, &[0.05, 0.1, 0.5, 1.0]);
        let routed: Vec<usize> = table.iter().map(|&(_, t)| routed(&scores, t)).collect();
        assert_eq!(routed, vec![5, 10, 50, 100]);
        assert_eq!(table[0], (0.05, 0.95));
        assert_eq!(table[3], (1.0, 0.0));
    }

    #[test]
    fn tiny_shares_still_route_the_top_position() {
        let table = calibrate(&[0.2, 0.9, 0.4], &[0.005]);
        assert_eq!(table, vec![(0.005, 0.9)]);
    }

    #[test]
    fn thresholds_fall_as_shares_rise() {
        let scores: Vec<f32> = (0..1000)
            .map(|i| ((i * 7919) % 1000) as f32 / 999.0)
            .collect();
        let table = calibrate(&scores, &CLOUD_SHARES);
        assert_eq!(table.len(), CLOUD_SHARES.len());
        assert!(table.windows(2).all(|w| w[0].1 >= w[1].1), "{table:?}");
    }

    #[test]
    fn no_scores_means_no_table() {
        assert!(calibrate(&[], &CLOUD_SHARES).is_empty());
    }
}
