//! The evaluation chart: score (accuracy, or the judge's log-probability on open prompts)
//! against realised cloud share, one line per router, with
//! edge-only and cloud-only as reference lines. SVG, so it needs no fonts to draw and the
//! app can show it as an image.

use crate::eval::{Metric, Results, RunResult};
use plotters::prelude::*;
use std::path::Path;
use tandem_core::router::RouterKind;

/// The references every chart draws as lines, by their routers' names.
const EDGE_ONLY: &str = RouterKind::EdgeOnly.name();
const CLOUD_ONLY: &str = RouterKind::CloudOnly.name();

/// Why the chart could not be drawn.
#[derive(Debug, thiserror::Error)]
#[error("drawing the chart {path}: {detail}")]
pub struct ChartError {
    path: String,
    detail: String,
}

const COLOURS: [RGBColor; 5] = [
    RGBColor(79, 70, 229),
    RGBColor(217, 119, 6),
    RGBColor(5, 150, 105),
    RGBColor(219, 39, 119),
    RGBColor(37, 99, 235),
];

/// Draws `results` into an SVG file at `path`.
pub fn draw(results: &Results, path: &Path) -> Result<(), ChartError> {
    let error = |e: String| ChartError {
        path: path.display().to_string(),
        detail: e,
    };
    let reference = |name: &str| results.runs.iter().find(|r| r.router == name);
    let routers: Vec<&str> = {
        let mut names: Vec<&str> = results
            .runs
            .iter()
            .map(|r| r.router.as_str())
            .filter(|n| ![EDGE_ONLY, CLOUD_ONLY].contains(n))
            .collect();
        names.dedup();
        names.sort_unstable();
        names.dedup();
        names
    };
    let max_share = results
        .runs
        .iter()
        .filter(|r| r.router != CLOUD_ONLY)
        .map(|r| r.cloud_share)
        .fold(0.1, f64::max)
        .min(1.0)
        * 1.1;
    let scores = results.runs.iter().map(|r| r.score);
    let low = scores.clone().fold(f64::INFINITY, f64::min);
    let high = scores.fold(f64::NEG_INFINITY, f64::max);
    let metric = results.metric;
    let (low, high) = match metric {
        Metric::Accuracy => ((low - 0.05).max(0.0), (high + 0.05).min(1.0)),
        Metric::JudgeLogProb => {
            let pad = ((high - low) * 0.1).max(0.01);
            (low - pad, high + pad)
        }
    };

    let root = SVGBackend::new(path, (760, 480)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| error(e.to_string()))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{} — {} + {}", results.data, results.edge, results.cloud),
            ("sans-serif", 18),
        )
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..max_share, low..high)
        .map_err(|e| error(e.to_string()))?;
    chart
        .configure_mesh()
        .x_desc("cloud share of reply tokens")
        .y_desc(metric.label())
        .x_label_formatter(&|x| format!("{:.0}%", x * 100.0))
        .y_label_formatter(&|y| match metric {
            Metric::Accuracy => format!("{:.0}%", y * 100.0),
            Metric::JudgeLogProb => format!("{y:.2}"),
        })
        .draw()
        .map_err(|e| error(e.to_string()))?;
    for (name, colour) in [(EDGE_ONLY, RGBColor(100, 116, 139)), (CLOUD_ONLY, BLACK)] {
        if let Some(run) = reference(name) {
            let label = format!("{name} {}", metric.show(run.score));
            chart
                .draw_series(DashedLineSeries::new(
                    [(0.0, run.score), (max_share, run.score)],
                    6,
                    4,
                    colour.stroke_width(2),
                ))
                .map_err(|e| error(e.to_string()))?
                .label(label)
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], colour));
        }
    }
    for (i, name) in routers.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let mut points: Vec<&RunResult> =
            results.runs.iter().filter(|r| r.router == *name).collect();
        points.sort_by(|a, b| a.cloud_share.total_cmp(&b.cloud_share));
        let xy: Vec<(f64, f64)> = points.iter().map(|r| (r.cloud_share, r.score)).collect();
        chart
            .draw_series(LineSeries::new(xy.clone(), colour.stroke_width(2)))
            .map_err(|e| error(e.to_string()))?
            .label(*name)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], colour));
        chart
            .draw_series(xy.into_iter().map(|p| Circle::new(p, 4, colour.filled())))
            .map_err(|e| error(e.to_string()))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK.mix(0.3))
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(|e| error(e.to_string()))?;
    root.present().map_err(|e| error(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(router: &str, share: f64, score: f64) -> RunResult {
        RunResult {
            router: router.into(),
            resolved: None,
            budget: share as f32,
            n: 10,
            score,
            score_interval: crate::stats::Interval {
                low: score - 0.1,
                high: score + 0.1,
            },
            versus: Vec::new(),
            broken_splices: None,
            cost_vs_cloud_only: None,
            cloud_share: share,
            cloud_requests: 0,
            cloud_requests_unused: 0,
            cloud_prompt_tokens: 0,
            cloud_cached_prompt_tokens: 0,
            cloud_completion_tokens: 0,
            seconds: 1.0,
            edge_tokens: 0,
            cloud_tokens: 0,
            cloud_failures: 0,
        }
    }

    #[test]
    fn the_gap_recovered_is_only_a_ratio_when_the_cloud_is_ahead() {
        let (edge, cloud) = (run("edge-only", 0.0, 0.4), run("cloud-only", 1.0, 0.7));
        let half = crate::eval::gap_recovered(&run("entropy", 0.1, 0.55), &edge, &cloud);
        assert!((half.unwrap() - 0.5).abs() < 1e-9);
        let behind = run("cloud-only", 1.0, 0.3);
        assert_eq!(crate::eval::gap_recovered(&edge, &edge, &behind), None);
    }

    fn results(metric: Metric, runs: Vec<RunResult>) -> Results {
        Results {
            data: "csqa:dev[0..10]".into(),
            metric,
            judge: None,
            budget_rule: tandem_core::budget::RULE.into(),
            span: 1,
            max_wait_ms: None,
            prompt_format: "letter-text-because/3".into(),
            prices: Default::default(),
            edge: "edge".into(),
            cloud: "cloud".into(),
            runs,
        }
    }

    fn drawn(results: &Results) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("chart.svg");
        draw(results, &path).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..50]);
        svg
    }

    #[test]
    fn the_chart_has_every_router_and_both_references() {
        let svg = drawn(&results(
            Metric::Accuracy,
            vec![
                run("edge-only", 0.0, 0.4),
                run("cloud-only", 1.0, 0.7),
                run("entropy", 0.05, 0.45),
                run("entropy", 0.1, 0.5),
                run("mlp", 0.05, 0.55),
            ],
        ));
        for text in [
            "entropy",
            "mlp",
            "edge-only 40.0%",
            "cloud-only 70.0%",
            "accuracy",
        ] {
            assert!(svg.contains(text), "missing {text}");
        }
    }

    #[test]
    fn open_prompts_are_charted_by_the_judges_log_probability() {
        let svg = drawn(&results(
            Metric::JudgeLogProb,
            vec![
                run("edge-only", 0.0, -1.25),
                run("cloud-only", 1.0, -0.4),
                run("entropy", 0.1, -0.9),
            ],
        ));
        for text in [
            "edge-only -1.250",
            "cloud-only -0.400",
            "judge log-prob/token",
        ] {
            assert!(svg.contains(text), "missing {text}");
        }
    }
}
