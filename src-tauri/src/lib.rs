//! Tandem's desktop shell: a thin Tauri v2 layer over `tandem-core`.
//!
//! Commands ([`commands`]) only parse input, call the core and map errors ([`error`]);
//! replies stream the core's events through per-call channels ([`replies`]); the engine
//! loads in the background, with the local stand-in cloud when none is configured
//! ([`engine`]). [`run`] delegates to [`build`], which is generic over the runtime so tests
//! drive the same app with `tauri::test::mock_builder()`.

mod commands;
mod connection;
mod engine;
pub mod error;
mod files;
mod replies;
mod state;
pub mod views;

use state::Shared;
use std::sync::Arc;
use tandem_core::paths::Paths;
use tauri::{App, Builder, Manager, RunEvent, Runtime};

/// Builds the app on any runtime (the real one, or the mock one in tests), with its data in
/// `paths`. The engine starts loading at once.
pub fn build<R: Runtime>(builder: Builder<R>, paths: Paths) -> tauri::Result<App<R>> {
    let (shared, settings_problem) = Shared::open(paths);
    if let Some(problem) = settings_problem {
        eprintln!("[notice] {problem}");
    }
    builder
        .manage(shared)
        .plugin(tauri_plugin_dialog::init())
        .invoke_handler(tauri::generate_handler![
            commands::conversations_list,
            commands::conversation_create,
            commands::conversation_get,
            commands::conversation_rename,
            commands::conversation_delete,
            commands::conversation_set_local_only,
            commands::conversation_set_settings,
            commands::conversation_export_save,
            commands::reply_send,
            commands::reply_regenerate,
            commands::reply_stop,
            commands::compare_run,
            commands::app_status,
            commands::budget_set,
            commands::meter,
            commands::settings_get,
            commands::settings_set,
            commands::cloud_presets,
            commands::cloud_test,
            commands::key_status,
            commands::key_set,
            commands::key_clear,
            commands::evaluation_latest,
            commands::models_list,
            commands::model_pull,
            commands::model_pick_file,
        ])
        .build(tauri::generate_context!())
}

/// Stops the engine and the stand-in cloud (called on exit, so no server outlives the app).
pub fn shutdown<R: Runtime>(app: &tauri::AppHandle<R>) {
    app.state::<Arc<Shared>>().engine.stop();
}

/// Runs the desktop app until its window closes.
pub fn run() {
    match build(Builder::default(), Paths::discover()) {
        Ok(app) => app.run(|handle, event| {
            if let RunEvent::Exit = event {
                shutdown(handle);
            }
        }),
        Err(e) => {
            eprintln!("error: Tandem could not start: {e}");
            std::process::exit(1);
        }
    }
}
