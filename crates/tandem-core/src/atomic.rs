//! Writing files so that a crash or a full disk never leaves a half-written one.
//!
//! A process killed between writing the temporary file and renaming it leaves the temporary
//! file behind (the real one is intact); [`sweep`] removes such leftovers when Tandem starts.
//! A file that cannot be read is never written over: [`set_aside`] keeps it for the user.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// Temporary files are named `.tandem-<random>.tmp`, so a sweep touches nothing else.
const PREFIX: &str = ".tandem-";
const SUFFIX: &str = ".tmp";
/// A write takes milliseconds; a temporary file this old belongs to no live write, even one
/// by another Tandem process using the same folder.
const STALE_AFTER: Duration = Duration::from_secs(60);

/// Writes `bytes` to a temporary file beside `path`, syncs it, then renames it over `path`.
pub fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut file = tempfile::Builder::new()
        .prefix(PREFIX)
        .suffix(SUFFIX)
        .tempfile_in(dir)?;
    file.write_all(bytes)?;
    file.as_file().sync_all()?;
    file.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Moves a file that cannot be used to `<name>.bad-<seconds>` beside it, so nothing is saved
/// over it and the user can look at it; returns where it went.
pub fn set_aside(path: &Path) -> std::io::Result<std::path::PathBuf> {
    let seconds = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut kept = path.as_os_str().to_owned();
    kept.push(format!(".bad-{seconds}"));
    let kept = std::path::PathBuf::from(kept);
    std::fs::rename(path, &kept)?;
    Ok(kept)
}

/// Removes the temporary files a killed write left in `dir` (not in its subfolders), older
/// than a minute; returns how many. A folder that does not exist holds none.
pub fn sweep(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let now = SystemTime::now();
    entries
        .flatten()
        .filter(|entry| {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            name.starts_with(PREFIX) && name.ends_with(SUFFIX)
        })
        .filter(|entry| {
            let modified = entry.metadata().and_then(|m| m.modified());
            modified.is_ok_and(|t| now.duration_since(t).unwrap_or_default() >= STALE_AFTER)
        })
        .filter(|entry| std::fs::remove_file(entry.path()).is_ok())
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leftovers_of_a_killed_write_are_swept_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let old = SystemTime::now() - Duration::from_secs(3600);
        let touch = |name: &str, when: SystemTime| {
            let path = dir.path().join(name);
            std::fs::write(&path, b"x").unwrap();
            std::fs::File::options()
                .write(true)
                .open(&path)
                .unwrap()
                .set_modified(when)
                .unwrap();
        };
        touch(".tandem-a1B2c3.tmp", old);
        touch(".tandem-live.tmp", SystemTime::now()); // another process writing right now
        touch("c1.json", old);
        touch("notes.tmp", old);
        assert_eq!(sweep(dir.path()), 1);
        let mut left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, [".tandem-live.tmp", "c1.json", "notes.tmp"]);
        assert_eq!(sweep(&dir.path().join("missing")), 0);
    }

    #[test]
    fn replaces_the_file_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/settings.toml");
        super::write(&path, b"one").unwrap();
        super::write(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        assert_eq!(
            std::fs::read_dir(path.parent().unwrap()).unwrap().count(),
            1,
            "no temp file left"
        );
    }
}
