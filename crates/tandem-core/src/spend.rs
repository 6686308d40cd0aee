//! Today's cloud use, kept on disk so the daily cap holds across replies and restarts, and
//! the app's meter can show today's spend and cloud share.
//!
//! Days are UTC calendar days; a new day starts from zero. The ledger fails closed: a file
//! that cannot be read is kept aside (`spend.json.bad-<seconds>`) and the rest of the day
//! counts as over any cap, since what was spent before is unknown. Updates from several
//! processes (the app and the CLI) take a lock on `spend.json.lock`.
//!
//! The daily cap is enforced here, under that lock, one request at a time: before a request
//! is sent its worst case (the whole prompt and the whole span at the user's prices) is
//! [reserved](SpendLedger::reserve) in the file, so every process sees it at once, and the
//! reservation is [settled](Reservation::settle) with what the cloud billed when the answer
//! comes. A process killed mid-request leaves its reservation counted: the provider may
//! bill a request it received. Two processes spending at full speed therefore pass the cap
//! by at most what one answer billed beyond its estimate.

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
    /// Estimated spend that day, in USD, counting requests reserved and not yet settled.
    pub usd: f64,
    /// Of `usd`, the worst cases of requests not yet settled (a process killed mid-request
    /// leaves its reservation here).
    #[serde(skip_serializing_if = "is_zero")]
    pub reserved_usd: f64,
    /// Reply tokens written by the edge model that day.
    pub edge_tokens: u64,
    /// Reply tokens that came from the cloud that day.
    pub cloud_tokens: u64,
    /// The ledger was unreadable that day: earlier spend is unknown, so a daily cap counts
    /// as reached until the day ends.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unknown_before: bool,
}

fn is_zero(usd: &f64) -> bool {
    *usd == 0.0
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
            // Amounts that are not money (a hand-edited or damaged file) would open the cap.
            Ok(bytes) => serde_json::from_slice::<DayUse>(&bytes)
                .ok()
                .filter(|d| [d.usd, d.reserved_usd].iter().all(|v| *v >= 0.0)),
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
        let _ = crate::atomic::set_aside(&self.path);
        let unknown = DayUse {
            day,
            unknown_before: true,
            ..DayUse::default()
        };
        let json = serde_json::to_vec(&unknown).expect("spend serializes");
        let _ = crate::atomic::write(&self.path, &json);
        unknown
    }

    /// Adds a reply's tokens to today's totals (its spend was booked request by request).
    pub fn add_tokens(&self, usage: &Usage) -> std::io::Result<()> {
        self.update(today(), |total| {
            total.edge_tokens += u64::from(usage.edge_tokens);
            total.cloud_tokens += u64::from(usage.cloud_tokens);
            Ok(())
        })
        .map_err(std::io::Error::from)
    }

    /// Books `usd`, a request's worst case, before the request is sent, if today's spend
    /// with every other reservation leaves room under `cap`. Refused when it does not, when
    /// today's earlier spend is unknown, or when the ledger cannot be written while a cap is
    /// set (the cap cannot be kept without it).
    pub fn reserve(&self, usd: f64, cap: Option<f64>) -> Result<Reservation, Refusal> {
        self.reserve_on(today(), usd, cap)
    }

    fn reserve_on(&self, day: u64, usd: f64, cap: Option<f64>) -> Result<Reservation, Refusal> {
        let usd = usd.max(0.0);
        let booked = self.update(day, |total| {
            if let Some(cap) = cap {
                if total.unknown_before || total.usd + usd > cap {
                    return Err(Refusal::CapReached);
                }
            }
            total.usd += usd;
            total.reserved_usd += usd;
            Ok(())
        });
        booked.map(|()| Reservation {
            ledger: self.clone(),
            day,
            usd,
        })
    }

    /// Reads today's totals, changes them and writes them back, under the lock.
    fn update(
        &self,
        day: u64,
        change: impl FnOnce(&mut DayUse) -> Result<(), Refusal>,
    ) -> Result<(), Refusal> {
        let locked = || -> std::io::Result<std::fs::File> {
            if let Some(dir) = self.path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let lock = std::fs::File::create(self.path.with_extension("json.lock"))?;
            lock.lock()?;
            Ok(lock)
        };
        let _lock = locked().map_err(Refusal::Unwritable)?;
        let mut total = self.read_day(day);
        change(&mut total)?;
        let json = serde_json::to_vec(&total).expect("spend serializes");
        crate::atomic::write(&self.path, &json).map_err(Refusal::Unwritable)
    }
}

/// Why the ledger did not book a request.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// Today's spend, with the requests reserved in every process, leaves no room for it.
    #[error("today's cloud spend would pass its cap")]
    CapReached,
    /// The ledger could not be written.
    #[error("could not record today's cloud spend: {0}")]
    Unwritable(#[source] std::io::Error),
}

impl From<Refusal> for std::io::Error {
    fn from(refusal: Refusal) -> Self {
        match refusal {
            Refusal::Unwritable(e) => e,
            Refusal::CapReached => std::io::Error::other(refusal),
        }
    }
}

/// A request's worst case, booked in the ledger until its answer says what it cost. Dropped
/// without [settling](Self::settle), it stays counted.
#[derive(Debug)]
#[must_use = "a reservation is settled with what the request billed"]
pub struct Reservation {
    ledger: SpendLedger,
    day: u64,
    usd: f64,
}

impl Reservation {
    /// The worst case that was booked.
    pub fn usd(&self) -> f64 {
        self.usd
    }

    /// Replaces the booked worst case with what the request billed. A request booked before
    /// midnight and settled after it is paid on the new day (the old day's record is gone).
    pub fn settle(self, billed_usd: f64) -> std::io::Result<()> {
        self.settle_on(today(), billed_usd)
    }

    fn settle_on(self, day: u64, billed_usd: f64) -> std::io::Result<()> {
        self.ledger
            .update(day, |total| {
                if total.day == self.day {
                    total.reserved_usd = (total.reserved_usd - self.usd).max(0.0);
                    total.usd = (total.usd - self.usd).max(0.0);
                }
                total.usd += billed_usd.max(0.0);
                Ok(())
            })
            .map_err(std::io::Error::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(edge: u32, cloud: u32) -> Usage {
        Usage {
            edge_tokens: edge,
            cloud_tokens: cloud,
            ..Usage::default()
        }
    }

    /// Books and settles one request on `day`.
    fn pay(ledger: &SpendLedger, day: u64, usd: f64) {
        let booked = ledger.reserve_on(day, usd, None).unwrap();
        booked.settle_on(day, usd).unwrap();
    }

    #[test]
    fn use_adds_up_within_a_day_and_restarts_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = SpendLedger::new(dir.path());
        assert_eq!(ledger.read_day(100).usd, 0.0);
        pay(&ledger, 100, 0.25);
        pay(&ledger, 100, 0.5);
        let day = ledger.read_day(100);
        assert_eq!((day.usd, day.reserved_usd), (0.75, 0.0));
        assert_eq!(ledger.read_day(101).usd, 0.0, "a new day starts at zero");
        pay(&ledger, 101, 0.1);
        assert_eq!(ledger.read_day(101).usd, 0.1);
        ledger.add_tokens(&tokens(30, 10)).unwrap();
        ledger.add_tokens(&tokens(60, 0)).unwrap();
        let today = ledger.today();
        assert_eq!((today.edge_tokens, today.cloud_tokens), (90, 10));
        assert_eq!(today.cloud_share(), 0.1);
    }

    #[test]
    fn a_request_is_booked_at_its_worst_case_and_settled_at_what_it_billed() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = SpendLedger::new(dir.path());
        let booked = ledger.reserve_on(5, 0.004, Some(0.01)).unwrap();
        assert_eq!(booked.usd(), 0.004);
        let day = ledger.read_day(5);
        assert_eq!(
            (day.usd, day.reserved_usd),
            (0.004, 0.004),
            "counted at once"
        );
        booked.settle_on(5, 0.001).unwrap();
        let day = ledger.read_day(5);
        assert_eq!((day.usd, day.reserved_usd), (0.001, 0.0));
        // Unsettled (a process killed mid-request), the worst case stays counted.
        drop(ledger.reserve_on(5, 0.004, Some(0.01)).unwrap());
        assert_eq!(ledger.read_day(5).usd, 0.005);
        // Settled after midnight: the new day pays what was billed.
        ledger
            .reserve_on(5, 0.002, None)
            .unwrap()
            .settle_on(6, 0.001)
            .unwrap();
        assert_eq!(ledger.read_day(6).usd, 0.001);
    }

    #[test]
    fn the_cap_refuses_a_request_whose_worst_case_would_pass_it() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = SpendLedger::new(dir.path());
        // $0.00112 a request: four fit under $0.005, the fifth would pass it.
        let booked: Vec<_> = (0..4)
            .map(|_| ledger.reserve_on(9, 0.00112, Some(0.005)).unwrap())
            .collect();
        assert!(matches!(
            ledger.reserve_on(9, 0.00112, Some(0.005)),
            Err(Refusal::CapReached)
        ));
        assert!(
            ledger.reserve_on(9, 0.00112, None).is_ok(),
            "no cap, no refusal"
        );
        for b in booked {
            b.settle_on(9, 0.0001).unwrap();
        }
        assert!(
            ledger.reserve_on(9, 0.00112, Some(0.005)).is_ok(),
            "settling for less makes room again"
        );
    }

    #[test]
    fn a_ledger_that_cannot_be_written_keeps_the_cloud_out_under_a_cap() {
        let dir = tempfile::tempdir().unwrap();
        // The ledger's folder is a file: nothing can be written under it.
        let blocked = dir.path().join("data");
        std::fs::write(&blocked, b"not a folder").unwrap();
        let ledger = SpendLedger::new(&blocked);
        assert!(matches!(
            ledger.reserve(0.001, Some(1.0)),
            Err(Refusal::Unwritable(_))
        ));
        assert!(matches!(
            ledger.reserve(0.001, None),
            Err(Refusal::Unwritable(_))
        ));
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
        // Still unknown after more use today: no capped request is booked. A new day
        // starts clean.
        ledger.add_tokens(&tokens(5, 5)).unwrap();
        assert_eq!(ledger.today_usd(), f64::INFINITY);
        assert_eq!(ledger.today().cloud_share(), 0.5);
        assert!(matches!(
            ledger.reserve(0.0, Some(100.0)),
            Err(Refusal::CapReached)
        ));
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
                        pay(&ledger, 7, 0.5);
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        assert_eq!(SpendLedger::new(dir.path()).read_day(7).usd, 50.0);
    }

    #[test]
    fn a_ledger_with_negative_spend_is_kept_aside() {
        let dir = tempfile::tempdir().unwrap();
        let ledger = SpendLedger::new(dir.path());
        std::fs::write(&ledger.path, format!(r#"{{"day":{},"usd":-5}}"#, today())).unwrap();
        assert!(ledger.today().unknown_before);
        assert!(matches!(
            ledger.reserve(0.001, Some(1.0)),
            Err(Refusal::CapReached)
        ));
    }

    proptest::proptest! {
        /// A ledger damaged on disk (a byte changed, dropped or cut) reads as a day's use or
        /// as unknown (kept aside), and a capped booking never passes the cap either way.
        #[test]
        fn a_damaged_ledger_reads_or_is_kept_aside_and_the_cap_holds(
            at in 0usize..200,
            damage in crate::damage::kind(),
            worst in 0.0f64..0.01,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let ledger = SpendLedger::new(dir.path());
            let whole = DayUse {
                day: today(),
                usd: 0.004,
                reserved_usd: 0.001,
                edge_tokens: 10,
                cloud_tokens: 5,
                unknown_before: false,
            };
            let bytes = serde_json::to_vec(&whole).unwrap();
            std::fs::write(&ledger.path, crate::damage::apply(bytes, at, damage)).unwrap();
            let before = ledger.today();
            proptest::prop_assert!(before.usd >= 0.0 && before.reserved_usd >= 0.0);
            match ledger.reserve(worst, Some(0.01)) {
                Ok(booked) => {
                    proptest::prop_assert!(!before.unknown_before);
                    proptest::prop_assert!(ledger.today().usd <= 0.01 + 1e-12);
                    booked.settle(0.0).unwrap();
                }
                Err(Refusal::CapReached) => {
                    proptest::prop_assert!(before.unknown_before || before.usd + worst > 0.01);
                }
                Err(Refusal::Unwritable(e)) => proptest::prop_assert!(false, "{e}"),
            }
        }
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
