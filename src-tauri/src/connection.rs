//! "Test connection": asks an endpoint for its models with the stored key and says, in one
//! word and one sentence, whether replies would work.

use crate::state::Shared;
use crate::views::{CloudSettingsView, TestResult};
use std::time::Duration;
use tandem_core::cloud::{CloudClient, CloudConfig, CloudError};
use tandem_core::secrets;

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
    let mut config = CloudConfig::new(url.clone());
    config.model = cloud.model.filter(|m| !m.trim().is_empty());
    config.mode = cloud.mode;
    config.api_key = secrets::api_key().key.map(|(key, _)| key);
    config.request_timeout = Duration::from_secs(10);
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
            let kind = match e {
                CloudError::Unauthorized { .. } => "wrong_key",
                CloudError::Unreachable { .. } | CloudError::Timeout { .. } => "unreachable",
                CloudError::NotFound { .. } => "model_not_found",
                _ => "error",
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
