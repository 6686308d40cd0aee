//! The fixed prompt format of each kind of question and how an answer is read back from a
//! reply. Fixed, so every router and budget is measured on exactly the same prompts; tuned
//! (if ever) on `csqa:dev` rows 0–599 only.

use crate::data::{ChoiceRow, Row};

/// Names the prompt format; features collected with another format are not mixed in.
pub const PROMPT_FORMAT: &str = "letter-and-text/2";

/// Reply length for multiple choice: the letter and the start of its choice.
pub const CHOICE_MAX_TOKENS: u32 = 8;
/// Reply length for math: room for a short worked solution.
pub const MATH_MAX_TOKENS: u32 = 256;

/// The user message for a row.
pub fn prompt(row: &Row) -> String {
    match row {
        Row::Choice(r) => choice_prompt(r),
        Row::Math(r) => format!(
            "{}\n\nSolve it step by step, then give the final answer as \"Answer: <number>\".",
            r.question
        ),
    }
}

fn choice_prompt(row: &ChoiceRow) -> String {
    let mut text = format!("{}\n\n", row.question.trim());
    for (label, choice) in row.choices.label.iter().zip(&row.choices.text) {
        text.push_str(&format!("{label}. {choice}\n"));
    }
    text.push_str("\nAnswer with the letter and the text of the correct choice.");
    text
}

/// Tokens a reply to `row` may take.
pub fn max_tokens(row: &Row) -> u32 {
    match row {
        Row::Choice(_) => CHOICE_MAX_TOKENS,
        Row::Math(_) => MATH_MAX_TOKENS,
    }
}

/// Whether `reply` answers `row` correctly.
pub fn is_correct(row: &Row, reply: &str) -> bool {
    match row {
        Row::Choice(r) => choice_answer(r, reply).is_some_and(|label| label == r.answer_key),
        Row::Math(r) => math_answer(reply).is_some_and(|n| (n - r.answer).abs() < 1e-6),
    }
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
    fn the_prompt_lists_every_choice_with_its_letter() {
        let p = prompt(&Row::Choice(row()));
        assert!(p.starts_with("A revolving door"));
        assert!(p.contains("\nA. bank\nB. library\n"));
        assert!(p.ends_with("Answer with the letter and the text of the correct choice."));
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
