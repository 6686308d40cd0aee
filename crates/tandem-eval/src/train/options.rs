//! How to train: the knobs of a run, checked before any work starts.

use super::TrainError;
use tandem_core::router::file::FeatureLayout;

/// How to train.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainOptions {
    /// Widths of the hidden layers, input side first; empty trains a logistic regression.
    pub hidden_layers: Vec<usize>,
    /// What the router reads: with the hidden state, or the signals alone (with or without
    /// the position), which needs no hidden state at run time (a faster prefill) but sees
    /// less.
    pub features: FeatureLayout,
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
            features: FeatureLayout::HiddenAndSignals,
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
    pub(super) fn check(&self) -> Result<(), TrainError> {
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
