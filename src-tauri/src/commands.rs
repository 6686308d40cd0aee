//! The commands the web UI may call. Each one parses its input, calls the core (or the
//! app's state) and maps errors to [`AppError`]; no logic lives here. Replies and downloads
//! stream through a per-call [`Channel`]. Everything runs off the main thread (`async`), so
//! the window never stalls on a disk or a network.

use crate::connection;
use crate::error::{AppError, ErrorKind};
use crate::files;
use crate::replies::{self, Ask};
use crate::state::Shared;
use crate::views::{
    AppStatus, CloudPreset, CloudSettingsView, KeyStatus, Meter, PullEvent, SettingsView,
    TestResult, CLOUD_PRESETS,
};
use std::sync::Arc;
use tandem_core::budget::CloudBudget;
use tandem_core::chat_settings::ChatSettings;
use tandem_core::cloud::ApiKey;
use tandem_core::event::Event;
use tandem_core::history::ReplyMode;
use tandem_core::history::{Conversation, ConversationSummary, ExportFormat};
use tandem_core::models::{self, ModelStatus};
use tandem_core::secrets::{self, KeyError};
use tauri::ipc::Channel;
use tauri::{AppHandle, Runtime, State};

type Result<T> = std::result::Result<T, AppError>;
type AppState<'a> = State<'a, Arc<Shared>>;

/// Forwards events to the UI; `false` once the page is gone (the reply then stops).
fn forwarder(channel: Channel<Event>) -> impl FnMut(Event) -> bool + Send + 'static {
    move |event| channel.send(event).is_ok()
}

/// Runs blocking work (network, large files) on the blocking pool.
async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Result<T> {
    tauri::async_runtime::spawn_blocking(work)
        .await
        .map_err(|e| AppError::new(ErrorKind::EngineUnavailable, e.to_string()))
}

/// Conversations whose title or messages contain `query`, newest first.
#[tauri::command(async)]
pub fn conversations_list(
    state: AppState<'_>,
    query: Option<String>,
) -> Result<Vec<ConversationSummary>> {
    Ok(state.store.list(query.as_deref().unwrap_or(""))?)
}

/// A new, empty conversation.
#[tauri::command(async)]
pub fn conversation_create(state: AppState<'_>) -> Result<Conversation> {
    Ok(state.store.create()?)
}

/// One conversation with every message and reply event.
#[tauri::command(async)]
pub fn conversation_get(state: AppState<'_>, id: String) -> Result<Conversation> {
    Ok(state.store.get(&id)?)
}

/// Renames a conversation.
#[tauri::command(async)]
pub fn conversation_rename(state: AppState<'_>, id: String, title: String) -> Result<Conversation> {
    let title = title.trim();
    if title.is_empty() {
        return Err(AppError::new(
            ErrorKind::InvalidInput,
            "a title cannot be empty",
        ));
    }
    let mut conversation = state.store.get(&id)?;
    conversation.title = title.to_owned();
    state.store.save(&mut conversation)?;
    Ok(conversation)
}

/// Deletes a conversation.
#[tauri::command(async)]
pub fn conversation_delete(state: AppState<'_>, id: String) -> Result<()> {
    Ok(state.store.delete(&id)?)
}

/// Locks a conversation to the edge model (or unlocks it).
#[tauri::command(async)]
pub fn conversation_set_local_only(
    state: AppState<'_>,
    id: String,
    local_only: bool,
) -> Result<Conversation> {
    let mut conversation = state.store.get(&id)?;
    conversation.local_only = local_only;
    state.store.save(&mut conversation)?;
    Ok(conversation)
}

/// Gives a conversation settings of its own (until then it follows Settings' `chat`).
#[tauri::command(async)]
pub fn conversation_set_settings(
    state: AppState<'_>,
    id: String,
    settings: ChatSettings,
) -> Result<Conversation> {
    settings.validate()?;
    let mut conversation = state.store.get(&id)?;
    conversation.settings = Some(settings);
    state.store.save(&mut conversation)?;
    Ok(conversation)
}

/// Saves a conversation as Markdown or JSON (with provenance) where the user says in the
/// native save dialog; the path written, or `null` when the user cancelled.
#[tauri::command]
pub async fn conversation_export_save<R: Runtime>(
    app: AppHandle<R>,
    state: AppState<'_>,
    id: String,
    format: String,
) -> Result<Option<String>> {
    let format = match format.as_str() {
        "markdown" => ExportFormat::Markdown,
        "json" => ExportFormat::Json,
        other => {
            return Err(AppError::new(
                ErrorKind::InvalidInput,
                format!("unknown export format '{other}' (markdown or json)"),
            ))
        }
    };
    let conversation = state.store.get(&id)?;
    let defaults = state.config().chat_settings();
    // The dialog waits for the user: on the blocking pool, not on an async worker.
    let saved = blocking(move || files::export(&app, &conversation, format, defaults)).await??;
    Ok(saved.map(|path| path.display().to_string()))
}

/// Sends a message in a conversation; the reply streams on `on_event` and is saved. Answers
/// with the conversation as saved with the message (the first one titles it).
#[tauri::command(async)]
pub fn reply_send(
    state: AppState<'_>,
    id: String,
    text: String,
    on_event: Channel<Event>,
) -> Result<ConversationSummary> {
    replies::start(&state, &id, Ask::Message(&text), forwarder(on_event))
}

/// Answers the last user message again, replacing the last reply.
#[tauri::command(async)]
pub fn reply_regenerate(
    state: AppState<'_>,
    id: String,
    on_event: Channel<Event>,
) -> Result<ConversationSummary> {
    replies::start(&state, &id, Ask::Regenerate, forwarder(on_event))
}

/// Stops the reply being written.
#[tauri::command(async)]
pub fn reply_stop(state: AppState<'_>) -> Result<()> {
    state.stop_reply();
    Ok(())
}

/// A one-off reply in `mode`, not saved (the compare view).
#[tauri::command(async)]
pub fn compare_run(
    state: AppState<'_>,
    text: String,
    mode: ReplyMode,
    on_event: Channel<Event>,
) -> Result<()> {
    replies::compare(&state, &text, mode, forwarder(on_event))
}

/// What the header and composer show.
#[tauri::command(async)]
pub fn app_status(state: AppState<'_>) -> Result<AppStatus> {
    Ok(state.status())
}

/// Sets the budget; it applies from the next token, also in the middle of a reply. Read here
/// rather than by Tauri, so a share out of range is a coded `invalid_input` in the budget's
/// own words (the share is checked as it is read).
#[tauri::command(async)]
pub fn budget_set(state: AppState<'_>, budget: serde_json::Value) -> Result<CloudBudget> {
    let budget: CloudBudget = serde_json::from_value(budget)
        .map_err(|e| AppError::new(ErrorKind::InvalidInput, e.to_string()))?;
    state.set_budget(budget)
}

/// Today's spend and cloud share.
#[tauri::command(async)]
pub fn meter(state: AppState<'_>) -> Result<Meter> {
    Ok(state.meter())
}

/// The settings the dialog edits.
#[tauri::command(async)]
pub fn settings_get(state: AppState<'_>) -> Result<SettingsView> {
    Ok(SettingsView::of(&state.config()))
}

/// Saves the settings and reloads the engine with them.
#[tauri::command(async)]
pub fn settings_set(state: AppState<'_>, settings: SettingsView) -> Result<SettingsView> {
    if settings.edge.trim().is_empty() {
        return Err(AppError::new(
            ErrorKind::InvalidInput,
            "choose an edge model",
        ));
    }
    settings.chat.validate()?;
    let config = state.update_config(|c| settings.apply(c))?;
    state.restart_engine();
    Ok(SettingsView::of(&config))
}

/// An edge model file picked in the native open dialog, checked to be a GGUF; `null` when
/// the user cancelled. Settings then saves it like a typed path.
#[tauri::command]
pub async fn model_pick_file<R: Runtime>(app: AppHandle<R>) -> Result<Option<String>> {
    let picked = blocking(move || files::pick_model(&app)).await??;
    Ok(picked.map(|path| path.display().to_string()))
}

/// Ready-made cloud endpoints.
#[tauri::command(async)]
pub fn cloud_presets() -> Result<Vec<CloudPreset>> {
    Ok(CLOUD_PRESETS.to_vec())
}

/// Checks an endpoint, key and model before they are saved: with `key` when one is typed,
/// else with the key saved for that endpoint's origin (never another's).
#[tauri::command]
pub async fn cloud_test(
    state: AppState<'_>,
    cloud: CloudSettingsView,
    key: Option<String>,
) -> Result<TestResult> {
    let shared = Arc::clone(&state);
    let key = key.and_then(ApiKey::new);
    blocking(move || connection::test(&shared, cloud, key)).await
}

/// Where the key of the cloud at `url` is (as the settings dialog has it, not yet saved).
#[tauri::command(async)]
pub fn key_status(url: String) -> Result<KeyStatus> {
    Ok(KeyStatus::read(endpoint(&url).ok()))
}

/// Stores the API key of the cloud at `url` in the OS keyring, bound to its origin; it is
/// never sent back, nor to another origin.
#[tauri::command(async)]
pub fn key_set(state: AppState<'_>, url: String, key: String) -> Result<KeyStatus> {
    let key = ApiKey::new(key)
        .ok_or_else(|| AppError::new(ErrorKind::InvalidInput, "the key is empty"))?;
    let cloud = endpoint(&url)?;
    secrets::store_api_key(cloud, &key).map_err(key_error)?;
    state.restart_engine();
    Ok(KeyStatus::read(Some(cloud)))
}

/// Removes the API key of the cloud at `url` from the OS keyring.
#[tauri::command(async)]
pub fn key_clear(state: AppState<'_>, url: String) -> Result<KeyStatus> {
    let cloud = endpoint(&url)?;
    secrets::delete_api_key(cloud).map_err(key_error)?;
    state.restart_engine();
    Ok(KeyStatus::read(Some(cloud)))
}

/// The cloud a key is for: a URL, not the local stand-in (which needs none).
fn endpoint(url: &str) -> Result<&str> {
    tandem_core::config::endpoint(url.trim()).ok_or_else(|| {
        AppError::new(
            ErrorKind::InvalidInput,
            "enter the cloud's URL first: a key is saved for the endpoint it is sent to",
        )
    })
}

fn key_error(e: KeyError) -> AppError {
    match e {
        KeyError::Keyring(_) => AppError::new(ErrorKind::KeyringUnavailable, e.to_string()),
        KeyError::Url(_) | KeyError::PlainHttp(_) => {
            AppError::new(ErrorKind::InvalidInput, e.to_string())
        }
    }
}

/// The chart of the latest `tandem eval` on this machine (SVG text), if there is one.
#[tauri::command(async)]
pub fn evaluation_latest(state: AppState<'_>) -> Result<Option<String>> {
    let path = state.paths.latest_evaluation().join("chart.svg");
    match std::fs::read_to_string(&path) {
        Ok(svg) => Ok(Some(svg)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(AppError::new(
            ErrorKind::Storage,
            format!("{}: {e}", path.display()),
        )),
    }
}

/// The model catalogue and what is downloaded.
#[tauri::command(async)]
pub fn models_list(state: AppState<'_>) -> Result<Vec<ModelStatus>> {
    Ok(models::statuses(&state.paths.models()))
}

/// Downloads a catalogue model (size and sha256 checked), reporting progress.
#[tauri::command]
pub async fn model_pull(
    state: AppState<'_>,
    name: String,
    on_progress: Channel<PullEvent>,
) -> Result<()> {
    let entry = models::find(&name).ok_or_else(|| {
        AppError::new(
            ErrorKind::ModelUnknown,
            format!("'{name}' is not in the catalogue"),
        )
    })?;
    let shared = Arc::clone(&state);
    let progress = on_progress.clone();
    let pulled = blocking(move || {
        models::pull(&entry, &shared.paths.models(), &mut |p| {
            let _ = progress.send(PullEvent::Progress {
                done: p.done,
                total: p.total,
            });
        })
    })
    .await?;
    match pulled {
        Ok(_) => {
            let _ = on_progress.send(PullEvent::Done);
            // A model that was missing may be the reason the engine could not start.
            if state.engine.ready().is_err() {
                state.restart_engine();
            }
            Ok(())
        }
        Err(e) => {
            let error = AppError::from(e);
            let _ = on_progress.send(PullEvent::Failed {
                error: error.clone(),
            });
            Err(error)
        }
    }
}
