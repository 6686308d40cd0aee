//! "Test connection": asks an endpoint for its models and says, in one word and one
//! sentence, whether replies would work. It sends the key typed in the dialog, else the key
//! saved for that endpoint's origin: a URL being tried out never receives another's key.
//! In chat mode it also asks the endpoint to continue a partial reply: one that writes a
//! fresh answer instead passes every other check, yet chat-mode replies with it would go on
//! locally, so the test fails and says so.

use crate::error::ErrorKind;
use crate::state::Shared;
use crate::views::{CloudSettingsView, TestResult};
use tandem_core::cloud::{ApiKey, CloudClient, CloudConfig, CloudError, CloudMode};
use tandem_core::config::CloudSettings;
use tandem_core::secrets;

/// Tests `cloud` as the settings dialog has it (not yet saved), with `typed_key` if given.
pub fn test(shared: &Shared, cloud: CloudSettingsView, typed_key: Option<ApiKey>) -> TestResult {
    let url = match cloud.url.trim().trim_end_matches('/') {
        "none" => {
            return failed(
                ErrorKind::CloudError,
                "no cloud is configured: replies stay local",
            )
        }
        "" => match shared.engine.ready().ok().and_then(|l| l.cloud.url.clone()) {
            Some(url) => url,
            None => {
                return failed(
                    ErrorKind::CloudUnreachable,
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
    // The environment's key is the configured cloud's: a URL being tried out gets its own.
    let engine = shared.engine.ready().ok();
    let configured = engine.as_ref().and_then(|l| l.cloud.url.clone());
    // The stand-in's key for this run goes to the stand-in only.
    let handed = engine
        .filter(|_| configured.as_deref() == Some(url.as_str()))
        .and_then(|l| l.cloud_settings().api_key.clone());
    config.api_key = handed.or_else(|| {
        secrets::api_key_for_trial(&url, configured.as_deref())
            .key
            .map(|(key, _)| key)
    });
    if let Some(key) = typed_key {
        match secrets::may_carry_key(&url) {
            true => config.api_key = Some(key),
            false => return failed(ErrorKind::InvalidInput, &secrets::plain_http_refusal(&url)),
        }
    }
    config.max_retries = 0;
    let mode = config.mode;
    let checked = CloudClient::new(config).and_then(|client| Ok((client.check()?, client)));
    let (models, client) = match checked {
        Ok(checked) => checked,
        Err(e) => return failed(e.kind().into(), &e.to_string()),
    };
    let served = format!("{url} answers and serves {}", models.join(", "));
    let continued = match mode {
        CloudMode::Completions => return passed(served, models),
        CloudMode::Chat => client.check_continuation(&|| false),
    };
    match continued {
        Ok(()) => passed(
            format!("{served}, and it continues a partial reply as chat mode needs"),
            models,
        ),
        Err(e @ CloudError::NoContinuation { .. }) => TestResult {
            models,
            ..failed(e.kind().into(), &format!("{served}, but {e}"))
        },
        Err(e) => TestResult {
            models,
            ..failed(
                e.kind().into(),
                &format!("{served}, but asking it to continue a partial reply failed: {e}"),
            )
        },
    }
}

fn passed(message: String, models: Vec<String>) -> TestResult {
    TestResult {
        ok: true,
        kind: None,
        message,
        models,
    }
}

fn failed(kind: ErrorKind, message: &str) -> TestResult {
    TestResult {
        ok: false,
        kind: Some(kind),
        message: message.to_owned(),
        models: Vec::new(),
    }
}
