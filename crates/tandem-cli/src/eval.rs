//! `tandem eval`: accuracy against cloud share for every router and budget, written as
//! `results.json` and a chart, and kept as the app's "latest evaluation"; every reply with
//! its answer goes to `replies.jsonl`, to see which questions a router won or lost.

use crate::pair::{PairArgs, Progress};
use anyhow::{Context, Result};
use std::path::PathBuf;
use tandem_core::paths::Paths;
use tandem_core::router::{self, MlpRouter, Router, RouterKind};
use tandem_eval::eval::{self, Results, RunSpec};
use tandem_eval::{chart, data};

/// Flags.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pair: PairArgs,
    /// Questions: a split name (see `tandem data pull`) or a JSONL file of multiple-choice rows.
    #[arg(long, default_value = "csqa:dev")]
    data: String,
    /// Use only the first N questions.
    #[arg(long)]
    limit: Option<usize>,
    /// Routers to compare (edge-only and cloud-only are budgets 0 and 1).
    #[arg(long, value_delimiter = ',', default_value = "entropy,margin,mlp")]
    router: Vec<RouterKind>,
    /// Weights file of the MLP router (default: the one shipped for the default pair).
    #[arg(long)]
    router_path: Option<PathBuf>,
    /// Cloud shares to run each router at.
    #[arg(long, value_delimiter = ',', default_value = "0,0.05,0.1,0.2,0.3,1")]
    budgets: Vec<f32>,
    /// Tokens asked for per cloud request (1 measures the router alone).
    #[arg(long, default_value_t = 1)]
    span: u32,
    /// Folder for results.json, replies.jsonl (every reply and its answer) and chart.svg.
    #[arg(long)]
    out: PathBuf,
}

/// Runs it.
pub fn run(args: Args) -> Result<()> {
    let mut rows = data::load(&args.data, &crate::data::dir())?;
    rows.truncate(args.limit.unwrap_or(rows.len()));
    anyhow::ensure!(!rows.is_empty(), "no questions in {}", args.data);
    let wants_mlp = args.router.contains(&RouterKind::Mlp);
    let (pair, mut cloud) = args.pair.open(wants_mlp)?;
    let mlp = match (wants_mlp, &args.router_path) {
        (false, _) => None,
        (true, Some(path)) => Some(MlpRouter::load(path, Some(&pair.ids))?),
        (true, None) => Some(
            router::shipped(&pair.ids)
                .context("no router is shipped for this edge/cloud pair: pass --router-path")?,
        ),
    };
    let mut specs = Vec::new();
    for &budget in &args.budgets {
        anyhow::ensure!(
            (0.0..=1.0).contains(&budget),
            "budgets are shares between 0 and 1, got {budget}"
        );
        if budget <= 0.0 || budget >= 1.0 {
            specs.push(RunSpec::new(Box::new(router::FixedRouter(0.0)), budget));
            continue;
        }
        for kind in &args.router {
            let scorer: Box<dyn Router> = match kind {
                RouterKind::Mlp => Box::new(mlp.clone().expect("loaded above")),
                other => router::build(*other, None, &pair.ids).0,
            };
            specs.push(RunSpec::new(scorer, budget));
        }
    }
    let mut edge = pair.session()?;
    let progress = Progress::new("eval", 0);
    let evaluation = eval::evaluate(
        &pair.weights,
        &mut edge,
        Some(&mut cloud),
        &rows,
        specs,
        args.span,
        &mut |done, total| progress.show(done, total, ""),
    )?;
    progress.finish();
    let data_name = match args.limit {
        Some(n) => format!("{}[0..{n}]", args.data),
        None => args.data.clone(),
    };
    let results = Results {
        data: data_name,
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
    let gap = |r: &eval::RunResult| match (reference("edge-only"), reference("cloud-only")) {
        (Some(edge), Some(cloud)) => {
            format!("{:>5.0}%", eval::gap_recovered(r, edge, cloud) * 100.0)
        }
        _ => "     -".to_owned(),
    };
    println!(
        "{:<11} {:>6} {:>5} {:>8} {:>7} {:>6} {:>8} {:>10} {:>8}",
        "router", "budget", "n", "accuracy", "share", "gap", "requests", "completion", "seconds"
    );
    for r in &results.runs {
        println!(
            "{:<11} {:>6.3} {:>5} {:>7.1}% {:>6.2}% {} {:>8} {:>10} {:>8.1}",
            r.router,
            r.budget,
            r.n,
            r.accuracy * 100.0,
            r.cloud_share * 100.0,
            gap(r),
            r.cloud_requests,
            r.cloud_completion_tokens,
            r.seconds
        );
    }
    eprintln!(
        "[eval] results.json, replies.jsonl and chart.svg in {}",
        args.out.display()
    );
    Ok(())
}
