//! `tandem models`: list the catalogue, pull a model with a progress bar.

use anyhow::{Context, Result};
use std::io::Write;
use tandem_core::models::{self, PullProgress};
use tandem_core::paths::Paths;

/// What to do with models.
#[derive(clap::Subcommand)]
pub enum Action {
    /// List known models and whether they are downloaded.
    List,
    /// Download (if needed) and verify models by name.
    Pull {
        /// Catalogue names.
        #[arg(required = true)]
        names: Vec<String>,
    },
    /// Print the path of a downloaded model.
    Path {
        /// Catalogue name.
        name: String,
    },
}

/// Runs it.
pub fn run(action: Action) -> Result<()> {
    let dir = Paths::discover().models();
    match action {
        Action::List => {
            for m in models::catalogue() {
                let here = if dir.join(&m.file).is_file() {
                    "pulled"
                } else {
                    "-"
                };
                println!(
                    "{:<20} {:>7.1} MB  {:<7} {}",
                    m.name,
                    m.bytes as f64 / 1e6,
                    here,
                    m.role
                );
            }
        }
        Action::Pull { names } => {
            for name in names {
                let entry = models::find(&name).with_context(|| {
                    let known: Vec<_> = models::catalogue().into_iter().map(|m| m.name).collect();
                    format!("unknown model '{name}' (known: {})", known.join(", "))
                })?;
                let mut bar = ProgressBar::new(&name);
                let path = models::pull(&entry, &dir, &mut |p| bar.update(p))?;
                bar.finish();
                eprintln!("{name}: sha256 verified, {}", path.display());
            }
        }
        Action::Path { name } => println!("{}", models::resolve(&name, &dir)?.display()),
    }
    Ok(())
}

/// A one-line progress bar on stderr, redrawn at most once per percent.
struct ProgressBar {
    name: String,
    last_percent: Option<u64>,
}

impl ProgressBar {
    fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            last_percent: None,
        }
    }

    fn update(&mut self, p: PullProgress) {
        let percent = p.done * 100 / p.total.max(1);
        if self.last_percent == Some(percent) {
            return;
        }
        self.last_percent = Some(percent);
        let filled = (percent / 5) as usize;
        eprint!(
            "\r{:<20} [{}{}] {percent:>3}% {:.0}/{:.0} MB",
            self.name,
            "#".repeat(filled),
            " ".repeat(20 - filled),
            p.done as f64 / 1e6,
            p.total as f64 / 1e6
        );
        let _ = std::io::stderr().flush();
    }

    fn finish(&self) {
        eprintln!();
    }
}
