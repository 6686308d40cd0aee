//! `tandem train-router`: collects labels from the cloud (resumable, cached) and trains the
//! MLP router for this exact edge/cloud pair. Labels come from continuations the cloud writes
//! over HTTP ([`labels`], any cloud) or, with `--judged`, from the cloud model's own
//! distribution over the edge's replies, read in-process ([`judge`], the stand-in's weights).

use crate::pair::{PairArgs, Progress};
use anyhow::{Context, Result};
use std::path::PathBuf;
use tandem_core::paths::Paths;
use tandem_core::router::file::FeatureLayout;
use tandem_eval::data;
use tandem_eval::features::{FeatureSet, FeatureWriter, Header};
use tandem_eval::judge;
use tandem_eval::labels::{self, LabelProgress, Questions};
use tandem_eval::task::{self, ChoiceFormat};
use tandem_eval::train::{self, TrainOptions};

/// Flags.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pair: PairArgs,
    /// Training prompts: a split name (see `tandem data pull`) or a JSONL file.
    #[arg(long, default_value = "csqa:train")]
    data: String,
    /// Use only the first N questions.
    #[arg(long)]
    limit: Option<usize>,
    /// Skip the first N questions (rows kept apart for evaluation, e.g. `chat:train` 0–59).
    #[arg(long, default_value_t = 0)]
    from: usize,
    /// Labels judged by the cloud model itself, read in-process over the edge's own replies
    /// (needs the `--stand-in` GGUF, makes no request): a position is critical where the
    /// cloud would write another token and finds the edge's unlikely.
    #[arg(long)]
    judged: bool,
    /// How multiple-choice questions are asked (letter-first or answer-last).
    #[arg(long, default_value = "letter-first")]
    format: ChoiceFormat,
    /// Folder of collected features (default: in the cache, per pair and data).
    #[arg(long)]
    features: Option<PathBuf>,
    /// Also train on features already collected in these folders (other data or prompt
    /// formats for the same pair), so one router learns every kind of reply.
    #[arg(long = "with", value_name = "FOLDER")]
    with: Vec<PathBuf>,
    /// Where to write the router.
    #[arg(long)]
    out: PathBuf,
    /// What the router reads: `hidden+signals` (the edge's hidden state and its three
    /// confidence signals), `signals` (the signals only: no hidden state at run time) or
    /// `signals+position` (the signals and where the token is in its reply).
    #[arg(long, default_value = "hidden+signals", value_parser = FeatureLayout::parse)]
    inputs: FeatureLayout,
    /// Width of the hidden layer.
    #[arg(long, default_value_t = 128)]
    width: usize,
}

/// Runs it.
pub fn run(args: Args) -> Result<()> {
    let mut rows = data::load(&args.data, &data::dir(), args.limit)?;
    rows.drain(..args.from.min(rows.len()));
    anyhow::ensure!(
        args.judged || rows.iter().all(|r| r.is_graded()),
        "{} holds open prompts, which have no answer for a continuation to change: collect \
         their labels with --judged",
        args.data
    );
    // The stand-in is started only for labels that ask it over HTTP (and stops on drop).
    let (local, started);
    let (pair, cloud, judge_weights) = if args.judged {
        let (pair, weights) = args.pair.open_local(true)?;
        local = pair;
        (&local, None, Some(weights))
    } else {
        let (pair, cloud) = args.pair.open(true)?;
        started = pair;
        (&started.engine, Some(cloud), None)
    };
    let data_name = match (args.from, args.limit) {
        (0, None) => args.data.clone(),
        (from, limit) => format!(
            "{}[{from}..{}]",
            args.data,
            limit.map(|n| n.to_string()).unwrap_or_default()
        ),
    };
    let labels_name = if args.judged { "judged" } else { "continued" };
    let prompt = format!("{} ({labels_name})", task::prompt_name(&rows, args.format));
    let folder = args.features.clone().unwrap_or_else(|| {
        let safe = |s: &str| s.replace(['/', ':', ' ', '(', ')', '[', ']'], "_");
        Paths::discover().cache.join("features").join(format!(
            "{}--{}--{}--{}",
            safe(&pair.edge_name),
            safe(&pair.ids.cloud),
            safe(&data_name),
            safe(&prompt)
        ))
    });
    let header = Header::new(
        &pair.ids.edge_sha256,
        &pair.edge_name,
        &pair.ids.cloud,
        pair.weights.hidden_size(),
        &data_name,
        &prompt,
    );
    let (mut writer, done) = FeatureWriter::open(&folder, header)?;
    if !done.is_empty() {
        eprintln!(
            "[labels] resuming: {} examples already in {}",
            done.len(),
            folder.display()
        );
    }
    let mut edge = pair.session()?;
    let progress = Progress::new("labels", done.len());
    let mut show = |p: LabelProgress| {
        let share = p.positives as f64 / p.positions.max(1) as f64;
        progress.show(
            p.done,
            p.total,
            &format!("{} positions, {:.1}% critical", p.positions, share * 100.0),
        )
    };
    let questions = Questions {
        rows: &rows,
        format: args.format,
    };
    let collected = match (cloud, &judge_weights) {
        (Some(mut cloud), _) => labels::collect(
            &pair.weights,
            &mut edge,
            &mut cloud,
            questions,
            &done,
            &mut writer,
            &mut show,
        )?,
        (None, Some(weights)) => judge::collect(
            &pair.weights,
            &mut edge,
            &mut pair.session_of(weights)?,
            questions,
            &done,
            &mut writer,
            &mut show,
        )?,
        (None, None) => unreachable!("one of the two is opened above"),
    };
    progress.finish();
    if collected.failed > 0 {
        eprintln!(
            "[labels] {} examples skipped: the cloud failed on them",
            collected.failed
        );
    }
    let folders: Vec<PathBuf> = std::iter::once(folder)
        .chain(args.with.iter().cloned())
        .collect();
    let set = FeatureSet::merge(&folders)?;
    let options = TrainOptions {
        features: args.inputs,
        hidden_layers: vec![args.width],
        ..TrainOptions::default()
    };
    eprintln!(
        "[train] {} positions from {} ({})",
        set.records.len(),
        set.header.data,
        set.header.prompt
    );
    let (router, report) = train::train(&set, &options)?;
    let data_name = if args.with.is_empty() {
        data_name
    } else {
        format!("{} ({})", set.header.data, set.header.prompt)
    };
    router
        .save(&args.out, &pair.ids, &data_name)
        .with_context(|| format!("writing {}", args.out.display()))?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    eprintln!(
        "[train] router for {} + {} written to {}",
        pair.edge_name,
        pair.ids.cloud,
        args.out.display()
    );
    Ok(())
}
