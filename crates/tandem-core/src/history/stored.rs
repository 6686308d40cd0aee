//! The file form of a conversation: each cloud request's text stored as what it added.
//!
//! Routed decoding re-sends the whole prompt on every request, so the texts a conversation's
//! requests carried are one growing text seen many times over: stored whole, a 4k-token chat
//! with ten requests a reply would take ~160 KB a reply. In the file each `cloud_request`
//! keeps only what it adds to the request before it in the conversation: the first
//! `sent_from` bytes of that request's text, then (where the window moved, so the system
//! prompt is followed by later turns) `sent_len` bytes of it from `sent_at`, then its own
//! `sent`. The app and an export still see every request's whole text; files written before
//! this read as they are (no `sent_from`: whole).
//!
//! A reply's tokens are stored as columns ([`columns`]) and the JSON is then gzipped: a
//! reply's provenance (every token's text, id, source and score) is several times the reply's
//! own text, and it compresses well.
//! A file that is not gzip is read as plain JSON, as files were written before.

use super::{columns, Conversation};
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use serde_json::{Map, Value};
use std::io::{Read, Write};

/// The largest conversation read back from a file, as JSON and as its requests' rebuilt texts
/// (what a damaged or hostile file may unpack to; a small file of requests that each repeat
/// the one before twice would double with every request): far beyond any chat, short of
/// what would exhaust memory once parsed.
const MAX_UNPACKED: usize = 256 << 20;

/// A request's text begins with this many bytes of the previous request's ...
const KEPT: &str = "sent_from";
/// ... then this many bytes of it ...
const RUN_LEN: &str = "sent_len";
/// ... from here.
const RUN_AT: &str = "sent_at";
/// The shortest second run worth naming (a turn of the moved window is far longer).
const MIN_RUN: usize = 64;

/// How a request's text is made from the previous one's: its first `kept` bytes, then
/// `run.1` bytes from `run.0`, then the rest of the text as it is.
#[derive(Debug, PartialEq)]
struct Reuse {
    kept: usize,
    run: Option<(usize, usize)>,
}

impl Reuse {
    /// How `whole` reuses `previous`.
    fn of(previous: &str, whole: &str) -> Reuse {
        let kept = shared_prefix(previous, whole);
        let rest = &whole[kept..];
        let anchor = &rest[..floor_char_boundary(rest, MIN_RUN)];
        let run = (anchor.len() == MIN_RUN)
            .then(|| previous[kept..].find(anchor))
            .flatten()
            .map(|at| kept + at)
            .map(|at| (at, shared_prefix(&previous[at..], rest)));
        Reuse { kept, run }
    }

    /// Bytes of the text it covers.
    fn len(&self) -> usize {
        self.kept + self.run.map_or(0, |(_, len)| len)
    }

    /// Records itself in a request event.
    fn write(&self, request: &mut Map<String, Value>) {
        if self.kept > 0 {
            request.insert(KEPT.into(), self.kept.into());
        }
        if let Some((at, len)) = self.run {
            request.insert(RUN_AT.into(), at.into());
            request.insert(RUN_LEN.into(), len.into());
        }
    }

    /// Reads itself back from a request event, checked against the previous text.
    fn read(request: &mut Map<String, Value>, previous: &str) -> Result<Reuse, String> {
        let mut number = |key: &str| -> Result<Option<usize>, String> {
            request
                .remove(key)
                .map(|v| {
                    v.as_u64()
                        .and_then(|n| usize::try_from(n).ok())
                        .ok_or_else(|| format!("a request's `{key}` ({v}) is not a length"))
                })
                .transpose()
        };
        let kept = number(KEPT)?.unwrap_or(0);
        let run = match (number(RUN_AT)?, number(RUN_LEN)?) {
            (Some(at), Some(len)) => Some((at, len)),
            (None, None) => None,
            _ => return Err(format!("a request has one of `{RUN_AT}` and `{RUN_LEN}`")),
        };
        let within = |from: usize, len: usize| {
            from.checked_add(len).is_some_and(|end| {
                previous.is_char_boundary(from) && previous.is_char_boundary(end)
            })
        };
        if !within(0, kept) || run.is_some_and(|(at, len)| !within(at, len)) {
            return Err(format!(
                "a request's `{KEPT}` or `{RUN_AT}` is not within the one before"
            ));
        }
        Ok(Reuse { kept, run })
    }

    /// The text it makes from `previous` and the stored rest.
    fn text(&self, previous: &str, rest: &str) -> String {
        let run = self.run.map_or("", |(at, len)| &previous[at..at + len]);
        [&previous[..self.kept], run, rest].concat()
    }
}

/// The conversation as its file holds it.
pub(super) fn to_file(conversation: &Conversation) -> Vec<u8> {
    let mut value = serde_json::to_value(conversation).expect("conversations serialize");
    let mut previous = String::new();
    for_each_request(&mut value, |request| {
        let Some(Value::String(sent)) = request.get_mut("sent") else {
            return Ok(());
        };
        let whole = std::mem::take(sent);
        let reuse = Reuse::of(&previous, &whole);
        *sent = whole[reuse.len()..].to_owned();
        reuse.write(request);
        previous = whole;
        Ok(())
    })
    .expect("writing never fails");
    columns::pack(&mut value);
    let json = serde_json::to_vec(&value).expect("conversations serialize");
    let mut packed = GzEncoder::new(Vec::with_capacity(json.len() / 4), Default::default());
    packed.write_all(&json).expect("writing to memory");
    packed.finish().expect("writing to memory")
}

/// The conversation a file holds, every request's text whole again.
pub(super) fn from_file(bytes: &[u8]) -> Result<Conversation, String> {
    let unpacked;
    let json = if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        GzDecoder::new(bytes)
            .take(MAX_UNPACKED as u64)
            .read_to_end(&mut out)
            .map_err(|e| format!("not a whole compressed conversation: {e}"))?;
        unpacked = out;
        &unpacked[..]
    } else {
        bytes
    };
    let mut value: Value = serde_json::from_slice(json).map_err(|e| e.to_string())?;
    columns::unpack(&mut value)?;
    let mut previous = String::new();
    let mut rebuilt = 0usize;
    for_each_request(&mut value, |request| {
        let reuse = Reuse::read(request, &previous)?;
        let Some(Value::String(sent)) = request.get_mut("sent") else {
            return Ok(());
        };
        rebuilt = rebuilt.saturating_add(reuse.len() + sent.len());
        if rebuilt > MAX_UNPACKED {
            return Err(format!(
                "its requests' texts come to more than {} MiB",
                MAX_UNPACKED >> 20
            ));
        }
        let whole = reuse.text(&previous, sent);
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
    let n = a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count();
    floor_char_boundary(b, n)
}

/// The largest character boundary of `text` at or before `n`.
fn floor_char_boundary(text: &str, n: usize) -> usize {
    let mut n = n.min(text.len());
    while !text.is_char_boundary(n) {
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
            unused: false,
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

    /// The JSON inside a file.
    fn unpacked(file: &[u8]) -> String {
        let mut text = String::new();
        GzDecoder::new(file).read_to_string(&mut text).unwrap();
        text
    }

    #[test]
    fn requests_are_stored_as_what_they_add_and_read_back_whole() {
        let c = chat();
        let file = to_file(&c);
        let text = unpacked(&file);
        assert_eq!(
            text.matches("Why is the sky blue?<|assistant|>").count(),
            1,
            "{text}"
        );
        assert!(text.contains(r#""sent":"Light é""#), "{text}");
        assert_eq!(from_file(&file).unwrap(), c);
    }

    #[test]
    fn a_moved_window_reuses_the_turns_it_kept() {
        let system = "<|im_start|>system\nBe brief.<|im_end|>\n";
        let turn = |n: usize| {
            format!(
                "<|im_start|>user\n{}<|im_end|>\n",
                format!("turn {n} ").repeat(20)
            )
        };
        let before = format!("{system}{}{}{}", turn(1), turn(2), turn(3));
        // The oldest turn left the window: the system prompt, then turns 2 and 3 as before.
        let after = format!("{system}{}{}<|im_start|>assistant\n", turn(2), turn(3));
        let reuse = Reuse::of(&before, &after);
        assert!(reuse.kept >= system.len());
        assert!(reuse.run.is_some());
        let added = "<|im_start|>assistant\n";
        assert_eq!(
            reuse.len(),
            after.len() - added.len(),
            "all but the new words reused"
        );
        assert_eq!(reuse.text(&before, added), after);
    }

    #[test]
    fn a_file_written_before_keeps_reading() {
        let c = chat();
        let whole = serde_json::to_vec(&c).unwrap();
        assert_eq!(from_file(&whole).unwrap(), c);
    }

    #[test]
    fn a_start_outside_the_request_before_is_a_clear_error() {
        let text = unpacked(&to_file(&chat()));
        let broken = text.replacen(r#""sent_from":"#, r#""sent_from":99999"#, 1);
        let err = from_file(broken.as_bytes()).unwrap_err();
        assert!(err.contains("sent_from"), "{err}");
    }

    /// A file of a few KB whose requests each repeat the one before twice would rebuild to
    /// 2^40 KB: it is refused as damaged once it passes the limit, not read until memory runs out.
    #[test]
    fn requests_that_double_the_one_before_stop_at_the_limit() {
        let mut c = Conversation::new("c-1".into(), 0);
        c.push_user("hi");
        c.push_reply(ReplyMode::Routed, vec![request(&"x".repeat(1024))]);
        let mut value: Value = serde_json::from_str(&unpacked(&to_file(&c))).unwrap();
        let events = value["messages"][1]["events"].as_array_mut().unwrap();
        let first = events
            .iter()
            .position(|e| e["type"] == "cloud_request")
            .unwrap();
        let mut len = 1024u64;
        for i in 0..40 {
            let mut doubled = events[first].clone();
            doubled["sent"] = "".into();
            doubled[KEPT] = len.into();
            doubled[RUN_AT] = 0.into();
            doubled[RUN_LEN] = len.into();
            events.insert(first + 1 + i, doubled);
            len *= 2;
        }
        let file = serde_json::to_vec(&value).unwrap();
        assert!(file.len() < 16_000, "{} bytes", file.len());
        let err = from_file(&file).unwrap_err();
        assert!(err.contains("MiB"), "{err}");
    }

    #[test]
    fn a_shared_start_never_splits_a_character() {
        assert_eq!(shared_prefix("café", "cafè"), 3);
        assert_eq!(shared_prefix("", "x"), 0);
        assert_eq!(shared_prefix("abc", "abcd"), 3);
    }
}
