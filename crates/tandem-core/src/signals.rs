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
    // This pass runs over the whole vocabulary (152k for Qwen) for every generated token,
    // so it is written for the vectorizer: fixed lanes, a polynomial exp, no branches.
    const LANES: usize = 16;
    let (mut z_lanes, mut weighted_lanes) = ([0f32; LANES], [0f32; LANES]);
    let chunks = logits.chunks_exact(LANES);
    let tail = chunks.remainder();
    for chunk in chunks {
        for i in 0..LANES {
            let d = chunk[i] - l1;
            let e = exp_nonpositive(d);
            z_lanes[i] += e;
            weighted_lanes[i] += e * d;
        }
    }
    let mut z: f64 = z_lanes.iter().map(|&v| f64::from(v)).sum();
    let mut weighted: f64 = weighted_lanes.iter().map(|&v| f64::from(v)).sum();
    for &l in tail {
        let d = l - l1;
        let e = exp_nonpositive(d);
        z += f64::from(e);
        weighted += f64::from(e * d);
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

/// `e^x` for `x <= 0` to about 2e-7 relative error (and 0 below -87), in plain arithmetic
/// the compiler can vectorize: range reduction to `x = n·ln2 + r`, a degree-6 polynomial for
/// `e^r`, and `2^n` built in the exponent bits.
#[inline(always)]
fn exp_nonpositive(x: f32) -> f32 {
    const LOG2_E: f32 = std::f32::consts::LOG2_E;
    // ln 2 split in two so that n·ln2 is exact in the first part.
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    // Adding and subtracting 1.5·2^23 rounds to the nearest integer without a libm call.
    const ROUND: f32 = 12_582_912.0;
    let x = x.max(-87.0);
    let n = (x * LOG2_E + ROUND) - ROUND;
    let r = (x - n * LN2_HI) - n * LN2_LO;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    let scale = f32::from_bits(((n as i32 + 127) as u32) << 23);
    p * scale
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
    fn the_fast_exp_matches_the_library_exp() {
        let mut worst = 0f32;
        for i in 0..=100_000 {
            let x = -(i as f32) * 87.0 / 100_000.0;
            let (fast, exact) = (exp_nonpositive(x), x.exp());
            worst = worst.max((fast - exact).abs() / exact);
        }
        assert!(worst < 1e-6, "worst relative error {worst}");
        assert_eq!(exp_nonpositive(-200.0), exp_nonpositive(-87.0));
        assert_eq!(exp_nonpositive(0.0), 1.0);
    }

    #[test]
    fn a_vocabulary_sized_row_matches_a_plain_f64_computation() {
        let logits: Vec<f32> = (0..151_936)
            .map(|i| ((i * 7919) % 1000) as f32 / 97.0 - 3.0)
            .collect();
        let r = read(&logits).unwrap();
        let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
        let z: f64 = logits.iter().map(|&l| (l as f64 - max).exp()).sum();
        let entropy: f64 = logits
            .iter()
            .map(|&l| {
                let p = (l as f64 - max).exp() / z;
                -p * p.ln()
            })
            .sum();
        assert!(
            (r.signals.entropy as f64 - entropy).abs() < 1e-4,
            "{} vs {entropy}",
            r.signals.entropy
        );
        assert!((r.signals.top1_prob as f64 - 1.0 / z).abs() < 1e-7);
    }

    #[test]
    fn empty_or_nan_row_reads_none() {
        assert!(read(&[]).is_none());
        assert!(read(&[f32::NEG_INFINITY]).is_none());
    }
}
