//! Training the MLP router from collected features.
//!
//! The router learns to predict, from what the edge model saw at a position (its final-norm
//! hidden state and its confidence signals), whether the cloud should take the token there:
//! the labels of [`crate::labels`], "the edge's token would change the answer". Everything
//! random — the split, the initial weights, the batch order — comes from
//! [`TrainOptions::seed`], so a run can be reproduced and two runs compared.
//!
//! One job per module: `split` checks the records and holds out whole examples, `inputs`
//! lays them out and normalises them as the runtime does, `model` is the network, `fit`
//! runs the optimiser with early stopping on the held-out loss, and `metrics` measures the
//! kept router. The held-out scores also give the calibration table
//! ([`crate::calibration`]). [`TrainedRouter::save`] writes a
//! [`RouterFile`], the format [`tandem_core::router::MlpRouter`] reads.

mod error;
mod fit;
mod inputs;
mod metrics;
mod model;
mod options;
mod rng;
mod split;
#[cfg(test)]
mod tests;

pub use error::TrainError;
pub use metrics::ReplyHits;
pub use options::TrainOptions;

use crate::calibration::{calibrate, CLOUD_SHARES};
use crate::features::FeatureSet;
use candle_core::Device;
use fit::Side;
use inputs::Inputs;
use model::Mlp;
use rng::SeededRng;
use serde::{Deserialize, Serialize};
use split::Split;
use std::path::Path;
use std::time::Instant;
use tandem_core::router::file::{FeatureLayout, Layer, Normalisation, RouterFile, WriteError};
use tandem_core::router::{MlpRouter, ModelPair};

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
    /// Held-out replies whose first critical position the app's budget controller routes at
    /// a per-reply share with this router's scores, beside margin and entropy on the same
    /// replies.
    pub held_out_reply_hits: Vec<metrics::ReplyHits>,
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

/// A trained router: the kept weights, their normalisation and their calibration table.
#[derive(Debug, Clone)]
pub struct TrainedRouter {
    features: FeatureLayout,
    normalisation: Normalisation,
    layers: Vec<Layer>,
    /// `(share, threshold)`, shares ascending.
    calibration: Vec<(f32, f32)>,
    report: TrainReport,
}

impl TrainedRouter {
    /// Writes the router for `pair` to `path`; `data` names what it was trained on.
    pub fn save(&self, path: &Path, pair: &ModelPair, data: &str) -> Result<(), WriteError> {
        RouterFile {
            features: self.features,
            pair: pair.clone(),
            normalisation: self.normalisation.clone(),
            layers: self.layers.clone(),
            calibration: self.calibration.clone(),
            data: Some(data.to_owned()),
            report: Some(serde_json::to_string(&self.report).expect("the report serializes")),
        }
        .write(path)
    }
}

/// Trains a router on `set` and reports how it does on the examples it did not see.
pub fn train(
    set: &FeatureSet,
    options: &TrainOptions,
) -> Result<(TrainedRouter, TrainReport), TrainError> {
    let started = Instant::now();
    options.check()?;
    split::check_records(set, options.features.uses_hidden())?;
    let mut rng = SeededRng::new(options.seed);
    let split = Split::by_example(&set.records, options.held_out_fraction, &mut rng)?;
    let positive_weight = split.positive_weight()?;

    let features = options.features;
    let width = features.width(set.header.hidden_size);
    let Inputs {
        normalisation,
        train,
        held_out,
    } = Inputs::new(&split, features, width);
    let device = Device::Cpu;
    let train_side = Side::new(train, &split.train, positive_weight, &device)?;
    let held_out_side = Side::new(held_out, &split.held_out, positive_weight, &device)?;

    let widths: Vec<usize> = std::iter::once(width)
        .chain(options.hidden_layers.iter().copied())
        .chain(std::iter::once(1))
        .collect();
    let mlp = Mlp::init(&widths, &mut rng, &device)?;
    let fit = fit::fit(&mlp, &train_side, &held_out_side, options, &mut rng)?;

    let held_out_scores = held_out_side.scores(&mlp)?;
    let held_out_labels: Vec<bool> = split.held_out.iter().map(|r| r.label).collect();
    let held_out_positives = held_out_labels.iter().filter(|&&l| l).count();
    let layers = mlp.layers()?;
    let calibration = calibrate(&held_out_scores, &CLOUD_SHARES);
    // Measured as the app will run it: the runtime's router over the same weights and table.
    let runtime = MlpRouter::new(RouterFile {
        features,
        pair: ModelPair {
            edge_sha256: set.header.edge_sha256.clone(),
            cloud: set.header.cloud.clone(),
        },
        normalisation: normalisation.clone(),
        layers: layers.clone(),
        calibration: calibration.clone(),
        data: None,
        report: None,
    });
    let report = TrainReport {
        epochs: fit.epochs,
        best_epoch: fit.best_epoch,
        train_loss: train_side.loss(&mlp)?.to_scalar()?,
        held_out_loss: fit.held_out_loss,
        held_out_auc: metrics::auc(&held_out_scores, &held_out_labels),
        held_out_positive_share: held_out_positives as f32 / split.held_out.len() as f32,
        held_out_reply_hits: metrics::reply_hits(&split.held_out, &runtime),
        train_examples: split.train_examples,
        held_out_examples: split.held_out_examples,
        train_records: split.train.len(),
        held_out_records: split.held_out.len(),
        seconds: started.elapsed().as_secs_f64(),
    };
    let router = TrainedRouter {
        features,
        normalisation,
        layers,
        calibration,
        report: report.clone(),
    };
    Ok((router, report))
}
