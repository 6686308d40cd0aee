//! What the fake cloud answers with.
//!
//! The answer is a fixed list of tokens replayed cyclically from the start for every request,
//! so the same request always gets the same answer and a test can predict every token the
//! engine will receive from the cloud. The one exception is a chat request to continue a
//! count, which an endpoint that honours continuation answers with the next numbers (see
//! [`ChatContinuation`]).

use crate::continuation::ChatContinuation;

/// What the fake answers with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    /// Tokens replayed cyclically, restarting at the first one for every request.
    pub tokens: Vec<ScriptToken>,
    /// Model name reported by `/v1/models` and in every completion.
    pub model: String,
    /// When set, requests must carry `Authorization: Bearer <api_key>` or they get a 401.
    pub api_key: Option<String>,
    /// Whether chat requests that ask to continue the reply so far are continued.
    pub chat: ChatContinuation,
    /// Whether `usage` reports prompt tokens read from a prompt cache, as hosted APIs do
    /// (`prompt_tokens_details.cached_tokens`): those the previous request's prompt also had.
    pub caches_prompts: bool,
}

/// One scripted token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptToken {
    /// The token's text.
    pub text: String,
    /// The token id, reported in logprobs entries as `"id"` when present.
    pub id: Option<i32>,
}

impl Script {
    /// Every completion returns `max_tokens` tokens (default 16 if absent) taken cyclically from
    /// `pieces`, without ids. The model is named `fake-cloud`, no API key is required and chat
    /// requests are continued ([`ChatContinuation::Honours`]).
    pub fn cycle(pieces: &[&str]) -> Script {
        Script {
            tokens: pieces
                .iter()
                .map(|piece| ScriptToken {
                    text: (*piece).to_owned(),
                    id: None,
                })
                .collect(),
            model: "fake-cloud".to_owned(),
            api_key: None,
            chat: ChatContinuation::Honours,
            caches_prompts: false,
        }
    }

    /// Attaches ids to the tokens, in order, so that logprobs entries carry `"id"`.
    ///
    /// # Panics
    ///
    /// When `ids` and the tokens differ in length: a script half with ids is a test bug.
    pub fn with_ids(mut self, ids: &[i32]) -> Script {
        assert_eq!(
            ids.len(),
            self.tokens.len(),
            "Script::with_ids needs one id per token"
        );
        for (token, id) in self.tokens.iter_mut().zip(ids) {
            token.id = Some(*id);
        }
        self
    }

    /// Requests without `Authorization: Bearer <key>` get a 401 `invalid_api_key` error.
    pub fn requiring_key(mut self, key: &str) -> Script {
        self.api_key = Some(key.to_owned());
        self
    }

    /// Chat requests are answered afresh from the script, as if the final assistant message
    /// they ask to continue were not there (as OpenAI's chat API does).
    pub fn ignoring_continuation(mut self) -> Script {
        self.chat = ChatContinuation::Ignores;
        self
    }

    /// `usage` reports the prompt tokens a provider's prompt cache would have held: as many
    /// as the previous request's prompt had (a routed reply's prompts grow by what was
    /// written since).
    pub fn caching_prompts(mut self) -> Script {
        self.caches_prompts = true;
        self
    }

    /// The answer to a request for `max_tokens` tokens.
    pub(crate) fn answer(&self, max_tokens: usize) -> Vec<&ScriptToken> {
        self.tokens.iter().cycle().take(max_tokens).collect()
    }

    /// The answer to a request for `max_tokens` tokens that asks to continue `reply` (the
    /// final assistant message of a chat request with `continue_final_message`), if any.
    pub(crate) fn answer_after(&self, reply: Option<&str>, max_tokens: usize) -> Vec<ScriptToken> {
        let continued = reply.and_then(|reply| self.chat.continue_reply(reply, max_tokens));
        match continued {
            Some(pieces) => pieces
                .into_iter()
                .map(|text| ScriptToken { text, id: None })
                .collect(),
            None => self.answer(max_tokens).into_iter().cloned().collect(),
        }
    }

    /// Whether a request with this `Authorization` header value may be answered.
    pub(crate) fn authorizes(&self, authorization: Option<&str>) -> bool {
        match &self.api_key {
            None => true,
            Some(key) => {
                authorization.and_then(|value| value.strip_prefix("Bearer ")) == Some(key.as_str())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(tokens: &[&ScriptToken]) -> Vec<String> {
        tokens.iter().map(|token| token.text.clone()).collect()
    }

    #[test]
    fn answer_cycles_from_the_first_piece() {
        let script = Script::cycle(&["a", "b", "c"]);
        assert_eq!(texts(&script.answer(5)), ["a", "b", "c", "a", "b"]);
        assert_eq!(texts(&script.answer(2)), ["a", "b"]);
        assert!(script.answer(0).is_empty());
    }

    #[test]
    fn empty_script_answers_nothing() {
        assert!(Script::cycle(&[]).answer(4).is_empty());
    }

    #[test]
    fn ids_attach_in_order() {
        let script = Script::cycle(&["a", "b"]).with_ids(&[7, 9]);
        let ids: Vec<_> = script.answer(3).iter().map(|token| token.id).collect();
        assert_eq!(ids, [Some(7), Some(9), Some(7)]);
    }

    #[test]
    #[should_panic(expected = "one id per token")]
    fn ids_of_the_wrong_length_panic() {
        let _ = Script::cycle(&["a", "b"]).with_ids(&[1]);
    }

    #[test]
    fn a_count_to_continue_is_continued_only_where_continuation_is_honoured() {
        let count = Some("1, 2, 3,");
        let honouring = Script::cycle(&["a"]);
        let owned =
            |tokens: Vec<ScriptToken>| tokens.into_iter().map(|t| t.text).collect::<Vec<_>>();
        assert_eq!(owned(honouring.answer_after(count, 2)), [" 4", ","]);
        assert_eq!(
            owned(honouring.answer_after(Some("The sky"), 2)),
            ["a", "a"]
        );
        assert_eq!(owned(honouring.answer_after(None, 1)), ["a"]);
        let ignoring = honouring.ignoring_continuation();
        assert_eq!(owned(ignoring.answer_after(count, 2)), ["a", "a"]);
    }

    #[test]
    fn key_must_match_a_bearer_header() {
        let open = Script::cycle(&["a"]);
        assert!(open.authorizes(None));
        let locked = open.requiring_key("sk-test");
        assert!(locked.authorizes(Some("Bearer sk-test")));
        assert!(!locked.authorizes(Some("Bearer sk-other")));
        assert!(!locked.authorizes(Some("sk-test")));
        assert!(!locked.authorizes(None));
    }
}
