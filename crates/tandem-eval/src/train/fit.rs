//! The fit loop: AdamW on the class-weighted binary cross-entropy, one pass over the
//! shuffled training side per epoch, until the held-out loss has not improved for
//! [`TrainOptions::patience`] epochs; the best epoch's weights are kept (early stopping).

use super::model::Mlp;
use super::rng::SeededRng;
use super::{TrainError, TrainOptions};
use crate::features::Record;
use candle_core::{Device, Tensor};
use candle_nn::{AdamW, Optimizer, ParamsAdamW};

/// One side of the split as tensors: normalised inputs `[n, width]`, labels `[n, 1]` and
/// each record's loss weight `[n, 1]`.
pub(super) struct Side {
    inputs: Tensor,
    labels: Tensor,
    weights: Tensor,
}

impl Side {
    pub(super) fn new(
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
    pub(super) fn loss(&self, mlp: &Mlp) -> candle_core::Result<Tensor> {
        let z = mlp.logits(&self.inputs)?;
        // -[y ln σ(z) + (1 - y) ln(1 - σ(z))] = softplus(z) - y z, with
        // softplus(z) = max(z, 0) + ln(1 + e^-|z|) so that large |z| cannot overflow.
        let softplus = (z.relu()? + z.abs()?.neg()?.exp()?.affine(1.0, 1.0)?.log()?)?;
        let per_record = (softplus - (&self.labels * &z)?)?;
        (per_record * &self.weights)?.mean_all()
    }

    pub(super) fn scores(&self, mlp: &Mlp) -> candle_core::Result<Vec<f32>> {
        let z = mlp.logits(&self.inputs)?.flatten_all()?;
        let scores = (z.neg()?.exp()? + 1.0)?.recip()?;
        scores.to_vec1()
    }
}

/// How the optimisation ended.
pub(super) struct Fit {
    pub(super) epochs: usize,
    pub(super) best_epoch: usize,
    pub(super) held_out_loss: f32,
}

/// Runs AdamW epochs until the held-out loss stops improving; leaves the best weights in
/// `mlp`.
pub(super) fn fit(
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
