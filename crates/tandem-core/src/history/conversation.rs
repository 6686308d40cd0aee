//! A conversation as the app holds it: its messages, each reply with every event it
//! streamed, and what the sidebar shows of it.

use crate::chat_settings::ChatSettings;
use crate::event::Event;
use crate::message::{Message as Turn, Role};
use serde::{Deserialize, Serialize};
use std::time::{SystemTime, UNIX_EPOCH};

/// How one reply may use the cloud.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplyMode {
    /// The router and the budget decide, token by token.
    #[default]
    Routed,
    /// Nothing leaves the machine: no cloud client is even asked.
    Edge,
    /// Every token from the cloud (for comparison), within the daily spend cap.
    Cloud,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// Its text.
    pub content: String,
    /// For replies: how the cloud could be used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ReplyMode>,
    /// For replies: every event, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<Event>,
}

/// A conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Conversation {
    /// Its id (also its file name).
    pub id: String,
    /// Shown in the sidebar.
    pub title: String,
    /// When it was created, in milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// When it last changed.
    pub updated_ms: u64,
    /// Replies never use the cloud.
    #[serde(default)]
    pub local_only: bool,
    /// How its replies are written, once the user set them for this chat; until then (and
    /// in conversations saved before chats had settings) it follows Settings.
    #[serde(default)]
    pub settings: Option<ChatSettings>,
    /// Oldest first.
    pub messages: Vec<Message>,
}

/// What the sidebar lists.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConversationSummary {
    /// Its id.
    pub id: String,
    /// Its title.
    pub title: String,
    /// When it last changed.
    pub updated_ms: u64,
    /// Replies never use the cloud.
    pub local_only: bool,
    /// The start of its last message.
    pub preview: String,
}

/// The title a new conversation starts with.
pub const UNTITLED: &str = "New chat";
const TITLE_CHARS: usize = 48;
const PREVIEW_CHARS: usize = 80;

pub(super) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn shorten(text: &str, chars: usize) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(chars) {
        Some((cut, _)) => format!("{}…", line[..cut].trim_end()),
        None => line,
    }
}

impl Conversation {
    /// An empty, untitled conversation that follows Settings.
    pub fn new(id: String, now_ms: u64) -> Self {
        Self {
            id,
            title: UNTITLED.to_owned(),
            created_ms: now_ms,
            updated_ms: now_ms,
            local_only: false,
            settings: None,
            messages: Vec::new(),
        }
    }

    /// The messages the engine answers (without the replies' events).
    pub fn turns(&self) -> Vec<Turn> {
        self.messages
            .iter()
            .map(|m| Turn {
                role: m.role,
                content: m.content.clone(),
            })
            .collect()
    }

    /// How its replies may use the cloud: a conversation locked to this machine never asks.
    pub fn reply_mode(&self) -> ReplyMode {
        if self.local_only {
            ReplyMode::Edge
        } else {
            ReplyMode::Routed
        }
    }

    /// Adds the user's message; the first one also names the conversation.
    pub fn push_user(&mut self, text: &str) {
        if self.title == UNTITLED && !self.messages.iter().any(|m| m.role == Role::User) {
            self.title = shorten(text, TITLE_CHARS);
        }
        self.messages.push(Message {
            role: Role::User,
            content: text.to_owned(),
            mode: None,
            events: Vec::new(),
        });
    }

    /// Adds a reply from its events.
    pub fn push_reply(&mut self, mode: ReplyMode, events: Vec<Event>) {
        let content = events
            .iter()
            .filter_map(|e| match e {
                Event::Token { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        self.messages.push(Message {
            role: Role::Assistant,
            content,
            mode: Some(mode),
            events,
        });
    }

    /// Removes a trailing reply, so the last user message can be answered again; returns
    /// whether there is a user message to answer.
    pub fn drop_last_reply(&mut self) -> bool {
        if self
            .messages
            .last()
            .is_some_and(|m| m.role == Role::Assistant)
        {
            self.messages.pop();
        }
        self.messages.last().is_some_and(|m| m.role == Role::User)
    }

    /// What the sidebar lists for it.
    pub fn summary(&self) -> ConversationSummary {
        ConversationSummary {
            id: self.id.clone(),
            title: self.title.clone(),
            updated_ms: self.updated_ms,
            local_only: self.local_only,
            preview: self
                .messages
                .last()
                .map(|m| shorten(&m.content, PREVIEW_CHARS))
                .unwrap_or_default(),
        }
    }

    pub(super) fn matches(&self, query: &str) -> bool {
        let query = query.to_lowercase();
        self.title.to_lowercase().contains(&query)
            || self
                .messages
                .iter()
                .any(|m| m.content.to_lowercase().contains(&query))
    }

    /// What its replies are written with: its own settings, else `defaults` (Settings').
    pub fn settings_or(&self, defaults: ChatSettings) -> ChatSettings {
        self.settings.clone().unwrap_or(defaults)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::fixtures::reply_events;

    #[test]
    fn regenerate_drops_only_a_trailing_reply() {
        let mut c = Conversation::new("1".into(), 0);
        assert!(!c.drop_last_reply(), "nothing to answer");
        c.push_user("hi");
        c.push_reply(ReplyMode::Routed, reply_events());
        assert!(c.drop_last_reply());
        assert_eq!(c.messages.len(), 1);
        assert!(
            c.drop_last_reply(),
            "the user message stays and can be answered"
        );
    }
}
