//! What the app holds while it runs: folders, settings, conversations, the engine and the
//! reply in progress. Commands reach it as Tauri state.

use crate::engine::{EngineLoader, EngineSlot};
use crate::error::{AppError, ErrorKind};
use crate::views::{AppStatus, CloudInfo, EngineState, KeyStatus, Meter};
use std::sync::{Arc, Mutex};
use tandem_core::budget::CloudBudget;
use tandem_core::config::Config;
use tandem_core::engine_thread::ReplyStopper;
use tandem_core::history::ConversationStore;
use tandem_core::paths::Paths;
use tandem_core::spend::SpendLedger;

/// The app's state.
pub struct Shared {
    /// Platform folders (or `TANDEM_HOME`).
    pub paths: Paths,
    /// Saved conversations.
    pub store: ConversationStore,
    /// The settings as saved in `config.toml`.
    pub config: Mutex<Config>,
    /// The engine.
    pub engine: Arc<EngineLoader>,
    /// The reply being written, if any.
    pub current_reply: Mutex<Option<ReplyStopper>>,
    /// Why the settings file was not used, if it was not.
    settings_problem: Option<String>,
    /// Whether the unusable settings file is still where saving would write: then nothing is
    /// saved over it.
    settings_stuck: bool,
}

/// Moves an unusable settings file aside (`config.toml.bad-<seconds>`); says where it went,
/// or that it could not (`Err`: it is still in place).
fn set_aside(path: &std::path::Path) -> Result<String, String> {
    match tandem_core::atomic::set_aside(path) {
        Ok(kept) => Ok(format!("it was kept as {}", kept.display())),
        Err(e) => Err(format!(
            "it could not be kept aside ({e}), so settings will not be saved over it"
        )),
    }
}

impl Shared {
    /// Reads the settings and starts loading the engine. A file that cannot be used is moved
    /// aside (`config.toml.bad-<seconds>`) before anything could save over it, the defaults
    /// are used, and the problem is returned (and shown by [`Shared::status`]).
    pub fn open(paths: Paths) -> (Arc<Shared>, Option<AppError>) {
        let path = Config::default_path(&paths.config);
        let (config, problem, stuck) = match Config::load(&path) {
            Ok(config) => (config, None, false),
            Err(e) => {
                let kept = set_aside(&path);
                let stuck = kept.is_err();
                let kept = kept.unwrap_or_else(|refused| refused);
                (
                    Config::default(),
                    Some(AppError::new(
                        ErrorKind::InvalidInput,
                        format!("{e}; {kept}; the default settings are in use"),
                    )),
                    stuck,
                )
            }
        };
        let shared = Arc::new(Shared {
            settings_problem: problem.as_ref().map(|p| p.message.clone()),
            settings_stuck: stuck,
            store: ConversationStore::new(&paths.data),
            config: Mutex::new(config.clone()),
            engine: Arc::new(EngineLoader::default()),
            current_reply: Mutex::new(None),
            paths,
        });
        shared.engine.start(config, shared.paths.clone());
        (shared, problem)
    }

    /// The settings in force.
    pub fn config(&self) -> Config {
        self.config
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Changes the settings, saves them, and returns the new ones.
    pub fn update_config(&self, change: impl FnOnce(&mut Config)) -> Result<Config, AppError> {
        let mut config = self.config.lock().unwrap_or_else(|e| e.into_inner());
        let path = Config::default_path(&self.paths.config);
        if self.settings_stuck {
            return Err(AppError::new(
                ErrorKind::Storage,
                format!(
                    "settings are not saved: {} could not be read or kept aside, and Tandem does not write over it; move or fix it, then restart",
                    path.display()
                ),
            ));
        }
        let mut next = config.clone();
        change(&mut next);
        next.save(&path)
            .map_err(|e| AppError::new(ErrorKind::Storage, e.to_string()))?;
        *config = next.clone();
        Ok(next)
    }

    /// Reloads the engine with the current settings (after a settings or key change).
    pub fn restart_engine(&self) {
        self.stop_reply();
        self.engine.start(self.config(), self.paths.clone());
    }

    /// Stops the running reply, if any.
    pub fn stop_reply(&self) {
        let current = self.current_reply.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(stopper) = current.as_ref() {
            stopper.stop();
        }
    }

    /// Today's use.
    pub fn meter(&self) -> Meter {
        Meter::new(
            SpendLedger::new(&self.paths.data).today(),
            &self.config().budget,
        )
    }

    /// Sets the budget: saved, and live for the running engine from its next token.
    pub fn set_budget(&self, budget: CloudBudget) -> Result<CloudBudget, AppError> {
        budget.validate()?;
        if let Ok(loaded) = self.engine.ready() {
            loaded.engine().budget().set(budget);
        }
        self.update_config(|c| c.budget = budget)?;
        Ok(budget)
    }

    /// What the header and composer show.
    pub fn status(&self) -> AppStatus {
        let config = self.config();
        let (engine, engine_error, cloud, notices) = match self.engine.slot() {
            EngineSlot::Loading => (EngineState::Loading, None, None, Vec::new()),
            EngineSlot::Ready(loaded) => (
                EngineState::Ready,
                None,
                Some(loaded.cloud.clone()),
                loaded.notices.clone(),
            ),
            EngineSlot::Failed(e) => (EngineState::Failed, Some(e), None, Vec::new()),
        };
        AppStatus {
            edge_model: config.edge.clone(),
            router: config.router.kind,
            cloud: cloud.unwrap_or_else(|| CloudInfo::new(&config, config.cloud.wants_stand_in())),
            budget: config.budget,
            meter: self.meter(),
            key: KeyStatus::read(config.cloud.endpoint()),
            notices,
            engine,
            engine_error,
            settings_problem: self.settings_problem.clone(),
        }
    }
}
