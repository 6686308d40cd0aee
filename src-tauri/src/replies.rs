//! Replies in the app: one at a time, streamed to the UI as the core's events, and saved
//! with every event once they finish.
//!
//! The conversation is saved before the reply starts (the user's message is never lost) and
//! again when `finished` arrives, before the UI hears of it, so a conversation the UI shows
//! as finished is on disk. A stopped reply is saved too. Starting a reply answers with the
//! conversation as saved with the user's message, so the UI shows the title the first message
//! gave it without guessing when to ask.

use crate::error::{AppError, ErrorKind};
use crate::state::Shared;
use std::sync::Arc;
use tandem_core::chat_settings::ChatSettings;
use tandem_core::engine_thread::ReplyHandle;
use tandem_core::event::{Event, FinishReason, NoticeKind, Timings, Usage};
use tandem_core::history::ReplyMode;
use tandem_core::history::{ConversationSummary, HistoryError};
use tandem_core::message::Message;

/// What to answer.
pub enum Ask<'a> {
    /// A new user message.
    Message(&'a str),
    /// The last user message again (the last reply is replaced).
    Regenerate,
}

/// Starts a reply in conversation `id`; its events go to `forward` (which returns `false`
/// once the UI is gone). Returns the conversation with the user's message (and the title it
/// may have given it).
pub fn start(
    shared: &Arc<Shared>,
    id: &str,
    ask: Ask<'_>,
    forward: impl FnMut(Event) -> bool + Send + 'static,
) -> Result<ConversationSummary, AppError> {
    let mut conversation = shared.store.get(id)?;
    match ask {
        Ask::Message(text) if text.trim().is_empty() => {
            return Err(AppError::new(
                ErrorKind::InvalidInput,
                "the message is empty",
            ))
        }
        Ask::Message(text) => conversation.push_user(text),
        Ask::Regenerate => {
            if !conversation.drop_last_reply() {
                return Err(AppError::new(
                    ErrorKind::InvalidInput,
                    "there is no message to answer again",
                ));
            }
        }
    }
    let mode = conversation.reply_mode();
    let handle = begin(
        shared,
        conversation.turns(),
        mode,
        conversation.settings_or(shared.config().chat_settings()),
    )?;
    let early_failure = shared.store.save(&mut conversation).err();
    let asked = conversation.summary();
    let store = shared.store.clone();
    let save = move |events: Vec<Event>| {
        // Re-read: the title or the lock may have changed while the reply streamed.
        let mut latest = match store.get(&conversation.id) {
            Ok(latest) if latest.messages.len() == conversation.messages.len() => latest,
            Err(HistoryError::NotFound(_)) => return Ok(()), // deleted meanwhile
            _ => conversation,
        };
        latest.push_reply(mode, events);
        store.save(&mut latest)
    };
    stream(shared, handle, early_failure, forward, save);
    Ok(asked)
}

/// Runs a one-off reply in `mode` to `text`, not saved (the compare view).
pub fn compare(
    shared: &Arc<Shared>,
    text: &str,
    mode: ReplyMode,
    forward: impl FnMut(Event) -> bool + Send + 'static,
) -> Result<(), AppError> {
    if text.trim().is_empty() {
        return Err(AppError::new(
            ErrorKind::InvalidInput,
            "the message is empty",
        ));
    }
    let settings = shared.config().chat_settings();
    let handle = begin(shared, vec![Message::user(text)], mode, settings)?;
    stream(shared, handle, None, forward, |_| Ok(()));
    Ok(())
}

/// Queues a reply unless one is running.
fn begin(
    shared: &Shared,
    turns: Vec<Message>,
    mode: ReplyMode,
    settings: ChatSettings,
) -> Result<ReplyHandle, AppError> {
    let loaded = shared.engine.ready()?;
    let mut current = shared
        .current_reply
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if current.is_some() {
        return Err(AppError::new(
            ErrorKind::Busy,
            "a reply is still being written: stop it or wait for it to finish",
        ));
    }
    let handle = loaded
        .engine()
        .reply(turns, mode, settings)
        .map_err(|e| AppError::new(ErrorKind::EngineUnavailable, e.to_string()))?;
    *current = Some(handle.stopper());
    Ok(handle)
}

/// Forwards the reply's events on a thread of its own, saves it, then sends `finished`.
fn stream(
    shared: &Arc<Shared>,
    handle: ReplyHandle,
    early_failure: Option<HistoryError>,
    mut forward: impl FnMut(Event) -> bool + Send + 'static,
    save: impl FnOnce(Vec<Event>) -> Result<(), HistoryError> + Send + 'static,
) {
    let shared = Arc::clone(shared);
    std::thread::spawn(move || {
        let mut events = Vec::new();
        let not_saved = |e: HistoryError, forward: &mut dyn FnMut(Event) -> bool| {
            forward(Event::Notice {
                kind: NoticeKind::NotSaved,
                message: e.to_string(),
            })
        };
        if let Some(e) = early_failure {
            not_saved(e, &mut forward);
        }
        let mut finished = None;
        for event in handle.events.iter() {
            if matches!(event, Event::Finished { .. }) {
                finished = Some(event);
                break;
            }
            events.push(event.clone());
            if !forward(event) {
                handle.cancel();
            }
        }
        // The engine thread always ends with `finished`; if it died, say so.
        let finished = finished.unwrap_or_else(|| {
            let notice = Event::Notice {
                kind: NoticeKind::EngineError,
                message: "the engine stopped in the middle of the reply".into(),
            };
            events.push(notice.clone());
            forward(notice);
            Event::Finished {
                reason: FinishReason::Error,
                usage: Usage::default(),
                timings: Timings::default(),
            }
        });
        events.push(finished.clone());
        if let Err(e) = save(events) {
            not_saved(e, &mut forward);
        }
        *shared
            .current_reply
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = None;
        forward(finished);
    });
}
