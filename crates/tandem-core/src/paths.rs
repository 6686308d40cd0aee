//! Where Tandem keeps its files: the platform's config, data and cache folders.
//!
//! `TANDEM_HOME` puts all three under one folder instead, which keeps tests and CI runs
//! apart from a user's real files.

use crate::atomic;
use crate::history::ConversationStore;
use directories::ProjectDirs;
use std::path::PathBuf;

/// The three folders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    /// Settings (`config.toml`).
    pub config: PathBuf,
    /// Models, history, spend ledger.
    pub data: PathBuf,
    /// Anything that can be rebuilt.
    pub cache: PathBuf,
}

impl Paths {
    /// The folders for this user (or under `TANDEM_HOME`).
    pub fn discover() -> Paths {
        if let Some(home) = std::env::var_os("TANDEM_HOME") {
            let home = PathBuf::from(home);
            return Paths {
                config: home.join("config"),
                data: home.join("data"),
                cache: home.join("cache"),
            };
        }
        match ProjectDirs::from("dev", "tandem", "tandem") {
            Some(dirs) => Paths {
                config: dirs.config_dir().to_owned(),
                data: dirs.data_dir().to_owned(),
                cache: dirs.cache_dir().to_owned(),
            },
            // No home directory at all (a bare service account): stay in the working folder.
            None => Paths {
                config: PathBuf::from(".tandem/config"),
                data: PathBuf::from(".tandem/data"),
                cache: PathBuf::from(".tandem/cache"),
            },
        }
    }

    /// Where downloaded models live.
    pub fn models(&self) -> PathBuf {
        self.data.join("models")
    }

    /// Removes the temporary files killed writes left in the folders Tandem writes
    /// atomically (settings, spend ledger, conversations); returns how many.
    pub fn sweep_stray_temp_files(&self) -> usize {
        let conversations = ConversationStore::new(&self.data);
        [
            self.config.as_path(),
            self.data.as_path(),
            conversations.dir(),
        ]
        .into_iter()
        .map(atomic::sweep)
        .sum()
    }

    /// Where `tandem eval` leaves its latest results and chart, for the app to show.
    pub fn latest_evaluation(&self) -> PathBuf {
        self.data.join("eval").join("latest")
    }
}
