//! Routers that need no training: they read the edge model's own confidence.

use super::{Features, Router, RouterKind};

/// Always the same score: `0` for edge-only, `1` for cloud-only.
#[derive(Debug, Clone, Copy)]
pub struct FixedRouter(pub f32);

impl Router for FixedRouter {
    fn kind(&self) -> RouterKind {
        if self.0 > 0.0 {
            RouterKind::CloudOnly
        } else {
            RouterKind::EdgeOnly
        }
    }

    fn score(&self, _: &Features<'_>) -> f32 {
        self.0
    }
}

/// Scores by entropy: `1 - exp(-H)`, so a certain distribution scores 0 and a spread one nears 1.
#[derive(Debug, Clone, Copy, Default)]
pub struct EntropyRouter;

impl Router for EntropyRouter {
    fn kind(&self) -> RouterKind {
        RouterKind::Entropy
    }

    fn score(&self, f: &Features<'_>) -> f32 {
        spread_score(f.signals.entropy)
    }
}

/// `1 - e^(-nats)`: 0 for a certain distribution, nearing 1 as it spreads.
fn spread_score(nats: f32) -> f32 {
    1.0 - (-nats).exp()
}

/// Entropy, but the reply's first token always scores 1: that is where an answer often
/// starts (a letter, a yes or no, the first word of a verdict), and it is the one token a
/// reply's budget lends before its share has earned it, so asking for it costs at most one
/// token per reply at any share.
#[derive(Debug, Clone, Copy, Default)]
pub struct LeadEntropyRouter;

impl Router for LeadEntropyRouter {
    fn kind(&self) -> RouterKind {
        RouterKind::LeadEntropy
    }

    fn score(&self, f: &Features<'_>) -> f32 {
        if f.position == 0 {
            1.0
        } else {
            EntropyRouter.score(f)
        }
    }
}

/// Scores by the gap between the two best tokens: `1 - (p1 - p2)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct MarginRouter;

impl Router for MarginRouter {
    fn kind(&self) -> RouterKind {
        RouterKind::Margin
    }

    fn score(&self, f: &Features<'_>) -> f32 {
        (1.0 - f.signals.margin).clamp(0.0, 1.0)
    }
}

/// Margin, with a softened entropy where the edge's favourite is weak. Where the top token
/// holds under [`BLEND_WEAK_FAVOURITE`] of the mass, the score is the noisy OR of margin's
/// and a softened entropy's, `1 - (p1 - p2)·e^(-H/2)`: a choice's letter (a favourite near
/// 0.25, 2 nats over five letters) then scores 0.97 and clears the bar a 5% reply starts
/// from, where margin's own score (0.92) stays just under it. Elsewhere the score is margin's
/// `1 - (p1 - p2)`: over a clear favourite, spread is wording (the opening of a chat reply,
/// "The capital of…" against "To find…"), and the noisy OR everywhere (the default before
/// blend) spent chat replies' share there and was 2.1 points behind margin over 288 chat
/// prompts. Its bar starts where margin's does (1 − share).
#[derive(Debug, Clone, Copy, Default)]
pub struct BlendRouter;

/// The entropy (nats) at which blend's entropy half reaches `1 - 1/e`: twice entropy's own
/// scale. Three values tried, one run each, on the 288 chat prompts of `chat:dev` and
/// `chat:train` 0–239 and GSM8K test rows 20–99, with the noisy OR at every position: at 1
/// (full strength) 84% of the chat gap and 62.5% of the math gap, at 3 89% and 37.5%, at 2
/// 86% and 50%; CommonsenseQA dev rows 60–159 within one question at all three
/// (`docs/eval/log.md`, "Entropy at half strength").
const BLEND_ENTROPY_NATS: f32 = 2.0;

/// The top token's probability under which blend adds entropy to margin. One value tried
/// (`docs/eval/log.md`, "Blend where the favourite is weak"): in the judged replies of the retrained
/// MLP's collections 30% of multiple-choice positions lie under it, 9% of chat's and 2% of
/// math's.
const BLEND_WEAK_FAVOURITE: f32 = 0.4;

impl Router for BlendRouter {
    fn kind(&self) -> RouterKind {
        RouterKind::Blend
    }

    fn score(&self, f: &Features<'_>) -> f32 {
        let margin = MarginRouter.score(f);
        if f.signals.top1_prob >= BLEND_WEAK_FAVOURITE {
            return margin;
        }
        let entropy = spread_score(f.signals.entropy / BLEND_ENTROPY_NATS);
        1.0 - (1.0 - margin) * (1.0 - entropy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signals::Signals;

    fn features(top1_prob: f32, margin: f32, entropy: f32) -> Features<'static> {
        Features {
            signals: Signals {
                top1_prob,
                margin,
                entropy,
            },
            hidden: None,
            position: 3,
        }
    }

    #[test]
    fn uncertain_positions_score_higher() {
        let sure = features(0.99, 0.98, 0.05);
        let unsure = features(0.4, 0.05, 2.0);
        for router in [&EntropyRouter as &dyn Router, &MarginRouter, &BlendRouter] {
            let (a, b) = (router.score(&sure), router.score(&unsure));
            assert!(a < b, "{a} !< {b}");
            assert!((0.0..=1.0).contains(&a) && (0.0..=1.0).contains(&b));
        }
    }

    #[test]
    fn blend_lifts_a_spread_among_a_few_answers_over_the_bar_margin_misses() {
        // A choice's letter: the favourite 0.27, the runner-up 0.08 behind, 2 nats over five
        // letters. A 5% reply's bar starts at 0.95.
        let letter = features(0.27, 0.08, 2.0);
        let bar = BlendRouter.threshold_for_share(0.05);
        assert_eq!(bar, MarginRouter.threshold_for_share(0.05));
        assert!(MarginRouter.score(&letter) < bar);
        assert!(
            BlendRouter.score(&letter) > bar,
            "{}",
            BlendRouter.score(&letter)
        );
    }

    #[test]
    fn blend_is_margin_over_a_clear_favourite() {
        // "The capital of ..." against "To find ...": a favourite 0.35 ahead, 2 nats spread
        // over a handful of phrasings. Entropy alone scores it 0.86; blend as margin does,
        // under the bar a 15% share starts from, for the name that follows.
        let wording = features(0.55, 0.35, 2.0);
        assert!(EntropyRouter.score(&wording) > 0.85);
        assert_eq!(BlendRouter.score(&wording), MarginRouter.score(&wording));
        assert!(BlendRouter.score(&wording) < BlendRouter.threshold_for_share(0.15));
        let sure = features(0.99, 0.98, 0.05);
        assert!(
            BlendRouter.score(&sure) < 0.1,
            "a sure token is not worth a request"
        );
    }

    #[test]
    fn blend_is_never_below_margin() {
        for f in [
            features(0.27, 0.08, 2.0),
            features(0.39, 0.3, 3.5),
            features(0.45, 0.03, 1.2),
            features(0.7, 0.66, 4.0),
            features(0.99, 0.98, 0.05),
        ] {
            assert!(BlendRouter.score(&f) >= MarginRouter.score(&f));
            assert!((0.0..=1.0).contains(&BlendRouter.score(&f)));
        }
    }

    #[test]
    fn lead_entropy_takes_the_first_token_then_follows_entropy() {
        let sure = features(0.99, 0.98, 0.05);
        let first = Features {
            position: 0,
            ..sure
        };
        assert_eq!(LeadEntropyRouter.score(&first), 1.0);
        assert_eq!(LeadEntropyRouter.score(&sure), EntropyRouter.score(&sure));
    }

    #[test]
    fn fixed_routers_ignore_the_features() {
        assert_eq!(FixedRouter(1.0).score(&features(0.99, 0.9, 0.0)), 1.0);
        assert_eq!(FixedRouter(0.0).score(&features(0.1, 0.0, 5.0)), 0.0);
    }
}
