//! Judged labels on real models: the edge writes its own reply, a second model reads it back.

use std::collections::BTreeSet;
use tandem_core::edge::EdgeModel;
use tandem_core::local::{EdgeWeights, LocalOptions};
use tandem_eval::data::{OpenRow, Row};
use tandem_eval::features::{FeatureSet, FeatureWriter, Header};
use tandem_eval::judge;
use tandem_eval::labels::Questions;
use tandem_eval::task::{self, ChoiceFormat};
use tandem_test_peers::{model, SMOLLM2};

fn open(question: &str) -> Row {
    Row::Open(OpenRow {
        id: question.into(),
        question: question.into(),
    })
}

#[test]
fn a_judge_running_the_edge_model_finds_nothing_critical_and_a_resume_asks_nothing_twice() {
    let Some(path) = model(SMOLLM2) else { return };
    let weights = EdgeWeights::load(&path, "smollm2").unwrap();
    let options = |hidden_state| LocalOptions {
        n_ctx: 1024,
        threads: 1,
        hidden_state,
    };
    let mut edge = weights.session(&options(true)).unwrap();
    let mut judge_session = weights.session(&options(false)).unwrap();
    let rows = vec![
        open("What is the capital of France?"),
        open("Name a primary colour."),
        open("What is 7 times 6?"),
    ];
    let dir = tempfile::tempdir().unwrap();
    let header = Header::new(
        "sha",
        "smollm2",
        "smollm2",
        weights.hidden_size(),
        "test",
        "as-typed (judged)",
    );
    let mut collect = |rows: &[Row]| {
        let (mut writer, done) = FeatureWriter::open(dir.path(), header.clone()).unwrap();
        let mut seen = Vec::new();
        judge::collect(
            &weights,
            &mut edge,
            &mut judge_session,
            Questions {
                rows,
                format: ChoiceFormat::default(),
            },
            &done,
            &mut writer,
            &mut |p| seen.push(p.done),
        )
        .unwrap();
        seen
    };
    assert_eq!(collect(&rows[..2]), vec![1, 2]);
    // The last example written could have been torn by a crash: it is collected again with
    // the third, and nothing is stored twice.
    assert_eq!(collect(&rows), vec![2, 3]);

    let records = FeatureSet::read(dir.path()).unwrap().records;
    let examples: BTreeSet<u32> = records.iter().map(|r| r.example).collect();
    assert_eq!(examples.into_iter().collect::<Vec<_>>(), vec![0, 1, 2]);
    let positions: BTreeSet<(u32, u16)> = records.iter().map(|r| (r.example, r.position)).collect();
    assert_eq!(positions.len(), records.len(), "a position stored twice");
    for example in 0..3u32 {
        let reply: Vec<_> = records.iter().filter(|r| r.example == example).collect();
        // The edge's own greedy reply, to its end of turn or the chat length.
        let last = reply.last().unwrap();
        assert!(
            edge.is_end_of_turn(last.edge_token) || reply.len() == task::CHAT_MAX_TOKENS as usize,
            "example {example} stops after {} tokens",
            reply.len()
        );
        assert!(reply[..reply.len() - 1]
            .iter()
            .all(|r| !edge.is_end_of_turn(r.edge_token)));
    }
    let (mut gaps, mut prob_gaps): (Vec<f32>, Vec<f32>) = (Vec::new(), Vec::new());
    for r in &records {
        assert!(r.hidden.iter().any(|&h| h != 0.0), "a real hidden state");
        assert!(
            !r.label,
            "a model judged its own token wrong: {} at {}",
            r.example, r.position
        );
        gaps.push((r.cloud_margin - r.signals[1]).abs());
        prob_gaps.push((r.cloud_prob - r.signals[0]).abs());
    }
    // The same weights read the same prefix: the judge's margin is the edge's, and the
    // probability it gives the edge's token is the edge's own top probability, but for the
    // rounding of a batched decode against one-by-one decodes (quantized weights).
    for gaps in [&mut gaps, &mut prob_gaps] {
        gaps.sort_by(f32::total_cmp);
        assert!(
            gaps[gaps.len() / 2] < 0.05,
            "median gap {}",
            gaps[gaps.len() / 2]
        );
    }
    let disagreements = records
        .iter()
        .filter(|r| r.edge_token != r.cloud_token)
        .count();
    assert!(
        disagreements * 20 <= records.len(),
        "{disagreements} of {} positions disagree",
        records.len()
    );
}
