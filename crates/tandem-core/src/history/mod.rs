//! Conversations: what one is ([`conversation`]), how it is kept on disk ([`store`]) and
//! how it leaves as a document ([`export`]).
//!
//! An assistant message keeps every event of its reply, so the app re-renders a saved reply
//! exactly as it streamed (which tokens came from the cloud, their scores, what each request
//! sent, the footer) and an export carries the same provenance.

mod columns;
mod conversation;
mod export;
mod index;
mod store;
mod stored;

pub use crate::message::Role;
pub use conversation::{Conversation, ConversationSummary, Message, ReplyMode, UNTITLED};
pub use export::ExportFormat;
pub use store::{ConversationStore, HistoryError};

#[cfg(test)]
mod fixtures;
