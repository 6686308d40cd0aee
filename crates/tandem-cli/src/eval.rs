//! `tandem eval`: accuracy (or, on open prompts, the judge's log-probability per token)
//! against cloud share for every router and budget, written as
//! `results.json` and a chart, and kept as the app's "latest evaluation"; every reply with
//! its answer goes to `replies.jsonl`, to see which questions a router won or lost.

use crate::pair::{self, PairArgs, Progress};
use anyhow::{Context, Result};
use std::path::PathBuf;
use tandem_core::budget::{Prices, Share};
use tandem_core::config::Config;
use tandem_core::paths::Paths;
use tandem_core::router::{self, Router, RouterKind};
use tandem_eval::eval::{self, Metric, Results, RunSpec, Setup, DEFAULT_ROUTER};
use tandem_eval::quality::Judge;
use tandem_eval::task::ChoiceFormat;
use tandem_eval::{chart, data};

/// Flags.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pair: PairArgs,
    /// Questions: a split name (see `tandem data pull`) or a JSONL file of multiple-choice
    /// rows (`{"id","question","choices":{"label","text"},"answerKey"}`), math rows
    /// (`{"id","question","answer"}`), chat rows (`{"id","question","accept"}`) or open
    /// prompts (`{"id","question"}`, scored by `--judge`).
    #[arg(long, default_value = "csqa:dev")]
    data: String,
    /// Use only the first N questions.
    #[arg(long)]
    limit: Option<usize>,
    /// Routers to compare at every budget between 0 and 1 (edge-only and cloud-only are
    /// budgets 0 and 1); `default` is the app's default router, recorded under that name.
    /// The baselines first-token and random run at every budget whatever is listed.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "default,entropy,margin,mlp"
    )]
    router: Vec<RouterChoice>,
    /// Weights file of the MLP router (default: the one shipped for the default pair).
    #[arg(long)]
    router_path: Option<PathBuf>,
    /// Cloud shares to run each router at.
    #[arg(long, value_delimiter = ',', default_value = "0,0.05,0.1,0.2,0.3,1", value_parser = crate::settings::share)]
    budgets: Vec<Share>,
    /// Tokens asked for per cloud request (default: the app's; 1 measures the router alone).
    #[arg(long, default_value_t = Config::default().cloud.span)]
    span: u32,
    /// How multiple-choice questions are asked: `letter-first` (the letter is the reply's
    /// first token) or `answer-last` (a sentence of reasoning, then "Answer: <letter>").
    #[arg(long, default_value = "letter-first")]
    format: ChoiceFormat,
    /// Round trip (ms) past which the runs treat the cloud as slow, as Settings' "Slow after"
    /// does: what a user whose cloud is that slow gets (the local stand-in takes its own CPU
    /// time per request).
    #[arg(long)]
    max_wait_ms: Option<u32>,
    /// Price of a million prompt tokens, for the cost column (relative to cloud-only).
    #[arg(long, default_value_t = 0.2)]
    price_input: f64,
    /// Price of a million completion tokens.
    #[arg(long, default_value_t = 0.6)]
    price_output: f64,
    /// Price of a million prompt tokens the cloud reports as read from its prompt cache
    /// (default: the input price).
    #[arg(long)]
    price_cached: Option<f64>,
    /// The model that scores replies to open prompts by its mean log-probability per token
    /// (catalogue name or GGUF path; default: `--stand-in`, the cloud model when no
    /// `--cloud` is given).
    #[arg(long)]
    judge: Option<String>,
    /// Folder for results.json, replies.jsonl (every reply and its answer) and chart.svg.
    #[arg(long)]
    out: PathBuf,
}

/// Runs it.
pub fn run(args: Args) -> Result<()> {
    let rows = data::load(&args.data, &data::dir(), args.limit)?;
    anyhow::ensure!(!rows.is_empty(), "no questions in {}", args.data);
    let metric = Metric::of(&rows).map_err(anyhow::Error::msg)?;
    let default_kind = RouterKind::DEFAULT;
    let kinds: Vec<RouterKind> = args.router.iter().map(|c| c.kind(default_kind)).collect();
    let wants_mlp = kinds.contains(&RouterKind::Mlp);
    let (started, mut cloud) = args.pair.open(wants_mlp)?;
    let pair = &started.engine;
    let mlp = match wants_mlp {
        true => {
            let (mlp, notice) = router::load_mlp(args.router_path.as_deref(), &pair.ids)
                .map_err(anyhow::Error::msg)?;
            if let Some(notice) = notice {
                eprintln!("[notice] {notice}");
            }
            Some(mlp)
        }
        false => None,
    };
    let mut specs = Vec::new();
    for budget in args.budgets.iter().map(|share| share.get()) {
        if budget <= 0.0 || budget >= 1.0 {
            specs.push(RunSpec::new(Box::new(router::FixedRouter(0.0)), budget));
            continue;
        }
        let baselines = [RouterKind::FirstToken, RouterKind::Random].map(RouterChoice::Kind);
        let mut choices: Vec<RouterChoice> = Vec::new();
        for choice in baselines.iter().chain(&args.router) {
            // `default` stands for its router: the same run twice would only cost time.
            let stands_for_it = args.router.contains(&RouterChoice::Default)
                && *choice == RouterChoice::Kind(default_kind);
            if !choices.contains(choice) && !stands_for_it {
                choices.push(*choice);
            }
        }
        for choice in &choices {
            let scorer: Box<dyn Router> = match choice.kind(default_kind) {
                RouterKind::Mlp => Box::new(mlp.clone().expect("loaded above")),
                other => router::build(other, None, &pair.ids).0,
            };
            let spec = RunSpec::new(scorer, budget);
            specs.push(match choice {
                RouterChoice::Default => spec.named(DEFAULT_ROUTER),
                RouterChoice::Kind(_) => spec,
            });
        }
    }
    let setup = Setup {
        span: args.span.max(1),
        format: args.format,
        max_wait_ms: args.max_wait_ms,
        prices: Prices {
            input_per_mtok: args.price_input,
            output_per_mtok: args.price_output,
            cached_input_per_mtok: args.price_cached,
        },
    };
    let judge_name = args.judge.as_ref().unwrap_or(&args.pair.stand_in);
    let judge_weights = match metric {
        Metric::JudgeLogProb => Some(pair::load_model(judge_name)?),
        Metric::Accuracy => None,
    };
    let mut judge = match &judge_weights {
        Some(weights) => Some(Judge::new(judge_name, weights, pair.session_of(weights)?)),
        None => None,
    };
    let mut edge = pair.session()?;
    let progress = Progress::new("eval", 0);
    let evaluation = eval::evaluate(
        &pair.weights,
        &mut edge,
        Some(&mut cloud),
        judge.as_mut(),
        &rows,
        specs,
        setup,
        &mut |done, total| progress.show(done, total, ""),
    )?;
    progress.finish();
    let data_name = match args.limit {
        Some(n) => format!("{}[0..{n}]", args.data),
        None => args.data.clone(),
    };
    let results = Results {
        data: data_name,
        metric,
        judge: judge.map(|j| j.name),
        budget_rule: tandem_core::budget::RULE.into(),
        span: setup.span,
        max_wait_ms: setup.max_wait_ms,
        prompt_format: tandem_eval::task::prompt_name(&rows, setup.format),
        prices: setup.prices,
        edge: pair.edge_name.clone(),
        cloud: pair.ids.cloud.clone(),
        runs: evaluation.runs,
    };
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let json = serde_json::to_string_pretty(&results)? + "\n";
    std::fs::write(args.out.join("results.json"), &json)?;
    let mut lines = String::new();
    for reply in &evaluation.replies {
        lines += &(serde_json::to_string(reply)? + "\n");
    }
    std::fs::write(args.out.join("replies.jsonl"), lines)?;
    chart::draw(&results, &args.out.join("chart.svg"))?;
    let latest = Paths::discover().latest_evaluation();
    std::fs::create_dir_all(&latest)?;
    std::fs::write(latest.join("results.json"), &json)?;
    chart::draw(&results, &latest.join("chart.svg"))?;

    let reference = |name: &str| results.runs.iter().find(|r| r.router == name);
    // No gap (the cloud is not ahead, or a reference run is missing): a dash, not a ratio.
    let gap = |r: &eval::RunResult| {
        match (
            reference(RouterKind::EdgeOnly.name()),
            reference(RouterKind::CloudOnly.name()),
        ) {
            (Some(edge), Some(cloud)) => eval::gap_recovered(r, edge, cloud),
            _ => None,
        }
        .map_or_else(|| "     -".to_owned(), |g| format!("{:>5.0}%", g * 100.0))
    };
    // Replies routing made wrong where edge-only was right, and the reverse; in brackets, the
    // broken ones cloud-only had right too (broken by the splice, not by a wrong cloud token).
    let flips = |r: &eval::RunResult| {
        let splices = r
            .broken_splices
            .map_or_else(String::new, |n| format!(" ({n})"));
        r.versus
            .iter()
            .find(|v| v.baseline == RouterKind::EdgeOnly.name())
            .map_or_else(
                || "-".to_owned(),
                |v| format!("{}/{}{splices}", v.right_to_wrong, v.wrong_to_right),
            )
    };
    println!(
        "{:<11} {:>6} {:>5} {:>8} {:>15} {:>6} {:>6} {:>8} {:>8} {:>10} {:>6} {:>8} {:>20}",
        "router",
        "budget",
        "n",
        match metric {
            Metric::Accuracy => "accuracy",
            Metric::JudgeLogProb => "log-prob",
        },
        "95% interval",
        "share",
        "gap",
        "requests",
        "prompt",
        "completion",
        "cost",
        "seconds",
        "broke/fixed (splice)"
    );
    for r in &results.runs {
        let cost = r
            .cost_vs_cloud_only
            .map_or("-".to_owned(), |c| format!("{:.3}", c));
        println!(
            "{:<11} {:>6.3} {:>5} {:>8} {:>15} {:>5.1}% {} {:>8} {:>8} {:>10} {:>6} {:>8.1} {:>20}",
            r.router,
            r.budget,
            r.n,
            metric.show(r.score),
            format!(
                "{}–{}",
                metric.show(r.score_interval.low),
                metric.show(r.score_interval.high)
            ),
            r.cloud_share * 100.0,
            gap(r),
            r.cloud_requests,
            r.cloud_prompt_tokens,
            r.cloud_completion_tokens,
            cost,
            r.seconds,
            flips(r)
        );
    }
    eprintln!(
        "[eval] results.json, replies.jsonl and chart.svg in {}",
        args.out.display()
    );
    Ok(())
}

/// A router on the command line: a kind, or `default` (whatever the app uses by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RouterChoice {
    Default,
    Kind(RouterKind),
}

impl RouterChoice {
    fn kind(self, default: RouterKind) -> RouterKind {
        match self {
            RouterChoice::Default => default,
            RouterChoice::Kind(kind) => kind,
        }
    }
}

impl std::str::FromStr for RouterChoice {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            DEFAULT_ROUTER => Ok(RouterChoice::Default),
            other => other.parse().map(RouterChoice::Kind),
        }
    }
}
