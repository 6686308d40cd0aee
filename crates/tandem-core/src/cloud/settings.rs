//! From the user's cloud settings to a client configuration: the one place that looks up the
//! API key and decides whether a keyring problem is worth telling the user.

use super::{is_on_this_machine, CloudConfig};
use crate::config::CloudSettings;
use crate::secrets;
use std::time::Duration;

impl CloudConfig {
    /// The configuration for the endpoint `url` as `settings` describe it (model, mode,
    /// timeout), with the API key saved for its origin. The notice says why no key is sent,
    /// when that matters: one withheld from plain http, or a keyring that cannot be read (a
    /// cloud on this machine, like the local stand-in, needs none).
    pub fn from_settings(url: &str, settings: &CloudSettings) -> (CloudConfig, Option<String>) {
        let (key, notice) = match &settings.api_key {
            // Handed over in memory (the stand-in's key for this run): nothing to look up.
            Some(key) => (Some(key.clone()), None),
            None => {
                let lookup = secrets::api_key(url);
                let notice = lookup.withheld.or_else(|| {
                    lookup
                        .keyring_problem
                        .filter(|_| !is_on_this_machine(url))
                        .map(|problem| {
                            format!(
                                "the OS keyring is unavailable ({problem}); set {} to send an API key",
                                secrets::API_KEY_VAR
                            )
                        })
                });
                (lookup.key.map(|(key, _)| key), notice)
            }
        };
        let mut config = CloudConfig::new(url);
        config.model = settings.model.clone();
        config.mode = settings.mode;
        config.api_key = key;
        // A timeout that is no number of seconds (NaN, infinite) keeps the default.
        if let Ok(timeout) = Duration::try_from_secs_f32(settings.timeout_secs.max(0.1)) {
            config.request_timeout = timeout;
        }
        (config, notice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::CloudMode;

    #[test]
    fn settings_carry_model_mode_and_timeout_and_a_broken_timeout_keeps_the_default() {
        let mut settings = CloudSettings {
            model: Some("big".into()),
            mode: CloudMode::Chat,
            timeout_secs: 7.5,
            ..CloudSettings::default()
        };
        let (config, _) = CloudConfig::from_settings("http://127.0.0.1:9/v1/", &settings);
        assert_eq!(config.base_url, "http://127.0.0.1:9/v1");
        assert_eq!(config.model.as_deref(), Some("big"));
        assert_eq!(config.mode, CloudMode::Chat);
        assert_eq!(config.request_timeout, Duration::from_secs_f32(7.5));
        settings.timeout_secs = f32::INFINITY;
        let (config, _) = CloudConfig::from_settings("http://127.0.0.1:9/v1", &settings);
        assert_eq!(
            config.request_timeout,
            CloudConfig::new("x").request_timeout
        );
    }
}
