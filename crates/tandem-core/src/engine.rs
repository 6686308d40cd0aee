//! From settings to a working chat: load the edge model, build the router and the cloud
//! client, and run turns with the KV cache kept between them.
//!
//! The CLI, the desktop app and the evaluation all start here, so a setting means the same
//! thing everywhere.

use crate::budget::{CloudBudget, LiveBudget, Share};
use crate::chat_settings::ChatSettings;
use crate::cloud::{Cloud, CloudClient, CloudConfig, CloudError};
use crate::decode::{self, Collaboration, DecodeOptions};
use crate::edge::{EdgeError, EdgeModel};
use crate::event::{Event, EventSink, FinishReason, NoticeKind, Timings, Usage};
use crate::history::ReplyMode;
use crate::local::{default_threads, EdgeWeights, LoadError, LocalModel, LocalOptions};
use crate::message::Message;
use crate::models::ModelError;
use crate::paths::Paths;
use crate::router::{self, FixedRouter, ModelPair, Router, RouterKind};
use crate::spend::SpendLedger;
use crate::startup::Settled;
use crate::window::{self, Overflow};
use std::ops::Range;

/// Why an engine could not start.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The edge model could not be found.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The edge model could not be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The cloud client could not be built.
    #[error(transparent)]
    Cloud(#[from] CloudError),
    /// The engine thread could not start.
    #[error("the engine thread failed: {0}")]
    Thread(String),
}

/// A loaded edge model with its router and cloud settings.
pub struct Engine {
    weights: EdgeWeights,
    router: Box<dyn Router>,
    /// One client for every conversation: its connections and what it learnt of the
    /// endpoint are shared (see [`CloudClient`]).
    cloud: Option<CloudClient>,
    options: LocalOptions,
    decode: DecodeOptions,
    budget: LiveBudget,
    spend: SpendLedger,
    notices: Vec<String>,
    /// What `tandem chat` and `tandem generate` answer with.
    chat_defaults: ChatSettings,
}

impl Engine {
    /// Loads what start-up settled (see [`crate::startup`], which every front end starts
    /// from).
    pub fn open(settled: &Settled, paths: &Paths) -> Result<Engine, OpenError> {
        let config = &settled.config;
        let weights = EdgeWeights::load(&settled.edge_path, &config.edge)?;
        let mut notices = Vec::new();
        // Only a trained router checks the pair; hashing a GGUF given by path costs seconds.
        let pair = if config.router.kind == RouterKind::Mlp {
            settled.pair(config.cloud.model.as_deref().unwrap_or_default())?
        } else {
            ModelPair::default()
        };
        let (router, notice) =
            router::build(config.router.kind, config.router.path.as_deref(), &pair);
        notices.extend(notice);
        let cloud = config
            .cloud
            .endpoint()
            .map(|url| {
                let (cloud, notice) = CloudConfig::from_settings(url, &config.cloud);
                notices.extend(notice);
                CloudClient::new(cloud)
            })
            .transpose()?;
        let options = LocalOptions {
            n_ctx: config.context,
            threads: config.threads.unwrap_or_else(default_threads),
            hidden_state: router.needs_hidden_state(),
        };
        let decode = DecodeOptions {
            max_tokens: config.max_tokens,
            span: config.cloud.span.max(1),
            sampling: config.sampling,
            overlap: config.cloud.overlap,
            ask_ahead: config.cloud.ask_ahead,
        };
        Ok(Engine {
            weights,
            router,
            cloud,
            options,
            decode,
            budget: LiveBudget::new(config.budget),
            spend: SpendLedger::new(&paths.data),
            notices,
            chat_defaults: config.chat_settings(),
        })
    }

    /// Things the user should know about how the engine started (e.g. a router fallback).
    pub fn notices(&self) -> &[String] {
        &self.notices
    }

    /// The budget, shared with whoever changes it while replies run.
    pub fn budget(&self) -> &LiveBudget {
        &self.budget
    }

    /// The cloud endpoint, if one is configured.
    pub fn cloud_url(&self) -> Option<&str> {
        self.cloud.as_ref().map(|c| c.config().base_url.as_str())
    }

    /// A new conversation with its own KV cache.
    pub fn chat(&self) -> Result<Chat<'_>, OpenError> {
        Ok(Chat {
            engine: self,
            edge: self.weights.session(&self.options)?,
            cloud: self.cloud.clone(),
            messages: Vec::new(),
            settings: self.chat_defaults.clone(),
        })
    }
}

/// One conversation: its messages and the KV cache that holds them.
pub struct Chat<'e> {
    engine: &'e Engine,
    edge: LocalModel<'e>,
    cloud: Option<CloudClient>,
    /// User and assistant turns, oldest first (the system prompt is in `settings`).
    messages: Vec<Message>,
    /// What [`Chat::send`] answers with.
    settings: ChatSettings,
}

impl Chat<'_> {
    /// Sets the system prompt of the turns that follow.
    pub fn system(&mut self, text: &str) {
        self.settings.system_prompt = text.to_owned();
    }

    /// Sends a user message and streams the reply into `sink`. The reply joins the history.
    pub fn send(&mut self, user: &str, sink: &mut dyn EventSink) -> Result<Usage, ReplyError> {
        self.messages.push(Message::user(user));
        let settings = self.settings.clone();
        self.respond(ReplyMode::Routed, &settings, sink)
    }

    /// Answers the last message of `history` (user and assistant turns, oldest first) in
    /// `mode` with a conversation's `settings`; the conversation becomes `history` plus the
    /// reply. The KV cache is reused up to the first token that differs, so switching
    /// conversations or regenerating only decodes what changed.
    pub fn reply(
        &mut self,
        history: &[Message],
        mode: ReplyMode,
        settings: &ChatSettings,
        sink: &mut dyn EventSink,
    ) -> Result<Usage, ReplyError> {
        self.messages = history.to_vec();
        self.respond(mode, settings, sink)
    }

    /// The messages both models see for the next reply, with the turns left out, or why
    /// there is no room to answer.
    fn window(&self, settings: &ChatSettings, reserve: usize) -> Result<View, ReplyError> {
        let weights = &self.engine.weights;
        let capacity = self.edge.context_size();
        let system: Vec<Message> = settings.system_message().into_iter().collect();
        // The template's own tokens: the system prompt, an empty turn and the reply's header.
        let frame = [system.clone(), vec![Message::user("")]].concat();
        let frame = weights.tokenize(&weights.chat_prompt(&frame)?, true).len();
        let costs: Vec<usize> = (self.messages.iter())
            .map(|m| weights.tokenize(&m.content, false).len() + MESSAGE_FRAME_TOKENS)
            .collect();
        let room = capacity.saturating_sub(frame + reserve);
        let left_out = match window::left_out(&self.messages, &costs, room, settings.context_policy)
        {
            Ok(left_out) => left_out,
            Err(Overflow::Stopped) => {
                return Ok(View::Full(format!(
                    "the conversation fills the {capacity}-token context window: start a new \
                     one, or let earlier turns leave the model's view (chat settings)"
                )))
            }
            Err(Overflow::MessageTooLong) => {
                return Ok(View::Full(format!(
                    "this message does not fit the {capacity}-token context window with room \
                     for a reply: shorten it, or raise the context size in Settings"
                )))
            }
        };
        let messages = [system, window::visible(&self.messages, &left_out)].concat();
        Ok(View::Fits { messages, left_out })
    }

    fn respond(
        &mut self,
        mode: ReplyMode,
        settings: &ChatSettings,
        sink: &mut dyn EventSink,
    ) -> Result<Usage, ReplyError> {
        let span = self.engine.decode.span as usize;
        let reserve = (settings.max_tokens as usize + span + 1).min(self.edge.context_size() / 2);
        let (messages, left_out) = match self.window(settings, reserve)? {
            View::Fits { messages, left_out } => (messages, left_out),
            View::Full(message) => return Ok(self.unanswered(message, sink)),
        };
        let prompt = self
            .edge
            .tokenize(&self.engine.weights.chat_prompt(&messages)?, true);
        if prompt.len() + reserve > self.edge.context_size() {
            // The window's estimate fell short (it counts generously, so this is rare).
            let message = "the conversation's last turns fill the context window".to_owned();
            return Ok(self.unanswered(message, sink));
        }
        if !left_out.is_empty() {
            // A stop asked for now is seen at `started`, which ends the reply as cancelled.
            sink.emit(Event::LeftOut {
                from: left_out.start as u32,
                to: left_out.end as u32,
            });
        }
        let capped = self.engine.budget.get().daily_spend_cap_usd.is_some();
        if capped && self.engine.spend.today_usd().is_infinite() {
            sink.emit(Event::Notice {
                kind: NoticeKind::SpendUnknown,
                message:
                    "today's spend record was unreadable (kept beside it as spend.json.bad-…); \
                          the daily cap counts as reached until tomorrow"
                        .into(),
            });
        }
        let mut collect = ReplySink {
            inner: sink,
            reply: String::new(),
            spend: &self.engine.spend,
        };
        let cloud_only = FixedRouter(1.0);
        let (router, budget, cloud) = match mode {
            ReplyMode::Routed => (
                self.engine.router.as_ref(),
                self.engine.budget.clone(),
                self.cloud.as_mut(),
            ),
            ReplyMode::Edge => (
                self.engine.router.as_ref(),
                LiveBudget::new(CloudBudget::off()),
                None,
            ),
            ReplyMode::Cloud => (
                &cloud_only as &dyn Router,
                LiveBudget::new(CloudBudget {
                    enabled: true,
                    max_share: Share::ALL,
                    max_cloud_tokens: None,
                    ..self.engine.budget.get()
                }),
                self.cloud.as_mut(),
            ),
        };
        let collaboration = Collaboration {
            edge: &mut self.edge,
            cloud: cloud.map(|c| c as &mut dyn Cloud),
            router,
            budget: &budget,
            messages: &messages,
            spend: Some(&self.engine.spend),
        };
        let options = DecodeOptions {
            max_tokens: settings.max_tokens,
            sampling: settings.sampling(self.engine.decode.sampling),
            ..self.engine.decode
        };
        let usage = decode::generate(collaboration, &prompt, &options, &mut collect)?;
        self.messages.push(Message::assistant(collect.reply));
        Ok(usage)
    }

    /// Ends a reply that has no room: the reason, then `finished` with `context_full`; the
    /// conversation gets an empty reply, as the app saves one.
    fn unanswered(&mut self, message: String, sink: &mut dyn EventSink) -> Usage {
        sink.emit(Event::Notice {
            kind: NoticeKind::ContextFull,
            message,
        });
        sink.emit(Event::Finished {
            reason: FinishReason::ContextFull,
            usage: Usage::default(),
            timings: Timings::default(),
        });
        self.messages.push(Message::assistant(""));
        Usage::default()
    }

    /// Forgets the conversation (the KV cache is reused from its first differing token).
    pub fn reset(&mut self) {
        self.messages.clear();
    }
}

/// What the models see of a conversation for its next reply.
enum View {
    /// These messages (the system prompt first); the turns in `left_out` are not among them.
    Fits {
        messages: Vec<Message>,
        left_out: Range<usize>,
    },
    /// No window fits: why, in a sentence for the user.
    Full(String),
}

/// Tokens a turn's template adds around its text, counted generously (Qwen's and SmolLM2's
/// add five) so that a window that fits by the estimate fits the real prompt.
const MESSAGE_FRAME_TOKENS: usize = 8;

/// Passes a reply's events on, keeping its text, and puts today's token counts on disk before
/// anyone hears the reply finished (so a meter read right after it counts this reply; its
/// spend was booked request by request).
struct ReplySink<'a> {
    inner: &'a mut dyn EventSink,
    reply: String,
    spend: &'a SpendLedger,
}

impl ReplySink<'_> {
    fn record(&mut self, usage: &Usage) {
        if let Err(e) = self.spend.add_tokens(usage) {
            self.inner.emit(Event::Notice {
                kind: NoticeKind::SpendNotSaved,
                message: format!("could not record today's cloud spend: {e}"),
            });
        }
    }
}

impl EventSink for ReplySink<'_> {
    fn emit(&mut self, event: Event) -> bool {
        match &event {
            Event::Token { text, .. } => self.reply.push_str(text),
            Event::Finished { usage, .. } => self.record(usage),
            _ => {}
        }
        self.inner.emit(event)
    }

    fn stop_requested(&self) -> bool {
        self.inner.stop_requested()
    }
}

/// Why a reply failed: its prompt could not be rendered or the edge model failed.
#[derive(Debug, thiserror::Error)]
pub enum ReplyError {
    /// The chat could not be rendered.
    #[error(transparent)]
    Template(#[from] LoadError),
    /// The edge model failed.
    #[error(transparent)]
    Edge(#[from] EdgeError),
}
