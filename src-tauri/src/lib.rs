//! Tandem's desktop shell: a thin Tauri v2 layer over `tandem-core`.
//!
//! Commands only parse input, call the core and map errors. [`run`] delegates to
//! [`build`], which is generic over the runtime so tests drive the same app with
//! `tauri::test::mock_builder()`. For now the window lists the models Tandem knows; the chat
//! arrives with the desktop-app issue.

mod commands;

use tauri::{App, Builder, Runtime};

/// Builds the app on any runtime (the real one, or the mock one in tests).
pub fn build<R: Runtime>(builder: Builder<R>) -> tauri::Result<App<R>> {
    builder
        .invoke_handler(tauri::generate_handler![commands::models])
        .build(tauri::generate_context!())
}

/// Runs the desktop app until its window closes.
pub fn run() {
    match build(Builder::default()) {
        Ok(app) => app.run(|_, _| {}),
        Err(e) => {
            eprintln!("error: Tandem could not start: {e}");
            std::process::exit(1);
        }
    }
}
