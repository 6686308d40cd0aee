//! The features file: per reply position, what the edge model saw (hidden state, signals,
//! its own top token) and what the cloud answered, written during label collection and read
//! by training.
//!
//! Two files in one folder: `features.json` (the header: model pair, widths) and
//! `features.bin` (fixed-size little-endian records, hidden states as f16). Records are
//! appended one example at a time and flushed, so an interrupted collection resumes from the
//! last complete example; a torn record at the end is cut off on reopening.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// Signals stored per record, in this order (as [`tandem_core::signals::Signals::features`]).
pub const SIGNALS: [&str; 3] = ["top1_prob", "margin", "entropy"];
/// 2: records carry the cloud's probability of the edge's token.
const VERSION: u32 = 2;
/// Bytes of a record before its hidden state.
const FIXED_BYTES: usize = 4 + 2 + 1 + 1 + 4 + 4 + 4 + 4 + 4 * SIGNALS.len();

/// What the records were collected with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// Format version.
    pub version: u32,
    /// sha256 of the edge GGUF.
    pub edge_sha256: String,
    /// The edge model's name (for people).
    pub edge: String,
    /// The cloud's identity, as routers record it ([`tandem_core::router::ModelPair::cloud`]).
    pub cloud: String,
    /// Width of the hidden state.
    pub hidden_size: usize,
    /// The signal names, in record order.
    pub signals: Vec<String>,
    /// The data set the prompts came from.
    pub data: String,
    /// The prompts the answers were asked with ([`crate::task::prompt_name`]).
    pub prompt: String,
}

impl Header {
    /// A header for features collected with the prompts named `prompt`
    /// ([`crate::task::prompt_name`]).
    pub fn new(
        edge_sha256: &str,
        edge: &str,
        cloud: &str,
        hidden_size: usize,
        data: &str,
        prompt: &str,
    ) -> Self {
        Self {
            version: VERSION,
            edge_sha256: edge_sha256.to_owned(),
            edge: edge.to_owned(),
            cloud: cloud.to_owned(),
            hidden_size,
            signals: SIGNALS.iter().map(|s| (*s).to_owned()).collect(),
            data: data.to_owned(),
            prompt: prompt.to_owned(),
        }
    }

    fn describe(&self) -> String {
        format!(
            "edge {} / cloud {} on {} ({} prompts)",
            self.edge, self.cloud, self.data, self.prompt
        )
    }

    fn record_bytes(&self) -> usize {
        FIXED_BYTES + 2 * self.hidden_size
    }
}

/// One position of one example.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// Index of the example in its data set.
    pub example: u32,
    /// Position in the reply (0 = first reply token).
    pub position: u16,
    /// `true` when the cloud should take this token: the edge's top token differs from the
    /// cloud's and would change the answer read from the reply ([`crate::labels`]), or the
    /// cloud is sure it is wrong ([`crate::judge`]).
    pub label: bool,
    /// The edge model's top token.
    pub edge_token: i32,
    /// The cloud's token.
    pub cloud_token: i32,
    /// The cloud's margin at this position, `p(top1) − p(top2)`, when its distribution was
    /// read ([`crate::judge`]); NaN when only its answer is known ([`crate::labels`]).
    pub cloud_margin: f32,
    /// The probability the cloud gives the edge's token at this position ([`crate::judge`]);
    /// NaN when only its answer is known.
    pub cloud_prob: f32,
    /// [`SIGNALS`] at this position.
    pub signals: [f32; 3],
    /// The edge model's last-layer hidden state.
    pub hidden: Vec<f32>,
}

impl Record {
    /// What a router sees at this position at run time, read back from the record: the
    /// stored signals, hidden state and position.
    pub fn router_features(&self) -> tandem_core::router::Features<'_> {
        let [top1_prob, margin, entropy] = self.signals;
        tandem_core::router::Features {
            signals: tandem_core::signals::Signals {
                top1_prob,
                margin,
                entropy,
            },
            hidden: Some(&self.hidden),
            position: u32::from(self.position),
        }
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.example.to_le_bytes());
        out.extend_from_slice(&self.position.to_le_bytes());
        out.push(u8::from(self.label));
        out.push(0);
        out.extend_from_slice(&self.edge_token.to_le_bytes());
        out.extend_from_slice(&self.cloud_token.to_le_bytes());
        out.extend_from_slice(&self.cloud_margin.to_le_bytes());
        out.extend_from_slice(&self.cloud_prob.to_le_bytes());
        for s in self.signals {
            out.extend_from_slice(&s.to_le_bytes());
        }
        for &h in &self.hidden {
            out.extend_from_slice(&half::f16::from_f32(h).to_le_bytes());
        }
    }

    fn decode(bytes: &[u8]) -> Record {
        let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().expect("4 bytes"));
        let f32_at = |i: usize| f32::from_bits(u32_at(i));
        let signals_at = 24;
        let hidden_at = FIXED_BYTES;
        Record {
            example: u32_at(0),
            position: u16::from_le_bytes([bytes[4], bytes[5]]),
            label: bytes[6] != 0,
            edge_token: u32_at(8) as i32,
            cloud_token: u32_at(12) as i32,
            cloud_margin: f32_at(16),
            cloud_prob: f32_at(20),
            signals: [
                f32_at(signals_at),
                f32_at(signals_at + 4),
                f32_at(signals_at + 8),
            ],
            hidden: bytes[hidden_at..]
                .chunks_exact(2)
                .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
        }
    }
}

/// Why a features folder cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum FeaturesError {
    /// Reading or writing failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The header is missing or unreadable.
    #[error("{path} is not a features header: {detail}")]
    Header {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// Resuming with other models or data than the folder was started with.
    #[error("{dir} holds features for {found}; this run uses {wanted}: use another folder")]
    Mismatch {
        /// The folder.
        dir: PathBuf,
        /// Edge / cloud on data, in the folder.
        found: String,
        /// Edge / cloud on data, of this run.
        wanted: String,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> FeaturesError + '_ {
    move |source| FeaturesError::Io {
        path: path.to_owned(),
        source,
    }
}

fn read_header(dir: &Path) -> Result<Option<Header>, FeaturesError> {
    let path = dir.join("features.json");
    match std::fs::read(&path) {
        Ok(bytes) => {
            let header: Header =
                serde_json::from_slice(&bytes).map_err(|e| FeaturesError::Header {
                    path: path.clone(),
                    detail: e.to_string(),
                })?;
            if header.version != VERSION {
                return Err(FeaturesError::Header {
                    path,
                    detail: format!(
                        "records of format {}, this Tandem reads format {VERSION}: collect \
                         the labels again into another folder",
                        header.version
                    ),
                });
            }
            Ok(Some(header))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(FeaturesError::Io { path, source }),
    }
}

/// Appends records to a features folder.
pub struct FeatureWriter {
    header: Header,
    out: BufWriter<File>,
    path: PathBuf,
    buffer: Vec<u8>,
}

impl FeatureWriter {
    /// Opens `dir` for `header`: a new folder starts empty; an existing one must hold the
    /// same models and data, and its complete examples are returned so they can be skipped.
    pub fn open(dir: &Path, header: Header) -> Result<(Self, BTreeSet<u32>), FeaturesError> {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let path = dir.join("features.bin");
        let mut done = BTreeSet::new();
        match read_header(dir)? {
            Some(found) if found == header => {
                let records = read_records(&path, &header)?;
                // An example is complete when it is followed by another one or when the file
                // was flushed after it; the writer flushes per example, so only the last
                // example can be torn, and it is re-collected whole.
                let last = records.last().map(|r| r.example);
                let keep = records
                    .iter()
                    .take_while(|r| Some(r.example) != last)
                    .count();
                done.extend(records[..keep].iter().map(|r| r.example));
                let file = OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .map_err(io(&path))?;
                file.set_len((keep * header.record_bytes()) as u64)
                    .map_err(io(&path))?;
            }
            Some(found) => {
                return Err(FeaturesError::Mismatch {
                    dir: dir.to_owned(),
                    found: found.describe(),
                    wanted: header.describe(),
                })
            }
            None => {
                let json = serde_json::to_vec_pretty(&header).expect("header serializes");
                let header_path = dir.join("features.json");
                std::fs::write(&header_path, json).map_err(io(&header_path))?;
                File::create(&path).map_err(io(&path))?;
            }
        }
        let file = OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(io(&path))?;
        Ok((
            Self {
                header,
                out: BufWriter::new(file),
                path,
                buffer: Vec::new(),
            },
            done,
        ))
    }

    /// Appends one example's records and flushes them to disk.
    pub fn write_example(&mut self, records: &[Record]) -> Result<(), FeaturesError> {
        self.buffer.clear();
        for r in records {
            debug_assert_eq!(r.hidden.len(), self.header.hidden_size);
            r.encode(&mut self.buffer);
        }
        self.out.write_all(&self.buffer).map_err(io(&self.path))?;
        self.out.flush().map_err(io(&self.path))
    }
}

fn read_records(path: &Path, header: &Header) -> Result<Vec<Record>, FeaturesError> {
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(io(path))?;
    Ok(bytes
        .chunks_exact(header.record_bytes())
        .map(Record::decode)
        .collect())
}

/// A features folder, read whole.
#[derive(Debug, Clone, PartialEq)]
pub struct FeatureSet {
    /// What the records were collected with.
    pub header: Header,
    /// Every complete record, in collection order.
    pub records: Vec<Record>,
}

impl FeatureSet {
    /// Reads `dir`.
    pub fn read(dir: &Path) -> Result<Self, FeaturesError> {
        let header = read_header(dir)?.ok_or_else(|| FeaturesError::Header {
            path: dir.join("features.json"),
            detail: "missing: run label collection first".into(),
        })?;
        let records = read_records(&dir.join("features.bin"), &header)?;
        Ok(Self { header, records })
    }

    /// One set of several collected for the same models (other data, other prompt formats),
    /// so one router learns every kind of reply. Examples are renumbered to stay apart;
    /// sets from another edge, cloud or feature layout are refused.
    pub fn merge(dirs: &[PathBuf]) -> Result<Self, FeaturesError> {
        let mut merged: Option<FeatureSet> = None;
        for dir in dirs {
            let mut set = Self::read(dir)?;
            let Some(into) = merged.as_mut() else {
                merged = Some(set);
                continue;
            };
            let (a, b) = (&into.header, &set.header);
            if (
                &a.edge_sha256,
                &a.cloud,
                a.hidden_size,
                &a.signals,
                a.version,
            ) != (
                &b.edge_sha256,
                &b.cloud,
                b.hidden_size,
                &b.signals,
                b.version,
            ) {
                return Err(FeaturesError::Mismatch {
                    dir: dir.clone(),
                    found: b.describe(),
                    wanted: a.describe(),
                });
            }
            let offset = into
                .records
                .iter()
                .map(|r| r.example + 1)
                .max()
                .unwrap_or(0);
            for r in &mut set.records {
                r.example += offset;
            }
            into.header.data = format!("{} + {}", into.header.data, b.data);
            into.header.prompt = format!("{} + {}", into.header.prompt, b.prompt);
            into.records.append(&mut set.records);
        }
        merged.ok_or_else(|| FeaturesError::Header {
            path: PathBuf::new(),
            detail: "no features folder given".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::ChoiceFormat;

    fn record(example: u32, position: u16, hidden: usize) -> Record {
        Record {
            example,
            position,
            label: position.is_multiple_of(2),
            edge_token: 100 + i32::from(position),
            cloud_token: -1,
            cloud_margin: f32::NAN,
            cloud_prob: 0.125,
            signals: [0.5, 0.25, 1.5],
            hidden: (0..hidden).map(|i| i as f32 / 8.0).collect(),
        }
    }

    fn header() -> Header {
        Header::new(
            "abc",
            "edge",
            "cloud",
            4,
            "csqa:train",
            ChoiceFormat::default().name(),
        )
    }

    #[test]
    fn records_round_trip_through_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let (mut w, done) = FeatureWriter::open(dir.path(), header()).unwrap();
        assert!(done.is_empty());
        w.write_example(&[record(0, 0, 4), record(0, 1, 4)])
            .unwrap();
        w.write_example(&[record(3, 0, 4)]).unwrap();
        drop(w);
        let set = FeatureSet::read(dir.path()).unwrap();
        assert_eq!(set.header, header());
        assert_eq!(set.records.len(), 3);
        let r = &set.records[1];
        assert_eq!((r.example, r.position, r.label), (0, 1, false));
        assert_eq!(
            r.hidden,
            vec![0.0, 0.125, 0.25, 0.375],
            "f16 keeps these exactly"
        );
        assert!(r.cloud_margin.is_nan());
        assert_eq!(r.cloud_prob, 0.125);
    }

    #[test]
    fn an_interrupted_collection_resumes_after_its_last_complete_example() {
        let dir = tempfile::tempdir().unwrap();
        let (mut w, _) = FeatureWriter::open(dir.path(), header()).unwrap();
        w.write_example(&[record(0, 0, 4)]).unwrap();
        w.write_example(&[record(1, 0, 4), record(1, 1, 4)])
            .unwrap();
        drop(w);
        // A crash mid-record leaves a torn tail.
        let bin = dir.path().join("features.bin");
        let mut bytes = std::fs::read(&bin).unwrap();
        bytes.extend_from_slice(&[1, 2, 3]);
        std::fs::write(&bin, bytes).unwrap();

        let (mut w, done) = FeatureWriter::open(dir.path(), header()).unwrap();
        // Example 1 may have been cut short: only example 0 counts as done.
        assert_eq!(done.into_iter().collect::<Vec<_>>(), vec![0]);
        w.write_example(&[record(1, 0, 4), record(1, 1, 4)])
            .unwrap();
        drop(w);
        let set = FeatureSet::read(dir.path()).unwrap();
        assert_eq!(
            set.records
                .iter()
                .map(|r| (r.example, r.position))
                .collect::<Vec<_>>(),
            vec![(0, 0), (1, 0), (1, 1)]
        );
    }

    #[test]
    fn sets_of_one_pair_merge_with_their_examples_kept_apart() {
        let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
        let chat = Header::new(
            "abc",
            "edge",
            "cloud",
            4,
            "chat:train",
            ChoiceFormat::default().name(),
        );
        let last = Header::new(
            "abc",
            "edge",
            "cloud",
            4,
            "csqa:train",
            ChoiceFormat::AnswerLast.name(),
        );
        for (dir, header) in dirs.iter().zip([header(), chat, last]) {
            let (mut w, _) = FeatureWriter::open(dir.path(), header).unwrap();
            w.write_example(&[record(0, 0, 4), record(0, 1, 4)])
                .unwrap();
            w.write_example(&[record(2, 0, 4)]).unwrap();
        }
        let paths: Vec<PathBuf> = dirs.iter().map(|d| d.path().to_owned()).collect();
        let set = FeatureSet::merge(&paths).unwrap();
        let examples: Vec<u32> = set.records.iter().map(|r| r.example).collect();
        assert_eq!(examples, [0, 0, 2, 3, 3, 5, 6, 6, 8]);
        assert_eq!(set.header.data, "csqa:train + chat:train + csqa:train");
        assert_eq!(
            set.header.prompt,
            "letter-text-because/3 + letter-text-because/3 + reason-then-answer/1"
        );

        let other = tempfile::tempdir().unwrap();
        let header = Header::new(
            "xyz",
            "edge",
            "cloud",
            4,
            "chat:train",
            ChoiceFormat::default().name(),
        );
        FeatureWriter::open(other.path(), header).unwrap();
        let err = FeatureSet::merge(&[paths[0].clone(), other.path().to_owned()]).unwrap_err();
        assert!(matches!(err, FeaturesError::Mismatch { .. }), "{err}");
    }

    #[test]
    fn resuming_with_other_models_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        FeatureWriter::open(dir.path(), header()).unwrap();
        let other = Header::new(
            "def",
            "edge2",
            "cloud",
            4,
            "csqa:train",
            ChoiceFormat::default().name(),
        );
        let err = FeatureWriter::open(dir.path(), other).err().unwrap();
        assert!(err.to_string().contains("use another folder"), "{err}");
    }

    #[test]
    fn a_folder_of_another_format_is_refused_not_misread() {
        let dir = tempfile::tempdir().unwrap();
        let older = Header {
            version: VERSION - 1,
            ..header()
        };
        let json = serde_json::to_vec(&older).unwrap();
        std::fs::write(dir.path().join("features.json"), json).unwrap();
        std::fs::write(dir.path().join("features.bin"), [0u8; 64]).unwrap();
        let err = FeatureSet::read(dir.path()).unwrap_err();
        assert!(
            err.to_string().contains("collect the labels again"),
            "{err}"
        );
        assert!(FeatureWriter::open(dir.path(), header()).is_err());
    }
}
