//! The formats the fetched splits come in, each read into Tandem's rows: OLMES request dumps
//! (multiple choice), GSM8K lines, MT-bench's first turns and Alpaca-style instructions.

use super::{ChoiceRow, Choices, DataError, MathRow, OpenRow, Row};
use serde::Deserialize;
use std::io::Read;
use std::path::PathBuf;

#[derive(Deserialize)]
struct OlmesLine {
    doc: OlmesDoc,
}

#[derive(Deserialize)]
struct OlmesDoc {
    id: serde_json::Value,
    query: String,
    choices: Vec<String>,
    gold: usize,
}

/// OLMES dumps hold one line per (question, choice); questions keep their first-seen order.
pub(super) fn olmes_rows(gz: &[u8], name: &str) -> Result<Vec<Row>, DataError> {
    let mut text = String::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_string(&mut text)
        .map_err(|source| DataError::Io {
            path: PathBuf::from(name),
            source,
        })?;
    let mut seen = std::collections::HashSet::new();
    source_lines(&text, name, |_, parsed: OlmesLine| {
        let doc = parsed.doc;
        let id = id_text(doc.id);
        if !seen.insert(id.clone()) {
            return Ok(None);
        }
        let question = doc.query.trim();
        let question = question.strip_prefix("Question:").unwrap_or(question);
        let question = question.strip_suffix("Answer:").unwrap_or(question).trim();
        let label: Vec<String> = (0..doc.choices.len())
            .map(|i| char::from(b'A' + i as u8).to_string())
            .collect();
        Ok(Some(Row::Choice(ChoiceRow {
            id,
            question: question.to_owned(),
            answer_key: label[doc.gold.min(label.len() - 1)].clone(),
            choices: Choices {
                label,
                text: doc.choices,
            },
        })))
    })
}

/// The rows of a JSONL member, one line of `T` each, made by `row(index, line)` (`None` skips
/// the line); a line that does not parse, or that `row` refuses, is named by its number.
fn source_lines<T: serde::de::DeserializeOwned>(
    text: &str,
    name: &str,
    mut row: impl FnMut(usize, T) -> Result<Option<Row>, String>,
) -> Result<Vec<Row>, DataError> {
    let mut rows = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let parsed = serde_json::from_str(line).map_err(|e| e.to_string());
        if let Some(made) = parsed
            .and_then(|t| row(i, t))
            .map_err(|detail| DataError::Parse {
                path: PathBuf::from(name),
                line: i + 1,
                detail,
            })?
        {
            rows.push(made);
        }
    }
    Ok(rows)
}

/// An id as text: a JSON string as it is, a number as written.
fn id_text(id: serde_json::Value) -> String {
    match id {
        serde_json::Value::String(s) => s,
        other => other.to_string(),
    }
}

#[derive(Deserialize)]
struct Gsm8kLine {
    question: String,
    answer: String,
}

pub(super) fn gsm8k_rows(raw: &[u8], name: &str) -> Result<Vec<Row>, DataError> {
    source_lines(
        &String::from_utf8_lossy(raw),
        name,
        |i, parsed: Gsm8kLine| {
            let answer = parsed
                .answer
                .rsplit("####")
                .next()
                .and_then(|n| n.trim().replace(',', "").parse::<f64>().ok())
                .ok_or("no '#### number' in the answer")?;
            Ok(Some(Row::Math(MathRow {
                id: i.to_string(),
                question: parsed.question,
                answer,
            })))
        },
    )
}

#[derive(Deserialize)]
struct MtBenchLine {
    question_id: serde_json::Value,
    turns: Vec<String>,
}

/// One open prompt per MT-bench question: its first turn (the second asks about the reply).
pub(super) fn mt_bench_rows(raw: &[u8], name: &str) -> Result<Vec<Row>, DataError> {
    source_lines(
        &String::from_utf8_lossy(raw),
        name,
        |_, parsed: MtBenchLine| {
            let question = parsed
                .turns
                .into_iter()
                .next()
                .filter(|t| !t.trim().is_empty())
                .ok_or("no first turn")?;
            Ok(Some(Row::Open(OpenRow {
                id: id_text(parsed.question_id),
                question,
            })))
        },
    )
}

#[derive(Deserialize)]
struct AlpacaItem {
    instruction: String,
    #[serde(default)]
    input: String,
}

/// One open prompt per distinct instruction (with its input after a blank line), numbered
/// by position in the array.
pub(super) fn alpaca_rows(raw: &[u8], name: &str) -> Result<Vec<Row>, DataError> {
    let items: Vec<AlpacaItem> = serde_json::from_slice(raw).map_err(|e| DataError::Parse {
        path: PathBuf::from(name),
        line: e.line(),
        detail: e.to_string(),
    })?;
    let mut seen = std::collections::HashSet::new();
    let mut rows = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        let question = match item.input.trim() {
            "" => item.instruction.trim().to_owned(),
            input => format!("{}\n\n{input}", item.instruction.trim()),
        };
        if question.is_empty() || !seen.insert(question.clone()) {
            continue;
        }
        rows.push(Row::Open(OpenRow {
            id: i.to_string(),
            question,
        }));
    }
    Ok(rows)
}
