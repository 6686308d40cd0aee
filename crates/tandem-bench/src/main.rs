//! `tandem-bench`: every figure is a ratio of two things measured side by side in one run,
//! alternating rounds, so a noisy machine shifts both sides alike.
//!
//! 1. Edge decode speed: Tandem's llama.cpp loop against llama.cpp's own `llama-server`
//!    (same GGUF, same threads, same greedy tokens).
//! 2. The routed loop with the cloud disabled (router scoring every token) against the
//!    plain local loop, with the app's default router and with the MLP router (hidden
//!    states on).
//! 3. Cloud requests per cloud token with spans of 4 against spans of 1.
//! 4. Prompt tokens `tandem serve` decodes per request with prefix reuse against without.
//! 5. Routed replies against edge-only ones with the cloud a round trip away
//!    ([`network`]), waiting for each request, drafting while it is in flight, and asking
//!    ahead from the draft, the
//!    stand-in computing each answer and the same answers replayed at a fast server's
//!    time ([`replay`]).

mod delay_proxy;
mod history;
mod llama_server;
mod network;
mod replay;
mod results;

use anyhow::{Context, Result};
use clap::Parser;
use std::path::PathBuf;
use std::time::Instant;
use tandem_core::budget::{CloudBudget, LiveBudget};
use tandem_core::cloud::{Cloud, CloudClient, CloudConfig};
use tandem_core::decode::{generate, Collaboration, DecodeOptions};
use tandem_core::edge::EdgeModel;
use tandem_core::event::{Event, EventSink, Usage};
use tandem_core::local::{EdgeWeights, LocalOptions};
use tandem_core::message::Message;
use tandem_core::router::{self, MlpRouter, ModelPair, Router, RouterKind};
use tandem_core::sampling::{Sampler, SamplingParams};

/// Flags.
#[derive(Parser)]
struct Args {
    /// Edge GGUF.
    #[arg(long)]
    edge: PathBuf,
    /// Cloud GGUF (served by `tandem serve` in-process).
    #[arg(long)]
    cloud: PathBuf,
    /// llama-server binary.
    #[arg(long)]
    llama_server: PathBuf,
    /// MLP router weights (the pair is not checked: only its speed is measured).
    #[arg(long)]
    mlp: PathBuf,
    /// Threads for the edge (and for llama-server in the speed comparison).
    #[arg(long, default_value_t = 2)]
    threads: u32,
    /// Tokens generated per measurement.
    #[arg(long, default_value_t = 64)]
    tokens: u32,
    /// Alternating rounds per comparison.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Write the Markdown table here too.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Run only the local comparisons (1 to 4): a few minutes, where the network's take half an hour.
    #[arg(long, conflicts_with_all = ["network_only", "history_only"])]
    local_only: bool,
    /// Run only the network comparison (5).
    #[arg(long)]
    network_only: bool,
    /// Round-trip times for the network comparison, in milliseconds.
    #[arg(long, value_delimiter = ',', default_value = "0,50,150,300")]
    rtts: Vec<u64>,
    /// Server times at which the stand-in's recorded answers are replayed in the network
    /// comparison (a GPU server or a hosted API), in milliseconds.
    #[arg(long, value_delimiter = ',', default_value = "100")]
    server_times: Vec<u64>,
    /// Wait limits (Settings' "Slow after", ms) the network comparison's routed replies also
    /// run with, after the rows without one (the app's default).
    #[arg(long, value_delimiter = ',')]
    max_wait_ms: Vec<u32>,
    /// Prompt sets of the network comparison: `chat:dev`'s factual questions (replies of a
    /// sentence) and `open:dev`'s MT-bench prompts (long replies; `tandem data pull open`).
    #[arg(long, value_delimiter = ',', default_value = "chat:dev,open:dev")]
    network_sets: Vec<String>,
    /// Prompts of each set per round-trip time.
    #[arg(long, default_value_t = 8)]
    network_prompts: usize,
    /// Tokens per reply at most in the network comparison.
    #[arg(long, default_value_t = 128)]
    network_tokens: u32,
    /// Run only the history comparison (6).
    #[arg(long, conflicts_with = "network_only")]
    history_only: bool,
    /// Conversations in the history comparison.
    #[arg(long, default_value_t = 1000)]
    history_conversations: usize,
    /// Replies in each of them.
    #[arg(long, default_value_t = 50)]
    history_replies: usize,
}

const PROMPTS: [&str; 3] = [
    "Explain why the sky is blue, step by step.",
    "Write a Python function that checks whether a number is prime, and explain it.",
    "What are the main differences between TCP and UDP?",
];

fn main() -> Result<()> {
    let args = Args::parse();
    let mut sections = Vec::new();
    let everything = !args.local_only && !args.network_only && !args.history_only;
    if everything || args.local_only {
        sections.push(("local", render(&local_rows(&args)?, &args)));
    }
    if everything || args.network_only {
        eprintln!("5/6 routed replies with the cloud a round trip away");
        let running = serve_cloud(&args.cloud, true)?;
        let table = network::run(&network::Setup {
            edge: &args.edge,
            cloud: running.addr,
            rtts: &args.rtts,
            server_times: &args.server_times,
            wait_limits: &args.max_wait_ms,
            sets: &args.network_sets,
            prompts: args.network_prompts,
            max_tokens: args.network_tokens,
        })?;
        sections.push(("network", table));
    }
    if everything || args.history_only {
        eprintln!("6/6 history at scale");
        let table = history::run(&history::Setup {
            conversations: args.history_conversations,
            replies: args.history_replies,
        })?;
        sections.push(("history", table));
    }
    for (_, table) in &sections {
        println!("{table}");
    }
    if let Some(path) = &args.out {
        // A missing file is a first run; one that cannot be read must not be written over.
        let old = match std::fs::read_to_string(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            read => read.with_context(|| format!("reading {}", path.display()))?,
        };
        std::fs::write(path, results::merge(&old, &sections))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Comparisons 1 to 4.
fn local_rows(args: &Args) -> Result<Vec<Row>> {
    let weights = EdgeWeights::load(&args.edge, "edge")?;
    let local = LocalOptions {
        n_ctx: 2048,
        threads: args.threads,
        hidden_state: false,
    };
    let mut rows = Vec::new();

    eprintln!("1/6 edge decode: tandem vs llama-server");
    let server = llama_server::LlamaServer::start(&args.llama_server, &args.edge, args.threads)?;
    let prompt = weights.tokenize(&weights.chat_prompt(&[Message::user(PROMPTS[0])])?, true);
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..args.rounds {
        ours.push(plain_decode_tps(&weights, &local, &prompt, args.tokens)?);
        theirs.push(server.decode_tps(&prompt, args.tokens)?);
    }
    drop(server);
    rows.push(Row::ratio(
        "Edge decode tok/s: Tandem ÷ llama-server",
        &ours,
        &theirs,
        "≥ 0.97",
    ));

    eprintln!("2/6 routed loop with the cloud off vs plain local loop");
    let mlp = MlpRouter::load(&args.mlp, None)?;
    // The router a new user runs; the MLP row below covers a router that reads hidden states.
    let default_kind = RouterKind::DEFAULT;
    let unchecked = ModelPair {
        edge_sha256: String::new(),
        cloud: String::new(),
    };
    let (default_router, notice) = router::build(default_kind, Some(&args.mlp), &unchecked);
    if let Some(notice) = notice {
        // The row below names the router that actually ran.
        eprintln!("   {notice}");
    }
    let default_local = LocalOptions {
        hidden_state: default_router.needs_hidden_state(),
        ..local
    };
    let with_hidden = LocalOptions {
        hidden_state: true,
        ..local
    };
    let (mut routed, mut routed_mlp, mut plain) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..args.rounds {
        routed.push(routed_off_tps(
            &weights,
            &default_local,
            default_router.as_ref(),
            &prompt,
            args.tokens,
        )?);
        routed_mlp.push(routed_off_tps(
            &weights,
            &with_hidden,
            &mlp,
            &prompt,
            args.tokens,
        )?);
        plain.push(plain_decode_tps(&weights, &local, &prompt, args.tokens)?);
    }
    rows.push(Row::ratio(
        format!(
            "Decode tok/s: routed (default, {}), cloud off ÷ local only",
            default_router.name()
        ),
        &routed,
        &plain,
        "≥ 0.98",
    ));
    rows.push(Row::ratio(
        "Decode tok/s: routed (MLP, hidden states on), cloud off ÷ local only",
        &routed_mlp,
        &plain,
        "≥ 0.95",
    ));

    eprintln!("   prefill with hidden states (handoff) vs without");
    let long_prompt = weights.tokenize(&PROMPTS.join(" ").repeat(12), true);
    let (mut with_hidden, mut without) = (Vec::new(), Vec::new());
    for _ in 0..args.rounds {
        with_hidden.push(prefill_tps(
            &weights,
            &LocalOptions {
                hidden_state: true,
                ..local
            },
            &long_prompt,
        )?);
        without.push(prefill_tps(&weights, &local, &long_prompt)?);
    }
    rows.push(Row::ratio(
        "Prefill tok/s: hidden states on (prefill-context handoff) ÷ off",
        &with_hidden,
        &without,
        "≥ 0.95 (0.71 without the handoff, docs/models.md)",
    ));

    eprintln!("3/6 and 4/6: routed replies against tandem serve");
    // Edge and cloud share two cores: one thread each.
    let edge_one = LocalOptions {
        threads: 1,
        ..default_local
    };
    let mut requests_per_token = Vec::new();
    let mut decoded_per_request = Vec::new();
    for (span, reuse) in [(1, true), (4, true), (4, false)] {
        let running = serve_cloud(&args.cloud, reuse)?;
        let (mut edge_tokens, mut cloud_tokens, mut cloud_requests) = (0, 0, 0);
        for text in PROMPTS {
            let usage = routed_reply(
                &weights,
                &edge_one,
                default_router.as_ref(),
                &running.base_url(),
                text,
                span,
                args.tokens,
            )?;
            edge_tokens += usage.edge_tokens;
            cloud_tokens += usage.cloud_tokens;
            cloud_requests += usage.cloud_requests;
        }
        let (requests, decoded) = serve_counters(&running.base_url())?;
        eprintln!(
            "   span {span}, prefix reuse {reuse}: {edge_tokens} edge + {cloud_tokens} cloud tokens in \
             {cloud_requests} requests; the server decoded {decoded} prompt tokens"
        );
        if reuse {
            requests_per_token.push(f64::from(cloud_requests) / f64::from(cloud_tokens.max(1)));
        }
        if span == 4 {
            decoded_per_request.push(decoded as f64 / requests.max(1) as f64);
        }
    }
    rows.push(Row::pair(
        "Cloud requests per cloud token: spans of 4 vs 1",
        requests_per_token[1],
        requests_per_token[0],
    ));
    rows.push(Row::pair(
        "Prompt tokens decoded per request by tandem serve: reuse vs none",
        decoded_per_request[0],
        decoded_per_request[1],
    ));

    Ok(rows)
}

/// `tandem serve` of the cloud model on a free loopback port, one thread (the edge has the
/// other core), open to the benchmark's own clients.
fn serve_cloud(model: &std::path::Path, prefix_reuse: bool) -> Result<tandem_serve::Running> {
    let serve = tandem_serve::ModelThread::start(tandem_serve::ServeOptions {
        model_path: model.to_owned(),
        model_name: "cloud".into(),
        local: LocalOptions {
            n_ctx: 4096,
            threads: 1,
            hidden_state: false,
        },
        prefix_reuse,
        deadline: tandem_serve::ServeOptions::DEFAULT_DEADLINE,
    })?;
    let access = tandem_serve::Access::open();
    Ok(tandem_serve::start(serve, "127.0.0.1:0".parse()?, access)?)
}

/// Greedy decoding with nothing but llama.cpp and the sampler: the local-only baseline.
fn plain_decode_tps(
    weights: &EdgeWeights,
    local: &LocalOptions,
    prompt: &[i32],
    tokens: u32,
) -> Result<f64> {
    let mut edge = weights.session(local)?;
    let mut sampler = Sampler::new(SamplingParams::default());
    let (mut step, _) = edge.sync(prompt, &mut sampler)?;
    let started = Instant::now();
    for _ in 0..tokens {
        // Fixed length, like llama-server's ignore_eos: the end token is decoded too.
        step = edge.step_after(step.token, &mut sampler)?;
    }
    Ok(f64::from(tokens) / started.elapsed().as_secs_f64())
}

/// Prompt tokens per second of a fresh prefill.
fn prefill_tps(weights: &EdgeWeights, local: &LocalOptions, prompt: &[i32]) -> Result<f64> {
    let mut edge = weights.session(local)?;
    let started = Instant::now();
    edge.sync(prompt, &mut Sampler::new(SamplingParams::default()))?;
    Ok(prompt.len() as f64 / started.elapsed().as_secs_f64())
}

/// The collaborative loop with `router` scoring every token and the budget off.
fn routed_off_tps(
    weights: &EdgeWeights,
    local: &LocalOptions,
    router: &dyn Router,
    prompt: &[i32],
    tokens: u32,
) -> Result<f64> {
    let mut edge = weights.session(local)?;
    let mut decode_ms = 0;
    let mut produced = 0;
    let options = DecodeOptions {
        max_tokens: tokens,
        ..DecodeOptions::default()
    };
    let on_event = &mut |e: Event| {
        match e {
            Event::Token { .. } => produced += 1,
            Event::Finished { timings, .. } => decode_ms = timings.total_ms - timings.prefill_ms,
            _ => {}
        }
        true
    };
    // The budget is off: the cloud, on a port nothing listens on, is never asked.
    let unused_cloud = "http://127.0.0.1:9/v1";
    let budget = CloudBudget::off();
    decode_reply(
        &mut edge,
        unused_cloud,
        router,
        budget,
        prompt,
        &options,
        on_event,
    )?;
    anyhow::ensure!(
        produced > tokens / 2,
        "the reply ended after {produced} tokens; pick a longer prompt"
    );
    Ok(f64::from(produced) / (decode_ms as f64 / 1e3))
}

fn routed_reply(
    weights: &EdgeWeights,
    local: &LocalOptions,
    router: &dyn Router,
    cloud_url: &str,
    text: &str,
    span: u32,
    tokens: u32,
) -> Result<Usage> {
    let mut edge = weights.session(local)?;
    let prompt = edge.tokenize(&weights.chat_prompt(&[Message::user(text)])?, true);
    let options = DecodeOptions {
        max_tokens: tokens,
        span,
        ..DecodeOptions::default()
    };
    let budget = CloudBudget::share(0.25);
    decode_reply(
        &mut edge,
        cloud_url,
        router,
        budget,
        &prompt,
        &options,
        &mut |_: Event| true,
    )
}

/// One reply through the app's decode loop, the edge with the cloud at `cloud_url` under
/// `budget`: the one place the benchmarks set up a collaboration.
fn decode_reply(
    edge: &mut dyn EdgeModel,
    cloud_url: &str,
    router: &dyn Router,
    budget: CloudBudget,
    prompt: &[i32],
    options: &DecodeOptions,
    sink: &mut dyn EventSink,
) -> Result<Usage> {
    let mut cloud = CloudClient::new(CloudConfig::new(cloud_url))?;
    let live = LiveBudget::new(budget);
    let collaboration = Collaboration {
        edge,
        cloud: Some(&mut cloud as &mut dyn Cloud),
        router,
        budget: &live,
        messages: &[],
        spend: None,
    };
    Ok(generate(collaboration, prompt, options, sink)?)
}

/// `(requests, prompt tokens decoded)` from `tandem serve`'s `/metrics`.
fn serve_counters(base_url: &str) -> Result<(u64, u64)> {
    let text =
        reqwest::blocking::get(format!("{}/metrics", base_url.trim_end_matches("/v1")))?.text()?;
    let read = |name: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
            .unwrap_or(0)
    };
    Ok((
        read("tandem:requests_total "),
        read("tandem:prompt_tokens_decoded_total "),
    ))
}

struct Row {
    what: String,
    ours: f64,
    theirs: f64,
    goal: &'static str,
}

impl Row {
    fn ratio(what: impl Into<String>, ours: &[f64], theirs: &[f64], goal: &'static str) -> Row {
        Row {
            what: what.into(),
            ours: median(ours),
            theirs: median(theirs),
            goal,
        }
    }

    fn pair(what: &'static str, ours: f64, theirs: f64) -> Row {
        Row {
            what: what.into(),
            ours,
            theirs,
            goal: "lower is better",
        }
    }
}

fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn render(rows: &[Row], args: &Args) -> String {
    let mut out = format!(
        "| Comparison (edge {}, cloud {}, {} threads, {} tokens, median of {} rounds) | A | B | A ÷ B | Goal |\n|---|---|---|---|---|\n",
        file_name(&args.edge),
        file_name(&args.cloud),
        args.threads,
        args.tokens,
        args.rounds
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {:.2} | {:.2} | {:.3} | {} |\n",
            r.what,
            r.ours,
            r.theirs,
            r.ours / r.theirs,
            r.goal
        ));
    }
    out
}

fn file_name(path: &std::path::Path) -> String {
    path.file_name()
        .map_or_else(String::new, |f| f.to_string_lossy().into_owned())
}
