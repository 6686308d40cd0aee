//! `tandem chat`: an interactive conversation in the terminal.
//!
//! The KV cache lives across turns, so each turn decodes only the new message.
//! `/budget 0.2` or `/budget off` changes the cloud share from the next token on.

use crate::settings::Overrides;
use crate::view::TerminalView;
use anyhow::Result;
use std::io::{BufRead, Write};
use tandem_core::budget::{CloudBudget, Share};
use tandem_core::event::Event;

/// Flags of `tandem chat`.
#[derive(clap::Args)]
pub struct Args {
    /// A system prompt.
    #[arg(long)]
    system: Option<String>,
    #[command(flatten)]
    overrides: Overrides,
}

const HELP: &str = "commands: /budget SHARE|off  /reset  /quit";

/// Runs it until /quit or end of input.
pub fn run(args: Args) -> Result<()> {
    let session = args.overrides.open_engine()?;
    let (config, engine) = (&session.config, &session.engine);
    let mut chat = engine.chat()?;
    if let Some(system) = &args.system {
        chat.system(system);
    }
    eprintln!(
        "tandem chat · edge {} · cloud {} · budget {} · {HELP}",
        config.edge,
        engine.cloud_url().unwrap_or("none (local only)"),
        config.budget.max_share
    );
    let mut view = TerminalView::new(false);
    let stdin = std::io::stdin();
    loop {
        eprint!("> ");
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        if stdin.lock().read_line(&mut line)? == 0 {
            return Ok(());
        }
        let line = line.trim();
        match line.split_whitespace().collect::<Vec<_>>().as_slice() {
            [] => continue,
            ["/quit"] | ["/exit"] => return Ok(()),
            ["/reset"] => {
                chat.reset();
                eprintln!("(conversation cleared)");
            }
            ["/budget", value] => match parse_budget(value, engine.budget().get()) {
                Ok(budget) => {
                    engine.budget().set(budget);
                    eprintln!("(cloud budget: {})", describe(&budget));
                }
                Err(e) => eprintln!("{e}"),
            },
            [command, ..] if command.starts_with('/') => eprintln!("unknown command; {HELP}"),
            _ => {
                chat.send(line, &mut |e: Event| view.show(&e))?;
            }
        }
    }
}

fn parse_budget(value: &str, current: CloudBudget) -> Result<CloudBudget, String> {
    if value == "off" {
        return Ok(CloudBudget {
            enabled: false,
            ..current
        });
    }
    Share::parse(value)
        .map(|share| current.with_share(share))
        .map_err(|e| format!("{e}: try /budget 0.15, /budget 20% or /budget off"))
}

fn describe(budget: &CloudBudget) -> String {
    if budget.allows_cloud() {
        format!("up to {} of the replies' tokens", budget.max_share)
    } else {
        "off (fully local)".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_commands_parse_shares_percentages_and_off() {
        let current = CloudBudget::default();
        assert_eq!(parse_budget("0.3", current).unwrap().max_share.get(), 0.3);
        assert_eq!(parse_budget("20%", current).unwrap().max_share.get(), 0.2);
        assert!(!parse_budget("off", current).unwrap().enabled);
        assert!(!parse_budget("0", current).unwrap().enabled);
        assert!(parse_budget("1.5", current).is_err());
        assert!(parse_budget("lots", current)
            .unwrap_err()
            .contains("/budget 0.15"));
    }
}
