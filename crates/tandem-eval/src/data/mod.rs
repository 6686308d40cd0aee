//! Question-answering data: named splits fetched from the packages listed in `docs/models.md`, cached as
//! plain JSONL, the chat prompts shipped with Tandem, and JSONL files of any of these rows.
//!
//! Every multiple-choice set is normalised to the CommonsenseQA row shape
//! (`{"id", "question", "choices": {"label", "text"}, "answerKey"}`), the shape `--data`
//! accepts from users, so one prompt format and one answer check serve them all. GSM8K rows
//! keep their own shape (a question and a numeric answer). Open prompts (MT-bench's first
//! turns, Alpaca-style instructions) have no answer to check: they are scored by how likely
//! the cloud model finds a reply ([`crate::quality`]) and teach routers on text that is not a
//! quiz ([`crate::judge`]).

mod sources;
mod splits;

pub use splits::{pull, splits_of, Split, SPLITS};

use serde::{Deserialize, Serialize};
use splits::{cached, split_names, SourceFormat};
use std::path::{Path, PathBuf};
use tandem_core::packages::PackageError;

/// Where `tandem data pull` keeps the sets it fetched: the platform cache's `data` folder.
pub fn dir() -> PathBuf {
    tandem_core::paths::Paths::discover().cache.join("data")
}

/// The choices of a multiple-choice question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Choices {
    /// Labels, e.g. `A`…`E`.
    pub label: Vec<String>,
    /// Texts, one per label.
    pub text: Vec<String>,
}

/// A multiple-choice question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChoiceRow {
    /// Its id in the source set.
    pub id: String,
    /// The question.
    pub question: String,
    /// The choices.
    pub choices: Choices,
    /// The correct label.
    #[serde(rename = "answerKey")]
    pub answer_key: String,
}

/// A grade-school math problem with a numeric answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MathRow {
    /// Its position in the source set.
    pub id: String,
    /// The problem.
    pub question: String,
    /// The final number.
    pub answer: f64,
}

/// An open chat prompt with a short checkable answer: correct when the reply contains one
/// of `accept` as whole words (case aside).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRow {
    /// Its id in the set.
    pub id: String,
    /// The prompt, as a user would type it.
    pub question: String,
    /// The answers that count, e.g. `["Canberra"]`.
    pub accept: Vec<String>,
}

/// An open prompt with no answer to check (an instruction, a writing task).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenRow {
    /// Its id in the source set.
    pub id: String,
    /// The prompt, as a user would type it.
    pub question: String,
}

/// One question of an evaluation or training set.
#[derive(Debug, Clone, PartialEq)]
pub enum Row {
    /// Multiple choice (CommonsenseQA, ARC-Easy, user files).
    Choice(ChoiceRow),
    /// Numeric answer (GSM8K).
    Math(MathRow),
    /// Open chat with a short checkable answer.
    Chat(ChatRow),
    /// An open prompt with no answer.
    Open(OpenRow),
}

impl Row {
    /// The row's id in its data set.
    pub fn id(&self) -> &str {
        match self {
            Row::Choice(r) => &r.id,
            Row::Math(r) => &r.id,
            Row::Chat(r) => &r.id,
            Row::Open(r) => &r.id,
        }
    }

    /// Whether the row has an answer a reply can be checked against.
    pub fn is_graded(&self) -> bool {
        !matches!(self, Row::Open(_))
    }
}

/// Why data could not be had.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// Not a known split and not a file.
    #[error("unknown data '{0}': name a split ({names}) or a JSONL file", names = split_names())]
    Unknown(String),
    /// A named split that was not pulled yet.
    #[error("{0} is not downloaded yet: run `tandem data pull {set}`", set = .0.split(':').next().unwrap_or(.0))]
    NotPulled(String),
    /// Fetching failed.
    #[error(transparent)]
    Fetch(#[from] PackageError),
    /// Reading or writing failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A line is not a row.
    #[error("{path} line {line}: {detail}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        detail: String,
    },
}

/// The first `limit` rows (all without one) of `data`: a split name (pulled before, but for
/// the shipped chat prompts) or a JSONL file of rows in any of the shapes: multiple choice
/// (`{"id","question","choices":{"label","text"},"answerKey"}`), math
/// (`{"id","question","answer"}`, the answer a number or a string holding one), chat
/// (`{"id","question","accept":[…]}`) or open (`{"id","question"}`). Reading stops at the limit, so held-out rows past it
/// (CommonsenseQA dev 600+, GSM8K test 1000+) are never even parsed.
pub fn load(data: &str, data_dir: &Path, limit: Option<usize>) -> Result<Vec<Row>, DataError> {
    if let Some(split) = SPLITS.iter().find(|s| s.name == data) {
        if let SourceFormat::Embedded(text) = split.format {
            return parse_rows(
                text.lines().map(|l| Ok(l.to_owned())),
                Path::new(split.source),
                Some(Shape::Chat),
                limit,
            );
        }
        let path = cached(split, data_dir);
        if !path.is_file() {
            return Err(DataError::NotPulled(split.name.to_owned()));
        }
        return read_file(&path, Some(split.format.shape()), limit);
    }
    let path = Path::new(data);
    if path.is_file() {
        return read_file(path, None, limit);
    }
    Err(DataError::Unknown(data.to_owned()))
}

/// Which shape a file's rows have: known for a named split, told line by line for a user's
/// file (by its fields: `choices`, `accept`, `answer`, or else an open prompt).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    Choice,
    Math,
    Chat,
    Open,
}

pub(super) fn read_file(
    path: &Path,
    shape: Option<Shape>,
    limit: Option<usize>,
) -> Result<Vec<Row>, DataError> {
    use std::io::BufRead;
    let file = std::fs::File::open(path).map_err(|source| DataError::Io {
        path: path.to_owned(),
        source,
    })?;
    parse_rows(std::io::BufReader::new(file).lines(), path, shape, limit)
}

pub(super) fn parse_rows(
    lines: impl Iterator<Item = std::io::Result<String>>,
    path: &Path,
    shape: Option<Shape>,
    limit: Option<usize>,
) -> Result<Vec<Row>, DataError> {
    let limit = limit.unwrap_or(usize::MAX);
    let mut rows = Vec::new();
    for (i, line) in lines.enumerate() {
        if rows.len() >= limit {
            break;
        }
        let line = line.map_err(|source| DataError::Io {
            path: path.to_owned(),
            source,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let row = parse_row(&line, shape).map_err(|detail| DataError::Parse {
            path: path.to_owned(),
            line: i + 1,
            detail,
        })?;
        rows.push(row);
    }
    Ok(rows)
}

fn parse_row(line: &str, shape: Option<Shape>) -> Result<Row, String> {
    let shape = match shape {
        Some(shape) => shape,
        None => {
            let fields: serde_json::Map<String, serde_json::Value> =
                serde_json::from_str(line).map_err(|e| e.to_string())?;
            if fields.contains_key("choices") {
                Shape::Choice
            } else if fields.contains_key("accept") {
                Shape::Chat
            } else if fields.contains_key("answer") {
                Shape::Math
            } else {
                Shape::Open
            }
        }
    };
    match shape {
        Shape::Choice => {
            let row: ChoiceRow = serde_json::from_str(line).map_err(|e| e.to_string())?;
            if row.choices.label.len() != row.choices.text.len()
                || !row.choices.label.contains(&row.answer_key)
            {
                return Err(
                    "labels and texts differ in number, or answerKey is not a label".into(),
                );
            }
            Ok(Row::Choice(row))
        }
        Shape::Math => {
            let row: UserMathRow = serde_json::from_str(line).map_err(|e| e.to_string())?;
            let answer = row
                .answer
                .number()
                .ok_or("a math row's answer is a number (or a string holding one)")?;
            Ok(Row::Math(MathRow {
                id: row.id,
                question: row.question,
                answer,
            }))
        }
        Shape::Chat => {
            let row: ChatRow = serde_json::from_str(line).map_err(|e| e.to_string())?;
            if row.accept.is_empty() || row.accept.iter().any(|a| a.trim().is_empty()) {
                return Err("a chat row accepts at least one answer, none of them empty".into());
            }
            Ok(Row::Chat(row))
        }
        Shape::Open => {
            let row: OpenRow = serde_json::from_str(line).map_err(|e| e.to_string())?;
            if row.question.trim().is_empty() {
                return Err("an open prompt is not empty".into());
            }
            Ok(Row::Open(row))
        }
    }
}

/// A math row as people write one: the answer a number or a string such as `"1,207"`.
#[derive(Deserialize)]
struct UserMathRow {
    id: String,
    question: String,
    answer: NumberOrText,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum NumberOrText {
    Number(f64),
    Text(String),
}

impl NumberOrText {
    fn number(&self) -> Option<f64> {
        match self {
            NumberOrText::Number(n) => Some(*n),
            NumberOrText::Text(t) => t.trim().replace(',', "").parse().ok(),
        }
        .filter(|n: &f64| n.is_finite())
    }
}

#[cfg(test)]
mod tests {
    use super::sources::*;
    use super::splits::*;
    use super::*;
    use std::io::Write;

    fn gz(text: &str) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(text.as_bytes()).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn olmes_dumps_become_one_row_per_question_in_order() {
        let line = |id: &str, gold: usize| {
            format!(
                r#"{{"doc": {{"id": "{id}", "query": "Question: Where is a bank?\nAnswer:", "choices": ["town", "river", "moon"], "gold": {gold}}}}}"#
            )
        };
        let dump = [line("q1", 1), line("q1", 1), line("q2", 0)].join("\n");
        let rows = olmes_rows(&gz(&dump), "test").unwrap();
        assert_eq!(rows.len(), 2);
        let Row::Choice(first) = &rows[0] else {
            panic!()
        };
        assert_eq!(first.id, "q1");
        assert_eq!(first.question, "Where is a bank?");
        assert_eq!(first.choices.label, ["A", "B", "C"]);
        assert_eq!(first.answer_key, "B");
    }

    #[test]
    fn gsm8k_answers_are_the_number_after_the_marks() {
        let rows = gsm8k_rows(
            br#"{"question": "How many?", "answer": "3 + 4 = 7\n#### 1,207"}"#,
            "gsm8k",
        )
        .unwrap();
        assert_eq!(
            rows,
            [Row::Math(MathRow {
                id: "0".into(),
                question: "How many?".into(),
                answer: 1207.0
            })]
        );
    }

    #[test]
    fn open_prompt_sets_become_one_prompt_per_question() {
        let mt_bench = br#"{"question_id": 81, "category": "writing", "turns": ["Write a poem.", "Now shorter."]}
{"question_id": 82, "category": "math", "turns": ["What is 2 + 2?", "And 3 + 3?"]}"#;
        let rows = mt_bench_rows(mt_bench, "mt-bench").unwrap();
        assert_eq!(
            rows,
            [
                Row::Open(OpenRow {
                    id: "81".into(),
                    question: "Write a poem.".into()
                }),
                Row::Open(OpenRow {
                    id: "82".into(),
                    question: "What is 2 + 2?".into()
                })
            ]
        );
        let alpaca = br#"[{"instruction": "Describe crepes.", "input": "", "output": "..."},
            {"instruction": "Translate this.", "input": "Bonjour", "output": "Hello"},
            {"instruction": "Describe crepes.", "input": "", "output": "again"}]"#;
        let rows = alpaca_rows(alpaca, "alpaca").unwrap();
        assert_eq!(rows.len(), 2, "the repeated instruction is kept once");
        assert!(
            matches!(&rows[1], Row::Open(r) if r.id == "1" && r.question == "Translate this.\n\nBonjour")
        );
        assert!(rows.iter().all(|r| !r.is_graded()));
        let err = mt_bench_rows(br#"{"question_id": 1, "turns": []}"#, "mt-bench").unwrap_err();
        assert!(err.to_string().contains("no first turn"), "{err}");
    }

    #[test]
    fn user_files_in_the_csqa_shape_load_and_bad_rows_name_their_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mine.jsonl");
        let good = r#"{"id": "x", "question": "Q?", "choices": {"label": ["A", "B"], "text": ["a", "b"]}, "answerKey": "B"}"#;
        std::fs::write(&path, format!("{good}\n\n{good}\n")).unwrap();
        assert_eq!(
            load(path.to_str().unwrap(), dir.path(), None)
                .unwrap()
                .len(),
            2
        );
        let bad = good.replace(r#""answerKey": "B""#, r#""answerKey": "Z""#);
        std::fs::write(&path, format!("{good}\n{bad}\n")).unwrap();
        let err = load(path.to_str().unwrap(), dir.path(), None).unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
    }

    #[test]
    fn the_shipped_chat_prompts_load_without_a_pull() {
        let dir = tempfile::tempdir().unwrap();
        let rows = load("chat:dev", dir.path(), None).unwrap();
        assert!(rows.len() >= 40, "{}", rows.len());
        assert!(rows.iter().all(|r| matches!(r, Row::Chat(_))));
        let (path, count) = pull(&splits_of("chat").unwrap()[0], dir.path()).unwrap();
        assert_eq!(count, rows.len());
        assert_eq!(read_file(&path, None, None).unwrap(), rows);
        let questions = |rows: &[Row]| -> std::collections::BTreeSet<String> {
            rows.iter()
                .map(|r| match r {
                    Row::Chat(c) => c.question.to_lowercase(),
                    other => panic!("not a chat row: {other:?}"),
                })
                .collect()
        };
        let train = load("chat:train", dir.path(), None).unwrap();
        assert!(train.len() >= 60, "{}", train.len());
        assert!(questions(&train).is_disjoint(&questions(&rows)));
        assert_eq!(read_file(&path, None, Some(1)).unwrap(), rows[..1]);
    }

    #[test]
    fn user_files_mix_every_row_shape() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mixed.jsonl");
        let choice = r#"{"id": "c", "question": "Q?", "choices": {"label": ["A", "B"], "text": ["a", "b"]}, "answerKey": "A"}"#;
        let math = r#"{"id": "m1", "question": "2 + 2?", "answer": 4}"#;
        let text = r#"{"id": "m2", "question": "How many?", "answer": "1,207"}"#;
        let chat = r#"{"id": "t", "question": "Capital of Australia?", "accept": ["Canberra"]}"#;
        let open = r#"{"id": "o", "question": "Write a haiku about rain."}"#;
        std::fs::write(&path, format!("{choice}\n{math}\n{text}\n{chat}\n{open}\n")).unwrap();
        let rows = load(path.to_str().unwrap(), dir.path(), None).unwrap();
        assert!(matches!(&rows[3], Row::Chat(r) if r.accept == ["Canberra"]));
        assert!(matches!(&rows[4], Row::Open(r) if r.question.starts_with("Write")));
        assert!(matches!(&rows[0], Row::Choice(r) if r.answer_key == "A"));
        assert!(matches!(&rows[1], Row::Math(r) if r.answer == 4.0));
        assert!(matches!(&rows[2], Row::Math(r) if r.answer == 1207.0));
        let bad = r#"{"id": "m3", "question": "How many?", "answer": "lots"}"#;
        std::fs::write(&path, format!("{math}\n{bad}\n")).unwrap();
        let err = load(path.to_str().unwrap(), dir.path(), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 2") && err.contains("number"), "{err}");
    }

    #[test]
    fn unknown_and_unpulled_data_say_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let err = load("csqa:dev", dir.path(), None).unwrap_err();
        assert!(err.to_string().contains("tandem data pull csqa"), "{err}");
        let err = load("nope", dir.path(), None).unwrap_err();
        assert!(err.to_string().contains("csqa:train"), "{err}");
        assert_eq!(splits_of("csqa").unwrap().len(), 2);
        assert!(splits_of("mmlu").is_err());
    }
}
