//! Choosing the edge model's token from its logits: greedy, or seeded sampling.
//!
//! Sampling lives here, in plain Rust, rather than in llama.cpp's sampler chain so that the
//! collaborative loop, the scripted test engine and the real engine pick tokens the same way,
//! and a seed reproduces a reply exactly.

use serde::{Deserialize, Serialize};

/// How tokens are chosen. `temperature == 0` is greedy decoding.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SamplingParams {
    /// Softmax temperature; 0 means always take the most likely token.
    pub temperature: f32,
    /// Keep only the `top_k` most likely tokens (0 keeps all).
    pub top_k: usize,
    /// Keep the smallest set of tokens whose probability reaches `top_p`.
    pub top_p: f32,
    /// Seed of the random generator.
    pub seed: u64,
}

impl Default for SamplingParams {
    fn default() -> Self {
        Self {
            temperature: 0.0,
            top_k: 40,
            top_p: 0.95,
            seed: 0,
        }
    }
}

impl SamplingParams {
    /// Whether this always picks the argmax.
    pub fn is_greedy(&self) -> bool {
        self.temperature <= 0.0
    }
}

/// A token picker with its own random state.
#[derive(Debug, Clone)]
pub struct Sampler {
    params: SamplingParams,
    rng: SplitMix64,
}

impl Sampler {
    /// A sampler seeded from `params.seed`.
    pub fn new(params: SamplingParams) -> Self {
        Self {
            params,
            rng: SplitMix64::new(params.seed),
        }
    }

    /// The parameters this sampler was made with.
    pub fn params(&self) -> SamplingParams {
        self.params
    }

    /// Picks a token index; `argmax` is the row's most likely index, already known to the caller.
    pub fn pick(&mut self, logits: &[f32], argmax: usize) -> usize {
        if self.params.is_greedy() {
            return argmax;
        }
        let mut candidates: Vec<(usize, f32)> = logits.iter().copied().enumerate().collect();
        let k = match self.params.top_k {
            0 => candidates.len(),
            k => k.min(candidates.len()),
        };
        if k < candidates.len() {
            candidates.select_nth_unstable_by(k - 1, |a, b| b.1.total_cmp(&a.1));
            candidates.truncate(k);
        }
        candidates.sort_unstable_by(|a, b| b.1.total_cmp(&a.1));
        let max = candidates[0].1;
        let mut probs: Vec<f64> = candidates
            .iter()
            .map(|&(_, l)| (((l - max) / self.params.temperature) as f64).exp())
            .collect();
        let total: f64 = probs.iter().sum();
        let mut cumulative = 0.0;
        let mut keep = probs.len();
        for (i, p) in probs.iter_mut().enumerate() {
            *p /= total;
            cumulative += *p;
            if cumulative >= self.params.top_p as f64 {
                keep = i + 1;
                break;
            }
        }
        let kept_mass: f64 = probs[..keep].iter().sum();
        let mut target = self.rng.next_f64() * kept_mass;
        for (i, p) in probs[..keep].iter().enumerate() {
            target -= p;
            if target <= 0.0 {
                return candidates[i].0;
            }
        }
        candidates[keep - 1].0
    }
}

/// SplitMix64: a small, well-known generator whose stream is fixed by its seed forever
/// (unlike a library RNG that may change between versions), so sampling and router training
/// are reproducible across platforms and releases.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// The generator for `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sampled(params: SamplingParams, logits: &[f32], n: usize) -> Vec<usize> {
        let mut s = Sampler::new(params);
        (0..n).map(|_| s.pick(logits, 0)).collect()
    }

    #[test]
    fn greedy_returns_argmax() {
        let mut s = Sampler::new(SamplingParams::default());
        assert_eq!(s.pick(&[0.0, 5.0, 1.0], 1), 1);
    }

    #[test]
    fn same_seed_same_tokens_other_seed_differs() {
        let p = SamplingParams {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            seed: 7,
        };
        let logits = [1.0, 1.0, 1.0, 1.0, 1.0];
        let a = sampled(p, &logits, 50);
        assert_eq!(a, sampled(p, &logits, 50));
        assert_ne!(a, sampled(SamplingParams { seed: 8, ..p }, &logits, 50));
    }

    #[test]
    fn top_k_one_is_greedy() {
        let p = SamplingParams {
            temperature: 2.0,
            top_k: 1,
            top_p: 1.0,
            seed: 3,
        };
        assert!(sampled(p, &[0.0, 0.5, 0.4], 30).iter().all(|&t| t == 1));
    }

    #[test]
    fn top_p_drops_the_tail() {
        // Token 0 holds ~88% of the mass: with top_p 0.5 nothing else can be drawn.
        let p = SamplingParams {
            temperature: 1.0,
            top_k: 0,
            top_p: 0.5,
            seed: 11,
        };
        assert!(sampled(p, &[3.0, 0.0, 0.0, 0.0], 100)
            .iter()
            .all(|&t| t == 0));
    }

    #[test]
    fn sampling_follows_the_distribution() {
        let p = SamplingParams {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            seed: 5,
        };
        let draws = sampled(p, &[0.0, 2f32.ln()], 3000);
        let ones = draws.iter().filter(|&&t| t == 1).count() as f64 / 3000.0;
        assert!((ones - 2.0 / 3.0).abs() < 0.04, "share of token 1: {ones}");
    }
}
