//! The commands the web UI may call.

use tandem_core::models::{self, ModelStatus};
use tandem_core::paths::Paths;

/// The model catalogue and what is downloaded.
#[tauri::command]
pub fn models() -> Vec<ModelStatus> {
    models::statuses(&Paths::discover().models())
}
