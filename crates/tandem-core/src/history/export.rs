//! A conversation as a document the user keeps: Markdown with each reply's provenance, or
//! the JSON of every event.

use super::Conversation;
use crate::chat_settings::ChatSettings;
use crate::event::{Event, TokenSource};
use crate::message::Role;
use serde::{Deserialize, Serialize};

/// What a conversation is exported as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExportFormat {
    /// Readable text with each reply's provenance.
    Markdown,
    /// The conversation as saved: every event of every reply.
    Json,
}

impl ExportFormat {
    /// The file name extension.
    pub fn extension(self) -> &'static str {
        match self {
            ExportFormat::Markdown => "md",
            ExportFormat::Json => "json",
        }
    }

    /// What the save dialog calls such files.
    pub fn description(self) -> &'static str {
        match self {
            ExportFormat::Markdown => "Markdown",
            ExportFormat::Json => "JSON",
        }
    }
}

impl Conversation {
    /// The file's contents in `format`, with the settings its replies are written with
    /// (`defaults` where the chat has none of its own).
    pub fn export(&self, format: ExportFormat, defaults: ChatSettings) -> String {
        let settings = self.settings_or(defaults);
        match format {
            ExportFormat::Markdown => self.to_markdown(&settings),
            ExportFormat::Json => serde_json::to_string_pretty(&Conversation {
                settings: Some(settings),
                ..self.clone()
            })
            .expect("conversations serialize"),
        }
    }

    /// A file name for the export: the title without what file systems refuse or hide.
    pub fn export_file_name(&self, format: ExportFormat) -> String {
        let safe: String = (self.title.chars())
            .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '_' | '-'))
            .collect();
        let stem = Some(safe.trim())
            .filter(|s| !s.is_empty())
            .unwrap_or("chat");
        format!("{stem}.{}", format.extension())
    }

    /// The conversation as Markdown; each reply ends with its provenance: counts, cost, and
    /// every cloud token with its score, the edge token it replaced and the request latency.
    fn to_markdown(&self, s: &ChatSettings) -> String {
        let mut out = format!(
            "# {}\n\n> temperature {} · top-p {} · up to {} tokens per reply · long \
             conversations: {}\n\n",
            self.title,
            s.temperature,
            s.top_p,
            s.max_tokens,
            s.context_policy.describe()
        );
        if let Some(system) = s.system_message() {
            out.push_str(&format!("## System prompt\n\n{}\n\n", system.content));
        }
        for m in &self.messages {
            match m.role {
                Role::System => out.push_str(&format!("## System\n\n{}\n\n", m.content)),
                Role::User => out.push_str(&format!("## You\n\n{}\n\n", m.content)),
                Role::Assistant => {
                    out.push_str(&format!("## Tandem\n\n{}\n\n", m.content));
                    out.push_str(&provenance_markdown(&m.events));
                }
            }
        }
        out
    }
}

fn provenance_markdown(events: &[Event]) -> String {
    let mut out = String::new();
    for e in events {
        if let Event::Finished { usage, .. } = e {
            out.push_str(&format!(
                "> edge {} · cloud {} ({:.1}%) · {} requests · ${:.4}\n",
                usage.edge_tokens,
                usage.cloud_tokens,
                usage.cloud_share() * 100.0,
                usage.cloud_requests,
                usage.est_cost_usd
            ));
        }
    }
    let cloud: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            Event::Token {
                text,
                source: TokenSource::Cloud,
                score,
                edge_candidate,
                request_ms,
                ..
            } => Some(format!(
                "| {:?} | {score:.3} | {:?} | {} |",
                text,
                edge_candidate.as_deref().unwrap_or(""),
                request_ms.map_or("–".into(), |ms| format!("{ms} ms"))
            )),
            _ => None,
        })
        .collect();
    if !cloud.is_empty() {
        out.push_str(
            "\n| cloud token | score | replaced edge token | latency |\n|---|---|---|---|\n",
        );
        out.push_str(&cloud.join("\n"));
        out.push('\n');
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::fixtures::reply_events;
    use crate::history::ReplyMode;

    #[test]
    fn export_file_names_keep_the_title_and_nothing_a_path_could_use() {
        let mut c = Conversation::new("1".into(), 0);
        c.title = "../../etc/passwd: a \"title\"".into();
        assert_eq!(
            c.export_file_name(ExportFormat::Markdown),
            "etcpasswd a title.md"
        );
        c.title = "///".into();
        assert_eq!(c.export_file_name(ExportFormat::Json), "chat.json");
        // A chat without settings of its own is exported with the ones it is answered with.
        let json = c.export(ExportFormat::Json, ChatSettings::default());
        let json: Conversation = serde_json::from_str(&json).unwrap();
        assert_eq!(json.settings, Some(ChatSettings::default()));
        assert_eq!(json.messages, c.messages);
    }

    #[test]
    fn markdown_export_says_how_the_chat_was_answered_and_lists_cloud_tokens() {
        let settings = ChatSettings {
            system_prompt: "Be brief.".into(),
            ..ChatSettings::default()
        };
        let mut c = Conversation::new("1".into(), 0);
        c.push_user("Sky?");
        c.push_reply(ReplyMode::Routed, reply_events());
        let md = c.export(ExportFormat::Markdown, settings);
        assert!(
            md.starts_with(
                "# Sky?\n\n> temperature 0 · top-p 0.95 · up to 256 tokens per reply · long \
                 conversations: the oldest turns leave the model's view\n\n## System prompt\n\n\
                 Be brief.\n\n## You\n\nSky?\n\n## Tandem\n\nBlue.\n"
            ),
            "{md}"
        );
        assert!(md.contains("edge 1 · cloud 1 (50.0%) · 1 requests"), "{md}");
        assert!(
            md.contains("| \"Blue\" | 0.900 | \"Red\" | 120 ms |"),
            "{md}"
        );
    }
}
