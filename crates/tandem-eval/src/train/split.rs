//! The data a router learns from: the feature set checked record by record, then split
//! by example into a training side and a held-out side.
//!
//! Positions of one example share a prompt and a reply, so they are alike: the split keeps
//! every example on one side, or the held-out numbers would be measured on near-copies of
//! training positions and flatter the router.

use super::rng::SeededRng;
use super::TrainError;
use crate::features::{FeatureSet, Record};
use std::collections::HashSet;

/// Refuses a set the trainer cannot learn from: empty, one class only, or a record whose
/// hidden state does not fit the header or whose inputs are not finite.
pub(super) fn check_records(set: &FeatureSet, use_hidden: bool) -> Result<(), TrainError> {
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
pub(super) struct Split<'a> {
    pub(super) train: Vec<&'a Record>,
    pub(super) held_out: Vec<&'a Record>,
    pub(super) train_examples: usize,
    pub(super) held_out_examples: usize,
}

impl<'a> Split<'a> {
    /// Holds out `held_out_fraction` of the examples (at least one, never all), drawn from
    /// `rng`.
    pub(super) fn by_example(
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

    /// The loss weight of a positive, negatives/positives on the training side, so that both
    /// classes weigh the same: positives are a few per cent, and an unweighted router would
    /// learn to say "edge is fine" everywhere. Refused when the training side lacks a class.
    pub(super) fn positive_weight(&self) -> Result<f32, TrainError> {
        let positives = self.train.iter().filter(|r| r.label).count();
        if positives == 0 || positives == self.train.len() {
            return Err(TrainError::OneClassSplit {
                examples: self.train_examples,
                missing: if positives == 0 {
                    "positive"
                } else {
                    "negative"
                },
            });
        }
        Ok((self.train.len() - positives) as f32 / positives as f32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::tests::{mixed_label, synthetic};

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
}
