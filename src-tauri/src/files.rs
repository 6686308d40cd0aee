//! Files where the user says: a conversation exported through the native save dialog, and an
//! edge model picked through the native open dialog.
//!
//! The dialogs run here, in the backend, so the web view never names a path: only the user
//! does, in the dialog (the web view holds no file-system or dialog permission at all). An
//! export replaces its file in one rename; a picked model is checked to be a GGUF before
//! Settings offers it. A dialog waits for the user, so it runs on the blocking pool.

use crate::error::{AppError, ErrorKind};
use std::path::{Path, PathBuf};
use tandem_core::chat_settings::ChatSettings;
use tandem_core::engine::OpenError;
use tandem_core::history::{Conversation, ExportFormat};
use tandem_core::local::check_gguf;
use tauri::{AppHandle, Manager, Runtime};
use tauri_plugin_dialog::{DialogExt, FileDialogBuilder};

/// The dialog builder, over the app's window when it has one.
fn dialog<R: Runtime>(app: &AppHandle<R>, title: &str) -> FileDialogBuilder<R> {
    let builder = app.dialog().file().set_title(title);
    match app.get_webview_window("main") {
        Some(window) => builder.set_parent(&window),
        None => builder,
    }
}

fn chosen(path: tauri_plugin_dialog::FilePath) -> Result<PathBuf, AppError> {
    path.into_path()
        .map_err(|e| AppError::new(ErrorKind::InvalidInput, format!("not a local file: {e}")))
}

/// Asks where to save `conversation` as `format` (with `defaults` where it has no settings of
/// its own) and writes it there; the path, or `None` when the user cancelled.
pub fn export<R: Runtime>(
    app: &AppHandle<R>,
    conversation: &Conversation,
    format: ExportFormat,
    defaults: ChatSettings,
) -> Result<Option<PathBuf>, AppError> {
    let picked = dialog(app, "Export the conversation")
        .set_file_name(conversation.export_file_name(format))
        .add_filter(format.description(), &[format.extension()])
        .blocking_save_file();
    let Some(path) = picked else { return Ok(None) };
    let path = chosen(path)?;
    write_beside(&path, conversation.export(format, defaults).as_bytes()).map_err(|e| {
        AppError::new(
            ErrorKind::Storage,
            format!("could not write {}: {e}", path.display()),
        )
    })?;
    Ok(Some(path))
}

/// Writes `bytes` to a hidden file beside `path`, then renames it over `path`: a full disk
/// leaves the old file whole. Unlike the data folder's own files (private), an export gets
/// the permissions any new file of the user's gets. The hidden file is always created afresh:
/// a leftover, or a link someone planted under its name, is removed rather than written
/// through (a plain write would follow the link).
fn write_beside(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let partial = path.with_file_name(format!(".{name}.tandem-export"));
    let _ = std::fs::remove_file(&partial);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&partial)
        .and_then(|mut file| file.write_all(bytes).and_then(|()| file.sync_all()))
        .and_then(|()| std::fs::rename(&partial, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    written
}

/// Asks for a GGUF file and checks that it is one; its path, or `None` when cancelled.
pub fn pick_model<R: Runtime>(app: &AppHandle<R>) -> Result<Option<PathBuf>, AppError> {
    let picked = dialog(app, "Open an edge model (GGUF)")
        .add_filter("GGUF model", &["gguf"])
        .blocking_pick_file();
    let Some(path) = picked else { return Ok(None) };
    let path = chosen(path)?;
    check_gguf(&path).map_err(|e| AppError::from(OpenError::Load(e)))?;
    Ok(Some(path))
}

#[cfg(test)]
mod tests {
    use super::write_beside;

    #[cfg(unix)]
    #[test]
    fn an_export_never_writes_through_a_link_planted_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep me").unwrap();
        let export = dir.path().join("chat.md");
        std::os::unix::fs::symlink(&victim, dir.path().join(".chat.md.tandem-export")).unwrap();
        write_beside(&export, b"# chat").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
        assert_eq!(std::fs::read_to_string(&export).unwrap(), "# chat");
    }
}
