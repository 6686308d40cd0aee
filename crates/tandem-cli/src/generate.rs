//! `tandem generate`: one reply to one prompt.

use crate::settings::Overrides;
use crate::view::TerminalView;
use anyhow::Result;
use tandem_core::event::Event;

/// Flags of `tandem generate`.
#[derive(clap::Args)]
pub struct Args {
    /// The user message.
    #[arg(long, short)]
    prompt: String,
    /// A system prompt.
    #[arg(long)]
    system: Option<String>,
    /// Print one JSON event per line on stdout (and nothing else).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    overrides: Overrides,
}

/// Runs it.
pub fn run(args: Args) -> Result<()> {
    let session = args.overrides.open_engine()?;
    let engine = &session.engine;
    let mut chat = engine.chat()?;
    if let Some(system) = &args.system {
        chat.system(system);
    }
    let mut view = TerminalView::new(args.json);
    chat.send(&args.prompt, &mut |e: Event| view.show(&e))?;
    Ok(())
}
