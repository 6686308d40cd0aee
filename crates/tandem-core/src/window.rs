//! Long conversations: which messages the models see once a conversation outgrows the
//! context window.
//!
//! Every reply is asked with the whole conversation, so the window has to follow from the
//! messages alone, and it must not move on every turn: moving its start changes the prompt's
//! first tokens, and the edge then decodes the whole window again. So the window is found by
//! replaying the conversation turn by turn: its start moves only when a turn no longer fits,
//! and then far enough that the window is about half full, so the KV cache is rebuilt once per
//! move and the turns after it decode only what they add. The cloud is sent the same window.

use crate::message::{Message, Role};
use serde::{Deserialize, Serialize};
use std::ops::Range;

/// What happens when a conversation no longer fits the context window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContextPolicy {
    /// Replies end with `context_full`; the user starts a new conversation.
    Stop,
    /// The oldest turns leave the models' view (the system prompt stays).
    #[default]
    Rolling,
    /// The first exchange stays (it often says what the conversation is about) and the
    /// turns after it leave the view, oldest first.
    DropMiddle,
}

impl ContextPolicy {
    /// Every policy, in the order the UI offers them.
    pub const ALL: [ContextPolicy; 3] = [
        ContextPolicy::Rolling,
        ContextPolicy::DropMiddle,
        ContextPolicy::Stop,
    ];

    /// Its name in settings files and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            ContextPolicy::Stop => "stop",
            ContextPolicy::Rolling => "rolling",
            ContextPolicy::DropMiddle => "drop_middle",
        }
    }

    /// What it does, in a few words (exports and the CLI).
    pub fn describe(self) -> &'static str {
        match self {
            ContextPolicy::Stop => "stop when the window is full",
            ContextPolicy::Rolling => "the oldest turns leave the model's view",
            ContextPolicy::DropMiddle => "the first exchange stays, the middle leaves the view",
        }
    }
}

impl std::str::FromStr for ContextPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.replace('-', "_");
        ContextPolicy::ALL
            .into_iter()
            .find(|p| p.name() == wanted)
            .ok_or_else(|| format!("unknown context policy '{s}' (rolling, drop_middle or stop)"))
    }
}

/// The conversation does not fit even as small as the policy allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overflow {
    /// The policy is [`ContextPolicy::Stop`] and the conversation is too long.
    Stopped,
    /// The last message alone (with the system prompt) is longer than the window.
    MessageTooLong,
}

/// Chooses the turns the models see: all of `turns` but the returned range (empty when
/// everything fits). `costs[i]` is turn `i`'s size in tokens and `room` what all turns
/// together may take. The last turn is the message being answered and is always kept.
pub fn left_out(
    turns: &[Message],
    costs: &[usize],
    room: usize,
    policy: ContextPolicy,
) -> Result<Range<usize>, Overflow> {
    debug_assert_eq!(turns.len(), costs.len());
    let answered: Vec<usize> = (0..turns.len())
        .filter(|&i| turns[i].role == Role::User)
        .collect();
    let Some(&last) = answered.last() else {
        return Ok(0..0);
    };
    // Tokens of turns `from..to`, from running totals.
    let totals: Vec<usize> = std::iter::once(0)
        .chain(costs.iter().scan(0, |sum, cost| {
            *sum += cost;
            Some(*sum)
        }))
        .collect();
    let tokens = |from: usize, to: usize| totals[to] - totals[from];
    if tokens(0, turns.len()) <= room {
        return Ok(0..0);
    }
    if policy == ContextPolicy::Stop {
        return Err(Overflow::Stopped);
    }
    if costs[last] > room {
        return Err(Overflow::MessageTooLong);
    }
    // The kept head: the first exchange, when the policy keeps it and it leaves room to talk.
    let head = match policy {
        ContextPolicy::DropMiddle => answered.get(1).copied().unwrap_or(0),
        _ => 0,
    };
    let head = if tokens(0, head) * 2 > room || tokens(0, head) + costs[last] > room {
        0
    } else {
        head
    };
    let mut start = head;
    for &asked in answered.iter().filter(|&&i| i >= head) {
        let start_of = |at: usize| tokens(0, head) + tokens(at, asked + 1);
        if asked < start || start_of(start) <= room {
            continue;
        }
        // Move the start to the first question that leaves the window half full, or failing
        // that, to the first one that fits at all; a question too long to answer even alone
        // (it ended in `context_full` back then) is passed over.
        let candidates = answered
            .iter()
            .copied()
            .filter(|&s| s > start && s <= asked);
        let mut fitting = candidates.filter(|&s| start_of(s) <= room);
        let next_question = answered.iter().copied().find(|&s| s > asked);
        start = match fitting.clone().find(|&s| start_of(s) * 2 <= room) {
            Some(s) => s,
            None => fitting.next().or(next_question).unwrap_or(turns.len()),
        };
    }
    // The last question fits with the head (checked above), so the replay ends at or before it.
    debug_assert!(start <= last);
    Ok(head..start.min(last))
}

/// `turns` without the range left out.
pub fn visible(turns: &[Message], left_out: &Range<usize>) -> Vec<Message> {
    turns
        .iter()
        .enumerate()
        .filter(|(i, _)| !left_out.contains(i))
        .map(|(_, m)| m.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A conversation of `exchanges` questions and answers, then a last question.
    fn talk(exchanges: usize) -> Vec<Message> {
        let mut turns = Vec::new();
        for i in 0..exchanges {
            turns.push(Message::user(format!("question {i}")));
            turns.push(Message::assistant(format!("answer {i}")));
        }
        turns.push(Message::user("last question"));
        turns
    }

    fn window(turns: &[Message], each: usize, room: usize, policy: ContextPolicy) -> Range<usize> {
        left_out(turns, &vec![each; turns.len()], room, policy).unwrap()
    }

    #[test]
    fn policies_read_by_their_names_with_either_separator() {
        for policy in ContextPolicy::ALL {
            assert_eq!(policy.name().parse(), Ok(policy));
            // The name is what serde writes in settings files.
            let toml = serde_json::to_string(&policy).unwrap();
            assert_eq!(toml, format!("\"{}\"", policy.name()));
        }
        assert_eq!("drop-middle".parse(), Ok(ContextPolicy::DropMiddle));
        assert!("forget"
            .parse::<ContextPolicy>()
            .unwrap_err()
            .contains("rolling"));
    }

    #[test]
    fn a_conversation_that_fits_is_seen_whole() {
        let turns = talk(3);
        for policy in ContextPolicy::ALL {
            assert_eq!(window(&turns, 10, 70, policy), 0..0);
        }
    }

    #[test]
    fn rolling_drops_the_oldest_turns_until_the_window_is_about_half_full() {
        // 7 messages of 10 tokens, room for 6: the first overflow (at the 4th question,
        // 70 tokens) moves the start to question 2 (30 tokens, half of 60).
        let turns = talk(3);
        let out = window(&turns, 10, 60, ContextPolicy::Rolling);
        assert_eq!(out, 0..4);
        assert_eq!(visible(&turns, &out)[0].content, "question 2");
        assert_eq!(visible(&turns, &out).len(), 3);
    }

    #[test]
    fn the_window_start_stays_put_until_the_next_overflow() {
        // Room for 10 messages: each overflow leaves about 5, so the start moves at
        // the 11th message, then stays for the next two exchanges.
        let starts: Vec<usize> = (0..12)
            .map(|n| window(&talk(n), 10, 100, ContextPolicy::Rolling).end)
            .collect();
        assert_eq!(starts, [0, 0, 0, 0, 0, 6, 6, 6, 12, 12, 12, 18]);
        // Between moves the prompt only grows at its end: the cache is reused.
        for n in 5..7 {
            let before = visible(&talk(n), &window(&talk(n), 10, 100, ContextPolicy::Rolling));
            let after = visible(
                &talk(n + 1),
                &window(&talk(n + 1), 10, 100, ContextPolicy::Rolling),
            );
            assert_eq!(before[..before.len() - 1], after[..before.len() - 1]);
        }
    }

    #[test]
    fn drop_middle_keeps_the_first_exchange() {
        let turns = talk(6);
        let out = window(&turns, 10, 80, ContextPolicy::DropMiddle);
        assert_eq!(out.start, 2);
        let seen = visible(&turns, &out);
        assert_eq!(
            (seen[0].content.as_str(), seen[1].content.as_str()),
            ("question 0", "answer 0")
        );
        assert!(seen.iter().map(|_| 10).sum::<usize>() <= 80);
        assert_eq!(seen.last().unwrap().content, "last question");
    }

    #[test]
    fn a_first_exchange_too_big_to_keep_rolls_instead() {
        let turns = talk(4);
        let mut costs = vec![10; turns.len()];
        costs[1] = 60;
        let out = left_out(&turns, &costs, 80, ContextPolicy::DropMiddle).unwrap();
        assert_eq!(out.start, 0);
    }

    #[test]
    fn stop_and_a_message_longer_than_the_window_are_overflows() {
        let turns = talk(6);
        assert_eq!(
            left_out(&turns, &vec![10; turns.len()], 50, ContextPolicy::Stop),
            Err(Overflow::Stopped)
        );
        let mut costs = vec![10; turns.len()];
        *costs.last_mut().unwrap() = 51;
        assert_eq!(
            left_out(&turns, &costs, 50, ContextPolicy::Rolling),
            Err(Overflow::MessageTooLong)
        );
    }

    #[test]
    fn a_huge_old_message_is_skipped_and_the_rest_kept() {
        let turns = talk(3);
        let mut costs = vec![10; turns.len()];
        costs[2] = 500; // question 1, once answered with context_full
        let out = left_out(&turns, &costs, 60, ContextPolicy::Rolling).unwrap();
        assert_eq!(out, 0..4);
    }
}
