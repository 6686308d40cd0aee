//! What the server shares with the test driving it: the script, the queued faults and the
//! record of requests, so a test can both steer the next answers and check what was asked.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde_json::Value;

use crate::fault::Fault;
use crate::script::Script;

/// One completion request as the fake received it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// Request path, e.g. `/v1/completions`.
    pub path: String,
    /// The body as JSON; a body that is not JSON is kept as a JSON string of its raw text.
    pub body: Value,
    /// The `Authorization` header value, if any.
    pub authorization: Option<String>,
}

/// State shared by the request handlers and the [`crate::FakeCloud`] handle.
#[derive(Debug)]
pub(crate) struct Shared {
    pub script: Script,
    // One lock for both, so the n-th recorded request is the one that took the n-th fault
    // even when requests race.
    log: Mutex<Log>,
}

#[derive(Debug, Default)]
struct Log {
    faults: VecDeque<Fault>,
    recorded: Vec<RecordedRequest>,
    /// The prompt size of the last answered request, for a script that caches prompts.
    last_prompt: usize,
}

impl Shared {
    pub fn new(script: Script) -> Shared {
        Shared {
            script,
            log: Mutex::default(),
        }
    }

    pub fn push_faults(&self, faults: impl IntoIterator<Item = Fault>) {
        self.log().faults.extend(faults);
    }

    /// Records a completion request and takes the fault meant for it; also returns the
    /// request's sequence number, from 1.
    pub fn admit(&self, request: RecordedRequest) -> (usize, Option<Fault>) {
        let mut log = self.log();
        log.recorded.push(request);
        (log.recorded.len(), log.faults.pop_front())
    }

    /// The prompt tokens of an answer's `usage` that a prompt cache held (`None` unless the
    /// script caches prompts), and this prompt remembered for the next request.
    pub fn cached_prompt(&self, prompt_tokens: usize) -> Option<usize> {
        if !self.script.caches_prompts {
            return None;
        }
        let mut log = self.log();
        let cached = log.last_prompt.min(prompt_tokens);
        log.last_prompt = prompt_tokens;
        Some(cached)
    }

    pub fn recorded(&self) -> Vec<RecordedRequest> {
        self.log().recorded.clone()
    }

    pub fn requests(&self) -> usize {
        self.log().recorded.len()
    }

    fn log(&self) -> MutexGuard<'_, Log> {
        // The log stays consistent under every lock holder, so a panic elsewhere (a failing
        // test assertion) must not hide it from later checks.
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
