//! Conversations on disk: one JSON file each in the data folder, written atomically, with
//! each cloud request's text stored as what it added ([`super::stored`]) and the sidebar read
//! from an index ([`super::index`]). A file that cannot be read is left alone, never
//! overwritten: ids are fresh for every new conversation.

use super::conversation::now_ms;
use super::index::{Index, Stamp};
use super::{stored, Conversation, ConversationSummary};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

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
        stored::from_file(&bytes).map_err(|detail| HistoryError::Corrupt { path, detail })
    }

    /// Writes a conversation (whole, atomically) and stamps its update time.
    pub fn save(&self, conversation: &mut Conversation) -> Result<(), HistoryError> {
        let path = self.path(&conversation.id)?;
        conversation.updated_ms = now_ms().max(conversation.updated_ms);
        let json = stored::to_file(conversation);
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
    /// Unreadable files are skipped (and kept). The whole list comes from the index; a search
    /// reads every conversation.
    pub fn list(&self, query: &str) -> Result<Vec<ConversationSummary>, HistoryError> {
        let files = self.files()?;
        let query = query.trim();
        let mut found: Vec<ConversationSummary> = if query.is_empty() {
            Index::open(&self.dir).summaries(files, |id| self.get(id).ok().map(|c| c.summary()))
        } else {
            files
                .iter()
                .filter_map(|(id, _)| self.get(id).ok())
                .filter(|c| c.matches(query))
                .map(|c| c.summary())
                .collect()
        };
        found.sort_by(|a, b| b.updated_ms.cmp(&a.updated_ms).then(b.id.cmp(&a.id)));
        Ok(found)
    }

    /// The conversation files in the folder: their ids and stamps.
    fn files(&self) -> Result<Vec<(String, Stamp)>, HistoryError> {
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
        Ok(entries
            .filter_map(|entry| {
                let path = entry.ok()?.path();
                let id = path.file_name()?.to_str()?.strip_suffix(".json")?;
                let id = self.path(id).ok().map(|_| id.to_owned())?;
                Some((id, Stamp::of(&path)?))
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chat_settings::ChatSettings;
    use crate::event::Usage;
    use crate::history::fixtures::reply_events;
    use crate::history::{ExportFormat, HistoryError, ReplyMode};
    use crate::message::Message as Turn;

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

    /// The sidebar comes from the index: a file unchanged since it was indexed is not read
    /// again, one saved since (here by a second store, as another process would) is, a
    /// deleted one leaves the list, and a damaged index is rebuilt from the files.
    #[test]
    fn the_sidebar_comes_from_the_index_and_follows_every_change() {
        let dir = tempfile::tempdir().unwrap();
        let store = ConversationStore::new(dir.path());
        let sky = sky_question(&store);
        let mut otters = store.create().unwrap();
        otters.push_user("Tell me about otters");
        store.save(&mut otters).unwrap();
        let titles = |store: &ConversationStore| {
            let mut t: Vec<_> = store
                .list("")
                .unwrap()
                .into_iter()
                .map(|s| s.title)
                .collect();
            t.sort();
            t
        };
        assert_eq!(
            titles(&store),
            [
                "Tell me about otters",
                "What colour is the sky on a clear day, usually?"
            ]
        );
        let index = store.dir().join(super::super::index::FILE);
        assert!(index.exists(), "listing wrote the index");

        // Same size, same time, other contents: the index is trusted, the file not read.
        let path = store.path(&otters.id).unwrap();
        let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
        let len = std::fs::metadata(&path).unwrap().len() as usize;
        std::fs::write(&path, vec![b'x'; len]).unwrap();
        let file = std::fs::File::options().write(true).open(&path).unwrap();
        file.set_modified(modified).unwrap();
        assert!(titles(&store).contains(&"Tell me about otters".to_owned()));

        // Saved elsewhere, and the index damaged: read again from the files, where the
        // one overwritten above is now unreadable (skipped, and kept).
        let elsewhere = ConversationStore::new(dir.path());
        let mut renamed = elsewhere.get(&sky.id).unwrap();
        renamed.title = "Renamed".into();
        elsewhere.save(&mut renamed).unwrap();
        std::fs::write(&index, b"{damaged").unwrap();
        assert_eq!(titles(&store), ["Renamed"]);
        assert!(path.exists());
        store.delete(&sky.id).unwrap();
        assert!(titles(&store).is_empty());
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
                .args([
                    "--exact",
                    "history::store::tests::keeps_saving_until_killed",
                ])
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
        // Letters at random: what compression cannot make fit.
        let mut random = crate::sampling::SplitMix64::new(7);
        let noise: String = (0..200_000)
            .map(|_| char::from(b'a' + (random.next_u64() % 26) as u8))
            .collect();
        c.push_user(&noise);
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
            "ulimit -f 64; trap '' XFSZ; exec '{}' --exact history::store::tests::saves_past_a_file_size_limit --ignored --test-threads=1",
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
