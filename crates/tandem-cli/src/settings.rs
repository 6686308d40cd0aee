//! Flags shared by the commands that generate, layered over the settings file.

use anyhow::{Context, Result};
use clap::Args;
use std::path::{Path, PathBuf};
use tandem_core::budget::Share;
use tandem_core::cloud::CloudMode;
use tandem_core::config::{Config, ConfigError};
use tandem_core::engine::Engine;
use tandem_core::paths::Paths;
use tandem_core::router::RouterKind;
use tandem_core::startup::{self, Started};
use tandem_core::window::ContextPolicy;

/// An engine ready to chat, and the stand-in cloud it may talk to (stopped on drop).
pub type Session = Started<Engine>;

/// Flags that override `config.toml`.
#[derive(Args, Debug, Clone)]
pub struct Overrides {
    /// Settings file (default: config.toml in the platform config folder).
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    /// Edge model: catalogue name or GGUF path.
    #[arg(long)]
    pub edge: Option<String>,
    /// Cloud base URL (OpenAI-compatible, including /v1); "none" for local only; unset and
    /// not in the settings: the local stand-in (serve.model on 127.0.0.1).
    #[arg(long)]
    pub cloud: Option<String>,
    /// Model name sent to the cloud.
    #[arg(long)]
    pub cloud_model: Option<String>,
    /// How the cloud is asked: completions (exact prompt) or chat (messages + reply so far).
    #[arg(long, value_parser = parse_mode)]
    pub cloud_mode: Option<CloudMode>,
    /// Maximum cloud share of the replies' tokens, counted across replies (a reply may spend
    /// up to four tokens earlier ones saved, leaving two for the next reply's opening once its
    /// own is past; an opening may borrow its token from later replies): 0 never calls the
    /// cloud, 1 is cloud-only.
    #[arg(long, value_parser = share)]
    pub budget: Option<Share>,
    /// Maximum cloud tokens per reply.
    #[arg(long)]
    pub budget_tokens: Option<u32>,
    /// Round trip (ms) past which the cloud counts as slow: replies then ask it only for
    /// their most uncertain tokens, and say so.
    #[arg(long)]
    pub max_wait_ms: Option<u32>,
    /// Router: blend (the default), margin, entropy, lead-entropy, mlp, edge-only, cloud-only, or the baselines first-token and random.
    #[arg(long)]
    pub router: Option<RouterKind>,
    /// Weights file of the MLP router.
    #[arg(long)]
    pub router_path: Option<PathBuf>,
    /// Tokens asked for per cloud request.
    #[arg(long)]
    pub span: Option<u32>,
    /// Whether the edge drafts its own continuation while a request is away (default true).
    #[arg(long)]
    pub overlap: Option<bool>,
    /// Whether, while a request is away, the request the draft would make next goes at once
    /// (default true): sooner replies over a network; an answer the reply does not use is
    /// still billed.
    #[arg(long)]
    pub ask_ahead: Option<bool>,
    /// Maximum tokens in a reply.
    #[arg(long)]
    pub max_tokens: Option<u32>,
    /// CPU threads for the edge model.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(tandem_core::config::MAX_THREADS)))]
    pub threads: Option<u32>,
    /// Context window in tokens.
    #[arg(long)]
    pub context: Option<u32>,
    /// Sampling temperature of the edge (0 = greedy).
    #[arg(long)]
    pub temperature: Option<f32>,
    /// Once a conversation outgrows the context window: rolling (the oldest turns leave the
    /// model's view), drop-middle (the first exchange stays) or stop.
    #[arg(long)]
    pub context_policy: Option<ContextPolicy>,
    /// Sampling seed.
    #[arg(long)]
    pub seed: Option<u64>,
}

impl Overrides {
    /// Loads the engine these settings describe, with the local stand-in cloud when no
    /// cloud is configured, and shows its start-up notices. Keep the returned [`Session`]
    /// alive while the engine is used: dropping it stops the stand-in.
    pub fn open_engine(&self) -> Result<Session> {
        let paths = Paths::discover();
        let config = self.resolve(&paths)?;
        let session = startup::start(config, &paths, Engine::open)?;
        announce(&session, session.engine.notices());
        Ok(session)
    }

    /// The settings file with these flags applied.
    pub fn resolve(&self, paths: &Paths) -> Result<Config> {
        let mut c = load(self.config.as_deref(), paths).with_context(|| "reading settings")?;
        if let Some(v) = &self.edge {
            c.edge = v.clone();
        }
        if let Some(v) = &self.cloud {
            c.cloud.url = v.clone();
        }
        if let Some(v) = &self.cloud_model {
            c.cloud.model = Some(v.clone());
        }
        if let Some(v) = self.cloud_mode {
            c.cloud.mode = v;
        }
        if let Some(share) = self.budget {
            c.budget = c.budget.with_share(share);
        }
        if let Some(v) = self.budget_tokens {
            c.budget.max_cloud_tokens = Some(v);
        }
        if let Some(v) = self.max_wait_ms {
            c.budget.max_wait_ms = Some(v);
        }
        if let Some(v) = self.router {
            c.router.kind = v;
        }
        if let Some(v) = &self.router_path {
            c.router.path = Some(v.clone());
        }
        if let Some(v) = self.span {
            anyhow::ensure!(v >= 1, "--span must be at least 1");
            c.cloud.span = v;
        }
        if let Some(v) = self.overlap {
            c.cloud.overlap = v;
        }
        if let Some(v) = self.ask_ahead {
            c.cloud.ask_ahead = v;
        }
        if let Some(v) = self.max_tokens {
            c.max_tokens = v;
        }
        if let Some(v) = self.threads {
            c.threads = Some(v);
        }
        if let Some(v) = self.context {
            c.context = v;
        }
        if let Some(v) = self.temperature {
            c.sampling.temperature = v;
        }
        if let Some(v) = self.seed {
            c.sampling.seed = v;
        }
        if let Some(v) = self.context_policy {
            c.context_policy = v;
        }
        c.chat_settings().validate()?;
        Ok(c)
    }
}

/// The settings file `--config` names, or the one in the platform config folder.
pub fn load(path: Option<&Path>, paths: &Paths) -> Result<Config, ConfigError> {
    let path = path.map_or_else(|| Config::default_path(&paths.config), Path::to_owned);
    Config::load(&path)
}

/// Shows on stderr what the user should know about how the engine started.
pub fn announce<T>(started: &Started<T>, engine_notices: &[String]) {
    let stand_in = started.stand_in_line();
    for notice in started
        .notices
        .iter()
        .chain(&stand_in)
        .chain(engine_notices)
    {
        eprintln!("[notice] {notice}");
    }
}

fn parse_mode(value: &str) -> Result<CloudMode, String> {
    match value {
        "completions" => Ok(CloudMode::Completions),
        "chat" => Ok(CloudMode::Chat),
        other => Err(format!(
            "'{other}' is not a cloud mode (completions or chat)"
        )),
    }
}

/// A cloud share as users type it (`0.15` or `15%`), for clap.
pub fn share(text: &str) -> Result<Share, String> {
    Share::parse(text).map_err(|e| e.to_string())
}
