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

/// llama.cpp's own `llama-server`, started on a free port of 127.0.0.1 and stopped on drop.
pub struct LlamaServer {
    child: std::process::Child,
    pub base_url: String,
}

impl LlamaServer {
    /// Starts the binary named by `TANDEM_LLAMA_SERVER` (set by `scripts/test.sh`) serving
    /// `model`; `None` (with a message) when that variable is unset.
    pub fn start(model: &std::path::Path) -> Option<LlamaServer> {
        let Some(binary) = std::env::var_os("TANDEM_LLAMA_SERVER") else {
            eprintln!(
                "skipped: set TANDEM_LLAMA_SERVER to run llama-server tests (scripts/test.sh does)"
            );
            return None;
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = std::process::Command::new(binary)
            .args([
                "--host",
                "127.0.0.1",
                "--port",
                &port.to_string(),
                "-t",
                "1",
                "-c",
                "2048",
                "--metrics",
                "-m",
            ])
            .arg(model)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("llama-server starts");
        let server = LlamaServer {
            child,
            base_url: format!("http://127.0.0.1:{port}/v1"),
        };
        let health = format!("http://127.0.0.1:{port}/health");
        for _ in 0..300 {
            if reqwest::blocking::get(&health).is_ok_and(|r| r.status().is_success()) {
                return Some(server);
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("llama-server did not become healthy on port {port}");
    }

    /// A Prometheus counter from `/metrics`.
    pub fn metric(&self, name: &str) -> f64 {
        let root = self.base_url.trim_end_matches("/v1");
        let text = reqwest::blocking::get(format!("{root}/metrics"))
            .unwrap()
            .text()
            .unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no metric {name} in {text}"))
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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
