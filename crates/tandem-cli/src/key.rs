//! `tandem key`: put a cloud's API key in the OS keyring, check it, remove it.
//!
//! A key is saved for one cloud URL's origin and only ever sent there (see
//! `tandem_core::secrets`); the URL is `--url`, else the cloud the settings file names.
//! `set` reads the key from standard input, never from the command line, so it does not
//! end up in shell history or the process list.

use crate::settings;
use anyhow::{bail, Context, Result};
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use tandem_core::cloud::ApiKey;
use tandem_core::paths::Paths;
use tandem_core::secrets::{self, KeySource};

/// Which cloud the key is for.
#[derive(clap::Args)]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    action: Action,
    /// The cloud's base URL (default: `cloud.url` of the settings file).
    #[arg(long, global = true)]
    url: Option<String>,
    /// Settings file (default: config.toml in the platform config folder).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
}

/// What to do with the key.
#[derive(clap::Subcommand)]
enum Action {
    /// Read a key from standard input and store it in the OS keyring for the cloud's origin.
    Set,
    /// Say where the cloud's key comes from (showing only its last four characters).
    Status,
    /// Remove the cloud's key from the OS keyring.
    Clear,
}

/// Runs it.
pub fn run(args: Args) -> Result<()> {
    let url = cloud_url(&args)?;
    match args.action {
        Action::Set => {
            if std::io::stdin().is_terminal() {
                eprint!("paste the API key for {url}, then Enter: ");
                std::io::stderr().flush()?;
            }
            let mut line = String::new();
            std::io::stdin().lock().read_line(&mut line)?;
            let Some(key) = ApiKey::new(line) else {
                bail!("no key given")
            };
            secrets::store_api_key(&url, &key)?;
            println!(
                "stored in the OS keyring for {} ({})",
                secrets::origin(&url)?,
                key.masked()
            );
        }
        Action::Status => {
            let lookup = secrets::api_key(&url);
            match lookup.key {
                Some((key, KeySource::Environment)) => {
                    println!("from {} ({})", secrets::API_KEY_VAR, key.masked())
                }
                Some((key, KeySource::Keyring)) => println!(
                    "in the OS keyring for {} ({})",
                    secrets::origin(&url)?,
                    key.masked()
                ),
                None => println!("no API key for {url}"),
            }
            for line in [
                lookup.withheld,
                lookup
                    .keyring_problem
                    .map(|p| format!("the OS keyring is unavailable: {p}")),
            ]
            .into_iter()
            .flatten()
            {
                println!("{line}");
            }
        }
        Action::Clear => match secrets::delete_api_key(&url)? {
            true => println!("removed from the OS keyring"),
            false => println!("the OS keyring held no key for {url}"),
        },
    }
    Ok(())
}

/// The URL the key is for: `--url`, else the configured cloud.
fn cloud_url(args: &Args) -> Result<String> {
    if let Some(url) = &args.url {
        return Ok(url.trim().to_owned());
    }
    let config =
        settings::load(args.config.as_deref(), &Paths::discover()).context("reading settings")?;
    match config.cloud.endpoint() {
        Some(url) => Ok(url.to_owned()),
        None => bail!(
            "no cloud URL is configured (the local stand-in needs no key): pass --url <the cloud's base URL>"
        ),
    }
}
