//! Whether a chat endpoint continues a partial reply, or writes a fresh answer over it.
//!
//! Chat mode asks `/v1/chat/completions` for the rest of the reply so far by sending it as a
//! final assistant message with `continue_final_message` (a vLLM and SGLang extension). An
//! endpoint that ignores the flag (OpenAI's chat API, many OpenRouter providers) answers the
//! conversation afresh, and its first tokens would land in the middle of the user's reply
//! with nothing to show that they do not belong there. So, once per client, the endpoint is
//! asked to continue a reply whose next words are certain, and replies are spliced only if
//! it does.

use tandem_wire::{ChatMessage, ChatRequest, Generation};

/// The user's side of the probe.
const QUESTION: &str = "Count from 1 to 20, separated by commas.";
/// The partial reply the endpoint is asked to continue: only "9" can come next.
pub(crate) const PARTIAL_REPLY: &str = "1, 2, 3, 4, 5, 6, 7, 8,";
/// Room for the next number whatever the tokenizer (a space may come first as a token of its
/// own), and no more: the probe should cost next to nothing.
pub(crate) const PROBE_TOKENS: u32 = 3;
/// The longest answer kept for messages: three tokens are short, a server that ignores
/// `max_tokens` need not be.
const MAX_ANSWER_CHARS: usize = 40;

/// What a chat endpoint did with a partial reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Continuation {
    /// It went on from where the reply stopped.
    Continues,
    /// It went on from where the reply stopped, but answered with the reply so far before
    /// the new tokens (llama-server's chat endpoint, b11434): every answer has the repeat cut
    /// off before use.
    Repeats,
    /// It wrote something else: a fresh answer, a preamble, the reply again, or nothing.
    Restarts {
        /// What it answered (cut short), for the user.
        answered: String,
    },
}

impl Continuation {
    /// Judges the answer to the probe. The endpoint continues when the answer, leading
    /// whitespace aside, is the number 9 (followed by anything but another digit, so "90"
    /// does not count). A fresh answer starts with "1" or with words ("Sure", "Here is"), and
    /// echoing "8," is no continuation either. An answer that is the whole reply so far and
    /// then the 9 (llama-server's, b11434) repeats: usable once the repeat is cut off.
    /// Anything unexpected, an empty answer included, counts as restarting: a wrong
    /// "restarts" only keeps chat-mode replies local, with a message that says why, while a
    /// wrong "continues" would corrupt replies silently.
    pub(crate) fn judge(answer: &str) -> Continuation {
        let next_is_nine = |text: &str| {
            let mut rest = text.trim_start().chars();
            rest.next() == Some('9') && !rest.next().is_some_and(|c| c.is_ascii_digit())
        };
        if next_is_nine(answer) {
            Continuation::Continues
        } else if answer.strip_prefix(PARTIAL_REPLY).is_some_and(next_is_nine) {
            Continuation::Repeats
        } else {
            Continuation::Restarts {
                answered: answer.chars().take(MAX_ANSWER_CHARS).collect(),
            }
        }
    }
}

/// The probe for `model`: the question, the partial reply to continue, greedy, a few tokens.
pub(crate) fn probe_request(model: Option<String>) -> ChatRequest {
    ChatRequest {
        messages: vec![
            ChatMessage::text("user", QUESTION),
            ChatMessage::text("assistant", PARTIAL_REPLY),
        ],
        continue_final_message: Some(true),
        add_generation_prompt: Some(false),
        generation: Generation {
            model,
            max_tokens: Some(PROBE_TOKENS),
            temperature: Some(0.0),
            ..Generation::default()
        },
        ..ChatRequest::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_number_is_a_continuation_with_or_without_a_space() {
        for answer in ["9", " 9", " 9,", "9, 10", "\n9.", " 9 "] {
            assert_eq!(
                Continuation::judge(answer),
                Continuation::Continues,
                "{answer:?}"
            );
        }
    }

    #[test]
    fn a_fresh_answer_a_preamble_an_echo_or_nothing_is_not() {
        for answer in [
            "1, 2, 3",
            "Sure! 1,",
            "Here",
            " 8, 9",
            "90",
            " 91,",
            "",
            "  ",
            "nine",
            "1, 2, 3, 4, 5, 6, 7, 8, 10",
        ] {
            assert_eq!(
                Continuation::judge(answer),
                Continuation::Restarts {
                    answered: answer.to_owned()
                },
                "{answer:?}"
            );
        }
    }

    #[test]
    fn the_reply_so_far_then_the_next_number_repeats() {
        assert_eq!(
            Continuation::judge("1, 2, 3, 4, 5, 6, 7, 8, 9,"),
            Continuation::Repeats
        );
        assert_ne!(
            Continuation::judge(" 1, 2, 3, 4, 5, 6, 7, 8, 9,"),
            Continuation::Repeats,
            "a repeat is exact"
        );
    }

    #[test]
    fn a_long_answer_is_kept_short() {
        let Continuation::Restarts { answered } = Continuation::judge(&"x".repeat(500)) else {
            panic!("a run of x is no continuation");
        };
        assert_eq!(answered.chars().count(), MAX_ANSWER_CHARS);
    }
}
