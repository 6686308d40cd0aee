//! Router training and evaluation: everything that measures or improves the router and is
//! not needed to chat, so the app and the CLI's chat do not carry an ML framework.
//!
//! [`features`] is the compact file that label collection writes and training reads, so
//! training reruns without the cloud.

pub mod calibration;
pub mod chart;
pub mod data;
pub mod eval;
pub mod features;
pub mod judge;
pub mod labels;
pub mod quality;
pub mod stats;
pub mod task;
#[cfg(feature = "train")]
pub mod train;
