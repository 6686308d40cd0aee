//! The learned router: a small MLP over the edge model's hidden state and its signals.
//!
//! The weights file is safetensors, so it can be written by this crate's trainer or by any
//! Python tool. Its metadata names the model pair it was trained for: a router only means
//! something for the edge model whose hidden states it saw and the cloud whose tokens it
//! learned to predict, so loading it for another pair is refused.
//!
//! Layout: `norm.mean` and `norm.std` (one value per input), then `layers.N.weight`
//! (`[out, in]`) and `layers.N.bias` (`[out]`) for N = 0, 1, …; ReLU between layers and a
//! sigmoid on the single output. Inputs are the hidden state followed by
//! [`Signals::features`](crate::signals::Signals::features) (`tandem.features =
//! "hidden+signals"`), or the signals alone (`"signals"`).

use super::{Features, Router};
use safetensors::{Dtype, SafeTensors};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Why a router file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum MlpError {
    /// The file could not be read.
    #[error("cannot read router file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not a router in the expected format.
    #[error("router file {path} is not a valid Tandem router: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The router was trained for other models.
    #[error("router file {path} was trained for edge {trained_edge} / cloud {trained_cloud}, not for this edge/cloud pair ({edge} / {cloud})")]
    WrongPair {
        /// The file.
        path: PathBuf,
        /// Edge model hash the router was trained on.
        trained_edge: String,
        /// Cloud model the router was trained against.
        trained_cloud: String,
        /// Edge model hash in use.
        edge: String,
        /// Cloud model in use.
        cloud: String,
    },
}

/// The models a router belongs to: the edge GGUF's sha256 and the cloud model's name or hash.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelPair {
    /// sha256 of the edge GGUF file.
    pub edge_sha256: String,
    /// The cloud model's identity (sha256 of its GGUF, or its served name).
    pub cloud: String,
}

#[derive(Debug, Clone)]
struct Layer {
    weight: Vec<f32>,
    bias: Vec<f32>,
    inputs: usize,
}

/// A loaded MLP router.
#[derive(Debug, Clone)]
pub struct MlpRouter {
    mean: Vec<f32>,
    std: Vec<f32>,
    layers: Vec<Layer>,
    uses_hidden: bool,
    pair: ModelPair,
    /// `(share, threshold)` pairs sorted by share.
    calibration: Vec<(f32, f32)>,
}

impl MlpRouter {
    /// Loads a router file and checks that it was trained for `pair` (when given).
    pub fn load(path: &Path, pair: Option<&ModelPair>) -> Result<Self, MlpError> {
        let bytes = std::fs::read(path).map_err(|source| MlpError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::from_bytes(&bytes, path, pair)
    }

    /// Reads a router from the bytes of a file (`origin` names it in errors) and checks that
    /// it was trained for `pair` (when given).
    pub fn from_bytes(
        bytes: &[u8],
        origin: &Path,
        pair: Option<&ModelPair>,
    ) -> Result<Self, MlpError> {
        let path = origin;
        let invalid = |reason: String| MlpError::Invalid {
            path: path.to_owned(),
            reason,
        };
        let router = Self::parse(bytes).map_err(invalid)?;
        if let Some(pair) = pair {
            if *pair != router.pair {
                return Err(MlpError::WrongPair {
                    path: path.to_owned(),
                    trained_edge: router.pair.edge_sha256,
                    trained_cloud: router.pair.cloud,
                    edge: pair.edge_sha256.clone(),
                    cloud: pair.cloud.clone(),
                });
            }
        }
        Ok(router)
    }

    fn parse(bytes: &[u8]) -> Result<Self, String> {
        let (_, header) = SafeTensors::read_metadata(bytes).map_err(|e| e.to_string())?;
        let meta: HashMap<String, String> = header.metadata().clone().unwrap_or_default();
        let tensors = SafeTensors::deserialize(bytes).map_err(|e| e.to_string())?;
        let get = |name: &str| -> Result<(Vec<usize>, Vec<f32>), String> {
            let view = tensors
                .tensor(name)
                .map_err(|_| format!("missing tensor '{name}'"))?;
            if view.dtype() != Dtype::F32 {
                return Err(format!(
                    "tensor '{name}' must be F32, is {:?}",
                    view.dtype()
                ));
            }
            let data = view
                .data()
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            Ok((view.shape().to_vec(), data))
        };
        let meta_str = |key: &str| {
            meta.get(key)
                .cloned()
                .ok_or_else(|| format!("missing metadata '{key}'"))
        };
        let uses_hidden = match meta_str("tandem.features")?.as_str() {
            "hidden+signals" => true,
            "signals" => false,
            other => return Err(format!("unknown feature layout '{other}'")),
        };
        let (_, mean) = get("norm.mean")?;
        let (_, std) = get("norm.std")?;
        if mean.len() != std.len() {
            return Err("norm.mean and norm.std differ in length".into());
        }
        let mut layers = Vec::new();
        let mut inputs = mean.len();
        while let Ok((shape, weight)) = get(&format!("layers.{}.weight", layers.len())) {
            let (_, bias) = get(&format!("layers.{}.bias", layers.len()))?;
            if shape.len() != 2 || shape[1] != inputs || shape[0] != bias.len() {
                return Err(format!(
                    "layer {} has shape {shape:?}, expected [{}, {inputs}]",
                    layers.len(),
                    bias.len()
                ));
            }
            inputs = shape[0];
            layers.push(Layer {
                weight,
                bias,
                inputs: shape[1],
            });
        }
        if layers.is_empty() || inputs != 1 {
            return Err("the network must end in a single output".into());
        }
        let calibration = match meta.get("tandem.calibration") {
            Some(json) => {
                let mut table: Vec<(f32, f32)> =
                    serde_json::from_str(json).map_err(|e| format!("calibration table: {e}"))?;
                table.sort_by(|a, b| a.0.total_cmp(&b.0));
                table
            }
            None => Vec::new(),
        };
        Ok(Self {
            mean,
            std,
            layers,
            uses_hidden,
            pair: ModelPair {
                edge_sha256: meta_str("tandem.edge_sha256")?,
                cloud: meta_str("tandem.cloud")?,
            },
            calibration,
        })
    }

    /// The model pair this router was trained for.
    pub fn pair(&self) -> &ModelPair {
        &self.pair
    }

    fn input(&self, f: &Features<'_>) -> Vec<f32> {
        let mut x = Vec::with_capacity(self.mean.len());
        if self.uses_hidden {
            x.extend_from_slice(f.hidden.unwrap_or(&[]));
        }
        x.extend_from_slice(&f.signals.features());
        // A hidden state of the wrong width (another model) must not panic: pad or cut.
        x.resize(self.mean.len(), 0.0);
        for ((v, m), s) in x.iter_mut().zip(&self.mean).zip(&self.std) {
            *v = (*v - m) / s.max(1e-6);
        }
        x
    }
}

impl Router for MlpRouter {
    fn name(&self) -> &str {
        "mlp"
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
        self.uses_hidden
    }

    fn threshold_for_share(&self, share: f32) -> f32 {
        let table = &self.calibration;
        let Some(&(first_share, first_threshold)) = table.first() else {
            return 1.0 - share;
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
pub(crate) mod tests {
    use super::*;
    use crate::signals::Signals;
    use safetensors::tensor::TensorView;

    /// Writes a router file; `layers` are `(weight rows, bias)`.
    pub(crate) fn write_router(
        path: &Path,
        features: &str,
        mean: &[f32],
        std: &[f32],
        layers: &[(Vec<Vec<f32>>, Vec<f32>)],
        calibration: Option<&str>,
    ) {
        let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let mut buffers: Vec<(String, Vec<usize>, Vec<u8>)> = vec![
            ("norm.mean".into(), vec![mean.len()], bytes(mean)),
            ("norm.std".into(), vec![std.len()], bytes(std)),
        ];
        for (i, (w, b)) in layers.iter().enumerate() {
            let flat: Vec<f32> = w.iter().flatten().copied().collect();
            buffers.push((
                format!("layers.{i}.weight"),
                vec![w.len(), w[0].len()],
                bytes(&flat),
            ));
            buffers.push((format!("layers.{i}.bias"), vec![b.len()], bytes(b)));
        }
        let views: Vec<(String, TensorView)> = buffers
            .iter()
            .map(|(n, s, d)| {
                (
                    n.clone(),
                    TensorView::new(Dtype::F32, s.clone(), d).unwrap(),
                )
            })
            .collect();
        let mut meta = HashMap::from([
            ("tandem.features".to_string(), features.to_string()),
            ("tandem.edge_sha256".to_string(), "edge-hash".to_string()),
            ("tandem.cloud".to_string(), "cloud-model".to_string()),
        ]);
        if let Some(c) = calibration {
            meta.insert("tandem.calibration".into(), c.into());
        }
        let data = safetensors::serialize(views, &Some(meta)).unwrap();
        std::fs::write(path, data).unwrap();
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
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.safetensors");
        // Inputs: hidden[0], top1, margin, entropy; normalised with mean 1, std 2.
        write_router(
            &path,
            "hidden+signals",
            &[1.0; 4],
            &[2.0; 4],
            &[
                (
                    vec![vec![1.0, 0.0, 0.0, 0.0], vec![0.0, 0.0, 0.0, -1.0]],
                    vec![0.0, 0.5],
                ),
                (vec![vec![2.0, 1.0]], vec![-1.0]),
            ],
            None,
        );
        let router = MlpRouter::load(&path, None).unwrap();
        assert!(router.needs_hidden_state());
        // x = [(5-1)/2, .., .., (3-1)/2] = [2, .., .., 1]; h = relu([2, -1 + 0.5]) = [2, 0]; z = 4 - 1 = 3.
        let expected = 1.0 / (1.0 + (-3f32).exp());
        let score = router.score(&features(&[5.0], 3.0));
        assert!((score - expected).abs() < 1e-6, "{score} vs {expected}");
    }

    #[test]
    fn wrong_model_pair_is_refused_with_both_names() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.safetensors");
        write_router(
            &path,
            "signals",
            &[0.0; 3],
            &[1.0; 3],
            &[(vec![vec![1.0, 1.0, 1.0]], vec![0.0])],
            None,
        );
        let other = ModelPair {
            edge_sha256: "other".into(),
            cloud: "cloud-model".into(),
        };
        let err = MlpRouter::load(&path, Some(&other))
            .unwrap_err()
            .to_string();
        assert!(err.contains("edge-hash") && err.contains("other"), "{err}");
        let same = ModelPair {
            edge_sha256: "edge-hash".into(),
            cloud: "cloud-model".into(),
        };
        assert!(MlpRouter::load(&path, Some(&same)).is_ok());
    }

    #[test]
    fn corrupt_or_misshapen_files_are_invalid_not_panics() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.safetensors");
        std::fs::write(&path, b"not a safetensors file").unwrap();
        assert!(matches!(
            MlpRouter::load(&path, None),
            Err(MlpError::Invalid { .. })
        ));
        write_router(
            &path,
            "signals",
            &[0.0; 3],
            &[1.0; 3],
            &[(vec![vec![1.0, 1.0]], vec![0.0])],
            None,
        );
        let err = MlpRouter::load(&path, None).unwrap_err().to_string();
        assert!(err.contains("layer 0"), "{err}");
        let missing = dir.path().join("absent.safetensors");
        assert!(matches!(
            MlpRouter::load(&missing, None),
            Err(MlpError::Read { .. })
        ));
    }

    #[test]
    fn calibration_table_interpolates_thresholds() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.safetensors");
        write_router(
            &path,
            "signals",
            &[0.0; 3],
            &[1.0; 3],
            &[(vec![vec![1.0, 1.0, 1.0]], vec![0.0])],
            Some("[[0.1, 0.8], [0.05, 0.9], [0.2, 0.6]]"),
        );
        let r = MlpRouter::load(&path, None).unwrap();
        assert!((r.threshold_for_share(0.15) - 0.7).abs() < 1e-6);
        assert_eq!(r.threshold_for_share(0.01), 0.9);
        assert_eq!(r.threshold_for_share(0.5), 0.6);
    }
}
