//! One message of a conversation: who wrote it and what it says.
//!
//! The same type travels from the saved history through the engine to the edge model's chat
//! template and to chat-mode clouds, so a role is never a loose string that could be misspelt
//! on the way.

use serde::{Deserialize, Serialize};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Instructions that frame the conversation.
    System,
    /// The user.
    User,
    /// The model (edge and cloud together).
    Assistant,
}

impl Role {
    /// The role name chat templates and OpenAI-compatible APIs use.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

impl std::str::FromStr for Role {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [Role::System, Role::User, Role::Assistant]
            .into_iter()
            .find(|role| role.as_str() == s)
            .ok_or_else(|| format!("unknown role '{s}' (expected system, user or assistant)"))
    }
}

/// A message: a role and its text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// Its text.
    pub content: String,
}

impl Message {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::new(Role::System, content)
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::new(Role::User, content)
    }

    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::new(Role::Assistant, content)
    }

    /// A message of `role`.
    pub fn new(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
        }
    }
}
