//! The file form of a conversation: each cloud request's text stored as what it added.
//!
//! Routed decoding re-sends the whole prompt on every request, so the texts a conversation's
//! requests carried are one growing text seen many times over: stored whole, a 4k-token chat
//! with ten requests a reply would take ~160 KB a reply. In the file each `cloud_request`
//! keeps only what it adds to the request before it in the conversation: `sent_from` bytes of
//! that request's text, then its own `sent`. A new window (the oldest turns leaving the
//! model's view) starts over with a whole text once. The app and an export still see every
//! request's whole text; files written before this read as they are (no `sent_from`: whole).

use super::Conversation;
use serde_json::{Map, Value};

/// Where a request's text starts: this many bytes of the previous request's.
const KEPT: &str = "sent_from";

/// The conversation as its file holds it.
pub(super) fn to_file(conversation: &Conversation) -> Vec<u8> {
    let mut value = serde_json::to_value(conversation).expect("conversations serialize");
    let mut previous = String::new();
    for_each_request(&mut value, |request| {
        let Some(Value::String(sent)) = request.get_mut("sent") else {
            return Ok(());
        };
        let whole = std::mem::take(sent);
        let kept = shared_prefix(&previous, &whole);
        *sent = whole[kept..].to_owned();
        if kept > 0 {
            request.insert(KEPT.into(), kept.into());
        }
        previous = whole;
        Ok(())
    })
    .expect("writing never fails");
    serde_json::to_vec(&value).expect("conversations serialize")
}

/// The conversation a file holds, every request's text whole again.
pub(super) fn from_file(bytes: &[u8]) -> Result<Conversation, String> {
    let mut value: Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    let mut previous = String::new();
    for_each_request(&mut value, |request| {
        let kept = match request.remove(KEPT) {
            None => 0,
            Some(kept) => kept
                .as_u64()
                .and_then(|k| usize::try_from(k).ok())
                .filter(|&k| previous.is_char_boundary(k))
                .ok_or_else(|| {
                    format!("a request's `{KEPT}` ({kept}) is not within the one before")
                })?,
        };
        let Some(Value::String(sent)) = request.get_mut("sent") else {
            return Ok(());
        };
        let whole = format!("{}{sent}", &previous[..kept]);
        sent.clone_from(&whole);
        previous = whole;
        Ok(())
    })?;
    serde_json::from_value(value).map_err(|e| e.to_string())
}

/// Calls `each` on every `cloud_request` event of the conversation, in order.
fn for_each_request(
    conversation: &mut Value,
    mut each: impl FnMut(&mut Map<String, Value>) -> Result<(), String>,
) -> Result<(), String> {
    let Some(messages) = conversation
        .get_mut("messages")
        .and_then(Value::as_array_mut)
    else {
        return Ok(());
    };
    let events = messages
        .iter_mut()
        .filter_map(|m| m.get_mut("events").and_then(Value::as_array_mut))
        .flatten();
    for event in events.filter_map(Value::as_object_mut) {
        if event.get("type").and_then(Value::as_str) == Some("cloud_request") {
            each(event)?;
        }
    }
    Ok(())
}

/// The bytes `a` and `b` begin with alike, ending on a character boundary.
fn shared_prefix(a: &str, b: &str) -> usize {
    let mut n = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    while !b.is_char_boundary(n) {
        n -= 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Event;
    use crate::history::ReplyMode;

    fn request(sent: &str) -> Event {
        Event::CloudRequest {
            sent: sent.into(),
            ok: true,
            ms: 40,
            prompt_tokens: 10,
            completion_tokens: 4,
            cost_usd: 0.0,
        }
    }

    /// Two replies whose requests re-send the conversation so far, as routed decoding does.
    fn chat() -> Conversation {
        let mut c = Conversation::new("c-1".into(), 0);
        let prompt = "<|user|>Why is the sky blue?<|assistant|>";
        c.push_user("Why is the sky blue?");
        c.push_reply(
            ReplyMode::Routed,
            vec![request(prompt), request(&format!("{prompt}Light é"))],
        );
        c.push_user("And at sunset?");
        let second = format!("{prompt}Light é scatters.<|user|>And at sunset?<|assistant|>");
        c.push_reply(
            ReplyMode::Routed,
            vec![request(&second), request("a new window")],
        );
        c
    }

    #[test]
    fn requests_are_stored_as_what_they_add_and_read_back_whole() {
        let c = chat();
        let file = to_file(&c);
        let text = String::from_utf8(file.clone()).unwrap();
        assert_eq!(
            text.matches("Why is the sky blue?<|assistant|>").count(),
            1,
            "{text}"
        );
        assert!(text.contains(r#""sent":"Light é""#), "{text}");
        assert_eq!(from_file(&file).unwrap(), c);
    }

    #[test]
    fn a_file_written_before_keeps_reading() {
        let c = chat();
        let whole = serde_json::to_vec(&c).unwrap();
        assert_eq!(from_file(&whole).unwrap(), c);
    }

    #[test]
    fn a_start_outside_the_request_before_is_a_clear_error() {
        let text = String::from_utf8(to_file(&chat())).unwrap();
        let broken = text.replacen(r#""sent_from":"#, r#""sent_from":9999"#, 1);
        let err = from_file(broken.as_bytes()).unwrap_err();
        assert!(err.contains("sent_from"), "{err}");
    }

    #[test]
    fn a_shared_start_never_splits_a_character() {
        assert_eq!(shared_prefix("café", "cafè"), 3);
        assert_eq!(shared_prefix("", "x"), 0);
        assert_eq!(shared_prefix("abc", "abcd"), 3);
    }
}
