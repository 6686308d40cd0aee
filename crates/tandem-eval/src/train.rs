//! Training the MLP router from collected features.
//!
//! The router learns to predict, from what the edge model saw at a position (its final-norm
//! hidden state and its confidence signals), whether the cloud should take the token there:
//! the labels of [`crate::labels`], "the edge's token would change the answer". Everything random — the split, the initial weights, the batch order — comes
//! from [`TrainOptions::seed`], so a run can be reproduced and two runs compared.
//!
//! Positions of one example share a prompt and a reply, so they are alike: the split keeps
//! every example on one side, or the held-out numbers would be measured on near-copies of
//! training positions and flatter the router. The held-out side picks the epoch to keep
//! (early stopping), and its scores give the calibration table and the report's AUC.
//!
//! Positives are the minority (a few per cent), so they weigh negatives/positives in the loss: an
//! unweighted router would learn to say "edge is fine" everywhere and score low throughout.
//!
//! [`TrainedRouter::save`] writes the layout [`tandem_core::router::MlpRouter`] reads.

use crate::calibration::{calibrate, CLOUD_SHARES};
use crate::features::{FeatureSet, Record};
use candle_core::{Device, Tensor, Var};
use candle_nn::{AdamW, Optimizer, ParamsAdamW};
use safetensors::tensor::TensorView;
use safetensors::{Dtype, SafeTensorError};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;
use tandem_core::router::ModelPair;
use tandem_core::sampling::SplitMix64;

/// The smallest standard deviation an input is divided by, as in the runtime: a constant
/// input (a dead hidden unit) must not divide by zero.
const MIN_STD: f32 = 1e-6;

/// How to train.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainOptions {
    /// Widths of the hidden layers, input side first; empty trains a logistic regression.
    pub hidden_layers: Vec<usize>,
    /// Whether the router reads the hidden state; `false` trains on the three signals alone,
    /// which needs no hidden state at run time (a faster prefill) but sees less.
    pub use_hidden: bool,
    /// Upper bound on passes over the training split.
    pub max_epochs: usize,
    /// AdamW step size.
    pub learning_rate: f64,
    /// AdamW decoupled weight decay.
    pub weight_decay: f64,
    /// Records per optimiser step.
    pub batch_size: usize,
    /// Epochs without a better held-out loss before training stops.
    pub patience: usize,
    /// Share of examples (not records) held out, in `(0, 1)`.
    pub held_out_fraction: f64,
    /// Seed of the split, the initial weights and the batch order.
    pub seed: u64,
}

impl Default for TrainOptions {
    fn default() -> Self {
        Self {
            hidden_layers: vec![128],
            use_hidden: true,
            max_epochs: 100,
            learning_rate: 1e-3,
            weight_decay: 1e-2,
            batch_size: 128,
            patience: 10,
            held_out_fraction: 0.2,
            seed: 0,
        }
    }
}

impl TrainOptions {
    fn check(&self) -> Result<(), TrainError> {
        let problem = if self.hidden_layers.contains(&0) {
            "hidden layers must be at least 1 wide"
        } else if self.max_epochs == 0 {
            "max epochs must be at least 1"
        } else if self.patience == 0 {
            "patience must be at least 1 epoch"
        } else if self.batch_size == 0 {
            "batch size must be at least 1"
        } else if !(self.learning_rate.is_finite() && self.learning_rate > 0.0) {
            "learning rate must be positive"
        } else if !(self.weight_decay.is_finite() && self.weight_decay >= 0.0) {
            "weight decay must not be negative"
        } else if !(self.held_out_fraction > 0.0 && self.held_out_fraction < 1.0) {
            "held-out fraction must be between 0 and 1"
        } else {
            return Ok(());
        };
        Err(TrainError::Options(problem))
    }
}

/// Why a router cannot be trained.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// The options make no sense.
    #[error("invalid training options: {0}")]
    Options(&'static str),
    /// There is nothing to learn from.
    #[error("the feature set has no records: collect labels first")]
    Empty,
    /// The edge's token never changes an answer in this set.
    #[error("the feature set has no positive records (positions where the edge's token would change the answer): there is nothing to learn to route")]
    NoPositives,
    /// Every position is positive in this set.
    #[error("the feature set has no negative records (positions where the edge's token is as good as the cloud's): check the label collection")]
    NoNegatives,
    /// A record does not fit its header.
    #[error("record {index} (example {example}, position {position}) has a hidden state of width {found}, but the header says {expected}")]
    HiddenWidth {
        /// Index of the record in the set.
        index: usize,
        /// Its example.
        example: u32,
        /// Its position.
        position: u16,
        /// Its hidden state's width.
        found: usize,
        /// The header's hidden size.
        expected: usize,
    },
    /// A record holds NaN or infinity where the router would read it.
    #[error("record {index} (example {example}, position {position}) has a non-finite input")]
    NonFinite {
        /// Index of the record in the set.
        index: usize,
        /// Its example.
        example: u32,
        /// Its position.
        position: u16,
    },
    /// Holding out whole examples needs at least two.
    #[error("the feature set has {examples} example(s); training needs at least 2 so that one can be held out")]
    TooFewExamples {
        /// Distinct examples in the set.
        examples: usize,
    },
    /// The examples drawn for training lack a class, so the loss cannot be weighted.
    #[error("the training split ({examples} examples) has no {missing} records: collect more examples, hold out less, or change the seed")]
    OneClassSplit {
        /// Examples in the training split.
        examples: usize,
        /// "positive" or "negative".
        missing: &'static str,
    },
    /// The tensor library failed.
    #[error("training computation failed: {0}")]
    Tensor(#[from] candle_core::Error),
}

/// What a training run did and how well the kept router does on the held-out split.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainReport {
    /// Epochs run, early stopping included.
    pub epochs: usize,
    /// The epoch whose weights were kept (0: none beat the initial weights).
    pub best_epoch: usize,
    /// Class-weighted binary cross-entropy of the kept weights on the training split.
    pub train_loss: f32,
    /// The same loss (same positive weight) on the held-out split.
    pub held_out_loss: f32,
    /// Probability that a held-out positive outscores a held-out negative; `None` when the
    /// held-out split lacks one of the classes.
    pub held_out_auc: Option<f32>,
    /// Share of held-out records that are positives: what an oracle would send to the cloud.
    pub held_out_positive_share: f32,
    /// Examples in the training split.
    pub train_examples: usize,
    /// Examples in the held-out split.
    pub held_out_examples: usize,
    /// Records in the training split.
    pub train_records: usize,
    /// Records in the held-out split.
    pub held_out_records: usize,
    /// Wall-clock time of the whole run.
    pub seconds: f64,
}

/// Why a trained router cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum SaveError {
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

/// One fully connected layer, as the file stores it.
#[derive(Debug, Clone)]
struct Dense {
    /// Row-major `[outputs, inputs]`.
    weight: Vec<f32>,
    bias: Vec<f32>,
    inputs: usize,
}

/// A trained router: the kept weights, their normalisation and their calibration table.
#[derive(Debug, Clone)]
pub struct TrainedRouter {
    uses_hidden: bool,
    normalisation: Normalisation,
    layers: Vec<Dense>,
    /// `(share, threshold)`, shares ascending.
    calibration: Vec<(f32, f32)>,
    report: TrainReport,
}

impl TrainedRouter {
    /// Writes the router for `pair` to `path`; `data` names what it was trained on.
    pub fn save(&self, path: &Path, pair: &ModelPair, data: &str) -> Result<(), SaveError> {
        let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let width = self.normalisation.width();
        let mut tensors: Vec<(String, Vec<usize>, Vec<u8>)> = vec![
            (
                "norm.mean".into(),
                vec![width],
                bytes(&self.normalisation.mean),
            ),
            (
                "norm.std".into(),
                vec![width],
                bytes(&self.normalisation.std),
            ),
        ];
        for (i, layer) in self.layers.iter().enumerate() {
            let shape = vec![layer.bias.len(), layer.inputs];
            tensors.push((format!("layers.{i}.weight"), shape, bytes(&layer.weight)));
            tensors.push((
                format!("layers.{i}.bias"),
                vec![layer.bias.len()],
                bytes(&layer.bias),
            ));
        }
        let views = tensors
            .iter()
            .map(|(name, shape, data)| {
                Ok((
                    name.as_str(),
                    TensorView::new(Dtype::F32, shape.clone(), data)?,
                ))
            })
            .collect::<Result<Vec<_>, SafeTensorError>>()?;
        let features = if self.uses_hidden {
            "hidden+signals"
        } else {
            "signals"
        };
        let metadata = HashMap::from([
            ("tandem.features".to_owned(), features.to_owned()),
            ("tandem.edge_sha256".to_owned(), pair.edge_sha256.clone()),
            ("tandem.cloud".to_owned(), pair.cloud.clone()),
            (
                "tandem.calibration".to_owned(),
                serde_json::to_string(&self.calibration).expect("pairs of floats serialize"),
            ),
            // Which hidden state the router read: the final-norm output of the last layer.
            ("tandem.layer".to_owned(), "last".to_owned()),
            ("tandem.data".to_owned(), data.to_owned()),
            (
                "tandem.report".to_owned(),
                serde_json::to_string(&self.report).expect("the report serializes"),
            ),
        ]);
        let file = safetensors::serialize(views, &Some(metadata))?;
        std::fs::write(path, file).map_err(|source| SaveError::Write {
            path: path.to_owned(),
            source,
        })
    }
}

/// Trains a router on `set` and reports how it does on the examples it did not see.
pub fn train(
    set: &FeatureSet,
    options: &TrainOptions,
) -> Result<(TrainedRouter, TrainReport), TrainError> {
    let started = Instant::now();
    options.check()?;
    check_records(set, options.use_hidden)?;
    let mut rng = SeededRng::new(options.seed);
    let split = Split::by_example(&set.records, options.held_out_fraction, &mut rng)?;
    let positives = split.train.iter().filter(|r| r.label).count();
    if positives == 0 || positives == split.train.len() {
        return Err(TrainError::OneClassSplit {
            examples: split.train_examples,
            missing: if positives == 0 {
                "positive"
            } else {
                "negative"
            },
        });
    }
    let positive_weight = (split.train.len() - positives) as f32 / positives as f32;

    let width = set.header.hidden_size * usize::from(options.use_hidden) + 3;
    let mut train_inputs = raw_inputs(&split.train, options.use_hidden, width);
    let normalisation = Normalisation::fit(&train_inputs, width);
    normalisation.apply(&mut train_inputs);
    let mut held_out_inputs = raw_inputs(&split.held_out, options.use_hidden, width);
    normalisation.apply(&mut held_out_inputs);
    let device = Device::Cpu;
    let train_side = Side::new(train_inputs, &split.train, positive_weight, &device)?;
    let held_out_side = Side::new(held_out_inputs, &split.held_out, positive_weight, &device)?;

    let widths: Vec<usize> = std::iter::once(width)
        .chain(options.hidden_layers.iter().copied())
        .chain(std::iter::once(1))
        .collect();
    let mlp = Mlp::init(&widths, &mut rng, &device)?;
    let fit = fit(&mlp, &train_side, &held_out_side, options, &mut rng)?;

    let held_out_scores = held_out_side.scores(&mlp)?;
    let held_out_labels: Vec<bool> = split.held_out.iter().map(|r| r.label).collect();
    let held_out_positives = held_out_labels.iter().filter(|&&l| l).count();
    let report = TrainReport {
        epochs: fit.epochs,
        best_epoch: fit.best_epoch,
        train_loss: train_side.loss(&mlp)?.to_scalar()?,
        held_out_loss: fit.held_out_loss,
        held_out_auc: auc(&held_out_scores, &held_out_labels),
        held_out_positive_share: held_out_positives as f32 / split.held_out.len() as f32,
        train_examples: split.train_examples,
        held_out_examples: split.held_out_examples,
        train_records: split.train.len(),
        held_out_records: split.held_out.len(),
        seconds: started.elapsed().as_secs_f64(),
    };
    let router = TrainedRouter {
        uses_hidden: options.use_hidden,
        normalisation,
        layers: mlp.dense()?,
        calibration: calibrate(&held_out_scores, &CLOUD_SHARES),
        report: report.clone(),
    };
    Ok((router, report))
}

fn check_records(set: &FeatureSet, use_hidden: bool) -> Result<(), TrainError> {
    if set.records.is_empty() {
        return Err(TrainError::Empty);
    }
    let expected = set.header.hidden_size;
    for (index, r) in set.records.iter().enumerate() {
        if r.hidden.len() != expected {
            return Err(TrainError::HiddenWidth {
                index,
                example: r.example,
                position: r.position,
                found: r.hidden.len(),
                expected,
            });
        }
        let hidden_finite = !use_hidden || r.hidden.iter().all(|h| h.is_finite());
        if !hidden_finite || !r.signals.iter().all(|s| s.is_finite()) {
            return Err(TrainError::NonFinite {
                index,
                example: r.example,
                position: r.position,
            });
        }
    }
    let positives = set.records.iter().filter(|r| r.label).count();
    if positives == 0 {
        return Err(TrainError::NoPositives);
    }
    if positives == set.records.len() {
        return Err(TrainError::NoNegatives);
    }
    Ok(())
}

/// The records on each side, every example wholly on one side.
struct Split<'a> {
    train: Vec<&'a Record>,
    held_out: Vec<&'a Record>,
    train_examples: usize,
    held_out_examples: usize,
}

impl<'a> Split<'a> {
    fn by_example(
        records: &'a [Record],
        held_out_fraction: f64,
        rng: &mut SeededRng,
    ) -> Result<Self, TrainError> {
        let mut examples: Vec<u32> = records.iter().map(|r| r.example).collect();
        // Sorted first so that the split depends on the seed, not on the collection order.
        examples.sort_unstable();
        examples.dedup();
        if examples.len() < 2 {
            return Err(TrainError::TooFewExamples {
                examples: examples.len(),
            });
        }
        rng.shuffle(&mut examples);
        let held_out_examples = ((examples.len() as f64 * held_out_fraction).round() as usize)
            .clamp(1, examples.len() - 1);
        let held_out: HashSet<u32> = examples[..held_out_examples].iter().copied().collect();
        let (held_out_records, train): (Vec<&Record>, Vec<&Record>) =
            records.iter().partition(|r| held_out.contains(&r.example));
        Ok(Self {
            train,
            held_out: held_out_records,
            train_examples: examples.len() - held_out_examples,
            held_out_examples,
        })
    }
}

/// The router's input for one position, before normalisation: the hidden state (when
/// used) then the signals, padded or cut to `width` as the runtime does.
fn input(hidden: &[f32], signals: [f32; 3], use_hidden: bool, width: usize) -> Vec<f32> {
    let mut x = Vec::with_capacity(width);
    if use_hidden {
        x.extend_from_slice(hidden);
    }
    x.extend_from_slice(&signals);
    x.resize(width, 0.0);
    x
}

/// Row-major `[records, width]` inputs.
fn raw_inputs(records: &[&Record], use_hidden: bool, width: usize) -> Vec<f32> {
    records
        .iter()
        .flat_map(|r| input(&r.hidden, r.signals, use_hidden, width))
        .collect()
}

/// Per-input mean and standard deviation of the training split; inputs become
/// `(x - mean) / max(std, MIN_STD)`, in training and at run time alike.
#[derive(Debug, Clone)]
struct Normalisation {
    mean: Vec<f32>,
    std: Vec<f32>,
}

impl Normalisation {
    fn fit(rows: &[f32], width: usize) -> Self {
        let n = (rows.len() / width) as f64;
        let mut sum = vec![0f64; width];
        for row in rows.chunks_exact(width) {
            for (s, &x) in sum.iter_mut().zip(row) {
                *s += f64::from(x);
            }
        }
        let mean: Vec<f64> = sum.iter().map(|s| s / n).collect();
        let mut squares = vec![0f64; width];
        for row in rows.chunks_exact(width) {
            for ((s, &x), m) in squares.iter_mut().zip(row).zip(&mean) {
                *s += (f64::from(x) - m).powi(2);
            }
        }
        Self {
            mean: mean.iter().map(|&m| m as f32).collect(),
            std: squares.iter().map(|s| (s / n).sqrt() as f32).collect(),
        }
    }

    fn width(&self) -> usize {
        self.mean.len()
    }

    /// Normalises one row or many, row-major.
    fn apply(&self, rows: &mut [f32]) {
        for row in rows.chunks_exact_mut(self.width()) {
            for ((x, m), s) in row.iter_mut().zip(&self.mean).zip(&self.std) {
                *x = (*x - m) / s.max(MIN_STD);
            }
        }
    }
}

/// One side of the split as tensors: normalised inputs `[n, width]`, labels `[n, 1]` and
/// each record's loss weight `[n, 1]`.
struct Side {
    inputs: Tensor,
    labels: Tensor,
    weights: Tensor,
}

impl Side {
    fn new(
        inputs: Vec<f32>,
        records: &[&Record],
        positive_weight: f32,
        device: &Device,
    ) -> candle_core::Result<Self> {
        let n = records.len();
        let labels: Vec<f32> = records
            .iter()
            .map(|r| f32::from(u8::from(r.label)))
            .collect();
        let weights: Vec<f32> = records
            .iter()
            .map(|r| if r.label { positive_weight } else { 1.0 })
            .collect();
        Ok(Self {
            inputs: Tensor::from_vec(inputs, (n, ()), device)?,
            labels: Tensor::from_vec(labels, (n, 1), device)?,
            weights: Tensor::from_vec(weights, (n, 1), device)?,
        })
    }

    fn len(&self) -> usize {
        self.labels.dims()[0]
    }

    /// The rows at `indices`.
    fn select(&self, indices: &[u32]) -> candle_core::Result<Self> {
        let indices = Tensor::from_slice(indices, indices.len(), self.inputs.device())?;
        Ok(Self {
            inputs: self.inputs.index_select(&indices, 0)?,
            labels: self.labels.index_select(&indices, 0)?,
            weights: self.weights.index_select(&indices, 0)?,
        })
    }

    /// Mean class-weighted binary cross-entropy of `mlp` on these rows (a scalar tensor).
    fn loss(&self, mlp: &Mlp) -> candle_core::Result<Tensor> {
        let z = mlp.logits(&self.inputs)?;
        // -[y ln σ(z) + (1 - y) ln(1 - σ(z))] = softplus(z) - y z, with
        // softplus(z) = max(z, 0) + ln(1 + e^-|z|) so that large |z| cannot overflow.
        let softplus = (z.relu()? + z.abs()?.neg()?.exp()?.affine(1.0, 1.0)?.log()?)?;
        let per_record = (softplus - (&self.labels * &z)?)?;
        (per_record * &self.weights)?.mean_all()
    }

    fn scores(&self, mlp: &Mlp) -> candle_core::Result<Vec<f32>> {
        let z = mlp.logits(&self.inputs)?.flatten_all()?;
        let scores = (z.neg()?.exp()? + 1.0)?.recip()?;
        scores.to_vec1()
    }
}

/// The network being trained: `(weight [out, in], bias [out])` per layer.
struct Mlp {
    layers: Vec<(Var, Var)>,
}

impl Mlp {
    /// Uniform in ±1/√inputs per layer (PyTorch's `Linear` default), drawn from `rng`.
    fn init(widths: &[usize], rng: &mut SeededRng, device: &Device) -> candle_core::Result<Self> {
        let layers = widths
            .windows(2)
            .map(|w| {
                let (inputs, outputs) = (w[0], w[1]);
                let bound = 1.0 / (inputs as f64).sqrt();
                let mut uniform = |n: usize| -> Vec<f32> {
                    (0..n)
                        .map(|_| ((rng.unit() * 2.0 - 1.0) * bound) as f32)
                        .collect()
                };
                let weight = Var::from_vec(uniform(outputs * inputs), (outputs, inputs), device)?;
                let bias = Var::from_vec(uniform(outputs), outputs, device)?;
                Ok((weight, bias))
            })
            .collect::<candle_core::Result<_>>()?;
        Ok(Self { layers })
    }

    /// Pre-sigmoid outputs `[n, 1]` for inputs `[n, width]`.
    fn logits(&self, inputs: &Tensor) -> candle_core::Result<Tensor> {
        let mut x = inputs.clone();
        for (i, (weight, bias)) in self.layers.iter().enumerate() {
            x = x.matmul(&weight.as_tensor().t()?)?.broadcast_add(bias)?;
            if i + 1 < self.layers.len() {
                x = x.relu()?;
            }
        }
        Ok(x)
    }

    fn vars(&self) -> Vec<Var> {
        self.layers
            .iter()
            .flat_map(|(w, b)| [w.clone(), b.clone()])
            .collect()
    }

    /// A copy of the current weights (the optimiser updates the variables in place).
    fn snapshot(&self) -> candle_core::Result<Vec<Tensor>> {
        self.vars()
            .iter()
            .map(|v| v.as_detached_tensor().copy())
            .collect()
    }

    fn restore(&self, snapshot: &[Tensor]) -> candle_core::Result<()> {
        for (var, saved) in self.vars().iter().zip(snapshot) {
            var.set(saved)?;
        }
        Ok(())
    }

    fn dense(&self) -> candle_core::Result<Vec<Dense>> {
        self.layers
            .iter()
            .map(|(weight, bias)| {
                Ok(Dense {
                    weight: weight.flatten_all()?.to_vec1()?,
                    bias: bias.to_vec1()?,
                    inputs: weight.dims()[1],
                })
            })
            .collect()
    }
}

/// How the optimisation ended.
struct Fit {
    epochs: usize,
    best_epoch: usize,
    held_out_loss: f32,
}

/// Runs AdamW epochs until the held-out loss stops improving; leaves the best weights in
/// `mlp`.
fn fit(
    mlp: &Mlp,
    train: &Side,
    held_out: &Side,
    options: &TrainOptions,
    rng: &mut SeededRng,
) -> Result<Fit, TrainError> {
    let mut optimiser = AdamW::new(
        mlp.vars(),
        ParamsAdamW {
            lr: options.learning_rate,
            weight_decay: options.weight_decay,
            ..ParamsAdamW::default()
        },
    )?;
    let mut best = (0, held_out.loss(mlp)?.to_scalar::<f32>()?, mlp.snapshot()?);
    let mut order: Vec<u32> = (0..train.len() as u32).collect();
    let mut epochs = 0;
    while epochs < options.max_epochs && epochs - best.0 < options.patience {
        epochs += 1;
        rng.shuffle(&mut order);
        for batch in order.chunks(options.batch_size) {
            optimiser.backward_step(&train.select(batch)?.loss(mlp)?)?;
        }
        let loss = held_out.loss(mlp)?.to_scalar::<f32>()?;
        if loss < best.1 {
            best = (epochs, loss, mlp.snapshot()?);
        }
    }
    mlp.restore(&best.2)?;
    Ok(Fit {
        epochs,
        best_epoch: best.0,
        held_out_loss: best.1,
    })
}

/// Area under the ROC curve from ranks (ties count half); `None` without both classes.
fn auc(scores: &[f32], labels: &[bool]) -> Option<f32> {
    let positives = labels.iter().filter(|&&l| l).count();
    let negatives = labels.len() - positives;
    if positives == 0 || negatives == 0 {
        return None;
    }
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]));
    let mut positive_rank_sum = 0f64;
    let mut start = 0;
    while start < order.len() {
        let end = start
            + order[start..]
                .iter()
                .take_while(|&&i| scores[i] == scores[order[start]])
                .count();
        // Tied scores share the mean of 1-based ranks start+1 ..= end.
        let rank = (start + 1 + end) as f64 / 2.0;
        let tied_positives = order[start..end].iter().filter(|&&i| labels[i]).count();
        positive_rank_sum += rank * tied_positives as f64;
        start = end;
    }
    let p = positives as f64;
    Some(((positive_rank_sum - p * (p + 1.0) / 2.0) / (p * negatives as f64)) as f32)
}

/// The trainer's randomness: core's [`SplitMix64`], whose stream is fixed by its seed, so a
/// seed names one trained router forever.
struct SeededRng(SplitMix64);

impl SeededRng {
    fn new(seed: u64) -> Self {
        Self(SplitMix64::new(seed))
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        self.0.next_f64()
    }

    /// Fisher–Yates.
    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = (self.unit() * (i + 1) as f64) as usize;
            items.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::Header;
    use safetensors::SafeTensors;
    use std::sync::OnceLock;
    use tandem_core::router::{Features, MlpError, MlpRouter, Router};
    use tandem_core::signals::Signals;

    const POSITIONS: u16 = 10;

    fn pair() -> ModelPair {
        ModelPair {
            edge_sha256: "edge-hash".into(),
            cloud: "cloud-model".into(),
        }
    }

    /// Standard normal (Box–Muller).
    fn gaussian(rng: &mut SeededRng) -> f32 {
        let (u1, u2) = (1.0 - rng.unit(), rng.unit());
        ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32
    }

    /// `examples` × [`POSITIONS`] records: Gaussian hidden states, plausible signals
    /// (entropy in [0, 3) nats), labelled by `label`.
    fn synthetic(
        examples: u32,
        hidden_size: usize,
        seed: u64,
        label: fn(&[f32], [f32; 3]) -> bool,
    ) -> FeatureSet {
        let mut rng = SeededRng::new(seed);
        let mut records = Vec::new();
        for example in 0..examples {
            for position in 0..POSITIONS {
                let hidden: Vec<f32> = (0..hidden_size).map(|_| gaussian(&mut rng)).collect();
                let top1 = rng.unit() as f32;
                let signals = [top1, top1 * rng.unit() as f32, 3.0 * rng.unit() as f32];
                records.push(Record {
                    example,
                    position,
                    label: label(&hidden, signals),
                    edge_token: 1,
                    cloud_token: 2,
                    cloud_margin: f32::NAN,
                    signals,
                    hidden,
                });
            }
        }
        FeatureSet {
            header: Header::new("edge-hash", "edge", "cloud-model", hidden_size, "synthetic"),
            records,
        }
    }

    /// About a fifth positive; needs two hidden units and the entropy.
    fn mixed_label(hidden: &[f32], signals: [f32; 3]) -> bool {
        hidden[3] - hidden[7] + 0.5 * signals[2] > 2.0
    }

    fn entropy_label(_: &[f32], signals: [f32; 3]) -> bool {
        signals[2] > 2.4
    }

    fn quick() -> TrainOptions {
        TrainOptions {
            hidden_layers: vec![32],
            batch_size: 32,
            learning_rate: 3e-3,
            ..TrainOptions::default()
        }
    }

    /// One trained router on the mixed problem, shared by the tests that only read it.
    fn mixed() -> &'static (TrainedRouter, TrainReport) {
        static TRAINED: OnceLock<(TrainedRouter, TrainReport)> = OnceLock::new();
        TRAINED.get_or_init(|| train(&synthetic(50, 16, 1, mixed_label), &quick()).unwrap())
    }

    fn runtime_score(router: &MlpRouter, r: &Record) -> f32 {
        let [top1_prob, margin, entropy] = r.signals;
        router.score(&Features {
            signals: Signals {
                top1_prob,
                margin,
                entropy,
            },
            hidden: Some(&r.hidden),
            position: 0,
        })
    }

    /// The router as users get it: written to a file and loaded by the runtime.
    fn saved(router: &TrainedRouter) -> MlpRouter {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("router.safetensors");
        router.save(&path, &pair(), "synthetic").unwrap();
        MlpRouter::load(&path, Some(&pair())).unwrap()
    }

    /// The runtime forward pass agrees with candle's: every threshold of the calibration
    /// table is a held-out score candle computed, so the loaded router must score some
    /// held-out position (the same split, drawn again from the seed) at that value.
    fn assert_scores_match_training(loaded: &MlpRouter, set: &FeatureSet, options: &TrainOptions) {
        let split = Split::by_example(
            &set.records,
            options.held_out_fraction,
            &mut SeededRng::new(options.seed),
        )
        .unwrap();
        let runtime: Vec<f32> = split
            .held_out
            .iter()
            .map(|r| runtime_score(loaded, r))
            .collect();
        for share in CLOUD_SHARES {
            let threshold = loaded.threshold_for_share(share);
            let nearest = runtime
                .iter()
                .map(|s| (s - threshold).abs())
                .fold(f32::INFINITY, f32::min);
            assert!(
                nearest < 1e-5,
                "share {share}: threshold {threshold} is {nearest} away"
            );
        }
    }

    fn metadata(path: &Path) -> HashMap<String, String> {
        let bytes = std::fs::read(path).unwrap();
        let (_, header) = SafeTensors::read_metadata(&bytes).unwrap();
        header.metadata().clone().unwrap()
    }

    #[test]
    fn learns_a_separable_problem_from_hidden_state_and_signals() {
        let (_, report) = mixed();
        let auc = report.held_out_auc.unwrap();
        assert!(auc > 0.95, "{report:?}");
        assert!(report.best_epoch > 0 && report.best_epoch <= report.epochs);
        assert_eq!((report.train_examples, report.held_out_examples), (40, 10));
        assert_eq!(report.train_records + report.held_out_records, 500);
        assert!((0.05..0.4).contains(&report.held_out_positive_share));
    }

    #[test]
    fn the_split_keeps_each_example_on_one_side() {
        let set = synthetic(30, 8, 2, mixed_label);
        let split = Split::by_example(&set.records, 0.2, &mut SeededRng::new(7)).unwrap();
        let train: HashSet<u32> = split.train.iter().map(|r| r.example).collect();
        let held_out: HashSet<u32> = split.held_out.iter().map(|r| r.example).collect();
        assert!(train.is_disjoint(&held_out));
        assert_eq!((train.len(), held_out.len()), (24, 6));
        // The same seed draws the same split whatever order the records come in.
        let mut reversed = set.records.clone();
        reversed.reverse();
        let again = Split::by_example(&reversed, 0.2, &mut SeededRng::new(7)).unwrap();
        let again: HashSet<u32> = again.held_out.iter().map(|r| r.example).collect();
        assert_eq!(again, held_out);
    }

    #[test]
    fn the_saved_file_scores_like_the_trained_router_and_belongs_to_its_pair() {
        let (router, report) = mixed();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("router.safetensors");
        router.save(&path, &pair(), "synthetic:train").unwrap();

        let loaded = MlpRouter::load(&path, Some(&pair())).unwrap();
        assert!(loaded.needs_hidden_state());
        assert_scores_match_training(&loaded, &synthetic(50, 16, 1, mixed_label), &quick());

        let meta = metadata(&path);
        assert_eq!(meta["tandem.features"], "hidden+signals");
        assert_eq!(meta["tandem.layer"], "last");
        assert_eq!(meta["tandem.data"], "synthetic:train");
        let saved: TrainReport = serde_json::from_str(&meta["tandem.report"]).unwrap();
        assert_eq!(&saved, report);

        let other = ModelPair {
            edge_sha256: "another-edge".into(),
            ..pair()
        };
        assert!(matches!(
            MlpRouter::load(&path, Some(&other)),
            Err(MlpError::WrongPair { .. })
        ));
    }

    #[test]
    fn calibrated_thresholds_route_the_asked_share_of_unseen_positions() {
        let options = TrainOptions {
            held_out_fraction: 0.5,
            ..quick()
        };
        let (router, _) = train(&synthetic(400, 16, 4, mixed_label), &options).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("router.safetensors");
        router.save(&path, &pair(), "synthetic").unwrap();
        let loaded = MlpRouter::load(&path, Some(&pair())).unwrap();

        let fresh = synthetic(400, 16, 5, mixed_label);
        let scores: Vec<f32> = fresh
            .records
            .iter()
            .map(|r| runtime_score(&loaded, r))
            .collect();
        for share in [0.05, 0.1, 0.2] {
            let threshold = loaded.threshold_for_share(share);
            let routed = scores.iter().filter(|&&s| s >= threshold).count();
            let routed = routed as f32 / scores.len() as f32;
            assert!((routed - share).abs() <= 0.03, "share {share}: {routed}");
        }
    }

    #[test]
    fn a_signals_only_router_needs_no_hidden_state() {
        let options = TrainOptions {
            use_hidden: false,
            ..quick()
        };
        let set = synthetic(50, 16, 6, entropy_label);
        let (router, report) = train(&set, &options).unwrap();
        assert!(report.held_out_auc.unwrap() > 0.95, "{report:?}");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("router.safetensors");
        router.save(&path, &pair(), "synthetic").unwrap();
        assert_eq!(metadata(&path)["tandem.features"], "signals");

        let loaded = MlpRouter::load(&path, Some(&pair())).unwrap();
        assert!(!loaded.needs_hidden_state());
        let signals = Signals {
            top1_prob: 0.4,
            margin: 0.1,
            entropy: 2.0,
        };
        let without = loaded.score(&Features {
            signals,
            hidden: None,
            position: 0,
        });
        let with = loaded.score(&Features {
            signals,
            hidden: Some(&[9.0; 16]),
            position: 0,
        });
        assert_eq!(without, with);
        assert_scores_match_training(&loaded, &set, &options);
    }

    #[test]
    fn the_same_seed_trains_the_same_router() {
        let set = synthetic(20, 8, 8, mixed_label);
        let run = |seed| {
            let options = TrainOptions { seed, ..quick() };
            let (router, _) = train(&set, &options).unwrap();
            let loaded = saved(&router);
            set.records
                .iter()
                .map(|r| runtime_score(&loaded, r))
                .collect::<Vec<f32>>()
        };
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
    }

    #[test]
    fn a_set_without_positives_is_refused() {
        let set = synthetic(10, 4, 9, |_, _| false);
        let err = train(&set, &quick()).err().unwrap();
        assert!(matches!(err, TrainError::NoPositives), "{err}");
        assert!(err.to_string().contains("no positive records"), "{err}");
    }

    #[test]
    fn unusable_sets_are_refused_with_the_reason() {
        let mut set = synthetic(10, 8, 10, mixed_label);
        // Both classes in the first example, so that a set of it alone fails for its size.
        set.records[0].label = true;
        set.records[1].label = false;
        set.records[12].hidden.pop();
        let err = train(&set, &quick()).err().unwrap().to_string();
        assert!(
            err.contains("record 12") && err.contains("width 7"),
            "{err}"
        );

        let empty = FeatureSet {
            records: Vec::new(),
            ..set.clone()
        };
        assert!(matches!(train(&empty, &quick()), Err(TrainError::Empty)));

        let one_example = FeatureSet {
            records: set.records[..POSITIONS as usize].to_vec(),
            ..set.clone()
        };
        assert!(matches!(
            train(&one_example, &quick()),
            Err(TrainError::TooFewExamples { examples: 1 })
        ));

        let no_hold_out = TrainOptions {
            held_out_fraction: 0.0,
            ..quick()
        };
        assert!(matches!(
            train(&set, &no_hold_out),
            Err(TrainError::Options(_))
        ));
    }

    #[test]
    fn auc_counts_ties_as_half() {
        let labels = [false, true, false, true];
        assert_eq!(auc(&[0.1, 0.9, 0.2, 0.8], &labels), Some(1.0));
        assert_eq!(auc(&[0.9, 0.1, 0.8, 0.2], &labels), Some(0.0));
        assert_eq!(auc(&[0.5; 4], &labels), Some(0.5));
        assert_eq!(auc(&[0.1, 0.2], &[true, true]), None);
    }
}
