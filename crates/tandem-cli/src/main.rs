//! `tandem`: the command-line face of the engine.
//!
//! Every subcommand parses its flags over the settings file ([`settings`]), then calls the
//! core; the terminal view of a reply ([`view`]) renders the same events the app and the
//! tests consume.

mod chat;
mod data;
mod eval;
mod generate;
mod key;
mod models;
mod pair;
mod serve;
mod settings;
#[cfg(feature = "train")]
mod train_router;
mod view;

use clap::{Parser, Subcommand};

/// Token-level routed decoding: a small local model, a large cloud model for the tokens that matter.
#[derive(Parser)]
#[command(name = "tandem", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Download and verify models.
    Models {
        #[command(subcommand)]
        action: models::Action,
    },
    /// Generate one reply to a prompt.
    Generate(generate::Args),
    /// Chat interactively (multi-turn; /budget to change the cloud share).
    Chat(chat::Args),
    /// Store, check or remove the cloud API key in the OS keyring.
    Key(key::Args),
    /// Serve a model as an OpenAI-compatible API on 127.0.0.1.
    Serve(serve::Args),
    /// Download question-answering data sets (for training and evaluation).
    Data {
        #[command(subcommand)]
        action: data::Action,
    },
    /// Collect labels from the cloud and train the MLP router for an edge/cloud pair (not
    /// in the lean build `scripts/start.sh` makes).
    #[cfg(feature = "train")]
    TrainRouter(train_router::Args),
    /// Measure accuracy against cloud share for routers and budgets.
    Eval(eval::Args),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Models { action } => models::run(action),
        Command::Generate(args) => generate::run(args),
        Command::Chat(args) => chat::run(args),
        Command::Key(args) => key::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Data { action } => data::run(action),
        #[cfg(feature = "train")]
        Command::TrainRouter(args) => train_router::run(args),
        Command::Eval(args) => eval::run(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
