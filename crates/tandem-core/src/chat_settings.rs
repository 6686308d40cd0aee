//! How one conversation is answered: what the model is told, how it picks its tokens, how
//! long it may write, and what happens once the conversation outgrows the context window.
//!
//! Each conversation keeps its own (Settings give a new one its defaults), and the engine
//! applies exactly these to every reply of it, so what the chat settings show is what the
//! model did.

use crate::message::Message;
use crate::sampling::SamplingParams;
use crate::window::ContextPolicy;
use serde::{Deserialize, Serialize};

/// The highest temperature offered: beyond it a 0.5B model writes noise.
pub const MAX_TEMPERATURE: f32 = 2.0;

/// One conversation's settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChatSettings {
    /// Instructions before the conversation (none when blank).
    pub system_prompt: String,
    /// Softmax temperature of the edge; 0 is greedy.
    pub temperature: f32,
    /// Nucleus sampling: keep the likeliest tokens up to this probability.
    pub top_p: f32,
    /// Tokens per reply at most.
    pub max_tokens: u32,
    /// What happens when the conversation no longer fits the context window.
    pub context_policy: ContextPolicy,
}

impl Default for ChatSettings {
    /// What a conversation gets from the default settings (the settings file's defaults are
    /// these).
    fn default() -> Self {
        let sampling = SamplingParams::default();
        Self {
            system_prompt: String::new(),
            temperature: sampling.temperature,
            top_p: sampling.top_p,
            max_tokens: 256,
            context_policy: ContextPolicy::default(),
        }
    }
}

/// Why chat settings cannot be used; the message names the field and the range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ChatSettingsError {
    /// The temperature is out of range (or not a number).
    #[error("temperature must be between 0 and {MAX_TEMPERATURE} (got {0})")]
    Temperature(f32),
    /// Top-p is out of range (or not a number).
    #[error("top_p must be above 0 and at most 1 (got {0})")]
    TopP(f32),
    /// A reply of no tokens.
    #[error("max_tokens must be at least 1")]
    MaxTokens,
}

impl ChatSettings {
    /// Checks the numbers.
    pub fn validate(&self) -> Result<(), ChatSettingsError> {
        if !(0.0..=MAX_TEMPERATURE).contains(&self.temperature) {
            return Err(ChatSettingsError::Temperature(self.temperature));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(ChatSettingsError::TopP(self.top_p));
        }
        if self.max_tokens == 0 {
            return Err(ChatSettingsError::MaxTokens);
        }
        Ok(())
    }

    /// The system message, if the prompt says anything.
    pub fn system_message(&self) -> Option<Message> {
        Some(self.system_prompt.trim())
            .filter(|text| !text.is_empty())
            .map(Message::system)
    }

    /// `base` (the engine's sampler settings) with this conversation's temperature and top-p.
    pub fn sampling(&self, base: SamplingParams) -> SamplingParams {
        SamplingParams {
            temperature: self.temperature,
            top_p: self.top_p,
            ..base
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_out_of_range_are_named() {
        assert!(ChatSettings::default().validate().is_ok());
        let bad = |change: fn(&mut ChatSettings)| {
            let mut settings = ChatSettings::default();
            change(&mut settings);
            settings.validate().unwrap_err().to_string()
        };
        assert!(bad(|s| s.temperature = f32::NAN).contains("temperature"));
        assert!(bad(|s| s.temperature = 2.5).contains("between 0 and 2"));
        assert!(bad(|s| s.top_p = 0.0).contains("top_p"));
        assert!(bad(|s| s.top_p = f32::INFINITY).contains("top_p"));
        assert!(bad(|s| s.max_tokens = 0).contains("max_tokens"));
    }

    #[test]
    fn a_blank_system_prompt_is_no_system_message() {
        let mut settings = ChatSettings {
            system_prompt: "  \n".into(),
            ..ChatSettings::default()
        };
        assert_eq!(settings.system_message(), None);
        settings.system_prompt = " Answer in French. ".into();
        assert_eq!(
            settings.system_message(),
            Some(Message::system("Answer in French."))
        );
    }

    #[test]
    fn sampling_takes_temperature_and_top_p_and_keeps_the_rest() {
        let base = SamplingParams {
            seed: 7,
            ..SamplingParams::default()
        };
        let settings = ChatSettings {
            temperature: 0.8,
            top_p: 0.9,
            ..ChatSettings::default()
        };
        let sampling = settings.sampling(base);
        assert_eq!(
            (sampling.temperature, sampling.top_p, sampling.seed),
            (0.8, 0.9, 7)
        );
    }
}
