//! How well scores separate the classes, for the training report.

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
}
