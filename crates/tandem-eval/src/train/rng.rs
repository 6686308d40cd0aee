//! The trainer's randomness: core's [`SplitMix64`], whose stream is fixed by its seed, so a
//! seed names one trained router forever.

use tandem_core::sampling::SplitMix64;

/// One stream serves the split, the initial weights and the batch order, in that order.
pub(super) struct SeededRng(SplitMix64);

impl SeededRng {
    pub(super) fn new(seed: u64) -> Self {
        Self(SplitMix64::new(seed))
    }

    /// Uniform in `[0, 1)`.
    pub(super) fn unit(&mut self) -> f64 {
        self.0.next_f64()
    }

    /// Fisher–Yates.
    pub(super) fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = (self.unit() * (i + 1) as f64) as usize;
            items.swap(i, j);
        }
    }
}
