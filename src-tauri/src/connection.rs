//! "Test connection": asks an endpoint for its models with the stored key and says, in one
//! word and one sentence, whether replies would work.

use crate::state::Shared;
use crate::views::{CloudSettingsView, TestResult};
use tandem_core::cloud::{CloudClient, CloudConfig, CloudErrorKind};
use tandem_core::config::CloudSettings;

/// Tests `cloud` as the settings dialog has it (not yet saved).
pub fn test(shared: &Shared, cloud: CloudSettingsView) -> TestResult {
    let url = match cloud.url.trim().trim_end_matches('/') {
        "none" => return result(false, "error", "no cloud is configured: replies stay local"),
        "" => match shared.engine.ready().ok().and_then(|l| l.cloud.url.clone()) {
            Some(url) => url,
            None => {
                return result(
                    false,
                    "unreachable",
                    "the local stand-in is not running (its model may not be downloaded)",
                )
            }
        },
        url => url.to_owned(),
    };
    let settings = CloudSettings {
        model: cloud.model.filter(|m| !m.trim().is_empty()),
        mode: cloud.mode,
        timeout_secs: 10.0,
        ..CloudSettings::default()
    };
    let (mut config, _) = CloudConfig::from_settings(&url, &settings);
    config.max_retries = 0;
    let checked = CloudClient::new(config).and_then(|client| client.check());
    match checked {
        Ok(models) => TestResult {
            ok: true,
            kind: "ok",
            message: format!("{url} answers and serves {}", models.join(", ")),
            models,
        },
        Err(e) => {
            let kind = match e.kind() {
                CloudErrorKind::WrongKey => "wrong_key",
                CloudErrorKind::Unreachable => "unreachable",
                CloudErrorKind::ModelNotFound => "model_not_found",
                CloudErrorKind::Other => "error",
            };
            result(false, kind, &e.to_string())
        }
    }
}

fn result(ok: bool, kind: &'static str, message: &str) -> TestResult {
    TestResult {
        ok,
        kind,
        message: message.to_owned(),
        models: Vec::new(),
    }
}
