//! Start-up, the one path every front end takes (the CLI's `chat` and `generate`, the desktop
//! app, `eval` and `train-router`): find the edge model, settle the cloud (the configured one,
//! or the local stand-in started here when none is configured), then load the engine in the
//! form the front end needs.
//!
//! It lives beside the stand-in because starting the stand-in is a server's job; loading the
//! engine itself is the core's ([`tandem_core::engine::Engine::open`]).

use crate::stand_in;
use crate::Running;
use std::path::PathBuf;
use tandem_core::config::Config;
use tandem_core::models::{self, ModelError};
use tandem_core::paths::Paths;
use tandem_core::secrets;

/// A loaded engine (in whatever form `open` built it) and the cloud it talks to.
pub struct Started<T> {
    /// What `open` loaded. Declared first: it stops before the stand-in it may call.
    pub engine: T,
    /// The settings in force: the cloud URL and model point at the stand-in when it serves.
    pub config: Config,
    /// What the user should know about the cloud (a stand-in that could not start: replies
    /// are then local). The engine's own notices are the engine's.
    pub notices: Vec<String>,
    stand_in: Option<Running>,
}

impl<T> Started<T> {
    /// Whether Tandem serves the cloud itself on this machine.
    pub fn serves_stand_in(&self) -> bool {
        self.stand_in.is_some()
    }

    /// A line for a terminal: which model the stand-in serves, and where.
    pub fn stand_in_line(&self) -> Option<String> {
        self.stand_in.as_ref().map(|running| {
            format!(
                "local stand-in cloud: {} on {}",
                self.config.serve.model,
                running.base_url()
            )
        })
    }
}

/// The edge model found and the cloud settled, before the engine loads.
pub struct Prepared {
    /// The settings, pointed at the stand-in when it serves.
    pub config: Config,
    /// The edge model's GGUF file, found once here.
    pub edge_path: PathBuf,
    /// What the user should know about the cloud (a stand-in that could not start: replies
    /// are then local).
    pub notices: Vec<String>,
    stand_in: Option<Running>,
}

/// Checks the edge model exists (a wrong one is reported before the stand-in spends seconds
/// loading), then starts the stand-in when no cloud is configured and points the settings at
/// it.
pub fn prepare(mut config: Config, paths: &Paths) -> Result<Prepared, ModelError> {
    paths.sweep_stray_temp_files();
    if let Some(url) = config.cloud.endpoint() {
        secrets::adopt_unbound_key(url);
    }
    let edge_path = models::resolve(&config.edge, &paths.models())?;
    let (stand_in, notice) = stand_in::attach(&mut config, paths);
    Ok(Prepared {
        config,
        edge_path,
        notices: notice.into_iter().collect(),
        stand_in,
    })
}

impl Prepared {
    /// Loads the engine with `open`, given the settled settings.
    pub fn open<T, E>(
        self,
        paths: &Paths,
        open: impl FnOnce(&Config, &Paths) -> Result<T, E>,
    ) -> Result<Started<T>, E> {
        let engine = open(&self.config, paths)?;
        Ok(Started {
            engine,
            config: self.config,
            notices: self.notices,
            stand_in: self.stand_in,
        })
    }
}

/// [`prepare`], then [`Prepared::open`]. Keep the result alive while the engine is used:
/// dropping it stops the stand-in.
pub fn start<T, E: From<ModelError>>(
    config: Config,
    paths: &Paths,
    open: impl FnOnce(&Config, &Paths) -> Result<T, E>,
) -> Result<Started<T>, E> {
    prepare(config, paths)?.open(paths, open)
}
