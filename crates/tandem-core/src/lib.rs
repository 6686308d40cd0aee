//! Tandem's engine: token-level routed decoding between a small local (edge) model and a
//! large OpenAI-compatible (cloud) model.
//!
//! The edge model decodes every token; for each position a [`router`] scores how much the
//! token matters, the [`budget`] decides whether the cloud may supply it, and [`decode`]
//! feeds cloud tokens back into the edge's KV cache so generation continues from exactly
//! the text the user sees. Everything a generation does is reported as [`event::Event`]s.
//!
//! ```no_run
//! use tandem_core::budget::{CloudBudget, LiveBudget};
//! use tandem_core::decode::{generate, Collaboration, DecodeOptions};
//! use tandem_core::edge::EdgeModel;
//! use tandem_core::event::Event;
//! use tandem_core::local::{EdgeWeights, LocalOptions};
//! use tandem_core::message::Message;
//! use tandem_core::router::EntropyRouter;
//!
//! let weights = EdgeWeights::load("qwen.gguf".as_ref(), "qwen")?;
//! let mut edge = weights.session(&LocalOptions::default())?;
//! let prompt = edge.tokenize(&weights.chat_prompt(&[Message::user("Why is the sky blue?")])?, true);
//! let budget = LiveBudget::new(CloudBudget::off());
//! let collaboration = Collaboration {
//!     edge: &mut edge, cloud: None, router: &EntropyRouter, budget: &budget, messages: &[],
//!     spend: None,
//! };
//! generate(collaboration, &prompt, &DecodeOptions::default(), &mut |e: Event| {
//!     if let Event::Token { text, .. } = e { print!("{text}") }
//!     true
//! })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod atomic;
pub mod budget;
pub mod chat_settings;
pub mod cloud;
pub mod config;
#[cfg(test)]
mod damage;
pub mod decode;
pub mod edge;
pub mod endpoint;
pub mod engine;
pub mod engine_thread;
pub mod event;
pub mod history;
pub mod local;
pub mod message;
pub mod models;
pub mod packages;
pub mod paths;
pub mod router;
pub mod sampling;
pub mod secrets;
pub mod signals;
pub mod spend;
pub mod startup;
pub mod utf8_stream;
pub mod window;
