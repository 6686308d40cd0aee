//! What names a cloud before anything is sent to it: its API key (never shown), the OpenAI
//! endpoint it is asked through, and whether a URL is this machine. At the bottom of the
//! core, so the settings file and the keyring can speak of clouds without the client.

use std::fmt;

/// An API key. Its `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key; empty strings mean "no key".
    pub fn new(key: impl Into<String>) -> Option<Self> {
        let key = key.into().trim().to_owned();
        (!key.is_empty()).then_some(Self(key))
    }

    /// The key itself, for the `Authorization` header only.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }

    /// A form safe to show: the last four characters.
    pub fn masked(&self) -> String {
        let tail: String = self
            .0
            .chars()
            .rev()
            .take(4)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        format!("…{tail}")
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(***)")
    }
}

/// Which OpenAI endpoint the cloud is asked through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CloudMode {
    /// `/v1/completions` with the edge's exact prompt, as token ids or text.
    #[default]
    Completions,
    /// `/v1/chat/completions` with the messages and the reply so far as a final assistant
    /// message to continue (`continue_final_message`, as vLLM and SGLang accept), for
    /// servers that offer only chat.
    Chat,
}

/// Whether `url`'s host is this machine: `localhost`, `127.0.0.0/8` or `::1` (the host
/// itself, not text anywhere in the URL).
pub fn is_on_this_machine(url: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(url) else {
        return false;
    };
    url.host_str().is_some_and(|host| {
        host.eq_ignore_ascii_case("localhost")
            || host
                .trim_matches(['[', ']'])
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    })
}

/// The environment variable whose value, when set, every request to `tandem serve` must
/// carry as its bearer key: how the local stand-in gets this run's key without showing it on
/// its command line.
pub const SERVE_KEY_VAR: &str = "TANDEM_SERVE_API_KEY";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_urls_are_on_this_machine() {
        assert!(is_on_this_machine("http://127.0.0.1:8081/v1"));
        assert!(is_on_this_machine("http://localhost:8080/v1"));
        assert!(is_on_this_machine("http://[::1]:1/v1"));
        assert!(is_on_this_machine("http://127.3.0.1/v1"));
        for elsewhere in [
            "https://openrouter.ai/api/v1",
            "http://10.0.0.2/v1",
            "http://evil.example/v1?via=://127.0.0.1",
            "http://127.0.0.1.evil.example/v1",
            "not a url",
        ] {
            assert!(!is_on_this_machine(elsewhere), "{elsewhere}");
        }
    }
}
