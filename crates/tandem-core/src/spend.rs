//! Today's cloud spend, kept on disk so the daily cap holds across replies and restarts.
//!
//! Days are UTC calendar days; a new day starts from zero.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// Spend of one day.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
struct Day {
    /// Days since 1970-01-01 (UTC).
    day: u64,
    /// Estimated spend that day, in USD.
    usd: f64,
}

/// The spend file (`spend.json` in the data folder).
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
        self.read_day(today())
    }

    fn read_day(&self, day: u64) -> f64 {
        std::fs::read(&self.path)
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Day>(&bytes).ok())
            .filter(|d| d.day == day)
            .map_or(0.0, |d| d.usd)
    }

    /// Adds a reply's spend to today's total.
    pub fn add(&self, usd: f64) -> std::io::Result<()> {
        self.add_on(today(), usd)
    }

    fn add_on(&self, day: u64, usd: f64) -> std::io::Result<()> {
        if usd <= 0.0 {
            return Ok(());
        }
        let total = Day {
            day,
            usd: self.read_day(day) + usd,
        };
        let json = serde_json::to_vec(&total).expect("spend serializes");
        crate::atomic::write(&self.path, &json)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spend_adds_up_within_a_day_and_restarts_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = SpendLedger::new(dir.path());
        assert_eq!(ledger.read_day(100), 0.0);
        ledger.add_on(100, 0.25).unwrap();
        ledger.add_on(100, 0.5).unwrap();
        assert_eq!(ledger.read_day(100), 0.75);
        assert_eq!(ledger.read_day(101), 0.0, "a new day starts at zero");
        ledger.add_on(101, 0.1).unwrap();
        assert_eq!(ledger.read_day(101), 0.1);
    }

    #[test]
    fn a_corrupt_file_counts_as_nothing_spent_and_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("spend.json"), b"{garbage").unwrap();
        let ledger = SpendLedger::new(dir.path());
        assert_eq!(ledger.today_usd(), 0.0);
        ledger.add(0.2).unwrap();
        assert_eq!(ledger.today_usd(), 0.2);
    }
}
