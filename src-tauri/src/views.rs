//! What the UI is shown: small serializable views over the core's state (mirrored by the
//! types in `ui/src/ipc/`).

use crate::error::{AppError, ErrorKind};
use serde::{Deserialize, Serialize};
use tandem_core::budget::CloudBudget;
use tandem_core::chat_settings::ChatSettings;
use tandem_core::cloud::CloudMode;
pub use tandem_core::cloud::{CloudPreset, CLOUD_PRESETS};
use tandem_core::config::Config;
use tandem_core::router::RouterKind;
use tandem_core::secrets::{self, KeyError, KeySource};
use tandem_core::spend::DayUse;

/// The cloud as the header shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CloudInfo {
    /// The endpoint replies go to, if any.
    pub url: Option<String>,
    /// "local stand-in", "off", or the endpoint's host.
    pub label: String,
    /// The model name sent (the served model for the stand-in).
    pub model: Option<String>,
    /// How requests are made.
    pub mode: CloudMode,
    /// Whether Tandem serves the cloud itself on this machine.
    pub stand_in: bool,
}

impl CloudInfo {
    /// Describes the cloud of `config` (whose URL already points at a running stand-in).
    pub fn new(config: &Config, stand_in: bool) -> Self {
        let url = config.cloud.endpoint().map(str::to_owned);
        let label = match &url {
            _ if stand_in => "local stand-in".to_owned(),
            None => "off".to_owned(),
            Some(url) => url
                .split("://")
                .nth(1)
                .and_then(|rest| rest.split('/').next())
                .unwrap_or(url)
                .to_owned(),
        };
        Self {
            url,
            label,
            model: if stand_in {
                Some(config.serve.model.clone())
            } else {
                config.cloud.model.clone()
            },
            mode: config.cloud.mode,
            stand_in,
        }
    }
}

/// Where the API key of one cloud is, shown without the key.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KeyStatus {
    /// "keyring", "environment" or "none".
    pub source: &'static str,
    /// The last characters, e.g. `…abcd`.
    pub masked: Option<String>,
    /// The origin a keyring key is saved for (and the only one it is sent to).
    pub origin: Option<String>,
    /// Why the keyring could not be read, or why the key is not sent, if so.
    pub keyring_problem: Option<String>,
}

impl KeyStatus {
    /// Looks up now the key of the cloud at `url` (none for the local stand-in or no cloud).
    pub fn read(url: Option<&str>) -> Self {
        let Some(url) = url else {
            return Self {
                source: "none",
                masked: None,
                origin: None,
                keyring_problem: None,
            };
        };
        let lookup = secrets::api_key(url);
        let (source, masked) = match &lookup.key {
            Some((key, KeySource::Keyring)) => ("keyring", Some(key.masked())),
            Some((key, KeySource::Environment)) => ("environment", Some(key.masked())),
            None => ("none", None),
        };
        Self {
            source,
            masked,
            origin: secrets::origin(url).ok(),
            keyring_problem: lookup.withheld.or(lookup
                .keyring_problem
                .map(|p| KeyError::Keyring(p).to_string())),
        }
    }
}

/// Today's use against the cap.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Meter {
    /// Estimated spend today, in USD.
    pub spent_today_usd: f64,
    /// The daily cap, if set.
    pub cap_usd: Option<f64>,
    /// Reply tokens the edge wrote today.
    pub today_edge_tokens: u64,
    /// Reply tokens the cloud wrote today.
    pub today_cloud_tokens: u64,
}

impl Meter {
    /// Today's use with the cap of `budget`.
    pub fn new(day: DayUse, budget: &CloudBudget) -> Self {
        Self {
            spent_today_usd: day.usd,
            cap_usd: budget.daily_spend_cap_usd,
            today_edge_tokens: day.edge_tokens,
            today_cloud_tokens: day.cloud_tokens,
        }
    }
}

/// Where the engine is, for the UI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EngineState {
    /// Models are loading.
    Loading,
    /// Replies can be sent.
    Ready,
    /// It could not start (`engine_error` says why).
    Failed,
}

/// Everything the header and composer need at start.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AppStatus {
    /// The edge model setting.
    pub edge_model: String,
    /// The router setting.
    pub router: RouterKind,
    /// The cloud (once loaded; from the settings before).
    pub cloud: CloudInfo,
    /// The budget in force.
    pub budget: CloudBudget,
    /// Today's use.
    pub meter: Meter,
    /// The API key's whereabouts.
    pub key: KeyStatus,
    /// Start-up notices.
    pub notices: Vec<String>,
    /// Where the engine is.
    pub engine: EngineState,
    /// Why it failed, when it did.
    pub engine_error: Option<AppError>,
    /// Why the settings file could not be used and where it was kept (the defaults are in
    /// force): shown as a banner until dismissed.
    pub settings_problem: Option<String>,
}

/// The cloud part of the settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CloudSettingsView {
    /// Base URL with `/v1`; "" for the local stand-in, "none" for no cloud.
    pub url: String,
    /// Model name sent with requests.
    pub model: Option<String>,
    /// completions or chat.
    pub mode: CloudMode,
}

/// The router part of the settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouterSettingsView {
    /// Which router.
    pub kind: RouterKind,
}

/// The settings the settings dialog edits (the budget has its own command).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SettingsView {
    /// Edge model: catalogue name or GGUF path.
    pub edge: String,
    /// CPU threads (automatic when absent).
    pub threads: Option<u32>,
    /// The cloud endpoint.
    pub cloud: CloudSettingsView,
    /// Whether, while a request is away, the request the edge's draft would make next goes
    /// at once: replies come sooner over a network, and an answer the reply does not come to
    /// is still billed.
    pub ask_ahead: bool,
    /// The router.
    pub router: RouterSettingsView,
    /// What new conversations are answered with.
    pub chat: ChatSettings,
}

impl SettingsView {
    /// The view of `config`.
    pub fn of(config: &Config) -> Self {
        Self {
            edge: config.edge.clone(),
            threads: config.threads,
            cloud: CloudSettingsView {
                url: config.cloud.url.clone(),
                model: config.cloud.model.clone(),
                mode: config.cloud.mode,
            },
            ask_ahead: config.cloud.ask_ahead,
            router: RouterSettingsView {
                kind: config.router.kind,
            },
            chat: config.chat_settings(),
        }
    }

    /// Writes the view into `config`.
    pub fn apply(self, config: &mut Config) {
        config.edge = self.edge.trim().to_owned();
        config.threads = self.threads.filter(|&t| t > 0);
        config.cloud.url = self.cloud.url.trim().trim_end_matches('/').to_owned();
        config.cloud.model = self.cloud.model.filter(|m| !m.trim().is_empty());
        config.cloud.mode = self.cloud.mode;
        config.cloud.ask_ahead = self.ask_ahead;
        config.router.kind = self.router.kind;
        config.set_chat_settings(self.chat);
    }
}

/// The outcome of "test connection".
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TestResult {
    /// Whether it worked.
    pub ok: bool,
    /// Why it failed, in the vocabulary of every other error (a `cloud_*` kind); `None` when
    /// it worked.
    pub kind: Option<ErrorKind>,
    /// A sentence for the user.
    pub message: String,
    /// The models the endpoint serves (when it answered).
    pub models: Vec<String>,
}

/// Progress of a model download.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum PullEvent {
    /// Bytes so far.
    Progress {
        /// Bytes written.
        done: u64,
        /// Bytes expected.
        total: u64,
    },
    /// The download is complete and checked.
    Done,
    /// It failed; nothing half-written is left.
    Failed {
        /// Why.
        error: AppError,
    },
}
