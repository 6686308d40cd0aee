//! The network being trained, in candle: fully connected layers with ReLU between them and
//! one output, whose sigmoid is the router's score. Initialised from the run's seed and
//! handed over as the [`Layer`]s a router file holds.

use super::rng::SeededRng;
use candle_core::{Device, Tensor, Var};
use tandem_core::router::file::Layer;

/// The network being trained: `(weight [out, in], bias [out])` per layer.
pub(super) struct Mlp {
    layers: Vec<(Var, Var)>,
}

impl Mlp {
    /// Uniform in ±1/√inputs per layer (PyTorch's `Linear` default), drawn from `rng`.
    pub(super) fn init(
        widths: &[usize],
        rng: &mut SeededRng,
        device: &Device,
    ) -> candle_core::Result<Self> {
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
    pub(super) fn logits(&self, inputs: &Tensor) -> candle_core::Result<Tensor> {
        let mut x = inputs.clone();
        for (i, (weight, bias)) in self.layers.iter().enumerate() {
            x = x.matmul(&weight.as_tensor().t()?)?.broadcast_add(bias)?;
            if i + 1 < self.layers.len() {
                x = x.relu()?;
            }
        }
        Ok(x)
    }

    pub(super) fn vars(&self) -> Vec<Var> {
        self.layers
            .iter()
            .flat_map(|(w, b)| [w.clone(), b.clone()])
            .collect()
    }

    /// A copy of the current weights (the optimiser updates the variables in place).
    pub(super) fn snapshot(&self) -> candle_core::Result<Vec<Tensor>> {
        self.vars()
            .iter()
            .map(|v| v.as_detached_tensor().copy())
            .collect()
    }

    pub(super) fn restore(&self, snapshot: &[Tensor]) -> candle_core::Result<()> {
        for (var, saved) in self.vars().iter().zip(snapshot) {
            var.set(saved)?;
        }
        Ok(())
    }

    /// The trained weights, as a router file holds them.
    pub(super) fn layers(&self) -> candle_core::Result<Vec<Layer>> {
        self.layers
            .iter()
            .map(|(weight, bias)| {
                Ok(Layer {
                    weight: weight.flatten_all()?.to_vec1()?,
                    bias: bias.to_vec1()?,
                    inputs: weight.dims()[1],
                })
            })
            .collect()
    }
}
