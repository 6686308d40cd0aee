//! History at scale: a long-time user's folder of conversations, written and read through
//! the app's own store ([`ConversationStore`]).
//!
//! Each reply is made as the app saves one: a user turn, then a reply's events (its tokens,
//! a share of them from the cloud, and its cloud requests, each carrying the prompt so far:
//! the chat's last turns in a 4k-token window, rendered as the chat template does, and the
//! reply up to that point). Measured: the file bytes per reply against the text the user and
//! the model wrote, beside the bytes the same conversation took when a file held every
//! request's text whole (as files were written before); the sidebar's list from the index
//! (as the app lists) and from every file (the index lost, or before it existed); and opening
//! the newest conversation, as the app does when it starts.

use anyhow::Result;
use std::time::{Duration, Instant};
use tandem_core::event::{Event, FinishReason, Timings, TokenSource, Usage};
use tandem_core::history::{Conversation, ConversationStore, HistoryError, ReplyMode};
use tandem_core::sampling::SplitMix64;

/// What one run builds.
pub struct Setup {
    /// Conversations in the folder.
    pub conversations: usize,
    /// Replies in each.
    pub replies: usize,
}

/// Tokens in a reply, cloud requests in it, and the window's size in characters (about 4k
/// tokens of English).
const REPLY_TOKENS: usize = 150;
const REQUESTS_PER_REPLY: usize = 4;
const WINDOW_CHARS: usize = 16_000;
/// Conversations the old form (every request whole) is measured on.
const OLD_FORM_SAMPLE: usize = 5;

/// Builds the folder, measures it, and returns the Markdown table.
pub fn run(setup: &Setup) -> Result<String> {
    let dir = std::env::temp_dir().join(format!("tandem-bench-history-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = ConversationStore::new(&dir);
    let (mut text_bytes, mut old_bytes, mut old_replies) = (0usize, 0usize, 0usize);
    let mut newest = String::new();
    let mut old_file = Vec::new();
    for n in 0..setup.conversations {
        let mut conversation = store.create()?;
        for r in 0..setup.replies {
            let (user, events) = exchange(&conversation, n, r);
            conversation.push_user(&user);
            conversation.push_reply(ReplyMode::Routed, events);
        }
        store.save(&mut conversation)?;
        text_bytes += conversation
            .messages
            .iter()
            .map(|m| m.content.len())
            .sum::<usize>();
        if n < OLD_FORM_SAMPLE {
            old_file = serde_json::to_vec(&conversation)?;
            old_bytes += old_file.len();
            old_replies += setup.replies;
        }
        newest = conversation.id;
    }
    let replies = setup.conversations * setup.replies;
    let file_bytes: u64 = std::fs::read_dir(store.dir())?
        .filter_map(|e| e.ok()?.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum();
    let index = store.dir().join(".index.json");
    // The first list builds the index; the app's lists after it read the index.
    store.list("")?;
    let indexed = median(5, || store.list("").map(|_| ()))?;
    let every_file = median(3, || {
        let _ = std::fs::remove_file(&index);
        store.list("").map(|_| ())
    })?;
    let open = median(5, || store.get(&newest).map(|_| ()))?;
    let open_old = median(5, || {
        serde_json::from_slice::<Conversation>(&old_file)
            .map(|_| ())
            .map_err(|e| HistoryError::Corrupt {
                path: "old form".into(),
                detail: e.to_string(),
            })
    })?;
    let _ = std::fs::remove_dir_all(&dir);

    let per_reply = file_bytes as f64 / replies as f64;
    let text_per_reply = text_bytes as f64 / replies as f64;
    let old_per_reply = old_bytes as f64 / old_replies.max(1) as f64;
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    Ok(format!(
        "| History: {c} conversations × {r} replies ({REPLY_TOKENS} tokens, {REQUESTS_PER_REPLY} cloud requests each, 4k-token window) | measured | before | goal |\n\
         |---|---|---|---|\n\
         | Sidebar list (ms): from the index (before: parsing every file) | {:.1} | {:.1} | ≤ 100 ms |\n\
         | File bytes per reply (text the user and the model wrote: {:.0} bytes) | {:.0} ({:.1}× the text) | {:.0} ({:.1}×), every request whole | ≤ 2× the text |\n\
         | Open a conversation of {r} replies (ms), as the app does at start | {:.1} | {:.1}, every request whole | |\n",
        ms(indexed),
        ms(every_file),
        text_per_reply,
        per_reply,
        per_reply / text_per_reply,
        old_per_reply,
        old_per_reply / text_per_reply,
        ms(open),
        ms(open_old),
        c = setup.conversations,
        r = setup.replies,
    ))
}

/// The median time of `rounds` runs of `f`.
fn median(rounds: usize, mut f: impl FnMut() -> Result<(), HistoryError>) -> Result<Duration> {
    let mut times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let started = Instant::now();
        f()?;
        times.push(started.elapsed());
    }
    times.sort();
    Ok(times[rounds / 2])
}

/// What the turns are written in: the project's own prose and code (`docs/`), cut into
/// word-sized tokens, so the files hold text that compresses as chat text does.
const CORPUS: &str = concat!(
    include_str!("../../../docs/architecture.md"),
    include_str!("../../../docs/routing.md"),
);

/// The corpus as tokens: each word with the space before it.
fn corpus_tokens() -> Vec<&'static str> {
    let mut tokens = Vec::new();
    let mut start = 0;
    for (i, c) in CORPUS.char_indices().skip(1) {
        if c == ' ' || c == '\n' {
            tokens.push(&CORPUS[start..i]);
            start = i;
        }
    }
    tokens
}

/// The `r`-th user turn of conversation `n` and the reply's events, its requests carrying
/// the window of `conversation` so far: a piece's id is the same wherever it appears, as a
/// tokenizer's is, and scores are drawn to full precision.
fn exchange(conversation: &Conversation, n: usize, r: usize) -> (String, Vec<Event>) {
    let tokens = corpus_tokens();
    let mut draw = SplitMix64::new((n * 1000 + r) as u64);
    let mut at = (draw.next_u64() % tokens.len() as u64) as usize;
    let mut next = || {
        at = (at + 1) % tokens.len();
        tokens[at]
    };
    let user: String = (0..40)
        .map(|_| next())
        .collect::<String>()
        .trim()
        .to_owned();
    let mut prompt = window(conversation);
    prompt.push_str(&format!(
        "<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"
    ));
    let mut events = Vec::with_capacity(REPLY_TOKENS + REQUESTS_PER_REPLY + 1);
    let mut reply = String::new();
    let every = REPLY_TOKENS / REQUESTS_PER_REPLY;
    for t in 0..REPLY_TOKENS {
        let text = next().to_owned();
        let id = vocabulary_id(&text);
        let routed = t % every == 0;
        if routed {
            events.push(Event::CloudRequest {
                sent: format!("{prompt}{reply}"),
                ok: true,
                ms: 180,
                prompt_tokens: ((prompt.len() + reply.len()) / 4) as u64,
                completion_tokens: 4,
                cost_usd: 0.0001,
                unused: false,
            });
        }
        reply.push_str(&text);
        events.push(Event::Token {
            text,
            id,
            source: if routed {
                TokenSource::Cloud
            } else {
                TokenSource::Edge
            },
            score: draw.next_f64() as f32,
            edge_candidate: routed.then(|| next().to_owned()),
            request_ms: routed.then_some(150 + draw.next_u64() % 100),
        });
    }
    events.push(Event::Finished {
        reason: FinishReason::Length,
        usage: Usage {
            edge_tokens: (REPLY_TOKENS - REQUESTS_PER_REPLY) as u32,
            cloud_tokens: REQUESTS_PER_REPLY as u32,
            cloud_requests: REQUESTS_PER_REPLY as u32,
            ..Usage::default()
        },
        timings: Timings::default(),
    });
    (user, events)
}

/// An id in a 151k vocabulary for `piece`, the same for the same piece.
fn vocabulary_id(piece: &str) -> i32 {
    let hash = piece.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    (hash % 151_000) as i32
}

/// The conversation's last turns as the chat template renders them, within the window;
/// when they outgrow it the oldest half leaves at once (as the app's rolling window does).
fn window(conversation: &Conversation) -> String {
    let rendered: Vec<String> = conversation
        .messages
        .iter()
        .map(|m| format!("<|im_start|>{}\n{}<|im_end|>\n", m.role.as_str(), m.content))
        .collect();
    let total: usize = rendered.iter().map(String::len).sum();
    // Whole halves leave, so the window's start moves seldom, as the app's does.
    let mut leave = 0;
    while total - leave > WINDOW_CHARS {
        leave += WINDOW_CHARS / 2;
    }
    let mut skipped = 0;
    rendered
        .into_iter()
        .skip_while(|m| {
            let skip = skipped < leave;
            skipped += m.len();
            skip
        })
        .collect()
}
