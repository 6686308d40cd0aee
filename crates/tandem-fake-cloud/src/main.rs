//! `tandem-fake-cloud`: the fake cloud as a process, for end-to-end tests of the app.
//!
//! It prints `listening on http://127.0.0.1:PORT/v1` once ready, so a test harness can start
//! it on port 0 and read the address from the first line, then serves until killed.

use std::io::Write;

use clap::Parser;
use tandem_fake_cloud::{FakeCloud, Script};

/// A scripted OpenAI-compatible server on 127.0.0.1 for end-to-end tests.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// Port to listen on; 0 picks a free one.
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// A token piece to answer with; repeat to script several, replayed cyclically.
    #[arg(long = "token", value_name = "PIECE", default_values_t = [String::from(" cloud")])]
    tokens: Vec<String>,
    /// Require `Authorization: Bearer KEY` on every request.
    #[arg(long, value_name = "KEY")]
    api_key: Option<String>,
    /// Answer chat requests afresh, ignoring `continue_final_message`, as OpenAI's chat API
    /// does (by default a count in the reply so far is continued, as vLLM does).
    #[arg(long)]
    ignore_continuation: bool,
}

fn main() -> std::io::Result<()> {
    let args = Args::parse();
    let pieces: Vec<&str> = args.tokens.iter().map(String::as_str).collect();
    let mut script = Script::cycle(&pieces);
    if let Some(key) = &args.api_key {
        script = script.requiring_key(key);
    }
    if args.ignore_continuation {
        script = script.ignoring_continuation();
    }
    let cloud = FakeCloud::start_on(args.port, script)?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening on {}", cloud.base_url())?;
    stdout.flush()?;
    loop {
        // The server runs on its own thread; this one only keeps the process alive.
        std::thread::park();
    }
}
