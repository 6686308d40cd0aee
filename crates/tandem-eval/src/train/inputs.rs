//! The network's inputs: each record laid out as the runtime lays out a position
//! ([`FeatureLayout::input`]), then scaled by the training side's means and spreads
//! ([`Normalisation`]), so that training and run time feed the network the same numbers.

use super::split::Split;
use crate::features::Record;
use tandem_core::router::file::{FeatureLayout, Normalisation};

/// Both sides' normalised inputs, row-major `[records, width]`, and the normalisation fitted
/// on the training side (the held-out side must not leak into it).
pub(super) struct Inputs {
    pub(super) normalisation: Normalisation,
    pub(super) train: Vec<f32>,
    pub(super) held_out: Vec<f32>,
}

impl Inputs {
    pub(super) fn new(split: &Split<'_>, features: FeatureLayout, width: usize) -> Self {
        let mut train = raw(&split.train, features, width);
        let normalisation = fit(&train, width);
        let mut held_out = raw(&split.held_out, features, width);
        for row in train
            .chunks_exact_mut(width)
            .chain(held_out.chunks_exact_mut(width))
        {
            normalisation.apply(row);
        }
        Self {
            normalisation,
            train,
            held_out,
        }
    }
}

/// Row-major `[records, width]` inputs before normalisation.
fn raw(records: &[&Record], features: FeatureLayout, width: usize) -> Vec<f32> {
    records
        .iter()
        .flat_map(|r| features.input(&r.hidden, r.signals, u32::from(r.position), width))
        .collect()
}

/// Per-input mean and (population) standard deviation of row-major `rows`.
fn fit(rows: &[f32], width: usize) -> Normalisation {
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
    Normalisation {
        mean: mean.iter().map(|&m| m as f32).collect(),
        std: squares.iter().map(|s| (s / n).sqrt() as f32).collect(),
    }
}
