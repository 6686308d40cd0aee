//! `tandem key`: put the cloud API key in the OS keyring, check it, remove it.
//!
//! `set` reads the key from standard input, never from the command line, so it does not
//! end up in shell history or the process list.

use anyhow::{bail, Result};
use std::io::{BufRead, IsTerminal, Write};
use tandem_core::cloud::ApiKey;
use tandem_core::secrets::{self, KeySource};

/// What to do with the key.
#[derive(clap::Subcommand)]
pub enum Action {
    /// Read a key from standard input and store it in the OS keyring.
    Set,
    /// Say where the key comes from (showing only its last four characters).
    Status,
    /// Remove the key from the OS keyring.
    Clear,
}

/// Runs it.
pub fn run(action: Action) -> Result<()> {
    match action {
        Action::Set => {
            if std::io::stdin().is_terminal() {
                eprint!("paste the API key, then Enter: ");
                std::io::stderr().flush()?;
            }
            let mut line = String::new();
            std::io::stdin().lock().read_line(&mut line)?;
            let Some(key) = ApiKey::new(line) else {
                bail!("no key given")
            };
            secrets::store_api_key(&key)?;
            println!("stored in the OS keyring ({})", key.masked());
        }
        Action::Status => {
            let lookup = secrets::api_key();
            match lookup.key {
                Some((key, KeySource::Environment)) => {
                    println!("from {} ({})", secrets::API_KEY_VAR, key.masked())
                }
                Some((key, KeySource::Keyring)) => println!("in the OS keyring ({})", key.masked()),
                None => println!("no API key"),
            }
            if let Some(problem) = lookup.keyring_problem {
                println!("the OS keyring is unavailable: {problem}");
            }
        }
        Action::Clear => match secrets::delete_api_key()? {
            true => println!("removed from the OS keyring"),
            false => println!("the OS keyring held no key"),
        },
    }
    Ok(())
}
