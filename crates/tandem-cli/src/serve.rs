//! `tandem serve`: its flags over the settings file, then the server of `tandem-serve`.

use crate::settings;
use anyhow::{Context, Result};
use std::io::Write;
use std::net::SocketAddr;
use tandem_core::local::{default_threads, LocalOptions};
use tandem_core::models;
use tandem_core::paths::Paths;
use tandem_serve::{Access, ModelThread, ServeOptions, StopWhen, API_KEY_VAR};

/// Flags of `tandem serve`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Model to serve: catalogue name or GGUF path (default: settings' serve.model).
    #[arg(long)]
    model: Option<String>,
    /// Address to bind (default 127.0.0.1: only this machine can connect).
    #[arg(long)]
    host: Option<String>,
    /// Port (0 picks a free one).
    #[arg(long)]
    port: Option<u16>,
    /// CPU threads.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(tandem_core::config::MAX_THREADS)))]
    threads: Option<u32>,
    /// Context window in tokens.
    #[arg(long, default_value_t = 4096)]
    context: u32,
    /// Decode every prompt from scratch (for measuring what prefix reuse saves).
    #[arg(long)]
    no_prefix_reuse: bool,
    /// Seconds a completion may take from the moment it is queued (waiting included); past
    /// them it is answered with a 503 and the model moves on.
    #[arg(long, default_value_t = ServeOptions::DEFAULT_DEADLINE.as_secs_f64(), value_parser = deadline)]
    deadline: f64,
    /// Settings file.
    #[arg(long)]
    config: Option<std::path::PathBuf>,
    /// Serve as the local stand-in of the process that started this one (Tandem's start-up):
    /// 127.0.0.1 on a free port, only for the key in the environment, until standard input
    /// ends.
    #[arg(long, hide = true, conflicts_with_all = ["host", "port"])]
    stand_in: bool,
}

/// A deadline in seconds: a positive number.
fn deadline(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs > 0.0 => Ok(secs),
        _ => Err(format!("'{text}' is not a number of seconds above 0")),
    }
}

/// Loads the model, binds, prints `listening on URL`, and serves until interrupted (or, as a
/// stand-in, until its parent lets go).
pub fn run(args: Args) -> Result<()> {
    let paths = Paths::discover();
    let config = settings::load(args.config.as_deref(), &paths)?;
    let (host, port, stop) = match args.stand_in {
        true => ("127.0.0.1".to_owned(), 0, StopWhen::ParentGone),
        false => (
            args.host.unwrap_or(config.serve.host),
            args.port.unwrap_or(config.serve.port),
            StopWhen::Interrupted,
        ),
    };
    let addr: SocketAddr = format!("{host}:{port}")
        .parse()
        .with_context(|| format!("'{host}:{port}' is not an address to bind"))?;
    let access = Access::from_env();
    anyhow::ensure!(
        !args.stand_in || access.needs_key(),
        "a stand-in serves only the key its parent sets in {API_KEY_VAR}, and none is set"
    );
    anyhow::ensure!(
        addr.ip().is_loopback() || access.needs_key(),
        "refusing to serve on {addr} without a key: anyone who reaches this machine could use \
         the model. Set {API_KEY_VAR} (clients send it as a bearer key), or bind 127.0.0.1"
    );
    let model = args.model.unwrap_or(config.serve.model);
    let model_path = models::resolve(&model, &paths.models())?;
    let engine = ModelThread::start(ServeOptions {
        model_path,
        model_name: model.clone(),
        local: LocalOptions {
            n_ctx: args.context,
            threads: args
                .threads
                .or(config.threads)
                .unwrap_or_else(default_threads),
            hidden_state: false,
        },
        prefix_reuse: !args.no_prefix_reuse,
        deadline: std::time::Duration::from_secs_f64(args.deadline),
    })
    .with_context(|| format!("loading {model}"))?;
    tandem_serve::serve_until(engine, addr, access.clone(), stop, |bound| {
        let mut stdout = std::io::stdout().lock();
        let key = match access.needs_key() {
            true => format!(" (requests need the key in {API_KEY_VAR})"),
            false => String::new(),
        };
        writeln!(stdout, "listening on http://{bound}/v1{key}")?;
        stdout.flush()
    })
    .with_context(|| format!("serving on {addr}"))
}
