//! The sidebar's index: each conversation's summary beside the size and modification time
//! of the file it was read from, in `conversations/.index.json`, so listing a thousand
//! conversations reads one small file and the folder's entries instead of parsing every
//! conversation. A file whose size or time differs from its entry (saved since, by this
//! process, another one or a version without the index) is read again; an index that cannot
//! be read is rebuilt. It is a cache: losing it loses nothing.

use super::ConversationSummary;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

/// The index's file name: a leading dot, which no conversation id has.
pub(super) const FILE: &str = ".index.json";

/// A conversation file as the folder lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Stamp {
    len: u64,
    modified_ns: u128,
}

impl Stamp {
    /// The stamp of the file at `path`, if it can be read.
    pub(super) fn of(path: &Path) -> Option<Stamp> {
        let meta = std::fs::metadata(path).ok()?;
        let modified = meta.modified().ok()?.duration_since(UNIX_EPOCH).ok()?;
        Some(Stamp {
            len: meta.len(),
            modified_ns: modified.as_nanos(),
        })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Entry {
    stamp: Stamp,
    /// `None`: the file was unreadable as of this stamp (skipped until it changes).
    summary: Option<ConversationSummary>,
}

/// Summaries by conversation id.
#[derive(Debug, Default)]
pub(super) struct Index {
    path: PathBuf,
    entries: HashMap<String, Entry>,
}

impl Index {
    /// The index of the conversations in `dir` (empty when missing or unreadable).
    pub(super) fn open(dir: &Path) -> Index {
        let path = dir.join(FILE);
        let entries = std::fs::read(&path)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .unwrap_or_default();
        Index { path, entries }
    }

    /// The summaries of `files` (id and stamp), reading with `read` those the index does
    /// not hold as of their stamp; the index is saved when anything changed (a failed save
    /// only costs the next list the same reads).
    pub(super) fn summaries(
        mut self,
        files: Vec<(String, Stamp)>,
        read: impl Fn(&str) -> Option<ConversationSummary>,
    ) -> Vec<ConversationSummary> {
        let mut changed = files.len() != self.entries.len();
        let mut entries = HashMap::with_capacity(files.len());
        for (id, stamp) in files {
            let entry = match self.entries.remove(&id) {
                Some(entry) if entry.stamp == stamp => entry,
                _ => {
                    changed = true;
                    Entry {
                        stamp,
                        summary: read(&id),
                    }
                }
            };
            entries.insert(id, entry);
        }
        let summaries = entries.values().filter_map(|e| e.summary.clone()).collect();
        if changed {
            let json = serde_json::to_vec(&entries).expect("summaries serialize");
            let _ = crate::atomic::write(&self.path, &json);
        }
        summaries
    }
}
