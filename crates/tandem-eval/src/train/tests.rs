//! The trainer end to end on synthetic feature sets whose labels follow a known rule: what
//! it learns, what it writes, and what it refuses.

use super::*;
use crate::features::{Header, Record};
use crate::task::ChoiceFormat;
use std::sync::OnceLock;
use tandem_core::router::{Features, MlpError, MlpRouter, Router};
use tandem_core::signals::Signals;

const POSITIONS: u16 = 10;

fn pair() -> ModelPair {
    ModelPair {
        edge_sha256: "edge-hash".into(),
        cloud: "cloud-model".into(),
    }
}

/// Standard normal (Box–Muller).
fn gaussian(rng: &mut SeededRng) -> f32 {
    let (u1, u2) = (1.0 - rng.unit(), rng.unit());
    ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32
}

/// `examples` × [`POSITIONS`] records: Gaussian hidden states, plausible signals
/// (entropy in [0, 3) nats), labelled by `label`.
pub(super) fn synthetic(
    examples: u32,
    hidden_size: usize,
    seed: u64,
    label: fn(&[f32], [f32; 3]) -> bool,
) -> FeatureSet {
    let mut rng = SeededRng::new(seed);
    let mut records = Vec::new();
    for example in 0..examples {
        for position in 0..POSITIONS {
            let hidden: Vec<f32> = (0..hidden_size).map(|_| gaussian(&mut rng)).collect();
            let top1 = rng.unit() as f32;
            let signals = [top1, top1 * rng.unit() as f32, 3.0 * rng.unit() as f32];
            records.push(Record {
                example,
                position,
                label: label(&hidden, signals),
                edge_token: 1,
                cloud_token: 2,
                cloud_margin: f32::NAN,
                cloud_prob: f32::NAN,
                signals,
                hidden,
            });
        }
    }
    FeatureSet {
        header: Header::new(
            "edge-hash",
            "edge",
            "cloud-model",
            hidden_size,
            "synthetic",
            ChoiceFormat::default().name(),
        ),
        records,
    }
}

/// About a fifth positive; needs two hidden units and the entropy.
pub(super) fn mixed_label(hidden: &[f32], signals: [f32; 3]) -> bool {
    hidden[3] - hidden[7] + 0.5 * signals[2] > 2.0
}

fn entropy_label(_: &[f32], signals: [f32; 3]) -> bool {
    signals[2] > 2.4
}

fn quick() -> TrainOptions {
    TrainOptions {
        hidden_layers: vec![32],
        batch_size: 32,
        learning_rate: 3e-3,
        ..TrainOptions::default()
    }
}

/// One trained router on the mixed problem, shared by the tests that only read it.
fn mixed() -> &'static (TrainedRouter, TrainReport) {
    static TRAINED: OnceLock<(TrainedRouter, TrainReport)> = OnceLock::new();
    TRAINED.get_or_init(|| train(&synthetic(50, 16, 1, mixed_label), &quick()).unwrap())
}

fn runtime_score(router: &MlpRouter, r: &Record) -> f32 {
    router.score(&r.router_features())
}

/// The router as users get it: written to a file and loaded by the runtime.
fn saved(router: &TrainedRouter) -> MlpRouter {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("router.safetensors");
    router.save(&path, &pair(), "synthetic").unwrap();
    MlpRouter::load(&path, Some(&pair())).unwrap()
}

/// The runtime forward pass agrees with candle's: every threshold of the calibration
/// table is a held-out score candle computed, so the loaded router must score some
/// held-out position (the same split, drawn again from the seed) at that value.
fn assert_scores_match_training(loaded: &MlpRouter, set: &FeatureSet, options: &TrainOptions) {
    let split = Split::by_example(
        &set.records,
        options.held_out_fraction,
        &mut SeededRng::new(options.seed),
    )
    .unwrap();
    let runtime: Vec<f32> = split
        .held_out
        .iter()
        .map(|r| runtime_score(loaded, r))
        .collect();
    for share in CLOUD_SHARES {
        let threshold = loaded.threshold_for_share(share);
        let nearest = runtime
            .iter()
            .map(|s| (s - threshold).abs())
            .fold(f32::INFINITY, f32::min);
        assert!(
            nearest < 1e-5,
            "share {share}: threshold {threshold} is {nearest} away"
        );
    }
}

#[test]
fn learns_a_separable_problem_from_hidden_state_and_signals() {
    let (_, report) = mixed();
    let auc = report.held_out_auc.unwrap();
    assert!(auc > 0.95, "{report:?}");
    assert!(report.best_epoch > 0 && report.best_epoch <= report.epochs);
    assert_eq!((report.train_examples, report.held_out_examples), (40, 10));
    assert_eq!(report.train_records + report.held_out_records, 500);
    assert!((0.05..0.4).contains(&report.held_out_positive_share));
}

#[test]
fn the_saved_file_scores_like_the_trained_router_and_belongs_to_its_pair() {
    let (router, report) = mixed();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("router.safetensors");
    router.save(&path, &pair(), "synthetic:train").unwrap();

    let loaded = MlpRouter::load(&path, Some(&pair())).unwrap();
    assert!(loaded.needs_hidden_state());
    assert_scores_match_training(&loaded, &synthetic(50, 16, 1, mixed_label), &quick());

    let file = RouterFile::read(&path).unwrap();
    assert_eq!(file.features, FeatureLayout::HiddenAndSignals);
    assert_eq!(file.data.as_deref(), Some("synthetic:train"));
    let saved: TrainReport = serde_json::from_str(file.report.as_deref().unwrap()).unwrap();
    assert_eq!(&saved, report);

    let other = ModelPair {
        edge_sha256: "another-edge".into(),
        ..pair()
    };
    assert!(matches!(
        MlpRouter::load(&path, Some(&other)),
        Err(MlpError::WrongEdge { .. })
    ));
}

#[test]
fn calibrated_thresholds_route_the_asked_share_of_unseen_positions() {
    let options = TrainOptions {
        held_out_fraction: 0.5,
        ..quick()
    };
    let (router, _) = train(&synthetic(400, 16, 4, mixed_label), &options).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("router.safetensors");
    router.save(&path, &pair(), "synthetic").unwrap();
    let loaded = MlpRouter::load(&path, Some(&pair())).unwrap();

    let fresh = synthetic(400, 16, 5, mixed_label);
    let scores: Vec<f32> = fresh
        .records
        .iter()
        .map(|r| runtime_score(&loaded, r))
        .collect();
    for share in [0.05, 0.1, 0.2] {
        let threshold = loaded.threshold_for_share(share);
        let routed = scores.iter().filter(|&&s| s >= threshold).count();
        let routed = routed as f32 / scores.len() as f32;
        assert!((routed - share).abs() <= 0.03, "share {share}: {routed}");
    }
}

#[test]
fn a_signals_only_router_needs_no_hidden_state() {
    let options = TrainOptions {
        features: FeatureLayout::Signals,
        ..quick()
    };
    let set = synthetic(50, 16, 6, entropy_label);
    let (router, report) = train(&set, &options).unwrap();
    assert!(report.held_out_auc.unwrap() > 0.95, "{report:?}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("router.safetensors");
    router.save(&path, &pair(), "synthetic").unwrap();
    assert_eq!(
        RouterFile::read(&path).unwrap().features,
        FeatureLayout::Signals
    );

    let loaded = MlpRouter::load(&path, Some(&pair())).unwrap();
    assert!(!loaded.needs_hidden_state());
    let signals = Signals {
        top1_prob: 0.4,
        margin: 0.1,
        entropy: 2.0,
    };
    let without = loaded.score(&Features {
        signals,
        hidden: None,
        position: 0,
    });
    let with = loaded.score(&Features {
        signals,
        hidden: Some(&[9.0; 16]),
        position: 0,
    });
    assert_eq!(without, with);
    assert_scores_match_training(&loaded, &set, &options);
}

#[test]
fn a_router_reading_the_position_learns_what_only_the_start_of_a_reply_has() {
    // Critical where a reply starts unsure: the signals alone cannot tell it.
    let mut set = synthetic(60, 4, 7, entropy_label);
    for r in &mut set.records {
        r.label = r.position == 0 && r.signals[2] > 1.0;
    }
    let auc = |features| {
        let options = TrainOptions {
            features,
            ..quick()
        };
        let (router, report) = train(&set, &options).unwrap();
        (router, report.held_out_auc.unwrap(), options)
    };
    let (_, blind, _) = auc(FeatureLayout::Signals);
    let (router, seeing, options) = auc(FeatureLayout::SignalsAndPosition);
    assert!(
        seeing > 0.95 && blind < 0.9,
        "with the position {seeing}, without {blind}"
    );
    let loaded = saved(&router);
    assert!(!loaded.needs_hidden_state());
    assert_scores_match_training(&loaded, &set, &options);
}

#[test]
fn the_same_seed_trains_the_same_router() {
    let set = synthetic(20, 8, 8, mixed_label);
    let run = |seed| {
        let options = TrainOptions { seed, ..quick() };
        let (router, _) = train(&set, &options).unwrap();
        let loaded = saved(&router);
        set.records
            .iter()
            .map(|r| runtime_score(&loaded, r))
            .collect::<Vec<f32>>()
    };
    assert_eq!(run(1), run(1));
    assert_ne!(run(1), run(2));
}

#[test]
fn a_set_without_positives_is_refused() {
    let set = synthetic(10, 4, 9, |_, _| false);
    let err = train(&set, &quick()).err().unwrap();
    assert!(matches!(err, TrainError::NoPositives), "{err}");
    assert!(err.to_string().contains("no positive records"), "{err}");
}

#[test]
fn unusable_sets_are_refused_with_the_reason() {
    let mut set = synthetic(10, 8, 10, mixed_label);
    // Both classes in the first example, so that a set of it alone fails for its size.
    set.records[0].label = true;
    set.records[1].label = false;
    set.records[12].hidden.pop();
    let err = train(&set, &quick()).err().unwrap().to_string();
    assert!(
        err.contains("record 12") && err.contains("width 7"),
        "{err}"
    );

    let empty = FeatureSet {
        records: Vec::new(),
        ..set.clone()
    };
    assert!(matches!(train(&empty, &quick()), Err(TrainError::Empty)));

    let one_example = FeatureSet {
        records: set.records[..POSITIONS as usize].to_vec(),
        ..set.clone()
    };
    assert!(matches!(
        train(&one_example, &quick()),
        Err(TrainError::TooFewExamples { examples: 1 })
    ));

    let no_hold_out = TrainOptions {
        held_out_fraction: 0.0,
        ..quick()
    };
    assert!(matches!(
        train(&set, &no_hold_out),
        Err(TrainError::Options(_))
    ));
}
