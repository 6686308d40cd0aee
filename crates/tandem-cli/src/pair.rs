//! The edge/cloud pair that `train-router` and `eval` measure: the edge model loaded with
//! hidden states, and the cloud at `--cloud` (or the local stand-in when none is given),
//! with the identity a router file records for it.

use anyhow::{Context, Result};
use std::time::Duration;
use tandem_core::cloud::{CloudClient, CloudConfig};
use tandem_core::config::Config;
use tandem_core::local::{default_threads, EdgeWeights, LocalModel, LocalOptions};
use tandem_core::models;
use tandem_core::paths::Paths;
use tandem_core::router::ModelPair;
use tandem_core::secrets;
use tandem_serve::stand_in;
use tandem_serve::Running;

/// Flags naming the pair.
#[derive(clap::Args, Debug, Clone)]
pub struct PairArgs {
    /// Edge model: catalogue name or GGUF path.
    #[arg(long, default_value = "qwen2.5-coder-0.5b")]
    pub edge: String,
    /// Cloud base URL (OpenAI-compatible, with /v1); unset: the local stand-in serves
    /// `--stand-in` on 127.0.0.1.
    #[arg(long)]
    pub cloud: Option<String>,
    /// Model name sent to the cloud (and recorded as its identity); unset: the first model
    /// the endpoint lists.
    #[arg(long)]
    pub cloud_model: Option<String>,
    /// The model the local stand-in serves when no --cloud is given.
    #[arg(long, default_value = "qwen2.5-coder-1.5b")]
    pub stand_in: String,
    /// CPU threads per model.
    #[arg(long)]
    pub threads: Option<u32>,
    /// Seconds before a cloud request is given up.
    #[arg(long, default_value_t = 60.0)]
    pub timeout: f32,
}

/// A loaded pair.
pub struct Pair {
    /// Edge weights (for chat templates).
    pub weights: EdgeWeights,
    /// Identities for router files.
    pub ids: ModelPair,
    /// Edge name for reports.
    pub edge_name: String,
    options: LocalOptions,
    _stand_in: Option<Running>,
}

impl PairArgs {
    /// Loads the edge model and reaches the cloud (starting the stand-in if needed); the
    /// client comes apart from the pair so it can be used while the pair lends its weights.
    pub fn open(&self, hidden_state: bool) -> Result<(Pair, CloudClient)> {
        let paths = Paths::discover();
        let edge_path = models::resolve(&self.edge, &paths.models())?;
        let edge_sha256 = match models::find(&self.edge) {
            Some(entry) => entry.sha256,
            None => models::sha256_file(&edge_path)?,
        };
        let threads = self.threads.unwrap_or_else(default_threads);
        let mut config = Config {
            threads: Some(threads),
            ..Config::default()
        };
        config.serve.model = self.stand_in.clone();
        if let Some(url) = &self.cloud {
            config.cloud.url = url.trim_end_matches('/').to_owned();
            config.cloud.model = self.cloud_model.clone();
        }
        let (stand_in, notice) = stand_in::attach(&mut config, &paths);
        if let Some(why) = notice {
            anyhow::bail!(why);
        }
        if stand_in.is_some() {
            eprintln!(
                "[notice] local stand-in cloud: {} on {}",
                self.stand_in, config.cloud.url
            );
        }
        let url = config.cloud.url.clone();
        let mut cloud_config = CloudConfig::new(url.clone());
        cloud_config.model = config.cloud.model.clone();
        cloud_config.api_key = secrets::api_key().key.map(|(key, _)| key);
        cloud_config.request_timeout = Duration::from_secs_f32(self.timeout.max(1.0));
        let cloud = CloudClient::new(cloud_config)?;
        let served_models = cloud
            .check()
            .with_context(|| format!("checking the cloud at {url}"))?;
        let cloud_id = match &cloud.config().model {
            Some(model) => model.clone(),
            None => served_models
                .first()
                .cloned()
                .context("the cloud lists no models: pass --cloud-model")?,
        };
        let weights = EdgeWeights::load(&edge_path, &self.edge)?;
        let pair = Pair {
            weights,
            ids: ModelPair {
                edge_sha256,
                cloud: cloud_id,
            },
            edge_name: self.edge.clone(),
            options: LocalOptions {
                n_ctx: 2048,
                threads,
                hidden_state,
            },
            _stand_in: stand_in,
        };
        Ok((pair, cloud))
    }
}

impl Pair {
    /// A fresh edge session (one KV cache).
    pub fn session(&self) -> Result<LocalModel<'_>> {
        Ok(self.weights.session(&self.options)?)
    }
}

/// A one-line progress report with an ETA, rewritten in place on stderr.
pub struct Progress {
    label: &'static str,
    started: std::time::Instant,
    first: usize,
}

impl Progress {
    /// Starts timing; `already` items were done before (a resume).
    pub fn new(label: &'static str, already: usize) -> Self {
        Self {
            label,
            started: std::time::Instant::now(),
            first: already,
        }
    }

    /// Shows `done` of `total`, with `extra` after the ETA.
    pub fn show(&self, done: usize, total: usize, extra: &str) {
        let fresh = done.saturating_sub(self.first).max(1);
        let per = self.started.elapsed().as_secs_f64() / fresh as f64;
        let eta = per * total.saturating_sub(done) as f64;
        eprint!(
            "\r[{}] {done}/{total} · {per:.2} s each · ETA {:.0}m{:02.0}s · {extra}   ",
            self.label,
            (eta / 60.0).floor(),
            eta % 60.0
        );
    }

    /// Ends the line.
    pub fn finish(&self) {
        eprintln!(" ({:.0} s)", self.started.elapsed().as_secs_f64());
    }
}
