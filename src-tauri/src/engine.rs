//! The engine's life in the app: loaded in the background at start (with the local stand-in
//! cloud when none is configured), reloaded when settings change, stopped on exit.
//!
//! Loading takes seconds (two models when the stand-in serves), so the window opens at once
//! and the UI shows `loading` until the slot turns `ready` or `failed`.

use crate::error::{AppError, ErrorKind};
use crate::views::CloudInfo;
use std::sync::{Arc, Mutex};
use tandem_core::config::Config;
use tandem_core::engine_thread::EngineThread;
use tandem_core::paths::Paths;
use tandem_core::startup::{self, Started};

/// A loaded engine and the stand-in it may talk to.
pub struct Loaded {
    started: Started<EngineThread>,
    /// What the header shows about the cloud.
    pub cloud: CloudInfo,
    /// Start-up notices (a stand-in that could not start, a router fallback…).
    pub notices: Vec<String>,
}

impl Loaded {
    /// The engine thread replies are asked of.
    pub fn engine(&self) -> &EngineThread {
        &self.started.engine
    }

    /// The cloud the engine talks to, with the stand-in's key for this run when it serves.
    pub fn cloud_settings(&self) -> &tandem_core::config::CloudSettings {
        &self.started.config.cloud
    }
}

/// Where the engine is.
#[derive(Clone)]
pub enum EngineSlot {
    /// Loading in the background.
    Loading,
    /// Ready for replies.
    Ready(Arc<Loaded>),
    /// Could not start; the error says why.
    Failed(AppError),
}

/// The engine slot, and a generation counter so a slow, outdated load never replaces a
/// newer one.
#[derive(Default)]
pub struct EngineLoader {
    slot: Mutex<(u64, Option<EngineSlot>)>,
}

impl EngineLoader {
    /// The slot as it is now.
    pub fn slot(&self) -> EngineSlot {
        let guard = self.slot.lock().unwrap_or_else(|e| e.into_inner());
        guard.1.clone().unwrap_or(EngineSlot::Loading)
    }

    /// The loaded engine, or why there is none.
    pub fn ready(&self) -> Result<Arc<Loaded>, AppError> {
        match self.slot() {
            EngineSlot::Ready(loaded) => Ok(loaded),
            EngineSlot::Loading => Err(AppError::new(
                ErrorKind::EngineUnavailable,
                "the models are still loading",
            )),
            EngineSlot::Failed(e) => Err(e),
        }
    }

    /// Drops the current engine (stopping its stand-in) and loads `config` on a new thread.
    pub fn start(self: &Arc<Self>, config: Config, paths: Paths) {
        let generation = {
            let mut guard = self.slot.lock().unwrap_or_else(|e| e.into_inner());
            guard.0 += 1;
            // Dropped outside the lock: stopping an engine waits for its thread.
            let _old = guard.1.replace(EngineSlot::Loading);
            guard.0
        };
        let host = Arc::clone(self);
        std::thread::spawn(move || {
            // A panic while loading must still settle the slot, or the window would wait on
            // "loading" for ever.
            let loaded = std::panic::catch_unwind(|| load(config, &paths));
            let slot = match loaded.unwrap_or_else(|panic| Err(load_panicked(panic.as_ref()))) {
                Ok(loaded) => EngineSlot::Ready(Arc::new(loaded)),
                Err(e) => EngineSlot::Failed(e),
            };
            let mut guard = host.slot.lock().unwrap_or_else(|e| e.into_inner());
            if guard.0 == generation {
                guard.1 = Some(slot);
            }
        });
    }

    /// Stops the engine and the stand-in (on exit).
    pub fn stop(&self) {
        let old = {
            let mut guard = self.slot.lock().unwrap_or_else(|e| e.into_inner());
            guard.0 += 1;
            guard.1.take()
        };
        drop(old);
    }
}

/// What the user is told when loading panicked, with the panic's message where it has one.
fn load_panicked(panic: &(dyn std::any::Any + Send)) -> AppError {
    let why = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no details".to_owned());
    AppError::new(
        ErrorKind::EngineUnavailable,
        format!(
            "the engine stopped while loading ({why}); check the models in Settings and try again"
        ),
    )
}

fn load(config: Config, paths: &Paths) -> Result<Loaded, AppError> {
    let started = startup::start(config, paths, |settled, paths| {
        EngineThread::spawn(settled.clone(), paths.clone())
    })?;
    let cloud = CloudInfo::new(&started.config, started.serves_stand_in());
    let notices = [started.notices.as_slice(), started.engine.notices()].concat();
    Ok(Loaded {
        started,
        cloud,
        notices,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_while_loading_becomes_a_failed_engine_that_says_why() {
        let panic = std::panic::catch_unwind(|| panic!("ggml: out of memory")).unwrap_err();
        let error = load_panicked(panic.as_ref());
        assert_eq!(error.kind, ErrorKind::EngineUnavailable);
        assert!(
            error.message.contains("ggml: out of memory"),
            "{}",
            error.message
        );
        let formatted = std::panic::catch_unwind(|| panic!("{} threads", 2)).unwrap_err();
        assert!(load_panicked(formatted.as_ref())
            .message
            .contains("2 threads"));
    }
}
