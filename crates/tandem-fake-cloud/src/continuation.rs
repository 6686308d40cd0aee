//! How the fake treats a chat request that asks it to continue the reply so far.
//!
//! Tandem's chat mode sends the reply so far as a final assistant message with
//! `continue_final_message` (a vLLM and SGLang extension), and checks first, with a probe,
//! that the endpoint really continues it: many chat endpoints (OpenAI's among them) ignore
//! the flag and write a fresh answer. The fake plays either kind of endpoint. A scripted
//! fake cannot continue arbitrary text, so an honouring fake continues the one kind of reply
//! whose continuation is certain, a comma-separated count ("1, 2, 3,"), which is what the
//! probe sends; every other reply is "continued" with the script.

/// How a chat endpoint treats a final assistant message sent with `continue_final_message`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ChatContinuation {
    /// Like vLLM and SGLang: the final assistant message is continued. A reply that is a
    /// comma-separated count ending in a comma goes on with the next numbers (`" 9"`, `","`,
    /// `" 10"`, …); any other reply is continued with the script.
    #[default]
    Honours,
    /// Like OpenAI's chat API: the flag is ignored and the answer is written as if the final
    /// assistant message were not there, that is from the script, whatever the reply so far.
    Ignores,
}

impl ChatContinuation {
    /// The tokens that continue `reply` (the final assistant message of a request that asks
    /// to continue it), or `None` when the script answers instead.
    pub(crate) fn continue_reply(self, reply: &str, max_tokens: usize) -> Option<Vec<String>> {
        match self {
            ChatContinuation::Honours => next_in_count(reply).map(|next| {
                (next..=u32::MAX)
                    .flat_map(|n| [format!(" {n}"), ",".to_owned()])
                    .take(max_tokens)
                    .collect()
            }),
            ChatContinuation::Ignores => None,
        }
    }
}

/// The number that comes next when `reply` is a count: consecutive whole numbers separated
/// by commas, ending with a comma (whitespace around the numbers aside).
fn next_in_count(reply: &str) -> Option<u32> {
    let counted = reply.trim_end().strip_suffix(',')?;
    let numbers: Vec<u32> = counted
        .split(',')
        .map(|n| n.trim().parse().ok())
        .collect::<Option<_>>()?;
    let consecutive = numbers
        .windows(2)
        .all(|pair| pair[0].checked_add(1) == Some(pair[1]));
    let next = numbers.last()?.checked_add(1)?;
    consecutive.then_some(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_is_continued_with_the_next_numbers() {
        let next = ChatContinuation::Honours.continue_reply("1, 2, 3, 4, 5, 6, 7, 8,", 3);
        assert_eq!(next.unwrap(), [" 9", ",", " 10"]);
        let next = ChatContinuation::Honours.continue_reply("41,42,\n", 1);
        assert_eq!(next.unwrap(), [" 43"]);
    }

    #[test]
    fn anything_but_a_count_ending_in_a_comma_gets_the_script() {
        for reply in [
            "The sky",
            "1, 2, 3",
            "1, 3, 4,",
            "1, two, 3,",
            ",",
            "",
            "-1, 0,",
            "4294967295,",
        ] {
            assert_eq!(
                ChatContinuation::Honours.continue_reply(reply, 3),
                None,
                "{reply:?}"
            );
        }
    }

    #[test]
    fn an_ignoring_endpoint_never_continues_a_count() {
        let reply = "1, 2, 3, 4, 5, 6, 7, 8,";
        assert_eq!(ChatContinuation::Ignores.continue_reply(reply, 3), None);
    }
}
