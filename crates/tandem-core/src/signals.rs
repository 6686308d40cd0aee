//! The edge model's confidence at one position, read off its logits.
//!
//! Routers decide from these numbers, so they are computed once per position, in one pass
//! over the vocabulary, and never again.

use serde::{Deserialize, Serialize};

/// What the edge model's next-token distribution says about its own confidence.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Signals {
    /// Probability of the most likely token.
    pub top1_prob: f32,
    /// `p(top1) - p(top2)`: small when two tokens compete.
    pub margin: f32,
    /// Shannon entropy of the distribution, in nats.
    pub entropy: f32,
}

/// The most likely token and the confidence signals of one logits row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    /// Index of the highest logit.
    pub argmax: usize,
    /// Confidence of the distribution.
    pub signals: Signals,
}

impl Signals {
    /// The signals as a fixed-order feature vector (what the MLP router sees after the hidden state).
    pub fn features(&self) -> [f32; 3] {
        [self.top1_prob, self.margin, self.entropy]
    }
}

/// Reads a logits row. Returns `None` for an empty row.
pub fn read(logits: &[f32]) -> Option<Reading> {
    let (mut i1, mut l1, mut l2) = (0usize, f32::NEG_INFINITY, f32::NEG_INFINITY);
    for (i, &l) in logits.iter().enumerate() {
        if l > l1 {
            l2 = l1;
            l1 = l;
            i1 = i;
        } else if l > l2 {
            l2 = l;
        }
    }
    if !l1.is_finite() {
        return None;
    }
    // Shifting by the maximum keeps every exponent <= 0, so the sums cannot overflow.
    let (mut z, mut weighted) = (0f64, 0f64);
    for &l in logits {
        let d = l - l1;
        let e = d.exp() as f64;
        z += e;
        weighted += e * d as f64;
    }
    let log_z = z.ln();
    let entropy = (log_z - weighted / z).max(0.0) as f32;
    let top1_prob = (1.0 / z) as f32;
    let top2_prob = if l2.is_finite() {
        ((l2 - l1) as f64).exp() as f32 * top1_prob
    } else {
        0.0
    };
    Some(Reading {
        argmax: i1,
        signals: Signals {
            top1_prob,
            margin: top1_prob - top2_prob,
            entropy,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_distribution_has_log_n_entropy_and_no_margin() {
        let r = read(&[0.5; 4]).unwrap();
        assert!((r.signals.entropy - 4f32.ln()).abs() < 1e-5);
        assert!((r.signals.top1_prob - 0.25).abs() < 1e-6);
        assert!(r.signals.margin.abs() < 1e-6);
    }

    #[test]
    fn peaked_distribution_is_confident() {
        let r = read(&[0.0, 20.0, 1.0]).unwrap();
        assert_eq!(r.argmax, 1);
        assert!(r.signals.top1_prob > 0.999);
        assert!(r.signals.margin > 0.999);
        assert!(r.signals.entropy < 1e-3);
    }

    #[test]
    fn two_way_tie_has_ln2_entropy() {
        let r = read(&[3.0, -50.0, 3.0]).unwrap();
        assert!((r.signals.entropy - 2f32.ln()).abs() < 1e-4);
        assert!((r.signals.top1_prob - 0.5).abs() < 1e-4);
        assert!(r.signals.margin.abs() < 1e-4);
    }

    #[test]
    fn large_logits_do_not_overflow() {
        let r = read(&[1e4, 1e4 - 1.0]).unwrap();
        assert!(r.signals.top1_prob.is_finite() && r.signals.entropy.is_finite());
        let p1 = 1.0 / (1.0 + (-1f32).exp());
        assert!((r.signals.top1_prob - p1).abs() < 1e-5);
    }

    #[test]
    fn empty_or_nan_row_reads_none() {
        assert!(read(&[]).is_none());
        assert!(read(&[f32::NEG_INFINITY]).is_none());
    }
}
