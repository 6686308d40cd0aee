//! Where the cloud API key comes from. It is never written to settings, logs or events.
//!
//! The environment variable wins, so CI and scripts need no keyring.

use crate::cloud::ApiKey;

/// The environment variable holding the cloud API key.
pub const API_KEY_VAR: &str = "TANDEM_CLOUD_API_KEY";

/// The API key from the environment, if set and not empty.
pub fn api_key() -> Option<ApiKey> {
    std::env::var(API_KEY_VAR).ok().and_then(ApiKey::new)
}
