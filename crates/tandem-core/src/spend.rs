//! Today's cloud use, kept on disk so the daily cap holds across replies and restarts, and
//! the app's meter can show today's spend and cloud share.
//!
//! Days are UTC calendar days; a new day starts from zero. The ledger fails closed: a file
//! that cannot be read is kept aside (`spend.json.bad-<seconds>`) and the rest of the day
//! counts as over any cap, since what was spent before is unknown. Updates from several
//! processes (the app and the CLI) take a lock on `spend.json.lock`.

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
    /// The ledger was unreadable that day: earlier spend is unknown, so a daily cap counts
    /// as reached until the day ends.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unknown_before: bool,
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

    /// What was spent today, as the daily cap sees it: unbounded when the ledger was
    /// unreadable today.
    pub fn today_usd(&self) -> f64 {
        let day = self.today();
        if day.unknown_before {
            f64::INFINITY
        } else {
            day.usd
        }
    }

    /// Today's use.
    pub fn today(&self) -> DayUse {
        self.read_day(today())
    }

    fn read_day(&self, day: u64) -> DayUse {
        let fresh = DayUse {
            day,
            ..DayUse::default()
        };
        let read = match std::fs::read(&self.path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return fresh,
            Err(_) => None,
            Ok(bytes) => serde_json::from_slice::<DayUse>(&bytes).ok(),
        };
        match read {
            Some(d) if d.day == day => d,
            Some(_) => fresh,
            None => self.set_aside(day),
        }
    }

    /// Keeps an unreadable ledger as `spend.json.bad-<seconds>` and starts today over as
    /// unknown, so the cap holds until tomorrow.
    fn set_aside(&self, day: u64) -> DayUse {
        let seconds = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut kept = self.path.clone().into_os_string();
        kept.push(format!(".bad-{seconds}"));
        let _ = std::fs::rename(&self.path, kept);
        let unknown = DayUse {
            day,
            unknown_before: true,
            ..DayUse::default()
        };
        let json = serde_json::to_vec(&unknown).expect("spend serializes");
        let _ = crate::atomic::write(&self.path, &json);
        unknown
    }

    /// Adds a reply's use to today's totals.
    pub fn add(&self, usage: &Usage) -> std::io::Result<()> {
        self.add_on(today(), usage)
    }

    fn add_on(&self, day: u64, usage: &Usage) -> std::io::Result<()> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let lock = std::fs::File::create(self.path.with_extension("json.lock"))?;
        lock.lock()?;
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
    fn a_corrupt_file_is_kept_aside_and_caps_the_rest_of_the_day() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("spend.json"), b"{garbage").unwrap();
        let ledger = SpendLedger::new(dir.path());
        assert_eq!(ledger.today_usd(), f64::INFINITY);
        let kept: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.starts_with("spend.json.bad-"))
            .collect();
        assert_eq!(kept.len(), 1, "the bad file is kept for the user");
        // Still unknown after more use today; a new day starts clean.
        ledger.add(&usage(0.2, 5, 5)).unwrap();
        assert_eq!(ledger.today_usd(), f64::INFINITY);
        assert_eq!(ledger.today().cloud_share(), 0.5);
        assert!(!ledger.read_day(today() + 1).unknown_before);
    }

    #[test]
    fn two_writers_lose_no_update() {
        let dir = tempfile::tempdir().unwrap();
        let writers: Vec<_> = (0..4)
            .map(|_| {
                let ledger = SpendLedger::new(dir.path());
                std::thread::spawn(move || {
                    for _ in 0..25 {
                        ledger.add_on(7, &usage(0.0, 1, 1)).unwrap();
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        assert_eq!(SpendLedger::new(dir.path()).read_day(7).cloud_tokens, 100);
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
