//! The local stand-in cloud: when no cloud is configured, Tandem serves the configured
//! cloud model (`serve.model`, Qwen2.5-Coder-1.5B by default) itself on a free port of
//! 127.0.0.1, so routing works out of the box with nothing leaving the machine. The CLI and
//! the desktop app both start it through [`crate::startup`]; it stops when the returned handle
//! is dropped.

use crate::{start, Access, ModelThread, Running, ServeOptions, StartError};
use tandem_core::cloud::ApiKey;
use tandem_core::config::Config;
use tandem_core::local::{default_threads, LocalOptions};
use tandem_core::models::{self, ModelError};
use tandem_core::paths::Paths;

/// What happened to the stand-in.
enum StandIn {
    /// A cloud is configured: nothing was started.
    NotNeeded,
    /// Running; point the client at [`Running::base_url`] with the key.
    Started(Running, ApiKey),
    /// Could not start; replies are local.
    Unavailable(StandInError),
}

/// Why the stand-in could not start (replies are then local).
#[derive(Debug, thiserror::Error)]
pub enum StandInError {
    /// Its model has not been downloaded.
    #[error(
        "no cloud is configured and the local stand-in ({name}) is not downloaded: \
         run `tandem models pull {name}`; replying locally"
    )]
    NotPulled {
        /// The model's catalogue name.
        name: String,
    },
    /// Its model cannot be found or used.
    #[error("the local stand-in cannot start: {0}")]
    Model(ModelError),
    /// Its model did not load.
    #[error("the local stand-in cannot start: {0}")]
    Start(#[from] StartError),
    /// No port of 127.0.0.1 could be bound.
    #[error("the local stand-in cannot start: {0}")]
    Bind(#[from] std::io::Error),
}

/// Starts the stand-in if `config` names no cloud.
fn start_if_needed(config: &Config, paths: &Paths) -> StandIn {
    if !config.cloud.wants_stand_in() {
        return StandIn::NotNeeded;
    }
    match serve(config, paths) {
        Ok((running, key)) => StandIn::Started(running, key),
        Err(e) => StandIn::Unavailable(e),
    }
}

fn serve(config: &Config, paths: &Paths) -> Result<(Running, ApiKey), StandInError> {
    let model = &config.serve.model;
    let model_path = models::resolve(model, &paths.models()).map_err(|e| match e {
        ModelError::NotPulled { name } => StandInError::NotPulled { name },
        e => StandInError::Model(e),
    })?;
    let engine = ModelThread::start(ServeOptions {
        model_path,
        model_name: model.clone(),
        local: LocalOptions {
            n_ctx: config.context,
            threads: config.threads.unwrap_or_else(default_threads),
            hidden_state: false,
        },
        prefix_reuse: true,
        deadline: ServeOptions::DEFAULT_DEADLINE,
    })?;
    let key = run_key();
    let access = Access::with_key(Some(key.clone()));
    let running = start(engine, ([127, 0, 0, 1], 0).into(), access)?;
    Ok((running, ApiKey::new(key).expect("a run key is not empty")))
}

/// A key for this run only, so no other program or user on this machine can use the
/// stand-in: 128 bits from two of the standard library's hash keys, which it draws from the
/// operating system's randomness, hashed so none of them is shown.
fn run_key() -> String {
    use std::hash::{BuildHasher, Hasher};
    let half = |salt: u64| {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(salt);
        hasher.finish()
    };
    format!("tandem-run-{:016x}{:016x}", half(1), half(2))
}

/// Starts the stand-in if `config` names no cloud and points `config` at it: its URL, and
/// its model's name (what routers trained for this pair record as the cloud). Returns the
/// running server (keep it alive while the engine is used) and a notice when it could not
/// start (replies are then local).
pub(crate) fn attach(config: &mut Config, paths: &Paths) -> (Option<Running>, Option<String>) {
    match start_if_needed(config, paths) {
        StandIn::Started(running, key) => {
            config.cloud.url = running.base_url();
            config.cloud.model = Some(config.serve.model.clone());
            config.cloud.api_key = Some(key);
            (Some(running), None)
        }
        StandIn::Unavailable(why) => (None, Some(why.to_string())),
        StandIn::NotNeeded => (None, None),
    }
}
