//! How sure a figure is: 95% bootstrap intervals of a mean score (accuracy, as 1s and 0s, or
//! the judge's log-probability), and of the paired difference between two runs on the same
//! questions.
//!
//! Routers are compared on the same questions, so the difference is resampled question by
//! question (a paired bootstrap): it is much tighter than two independent intervals, and it
//! is what says whether a router beats a baseline rather than the luck of the rows.

use serde::{Deserialize, Serialize};
use tandem_core::sampling::SplitMix64;

/// Resamples per interval: enough for a stable 95% interval (±0.3 points at n = 600).
const RESAMPLES: usize = 2000;
/// Fixed, so a results file is reproducible.
const SEED: u64 = 0x5eed_7a4d;

/// A 95% interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// 2.5th percentile.
    pub low: f64,
    /// 97.5th percentile.
    pub high: f64,
}

/// The 95% paired bootstrap interval of `mean(a) − mean(b)`, where `a[i]` and `b[i]` are the
/// same question's scores in two runs.
pub fn paired_difference_interval(a: &[f64], b: &[f64]) -> Interval {
    assert_eq!(a.len(), b.len(), "paired runs answer the same questions");
    let values: Vec<f64> = a.iter().zip(b).map(|(x, y)| x - y).collect();
    mean_interval(&values)
}

/// The 95% bootstrap interval of the mean of `values` (of accuracy, with 1 for a right
/// answer and 0 for a wrong one).
pub fn mean_interval(values: &[f64]) -> Interval {
    if values.is_empty() {
        return Interval {
            low: 0.0,
            high: 0.0,
        };
    }
    let n = values.len();
    let mut rng = SplitMix64::new(SEED);
    let mut means: Vec<f64> = (0..RESAMPLES)
        .map(|_| {
            let sum: f64 = (0..n)
                .map(|_| values[(rng.next_u64() % n as u64) as usize])
                .sum();
            sum / n as f64
        })
        .collect();
    means.sort_by(f64::total_cmp);
    let at = |q: f64| means[((q * RESAMPLES as f64) as usize).min(RESAMPLES - 1)];
    Interval {
        low: at(0.025),
        high: at(0.975),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcomes(right: impl Iterator<Item = bool>) -> Vec<f64> {
        right.map(|c| f64::from(u8::from(c))).collect()
    }

    #[test]
    fn an_interval_holds_the_accuracy_and_narrows_with_more_questions() {
        let few = outcomes((0..40).map(|i| i % 2 == 0));
        let many = outcomes((0..1000).map(|i| i % 2 == 0));
        let (a, b) = (mean_interval(&few), mean_interval(&many));
        assert!(a.low < 0.5 && 0.5 < a.high, "{a:?}");
        assert!(b.high - b.low < a.high - a.low, "{a:?} {b:?}");
        // Binomial: ±1.96·sqrt(0.25/1000) ≈ ±0.031.
        assert!((b.high - b.low - 0.062).abs() < 0.01, "{b:?}");
    }

    #[test]
    fn a_paired_difference_sees_what_two_intervals_would_not() {
        // b is a with one question in twenty fixed: a small, consistent gain.
        let a = outcomes((0..600).map(|i| i % 3 == 0));
        let b = outcomes((0..600).map(|i| i % 3 == 0 || i % 20 == 1));
        let d = paired_difference_interval(&b, &a);
        assert!(d.low > 0.0, "{d:?}");
        let (ia, ib) = (mean_interval(&a), mean_interval(&b));
        assert!(
            ib.low < ia.high,
            "independent intervals overlap: {ia:?} {ib:?}"
        );
        let same = paired_difference_interval(&a, &a);
        assert_eq!((same.low, same.high), (0.0, 0.0));
    }
}
