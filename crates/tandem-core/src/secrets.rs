//! Where the cloud API key lives, and where it may go.
//!
//! A key is saved in the OS keyring (Keychain, Credential Manager, Secret Service) for one
//! origin (`https://host:port`), and only requests to that origin carry it: a typed-in URL,
//! a redirect or a test of another endpoint never sees it. A key never travels over plain
//! `http://` unless the endpoint is this machine. `TANDEM_CLOUD_API_KEY` wins over the
//! keyring so scripts and CI need none; it holds the key of whatever cloud the process is
//! pointed at, under the same plain-http rule. The key is never written to settings, logs or
//! events.

use crate::endpoint::{is_on_this_machine, ApiKey};

/// The environment variable holding the cloud API key.
pub const API_KEY_VAR: &str = "TANDEM_CLOUD_API_KEY";
const SERVICE: &str = "tandem";
/// The keyring account of a key is this prefix and the origin it was saved for.
const ACCOUNT_PREFIX: &str = "cloud-api-key ";
/// Where builds before keys were bound kept the one key, for whatever cloud was configured.
const UNBOUND_ACCOUNT: &str = "cloud-api-key";

/// Where a key was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySource {
    /// `TANDEM_CLOUD_API_KEY`.
    Environment,
    /// The OS keyring.
    Keyring,
}

/// The outcome of looking for the key of one endpoint.
#[derive(Debug, Clone, Default)]
pub struct KeyLookup {
    /// The key and where it came from.
    pub key: Option<(ApiKey, KeySource)>,
    /// Why the keyring could not be read, when it could not.
    pub keyring_problem: Option<String>,
    /// Why a key that exists is not sent to this endpoint (plain http to another machine).
    pub withheld: Option<String>,
}

/// Why a key cannot be saved, found or removed.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The keyring refused.
    #[error("the OS keyring is unavailable ({0}); set {API_KEY_VAR} instead")]
    Keyring(String),
    /// The URL names no origin a key could be bound to.
    #[error("'{0}' is not an http(s) URL: a key is saved for the cloud URL it is used with")]
    Url(String),
    /// The key would only ever travel in the clear.
    #[error("a key is only sent over https (or to this machine); {0} is plain http")]
    PlainHttp(String),
}

/// The origin of `url` (`scheme://host[:port]`, as browsers compare them), if it is http(s).
pub fn origin(url: &str) -> Result<String, KeyError> {
    let parsed = reqwest::Url::parse(url.trim()).map_err(|_| KeyError::Url(url.to_owned()))?;
    match parsed.scheme() {
        "http" | "https" if parsed.host().is_some() => Ok(parsed.origin().ascii_serialization()),
        _ => Err(KeyError::Url(url.to_owned())),
    }
}

/// Whether a key may travel to `url`: https, or plain http to this machine.
pub fn may_carry_key(url: &str) -> bool {
    url.trim().to_ascii_lowercase().starts_with("https://") || is_on_this_machine(url)
}

fn entry(origin: &str) -> keyring::Result<keyring::Entry> {
    keyring::Entry::new(SERVICE, &format!("{ACCOUNT_PREFIX}{origin}"))
}

fn unavailable(e: keyring::Error) -> KeyError {
    KeyError::Keyring(e.to_string())
}

/// The key to send to `url`: the environment first, then the keyring entry saved for its
/// origin; none over plain http to another machine.
pub fn api_key(url: &str) -> KeyLookup {
    withhold_from_plain_http(url, find(url))
}

/// The key to send to `url` while it is only being tried out (Test connection): the
/// environment's key belongs to `configured`, the cloud the settings name, so another origin
/// gets only a key saved for it.
pub fn api_key_for_trial(url: &str, configured: Option<&str>) -> KeyLookup {
    let same_origin = configured
        .and_then(|c| origin(c).ok())
        .is_some_and(|c| origin(url).ok() == Some(c));
    match same_origin {
        true => api_key(url),
        false => withhold_from_plain_http(url, stored(url)),
    }
}

fn withhold_from_plain_http(url: &str, mut lookup: KeyLookup) -> KeyLookup {
    if lookup.key.is_some() && !may_carry_key(url) {
        lookup.key = None;
        lookup.withheld = Some(plain_http_refusal(url));
    }
    lookup
}

/// What the user is told when a key is kept from `url`.
pub fn plain_http_refusal(url: &str) -> String {
    format!("the API key is not sent to {url}: it is plain http to another machine (use https)")
}

fn find(url: &str) -> KeyLookup {
    if let Some(key) = std::env::var(API_KEY_VAR).ok().and_then(ApiKey::new) {
        return KeyLookup {
            key: Some((key, KeySource::Environment)),
            ..KeyLookup::default()
        };
    }
    stored(url)
}

/// The key saved in the keyring for `url`'s origin.
fn stored(url: &str) -> KeyLookup {
    let Ok(origin) = origin(url) else {
        return KeyLookup::default();
    };
    match entry(&origin).and_then(|entry| entry.get_password()) {
        Ok(secret) => KeyLookup {
            key: ApiKey::new(secret).map(|k| (k, KeySource::Keyring)),
            ..KeyLookup::default()
        },
        Err(keyring::Error::NoEntry) => KeyLookup::default(),
        // The keyring's own words; callers say what it means for the user.
        Err(e) => KeyLookup {
            keyring_problem: Some(e.to_string()),
            ..KeyLookup::default()
        },
    }
}

/// Saves `key` in the OS keyring for `url`'s origin; refused for plain http to another
/// machine, where it would never be sent.
pub fn store_api_key(url: &str, key: &ApiKey) -> Result<(), KeyError> {
    let origin = origin(url)?;
    if !may_carry_key(url) {
        return Err(KeyError::PlainHttp(origin));
    }
    entry(&origin)
        .and_then(|entry| entry.set_password(key.expose()))
        .map_err(unavailable)
}

/// Binds a key saved by an earlier build (one key, no origin) to `url`, the cloud the
/// settings name, which is the cloud it was saved for; a key already saved for that origin
/// wins. Keyring problems are left for the lookup to report.
pub fn adopt_unbound_key(url: &str) {
    let (Ok(origin), Ok(old)) = (origin(url), keyring::Entry::new(SERVICE, UNBOUND_ACCOUNT)) else {
        return;
    };
    let Ok(secret) = old.get_password() else {
        return;
    };
    let Ok(bound) = entry(&origin) else { return };
    if !may_carry_key(url) {
        return; // it would never be sent there: left where it is
    }
    // The old key is removed only once it is saved under the origin (or one already is).
    let unclaimed = matches!(bound.get_password(), Err(keyring::Error::NoEntry));
    if unclaimed && bound.set_password(&secret).is_err() {
        return;
    }
    let _ = old.delete_credential();
}

/// Removes the key saved for `url`'s origin; `false` if there was none.
pub fn delete_api_key(url: &str) -> Result<bool, KeyError> {
    match entry(&origin(url)?).and_then(|entry| entry.delete_credential()) {
        Ok(()) => Ok(true),
        Err(keyring::Error::NoEntry) => Ok(false),
        Err(e) => Err(unavailable(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_bound_to_scheme_host_and_port() {
        assert_eq!(
            origin("https://OpenRouter.ai/api/v1").unwrap(),
            "https://openrouter.ai"
        );
        assert_eq!(
            origin("http://127.0.0.1:8081/v1").unwrap(),
            "http://127.0.0.1:8081"
        );
        assert_eq!(
            origin("https://api.example:443/v1").unwrap(),
            "https://api.example"
        );
        assert_ne!(
            origin("http://127.0.0.1:8081/v1").unwrap(),
            origin("http://127.0.0.1:8082/v1").unwrap()
        );
        for bad in ["none", "", "file:///etc/passwd", "openrouter.ai/api"] {
            assert!(matches!(origin(bad), Err(KeyError::Url(_))), "{bad}");
        }
    }

    #[test]
    fn a_key_saved_before_keys_were_bound_goes_to_the_configured_cloud() {
        if std::env::var_os("TANDEM_TEST_KEYRING").is_none() {
            eprintln!("skipped: needs a Secret Service (scripts/test.sh provides one)");
            return;
        }
        let url = "https://adopt.tandem.test:8443/v1";
        let old = keyring::Entry::new(SERVICE, UNBOUND_ACCOUNT).unwrap();
        old.set_password("sk-old-key-1234").unwrap();
        adopt_unbound_key(url);
        let found = find(url).key.map(|(k, _)| k.masked());
        assert_eq!(found.as_deref(), Some("…1234"));
        assert!(matches!(old.get_password(), Err(keyring::Error::NoEntry)));
        assert!(delete_api_key(url).unwrap());
    }

    #[test]
    fn plain_http_carries_a_key_only_on_this_machine() {
        assert!(may_carry_key("https://openrouter.ai/api/v1"));
        assert!(may_carry_key("http://127.0.0.1:8081/v1"));
        assert!(may_carry_key("http://localhost/v1"));
        assert!(!may_carry_key("http://10.0.0.2:8000/v1"));
        assert!(!may_carry_key("http://api.example/v1"));
        let key = ApiKey::new("sk-x").unwrap();
        assert!(matches!(
            store_api_key("http://10.0.0.2:8000/v1", &key),
            Err(KeyError::PlainHttp(o)) if o == "http://10.0.0.2:8000"
        ));
    }
}
