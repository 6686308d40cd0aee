//! The real peers the project's tests run against, beside the scripted fake cloud
//! (`tandem-fake-cloud`): real GGUF files (opt in through `TANDEM_TEST_MODELS`) and llama.cpp's
//! own `llama-server` as the independent OpenAI-compatible server (through
//! `TANDEM_LLAMA_SERVER`). Both are set by `scripts/test.sh`; without them the tests that
//! need them print why and pass, so `cargo test` works on a machine without the models.

use std::path::PathBuf;

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

/// SmolLM2-135M-Instruct (Q4_1): a small real chat model.
pub const SMOLLM2: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// A ~1M-parameter GGUF that writes gibberish, fast.
pub const TINY: &str = "tiny.gguf";

/// llama.cpp's own `llama-server`, started on a free port of 127.0.0.1 and stopped on drop.
/// It runs one slot (`-np 1`): with its default four, a request answered after two had run
/// side by side (a request asked ahead beside the one the reply waits for) read logits up to
/// 0.1 nats from the same request's on an idle server, enough to turn a near tie and fail a
/// test of exact answers now and then (`docs/routing.md`, asking ahead).
pub struct LlamaServer {
    child: std::process::Child,
    /// `http://127.0.0.1:PORT/v1`.
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
                "-np",
                "1",
                "--metrics",
                "-m",
            ])
            .arg(model)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("llama-server starts");
        let mut server = LlamaServer {
            child,
            base_url: format!("http://127.0.0.1:{port}/v1"),
        };
        let health = format!("http://127.0.0.1:{port}/health");
        for _ in 0..300 {
            if reqwest::blocking::get(&health).is_ok_and(|r| r.status().is_success()) {
                return Some(server);
            }
            // A server that died (a crash while loading the model) is said to have, not
            // waited on for half a minute.
            if let Ok(Some(status)) = server.child.try_wait() {
                panic!("llama-server exited while starting ({status}); run it by hand on {model:?} to see why");
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
