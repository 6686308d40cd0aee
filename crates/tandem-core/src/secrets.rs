//! Where the cloud API key lives: the OS keyring (Keychain, Credential Manager, Secret
//! Service), or the `TANDEM_CLOUD_API_KEY` environment variable, which wins so scripts and CI
//! need no keyring. The key is never written to settings, logs or events.

use crate::cloud::ApiKey;

/// The environment variable holding the cloud API key.
pub const API_KEY_VAR: &str = "TANDEM_CLOUD_API_KEY";
const SERVICE: &str = "tandem";
const ACCOUNT: &str = "cloud-api-key";

/// Where a key was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySource {
    /// `TANDEM_CLOUD_API_KEY`.
    Environment,
    /// The OS keyring.
    Keyring,
}

/// The outcome of looking for the key.
#[derive(Debug, Clone, Default)]
pub struct KeyLookup {
    /// The key and where it came from.
    pub key: Option<(ApiKey, KeySource)>,
    /// Why the keyring could not be read, when it could not.
    pub keyring_problem: Option<String>,
}

/// Why the keyring refused a change.
#[derive(Debug, thiserror::Error)]
#[error("the OS keyring is unavailable ({0}); set {API_KEY_VAR} instead")]
pub struct KeyringError(String);

fn entry() -> Result<keyring::Entry, KeyringError> {
    keyring::Entry::new(SERVICE, ACCOUNT).map_err(|e| KeyringError(e.to_string()))
}

/// Finds the key: the environment first, then the keyring.
pub fn api_key() -> KeyLookup {
    if let Some(key) = std::env::var(API_KEY_VAR).ok().and_then(ApiKey::new) {
        return KeyLookup {
            key: Some((key, KeySource::Environment)),
            keyring_problem: None,
        };
    }
    let problem = |p: String| KeyLookup {
        key: None,
        keyring_problem: Some(p),
    };
    let entry = match entry() {
        Ok(entry) => entry,
        Err(KeyringError(p)) => return problem(p),
    };
    match entry.get_password() {
        Ok(secret) => KeyLookup {
            key: ApiKey::new(secret).map(|k| (k, KeySource::Keyring)),
            keyring_problem: None,
        },
        Err(keyring::Error::NoEntry) => KeyLookup::default(),
        Err(e) => problem(e.to_string()),
    }
}

/// Stores the key in the OS keyring.
pub fn store_api_key(key: &ApiKey) -> Result<(), KeyringError> {
    entry()?
        .set_password(key.expose())
        .map_err(|e| KeyringError(e.to_string()))
}

/// Removes the key from the OS keyring; `false` if there was none.
pub fn delete_api_key() -> Result<bool, KeyringError> {
    match entry()?.delete_credential() {
        Ok(()) => Ok(true),
        Err(keyring::Error::NoEntry) => Ok(false),
        Err(e) => Err(KeyringError(e.to_string())),
    }
}
