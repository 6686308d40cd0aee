//! llama.cpp's `llama-server` as the reference for raw decode speed.

use anyhow::{bail, Context, Result};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running llama-server on a free port of 127.0.0.1; killed on drop.
pub struct LlamaServer {
    child: Child,
    url: String,
}

impl LlamaServer {
    /// Starts it with the given model and thread count and waits until it is healthy.
    pub fn start(binary: &Path, model: &Path, threads: u32) -> Result<LlamaServer> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let child = Command::new(binary)
            .args([
                "--host",
                "127.0.0.1",
                "--port",
                &port.to_string(),
                "-c",
                "2048",
            ])
            .args([
                "-t",
                &threads.to_string(),
                "-tb",
                &threads.to_string(),
                "-m",
            ])
            .arg(model)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let server = LlamaServer {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        for _ in 0..600 {
            if reqwest::blocking::get(format!("{}/health", server.url))
                .is_ok_and(|r| r.status().is_success())
            {
                return Ok(server);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        bail!("llama-server did not become healthy")
    }

    /// Decode tokens per second that llama-server itself reports for a greedy completion.
    pub fn decode_tps(&self, prompt: &[i32], tokens: u32) -> Result<f64> {
        let body = serde_json::json!({
            "prompt": prompt, "max_tokens": tokens, "temperature": 0,
            "ignore_eos": true, "cache_prompt": false,
        });
        let reply: serde_json::Value = reqwest::blocking::Client::new()
            .post(format!("{}/v1/completions", self.url))
            .timeout(Duration::from_secs(600))
            .json(&body)
            .send()?
            .json()?;
        reply["timings"]["predicted_per_second"]
            .as_f64()
            .context("llama-server reported no timings")
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
