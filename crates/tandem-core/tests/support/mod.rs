//! Shared by the integration tests: where the real test models are.
//!
//! Real-model tests are opt-in: they need `TANDEM_TEST_MODELS` (set by `scripts/test.sh`
//! after pulling the models). Without it they print why and pass, so `cargo test` works on a
//! machine without the models; CI always sets it.

#![allow(dead_code)]

use std::path::PathBuf;
use tandem_core::local::{EdgeWeights, LocalOptions};

/// The path of a test model, or `None` (with a message) when real-model tests are off.
pub fn model(file: &str) -> Option<PathBuf> {
    let Some(dir) = std::env::var_os("TANDEM_TEST_MODELS") else {
        eprintln!("skipped: set TANDEM_TEST_MODELS to run real-model tests (scripts/test.sh does)");
        return None;
    };
    let path = PathBuf::from(dir).join(file);
    assert!(
        path.is_file(),
        "TANDEM_TEST_MODELS is set but {} is missing",
        path.display()
    );
    Some(path)
}

pub const SMOLLM2: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
pub const TINY: &str = "tiny.gguf";

/// Loads a test model by file name.
pub fn load(file: &str) -> Option<EdgeWeights> {
    let path = model(file)?;
    Some(EdgeWeights::load(&path, file).expect("test model loads"))
}

/// Options for tests: small context, the thread count CI asks for.
pub fn options() -> LocalOptions {
    LocalOptions {
        n_ctx: 1024,
        threads: std::env::var("TANDEM_TEST_THREADS")
            .ok()
            .and_then(|t| t.parse().ok())
            .unwrap_or(1),
        hidden_state: false,
    }
}
