//! The engine on its own thread, for front ends that must not block (the desktop app).
//!
//! llama.cpp contexts cannot cross threads, so the worker thread owns the [`Engine`] and one
//! KV cache; callers send whole conversations over a channel (the cache is reused up to the
//! first differing token) and every reply comes back on its own event channel, errors
//! included (`notice` then `finished` with reason `error`). Cancelling a reply is a flag the
//! decode loop reads at every token.

use crate::budget::LiveBudget;
use crate::chat_settings::ChatSettings;
use crate::engine::{Engine, OpenError};
use crate::event::{Event, EventSink, FinishReason, NoticeKind, Timings, Usage};
use crate::history::ReplyMode;
use crate::message::Message;
use crate::paths::Paths;
use crate::startup::Settled;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

struct Job {
    history: Vec<Message>,
    mode: ReplyMode,
    settings: ChatSettings,
    events: mpsc::Sender<Event>,
    cancel: Arc<AtomicBool>,
}

/// A reply in progress: its events, and a way to stop it.
pub struct ReplyHandle {
    /// Events in order, ending with `finished`.
    pub events: mpsc::Receiver<Event>,
    cancel: Arc<AtomicBool>,
}

impl ReplyHandle {
    /// Stops the reply at its next token (it still ends with a `finished` event).
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }

    /// A handle that can stop the reply from elsewhere (a stop button) while another thread
    /// reads its events.
    pub fn stopper(&self) -> ReplyStopper {
        ReplyStopper(self.cancel.clone())
    }
}

/// Stops one reply; cloning it is cheap.
#[derive(Debug, Clone)]
pub struct ReplyStopper(Arc<AtomicBool>);

impl ReplyStopper {
    /// Stops the reply at its next token (it still ends with a `finished` event).
    pub fn stop(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The worker thread stopped (its engine panicked or was dropped).
#[derive(Debug, thiserror::Error)]
#[error("the engine thread has stopped")]
pub struct WorkerGone;

/// A handle on the engine thread; dropping it ends the thread after the current reply.
pub struct EngineThread {
    commands: Option<mpsc::Sender<Job>>,
    budget: LiveBudget,
    notices: Vec<String>,
    thread: Option<JoinHandle<()>>,
}

impl EngineThread {
    /// Loads the engine on a new thread; returns once it is ready, or the load error.
    pub fn spawn(settled: Settled, paths: Paths) -> Result<EngineThread, OpenError> {
        let (commands, inbox) = mpsc::channel::<Job>();
        let (ready, started) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("tandem-engine".into())
            .spawn(move || {
                let engine = match Engine::open(&settled, &paths) {
                    Ok(engine) => engine,
                    Err(e) => return ready.send(Err(e)).unwrap_or(()),
                };
                let mut chat = match engine.chat() {
                    Ok(chat) => chat,
                    Err(e) => return ready.send(Err(e)).unwrap_or(()),
                };
                let loaded = (engine.budget().clone(), engine.notices().to_vec());
                if ready.send(Ok(loaded)).is_err() {
                    return;
                }
                for job in inbox {
                    let mut sink = JobSink {
                        events: job.events,
                        cancel: job.cancel,
                    };
                    if let Err(e) = chat.reply(&job.history, job.mode, &job.settings, &mut sink) {
                        let events = sink.events;
                        let _ = events.send(Event::Notice {
                            kind: NoticeKind::EngineError,
                            message: e.to_string(),
                        });
                        let _ = events.send(Event::Finished {
                            reason: FinishReason::Error,
                            usage: Usage::default(),
                            timings: Timings::default(),
                        });
                    }
                }
            })
            .map_err(|e| OpenError::Thread(e.to_string()))?;
        let (budget, notices) = started
            .recv()
            .map_err(|_| OpenError::Thread("the engine thread stopped while loading".into()))??;
        Ok(EngineThread {
            commands: Some(commands),
            budget,
            notices,
            thread: Some(thread),
        })
    }

    /// Answers the last message of `history` (oldest first) in `mode` with a conversation's
    /// `settings`; the reply streams on the returned handle. Jobs run one after another.
    pub fn reply(
        &self,
        history: Vec<Message>,
        mode: ReplyMode,
        settings: ChatSettings,
    ) -> Result<ReplyHandle, WorkerGone> {
        let (events, receiver) = mpsc::channel();
        let cancel = Arc::new(AtomicBool::new(false));
        self.commands
            .as_ref()
            .ok_or(WorkerGone)?
            .send(Job {
                history,
                mode,
                settings,
                events,
                cancel: cancel.clone(),
            })
            .map_err(|_| WorkerGone)?;
        Ok(ReplyHandle {
            events: receiver,
            cancel,
        })
    }

    /// The budget; a change applies from the next token, also mid-reply.
    pub fn budget(&self) -> &LiveBudget {
        &self.budget
    }

    /// What the user should know about how the engine started (e.g. a router fallback).
    pub fn notices(&self) -> &[String] {
        &self.notices
    }
}

impl Drop for EngineThread {
    fn drop(&mut self) {
        // Closing the channel ends the thread's loop.
        self.commands.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Where one reply's events go: its channel, until the user cancels or stops listening.
struct JobSink {
    events: Sender<Event>,
    cancel: Arc<AtomicBool>,
}

impl EventSink for JobSink {
    fn emit(&mut self, event: Event) -> bool {
        self.events.send(event).is_ok() && !self.stop_requested()
    }

    fn stop_requested(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
}
