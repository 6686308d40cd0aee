//! Errors as the UI receives them: a kind it can branch on and a sentence for the user.
//!
//! Every command returns `Result<_, AppError>`; core errors are mapped here, once, so a
//! missing model reads the same wherever it surfaces.

use serde::Serialize;
use tandem_core::budget::BudgetError;
use tandem_core::chat_settings::ChatSettingsError;
use tandem_core::cloud::{CloudError, CloudErrorKind};
use tandem_core::engine::OpenError;
use tandem_core::history::HistoryError;
use tandem_core::local::LoadError;
use tandem_core::models::ModelError;

/// What went wrong, coarsely; the UI picks its wording and remedy from this.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The edge model is not downloaded, or its path does not exist.
    ModelMissing,
    /// The model file is not a usable GGUF, or failed its checksum.
    ModelCorrupt,
    /// Not in the catalogue and not a path.
    ModelUnknown,
    /// The engine is loading, or failed to start.
    EngineUnavailable,
    /// A reply is already being generated.
    Busy,
    /// No such conversation.
    NotFound,
    /// An argument or setting is out of range.
    InvalidInput,
    /// The OS keyring cannot be used (the environment variable still works).
    KeyringUnavailable,
    /// Nothing answers at the cloud endpoint (or not in time).
    CloudUnreachable,
    /// The cloud refused the API key.
    CloudWrongKey,
    /// The cloud does not serve that model.
    CloudModelNotFound,
    /// The cloud (a chat endpoint) answers a partial reply afresh instead of continuing it, so
    /// chat-mode replies with it go on locally.
    CloudNoContinuation,
    /// Any other cloud failure.
    CloudError,
    /// Reading or writing the data or config folder failed (a full disk, say).
    Storage,
}

/// An error for the UI: `{kind, message}`.
#[derive(Debug, Clone, PartialEq, Serialize, thiserror::Error)]
#[error("{message}")]
pub struct AppError {
    /// What went wrong.
    pub kind: ErrorKind,
    /// A sentence for the user.
    pub message: String,
}

impl AppError {
    /// An error of `kind` saying `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
}

impl From<ModelError> for AppError {
    fn from(e: ModelError) -> Self {
        let kind = match &e {
            ModelError::Unknown { .. } => ErrorKind::ModelUnknown,
            ModelError::NotPulled { .. } => ErrorKind::ModelMissing,
            ModelError::Verification { .. } => ErrorKind::ModelCorrupt,
            ModelError::Fetch { .. } | ModelError::Io { .. } => ErrorKind::Storage,
        };
        AppError::new(kind, e.to_string())
    }
}

impl From<OpenError> for AppError {
    fn from(e: OpenError) -> Self {
        match e {
            OpenError::Model(e) => e.into(),
            OpenError::Load(LoadError::Missing(path)) => AppError::new(
                ErrorKind::ModelMissing,
                format!("model file not found: {}", path.display()),
            ),
            OpenError::Load(e @ LoadError::Corrupt { .. }) => {
                AppError::new(ErrorKind::ModelCorrupt, e.to_string())
            }
            OpenError::Cloud(e) => e.into(),
            e => AppError::new(ErrorKind::EngineUnavailable, e.to_string()),
        }
    }
}

impl From<CloudErrorKind> for ErrorKind {
    fn from(kind: CloudErrorKind) -> Self {
        match kind {
            CloudErrorKind::Unreachable => ErrorKind::CloudUnreachable,
            CloudErrorKind::WrongKey => ErrorKind::CloudWrongKey,
            CloudErrorKind::ModelNotFound => ErrorKind::CloudModelNotFound,
            CloudErrorKind::NoContinuation => ErrorKind::CloudNoContinuation,
            CloudErrorKind::Other => ErrorKind::CloudError,
        }
    }
}

impl From<BudgetError> for AppError {
    fn from(e: BudgetError) -> Self {
        AppError::new(ErrorKind::InvalidInput, e.to_string())
    }
}

impl From<ChatSettingsError> for AppError {
    fn from(e: ChatSettingsError) -> Self {
        AppError::new(ErrorKind::InvalidInput, e.to_string())
    }
}

impl From<CloudError> for AppError {
    fn from(e: CloudError) -> Self {
        AppError::new(e.kind().into(), e.to_string())
    }
}

impl From<HistoryError> for AppError {
    fn from(e: HistoryError) -> Self {
        let kind = match &e {
            HistoryError::NotFound(_) => ErrorKind::NotFound,
            HistoryError::Corrupt { .. } | HistoryError::Io { .. } => ErrorKind::Storage,
        };
        AppError::new(kind, e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_reach_the_ui_as_kind_and_message() {
        let e: AppError = ModelError::NotPulled {
            name: "qwen2.5-coder-0.5b".into(),
        }
        .into();
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            serde_json::json!({"kind": "model_missing",
                "message": "model 'qwen2.5-coder-0.5b' is not downloaded yet: run `tandem models pull qwen2.5-coder-0.5b`"})
        );
        let e: AppError = CloudError::Unauthorized { status: 401 }.into();
        assert_eq!(e.kind, ErrorKind::CloudWrongKey);
    }
}
