//! Ready-made cloud endpoints: the servers Tandem is known to work with, and how to ask each.

use super::CloudMode;
use serde::Serialize;

/// A ready-made cloud endpoint.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CloudPreset {
    /// Shown in the picker.
    pub name: &'static str,
    /// Base URL with `/v1`.
    pub url: &'static str,
    /// How to ask it.
    pub mode: CloudMode,
    /// Whether it needs an API key.
    pub needs_key: bool,
}

/// The presets a user picks from (the app's settings dialog lists them in this order).
pub const CLOUD_PRESETS: [CloudPreset; 5] = [
    CloudPreset {
        name: "Local stand-in (Tandem serves the 1.5B model)",
        url: "",
        mode: CloudMode::Completions,
        needs_key: false,
    },
    CloudPreset {
        name: "llama-server",
        url: "http://127.0.0.1:8080/v1",
        mode: CloudMode::Completions,
        needs_key: false,
    },
    CloudPreset {
        name: "vLLM",
        url: "http://127.0.0.1:8000/v1",
        mode: CloudMode::Completions,
        needs_key: false,
    },
    CloudPreset {
        name: "OpenRouter",
        url: "https://openrouter.ai/api/v1",
        mode: CloudMode::Chat,
        needs_key: true,
    },
    CloudPreset {
        name: "OpenAI-compatible (generic)",
        url: "https://api.example.com/v1",
        mode: CloudMode::Chat,
        needs_key: true,
    },
];
