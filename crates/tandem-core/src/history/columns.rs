//! A reply's tokens in the file as columns: one `tokens` record for a run of token events,
//! with their texts, ids, sources (`e`/`c`, one letter each) and scores (each the shortest
//! decimal that reads back as the same `f32`), and whatever else a token carries (the edge
//! token a cloud token replaced, its request's latency) by position. An event per token
//! repeats its field names for every word; as columns a reply's provenance costs about what
//! its numbers do. A token of another shape stays an event of its own, so nothing is lost.

use serde_json::{Map, Value};

/// Packs every run of token events in the conversation.
pub(super) fn pack(conversation: &mut Value) {
    for events in event_lists(conversation) {
        let mut packed = Vec::with_capacity(events.len());
        let mut run: Vec<Map<String, Value>> = Vec::new();
        for event in events.drain(..) {
            match event {
                Value::Object(token) if packable(&token) => run.push(token),
                other => {
                    flush(&mut run, &mut packed);
                    packed.push(other);
                }
            }
        }
        flush(&mut run, &mut packed);
        *events = packed;
    }
}

/// Unpacks every `tokens` record back into its token events.
pub(super) fn unpack(conversation: &mut Value) -> Result<(), String> {
    for events in event_lists(conversation) {
        let mut unpacked = Vec::with_capacity(events.len());
        for event in events.drain(..) {
            match event {
                Value::Object(record) if is(&record, "tokens") => unpacked.extend(tokens(record)?),
                other => unpacked.push(other),
            }
        }
        *events = unpacked;
    }
    Ok(())
}

/// The events of every message.
fn event_lists(conversation: &mut Value) -> impl Iterator<Item = &mut Vec<Value>> {
    conversation
        .get_mut("messages")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(|m| m.get_mut("events").and_then(Value::as_array_mut))
}

fn is(event: &Map<String, Value>, kind: &str) -> bool {
    event.get("type").and_then(Value::as_str) == Some(kind)
}

/// A token event whose columns have the shapes the record holds.
fn packable(event: &Map<String, Value>) -> bool {
    is(event, "token")
        && event.get("text").is_some_and(Value::is_string)
        && event.get("id").is_some_and(Value::is_i64)
        && matches!(
            event.get("source").and_then(Value::as_str),
            Some("edge" | "cloud")
        )
        && event
            .get("score")
            .and_then(Value::as_f64)
            .is_some_and(f64::is_finite)
}

/// Ends a run: its tokens become one record.
fn flush(run: &mut Vec<Map<String, Value>>, into: &mut Vec<Value>) {
    if run.is_empty() {
        return;
    }
    let (mut text, mut id, mut source, mut score) =
        (Vec::new(), Vec::new(), String::new(), Vec::new());
    let mut more = Map::new();
    for (i, mut token) in run.drain(..).enumerate() {
        token.remove("type");
        text.push(token.remove("text").expect("packable"));
        id.push(token.remove("id").expect("packable"));
        let from_cloud = token.remove("source").expect("packable") == "cloud";
        source.push(if from_cloud { 'c' } else { 'e' });
        let value = token
            .remove("score")
            .and_then(|s| s.as_f64())
            .expect("packable");
        score.push((value as f32).to_string());
        if !token.is_empty() {
            more.insert(i.to_string(), Value::Object(token));
        }
    }
    let mut record = Map::new();
    record.insert("type".into(), "tokens".into());
    record.insert("text".into(), text.into());
    record.insert("id".into(), id.into());
    record.insert("source".into(), source.into());
    record.insert("score".into(), score.join(" ").into());
    if !more.is_empty() {
        record.insert("more".into(), Value::Object(more));
    }
    into.push(Value::Object(record));
}

/// The token events of one record.
fn tokens(mut record: Map<String, Value>) -> Result<Vec<Value>, String> {
    let bad = |what: &str| format!("a tokens record's {what} does not fit its texts");
    let column = |record: &mut Map<String, Value>, name: &str| match record.remove(name) {
        Some(Value::Array(values)) => Ok(values),
        _ => Err(bad(name)),
    };
    let text = column(&mut record, "text")?;
    let id = column(&mut record, "id")?;
    let source: Vec<char> = record
        .get("source")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("source"))?
        .chars()
        .collect();
    let score = record
        .get("score")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("score"))?;
    let score: Vec<f32> = score
        .split(' ')
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().map_err(|_| bad("score")))
        .collect::<Result<_, _>>()?;
    let n = text.len();
    if id.len() != n || source.len() != n || score.len() != n {
        return Err(bad("columns"));
    }
    let mut more = match record.remove("more") {
        None => Map::new(),
        Some(Value::Object(more)) => more,
        Some(_) => return Err(bad("more")),
    };
    let mut events = Vec::with_capacity(n);
    for (i, ((text, id), (source, score))) in text
        .into_iter()
        .zip(id)
        .zip(source.into_iter().zip(score))
        .enumerate()
    {
        let source = match source {
            'c' => "cloud",
            'e' => "edge",
            _ => return Err(bad("source")),
        };
        let mut token = match more.remove(&i.to_string()) {
            None => Map::new(),
            Some(Value::Object(extra)) => extra,
            Some(_) => return Err(bad("more")),
        };
        token.insert("type".into(), "token".into());
        token.insert("text".into(), text);
        token.insert("id".into(), id);
        token.insert("source".into(), source.into());
        token.insert("score".into(), score.into());
        events.push(Value::Object(token));
    }
    if !more.is_empty() {
        return Err(bad("more"));
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Event, TokenSource};
    use crate::history::{Conversation, ReplyMode};

    fn token(text: &str, source: TokenSource, score: f32) -> Event {
        let cloud = source == TokenSource::Cloud;
        Event::Token {
            text: text.into(),
            id: 4021,
            source,
            score,
            edge_candidate: cloud.then(|| " the".into()),
            request_ms: cloud.then_some(181),
        }
    }

    #[test]
    fn tokens_are_packed_as_columns_and_read_back_exactly() {
        let mut c = Conversation::new("c".into(), 0);
        c.push_user("Why?");
        let events = vec![
            token(" Light", TokenSource::Cloud, 0.837_412_36),
            token(" scatters", TokenSource::Edge, 0.1),
            Event::Notice {
                kind: crate::event::NoticeKind::CloudError,
                message: "slow".into(),
            },
            token(".", TokenSource::Edge, 1e-7),
        ];
        c.push_reply(ReplyMode::Routed, events.clone());
        let mut value = serde_json::to_value(&c).unwrap();
        pack(&mut value);
        let packed = value.to_string();
        assert_eq!(packed.matches(r#""type":"tokens""#).count(), 2, "{packed}");
        assert!(packed.contains(r#""source":"ce""#), "{packed}");
        assert!(packed.contains(r#""score":"0.83741236 0.1""#), "{packed}");
        unpack(&mut value).unwrap();
        let back: Conversation = serde_json::from_value(value).unwrap();
        assert_eq!(back.messages[1].events, events);
    }

    #[test]
    fn a_record_whose_columns_disagree_is_a_clear_error() {
        let mut value = serde_json::json!({"messages": [{"events": [
            {"type": "tokens", "text": ["a", "b"], "id": [1], "source": "ee", "score": "0.1 0.2"}
        ]}]});
        let err = unpack(&mut value).unwrap_err();
        assert!(err.contains("tokens record"), "{err}");
    }
}
