//! Routers: from the edge model's state at one position to a criticality score in `[0, 1]`.
//!
//! A high score means "this token matters and the edge model may get it wrong". Routers are
//! pure functions of [`Features`]; whether a scored token actually goes to the cloud is the
//! budget's decision ([`crate::budget`]), so a router never sees money or counts.

mod baseline;
mod confidence;
pub mod file;
mod mlp;

pub use baseline::{FirstTokenRouter, RandomRouter};
pub use confidence::{BlendRouter, EntropyRouter, FixedRouter, LeadEntropyRouter, MarginRouter};
pub use file::ModelPair;
pub use mlp::{MlpError, MlpRouter};

use crate::models::{self, ModelError};
use crate::signals::Signals;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::str::FromStr;

/// What a router may look at for one position.
#[derive(Debug, Clone, Copy)]
pub struct Features<'a> {
    /// Confidence signals from the logits.
    pub signals: Signals,
    /// The edge model's last-layer hidden state, when the engine computed it.
    pub hidden: Option<&'a [f32]>,
    /// Where the token stands in the reply (0 is the reply's first token).
    pub position: u32,
}

/// Where a router without a calibration starts a reply's bar for `share`: its scores are
/// probabilities-like, so about `share` of them clear `1 - share`.
pub fn uncalibrated_threshold(share: f32) -> f32 {
    1.0 - share
}

/// Maps one position's features to a criticality score.
pub trait Router: Send + Sync {
    /// Which router it is (its name comes from the kind, the one place names live).
    fn kind(&self) -> RouterKind;
    /// The name shown to users.
    fn name(&self) -> &'static str {
        self.kind().name()
    }
    /// Score in `[0, 1]`; higher means more worth sending to the cloud.
    fn score(&self, features: &Features<'_>) -> f32;
    /// Whether [`Features::hidden`] must be provided (costs a slower prefill).
    fn needs_hidden_state(&self) -> bool {
        false
    }
    /// The score threshold that sends about `share` of tokens to the cloud, where the router
    /// knows it (a calibrated router does); the budget controller starts from it.
    fn threshold_for_share(&self, share: f32) -> f32 {
        uncalibrated_threshold(share)
    }
}

/// The routers a user can pick by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RouterKind {
    /// Never ask the cloud.
    EdgeOnly,
    /// Ask the cloud for every token.
    CloudOnly,
    /// Route uncertain positions: high entropy of the edge distribution.
    Entropy,
    /// Route positions where the two best tokens are close.
    Margin,
    /// Margin, with a softened entropy where the favourite is weak (a choice's letter).
    Blend,
    /// The reply's first token, then entropy.
    LeadEntropy,
    /// A trained MLP on the hidden state and the signals.
    Mlp,
    /// Baseline: the cloud writes each reply's first token.
    FirstToken,
    /// Baseline: random positions (seeded), chance at the same share.
    Random,
}

impl RouterKind {
    /// Every kind, in the order the CLI lists them.
    pub const ALL: [RouterKind; 9] = [
        RouterKind::EdgeOnly,
        RouterKind::CloudOnly,
        RouterKind::Entropy,
        RouterKind::Margin,
        RouterKind::Blend,
        RouterKind::LeadEntropy,
        RouterKind::Mlp,
        RouterKind::FirstToken,
        RouterKind::Random,
    ];

    /// The trivial routers every evaluation compares with: nothing, everything, each reply's
    /// first token, random positions.
    pub const BASELINES: [RouterKind; 4] = [
        RouterKind::EdgeOnly,
        RouterKind::CloudOnly,
        RouterKind::FirstToken,
        RouterKind::Random,
    ];

    /// The router the app uses unless the user picks another, and the one that takes over
    /// when a picked MLP router cannot be used. Blend (margin, with a softened entropy where
    /// the favourite is weak): level with margin in chat, ahead of it on multiple choice
    /// (where a letter among five choices sits just under margin's bar), as good as the
    /// noisy OR it replaced on GSM8K and a little behind it on open prompts; the shipped MLP
    /// was no better on any set. Figures: README, "Routing figures"; how they were reached:
    /// `docs/eval/log.md`.
    pub const DEFAULT: RouterKind = RouterKind::Blend;

    /// The name users type.
    pub const fn name(self) -> &'static str {
        match self {
            RouterKind::EdgeOnly => "edge-only",
            RouterKind::CloudOnly => "cloud-only",
            RouterKind::Entropy => "entropy",
            RouterKind::Margin => "margin",
            RouterKind::Blend => "blend",
            RouterKind::LeadEntropy => "lead-entropy",
            RouterKind::Mlp => "mlp",
            RouterKind::FirstToken => "first-token",
            RouterKind::Random => "random",
        }
    }
}

impl std::fmt::Display for RouterKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for RouterKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RouterKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = RouterKind::ALL.iter().map(|k| k.name()).collect();
                format!(
                    "unknown router '{s}' (expected one of: {})",
                    names.join(", ")
                )
            })
    }
}

impl ModelPair {
    /// The identity a router file records for the edge model `edge` (a catalogue name, whose
    /// checksum is known, or a GGUF at `edge_path`, which is hashed) and the cloud model
    /// `cloud` (its served name).
    pub fn identify(edge: &str, edge_path: &Path, cloud: &str) -> Result<ModelPair, ModelError> {
        let edge_sha256 = match models::find(edge) {
            Some(entry) => entry.sha256,
            None => models::sha256_file(edge_path)?,
        };
        Ok(ModelPair {
            edge_sha256,
            cloud: cloud.to_owned(),
        })
    }
}

/// The MLP router trained for the default pair (Qwen2.5-Coder-0.5B edge, Qwen2.5-Coder-1.5B
/// cloud) on chat, multiple-choice, math and open prompts; how it was made:
/// `models/routers/README.md`. Embedded from the crate; `models/routers/` at the repository
/// root links to the same file.
const SHIPPED_MLP: &[u8] =
    include_bytes!("../../models/routers/qwen2.5-coder-0.5b--qwen2.5-coder-1.5b.safetensors");

/// The router shipped for `pair`, if Tandem ships one.
pub fn shipped(pair: &ModelPair) -> Result<MlpRouter, MlpError> {
    MlpRouter::from_bytes(SHIPPED_MLP, Path::new("(shipped router)"), Some(pair))
}

// An unusable MLP router falls back to `build(RouterKind::DEFAULT, ..)`: were the default the
// MLP, that fallback would call itself forever.
const _: () = assert!(!matches!(RouterKind::DEFAULT, RouterKind::Mlp));

/// Builds the router a user picked. The MLP router without a file of its own is the one
/// shipped for the default edge model. An MLP router trained on another edge model (or a
/// broken file) is not used: the default router takes over and the returned message says
/// why. One trained against another cloud is used, with a message saying so.
pub fn build(
    kind: RouterKind,
    mlp_path: Option<&Path>,
    pair: &ModelPair,
) -> (Box<dyn Router>, Option<String>) {
    match kind {
        RouterKind::EdgeOnly => (Box::new(FixedRouter(0.0)), None),
        RouterKind::CloudOnly => (Box::new(FixedRouter(1.0)), None),
        RouterKind::Entropy => (Box::new(EntropyRouter), None),
        RouterKind::Margin => (Box::new(MarginRouter), None),
        RouterKind::Blend => (Box::new(BlendRouter), None),
        RouterKind::LeadEntropy => (Box::new(LeadEntropyRouter), None),
        RouterKind::FirstToken => (Box::new(FirstTokenRouter), None),
        RouterKind::Random => (Box::new(RandomRouter::default()), None),
        RouterKind::Mlp => match load_mlp(mlp_path, pair) {
            Ok((router, notice)) => (Box::new(router), notice),
            Err(why) => {
                let (router, _) = build(RouterKind::DEFAULT, None, pair);
                let notice = format!(
                    "{why}; using the default router ({}) instead",
                    RouterKind::DEFAULT
                );
                (router, Some(notice))
            }
        },
    }
}

/// The MLP router in `path`, or the one shipped for `pair`'s edge model, checked against
/// `pair`; with a message when it learned from another cloud. The error says why none can
/// be used ([`build`] falls back on it; an evaluation stops).
pub fn load_mlp(
    path: Option<&Path>,
    pair: &ModelPair,
) -> Result<(MlpRouter, Option<String>), String> {
    let router = match path {
        Some(path) => MlpRouter::load(path, Some(pair)).map_err(|e| e.to_string())?,
        None => shipped(pair).map_err(|_| {
            "no MLP router is trained for this edge model (`tandem train-router` makes one, \
             --router-path names it)"
                .to_owned()
        })?,
    };
    let notice = router.cloud_notice(pair);
    Ok((router, notice))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unusable_mlp_router_falls_back_to_the_default_and_says_why() {
        let pair = ModelPair {
            edge_sha256: "e".into(),
            cloud: "c".into(),
        };
        let (router, notice) = build(RouterKind::Mlp, None, &pair);
        assert_eq!(router.name(), RouterKind::DEFAULT.name());
        let notice = notice.unwrap();
        assert!(notice.contains("tandem train-router") && notice.contains("default router"));
        let (router, notice) = build(RouterKind::Margin, None, &pair);
        assert_eq!((router.name(), notice), ("margin", None));
    }

    #[test]
    fn the_default_pair_gets_the_shipped_router() {
        let pair = ModelPair {
            edge_sha256: crate::models::find("qwen2.5-coder-0.5b").unwrap().sha256,
            cloud: "qwen2.5-coder-1.5b".into(),
        };
        let (router, notice) = build(RouterKind::Mlp, None, &pair);
        assert_eq!((router.name(), notice), ("mlp", None));
        assert!(router.needs_hidden_state());
        // Calibrated on held-out positions: a smaller share asks for a higher score.
        assert!(router.threshold_for_share(0.05) > router.threshold_for_share(0.2));

        // Another cloud (a `tandem serve` URL without --cloud-model, the user's own 32B):
        // the shipped router still runs, and the user is told why it may be less sharp.
        let own_cloud = ModelPair {
            cloud: "tandem-serve".into(),
            ..pair
        };
        let (router, notice) = build(RouterKind::Mlp, None, &own_cloud);
        assert_eq!(router.name(), "mlp");
        assert!(notice.unwrap().contains("tandem-serve"));
    }

    #[test]
    fn router_names_round_trip_and_unknown_names_list_the_choices() {
        for kind in RouterKind::ALL {
            assert_eq!(kind.name().parse::<RouterKind>().unwrap(), kind);
        }
        let err = "magic".parse::<RouterKind>().unwrap_err();
        assert!(err.contains("entropy") && err.contains("magic"), "{err}");
    }
}
