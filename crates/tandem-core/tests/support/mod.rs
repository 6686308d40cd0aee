//! Shared by the integration tests: the real test models, llama-server, a routed reply.
//!
//! Real-model tests are opt-in: they need `TANDEM_TEST_MODELS` (set by `scripts/test.sh`
//! after pulling the models). Without it they print why and pass, so `cargo test` works on a
//! machine without the models; CI always sets it.

// Each test binary uses a different part of this module.
#![allow(dead_code, unused_imports)]

pub mod engine;

use tandem_core::local::{EdgeWeights, LocalOptions};
pub use tandem_test_peers::{model, LlamaServer, SMOLLM2, TINY};

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

/// One routed reply to `prompt` with a fixed budget; `on_event` sees every event.
pub fn route(
    edge: &mut dyn tandem_core::edge::EdgeModel,
    cloud: &mut dyn tandem_core::cloud::Cloud,
    router: &dyn tandem_core::router::Router,
    budget: tandem_core::budget::CloudBudget,
    prompt: &[i32],
    max_tokens: u32,
    on_event: &mut dyn FnMut(tandem_core::event::Event),
) -> tandem_core::event::Usage {
    use tandem_core::decode::{generate, Collaboration, DecodeOptions};
    let live = tandem_core::budget::LiveBudget::new(budget);
    let collaboration = Collaboration {
        edge,
        cloud: Some(cloud),
        router,
        budget: &live,
        messages: &[],
        spend: None,
    };
    let options = DecodeOptions {
        max_tokens,
        ..DecodeOptions::default()
    };
    generate(collaboration, prompt, &options, &mut |e| {
        on_event(e);
        true
    })
    .expect("the edge model decodes")
}
