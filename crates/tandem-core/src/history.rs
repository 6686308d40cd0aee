//! Conversations on disk: one JSON file each in the data folder, written atomically.
//!
//! An assistant message keeps every event of its reply, so the app re-renders a saved reply
//! exactly as it streamed (which tokens came from the cloud, their scores, what each request
//! sent, the footer) and an export carries the same provenance. A file that cannot be read is
//! left alone, never overwritten: ids are fresh for every new conversation.

use crate::chat_settings::ChatSettings;
use crate::engine::ReplyMode;
use crate::event::{Event, TokenSource};
use crate::message::Message as Turn;
pub use crate::message::Role;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

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

/// What a conversation is exported as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExportFormat {
    /// Readable text with each reply's provenance.
    Markdown,
    /// The conversation as saved: every event of every reply.
    Json,
}

impl ExportFormat {
    /// The file name extension.
    pub fn extension(self) -> &'static str {
        match self {
            ExportFormat::Markdown => "md",
            ExportFormat::Json => "json",
        }
    }

    /// What the save dialog calls such files.
    pub fn description(self) -> &'static str {
        match self {
            ExportFormat::Markdown => "Markdown",
            ExportFormat::Json => "JSON",
        }
    }
}

/// The title a new conversation starts with.
pub const UNTITLED: &str = "New chat";
const TITLE_CHARS: usize = 48;
const PREVIEW_CHARS: usize = 80;

fn now_ms() -> u64 {
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

    fn matches(&self, query: &str) -> bool {
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

    /// The file's contents in `format`, with the settings its replies are written with
    /// (`defaults` where the chat has none of its own).
    pub fn export(&self, format: ExportFormat, defaults: ChatSettings) -> String {
        let settings = self.settings_or(defaults);
        match format {
            ExportFormat::Markdown => self.to_markdown(&settings),
            ExportFormat::Json => serde_json::to_string_pretty(&Conversation {
                settings: Some(settings),
                ..self.clone()
            })
            .expect("conversations serialize"),
        }
    }

    /// A file name for the export: the title without what file systems refuse or hide.
    pub fn export_file_name(&self, format: ExportFormat) -> String {
        let safe: String = (self.title.chars())
            .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '_' | '-'))
            .collect();
        let stem = Some(safe.trim())
            .filter(|s| !s.is_empty())
            .unwrap_or("chat");
        format!("{stem}.{}", format.extension())
    }

    /// The conversation as Markdown; each reply ends with its provenance: counts, cost, and
    /// every cloud token with its score, the edge token it replaced and the request latency.
    fn to_markdown(&self, s: &ChatSettings) -> String {
        let mut out = format!(
            "# {}\n\n> temperature {} · top-p {} · up to {} tokens per reply · long \
             conversations: {}\n\n",
            self.title,
            s.temperature,
            s.top_p,
            s.max_tokens,
            s.context_policy.describe()
        );
        if let Some(system) = s.system_message() {
            out.push_str(&format!("## System prompt\n\n{}\n\n", system.content));
        }
        for m in &self.messages {
            match m.role {
                Role::System => out.push_str(&format!("## System\n\n{}\n\n", m.content)),
                Role::User => out.push_str(&format!("## You\n\n{}\n\n", m.content)),
                Role::Assistant => {
                    out.push_str(&format!("## Tandem\n\n{}\n\n", m.content));
                    out.push_str(&provenance_markdown(&m.events));
                }
            }
        }
        out
    }
}

fn provenance_markdown(events: &[Event]) -> String {
    let mut out = String::new();
    for e in events {
        if let Event::Finished { usage, .. } = e {
            out.push_str(&format!(
                "> edge {} · cloud {} ({:.1}%) · {} requests · ${:.4}\n",
                usage.edge_tokens,
                usage.cloud_tokens,
                usage.cloud_share() * 100.0,
                usage.cloud_requests,
                usage.est_cost_usd
            ));
        }
    }
    let cloud: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            Event::Token {
                text,
                source: TokenSource::Cloud,
                score,
                edge_candidate,
                request_ms,
                ..
            } => Some(format!(
                "| {:?} | {score:.3} | {:?} | {} |",
                text,
                edge_candidate.as_deref().unwrap_or(""),
                request_ms.map_or("–".into(), |ms| format!("{ms} ms"))
            )),
            _ => None,
        })
        .collect();
    if !cloud.is_empty() {
        out.push_str(
            "\n| cloud token | score | replaced edge token | latency |\n|---|---|---|---|\n",
        );
        out.push_str(&cloud.join("\n"));
        out.push('\n');
    }
    out.push('\n');
    out
}

/// Why a conversation could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// No conversation has this id.
    #[error("no conversation '{0}'")]
    NotFound(String),
    /// The file exists but is not a conversation.
    #[error("conversation file {path} is unreadable ({detail}); it was left untouched")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        detail: String,
    },
    /// The disk refused (full, read-only, …).
    #[error("could not save conversations in {path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// The conversations folder.
#[derive(Debug, Clone)]
pub struct ConversationStore {
    dir: PathBuf,
}

impl ConversationStore {
    /// Conversations in `data_dir/conversations`.
    pub fn new(data_dir: &Path) -> Self {
        Self {
            dir: data_dir.join("conversations"),
        }
    }

    /// The folder the conversations are in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, id: &str) -> Result<PathBuf, HistoryError> {
        // Ids come from the UI: only ours (digits, letters, dashes) may name a file.
        let valid = !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
        if !valid {
            return Err(HistoryError::NotFound(id.to_owned()));
        }
        Ok(self.dir.join(format!("{id}.json")))
    }

    /// A new, empty conversation, saved.
    pub fn create(&self) -> Result<Conversation, HistoryError> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let now = now_ms();
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let id = format!("{now:x}-{:x}-{n:x}", std::process::id());
        let mut conversation = Conversation::new(id, now);
        self.save(&mut conversation)?;
        Ok(conversation)
    }

    /// Reads one conversation.
    pub fn get(&self, id: &str) -> Result<Conversation, HistoryError> {
        let path = self.path(id)?;
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(HistoryError::NotFound(id.to_owned()))
            }
            Err(source) => return Err(HistoryError::Io { path, source }),
        };
        serde_json::from_slice(&bytes).map_err(|e| HistoryError::Corrupt {
            path,
            detail: e.to_string(),
        })
    }

    /// Writes a conversation (whole, atomically) and stamps its update time.
    pub fn save(&self, conversation: &mut Conversation) -> Result<(), HistoryError> {
        let path = self.path(&conversation.id)?;
        conversation.updated_ms = now_ms().max(conversation.updated_ms);
        let json = serde_json::to_vec(conversation).expect("conversations serialize");
        crate::atomic::write(&path, &json).map_err(|source| HistoryError::Io { path, source })
    }

    /// Deletes a conversation.
    pub fn delete(&self, id: &str) -> Result<(), HistoryError> {
        let path = self.path(id)?;
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err(HistoryError::NotFound(id.to_owned()))
            }
            Err(source) => Err(HistoryError::Io { path, source }),
        }
    }

    /// Conversations whose title or messages contain `query` (all when empty), newest first.
    /// Unreadable files are skipped (and kept).
    pub fn list(&self, query: &str) -> Result<Vec<ConversationSummary>, HistoryError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => {
                return Err(HistoryError::Io {
                    path: self.dir.clone(),
                    source,
                })
            }
        };
        let query = query.trim();
        let mut found: Vec<ConversationSummary> = entries
            .filter_map(|entry| {
                let name = entry.ok()?.file_name();
                let id = name.to_str()?.strip_suffix(".json")?.to_owned();
                self.get(&id).ok()
            })
            .filter(|c| query.is_empty() || c.matches(query))
            .map(|c| c.summary())
            .collect();
        found.sort_by(|a, b| b.updated_ms.cmp(&a.updated_ms).then(b.id.cmp(&a.id)));
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{FinishReason, Timings, Usage};

    fn reply_events() -> Vec<Event> {
        vec![
            Event::Token {
                text: "Blue".into(),
                id: 1,
                source: TokenSource::Cloud,
                score: 0.9,
                edge_candidate: Some("Red".into()),
                request_ms: Some(120),
            },
            Event::Token {
                text: ".".into(),
                id: 2,
                source: TokenSource::Edge,
                score: 0.1,
                edge_candidate: None,
                request_ms: None,
            },
            Event::Finished {
                reason: FinishReason::Stop,
                usage: Usage {
                    edge_tokens: 1,
                    cloud_tokens: 1,
                    cloud_requests: 1,
                    ..Usage::default()
                },
                timings: Timings::default(),
            },
        ]
    }

    /// A conversation of one question and its routed reply, saved in `store`.
    fn sky_question(store: &ConversationStore) -> Conversation {
        let mut c = store.create().unwrap();
        c.push_user("What colour is the sky on a clear day, usually?");
        c.push_reply(ReplyMode::Routed, reply_events());
        store.save(&mut c).unwrap();
        c
    }

    #[test]
    fn conversations_survive_a_reopen_with_their_provenance() {
        let dir = tempfile::tempdir().unwrap();
        let store = ConversationStore::new(dir.path());
        let c = sky_question(&store);

        let again = ConversationStore::new(dir.path()).get(&c.id).unwrap();
        assert_eq!(again, c);
        assert_eq!(
            again.title,
            "What colour is the sky on a clear day, usually?"
        );
        assert_eq!(again.messages[1].content, "Blue.");
        assert_eq!(again.messages[1].events, reply_events());
        assert_eq!(
            again.turns(),
            vec![
                Turn::user(again.messages[0].content.clone()),
                Turn::assistant("Blue.")
            ]
        );
    }

    #[test]
    fn list_is_newest_first_and_search_looks_into_messages() {
        let dir = tempfile::tempdir().unwrap();
        let store = ConversationStore::new(dir.path());
        let mut a = store.create().unwrap();
        a.push_user("Tell me about otters");
        store.save(&mut a).unwrap();
        let mut b = store.create().unwrap();
        b.push_user("Rust lifetimes");
        b.push_reply(ReplyMode::Edge, reply_events());
        b.updated_ms = a.updated_ms + 10;
        store.save(&mut b).unwrap();

        let all = store.list("").unwrap();
        assert_eq!(
            all.iter().map(|s| s.title.as_str()).collect::<Vec<_>>(),
            ["Rust lifetimes", "Tell me about otters"]
        );
        assert_eq!(all[0].preview, "Blue.");
        let found = store.list("BLUE").unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].id, b.id);
        store.delete(&a.id).unwrap();
        assert_eq!(store.list("").unwrap().len(), 1);
        assert!(matches!(store.get(&a.id), Err(HistoryError::NotFound(_))));
    }

    #[test]
    fn a_corrupt_file_is_reported_skipped_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = ConversationStore::new(dir.path());
        let good = store.create().unwrap();
        let broken = dir.path().join("conversations/0-bad.json");
        std::fs::write(&broken, b"{\"id\": ").unwrap();
        assert!(matches!(
            store.get("0-bad"),
            Err(HistoryError::Corrupt { .. })
        ));
        let listed = store.list("").unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].id, good.id);
        assert_eq!(std::fs::read(&broken).unwrap(), b"{\"id\": ");
    }

    #[test]
    fn ids_cannot_reach_outside_the_folder() {
        let dir = tempfile::tempdir().unwrap();
        let store = ConversationStore::new(dir.path());
        for id in ["../config", "a/b", "", "x.json"] {
            assert!(
                matches!(store.get(id), Err(HistoryError::NotFound(_))),
                "{id}"
            );
        }
    }

    #[test]
    fn export_file_names_keep_the_title_and_nothing_a_path_could_use() {
        let mut c = Conversation::new("1".into(), 0);
        c.title = "../../etc/passwd: a \"title\"".into();
        assert_eq!(
            c.export_file_name(ExportFormat::Markdown),
            "etcpasswd a title.md"
        );
        c.title = "///".into();
        assert_eq!(c.export_file_name(ExportFormat::Json), "chat.json");
        // A chat without settings of its own is exported with the ones it is answered with.
        let json = c.export(ExportFormat::Json, ChatSettings::default());
        let json: Conversation = serde_json::from_str(&json).unwrap();
        assert_eq!(json.settings, Some(ChatSettings::default()));
        assert_eq!(json.messages, c.messages);
    }

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

    #[test]
    fn markdown_export_says_how_the_chat_was_answered_and_lists_cloud_tokens() {
        let settings = ChatSettings {
            system_prompt: "Be brief.".into(),
            ..ChatSettings::default()
        };
        let mut c = Conversation::new("1".into(), 0);
        c.push_user("Sky?");
        c.push_reply(ReplyMode::Routed, reply_events());
        let md = c.export(ExportFormat::Markdown, settings);
        assert!(
            md.starts_with(
                "# Sky?\n\n> temperature 0 · top-p 0.95 · up to 256 tokens per reply · long \
                 conversations: the oldest turns leave the model's view\n\n## System prompt\n\n\
                 Be brief.\n\n## You\n\nSky?\n\n## Tandem\n\nBlue.\n"
            ),
            "{md}"
        );
        assert!(md.contains("edge 1 · cloud 1 (50.0%) · 1 requests"), "{md}");
        assert!(
            md.contains("| \"Blue\" | 0.900 | \"Red\" | 120 ms |"),
            "{md}"
        );
    }

    /// The child half of the kill test below: saves one growing conversation and adds to
    /// today's spend, in a loop, until it is killed. Does nothing when run on its own.
    #[test]
    #[ignore = "run as a child process by a_process_killed_while_saving_loses_nothing_saved"]
    fn keeps_saving_until_killed() {
        let Some(dir) = std::env::var_os("TANDEM_KILL_TEST_DIR") else {
            return;
        };
        let dir = PathBuf::from(dir);
        let store = ConversationStore::new(&dir);
        let ledger = crate::spend::SpendLedger::new(&dir);
        let spent = Usage {
            cloud_tokens: 1,
            est_cost_usd: 0.001,
            ..Usage::default()
        };
        loop {
            let mut c = store
                .get("c-kept")
                .unwrap_or_else(|_| Conversation::new("c-kept".into(), 0));
            c.push_user(&"a user's words ".repeat(100));
            c.push_reply(ReplyMode::Routed, reply_events());
            store.save(&mut c).unwrap();
            ledger.add_tokens(&spent).unwrap();
        }
    }

    /// A process killed (SIGKILL) at 20 random moments while it saves: every time, the
    /// conversation loads whole with everything saved before, and so does today's spend.
    #[test]
    fn a_process_killed_while_saving_loses_nothing_saved() {
        let dir = tempfile::tempdir().unwrap();
        let store = ConversationStore::new(dir.path());
        let ledger = crate::spend::SpendLedger::new(dir.path());
        let mut moments = crate::sampling::SplitMix64::new(20);
        let (mut messages, mut cloud_tokens) = (0, 0);
        for _ in 0..20 {
            let mut child = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "history::tests::keeps_saving_until_killed"])
                .args(["--ignored", "--test-threads=1"])
                .env("TANDEM_KILL_TEST_DIR", dir.path())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            let after_ms = 80 + (moments.next_f64() * 300.0) as u64;
            std::thread::sleep(std::time::Duration::from_millis(after_ms));
            child.kill().unwrap(); // SIGKILL: no destructor, no flush
            child.wait().unwrap();
            if let Ok(c) = store.get("c-kept") {
                assert!(c.messages.len() >= messages, "saved messages were lost");
                messages = c.messages.len();
            } else {
                assert_eq!(messages, 0, "a conversation on disk stopped loading");
            }
            let today = ledger.today();
            assert!(!today.unknown_before, "the spend ledger was damaged");
            assert!(
                today.cloud_tokens >= cloud_tokens,
                "recorded spend was lost"
            );
            cloud_tokens = today.cloud_tokens;
        }
        assert!(messages > 0 && cloud_tokens > 0, "the child never saved");
        assert_eq!(store.list("").unwrap().len(), 1);
    }

    /// The child half of the full-disk test below: under a file size limit, a save that
    /// does not fit must fail with the reason.
    #[test]
    #[ignore = "run as a child process by a_save_that_does_not_fit_fails_clearly_and_keeps_the_file"]
    fn saves_past_a_file_size_limit() {
        let Some(dir) = std::env::var_os("TANDEM_FULL_TEST_DIR") else {
            return;
        };
        let store = ConversationStore::new(Path::new(&dir));
        let mut c = store.get("c-full").unwrap();
        c.push_user(&"x".repeat(200_000));
        let err = store.save(&mut c).unwrap_err().to_string();
        assert!(
            err.contains("c-full.json") && err.contains("too large"),
            "{err}"
        );
    }

    /// A disk that fills up mid-save (here: a 64 KiB file size limit, as `ulimit -f` sets,
    /// since the tests run as root and a read-only folder would not stop them): the save
    /// fails with a message naming the file and the reason, the file on disk is the one
    /// saved before, and no temporary file is left.
    #[test]
    fn a_save_that_does_not_fit_fails_clearly_and_keeps_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = ConversationStore::new(dir.path());
        let mut c = Conversation::new("c-full".into(), 0);
        c.push_user("What colour is the sky on a clear day, usually?");
        store.save(&mut c).unwrap();
        let before = std::fs::read(store.path("c-full").unwrap()).unwrap();
        let exe = std::env::current_exe().unwrap();
        let child = format!(
            "ulimit -f 64; trap '' XFSZ; exec '{}' --exact history::tests::saves_past_a_file_size_limit --ignored --test-threads=1",
            exe.display()
        );
        let out = std::process::Command::new("bash")
            .args(["-c", &child])
            .env("TANDEM_FULL_TEST_DIR", dir.path())
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success() && said.contains("1 passed"), "{said}");
        assert_eq!(
            std::fs::read(store.path("c-full").unwrap()).unwrap(),
            before
        );
        assert_eq!(
            std::fs::read_dir(store.dir()).unwrap().count(),
            1,
            "a temporary file is left"
        );
    }

    proptest::proptest! {
        /// A conversation file damaged on disk (a byte changed, dropped or cut) loads as a
        /// conversation or a clear error, and whatever loads can be listed, shown and exported.
        #[test]
        fn a_damaged_conversation_file_loads_or_is_a_clear_error(
            at in 0usize..100_000,
            damage in crate::damage::kind(),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let store = ConversationStore::new(dir.path());
            let c = sky_question(&store);
            let path = store.path(&c.id).unwrap();
            let bytes = crate::damage::apply(std::fs::read(&path).unwrap(), at, damage);
            std::fs::write(&path, &bytes).unwrap();
            match store.get(&c.id) {
                Ok(loaded) => {
                    let _ = (loaded.summary(), loaded.export(ExportFormat::Markdown, ChatSettings::default()), loaded.turns(), loaded.reply_mode());
                }
                Err(e) => proptest::prop_assert!(matches!(e, HistoryError::Corrupt { .. }), "{e}"),
            }
            proptest::prop_assert!(store.list("").is_ok());
        }
    }
}
