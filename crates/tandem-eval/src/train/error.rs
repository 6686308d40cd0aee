//! Why a router cannot be trained: unusable options, unusable feature sets, and failures of
//! the tensor library.

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
