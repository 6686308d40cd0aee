//! The learned router: a small MLP over the edge model's hidden state and its signals.
//!
//! The network and its metadata come from a [router file](super::file). A router reads the
//! edge model's hidden states, so a file trained on another edge model is refused: its
//! inputs would mean nothing. A different cloud is only a notice: what the router learned
//! (where the edge is unsure) carries over, less sharply, until `tandem train-router`
//! specialises it to that cloud.

use super::file::{FeatureLayout, Layer, ModelPair, Normalisation, ReadError, RouterFile};
use super::{Features, Router, RouterKind};
use std::path::{Path, PathBuf};

/// Why a router file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum MlpError {
    /// The file cannot be read or is not a router.
    #[error(transparent)]
    File(#[from] ReadError),
    /// The router was trained on another edge model.
    #[error("router file {path} was trained on the edge model with sha256 {trained_edge}, not on this one ({edge}): it reads another model's hidden states")]
    WrongEdge {
        /// The file.
        path: PathBuf,
        /// Edge model hash the router was trained on.
        trained_edge: String,
        /// Edge model hash in use.
        edge: String,
    },
}

/// A loaded MLP router.
#[derive(Debug, Clone)]
pub struct MlpRouter {
    features: FeatureLayout,
    normalisation: Normalisation,
    layers: Vec<Layer>,
    pair: ModelPair,
    /// `(share, threshold)` pairs sorted by share.
    calibration: Vec<(f32, f32)>,
}

impl MlpRouter {
    /// Loads a router file and checks that it was trained on the edge model of `pair` (when
    /// given).
    pub fn load(path: &Path, pair: Option<&ModelPair>) -> Result<Self, MlpError> {
        Self::for_pair(RouterFile::read(path)?, path, pair)
    }

    /// Reads a router from the bytes of a file (`origin` names it in errors) and checks that
    /// it was trained on the edge model of `pair` (when given).
    pub fn from_bytes(
        bytes: &[u8],
        origin: &Path,
        pair: Option<&ModelPair>,
    ) -> Result<Self, MlpError> {
        Self::for_pair(RouterFile::from_bytes(bytes, origin)?, origin, pair)
    }

    fn for_pair(
        file: RouterFile,
        origin: &Path,
        pair: Option<&ModelPair>,
    ) -> Result<Self, MlpError> {
        if let Some(pair) = pair {
            if pair.edge_sha256 != file.pair.edge_sha256 {
                return Err(MlpError::WrongEdge {
                    path: origin.to_owned(),
                    trained_edge: file.pair.edge_sha256,
                    edge: pair.edge_sha256.clone(),
                });
            }
        }
        Ok(Self::new(file))
    }

    /// The router a file describes, whatever models it was trained for (the trainer measures
    /// the router it has just trained through this, as the runtime will run it).
    pub fn new(file: RouterFile) -> Self {
        let RouterFile {
            features,
            pair,
            normalisation,
            layers,
            calibration,
            ..
        } = file;
        Self {
            features,
            normalisation,
            layers,
            pair,
            calibration,
        }
    }

    /// The model pair this router was trained for.
    pub fn pair(&self) -> &ModelPair {
        &self.pair
    }

    /// What to tell the user when the cloud in use is not the one the router learned from.
    pub fn cloud_notice(&self, pair: &ModelPair) -> Option<String> {
        (pair.cloud != self.pair.cloud).then(|| {
            format!(
                "the MLP router learned from the cloud model '{}', not '{}': it still routes where the edge is unsure, but `tandem train-router` specialises it to this cloud",
                self.pair.cloud, pair.cloud
            )
        })
    }

    fn input(&self, f: &Features<'_>) -> Vec<f32> {
        let mut x = self.features.input(
            f.hidden.unwrap_or(&[]),
            f.signals.features(),
            f.position,
            self.normalisation.width(),
        );
        self.normalisation.apply(&mut x);
        x
    }
}

impl Router for MlpRouter {
    fn kind(&self) -> RouterKind {
        RouterKind::Mlp
    }

    fn score(&self, f: &Features<'_>) -> f32 {
        let mut x = self.input(f);
        for (i, layer) in self.layers.iter().enumerate() {
            let last = i + 1 == self.layers.len();
            x = layer
                .weight
                .chunks_exact(layer.inputs)
                .zip(&layer.bias)
                .map(|(row, b)| {
                    let z = row.iter().zip(&x).map(|(w, v)| w * v).sum::<f32>() + b;
                    if last {
                        1.0 / (1.0 + (-z).exp())
                    } else {
                        z.max(0.0)
                    }
                })
                .collect();
        }
        x[0]
    }

    fn needs_hidden_state(&self) -> bool {
        self.features.uses_hidden()
    }

    fn threshold_for_share(&self, share: f32) -> f32 {
        let table = &self.calibration;
        let Some(&(first_share, first_threshold)) = table.first() else {
            return super::uncalibrated_threshold(share);
        };
        if share <= first_share {
            return first_threshold;
        }
        for pair in table.windows(2) {
            let ((s0, t0), (s1, t1)) = (pair[0], pair[1]);
            if share <= s1 {
                let w = if s1 > s0 {
                    (share - s0) / (s1 - s0)
                } else {
                    1.0
                };
                return t0 + w * (t1 - t0);
            }
        }
        table[table.len() - 1].1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::router::file::tests::router_file;
    use crate::signals::Signals;

    /// Writes `file` and loads it as users get it.
    fn loaded(file: &RouterFile, pair: Option<&ModelPair>) -> Result<MlpRouter, MlpError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.safetensors");
        file.write(&path).unwrap();
        MlpRouter::load(&path, pair)
    }

    fn signals_only(calibration: &[(f32, f32)]) -> RouterFile {
        router_file(
            FeatureLayout::Signals,
            &[0.0; 3],
            &[1.0; 3],
            &[(vec![vec![1.0, 1.0, 1.0]], vec![0.0])],
            calibration,
        )
    }

    fn features(hidden: &[f32], entropy: f32) -> Features<'_> {
        Features {
            signals: Signals {
                top1_prob: 0.5,
                margin: 0.25,
                entropy,
            },
            hidden: Some(hidden),
            position: 3,
        }
    }

    #[test]
    fn forward_pass_matches_a_hand_computation() {
        // Inputs: hidden[0], top1, margin, entropy; normalised with mean 1, std 2.
        let file = router_file(
            FeatureLayout::HiddenAndSignals,
            &[1.0; 4],
            &[2.0; 4],
            &[
                (
                    vec![vec![1.0, 0.0, 0.0, 0.0], vec![0.0, 0.0, 0.0, -1.0]],
                    vec![0.0, 0.5],
                ),
                (vec![vec![2.0, 1.0]], vec![-1.0]),
            ],
            &[],
        );
        let router = loaded(&file, None).unwrap();
        assert!(router.needs_hidden_state());
        // x = [(5-1)/2, .., .., (3-1)/2] = [2, .., .., 1]; h = relu([2, -1 + 0.5]) = [2, 0]; z = 4 - 1 = 3.
        let expected = 1.0 / (1.0 + (-3f32).exp());
        let score = router.score(&features(&[5.0], 3.0));
        assert!((score - expected).abs() < 1e-6, "{score} vs {expected}");
    }

    #[test]
    fn another_edge_is_refused_and_another_cloud_is_a_notice() {
        let file = signals_only(&[]);
        let other_edge = ModelPair {
            edge_sha256: "other".into(),
            cloud: "cloud-model".into(),
        };
        let err = loaded(&file, Some(&other_edge)).unwrap_err().to_string();
        assert!(err.contains("edge-hash") && err.contains("other"), "{err}");
        let same = ModelPair {
            edge_sha256: "edge-hash".into(),
            cloud: "cloud-model".into(),
        };
        assert_eq!(
            loaded(&file, Some(&same)).unwrap().cloud_notice(&same),
            None
        );
        let other_cloud = ModelPair {
            cloud: "my-own-32b".into(),
            ..same
        };
        let router = loaded(&file, Some(&other_cloud)).unwrap();
        let notice = router.cloud_notice(&other_cloud).unwrap();
        assert!(
            notice.contains("cloud-model") && notice.contains("my-own-32b"),
            "{notice}"
        );
        assert!(notice.contains("tandem train-router"), "{notice}");
    }

    #[test]
    fn a_broken_file_is_refused_with_the_file_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.safetensors");
        std::fs::write(&path, b"not a safetensors file").unwrap();
        let err = MlpRouter::load(&path, None).unwrap_err();
        assert!(matches!(err, MlpError::File(ReadError::Invalid { .. })));
        assert!(err.to_string().contains("r.safetensors"), "{err}");
    }

    #[test]
    fn the_shipped_router_scores_the_same_after_a_rewrite() {
        let origin = Path::new("shipped");
        let shipped = MlpRouter::from_bytes(super::super::SHIPPED_MLP, origin, None).unwrap();
        let file = RouterFile::from_bytes(super::super::SHIPPED_MLP, origin).unwrap();
        let rewritten = loaded(&file, Some(shipped.pair())).unwrap();
        let hidden: Vec<f32> = (0..896)
            .map(|i| ((i * 37) % 101) as f32 / 50.0 - 1.0)
            .collect();
        for entropy in [0.0, 0.5, 2.0] {
            let f = features(&hidden, entropy);
            assert_eq!(shipped.score(&f), rewritten.score(&f));
        }
        assert_eq!(
            shipped.threshold_for_share(0.05),
            rewritten.threshold_for_share(0.05)
        );
    }

    #[test]
    fn calibration_table_interpolates_thresholds() {
        let r = loaded(&signals_only(&[(0.1, 0.8), (0.05, 0.9), (0.2, 0.6)]), None).unwrap();
        assert!((r.threshold_for_share(0.15) - 0.7).abs() < 1e-6);
        assert_eq!(r.threshold_for_share(0.01), 0.9);
        assert_eq!(r.threshold_for_share(0.5), 0.6);
    }

    proptest::proptest! {
        /// A damaged router file (a byte changed, dropped or cut, mostly in its header) is
        /// refused with the reason or, if it still reads, scores every position in [0, 1].
        #[test]
        fn a_damaged_router_file_is_refused_or_scores_in_range(
            at in 0usize..4096,
            damage in crate::damage::kind(),
            shipped: bool,
        ) {
            let bytes = if shipped {
                super::super::SHIPPED_MLP.to_vec()
            } else {
                let dir = tempfile::tempdir().unwrap();
                let path = dir.path().join("r.safetensors");
                signals_only(&[(0.1, 0.8)]).write(&path).unwrap();
                std::fs::read(&path).unwrap()
            };
            let bytes = crate::damage::apply(bytes, at, damage);
            if let Ok(router) = MlpRouter::from_bytes(&bytes, Path::new("fuzzed"), None) {
                let hidden = vec![0.5; 896];
                let score = router.score(&features(&hidden, 1.0));
                proptest::prop_assert!((0.0..=1.0).contains(&score), "{score}");
                let bar = router.threshold_for_share(0.05);
                proptest::prop_assert!(bar.is_finite(), "{bar}");
            }
        }
    }
}
