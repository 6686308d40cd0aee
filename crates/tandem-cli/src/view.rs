//! How a reply looks in a terminal: edge text plain, cloud tokens highlighted, a footer
//! with the counts; or, with `--json`, one event per line and nothing else on stdout.

use std::io::{IsTerminal, Write};
use tandem_core::event::{Event, TokenSource};

/// Renders events as they arrive.
pub struct TerminalView {
    json: bool,
    colour: bool,
    /// The messages out of the model's view, as last said (said again only when they change).
    left_out: Option<(u32, u32)>,
}

impl TerminalView {
    /// A view for stdout; colours only when stdout is a terminal.
    pub fn new(json: bool) -> Self {
        Self {
            json,
            colour: std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
            left_out: None,
        }
    }

    /// Shows one event; returns `true` (the terminal never cancels a reply).
    pub fn show(&mut self, event: &Event) -> bool {
        let mut out = std::io::stdout().lock();
        if self.json {
            let _ = writeln!(
                out,
                "{}",
                serde_json::to_string(event).expect("events serialize")
            );
            let _ = out.flush();
            return true;
        }
        match event {
            Event::Token {
                text,
                source: TokenSource::Cloud,
                ..
            } if self.colour => {
                let _ = write!(out, "\x1b[1;36m{text}\x1b[0m");
            }
            Event::Token { text, .. } => {
                let _ = write!(out, "{text}");
            }
            Event::Notice { message, .. } => eprintln!("\n[notice] {message}"),
            Event::LeftOut { from, to } if self.left_out != Some((*from, *to)) => {
                self.left_out = Some((*from, *to));
                eprintln!(
                    "[context] messages {}–{} are out of the model's view (the window is full)",
                    from + 1,
                    to
                );
            }
            Event::LeftOut { .. } => {}
            Event::Finished {
                reason,
                usage,
                timings,
            } => {
                let _ = writeln!(out);
                let tokens = usage.edge_tokens + usage.cloud_tokens;
                let seconds = timings.total_ms as f64 / 1000.0;
                let unused = match usage.cloud_requests_unused {
                    0 => String::new(),
                    n => format!(" ({n} asked ahead, unused)"),
                };
                eprintln!(
                    "[{}] edge {} · cloud {} ({:.0}%) · {} requests{unused} · ${:.4} · {:.1} tok/s",
                    reason.as_str(),
                    usage.edge_tokens,
                    usage.cloud_tokens,
                    usage.cloud_share() * 100.0,
                    usage.cloud_requests,
                    usage.est_cost_usd,
                    tokens as f64 / seconds.max(1e-3),
                );
            }
            Event::Started { .. } | Event::CloudRequest { .. } => {}
        }
        let _ = out.flush();
        true
    }
}
