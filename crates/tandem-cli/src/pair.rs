//! The edge/cloud pair that `train-router` and `eval` measure: the edge model loaded with
//! hidden states, and the cloud at `--cloud` (or the local stand-in when none is given),
//! with the identity a router file records for it.

use anyhow::{Context, Result};
use tandem_core::cloud::{CloudClient, CloudConfig};
use tandem_core::config::Config;
use tandem_core::local::{default_threads, EdgeWeights, LocalModel, LocalOptions};
use tandem_core::paths::Paths;
use tandem_core::router::ModelPair;
use tandem_core::startup::{self, Started};

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
}

/// A pair and the stand-in cloud it may talk to (stopped on drop).
pub type StartedPair = Started<Pair>;

impl PairArgs {
    /// Loads the edge model and reaches the cloud (starting the stand-in if needed); the
    /// client comes apart from the pair so it can be used while the pair lends its weights.
    pub fn open(&self, hidden_state: bool) -> Result<(StartedPair, CloudClient)> {
        let paths = Paths::discover();
        let threads = self.threads.unwrap_or_else(default_threads);
        let mut config = Config {
            edge: self.edge.clone(),
            threads: Some(threads),
            ..Config::default()
        };
        config.serve.model = self.stand_in.clone();
        config.cloud.timeout_secs = self.timeout;
        if let Some(url) = &self.cloud {
            config.cloud.url = url.trim_end_matches('/').to_owned();
            config.cloud.model = self.cloud_model.clone();
        }
        let prepared = startup::prepare(config, &paths)?;
        // Measuring needs a cloud: a stand-in that could not start is an error here.
        if let Some(why) = prepared.notices.first() {
            anyhow::bail!("{why}");
        }
        let mut client = None;
        let started = prepared.open(&paths, |settled, _| -> Result<Pair> {
            let config = &settled.config;
            let url = &config.cloud.url;
            let (cloud_config, _) = CloudConfig::from_settings(url, &config.cloud);
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
            let pair = Pair {
                weights: EdgeWeights::load(&settled.edge_path, &config.edge)?,
                ids: settled.pair(&cloud_id)?,
                edge_name: config.edge.clone(),
                options: LocalOptions {
                    n_ctx: 2048,
                    threads,
                    hidden_state,
                },
            };
            client = Some(cloud);
            Ok(pair)
        })?;
        crate::settings::announce(&started, &[]);
        Ok((started, client.expect("set by open")))
    }
}

impl PairArgs {
    /// Loads the edge model and, in-process, the cloud model the stand-in would serve (for
    /// labels the cloud judges from its own distribution: no server, no request). A cloud at
    /// a URL cannot be read this way.
    #[cfg(feature = "train")]
    pub fn open_local(&self, hidden_state: bool) -> Result<(Pair, EdgeWeights)> {
        if self.cloud.is_some() {
            anyhow::bail!(
                "judged labels read the cloud model's own distribution, so they need its GGUF \
                 (--stand-in), not a URL: collect against a remote cloud without --judged"
            );
        }
        let threads = self.threads.unwrap_or_else(default_threads);
        let config = Config {
            edge: self.edge.clone(),
            ..Config::default()
        };
        let settled = startup::Settled::new(config, &Paths::discover())?;
        let pair = Pair {
            weights: EdgeWeights::load(&settled.edge_path, &self.edge)?,
            ids: settled.pair(&self.stand_in)?,
            edge_name: self.edge.clone(),
            options: LocalOptions {
                n_ctx: 2048,
                threads,
                hidden_state,
            },
        };
        let cloud = load_model(&self.stand_in)?;
        // The judge's tokens are compared with the edge's by id.
        let probe = |w: &EdgeWeights| {
            (
                w.vocab_size(),
                w.tokenize(tandem_core::cloud::VOCAB_PROBE, false),
            )
        };
        if probe(&cloud) != probe(&pair.weights) {
            anyhow::bail!(
                "judged labels compare the two models' tokens by id, and {} does not share {}'s \
                 vocabulary",
                self.stand_in,
                self.edge
            );
        }
        Ok((pair, cloud))
    }
}

/// A model's weights by catalogue name or GGUF path, for reading in-process (a judge).
pub fn load_model(name: &str) -> Result<EdgeWeights> {
    let path = tandem_core::models::resolve(name, &Paths::discover().models())?;
    Ok(EdgeWeights::load(&path, name)?)
}

impl Pair {
    /// A fresh edge session (one KV cache).
    pub fn session(&self) -> Result<LocalModel<'_>> {
        Ok(self.weights.session(&self.options)?)
    }

    /// A session on other weights (the cloud model read in-process) with this pair's
    /// context and threads, without hidden states.
    pub fn session_of<'w>(&self, weights: &'w EdgeWeights) -> Result<LocalModel<'w>> {
        let options = LocalOptions {
            hidden_state: false,
            ..self.options
        };
        Ok(weights.session(&options)?)
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
        // Whole seconds first, so 119.6 s reads 2m00s and not 1m60s.
        let eta = (per * total.saturating_sub(done) as f64).round() as u64;
        eprint!(
            "\r[{}] {done}/{total} · {per:.2} s each · ETA {}m{:02}s · {extra}   ",
            self.label,
            eta / 60,
            eta % 60
        );
    }

    /// Ends the line.
    pub fn finish(&self) {
        eprintln!(" ({:.0} s)", self.started.elapsed().as_secs_f64());
    }
}
