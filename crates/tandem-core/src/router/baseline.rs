//! Trivial routers that every figure is compared with: if a trained router does no better
//! than "the cloud writes each reply's first token" or than chance at the same share, its
//! figures say nothing about the router.

use super::{Features, Router, RouterKind};
use crate::sampling::SplitMix64;
use std::sync::Mutex;

/// Scores the first token of a reply 1 and every other 0: under a letter-first prompt, the
/// cloud then writes exactly the answer.
#[derive(Debug, Clone, Copy, Default)]
pub struct FirstTokenRouter;

impl Router for FirstTokenRouter {
    fn kind(&self) -> RouterKind {
        RouterKind::FirstToken
    }

    fn score(&self, f: &Features<'_>) -> f32 {
        f32::from(u8::from(f.position == 0))
    }
}

/// A uniform random score per position, from a fixed seed: chance at the same share.
#[derive(Debug)]
pub struct RandomRouter(Mutex<SplitMix64>);

impl RandomRouter {
    /// A random router whose scores are fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        Self(Mutex::new(SplitMix64::new(seed)))
    }
}

impl Default for RandomRouter {
    fn default() -> Self {
        Self::new(0)
    }
}

impl Router for RandomRouter {
    fn kind(&self) -> RouterKind {
        RouterKind::Random
    }

    fn score(&self, _: &Features<'_>) -> f32 {
        let mut rng = self.0.lock().unwrap_or_else(|e| e.into_inner());
        rng.next_f64() as f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signals::Signals;

    fn at(position: u32) -> Features<'static> {
        Features {
            signals: Signals {
                top1_prob: 1.0,
                margin: 1.0,
                entropy: 0.0,
            },
            hidden: None,
            position,
        }
    }

    #[test]
    fn first_token_scores_only_position_zero() {
        let scores: Vec<f32> = (0..4).map(|p| FirstTokenRouter.score(&at(p))).collect();
        assert_eq!(scores, [1.0, 0.0, 0.0, 0.0]);
    }

    #[test]
    fn random_is_uniform_and_fixed_by_its_seed() {
        let router = RandomRouter::new(7);
        let scores: Vec<f32> = (0..2000).map(|p| router.score(&at(p))).collect();
        let again: Vec<f32> = (0..2000)
            .map(|p| RandomRouter::new(7).score(&at(p)))
            .collect();
        assert_ne!(scores, again, "one stream, not one value per position");
        let replay = RandomRouter::new(7);
        assert_eq!(
            scores,
            (0..2000).map(|p| replay.score(&at(p))).collect::<Vec<_>>()
        );
        let above = scores.iter().filter(|&&s| s >= 0.9).count();
        assert!((150..250).contains(&above), "{above} of 2000 above 0.9");
    }
}
