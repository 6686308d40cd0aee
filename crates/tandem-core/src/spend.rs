//! Today's cloud use, kept on disk so the daily cap holds across replies and restarts, and
//! the app's meter can show today's spend and cloud share.
//!
//! Days are UTC calendar days; a new day starts from zero.

use crate::event::Usage;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// What one day used.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct DayUse {
    /// Days since 1970-01-01 (UTC).
    pub day: u64,
    /// Estimated spend that day, in USD.
    pub usd: f64,
    /// Reply tokens written by the edge model that day.
    pub edge_tokens: u64,
    /// Reply tokens that came from the cloud that day.
    pub cloud_tokens: u64,
}

impl DayUse {
    /// Share of the day's reply tokens that came from the cloud.
    pub fn cloud_share(&self) -> f64 {
        let total = self.edge_tokens + self.cloud_tokens;
        if total == 0 {
            0.0
        } else {
            self.cloud_tokens as f64 / total as f64
        }
    }
}

/// The ledger file (`spend.json` in the data folder).
#[derive(Debug, Clone)]
pub struct SpendLedger {
    path: PathBuf,
}

fn today() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400)
}

impl SpendLedger {
    /// The ledger in `data_dir`.
    pub fn new(data_dir: &Path) -> Self {
        Self {
            path: data_dir.join("spend.json"),
        }
    }

    /// What was spent today (0 for a missing or unreadable file: the cap is a guard, not a
    /// reason to refuse to chat).
    pub fn today_usd(&self) -> f64 {
        self.today().usd
    }

    /// Today's use.
    pub fn today(&self) -> DayUse {
        self.read_day(today())
    }

    fn read_day(&self, day: u64) -> DayUse {
        std::fs::read(&self.path)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<DayUse>(&bytes).ok())
            .filter(|d| d.day == day)
            .unwrap_or(DayUse {
                day,
                ..DayUse::default()
            })
    }

    /// Adds a reply's use to today's totals.
    pub fn add(&self, usage: &Usage) -> std::io::Result<()> {
        self.add_on(today(), usage)
    }

    fn add_on(&self, day: u64, usage: &Usage) -> std::io::Result<()> {
        let mut total = self.read_day(day);
        total.usd += usage.est_cost_usd.max(0.0);
        total.edge_tokens += u64::from(usage.edge_tokens);
        total.cloud_tokens += u64::from(usage.cloud_tokens);
        let json = serde_json::to_vec(&total).expect("spend serializes");
        crate::atomic::write(&self.path, &json)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(usd: f64, edge: u32, cloud: u32) -> Usage {
        Usage {
            edge_tokens: edge,
            cloud_tokens: cloud,
            est_cost_usd: usd,
            ..Usage::default()
        }
    }

    #[test]
    fn use_adds_up_within_a_day_and_restarts_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = SpendLedger::new(dir.path());
        assert_eq!(ledger.read_day(100).usd, 0.0);
        ledger.add_on(100, &usage(0.25, 30, 10)).unwrap();
        ledger.add_on(100, &usage(0.5, 60, 0)).unwrap();
        let day = ledger.read_day(100);
        assert_eq!((day.usd, day.edge_tokens, day.cloud_tokens), (0.75, 90, 10));
        assert_eq!(day.cloud_share(), 0.1);
        assert_eq!(ledger.read_day(101).usd, 0.0, "a new day starts at zero");
        ledger.add_on(101, &usage(0.1, 1, 1)).unwrap();
        assert_eq!(ledger.read_day(101).usd, 0.1);
    }

    #[test]
    fn a_corrupt_file_counts_as_nothing_spent_and_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("spend.json"), b"{garbage").unwrap();
        let ledger = SpendLedger::new(dir.path());
        assert_eq!(ledger.today_usd(), 0.0);
        ledger.add(&usage(0.2, 5, 5)).unwrap();
        assert_eq!(ledger.today_usd(), 0.2);
        assert_eq!(ledger.today().cloud_share(), 0.5);
    }

    #[test]
    fn a_ledger_from_before_token_counts_still_reads() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = SpendLedger::new(dir.path());
        std::fs::write(&ledger.path, format!(r#"{{"day":{},"usd":0.3}}"#, today())).unwrap();
        assert_eq!(ledger.today().usd, 0.3);
        assert_eq!(ledger.today().cloud_tokens, 0);
    }
}
