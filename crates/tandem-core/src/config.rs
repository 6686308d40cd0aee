//! Settings: one TOML file in the platform config folder; every field can be overridden
//! by a CLI flag. Secrets are never stored here (see [`crate::secrets`]).

use crate::budget::CloudBudget;
use crate::chat_settings::ChatSettings;
use crate::endpoint::{ApiKey, CloudMode};
use crate::router::RouterKind;
use crate::sampling::SamplingParams;
use crate::window::ContextPolicy;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The most CPU threads a settings file may ask for: more is a typo, and llama.cpp takes the
/// count as a 32-bit number.
pub const MAX_THREADS: u32 = 1024;

/// Everything a user can set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Edge model: catalogue name or path to a GGUF.
    pub edge: String,
    /// CPU threads for the edge model.
    pub threads: Option<u32>,
    /// Context window of the edge model, in tokens.
    pub context: u32,
    /// Tokens per reply (a new conversation's default).
    pub max_tokens: u32,
    /// The system prompt a new conversation starts with (none when blank).
    pub system_prompt: String,
    /// What a new conversation does once it outgrows the context window.
    pub context_policy: ContextPolicy,
    /// The cloud endpoint.
    pub cloud: CloudSettings,
    /// What the cloud may take.
    pub budget: CloudBudget,
    /// Which router decides.
    pub router: RouterSettings,
    /// How the edge picks tokens.
    pub sampling: SamplingParams,
    /// `tandem serve` defaults, also the local stand-in cloud.
    pub serve: ServeSettings,
}

/// The OpenAI-compatible cloud.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CloudSettings {
    /// Base URL including `/v1`; empty starts the local stand-in; `none` means no cloud.
    pub url: String,
    /// Model name sent with requests.
    pub model: Option<String>,
    /// `completions` (the exact prompt; default) or `chat` (messages plus the reply so far).
    pub mode: CloudMode,
    /// Tokens asked for per request.
    pub span: u32,
    /// Seconds before a request is given up (the reply goes on locally).
    pub timeout_secs: f32,
    /// Whether the local model drafts its own continuation while a request is in flight, so
    /// a round trip costs the reply only what the cloud changes (off: it waits).
    pub overlap: bool,
    /// Whether, while a request is away, the next position the draft shows the reply would
    /// route is asked for at once, so requests overlap instead of queueing behind each other;
    /// an answer the reply does not come to is paid for and unused (needs `overlap`).
    pub ask_ahead: bool,
    /// A key handed over in memory (the local stand-in's key for this run), used instead of
    /// the environment's or the keyring's; never read from or written to the file.
    #[serde(skip)]
    pub api_key: Option<ApiKey>,
}

/// Router choice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RouterSettings {
    /// Which router.
    pub kind: RouterKind,
    /// Weights file for the MLP router.
    pub path: Option<PathBuf>,
}

/// The local OpenAI-compatible server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServeSettings {
    /// Model served: catalogue name or path.
    pub model: String,
    /// Address to bind.
    pub host: String,
    /// Port.
    pub port: u16,
}

impl Default for Config {
    fn default() -> Self {
        let chat = ChatSettings::default();
        Self {
            edge: "qwen2.5-coder-0.5b".into(),
            threads: None,
            context: 4096,
            max_tokens: chat.max_tokens,
            system_prompt: chat.system_prompt,
            context_policy: chat.context_policy,
            cloud: CloudSettings::default(),
            budget: CloudBudget::default(),
            router: RouterSettings::default(),
            sampling: SamplingParams::default(),
            serve: ServeSettings::default(),
        }
    }
}

impl Default for CloudSettings {
    fn default() -> Self {
        Self {
            url: String::new(),
            model: None,
            mode: CloudMode::Completions,
            span: 4,
            timeout_secs: 20.0,
            overlap: true,
            ask_ahead: true,
            api_key: None,
        }
    }
}

/// The cloud a URL setting names: none for "" (the local stand-in) or "none" (no cloud).
pub fn endpoint(url: &str) -> Option<&str> {
    Some(url).filter(|url| !url.is_empty() && *url != "none")
}

impl CloudSettings {
    /// The endpoint to call, if any.
    pub fn endpoint(&self) -> Option<&str> {
        endpoint(&self.url)
    }

    /// Whether no cloud is configured and the local stand-in should serve instead.
    pub fn wants_stand_in(&self) -> bool {
        self.url.is_empty()
    }
}

impl Default for RouterSettings {
    fn default() -> Self {
        Self {
            kind: RouterKind::DEFAULT,
            path: None,
        }
    }
}

impl Default for ServeSettings {
    fn default() -> Self {
        Self {
            model: "qwen2.5-coder-1.5b".into(),
            host: "127.0.0.1".into(),
            port: 8081,
        }
    }
}

/// Why the settings file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Reading or writing failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The file is not valid settings.
    #[error("{path} is not valid: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the line.
        message: String,
    },
}

impl Config {
    /// The settings file's usual place.
    pub fn default_path(config_dir: &Path) -> PathBuf {
        config_dir.join("config.toml")
    }

    /// Reads settings from the text of a settings file, checked as every front end checks
    /// them; the error names the key and the problem.
    pub fn parse(text: &str) -> Result<Config, String> {
        let config: Config = toml::from_str(text).map_err(|e| e.to_string())?;
        config
            .budget
            .validate()
            .map_err(|e| format!("[budget]: {e}"))?;
        config
            .chat_settings()
            .validate()
            .map_err(|e| e.to_string())?;
        if let Some(threads) = config.threads.filter(|t| !(1..=MAX_THREADS).contains(t)) {
            return Err(format!(
                "threads: {threads} is not a thread count (1 to {MAX_THREADS})"
            ));
        }
        let timeout = config.cloud.timeout_secs;
        if !(timeout.is_finite() && timeout > 0.0) {
            return Err(format!(
                "[cloud] timeout_secs: {timeout} is not a number of seconds above 0"
            ));
        }
        Ok(config)
    }

    /// Makes `chat` what new conversations are answered with.
    pub fn set_chat_settings(&mut self, chat: ChatSettings) {
        self.sampling = chat.sampling(self.sampling);
        self.system_prompt = chat.system_prompt;
        self.max_tokens = chat.max_tokens;
        self.context_policy = chat.context_policy;
    }

    /// What a new conversation is answered with.
    pub fn chat_settings(&self) -> ChatSettings {
        ChatSettings {
            system_prompt: self.system_prompt.clone(),
            temperature: self.sampling.temperature,
            top_p: self.sampling.top_p,
            max_tokens: self.max_tokens,
            context_policy: self.context_policy,
        }
    }

    /// Reads settings; a missing file gives the defaults.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Config::parse(&text).map_err(|message| ConfigError::Invalid {
                path: path.to_owned(),
                message,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Config::default()),
            Err(source) => Err(ConfigError::Io {
                path: path.to_owned(),
                source,
            }),
        }
    }

    /// Writes settings atomically: a crash leaves the old file or the new one, never half.
    pub fn save(&self, path: &Path) -> Result<(), ConfigError> {
        let text = toml::to_string_pretty(self).expect("settings serialize");
        crate::atomic::write(path, text.as_bytes()).map_err(|source| ConfigError::Io {
            path: path.to_owned(),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::Share;

    #[test]
    fn missing_file_gives_defaults_and_save_load_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = Config::default_path(dir.path());
        assert_eq!(Config::load(&path).unwrap(), Config::default());
        assert_eq!(Config::default().chat_settings(), ChatSettings::default());
        let mut c = Config::default();
        c.budget.max_share = Share::new(0.3).unwrap();
        c.router.kind = RouterKind::Entropy;
        c.cloud.url = "http://127.0.0.1:9/v1".into();
        let chat = ChatSettings {
            system_prompt: "Be brief.".into(),
            temperature: 0.7,
            top_p: 0.9,
            max_tokens: 512,
            context_policy: ContextPolicy::DropMiddle,
        };
        c.set_chat_settings(chat.clone());
        assert_eq!(c.chat_settings(), chat);
        c.save(&path).unwrap();
        assert_eq!(Config::load(&path).unwrap(), c);
    }

    #[test]
    fn a_partial_file_keeps_other_defaults_and_typos_are_reported_with_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "max_tokens = 64\n[budget]\nmax_share = 0.05\n").unwrap();
        let c = Config::load(&path).unwrap();
        assert_eq!(
            (c.max_tokens, c.budget.max_share.get(), c.context),
            (64, 0.05, 4096)
        );
        std::fs::write(&path, "[budget]\nmax_shares = 0.05\n").unwrap();
        let err = Config::load(&path).unwrap_err().to_string();
        assert!(err.contains("max_shares"), "{err}");
        std::fs::write(&path, "[budget]\nmax_share = nan\n").unwrap();
        let err = Config::load(&path).unwrap_err().to_string();
        assert!(err.contains("between 0 and 1"), "{err}");
    }

    #[test]
    fn a_timeout_or_thread_count_that_is_no_number_is_refused_with_the_field_named() {
        for (text, field) in [
            ("[cloud]\ntimeout_secs = inf\n", "timeout_secs"),
            ("[cloud]\ntimeout_secs = nan\n", "timeout_secs"),
            ("[cloud]\ntimeout_secs = 0\n", "timeout_secs"),
            ("threads = 0\n", "threads"),
            ("threads = 4000000000\n", "threads"),
        ] {
            let err = Config::parse(text).unwrap_err();
            assert!(err.contains(field), "{text}: {err}");
        }
        assert_eq!(Config::parse("threads = 8\n").unwrap().threads, Some(8));
    }

    proptest::proptest! {
        /// Whatever a settings file holds (a damaged real one, or any key with any value),
        /// reading it is a config or a message, and a config read is one the budget accepts.
        #[test]
        fn any_settings_text_is_a_config_or_a_message(
            at in 0usize..4096,
            damage in crate::damage::kind(),
            section in proptest::sample::select(vec!["", "[budget]", "[cloud]", "[router]", "[sampling]", "[serve]"]),
            key in "[a-z_]{1,16}",
            value in proptest::sample::select(vec!["nan", "inf", "-inf", "-1", "1e40", "0.5", "\"x\"", "[]", "{}", "true", "\"\\u0000\""]),
        ) {
            let text = toml::to_string(&Config::default()).unwrap().into_bytes();
            let damaged = String::from_utf8_lossy(&crate::damage::apply(text, at, damage)).into_owned();
            let added = format!("{section}\n{key} = {value}\n");
            for candidate in [damaged, added] {
                if let Ok(config) = Config::parse(&candidate) {
                    proptest::prop_assert!(config.budget.validate().is_ok());
                }
            }
        }
    }
}
