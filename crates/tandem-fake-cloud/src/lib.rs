//! A scripted, fault-injecting OpenAI-compatible "cloud" on 127.0.0.1.
//!
//! The collaborative decoder asks a cloud model for the next few tokens; its tests need a
//! cloud whose every token is known in advance and which fails on demand. [`FakeCloud`]
//! answers `/v1/completions` and `/v1/chat/completions` with tokens replayed from a
//! [`Script`], records every request, and applies queued [`Fault`]s one per request.
//! It has no `/tokenize` endpoint on purpose: the client reads that 404 as "the vocabulary
//! is not shared". A chat request that asks to continue the reply so far is continued or
//! answered afresh, as the script's [`ChatContinuation`] says, so both kinds of chat
//! endpoint can be played.
//!
//! ```
//! use tandem_fake_cloud::{FakeCloud, Fault, Script};
//!
//! let cloud = FakeCloud::start(Script::cycle(&["Hello", ",", " world"]))?;
//! cloud.push_faults([Fault::ServerError]);
//!
//! let client = reqwest::blocking::Client::new();
//! let url = format!("{}/completions", cloud.base_url());
//! let request = tandem_wire::CompletionRequest {
//!     prompt: tandem_wire::Prompt::Text("Say hi".into()),
//!     logprobs: None,
//!     generation: tandem_wire::Generation {
//!         max_tokens: Some(3),
//!         ..Default::default()
//!     },
//! };
//! assert_eq!(client.post(&url).json(&request).send()?.status(), 500);
//! let answer: tandem_wire::Completion = client.post(&url).json(&request).send()?.json()?;
//! assert_eq!(answer.choices[0].text(), "Hello, world");
//! assert_eq!(cloud.requests(), 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The `tandem-fake-cloud` binary serves the same fake for end-to-end tests of the app. The
//! real peers (test models, llama.cpp's `llama-server`) are in `tandem-test-peers`.

mod continuation;
mod fault;
mod request;
mod response;
mod routes;
mod script;
mod server;
mod state;

pub use continuation::ChatContinuation;
pub use fault::Fault;
pub use response::FOREIGN_ID;
pub use script::{Script, ScriptToken};
pub use server::FakeCloud;
pub use state::RecordedRequest;
