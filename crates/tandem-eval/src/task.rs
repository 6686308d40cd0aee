//! The fixed prompt formats of each kind of question and how an answer is read back from a
//! reply. Fixed, so every router and budget is measured on exactly the same prompts; tuned
//! (if ever) on `csqa:dev` rows 0–599 only.

use crate::data::{ChatRow, ChoiceRow, OpenRow, Row};
use serde::{Deserialize, Serialize};
use std::str::FromStr;

/// How a multiple-choice question is asked. Two formats, because where the decisive token
/// sits decides what a router must find: first (a router that routes token 0 looks clever)
/// or last, after a sentence of the edge's own reasoning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChoiceFormat {
    /// `<letter>. <choice text> - because <reason>`: the letter is the reply's first token.
    #[default]
    LetterFirst,
    /// `<one sentence of reasoning>. Answer: <letter>`: the letter comes last.
    AnswerLast,
}

impl ChoiceFormat {
    /// Both formats.
    pub const ALL: [ChoiceFormat; 2] = [ChoiceFormat::LetterFirst, ChoiceFormat::AnswerLast];

    /// The name on the command line.
    pub fn flag(self) -> &'static str {
        match self {
            ChoiceFormat::LetterFirst => "letter-first",
            ChoiceFormat::AnswerLast => "answer-last",
        }
    }

    /// The versioned name recorded with features and results; features collected with
    /// another format are not mixed in.
    pub fn name(self) -> &'static str {
        match self {
            ChoiceFormat::LetterFirst => "letter-text-because/3",
            ChoiceFormat::AnswerLast => "reason-then-answer/1",
        }
    }

    /// What the reply is asked to look like.
    fn instruction(self) -> &'static str {
        match self {
            ChoiceFormat::LetterFirst => {
                "Reply in this form: \"<letter>. <choice text> - because <reason in one sentence>\"."
            }
            ChoiceFormat::AnswerLast => {
                "Reason in one sentence, then give the answer in this form: \"Answer: <letter>\"."
            }
        }
    }

    /// Reply length. Letter first: the letter, its choice and a short reason; a reply of some
    /// length is what makes a token share mean something, the letter being one token of ~24
    /// (tuned on csqa:dev 0–599: asked for "letter and text" only, replies were 3–8 tokens and
    /// a 5% share could not buy one letter in two). Answer last: room for the sentence and
    /// the answer line (not tuned yet).
    fn max_tokens(self) -> u32 {
        match self {
            ChoiceFormat::LetterFirst => 24,
            ChoiceFormat::AnswerLast => 48,
        }
    }
}

impl FromStr for ChoiceFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ChoiceFormat::ALL
            .into_iter()
            .find(|f| f.flag() == s)
            .ok_or_else(|| format!("unknown prompt format '{s}' (letter-first or answer-last)"))
    }
}

/// Reply length for math: room for a worked solution. Chosen on gsm8k:test rows 0–14 with
/// [`prompt`]'s wording: at 512 tokens the edge scored 20.0% and the 1.5B stand-in 46.7% (13%
/// and 7% of replies cut off); at 320, 13.3% and 33.3% (60% and 27% cut); the earlier "step by
/// step" prompt at 256 tokens scored 23% for both on held-out rows (the 1.5B's long solutions,
/// often with Python, were cut off), so it could not show what routing recovers.
pub const MATH_MAX_TOKENS: u32 = 512;
/// Reply length for chat and open prompts: the app's default (`Config::default().max_tokens`),
/// so a chat row is measured as a user meets it.
pub const CHAT_MAX_TOKENS: u32 = 256;

/// The versioned name of the prompts `rows` are asked with (recorded with features and
/// results): the multiple-choice format's, the math prompt's and "as-typed" for chat and open
/// prompts, joined
/// with " + " for a mix.
pub fn prompt_name(rows: &[Row], format: ChoiceFormat) -> String {
    let has = |kind: fn(&Row) -> bool| rows.iter().any(kind);
    [
        (has(|r| matches!(r, Row::Choice(_))), format.name()),
        (has(|r| matches!(r, Row::Math(_))), "steps-then-answer/1"),
        (
            has(|r| matches!(r, Row::Chat(_) | Row::Open(_))),
            "as-typed",
        ),
    ]
    .into_iter()
    .filter_map(|(present, name)| present.then_some(name))
    .collect::<Vec<_>>()
    .join(" + ")
}

/// The user message for a row.
pub fn prompt(row: &Row, format: ChoiceFormat) -> String {
    match row {
        Row::Choice(r) => choice_prompt(r, format),
        Row::Math(r) => format!(
            "{}\n\nSolve it in a few short steps, in words and arithmetic only (no code), then give the final answer as \"Answer: <number>\".",
            r.question
        ),
        // As the user typed it: the app adds nothing to a chat message.
        Row::Chat(ChatRow { question, .. }) | Row::Open(OpenRow { question, .. }) => {
            question.clone()
        }
    }
}

fn choice_prompt(row: &ChoiceRow, format: ChoiceFormat) -> String {
    let mut text = format!("{}\n\n", row.question.trim());
    for (label, choice) in row.choices.label.iter().zip(&row.choices.text) {
        text.push_str(&format!("{label}. {choice}\n"));
    }
    text.push('\n');
    text.push_str(format.instruction());
    text
}

/// Tokens a reply to `row` may take.
pub fn max_tokens(row: &Row, format: ChoiceFormat) -> u32 {
    match row {
        Row::Choice(_) => format.max_tokens(),
        Row::Math(_) => MATH_MAX_TOKENS,
        Row::Chat(_) | Row::Open(_) => CHAT_MAX_TOKENS,
    }
}

/// Whether `reply` answers `row` correctly (never, for an open prompt: it has no answer).
pub fn is_correct(row: &Row, reply: &str) -> bool {
    match row {
        Row::Choice(r) => choice_answer(r, reply).is_some_and(|label| label == r.answer_key),
        Row::Math(r) => math_answer(reply).is_some_and(|n| (n - r.answer).abs() < 1e-6),
        Row::Chat(r) => chat_answer(r, reply).is_some(),
        Row::Open(_) => false,
    }
}

/// The first accepted answer a chat reply contains as whole words, case aside.
pub fn chat_answer<'r>(row: &'r ChatRow, reply: &str) -> Option<&'r str> {
    let lower = reply.to_lowercase();
    row.accept
        .iter()
        .find(|a| contains_words(&lower, &a.to_lowercase()))
        .map(String::as_str)
}

/// The label a reply picks: after "answer is"/"Answer:" if present, else the first label
/// standing alone ("B", "B.", "(B)", "**B**"), else the one choice text it quotes.
pub fn choice_answer<'r>(row: &'r ChoiceRow, reply: &str) -> Option<&'r str> {
    let lower = reply.to_lowercase();
    let after_marker = ["answer is", "answer:"]
        .iter()
        .filter_map(|m| lower.find(m).map(|i| &reply[i + m.len()..]))
        .next();
    let standalone = |text: &str| -> Option<&'r str> {
        let chars: Vec<char> = text.chars().collect();
        (0..chars.len()).find_map(|i| {
            let alone = !chars
                .get(i.wrapping_sub(1))
                .is_some_and(|c| c.is_alphanumeric())
                && !chars.get(i + 1).is_some_and(|c| c.is_alphanumeric());
            if !alone {
                return None;
            }
            row.choices
                .label
                .iter()
                .find(|l| l.chars().eq(std::iter::once(chars[i])))
                .map(String::as_str)
        })
    };
    if let Some(label) = after_marker.and_then(standalone) {
        return Some(label);
    }
    if let Some(label) = standalone(reply) {
        return Some(label);
    }
    let quoted: Vec<&str> = row
        .choices
        .label
        .iter()
        .zip(&row.choices.text)
        .filter(|(_, text)| contains_words(&lower, &text.to_lowercase()))
        .map(|(l, _)| l.as_str())
        .collect();
    (quoted.len() == 1).then(|| quoted[0])
}

/// Whether `needle` occurs in `haystack` as whole words ("bank" is not in "banks").
fn contains_words(haystack: &str, needle: &str) -> bool {
    !needle.is_empty()
        && haystack.match_indices(needle).any(|(i, m)| {
            let before = haystack[..i].chars().next_back();
            let after = haystack[i + m.len()..].chars().next();
            !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
        })
}

/// Whether the answer read from a reply changes when the token after `before` is `edge`
/// rather than `cloud`: R2R's "critical" tokens, judged on the reply so far instead of by
/// continuing both. A different wording after the letter is not one; the letter is.
pub fn decides(row: &Row, before: &str, cloud: &str, edge: &str) -> bool {
    answer(row, &format!("{before}{cloud}")) != answer(row, &format!("{before}{edge}"))
}

/// The answer read from `reply`: a choice's label, a number, an accepted chat answer (none
/// for an open prompt).
pub fn answer(row: &Row, reply: &str) -> Option<String> {
    match row {
        Row::Choice(r) => choice_answer(r, reply).map(str::to_owned),
        Row::Math(_) => math_answer(reply).map(|n| n.to_string()),
        Row::Chat(r) => chat_answer(r, reply).map(str::to_owned),
        Row::Open(_) => None,
    }
}

/// The number a math reply ends on: after "Answer:" if present, else its last number.
pub fn math_answer(reply: &str) -> Option<f64> {
    let tail = reply
        .rfind("Answer:")
        .map_or(reply, |i| &reply[i + "Answer:".len()..]);
    let numbers = |text: &str| -> Vec<f64> {
        text.split(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == ','))
            .filter_map(|t| {
                t.replace(',', "")
                    .trim_matches(|c| c == '.' || c == '-')
                    .parse()
                    .ok()
                    .map(|n: f64| if t.starts_with('-') { -n } else { n })
            })
            .collect()
    };
    let found = numbers(tail);
    if tail.len() < reply.len() {
        found.first().copied()
    } else {
        found.last().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{Choices, MathRow};

    fn row() -> ChoiceRow {
        ChoiceRow {
            id: "q".into(),
            question: "A revolving door is a security measure at a what?".into(),
            choices: Choices {
                label: ["A", "B", "C", "D", "E"].map(String::from).to_vec(),
                text: ["bank", "library", "department store", "mall", "new york"]
                    .map(String::from)
                    .to_vec(),
            },
            answer_key: "A".into(),
        }
    }

    #[test]
    fn a_mix_of_rows_names_every_prompt_it_was_asked_with() {
        let choice = Row::Choice(row());
        let chat = Row::Chat(crate::data::ChatRow {
            id: "c".into(),
            question: "Capital of Peru?".into(),
            accept: vec!["Lima".into()],
        });
        let letter_first = ChoiceFormat::LetterFirst;
        assert_eq!(
            prompt_name(std::slice::from_ref(&choice), letter_first),
            "letter-text-because/3"
        );
        assert_eq!(
            prompt_name(std::slice::from_ref(&chat), letter_first),
            "as-typed"
        );
        assert_eq!(
            prompt_name(&[chat, choice], ChoiceFormat::AnswerLast),
            "reason-then-answer/1 + as-typed"
        );
    }

    #[test]
    fn the_prompt_lists_every_choice_with_its_letter() {
        let p = prompt(&Row::Choice(row()), ChoiceFormat::LetterFirst);
        assert!(p.starts_with("A revolving door"));
        assert!(p.contains("\nA. bank\nB. library\n"));
        assert!(p.ends_with("- because <reason in one sentence>\"."));
        let p = prompt(&Row::Choice(row()), ChoiceFormat::AnswerLast);
        assert!(p.contains("\nA. bank\nB. library\n"));
        assert!(p.ends_with("\"Answer: <letter>\"."));
        for format in ChoiceFormat::ALL {
            assert_eq!(format.flag().parse::<ChoiceFormat>(), Ok(format));
        }
        assert!("letters".parse::<ChoiceFormat>().is_err());
    }

    #[test]
    fn chat_replies_are_right_when_they_contain_an_accepted_answer_as_words() {
        let row = Row::Chat(ChatRow {
            id: "capital".into(),
            question: "What is the capital of Australia?".into(),
            accept: vec!["Canberra".into()],
        });
        assert_eq!(
            prompt(&row, ChoiceFormat::default()),
            "What is the capital of Australia?"
        );
        assert!(is_correct(
            &row,
            "The capital of Australia is **Canberra**."
        ));
        assert!(!is_correct(&row, "The capital of Australia is Sydney."));
        assert!(!is_correct(&row, "Canberras"), "whole words only");
        assert_eq!(
            max_tokens(&row, ChoiceFormat::default()),
            tandem_core::config::Config::default().max_tokens,
            "measured at the app's reply length"
        );
    }

    #[test]
    fn an_answer_last_reply_is_read_at_its_answer_line() {
        // The reasoning names another choice first; the answer line decides.
        let r = row();
        let reply = "A library has no cash to guard, unlike a bank. Answer: A";
        assert_eq!(choice_answer(&r, reply), Some("A"));
    }

    #[test]
    fn answers_are_read_in_the_forms_models_write_them() {
        let r = row();
        for (reply, label) in [
            ("A", Some("A")),
            ("B. library", Some("B")),
            ("(C)", Some("C")),
            ("**D**", Some("D")),
            ("The answer is E.", Some("E")),
            ("A revolving door... the answer is B", Some("B")),
            ("Answer: C) department store", Some("C")),
            ("It would be the mall.", Some("D")),
            ("Banks and libraries", None),
            ("", None),
        ] {
            assert_eq!(choice_answer(&r, reply), label, "{reply:?}");
        }
        assert!(is_correct(&Row::Choice(r.clone()), "A. bank"));
        assert!(!is_correct(&Row::Choice(r), "B"));
    }

    #[test]
    fn only_tokens_that_change_the_answer_decide() {
        let choice = Row::Choice(row());
        assert!(decides(&choice, "", "A", "B"), "the letter");
        assert!(
            decides(&choice, "", "A", "The"),
            "a letter against none yet"
        );
        assert!(
            !decides(&choice, "", "A", " A"),
            "the same letter spelt otherwise"
        );
        assert!(!decides(&choice, "A. bank - because", " it", " banks"));
        let math = Row::Math(MathRow {
            id: "0".into(),
            question: "?".into(),
            answer: 18.0,
        });
        assert!(decides(&math, "9 * 2 = ", "18", "16"));
        assert!(!decides(&math, "9 * 2 = 18", " so", " and"));
    }

    #[test]
    fn math_answers_take_the_marked_or_last_number() {
        assert_eq!(
            math_answer("16 - 3 - 4 = 9, 9 * 2 = 18.\nAnswer: 18"),
            Some(18.0)
        );
        assert_eq!(math_answer("so she makes $1,207 a day"), Some(1207.0));
        assert_eq!(math_answer("Answer: -3.5 degrees"), Some(-3.5));
        assert_eq!(math_answer("no idea"), None);
        let row = Row::Math(MathRow {
            id: "0".into(),
            question: "?".into(),
            answer: 18.0,
        });
        assert!(is_correct(&row, "Answer: 18"));
    }
}
