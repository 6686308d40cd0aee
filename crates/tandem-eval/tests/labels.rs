//! Label collection on a real edge model, against the project's fake cloud and against
//! llama.cpp's `llama-server`.

use std::collections::BTreeSet;
use std::path::Path;
use tandem_core::cloud::{CloudClient, CloudConfig};
use tandem_core::edge::EdgeModel;
use tandem_core::local::{EdgeWeights, LocalModel, LocalOptions};
use tandem_eval::data::{ChatRow, ChoiceRow, Choices, Row};
use tandem_eval::features::{FeatureSet, FeatureWriter, Header};
use tandem_eval::labels::{self, Questions};
use tandem_eval::task::ChoiceFormat;
use tandem_fake_cloud::{FakeCloud, Script};
use tandem_test_peers::{model, LlamaServer, SMOLLM2};

fn rows(n: usize) -> Vec<Row> {
    (0..n)
        .map(|i| {
            Row::Choice(ChoiceRow {
                id: format!("q{i}"),
                question: format!("Which of these is a colour? ({i})"),
                choices: Choices {
                    label: vec!["A".into(), "B".into(), "C".into()],
                    text: vec!["blue".into(), "chair".into(), "seven".into()],
                },
                answer_key: "A".into(),
            })
        })
        .collect()
}

fn options() -> LocalOptions {
    LocalOptions {
        n_ctx: 1024,
        threads: 1,
        hidden_state: true,
    }
}

fn header(weights: &EdgeWeights, cloud: &str) -> Header {
    Header::new(
        "sha",
        "smollm2",
        cloud,
        weights.hidden_size(),
        "test",
        ChoiceFormat::default().name(),
    )
}

/// Collects labels for `rows` into the features folder `dir` (resuming what it holds), as
/// `tandem train-router` does, and closes the folder.
fn collect(
    weights: &EdgeWeights,
    edge: &mut LocalModel<'_>,
    cloud: &mut CloudClient,
    rows: &[Row],
    dir: &Path,
    cloud_name: &str,
) -> labels::LabelProgress {
    let (mut writer, done) = FeatureWriter::open(dir, header(weights, cloud_name)).unwrap();
    labels::collect(
        weights,
        edge,
        cloud,
        Questions {
            rows,
            format: ChoiceFormat::default(),
        },
        &done,
        &mut writer,
        &mut |_| {},
    )
    .unwrap()
}

#[test]
fn labels_from_the_fake_cloud_mark_where_the_edge_would_change_the_answer_and_resume_without_asking_again(
) {
    let Some(path) = model(SMOLLM2) else { return };
    let weights = EdgeWeights::load(&path, "smollm2").unwrap();
    let mut edge = weights.session(&options()).unwrap();
    // The cloud picks "C" (a wrong one) and words its reason as no small model would.
    let fake = FakeCloud::start(Script::cycle(&[
        " C", ".", " seven", " -", " because", " seven", " glows", " azure",
    ]))
    .unwrap();
    let mut cloud = CloudClient::new(CloudConfig::new(fake.base_url())).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let questions = rows(3);

    let collected = collect(
        &weights,
        &mut edge,
        &mut cloud,
        &questions[..2],
        dir.path(),
        "fake",
    );
    assert_eq!(collected.done, 2);
    let completions = |fake: &FakeCloud| {
        fake.recorded()
            .iter()
            .filter(|r| r.path.ends_with("/completions"))
            .count()
    };
    assert_eq!(
        completions(&fake),
        2,
        "one request per example, not per token"
    );

    let set = FeatureSet::read(dir.path()).unwrap();
    assert!(!set.records.is_empty());
    for r in &set.records {
        assert_eq!(r.hidden.len(), weights.hidden_size());
        assert!(r.hidden.iter().any(|&h| h != 0.0), "a real hidden state");
        assert!(!r.label || r.edge_token != r.cloud_token);
    }
    // SmolLM2 does not open with " C": its first token would give another answer (or none).
    // After the letter the answer is settled, so the wording it would choose instead of
    // " glows azure" is no reason to ask the cloud.
    let (first, rest): (Vec<_>, Vec<_>) = set.records.iter().partition(|r| r.position == 0);
    assert!(first.iter().all(|r| r.label));
    assert!(rest.iter().any(|r| r.edge_token != r.cloud_token));
    assert!(rest.iter().all(|r| !r.label));

    // Resuming skips what is surely complete: the last example written could have been torn
    // by a crash, so it is collected again with the third one; nothing is stored twice.
    collect(
        &weights,
        &mut edge,
        &mut cloud,
        &questions,
        dir.path(),
        "fake",
    );
    assert_eq!(completions(&fake), 4);
    let records = FeatureSet::read(dir.path()).unwrap().records;
    let examples: BTreeSet<u32> = records.iter().map(|r| r.example).collect();
    assert_eq!(examples.into_iter().collect::<Vec<_>>(), vec![0, 1, 2]);
    let positions: BTreeSet<(u32, u16)> = records.iter().map(|r| (r.example, r.position)).collect();
    assert_eq!(positions.len(), records.len(), "a position stored twice");
}

#[test]
fn a_cloud_running_the_edge_model_itself_almost_never_disagrees() {
    let Some(path) = model(SMOLLM2) else { return };
    let Some(server) = LlamaServer::start(&path) else {
        return;
    };
    let weights = EdgeWeights::load(&path, "smollm2").unwrap();
    let mut edge = weights.session(&options()).unwrap();
    let mut cloud = CloudClient::new(CloudConfig::new(server.base_url.clone())).unwrap();
    let dir = tempfile::tempdir().unwrap();
    collect(
        &weights,
        &mut edge,
        &mut cloud,
        &rows(4),
        dir.path(),
        "llama-server",
    );
    let set = FeatureSet::read(dir.path()).unwrap();
    let positives = set.records.iter().filter(|r| r.label).count();
    assert!(set.records.len() >= 4, "{} positions", set.records.len());
    let disagreements = set
        .records
        .iter()
        .filter(|r| r.edge_token != r.cloud_token)
        .count();
    // Same GGUF, greedy on both sides, token ids shared: the edge (nearly) always agrees —
    // a label collector that disagreed here would be measuring itself. Batched and single
    // decodes round differently, which can tip one near tie between two letters.
    assert!(
        disagreements * 10 <= set.records.len(),
        "{disagreements} of {} positions disagree",
        set.records.len()
    );
    assert!(positives <= 1, "{positives} answers decided differently");
}

#[test]
fn a_chat_disagreement_is_critical_only_when_the_cloud_cannot_recover_from_it_in_time() {
    let Some(path) = model(SMOLLM2) else { return };
    let weights = EdgeWeights::load(&path, "smollm2").unwrap();
    let mut edge = weights.session(&options()).unwrap();
    // The cloud names the answer as its 11th token; asked to go on from any other prefix it
    // starts over, so it names the answer 11 tokens later.
    let mut words = vec![" Well"; 10];
    words.push(" Canberra");
    let fake = FakeCloud::start(Script::cycle(&words)).unwrap();
    let mut cloud = CloudClient::new(CloudConfig::new(fake.base_url())).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let row = Row::Chat(ChatRow {
        id: "capital".into(),
        question: "What is the capital of Australia?".into(),
        accept: vec!["Canberra".into()],
    });
    let collected = collect(
        &weights,
        &mut edge,
        &mut cloud,
        std::slice::from_ref(&row),
        dir.path(),
        "fake",
    );
    let records = FeatureSet::read(dir.path()).unwrap().records;
    let canberra = records
        .iter()
        .position(|r| edge.piece_text(r.cloud_token) == " Canberra")
        .expect("the cloud's answer was read back");
    assert_eq!(canberra, 10);
    // The answer's own token settles it without asking (the edge does not say " Canberra").
    assert!(records[canberra].label);
    let asked: Vec<_> = records
        .iter()
        .filter(|r| r.edge_token != r.cloud_token && usize::from(r.position) < canberra)
        .collect();
    assert!(!asked.is_empty(), "SmolLM2 does not say \"Well\" ten times");
    assert_eq!(
        collected.requests,
        1 + asked
            .iter()
            .filter(|r| !edge.is_end_of_turn(r.edge_token))
            .count(),
        "one answer, then one continuation per disagreement before the answer is written"
    );
    for r in &records {
        let position = usize::from(r.position);
        // From the edge's token at position p the cloud names the answer 11 tokens later; it
        // may take the tokens its own reply still needed (11 - p) plus 8, so it recovers for
        // p ≤ 8. Ending the reply early (the edge's end of turn) never names it. After the
        // answer is written nothing is asked.
        let astray = r.edge_token != r.cloud_token
            && position <= canberra
            && (position >= 9 || edge.is_end_of_turn(r.edge_token));
        assert_eq!(r.label, astray, "position {position}");
    }
}
