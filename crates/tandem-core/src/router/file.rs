//! The router file: a trained MLP router, the model pair it belongs to and its calibration
//! table, as safetensors with string metadata.
//!
//! Safetensors, so that the trainer in `tandem-eval` or any Python tool can write one. This
//! module is the format's only owner: the trainer writes through [`RouterFile::write`], the
//! runtime ([`super::MlpRouter`]) reads through [`RouterFile::read`], and no other file names
//! a key, so the two sides cannot drift apart.
//!
//! Tensors (all F32): `norm.mean` and `norm.std` (one value per input), then
//! `layers.N.weight` (`[out, in]`) and `layers.N.bias` (`[out]`) for N = 0, 1, …; ReLU
//! between layers and a sigmoid on the single output.
//!
//! Metadata: `tandem.features` (the inputs, see [`FeatureLayout`]), `tandem.edge_sha256` and
//! `tandem.cloud` (the [`ModelPair`]), `tandem.calibration` (optional, JSON
//! `[[share, threshold], …]`), `tandem.layer` (which hidden state was read: always `last`),
//! and, for people, `tandem.data` (what it was trained on) and `tandem.report` (the
//! trainer's JSON report).

use safetensors::tensor::TensorView;
use safetensors::{Dtype, SafeTensorError, SafeTensors};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

const FEATURES: &str = "tandem.features";
const EDGE_SHA256: &str = "tandem.edge_sha256";
const CLOUD: &str = "tandem.cloud";
const CALIBRATION: &str = "tandem.calibration";
const LAYER: &str = "tandem.layer";
const DATA: &str = "tandem.data";
const REPORT: &str = "tandem.report";
const MEAN: &str = "norm.mean";
const STD: &str = "norm.std";

/// The hidden state a router reads: the final-norm output of the last layer, the only one
/// the engine computes.
const LAST_LAYER: &str = "last";

/// The smallest standard deviation an input is divided by: a constant input (a dead hidden
/// unit) must not divide by zero.
const MIN_STD: f32 = 1e-6;

fn weight_name(layer: usize) -> String {
    format!("layers.{layer}.weight")
}

fn bias_name(layer: usize) -> String {
    format!("layers.{layer}.bias")
}

/// Why a router file cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
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
}

/// Why a router file cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The tensors or metadata could not be encoded.
    #[error("cannot encode the router: {0}")]
    Encode(#[from] SafeTensorError),
    /// The file could not be written.
    #[error("cannot write router file {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// The models a router belongs to: the edge GGUF's sha256 and the cloud model's name or hash.
///
/// A router only means something for the edge model whose hidden states it saw and the cloud
/// whose tokens it learned to predict, so the file records both.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelPair {
    /// sha256 of the edge GGUF file.
    pub edge_sha256: String,
    /// The cloud model's identity (sha256 of its GGUF, or its served name).
    pub cloud: String,
}

/// What a router reads at one position, in input order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeatureLayout {
    /// The edge model's hidden state, then
    /// [`Signals::features`](crate::signals::Signals::features).
    HiddenAndSignals,
    /// The signals alone: no hidden state at run time (a faster prefill), but less to see.
    Signals,
    /// The signals, then where the position is in its reply ([`position_features`]): what
    /// starts a reply (a letter, a yes or no) is read differently from what follows.
    SignalsAndPosition,
}

/// Inputs a position's signals take ([`Signals::features`](crate::signals::Signals::features)).
const SIGNAL_INPUTS: usize = 3;
/// Inputs a position's place in its reply takes ([`position_features`]).
const POSITION_INPUTS: usize = 2;

/// A reply position as inputs: whether it is the reply's first token, and `ln(1 + position)`
/// (early tokens differ from each other more than late ones).
pub fn position_features(position: u32) -> [f32; POSITION_INPUTS] {
    [
        f32::from(u8::from(position == 0)),
        (position as f32).ln_1p(),
    ]
}

impl FeatureLayout {
    const ALL: [FeatureLayout; 3] = [
        FeatureLayout::HiddenAndSignals,
        FeatureLayout::Signals,
        FeatureLayout::SignalsAndPosition,
    ];

    /// The layout's name, in router files and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            FeatureLayout::HiddenAndSignals => "hidden+signals",
            FeatureLayout::Signals => "signals",
            FeatureLayout::SignalsAndPosition => "signals+position",
        }
    }

    /// The layout named `name`.
    pub fn parse(name: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|layout| layout.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|l| l.name()).collect();
                format!(
                    "unknown feature layout '{name}' (one of {})",
                    names.join(", ")
                )
            })
    }

    /// Whether the router reads the hidden state.
    pub fn uses_hidden(self) -> bool {
        self == FeatureLayout::HiddenAndSignals
    }

    /// Whether the router reads where the position is in its reply.
    fn uses_position(self) -> bool {
        self == FeatureLayout::SignalsAndPosition
    }

    /// How many inputs a position has for an edge model of `hidden_size`: what
    /// [`Self::input`] lays out.
    pub fn width(self, hidden_size: usize) -> usize {
        usize::from(self.uses_hidden()) * hidden_size
            + SIGNAL_INPUTS
            + usize::from(self.uses_position()) * POSITION_INPUTS
    }

    /// One position's input before normalisation, `width` values: the hidden state (when
    /// this layout reads it), the signals, then the position (when it reads it). A hidden
    /// state of another width (another model) is padded with zeros or cut, so that it cannot
    /// break the network.
    pub fn input(
        self,
        hidden: &[f32],
        signals: [f32; SIGNAL_INPUTS],
        position: u32,
        width: usize,
    ) -> Vec<f32> {
        let mut x = Vec::with_capacity(width);
        if self.uses_hidden() {
            x.extend_from_slice(hidden);
        }
        x.extend_from_slice(&signals);
        if self.uses_position() {
            x.extend_from_slice(&position_features(position));
        }
        x.resize(width, 0.0);
        x
    }
}

/// Per-input mean and standard deviation of the training inputs: an input `x` enters the
/// network as `(x - mean) / max(std, 1e-6)`, in training and at run time alike.
#[derive(Debug, Clone, PartialEq)]
pub struct Normalisation {
    /// One mean per input.
    pub mean: Vec<f32>,
    /// One standard deviation per input.
    pub std: Vec<f32>,
}

impl Normalisation {
    /// The number of inputs.
    pub fn width(&self) -> usize {
        self.mean.len()
    }

    /// Normalises one input row in place.
    pub fn apply(&self, row: &mut [f32]) {
        for ((x, m), s) in row.iter_mut().zip(&self.mean).zip(&self.std) {
            *x = (*x - m) / s.max(MIN_STD);
        }
    }
}

/// One fully connected layer.
#[derive(Debug, Clone, PartialEq)]
pub struct Layer {
    /// Row-major `[outputs, inputs]`.
    pub weight: Vec<f32>,
    /// One per output.
    pub bias: Vec<f32>,
    /// Width of the layer's input.
    pub inputs: usize,
}

/// Everything a router file holds.
#[derive(Debug, Clone, PartialEq)]
pub struct RouterFile {
    /// What the network reads.
    pub features: FeatureLayout,
    /// The models it was trained for.
    pub pair: ModelPair,
    /// How inputs are scaled before the first layer.
    pub normalisation: Normalisation,
    /// The network, input side first; it ends in a single output.
    pub layers: Vec<Layer>,
    /// `(share, threshold)`: the score threshold that sends that share of positions to the
    /// cloud, shares ascending. Empty when the router is not calibrated.
    pub calibration: Vec<(f32, f32)>,
    /// What it was trained on (e.g. `csqa:train[0..700]`), for people.
    pub data: Option<String>,
    /// The trainer's report as JSON, for people.
    pub report: Option<String>,
}

/// A router file before encoding: named F32 tensors and string metadata.
struct Parts {
    tensors: Vec<(String, Vec<usize>, Vec<u8>)>,
    metadata: HashMap<String, String>,
}

impl Parts {
    fn encode(&self) -> Result<Vec<u8>, SafeTensorError> {
        let views = self
            .tensors
            .iter()
            .map(|(name, shape, data)| {
                Ok((
                    name.as_str(),
                    TensorView::new(Dtype::F32, shape.clone(), data)?,
                ))
            })
            .collect::<Result<Vec<_>, SafeTensorError>>()?;
        safetensors::serialize(views, &Some(self.metadata.clone()))
    }
}

impl RouterFile {
    /// Writes the file.
    pub fn write(&self, path: &Path) -> Result<(), WriteError> {
        let bytes = self.parts().encode()?;
        std::fs::write(path, bytes).map_err(|source| WriteError::Write {
            path: path.to_owned(),
            source,
        })
    }

    /// Reads a file.
    pub fn read(path: &Path) -> Result<Self, ReadError> {
        let bytes = std::fs::read(path).map_err(|source| ReadError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::from_bytes(&bytes, path)
    }

    /// Reads a file from its bytes; `origin` names it in errors.
    pub fn from_bytes(bytes: &[u8], origin: &Path) -> Result<Self, ReadError> {
        Self::parse(bytes).map_err(|reason| ReadError::Invalid {
            path: origin.to_owned(),
            reason,
        })
    }

    fn parts(&self) -> Parts {
        let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let width = self.normalisation.width();
        let mut tensors = vec![
            (
                MEAN.to_owned(),
                vec![width],
                bytes(&self.normalisation.mean),
            ),
            (STD.to_owned(), vec![width], bytes(&self.normalisation.std)),
        ];
        for (i, layer) in self.layers.iter().enumerate() {
            let outputs = layer.bias.len();
            tensors.push((
                weight_name(i),
                vec![outputs, layer.inputs],
                bytes(&layer.weight),
            ));
            tensors.push((bias_name(i), vec![outputs], bytes(&layer.bias)));
        }
        let mut metadata = HashMap::from([
            (FEATURES.to_owned(), self.features.name().to_owned()),
            (EDGE_SHA256.to_owned(), self.pair.edge_sha256.clone()),
            (CLOUD.to_owned(), self.pair.cloud.clone()),
            (
                CALIBRATION.to_owned(),
                serde_json::to_string(&self.calibration).expect("pairs of floats serialize"),
            ),
            (LAYER.to_owned(), LAST_LAYER.to_owned()),
        ]);
        for (key, value) in [(DATA, &self.data), (REPORT, &self.report)] {
            if let Some(value) = value {
                metadata.insert(key.to_owned(), value.clone());
            }
        }
        Parts { tensors, metadata }
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
        let features = FeatureLayout::parse(&meta_str(FEATURES)?)?;
        let (_, mean) = get(MEAN)?;
        let (_, std) = get(STD)?;
        if mean.len() != std.len() {
            return Err(format!("{MEAN} and {STD} differ in length"));
        }
        if mean.is_empty() {
            return Err(format!("{MEAN} is empty: the router reads no input"));
        }
        if mean.iter().any(|m| !m.is_finite()) || std.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
            return Err(format!(
                "{MEAN} must be finite and {STD} finite and above 0"
            ));
        }
        let mut layers = Vec::new();
        let mut inputs = mean.len();
        while let Ok((shape, weight)) = get(&weight_name(layers.len())) {
            let (_, bias) = get(&bias_name(layers.len()))?;
            if shape.len() != 2 || shape[1] != inputs || shape[0] != bias.len() {
                return Err(format!(
                    "layer {} has shape {shape:?}, expected [{}, {inputs}]",
                    layers.len(),
                    bias.len()
                ));
            }
            if weight.iter().chain(&bias).any(|v| !v.is_finite()) {
                return Err(format!(
                    "layer {} holds a value that is not finite",
                    layers.len()
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
        let calibration = match meta.get(CALIBRATION) {
            Some(json) => {
                let mut table: Vec<(f32, f32)> =
                    serde_json::from_str(json).map_err(|e| format!("calibration table: {e}"))?;
                table.sort_by(|a, b| a.0.total_cmp(&b.0));
                table
            }
            None => Vec::new(),
        };
        Ok(Self {
            features,
            pair: ModelPair {
                edge_sha256: meta_str(EDGE_SHA256)?,
                cloud: meta_str(CLOUD)?,
            },
            normalisation: Normalisation { mean, std },
            layers,
            calibration,
            data: meta.get(DATA).cloned(),
            report: meta.get(REPORT).cloned(),
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A small valid router file: `layers` are `(weight rows, bias)`.
    pub(crate) fn router_file(
        features: FeatureLayout,
        mean: &[f32],
        std: &[f32],
        layers: &[(Vec<Vec<f32>>, Vec<f32>)],
        calibration: &[(f32, f32)],
    ) -> RouterFile {
        RouterFile {
            features,
            pair: ModelPair {
                edge_sha256: "edge-hash".into(),
                cloud: "cloud-model".into(),
            },
            normalisation: Normalisation {
                mean: mean.to_vec(),
                std: std.to_vec(),
            },
            layers: layers
                .iter()
                .map(|(rows, bias)| Layer {
                    weight: rows.iter().flatten().copied().collect(),
                    bias: bias.clone(),
                    inputs: rows[0].len(),
                })
                .collect(),
            calibration: calibration.to_vec(),
            data: None,
            report: None,
        }
    }

    fn signals_only() -> RouterFile {
        router_file(
            FeatureLayout::Signals,
            &[0.0; 3],
            &[1.0; 3],
            &[(vec![vec![1.0, 1.0, 1.0]], vec![0.0])],
            &[],
        )
    }

    /// Why `parts` fail to read.
    fn refusal(parts: &Parts) -> String {
        let bytes = parts.encode().unwrap();
        RouterFile::from_bytes(&bytes, Path::new("r.safetensors"))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_written_file_reads_back_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.safetensors");
        let file = RouterFile {
            data: Some("csqa:train".into()),
            report: Some(r#"{"epochs":3}"#.into()),
            ..router_file(
                FeatureLayout::HiddenAndSignals,
                &[1.0, 2.0, 3.0, 4.0],
                &[0.5, 0.25, 2.0, 1.0],
                &[
                    (
                        vec![vec![1.0, -2.0, 0.5, 0.0], vec![0.0, 3.0, 0.0, -1.0]],
                        vec![0.1, -0.2],
                    ),
                    (vec![vec![2.0, 1.0]], vec![-1.0]),
                ],
                &[(0.05, 0.9), (0.5, 0.25), (1.0, 0.0)],
            )
        };
        file.write(&path).unwrap();
        assert_eq!(RouterFile::read(&path).unwrap(), file);
        // Which hidden state the router read, for tools other than Tandem.
        assert_eq!(file.parts().metadata[LAYER], "last");
    }

    #[test]
    fn the_shipped_router_reads_and_rewrites_unchanged() {
        let shipped =
            RouterFile::from_bytes(super::super::SHIPPED_MLP, Path::new("shipped")).unwrap();
        assert_eq!(shipped.features, FeatureLayout::HiddenAndSignals);
        assert_eq!(shipped.pair.cloud, "qwen2.5-coder-1.5b");
        assert_eq!(shipped.normalisation.width(), 896 + 3);
        assert_eq!(shipped.layers.len(), 2);
        assert_eq!(shipped.calibration.len(), 14);
        // Trained on all three kinds of reply, not on multiple-choice letters alone.
        let data = shipped.data.as_deref().unwrap();
        for set in ["chat:train", "csqa:train", "gsm8k:test", "open:train"] {
            assert!(data.contains(set), "{data}");
        }
        assert!(shipped
            .report
            .as_ref()
            .unwrap()
            .contains("held_out_reply_hits"));
        // A bar that moves with the share: the router trained on letters alone jumped from
        // 0.98 at 5% to 0.006 at 7.5% (it had learned "the reply's first token").
        let bars: Vec<f32> = shipped
            .calibration
            .iter()
            .filter(|(share, _)| (0.02..=0.2).contains(share))
            .map(|&(_, bar)| bar)
            .collect();
        assert!(bars.len() >= 5, "{:?}", shipped.calibration);
        assert!(
            bars.windows(2).all(|w| w[0] > w[1] && w[0] - w[1] < 0.15),
            "{bars:?}"
        );

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.safetensors");
        shipped.write(&path).unwrap();
        assert_eq!(RouterFile::read(&path).unwrap(), shipped);
    }

    #[test]
    fn missing_metadata_and_unknown_layouts_are_named() {
        let mut parts = signals_only().parts();
        parts.metadata.remove(CLOUD);
        let err = refusal(&parts);
        assert!(err.contains("missing metadata 'tandem.cloud'"), "{err}");

        let mut parts = signals_only().parts();
        parts.metadata.insert(FEATURES.into(), "hidden-only".into());
        let err = refusal(&parts);
        assert!(
            err.contains("unknown feature layout 'hidden-only'"),
            "{err}"
        );

        let mut parts = signals_only().parts();
        parts.tensors.retain(|(name, _, _)| name != STD);
        let err = refusal(&parts);
        assert!(err.contains("missing tensor 'norm.std'"), "{err}");

        // Crafted shapes and values are refused, not a panic or NaN scores later.
        let empty = router_file(
            FeatureLayout::Signals,
            &[],
            &[],
            &[(vec![vec![]], vec![0.0])],
            &[],
        );
        assert!(refusal(&empty.parts()).contains("is empty"));
        let zero_std = router_file(
            FeatureLayout::Signals,
            &[0.0; 3],
            &[1.0, 0.0, 1.0],
            &[(vec![vec![1.0, 1.0, 1.0]], vec![0.0])],
            &[],
        );
        assert!(refusal(&zero_std.parts()).contains("above 0"));
        let nan_weight = router_file(
            FeatureLayout::Signals,
            &[0.0; 3],
            &[1.0; 3],
            &[(vec![vec![1.0, f32::NAN, 1.0]], vec![0.0])],
            &[],
        );
        assert!(refusal(&nan_weight.parts()).contains("not finite"));
    }

    #[test]
    fn an_absent_calibration_is_an_empty_table_and_shares_are_sorted() {
        let mut parts = signals_only().parts();
        parts.metadata.remove(CALIBRATION);
        let bytes = parts.encode().unwrap();
        let file = RouterFile::from_bytes(&bytes, Path::new("r")).unwrap();
        assert!(file.calibration.is_empty());

        parts
            .metadata
            .insert(CALIBRATION.into(), "[[0.1, 0.8], [0.05, 0.9]]".into());
        let bytes = parts.encode().unwrap();
        let file = RouterFile::from_bytes(&bytes, Path::new("r")).unwrap();
        assert_eq!(file.calibration, vec![(0.05, 0.9), (0.1, 0.8)]);
    }

    #[test]
    fn corrupt_or_misshapen_files_are_invalid_not_panics() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.safetensors");
        std::fs::write(&path, b"not a safetensors file").unwrap();
        assert!(matches!(
            RouterFile::read(&path),
            Err(ReadError::Invalid { .. })
        ));
        let misshapen = router_file(
            FeatureLayout::Signals,
            &[0.0; 3],
            &[1.0; 3],
            &[(vec![vec![1.0, 1.0]], vec![0.0])],
            &[],
        );
        misshapen.write(&path).unwrap();
        let err = RouterFile::read(&path).unwrap_err().to_string();
        assert!(err.contains("layer 0"), "{err}");
        let missing = dir.path().join("absent.safetensors");
        assert!(matches!(
            RouterFile::read(&missing),
            Err(ReadError::Read { .. })
        ));
    }
}
