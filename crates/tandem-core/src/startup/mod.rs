//! Start-up, the one path every front end takes (the CLI's `chat` and `generate`, the desktop
//! app, `eval` and `train-router`): find the edge model, settle the cloud (the configured one,
//! or the local stand-in started here when none is configured), then load the engine in the
//! form the front end needs.
//!
//! What it settles is handed on as a [`Settled`], so the engine loads the file found here
//! instead of looking for it again, and the router's model pair is identified in one place.

mod stand_in;

use crate::config::Config;
use crate::models::{self, ModelError};
use crate::paths::Paths;
use crate::router::ModelPair;
use crate::secrets;
use std::path::PathBuf;

pub use stand_in::{StandIn, StandInError, PROGRAM_VAR};

/// Settings with their edge model found: what an engine loads.
#[derive(Debug, Clone)]
pub struct Settled {
    /// The settings in force: the cloud URL, key and model point at the stand-in when it
    /// serves.
    pub config: Config,
    /// The edge model's GGUF file.
    pub edge_path: PathBuf,
}

impl Settled {
    /// Finds the edge model `config` names; the cloud is taken as `config` gives it (tests,
    /// benchmarks and evaluations that start no stand-in begin here).
    pub fn new(config: Config, paths: &Paths) -> Result<Settled, ModelError> {
        let edge_path = models::resolve(&config.edge, &paths.models())?;
        Ok(Settled { config, edge_path })
    }

    /// The edge/cloud pair a trained router is checked against, with `cloud` as the cloud's
    /// name (the configured model, or what the endpoint lists). A catalogue edge model is
    /// known by its catalogue hash; one given by path is hashed (seconds for a large file).
    pub fn pair(&self, cloud: &str) -> Result<ModelPair, ModelError> {
        ModelPair::identify(&self.config.edge, &self.edge_path, cloud)
    }
}

/// The edge model found and the cloud settled, before the engine loads.
pub struct Prepared {
    /// What the engine loads.
    pub settled: Settled,
    /// What the user should know about the cloud (a stand-in that could not start: replies
    /// are then local).
    pub notices: Vec<String>,
    stand_in: Option<StandIn>,
}

/// Checks the edge model exists (a wrong one is reported before the stand-in spends seconds
/// loading), then starts the stand-in when no cloud is configured and points the settings at
/// it.
pub fn prepare(config: Config, paths: &Paths) -> Result<Prepared, ModelError> {
    paths.sweep_stray_temp_files();
    if let Some(url) = config.cloud.endpoint() {
        secrets::adopt_unbound_key(url);
    }
    let mut settled = Settled::new(config, paths)?;
    let (stand_in, notice) = stand_in::attach(&mut settled.config, paths);
    Ok(Prepared {
        settled,
        notices: notice.into_iter().collect(),
        stand_in,
    })
}

impl Prepared {
    /// Loads the engine with `open`, given what was settled.
    pub fn open<T, E>(
        self,
        paths: &Paths,
        open: impl FnOnce(&Settled, &Paths) -> Result<T, E>,
    ) -> Result<Started<T>, E> {
        let engine = open(&self.settled, paths)?;
        Ok(Started {
            engine,
            config: self.settled.config,
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
    open: impl FnOnce(&Settled, &Paths) -> Result<T, E>,
) -> Result<Started<T>, E> {
    prepare(config, paths)?.open(paths, open)
}

/// A loaded engine (in whatever form `open` built it) and the cloud it talks to.
pub struct Started<T> {
    /// What `open` loaded. Declared first: it stops before the stand-in it may call.
    pub engine: T,
    /// The settings in force: the cloud URL and model point at the stand-in when it serves.
    pub config: Config,
    /// What the user should know about the cloud (a stand-in that could not start: replies
    /// are then local). The engine's own notices are the engine's.
    pub notices: Vec<String>,
    stand_in: Option<StandIn>,
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
